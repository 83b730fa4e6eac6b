import Foundation
import FoundationModels
import Testing

@Suite struct ErrorTests {
    @Test func generationErrorsDescribeThemselves() {
        let context = LanguageModelSession.GenerationError.Context(debugDescription: "detail")
        let errors: [LanguageModelSession.GenerationError] = [
            .exceededContextWindowSize(context), .assetsUnavailable(context), .guardrailViolation(context),
            .unsupportedGuide(context), .unsupportedLanguageOrLocale(context), .decodingFailure(context),
            .rateLimited(context), .concurrentRequests(context),
            .refusal(.init(transcriptEntries: []), context),
        ]
        var descriptions = Set<String>()
        for error in errors {
            let description = try! #require(error.errorDescription)
            #expect(description.hasSuffix("detail"))
            #expect(error.failureReason?.isEmpty == false)
            #expect(error.recoverySuggestion?.isEmpty == false)
            descriptions.insert(description)
            #expect((error as any Error).localizedDescription == description)
        }
        #expect(descriptions.count == errors.count)
    }

    @Test func languageModelErrorsDescribeThemselves() {
        let errors: [LanguageModelError] = [
            .contextSizeExceeded(.init(contextSize: 4096, tokenCount: 5000, debugDescription: "a")),
            .rateLimited(.init(resetDate: Date(timeIntervalSince1970: 0), debugDescription: "b")),
            .guardrailViolation(.init(debugDescription: "c")),
            .refusal(.init(explanation: "no", debugDescription: "d")),
            .unsupportedCapability(.init(capability: .vision, debugDescription: "e")),
            .unsupportedTranscriptContent(.init(unsupportedContent: [], debugDescription: "f")),
            .unsupportedGenerationGuide(.init(schemaName: "S", debugDescription: "g")),
            .unsupportedLanguageOrLocale(.init(languageCode: "fr", debugDescription: "h")),
            .timeout(.init(debugDescription: "i", metadata: ["k": 1])),
        ]
        #expect(Set(errors.compactMap(\.errorDescription)).count == 9)
        #expect(errors.map(\.debugDescription) == ["a", "b", "c", "d", "e", "f", "g", "h", "i"])
        #expect(errors[0].errorDescription?.contains("5000") == true)
        #expect(errors[4].errorDescription == "The model doesn't support vision.")
    }

    @Test func sessionErrors() {
        #expect(LanguageModelSession.Error.concurrentRequests.errorDescription?.contains("one request at a time") == true)
        #expect(LanguageModelSession.Error.transcriptMutationWhileResponding.errorDescription != nil)
        #expect(LanguageModelSession.Error.concurrentRequests != .transcriptMutationWhileResponding)
        #expect(LanguageModelSession.Error.concurrentRequests.debugDescription.contains("concurrentRequests"))
    }

    @Test func refusalExplanations() async throws {
        let refusal = LanguageModelError.Refusal(explanation: "Not allowed.", debugDescription: "x")
        #expect(try await refusal.explanation.content == "Not allowed.")
        #expect(try await refusal.explanationStream.collect().content == "Not allowed.")
    }

    @Test func feedbackAttachments() throws {
        let session = LanguageModelSession(model: ScriptedModel([]), instructions: "x")
        let data = session.logFeedbackAttachment(sentiment: .negative, issues: [.init(category: .tooVerbose, explanation: "long")],
                                                 desiredResponseText: "Short.")
        let json = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        #expect(json["sentiment"] as? String == "negative")
        #expect(json["desiredResponseText"] as? String == "Short.")
        #expect(LanguageModelFeedback.Issue.Category.allCases.count == 8)
        #expect(LanguageModelFeedback.Sentiment.allCases.count == 3)
        _ = session.logFeedbackAttachment(sentiment: nil, desiredResponseContent: SearchSuggestions(searchTerms: ["a"]))
        _ = session.logFeedbackAttachment(sentiment: .positive)
    }
}
