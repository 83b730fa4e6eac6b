import Foundation
import FoundationModels
@testable import Plinth
import PlinthGrammar
import PlinthJSON
import Testing

@Generable
struct StarCount {
    var stars: Int
    @Guide(.range(1...5))
    var rating: Int
    @Guide(.minimum(0))
    var visible: Int
    @Guide(.pattern(/[A-Z]{2}/))
    var code: String
}

/// Two nested types with one name (an audit found the second took the first's definition).
enum NestingA { @Generable struct Item { var title: String } }
enum NestingB { @Generable struct Item { var count: Int; var flag: Bool } }
@Generable struct HoldsBothItems { var a: NestingA.Item; var b: NestingB.Item }
private enum PrivateA { @Generable struct Item { var title: String } }
private enum PrivateB { @Generable struct Item { var count: Int } }
@Generable private struct HoldsPrivateItems { var a: PrivateA.Item; var b: PrivateB.Item }

struct DecodingSchemaTests {
    @Test func nestedTypesWithOneNameAreTwoSchemas() throws {
        let schema = DecodingSchema.jsonSchema(for: HoldsBothItems.generationSchema)
        #expect(schema["properties"]?["a"]?["$ref"] == .string("#/$defs/NestingA.Item"))
        #expect(schema["properties"]?["b"]?["$ref"] == .string("#/$defs/NestingB.Item"))
        #expect(schema["$defs"]?["NestingA.Item"]?["properties"]?["title"] != nil)
        #expect(schema["$defs"]?["NestingB.Item"]?["properties"]?["count"] != nil)
        // Private parents too (their reflected names carry a context in parentheses).
        let privately = DecodingSchema.jsonSchema(for: HoldsPrivateItems.generationSchema)
        #expect(privately["$defs"]?["PrivateA.Item"]?["properties"]?["title"] != nil)
        #expect(privately["$defs"]?["PrivateB.Item"]?["properties"]?["count"] != nil)
        // A top-level type keeps its plain name.
        #expect(DecodingSchema.jsonSchema(for: StarCount.generationSchema)["title"] == .string("StarCount"))
    }

    @Test func openIntegerBoundsBecomeTheRangeThatDecodesExactly() throws {
        let schema = DecodingSchema.jsonSchema(for: StarCount.generationSchema)
        let properties = try #require(schema["properties"])
        let largest = JSONValue.integer(9_007_199_254_740_991)
        #expect(properties["stars"]?["minimum"] == .integer(-9_007_199_254_740_991))
        #expect(properties["stars"]?["maximum"] == largest)
        // A guide's bounds stay; only a missing one is added.
        #expect(properties["rating"]?["minimum"] == .integer(1))
        #expect(properties["rating"]?["maximum"] == .integer(5))
        #expect(properties["visible"]?["minimum"] == .integer(0))
        #expect(properties["visible"]?["maximum"] == largest)
        #expect(properties["code"]?["pattern"] == .string("^(?:[A-Z]{2})$"))
        // The largest bound survives the trip through Double and decodes into Int.
        #expect(try Int(GeneratedContent(json: largest.compactText)) == (1 << 53) - 1)
    }

    /// A guide's regex matches the whole value: one anchored at both ends stays as written,
    /// unless a top-level alternation leaves each branch anchored at one end only.
    @Test func guidePatternsMatchWholeValues() throws {
        #expect(DecodingSchema.anchored("^ab$") == "^ab$")
        #expect(DecodingSchema.anchored("^(a|b)$") == "^(a|b)$")
        #expect(DecodingSchema.anchored("^[|]$") == "^[|]$")
        #expect(DecodingSchema.anchored("^a\\|b$") == "^a\\|b$")
        #expect(DecodingSchema.anchored("^ab|cd$") == "^(?:ab|cd)$")
        #expect(DecodingSchema.anchored("^a(b|c)$|^d\\$") == "^(?:a(b|c)|d\\$)$")
        // A backslash escaped before the anchor: the `$` is still an anchor.
        #expect(DecodingSchema.anchored("^[a-z]+\\\\$") == "^[a-z]+\\\\$")
        #expect(DecodingSchema.anchored("^a$|^b\\\\$") == "^(?:a|b\\\\)$")
        #expect(DecodingSchema.anchored("ab|cd") == "^(?:ab|cd)$")
        let bytes = try TokenVocabulary(tokens: (0..<128).map { [UInt8($0)] } + [Array("<eos>".utf8)], endOfSequence: [128])
        let pattern = JSONWriter.quoted(DecodingSchema.anchored("^ab|cd$"))
        let grammar = try GrammarCompiler(vocabulary: bytes).compile(jsonSchema: #"{"type":"string","pattern":"# + pattern + "}")
        func accepts(_ text: String) -> Bool {
            let m = grammar.makeMatcher()
            return text.utf8.allSatisfy { m.accept(Int32($0)) } && m.isComplete
        }
        #expect(accepts(#""ab""#) && accepts(#""cd""#))
        #expect(!accepts(#""abx""#) && !accepts(#""xcd""#))
    }

    /// Under random sampling SmolLM2 once wrote 36- and 27-digit integers for unguided `Int`s
    /// (a rectangle's height, a delay in minutes), which can't decode into `Int`.
    @Test(.enabled(if: LocalTestModels.hasSmolLM2, LocalTestModels.smolLM2Missing))
    func unguidedIntegersDecode() async throws {
        let model = LocalLanguageModel(name: LocalTestModels.smolLM2)
        for (type, seed) in [("CorpusCanvas", UInt64(5)), ("CorpusFlight", 8)] {
            let corpusCase = try #require(GuidedCorpus.named(type))
            let (raw, _, violations) = try await corpusCase.generate(model, GuidedCorpus.options(seed: seed))
            #expect(violations.isEmpty, "\(raw)")
        }
    }
}
