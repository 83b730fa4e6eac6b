import Foundation
import FoundationModels
import Testing

@Suite struct DynamicSchemaTests {
    /// A riddle with answers, built at run time and read back with `value(_:forProperty:)`.
    @Test func riddle() async throws {
        let riddle = DynamicGenerationSchema(name: "Riddle", description: "A riddle with answers", properties: [
            .init(name: "question", description: "The riddle", schema: .init(type: String.self)),
            .init(name: "answers", schema: .init(arrayOf: .init(referenceTo: "Answer"), minimumElements: 2, maximumElements: 4)),
            .init(name: "difficulty", schema: .init(name: "Difficulty", anyOf: ["easy", "hard"]), isOptional: true),
        ])
        let answer = DynamicGenerationSchema(name: "Answer", properties: [
            .init(name: "text", schema: .init(type: String.self)),
            .init(name: "isCorrect", schema: .init(type: Bool.self)),
        ])
        let schema = try GenerationSchema(root: riddle, dependencies: [answer])
        #expect(schema.name == "Riddle")

        let json = try schemaJSON(schema)
        #expect(json["x-order"] as? [String] == ["question", "answers", "difficulty"])
        #expect(json["required"] as? [String] == ["question", "answers"])
        let answers = (json["properties"] as! [String: [String: Any]])["answers"]!
        #expect(answers["minItems"] as? Int == 2)
        #expect((answers["items"] as? [String: Any])?["$ref"] as? String == "#/$defs/Answer")
        let defs = json["$defs"] as! [String: Any]
        #expect(defs["Answer"] != nil && defs["Difficulty"] != nil)

        let model = ScriptedModel([.text("""
            {"question": "What has keys but can't open locks?",
             "answers": [{"text": "A piano", "isCorrect": true}, {"text": "A map", "isCorrect": false}]}
            """)])
        let session = LanguageModelSession(model: model)
        let response = try await session.respond(to: "Write a riddle.", schema: schema)
        let content = response.content
        #expect(try content.value(String.self, forProperty: "question") == "What has keys but can't open locks?")
        let list = try content.value([GeneratedContent].self, forProperty: "answers")
        #expect(try list.map { try $0.value(String.self, forProperty: "text") } == ["A piano", "A map"])
        #expect(try list[0].value(Bool.self, forProperty: "isCorrect"))
        #expect(try content.value(String?.self, forProperty: "difficulty") == nil)
        #expect(response.rawContent == content)
        guard case .response(let entry) = session.transcript.last, case .structure(let segment) = entry.segments.first else {
            Issue.record("a structured response segment")
            return
        }
        #expect(segment.source == "Riddle")
        #expect(segment.schemaName == "Riddle")
    }

    @Test func anyOfTypesAndGuides() throws {
        let cat = DynamicGenerationSchema(name: "Cat", properties: [.init(name: "meows", schema: .init(type: Bool.self))])
        let dog = DynamicGenerationSchema(name: "Dog", properties: [
            .init(name: "age", schema: .init(type: Int.self, guides: [.range(0...20)])),
        ])
        let pet = DynamicGenerationSchema(name: "Pet", anyOf: [cat, dog])
        let list = DynamicGenerationSchema(name: "Pets", properties: [
            .init(name: "pets", schema: .init(arrayOf: pet)), .init(name: "none", schema: .null, isOptional: true),
        ])
        let json = try schemaJSON(try GenerationSchema(root: list, dependencies: []))
        let defs = json["$defs"] as! [String: [String: Any]]
        #expect((defs["Pet"]?["anyOf"] as? [[String: Any]])?.count == 2)
        let dogProperties = defs["Dog"]?["properties"] as? [String: [String: Any]]
        #expect(dogProperties?["age"]?["maximum"] as? Int == 20)
    }

    /// JSON Schema's boolean schemas at the root: `true` admits any value, as `{}` does; `false`
    /// admits none and is refused with a reason (both were "must be a JSON object").
    @Test func booleanSchemas() throws {
        #expect(try GenerationSchema(jsonSchema: "true").debugDescription == GenerationSchema(jsonSchema: "{}").debugDescription)
        #expect {
            try GenerationSchema(jsonSchema: "false")
        } throws: { error in
            (error as? GeneratedContent.ParsingError)?.localizedDescription.contains("admits no value") ?? false
        }
        #expect(throws: GeneratedContent.ParsingError.self) { try GenerationSchema(jsonSchema: "[]") }
    }

    @Test func schemaErrors() {
        let a = DynamicGenerationSchema(name: "A", properties: [.init(name: "b", schema: .init(referenceTo: "B"))])
        #expect {
            try GenerationSchema(root: a, dependencies: [])
        } throws: { error in
            guard case GenerationSchema.SchemaError.undefinedReferences(_, let references, _) = error else { return false }
            return references == ["B"]
        }
        #expect {
            try GenerationSchema(root: a, dependencies: [a])
        } throws: { error in
            if case GenerationSchema.SchemaError.duplicateType(_, "A", _) = error { return true }
            return false
        }
        let twice = DynamicGenerationSchema(name: "T", properties: [
            .init(name: "x", schema: .init(type: Int.self)), .init(name: "x", schema: .init(type: String.self)),
        ])
        #expect {
            try GenerationSchema(root: twice, dependencies: [])
        } throws: { error in
            if case GenerationSchema.SchemaError.duplicateProperty("T", "x", _) = error { return true }
            return false
        }
        let empty = DynamicGenerationSchema(name: "E", anyOf: [DynamicGenerationSchema]())
        #expect {
            try GenerationSchema(root: empty, dependencies: [])
        } throws: { error in
            guard let error = error as? GenerationSchema.SchemaError, case .emptyTypeChoices = error else { return false }
            return error.errorDescription != nil && error.recoverySuggestion != nil
        }
    }
}
