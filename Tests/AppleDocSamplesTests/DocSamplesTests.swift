import Foundation
import FoundationModels
import Testing

/// The samples' value is that they compile; these tests check that a few of them also mean
/// what their pages say.
@Suite struct DocSamplesTests {
    private func instructions(_ session: LanguageModelSession) -> (text: String, tools: [String])? {
        guard case .instructions(let i)? = session.transcript.first else { return nil }
        return (i.segments.map(\.description).joined(separator: "\n"), i.toolDefinitions.map(\.name))
    }

    @Test func dynamicInstructionsBecomeTheInstructionsEntry() throws {
        let session = ComposingDynamicSessions.dynamicInstructionsSession()
        let entry = try #require(instructions(session))
        #expect(entry.text == "Help people improve their presentation.\nThe person is editing an image.")
        #expect(entry.tools == ["ListPhotosTool", "AddPhotoTool", "cropImage"])
    }

    @Test func theProfileSampleResolvesToItsActiveBranch() throws {
        let session = ComposingDynamicSessions.profileSession()
        let entry = try #require(instructions(session))
        #expect(entry.text == "The person is editing an image.")
        let writing = LanguageModelSession(profile: ComposingDynamicSessions.WritingProfile())
        #expect(instructions(writing)?.text == "The person is editing an image.")
    }

    @Test func aProviderSampleAnswersThroughTheSession() async throws {
        let session = LanguageModelSession(model: MyLanguageModel())
        let response = try await session.respond(to: "Tell me a joke!")
        #expect(response.content == "Why did the model cross the road?")
        #expect(session.transcript.count == 2)
    }

    /// The Generable page's `var id: GenerationID` is the value's identity, not a generated
    /// property.
    @Test func aGenerationIDPropertyIsNotGenerated() throws {
        let schema = try String(decoding: JSONEncoder().encode(GenerablePage.SearchSuggestions.SearchTerm.generationSchema),
                                as: UTF8.self)
        #expect(schema.contains("searchTerm") && !schema.contains("\"id\""))
        let id = GenerationID()
        let content = GeneratedContent(properties: ["searchTerm": "Beautiful sunsets"], id: id)
        let term = try GenerablePage.SearchSuggestions.SearchTerm(content)
        #expect(term.id == id && term.searchTerm == "Beautiful sunsets")
        #expect(try GenerablePage.SearchSuggestions.SearchTerm.PartiallyGenerated(content).id == id)
    }

    @Test func aNewSessionOverTheConversationHasNewInstructions() throws {
        let router = WhatsNew.Router()
        router.session = LanguageModelSession(instructions: "Old instructions.", transcript: Transcript(entries: [
            .prompt(.init(segments: [.text(.init(content: "Hi"))]))]))
        router.updateSession()
        let session = try #require(router.session)
        #expect(instructions(session)?.text == "Analyze the user's craft project...")
        #expect(instructions(session)?.tools == ["AddPhotoTool", "SwitchModeTool"])
        #expect(session.transcript.count == 2)
    }

    @Test func theDynamicSchemaSampleBuilds() throws {
        let schema = try DeepDive.riddleSchema()
        let json = try String(decoding: JSONEncoder().encode(schema), as: UTF8.self)
        #expect(json.contains("isCorrect") && json.contains("question"))
    }
}
