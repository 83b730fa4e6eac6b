import Foundation
import FoundationModels
@testable import Plinth
import Testing

// A corpus of @Generable types for guided generation with random sampling: nested structures,
// plain enums and enums with associated values, arrays with exact and ranged counts, element,
// regex, range and anyOf guides, optionals. Every string is bounded by a guide, so that every
// valid output fits the response token limit.

@Generable
struct CorpusWeather {
    @Guide(.anyOf(["sunny", "rainy", "cloudy", "snowy", "foggy"]))
    var sky: String
    @Guide(.range(-30...45))
    var celsius: Int
    @Guide(.range(0.0...100.0))
    var humidity: Double
    var windy: Bool
}

@Generable
enum CorpusColor {
    case red, green, blue, yellow, purple
}

@Generable
enum CorpusPriority {
    case low, medium, high, urgent
}

@Generable
struct CorpusTodo {
    @Guide(description: "A short title", /[A-Z][a-z]{2,11}( [a-z]{2,9}){0,3}/)
    var title: String
    var priority: CorpusPriority
    @Guide(.range(1...40))
    var hours: Int
    var done: Bool
}

@Generable
struct CorpusTodoList {
    @Guide(.pattern(/[A-Z][a-z]{1,9}/))
    var owner: String
    @Guide(.count(2...3))
    var tasks: [CorpusTodo]
}

@Generable
enum CorpusShape {
    case point
    case circle(radius: Double)
    case rectangle(width: Int, height: Int)
}

@Generable
struct CorpusCanvas {
    @Guide(.count(2))
    var shapes: [CorpusShape]
    var background: CorpusColor
}

@Generable
struct CorpusCard {
    @Guide(.pattern(/[0-9]{4}/))
    var lastDigits: String
    @Guide(.range(1...12))
    var expiryMonth: Int
}

@Generable
enum CorpusPayment {
    case cash
    case card(CorpusCard)
    case voucher(code: Int, amount: Int)
}

@Generable
struct CorpusInventoryItem {
    @Guide(.pattern(/[A-Z]{3}-[0-9]{4}/))
    var sku: String
    @Guide(.minimum(0), .maximum(500))
    var quantity: Int
    @Guide(.minimum(0.5), .maximum(999.99))
    var price: Double
}

@Generable
struct CorpusInventory {
    @Guide(.anyOf(["north", "south", "east", "west"]))
    var warehouse: String
    @Guide(.minimumCount(1), .maximumCount(3))
    var items: [CorpusInventoryItem]
}

@Generable
struct CorpusContact {
    @Guide(/[A-Z][a-z]{1,9} [A-Z][a-z]{1,11}/)
    var name: String
    @Guide(description: "A US phone number", /\(\d{3}\) \d{3}-\d{4}/)
    var phone: String
    @Guide(/[a-z]{3,8}@[a-z]{3,8}\.(com|org|net)/)
    var email: String
    @Guide(/[A-Z][a-z]{1,7}/)
    var nickname: String?
}

@Generable
struct CorpusIngredient {
    @Guide(.anyOf(["flour", "sugar", "butter", "eggs", "milk", "salt", "rice", "tomato"]))
    var name: String
    @Guide(.range(1...1000))
    var grams: Int
}

@Generable
struct CorpusRecipe {
    @Guide(/[A-Z][a-z]{2,10}( [a-z]{2,10}){0,2}/)
    var name: String
    @Guide(.range(1...12))
    var servings: Int
    @Guide(.count(2...4))
    var ingredients: [CorpusIngredient]
    var vegetarian: Bool
}

@Generable
struct CorpusDice {
    @Guide(.count(5), .element(.range(1...6)))
    var rolls: [Int]
    var lucky: Bool
}

@Generable
struct CorpusVector {
    @Guide(.range(-1.0...1.0))
    var x: Double
    @Guide(.range(-1.0...1.0))
    var y: Double
    @Guide(.range(-1.0...1.0))
    var z: Double
}

@Generable
enum CorpusFlightStatus {
    case onTime
    case delayed(minutes: Int)
    case cancelled
}

@Generable
struct CorpusFlight {
    @Guide(/[A-Z]{2}[0-9]{3,4}/)
    var code: String
    @Guide(.anyOf(["JFK", "LHR", "CDG", "NRT", "SFO"]))
    var origin: String
    @Guide(.anyOf(["JFK", "LHR", "CDG", "NRT", "SFO"]))
    var destination: String
    @Guide(/[1-9][0-9]?[A-F]/)
    var seat: String
    var status: CorpusFlightStatus
}

@Generable
struct CorpusReview {
    @Guide(.range(1...5))
    var stars: Int
    @Guide(.anyOf(["love it", "fine", "meh", "avoid"]))
    var verdict: String
    var recommend: Bool
    @Guide(.minimum(0.0), .maximum(10.0))
    var score: Double
}

@Generable
struct CorpusRow {
    @Guide(.count(3), .element(.range(0...9)))
    var values: [Int]
}

@Generable
struct CorpusMatrix {
    @Guide(.count(2))
    var rows: [CorpusRow]
}

@Generable
struct CorpusVenue {
    @Guide(.anyOf(["Paris", "Berlin", "Tokyo", "Lima"]))
    var city: String
    @Guide(.range(1...99))
    var room: Int
}

@Generable
enum CorpusLocation {
    case online
    case venue(CorpusVenue)
}

@Generable
struct CorpusEvent {
    @Guide(/[A-Z][a-z]{2,10}( [A-Za-z]{2,10}){0,2}/)
    var title: String
    @Guide(description: "An ISO date", /20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])/)
    var date: String
    @Guide(.count(1...3), .element(.anyOf(["Ana", "Ben", "Chen", "Dara", "Eli"])))
    var attendees: [String]
    var location: CorpusLocation?
}

@Generable
struct CorpusStats {
    @Guide(.range(1...20))
    var strength: Int
    @Guide(.range(1...20))
    var agility: Int
    @Guide(.range(0.0...1.0))
    var luck: Double
}

@Generable
enum CorpusHeroClass {
    case warrior, mage, rogue
}

@Generable
struct CorpusHero {
    @Guide(/[A-Z][a-z]{2,9}/)
    var name: String
    @Guide(.range(1...100))
    var level: Int
    var heroClass: CorpusHeroClass
    var stats: CorpusStats
    @Guide(.count(2), .element(.anyOf(["sword", "staff", "bow", "potion", "shield"])))
    var inventory: [String]
}

@Generable
struct CorpusSettings {
    @Guide(.range(0...100))
    var volume: Int
    var theme: CorpusColor
    var notifications: Bool
    @Guide(.anyOf(["en", "fr", "de", "ja"]))
    var language: String
    @Guide(.range(0.5...2.0))
    var fontScale: Double
}

@Generable
struct CorpusPalette {
    @Guide(.count(3), .element(.pattern(/#[0-9a-f]{6}/)))
    var colors: [String]
    @Guide(.minimumCount(1), .maximumCount(2))
    var accents: [CorpusColor]
}

@Generable
struct CorpusOrder {
    @Guide(/ORD-[0-9]{5}/)
    var id: String
    var payment: CorpusPayment
    @Guide(.count(1...2))
    var items: [CorpusInventoryItem]
    var express: Bool
}

/// One type of the corpus: a prompt, and the guides its value must satisfy.
struct GuidedCase: Sendable {
    let type: String
    /// Generates one value: its JSON, the tokens it took, and the guides it breaks (none when
    /// it satisfies them all).
    let generate: @Sendable (LocalLanguageModel, GenerationOptions) async throws -> (raw: String, tokens: Int, violations: [String])

    init<Value: Generable>(_ type: Value.Type, prompt: String, guides: @escaping @Sendable (Value) -> [String?]) {
        self.type = "\(Value.self)"
        generate = { model, options in
            let session = LanguageModelSession(model: model)
            let response = try await session.respond(to: prompt, generating: Value.self, options: options)
            let raw = response.rawContent.jsonString
            // The raw JSON text decodes again, into the same value.
            let reparsed = try Value(GeneratedContent(json: raw))
            var violations = guides(response.content).compactMap { $0 }
            if reparsed.generatedContent.jsonString != response.content.generatedContent.jsonString {
                violations.append("the raw JSON decodes into another value")
            }
            return (raw, response.usage.output.totalTokenCount, violations)
        }
    }
}

/// A guide check: nil when `holds`, else what broke.
private func check(_ holds: Bool, _ what: @autoclosure () -> String) -> String? {
    holds ? nil : what()
}

private func matches<Output>(_ text: String, _ regex: Regex<Output>) -> Bool {
    text.wholeMatch(of: regex) != nil
}

enum GuidedCorpus {
    static func todo(_ t: CorpusTodo) -> [String?] {
        [check(matches(t.title, /[A-Z][a-z]{2,11}( [a-z]{2,9}){0,3}/), "title \(t.title)"),
         check((1...40).contains(t.hours), "hours \(t.hours)")]
    }

    static func item(_ i: CorpusInventoryItem) -> [String?] {
        [check(matches(i.sku, /[A-Z]{3}-[0-9]{4}/), "sku \(i.sku)"),
         check((0...500).contains(i.quantity), "quantity \(i.quantity)"),
         check((0.5...999.99).contains(i.price), "price \(i.price)")]
    }

    static let cases: [GuidedCase] = [
        GuidedCase(CorpusWeather.self, prompt: "Describe the weather in Oslo today.") { w in
            [check(["sunny", "rainy", "cloudy", "snowy", "foggy"].contains(w.sky), "sky \(w.sky)"),
             check((-30...45).contains(w.celsius), "celsius \(w.celsius)"),
             check((0...100).contains(w.humidity), "humidity \(w.humidity)")]
        },
        GuidedCase(CorpusColor.self, prompt: "What colour is a ripe banana?") { _ in [] },
        GuidedCase(CorpusPriority.self, prompt: "How urgent is fixing a typo in a footnote?") { _ in [] },
        GuidedCase(CorpusTodo.self, prompt: "Add a task to water the plants.", guides: todo),
        GuidedCase(CorpusTodoList.self, prompt: "Make Maria's to-do list for moving house.") { l in
            [check(matches(l.owner, /[A-Z][a-z]{1,9}/), "owner \(l.owner)"),
             check((2...3).contains(l.tasks.count), "\(l.tasks.count) tasks")] + l.tasks.flatMap(todo)
        },
        GuidedCase(CorpusShape.self, prompt: "Describe the shape of a dinner plate.") { _ in [] },
        GuidedCase(CorpusCanvas.self, prompt: "Draw a simple logo with two shapes.") { c in
            [check(c.shapes.count == 2, "\(c.shapes.count) shapes")]
        },
        GuidedCase(CorpusPayment.self, prompt: "How did the customer pay for the groceries?") { p in
            guard case .card(let card) = p else { return [] }
            return [check(matches(card.lastDigits, /[0-9]{4}/), "lastDigits \(card.lastDigits)"),
                    check((1...12).contains(card.expiryMonth), "expiryMonth \(card.expiryMonth)")]
        },
        GuidedCase(CorpusInventory.self, prompt: "List what is in stock at the warehouse.") { inv in
            [check(["north", "south", "east", "west"].contains(inv.warehouse), "warehouse \(inv.warehouse)"),
             check((1...3).contains(inv.items.count), "\(inv.items.count) items")] + inv.items.flatMap(item)
        },
        GuidedCase(CorpusContact.self, prompt: "Create a contact card for a new colleague.") { c in
            [check(matches(c.name, /[A-Z][a-z]{1,9} [A-Z][a-z]{1,11}/), "name \(c.name)"),
             check(matches(c.phone, /\(\d{3}\) \d{3}-\d{4}/), "phone \(c.phone)"),
             check(matches(c.email, /[a-z]{3,8}@[a-z]{3,8}\.(com|org|net)/), "email \(c.email)"),
             check(c.nickname.map { matches($0, /[A-Z][a-z]{1,7}/) } ?? true, "nickname \(c.nickname ?? "")")]
        },
        GuidedCase(CorpusRecipe.self, prompt: "Give me a recipe for pancakes.") { r in
            [check(matches(r.name, /[A-Z][a-z]{2,10}( [a-z]{2,10}){0,2}/), "name \(r.name)"),
             check((1...12).contains(r.servings), "servings \(r.servings)"),
             check((2...4).contains(r.ingredients.count), "\(r.ingredients.count) ingredients")]
                + r.ingredients.flatMap { i in
                    [check(["flour", "sugar", "butter", "eggs", "milk", "salt", "rice", "tomato"].contains(i.name), "ingredient \(i.name)"),
                     check((1...1000).contains(i.grams), "grams \(i.grams)")]
                }
        },
        GuidedCase(CorpusDice.self, prompt: "Roll five dice.") { d in
            [check(d.rolls.count == 5, "\(d.rolls.count) rolls"),
             check(d.rolls.allSatisfy { (1...6).contains($0) }, "rolls \(d.rolls)")]
        },
        GuidedCase(CorpusVector.self, prompt: "Give a unit direction pointing up and to the left.") { v in
            [check((-1...1).contains(v.x), "x \(v.x)"), check((-1...1).contains(v.y), "y \(v.y)"),
             check((-1...1).contains(v.z), "z \(v.z)")]
        },
        GuidedCase(CorpusFlightStatus.self, prompt: "Is the evening flight to Rome on time?") { _ in [] },
        GuidedCase(CorpusFlight.self, prompt: "Book me a flight from New York to London.") { f in
            let airports = ["JFK", "LHR", "CDG", "NRT", "SFO"]
            return [check(matches(f.code, /[A-Z]{2}[0-9]{3,4}/), "code \(f.code)"),
                    check(airports.contains(f.origin), "origin \(f.origin)"),
                    check(airports.contains(f.destination), "destination \(f.destination)"),
                    check(matches(f.seat, /[1-9][0-9]?[A-F]/), "seat \(f.seat)")]
        },
        GuidedCase(CorpusReview.self, prompt: "Review the new noise-cancelling headphones.") { r in
            [check((1...5).contains(r.stars), "stars \(r.stars)"),
             check(["love it", "fine", "meh", "avoid"].contains(r.verdict), "verdict \(r.verdict)"),
             check((0...10).contains(r.score), "score \(r.score)")]
        },
        GuidedCase(CorpusMatrix.self, prompt: "Write a small matrix of single digits.") { m in
            [check(m.rows.count == 2, "\(m.rows.count) rows")]
                + m.rows.map { check($0.values.count == 3 && $0.values.allSatisfy { (0...9).contains($0) }, "row \($0.values)") }
        },
        GuidedCase(CorpusEvent.self, prompt: "Plan a team meeting for next month.") { e in
            var found = [check(matches(e.title, /[A-Z][a-z]{2,10}( [A-Za-z]{2,10}){0,2}/), "title \(e.title)"),
                         check(matches(e.date, /20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])/), "date \(e.date)"),
                         check((1...3).contains(e.attendees.count), "\(e.attendees.count) attendees"),
                         check(e.attendees.allSatisfy { ["Ana", "Ben", "Chen", "Dara", "Eli"].contains($0) }, "attendees \(e.attendees)")]
            if case .venue(let venue)? = e.location {
                found += [check(["Paris", "Berlin", "Tokyo", "Lima"].contains(venue.city), "city \(venue.city)"),
                          check((1...99).contains(venue.room), "room \(venue.room)")]
            }
            return found
        },
        GuidedCase(CorpusHero.self, prompt: "Create a hero for a fantasy game.") { h in
            [check(matches(h.name, /[A-Z][a-z]{2,9}/), "name \(h.name)"),
             check((1...100).contains(h.level), "level \(h.level)"),
             check((1...20).contains(h.stats.strength), "strength \(h.stats.strength)"),
             check((1...20).contains(h.stats.agility), "agility \(h.stats.agility)"),
             check((0...1).contains(h.stats.luck), "luck \(h.stats.luck)"),
             check(h.inventory.count == 2, "\(h.inventory.count) inventory items"),
             check(h.inventory.allSatisfy { ["sword", "staff", "bow", "potion", "shield"].contains($0) }, "inventory \(h.inventory)")]
        },
        GuidedCase(CorpusSettings.self, prompt: "Set up the app for a reader with poor eyesight.") { s in
            [check((0...100).contains(s.volume), "volume \(s.volume)"),
             check(["en", "fr", "de", "ja"].contains(s.language), "language \(s.language)"),
             check((0.5...2.0).contains(s.fontScale), "fontScale \(s.fontScale)")]
        },
        GuidedCase(CorpusPalette.self, prompt: "Pick a calm colour palette for a website.") { p in
            [check(p.colors.count == 3, "\(p.colors.count) colors"),
             check(p.colors.allSatisfy { matches($0, /#[0-9a-f]{6}/) }, "colors \(p.colors)"),
             check((1...2).contains(p.accents.count), "\(p.accents.count) accents")]
        },
        GuidedCase(CorpusOrder.self, prompt: "Record an order of two notebooks paid by card.") { o in
            var found = [check(matches(o.id, /ORD-[0-9]{5}/), "id \(o.id)"),
                         check((1...2).contains(o.items.count), "\(o.items.count) items")] + o.items.flatMap(item)
            if case .card(let card) = o.payment {
                found += [check(matches(card.lastDigits, /[0-9]{4}/), "lastDigits \(card.lastDigits)"),
                          check((1...12).contains(card.expiryMonth), "expiryMonth \(card.expiryMonth)")]
            }
            return found
        },
    ]

    /// Random sampling, with room for every output the guides allow (the longest takes about
    /// 100 tokens).
    static func options(seed: UInt64) -> GenerationOptions {
        GenerationOptions(sampling: .random(top: 40, seed: seed), temperature: 1.0, maximumResponseTokens: 256)
    }

    static func named(_ type: String) -> GuidedCase? {
        cases.first { $0.type == type }
    }

    /// Runs every case with `seeds` random seeds.
    static func run(model: LocalLanguageModel, seeds: ClosedRange<UInt64>) async -> (runs: Int, tokens: Int, longest: Int, failures: [String]) {
        var runs = 0
        var tokens = 0
        var longest = 0
        var failures: [String] = []
        // Seeds inside types: runs of one type share their prompt, which stays in the KV cache.
        for corpusCase in cases {
            for seed in seeds {
                runs += 1
                do {
                    let (raw, count, violations) = try await corpusCase.generate(model, options(seed: seed))
                    tokens += count
                    longest = max(longest, count)
                    if !violations.isEmpty {
                        failures.append("\(corpusCase.type) seed \(seed): \(violations) in \(raw)")
                    }
                } catch {
                    failures.append("\(corpusCase.type) seed \(seed): \(error)")
                }
            }
        }
        return (runs, tokens, longest, failures)
    }

    /// Runs the corpus with ten seeds a type and expects every generation to decode and
    /// satisfy its guides.
    static func expectEveryGenerationPasses(model name: String) async {
        let start = ContinuousClock.now
        let (runs, tokens, longest, failures) = await run(model: LocalLanguageModel(name: name), seeds: 1...10)
        print("\(name) corpus: \(runs - failures.count)/\(runs) generations decoded and satisfied their guides; "
              + "\(tokens) tokens, the longest \(longest), in \(ContinuousClock.now - start)")
        #expect(runs >= 200)
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }
}

@Suite(.serialized)
struct GuidedGenerationCorpusTests {
    @Test func corpusHasTwentyTypes() {
        #expect(Set(GuidedCorpus.cases.map(\.type)).count >= 20)
    }

    @Test(.enabled(if: LocalTestModels.hasSmolLM2, LocalTestModels.smolLM2Missing))
    func everySmolLM2GenerationDecodesAndSatisfiesItsGuides() async {
        await GuidedCorpus.expectEveryGenerationPasses(model: LocalTestModels.smolLM2)
    }

    @Test(.enabled(if: LocalTestModels.hasQwen, LocalTestModels.qwenMissing))
    func everyQwenGenerationDecodesAndSatisfiesItsGuides() async {
        await GuidedCorpus.expectEveryGenerationPasses(model: LocalTestModels.qwen)
    }

    /// Gemma's 262,144-token SentencePiece vocabulary is the largest the decoder masks.
    @Test(.enabled(if: LocalTestModels.hasGemma, LocalTestModels.gemmaMissing))
    func everyGemmaGenerationDecodesAndSatisfiesItsGuides() async {
        await GuidedCorpus.expectEveryGenerationPasses(model: LocalTestModels.gemma)
    }
}
