import Foundation
import FoundationModels
import Testing

@Suite struct GeneratedContentTests {
    @Test func completeJSONRoundTripsWithPropertyOrder() throws {
        let content = try GeneratedContent(json: #"{"zeta": 1, "alpha": [true, null, "x\n\"y\""], "mid": {"n": -2.5e3}}"#)
        #expect(content.isComplete)
        guard case .structure(let properties, let keys) = content.kind else {
            Issue.record("expected an object")
            return
        }
        #expect(keys == ["zeta", "alpha", "mid"])
        #expect(properties["zeta"]?.kind == .number(1))
        #expect(content.jsonString == #"{"zeta":1,"alpha":[true,null,"x\n\"y\""],"mid":{"n":-2500}}"#)
        #expect(try GeneratedContent(json: content.jsonString) == content)
    }

    /// A number a double can't hold keeps its text: the value the decoder checked against the
    /// schema is the one written, and an Int or a Decimal reads it exactly.
    @Test func numbersPastADoublesPrecisionKeepTheirText() throws {
        let big = try GeneratedContent(json: #"{"id": 9007199254740993, "pi": 3.14159265358979323846, "small": 0.1, "whole": 2.50}"#)
        #expect(big.jsonString == #"{"id":9007199254740993,"pi":3.14159265358979323846,"small":0.1,"whole":2.5}"#)
        #expect(try big.value(Int.self, forProperty: "id") == 9_007_199_254_740_993)
        #expect(try big.value(Decimal.self, forProperty: "pi") == Decimal(string: "3.14159265358979323846"))
        #expect(Int.max.generatedContent.jsonString == "9223372036854775807")
        #expect(try Int(Int.max.generatedContent) == .max)
        #expect(try GeneratedContent(json: "1e400").jsonString == "1e400")
        // Exact text that is not an integer, or past Int's range, is not read as a nearby Int.
        #expect(throws: LanguageModelSession.GenerationError.self) { try Int(GeneratedContent(json: "9007199254740993.5")) }
        #expect(throws: LanguageModelSession.GenerationError.self) { try Int(GeneratedContent(json: "92233720368547758070")) }
        #expect(try GeneratedContent(json: "9007199254740993") != GeneratedContent(json: "9007199254740992"))
        // Content made from a double alone writes the double's text.
        #expect(GeneratedContent(kind: .number(9_007_199_254_740_993)).jsonString == GeneratedContent(kind: .number(9_007_199_254_740_992)).jsonString)
    }

    @Test func partialJSONKeepsWhatHasStarted() throws {
        let partial = try GeneratedContent(json: #"{"title": "Trip to To"#)
        #expect(!partial.isComplete)
        #expect(try partial.value(String.self, forProperty: "title") == "Trip to To")

        let midKey = try GeneratedContent(json: #"{"a": 1, "b"#)
        #expect(midKey.jsonString == #"{"a":1}"#)
        #expect(!midKey.isComplete)

        let midLiteral = try GeneratedContent(json: #"{"a": [1, 2, tr"#)
        #expect(midLiteral.jsonString == #"{"a":[1,2]}"#)

        let midNumber = try GeneratedContent(json: #"{"n": -12."#)
        #expect(try midNumber.value(Double.self, forProperty: "n") == -12)

        let midEscape = try GeneratedContent(json: #"["caf\u00"#)
        #expect(midEscape.jsonString == #"["caf"]"#)

        let nested = try GeneratedContent(json: #"{"days": [{"name": "Mon", "acts": ["a"#)
        #expect(nested.jsonString == #"{"days":[{"name":"Mon","acts":["a"]}]}"#)
        #expect(!nested.isComplete)
    }

    @Test func invalidJSONThrowsParsingError() {
        #expect(throws: GeneratedContent.ParsingError.self) { try GeneratedContent(json: "{]") }
        #expect(throws: GeneratedContent.ParsingError.self) { try GeneratedContent(json: "") }
        #expect(throws: GeneratedContent.ParsingError.self) { try GeneratedContent(json: #"{"a": 1} trailing"#) }
        let error = #expect(throws: GeneratedContent.ParsingError.self) { try GeneratedContent(json: "[1,,2]") }
        #expect(error?.errorDescription?.contains("not valid JSON") == true)
        #expect(error?.rawContent == "[1,,2]")
    }

    @Test func unicodeEscapesAndSurrogates() throws {
        let content = try GeneratedContent(json: #""\u00e9\ud83d\ude00""#)
        #expect(try content.value(String.self) == "é😀")
        #expect(GeneratedContent("tab\there").jsonString == #""tab\there""#)
    }

    @Test func buildingContent() throws {
        let content = GeneratedContent(properties: ["name": "Sam", "age": 31, "tags": ["a", "b"], "pet": Optional<String>.none])
        #expect(content.jsonString == #"{"name":"Sam","age":31,"tags":["a","b"],"pet":null}"#)
        #expect(try content.value(String.self, forProperty: "name") == "Sam")
        #expect(try content.value(Int.self, forProperty: "age") == 31)
        #expect(try content.value([String].self, forProperty: "tags") == ["a", "b"])
        #expect(try content.value(String?.self, forProperty: "pet") == nil)
        #expect(try content.value(String?.self, forProperty: "missing") == nil)
        #expect(throws: LanguageModelSession.GenerationError.self) { try content.value(Int.self, forProperty: "missing") }
        #expect(throws: LanguageModelSession.GenerationError.self) { try content.value(Int.self, forProperty: "name") }

        let merged = GeneratedContent(properties: [("a", 1 as any ConvertibleToGeneratedContent), ("a", 2)],
                                      uniquingKeysWith: { first, _ in first })
        #expect(merged.jsonString == #"{"a":1}"#)

        let elements = GeneratedContent(elements: [1, "two", true] as [any ConvertibleToGeneratedContent])
        #expect(elements.jsonString == #"[1,"two",true]"#)

        let id = GenerationID()
        #expect(GeneratedContent("x", id: id).id == id)
        #expect(GeneratedContent(kind: .null, id: id).kind == .null)
        #expect(try GeneratedContent(GeneratedContent(3.5)).value(Double.self) == 3.5)
        #expect(try GeneratedContent(Decimal(string: "2.25")!).value(Decimal.self) == Decimal(string: "2.25")!)
        #expect(try GeneratedContent(Float(1.5)).value(Float.self) == 1.5)
        #expect(throws: LanguageModelSession.GenerationError.self) { try GeneratedContent(2.5).value(Int.self) }
    }

    @Test func debugDescriptionMarksIncompleteContent() throws {
        #expect(try GeneratedContent(json: "[1, 2").debugDescription == "[1,2] (incomplete)")
        #expect(GeneratedContent(true).debugDescription == "true")
    }
}
