import Foundation
import FoundationModels
import Testing

/// The JSON Schema text of a schema, with sorted keys (the form the constrained decoder reads).
func schemaJSON(_ schema: GenerationSchema) throws -> [String: Any] {
    let data = try JSONEncoder().encode(schema)
    return try JSONSerialization.jsonObject(with: data) as! [String: Any]
}

@Generable(description: "A cat")
struct Cat {
    @Guide(description: "The cat's name")
    var name: String
    @Guide(.range(0...30))
    var age: Int
    var profile: String?
    var mood: Mood
}

@Generable
enum Mood {
    case happy, grumpy, sleepy
}

@Generable
struct TreeNode {
    var label: String
    var children: [TreeNode]
}

@Suite struct SchemaTests {
    @Test func structSchemaIsJSONSchemaInDeclarationOrder() throws {
        let json = try schemaJSON(Cat.generationSchema)
        #expect(json["type"] as? String == "object")
        #expect(json["title"] as? String == "Cat")
        #expect(json["description"] as? String == "A cat")
        #expect(json["x-order"] as? [String] == ["name", "age", "profile", "mood"])
        #expect(json["required"] as? [String] == ["name", "age", "mood"])
        #expect(json["additionalProperties"] as? Bool == false)
        let properties = json["properties"] as! [String: [String: Any]]
        #expect(properties["name"]?["description"] as? String == "The cat's name")
        #expect(properties["age"]?["type"] as? String == "integer")
        #expect(properties["age"]?["minimum"] as? Int == 0)
        #expect(properties["age"]?["maximum"] as? Int == 30)
        #expect(properties["mood"]?["$ref"] as? String == "#/$defs/Mood")
        let defs = json["$defs"] as! [String: [String: Any]]
        #expect(defs["Mood"]?["enum"] as? [String] == ["happy", "grumpy", "sleepy"])
        #expect(Cat.generationSchema.name == "Cat")
    }

    @Test func keyOrderInTheEncodedTextFollowsDeclarations() throws {
        let text = String(decoding: try JSONEncoder().encode(Cat.generationSchema), as: UTF8.self)
        // Whatever order the encoder writes keys in, x-order carries the declaration order.
        #expect(text.contains(#""x-order":["name","age","profile","mood"]"#))
    }

    @Test func recursiveTypesUseReferences() throws {
        let json = try schemaJSON(TreeNode.generationSchema)
        let properties = json["properties"] as! [String: [String: Any]]
        let children = properties["children"]!
        #expect(children["type"] as? String == "array")
        #expect((children["items"] as? [String: Any])?["$ref"] as? String == "#/$defs/TreeNode")
        let defs = json["$defs"] as! [String: [String: Any]]
        #expect(defs["TreeNode"]?["type"] as? String == "object")
    }

    @Test func schemaRoundTripsThroughCodable() throws {
        for schema in [Cat.generationSchema, TreeNode.generationSchema, [Int].generationSchema, Mood.generationSchema] {
            let data = try JSONEncoder().encode(schema)
            let decoded = try JSONDecoder().decode(GenerationSchema.self, from: data)
            #expect(decoded == schema)
            #expect(try JSONEncoder().encode(decoded).count == data.count)
        }
    }

    /// Counts a schema can't hold are refused (1e19 trapped converting a Double to Int).
    @Test func countsPastAnIntegerAreRefused() throws {
        for bad in [#"{"type":"array","items":{"type":"string"},"minItems":1e19}"#, #"{"type":"array","maxItems":-1e19}"#,
                    #"{"type":"array","minItems":1.5}"#] {
            #expect(throws: (any Error).self) { try JSONDecoder().decode(GenerationSchema.self, from: Data(bad.utf8)) }
        }
        let fine = try JSONDecoder().decode(GenerationSchema.self, from: Data(#"{"type":"array","items":{"type":"string"},"minItems":2}"#.utf8))
        #expect(try schemaJSON(fine)["minItems"] as? Int == 2)
    }

    @Test func primitiveSchemas() throws {
        #expect(try schemaJSON(String.generationSchema)["type"] as? String == "string")
        #expect(try schemaJSON(Int.generationSchema)["type"] as? String == "integer")
        #expect(try schemaJSON(Double.generationSchema)["type"] as? String == "number")
        #expect(try schemaJSON(Float.generationSchema)["type"] as? String == "number")
        #expect(try schemaJSON(Decimal.generationSchema)["type"] as? String == "number")
        #expect(try schemaJSON(Bool.generationSchema)["type"] as? String == "boolean")
        #expect(try schemaJSON([Bool].generationSchema)["type"] as? String == "array")
        #expect(try schemaJSON(GeneratedContent.generationSchema).isEmpty)
        #expect(Int.generationSchema.name == "Int")
    }

    @Test func typeSchemasBuiltByHand() throws {
        struct Color: Generable {
            var name: String
            static var generationSchema: GenerationSchema {
                GenerationSchema(type: Color.self, description: "A color", properties: [
                    GenerationSchema.Property(name: "name", description: "Its name", type: String.self,
                                              guides: [.anyOf(["red", "green"])]),
                    GenerationSchema.Property(name: "hex", type: String?.self, guides: [/#[0-9a-f]{6}/]),
                ])
            }
            init(_ content: GeneratedContent) throws { name = try content.value(forProperty: "name") }
            var generatedContent: GeneratedContent { GeneratedContent(properties: ["name": name]) }
        }
        let json = try schemaJSON(Color.generationSchema)
        let properties = json["properties"] as! [String: [String: Any]]
        #expect(properties["name"]?["enum"] as? [String] == ["red", "green"])
        #expect(properties["hex"]?["pattern"] as? String == "#[0-9a-f]{6}")
        #expect(json["required"] as? [String] == ["name"])

        let choice = GenerationSchema(type: Color.self, anyOf: ["a", "b"])
        #expect(try schemaJSON(choice)["enum"] as? [String] == ["a", "b"])
        let union = GenerationSchema(type: Color.self, description: "Either", anyOf: [Cat.self, Mood.self])
        let unionJSON = try schemaJSON(union)
        #expect((unionJSON["anyOf"] as? [[String: Any]])?.count == 2)

        let explicit = GenerationSchema(type: Color.self, representNilExplicitlyInGeneratedContent: true, properties: [
            GenerationSchema.Property(name: "note", type: String?.self),
        ])
        let explicitJSON = try schemaJSON(explicit)
        #expect(explicitJSON["required"] as? [String] == ["note"])
    }

    @Test func aRegexWithoutALiteralPatternIsAnUnsupportedGuide() async throws {
        let regex = Regex { "a"; OneOrMore(.digit) }
        let schema = GenerationSchema(type: GeneratedContent.self, properties: [
            GenerationSchema.Property(name: "code", type: String.self, guides: [regex]),
        ])
        if regex._literalPattern == nil {
            #expect(throws: EncodingError.self) { try JSONEncoder().encode(schema) }
            let session = LanguageModelSession(model: ScriptedModel([.text("{}")]))
            await #expect(throws: LanguageModelSession.GenerationError.self) {
                try await session.respond(to: "x", schema: schema)
            }
        } else {
            #expect(try schemaJSON(schema)["properties"] != nil)
        }
    }
}

import RegexBuilder
