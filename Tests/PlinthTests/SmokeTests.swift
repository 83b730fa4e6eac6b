import Foundation
import FoundationModels
import Testing

@Generable(description: "Search suggestions")
struct SearchSuggestions {
    @Guide(description: "A list of suggested search terms", .count(4))
    var searchTerms: [String]
}

@Test func smoke() async throws {
    let model = ScriptedModel([.text(#"{"searchTerms": ["a", "b", "c", "d"]}"#)])
    let session = LanguageModelSession(model: model, instructions: "Suggest.")
    let response = try await session.respond(to: "Go", generating: SearchSuggestions.self)
    #expect(response.content.searchTerms == ["a", "b", "c", "d"])
}
