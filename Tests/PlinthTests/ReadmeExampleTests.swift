import Foundation
import FoundationModels
import Testing

// The README's example, as written there: it must keep compiling.
@Generable struct Verdict {
    @Guide(description: "Is the clause allowed?") var allowed: Bool
    @Guide(.range(0...10)) var severity: Int
}

func readmeExample() async throws -> Verdict {
    let session = LanguageModelSession(instructions: "You review policy clauses.")
    return try await session.respond(to: "Clause: data is kept forever.", generating: Verdict.self).content
}

@Suite struct ReadmeExampleTests {
    @Test func exampleSchemaCarriesItsGuides() throws {
        let json = try schemaJSON(Verdict.generationSchema)
        let properties = try #require(json["properties"] as? [String: Any])
        let severity = try #require(properties["severity"] as? [String: Any])
        #expect(severity["minimum"] as? Int == 0)
        #expect(severity["maximum"] as? Int == 10)
        let allowed = try #require(properties["allowed"] as? [String: Any])
        #expect(allowed["description"] as? String == "Is the clause allowed?")
    }
}
