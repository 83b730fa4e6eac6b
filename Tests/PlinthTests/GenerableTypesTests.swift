import Foundation
import FoundationModels
import Testing

// Types in the shape of Apple's documentation and WWDC25 sessions: a travel itinerary with
// nested, recursive and all primitive property types, and a game character with guides and an
// enum with associated values.

@Generable(description: "A plan for a trip")
struct Itinerary: Equatable {
    @Guide(description: "An exciting name for the trip")
    var title: String
    var destinationName: String
    @Guide(description: "A short description of the trip", .pattern(/[A-Z].*/))
    var description: String
    @Guide(.count(3))
    var days: [DayPlan]
    var budget: Decimal
    var rating: Double
    var temperature: Float
    var isFamilyFriendly: Bool
    var travelers: Int
    var notes: String?
    var alternatives: [Itinerary]?
}

@Generable
struct DayPlan: Equatable {
    var title: String
    @Guide(.minimumCount(1), .maximumCount(3))
    var activities: [Activity]
}

@Generable
struct Activity: Equatable {
    var type: Kind
    var title: String

    @Generable
    enum Kind: Equatable {
        case sightseeing, foodAndDining, shopping
    }
}

@Generable(description: "A character in a role-playing game")
struct GameCharacter: Equatable {
    @Guide(description: "The character's name", .constant("Ser Plinth"))
    var name: String
    @Guide(.range(1...100))
    var level: Int
    @Guide(.minimum(0.0), .maximum(1.0))
    var luck: Double
    @Guide(description: "Exactly two abilities", .count(2), .element(.anyOf(["fire", "ice", "wind"])))
    var abilities: [String]
    @Guide(.count(1...3), .element(.range(1...6)))
    var dice: [Int]
    var action: Action
    var team: Team
}

@Generable
enum Action: Equatable {
    case idle
    case attack(target: String, damage: Int)
    case move(Int, Int)
    case say(String?)
}

@Generable
enum Team: Equatable {
    case red, blue
}

@Generable
struct PhoneContact {
    @Guide(description: "A US phone number", /\(\d{3}\) \d{3}-\d{4}/)
    var phone: String
    @Guide(Regex { "ID-"; OneOrMore(.digit) })
    var id: String?
}

@Generable(representNilExplicitlyInGeneratedContent: true)
struct ExplicitNil {
    var value: Int?
}

@Generable(name: "Renamed", description: "A type with another schema name")
struct NamedType {
    var flag: Bool
}

@Generable
public struct PublicType: Sendable {
    public var text: String
}

@Suite struct GenerableTypesTests {
    static let itineraryJSON = """
        {"title": "Tokyo Lights", "destinationName": "Tokyo", "description": "Neon and noodles",
         "days": [{"title": "Day 1", "activities": [{"type": "sightseeing", "title": "Shibuya"}]},
                  {"title": "Day 2", "activities": [{"type": "foodAndDining", "title": "Ramen"}]},
                  {"title": "Day 3", "activities": [{"type": "shopping", "title": "Ginza"}]}],
         "budget": 1250.5, "rating": 4.5, "temperature": 21.5, "isFamilyFriendly": true, "travelers": 2,
         "alternatives": [{"title": "Kyoto", "destinationName": "Kyoto", "description": "Temples", "days": [],
                           "budget": 900, "rating": 4, "temperature": 18, "isFamilyFriendly": false, "travelers": 1}]}
        """

    @Test func itineraryDecodesEveryPropertyType() throws {
        let itinerary = try Itinerary(GeneratedContent(json: Self.itineraryJSON))
        #expect(itinerary.title == "Tokyo Lights")
        #expect(itinerary.days.count == 3)
        #expect(itinerary.days[1].activities[0].type == .foodAndDining)
        #expect(itinerary.budget == Decimal(string: "1250.5"))
        #expect(itinerary.temperature == 21.5)
        #expect(itinerary.isFamilyFriendly)
        #expect(itinerary.notes == nil)
        #expect(itinerary.alternatives?.first?.destinationName == "Kyoto")
        // generatedContent leaves nil optionals out and keeps the declaration order.
        let again = try Itinerary(itinerary.generatedContent)
        #expect(again == itinerary)
        #expect(itinerary.generatedContent.jsonString.hasPrefix(#"{"title":"Tokyo Lights","destinationName":"Tokyo""#))
        #expect(!itinerary.generatedContent.jsonString.contains("notes"))
    }

    @Test func itinerarySchemaHasEveryGuide() throws {
        let json = try schemaJSON(Itinerary.generationSchema)
        let properties = json["properties"] as! [String: [String: Any]]
        #expect(properties["days"]?["minItems"] as? Int == 3)
        #expect(properties["days"]?["maxItems"] as? Int == 3)
        #expect(properties["description"]?["pattern"] as? String == "[A-Z].*")
        #expect(properties["budget"]?["type"] as? String == "number")
        #expect(properties["travelers"]?["type"] as? String == "integer")
        #expect(properties["isFamilyFriendly"]?["type"] as? String == "boolean")
        #expect((properties["alternatives"]?["items"] as? [String: Any])?["$ref"] as? String == "#/$defs/Itinerary")
        let defs = json["$defs"] as! [String: [String: Any]]
        // A nested type is named with the types it is in (two nested `Kind`s would be two schemas).
        #expect(Set(defs.keys) == ["Itinerary", "DayPlan", "Activity", "Activity.Kind"])
        let dayPlan = defs["DayPlan"]!["properties"] as! [String: [String: Any]]
        #expect(dayPlan["activities"]?["minItems"] as? Int == 1)
        #expect(dayPlan["activities"]?["maxItems"] as? Int == 3)
        #expect(json["required"] as? [String] == ["title", "destinationName", "description", "days", "budget", "rating",
                                                   "temperature", "isFamilyFriendly", "travelers"])
    }

    @Test func gameCharacterGuidesAndAssociatedValues() throws {
        let json = try schemaJSON(GameCharacter.generationSchema)
        let properties = json["properties"] as! [String: [String: Any]]
        #expect(properties["name"]?["enum"] as? [String] == ["Ser Plinth"])
        #expect(properties["level"]?["minimum"] as? Int == 1)
        #expect(properties["level"]?["maximum"] as? Int == 100)
        #expect(properties["luck"]?["maximum"] as? Double == 1)
        #expect(properties["abilities"]?["minItems"] as? Int == 2)
        #expect((properties["abilities"]?["items"] as? [String: Any])?["enum"] as? [String] == ["fire", "ice", "wind"])
        #expect(properties["dice"]?["minItems"] as? Int == 1)
        #expect(properties["dice"]?["maxItems"] as? Int == 3)
        #expect((properties["dice"]?["items"] as? [String: Any])?["maximum"] as? Int == 6)
        let action = (json["$defs"] as! [String: [String: Any]])["Action"]!
        let choices = action["anyOf"] as! [[String: Any]]
        #expect(choices.count == 4)
        #expect(choices[0]["enum"] as? [String] == ["idle"])

        let content = try GeneratedContent(json: """
            {"name": "Ser Plinth", "level": 7, "luck": 0.25, "abilities": ["fire", "ice"], "dice": [3, 6],
             "action": {"attack": {"target": "orc", "damage": 12}}, "team": "blue"}
            """)
        let character = try GameCharacter(content)
        #expect(character.action == .attack(target: "orc", damage: 12))
        #expect(character.team == .blue)
        for action in [Action.idle, .attack(target: "x", damage: 1), .move(3, -4), .say("hi"), .say(nil)] {
            #expect(try Action(action.generatedContent) == action)
        }
        #expect(Action.move(1, 2).generatedContent.jsonString == #"{"move":{"_0":1,"_1":2}}"#)
        #expect(Action.idle.generatedContent.jsonString == #""idle""#)
        #expect(throws: LanguageModelSession.GenerationError.self) { try Action(GeneratedContent("jump")) }
        #expect(throws: LanguageModelSession.GenerationError.self) { try Team(GeneratedContent("green")) }
    }

    @Test func regexGuides() throws {
        let json = try schemaJSON(PhoneContact.generationSchema)
        let properties = json["properties"] as! [String: [String: Any]]
        // The pattern is Swift's canonical form of the literal (it escapes '-').
        #expect(properties["phone"]?["pattern"] as? String == #"\(\d{3}\) \d{3}\-\d{4}"#)
        #expect(properties["phone"]?["description"] as? String == "A US phone number")
        let contact = try PhoneContact(GeneratedContent(json: #"{"phone": "(555) 123-4567"}"#))
        #expect(contact.phone == "(555) 123-4567")
        #expect(contact.id == nil)
    }

    @Test func partiallyGeneratedHasOptionalProperties() throws {
        let partial = try Itinerary.PartiallyGenerated(GeneratedContent(json: """
            {"title": "Tokyo", "days": [{"title": "Day 1", "activities": [{"type": "sight
            """))
        #expect(partial.title == "Tokyo")
        #expect(partial.destinationName == nil)
        #expect(partial.days?.count == 1)
        #expect(partial.days?.first?.title == "Day 1")
        #expect(partial.days?.first?.activities?.first?.type == nil)

        let full = try Itinerary(GeneratedContent(json: Self.itineraryJSON))
        let asPartial = full.asPartiallyGenerated()
        #expect(asPartial.days?.count == 3)
        #expect(asPartial.alternatives?.first?.title == "Kyoto")
    }

    @Test func explicitNilAndNamedSchemas() throws {
        #expect(ExplicitNil(value: nil).generatedContent.jsonString == #"{"value":null}"#)
        #expect(try ExplicitNil(GeneratedContent(json: #"{"value": null}"#)).value == nil)
        #expect(NamedType.generationSchema.name == "Renamed")
        let p = PublicType(text: "x")
        #expect(try PublicType(p.generatedContent).text == "x")
        let partial: PublicType.PartiallyGenerated = try .init(GeneratedContent(json: "{}"))
        #expect(partial.text == nil)
    }

    @Test func standardConformances() throws {
        #expect(try [Int]([1, 2].generatedContent) == [1, 2])
        #expect(try Bool(GeneratedContent(json: "true")))
        #expect(try String(GeneratedContent(json: #""s""#)) == "s")
        #expect(throws: LanguageModelSession.GenerationError.self) { try Never(GeneratedContent(kind: .null)) }
        #expect(Optional<Int>.none.generatedContent.kind == .null)
        let partialArray: [Int].PartiallyGenerated = try .init(GeneratedContent(json: "[1, 2, 3"))
        #expect(partialArray == [1, 2, 3])
    }
}

import RegexBuilder

@Generable(description: "Search suggestions")
struct SearchSuggestions {
    @Guide(description: "A list of suggested search terms", .count(4))
    var searchTerms: [String]
}
