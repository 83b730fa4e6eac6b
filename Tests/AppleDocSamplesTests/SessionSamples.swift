// Samples of Apple's Foundation Models articles and symbol pages about sessions, prompts,
// transcripts, safety and the context window. App code around a fragment (a SwiftUI view, a
// placeholder such as `<prompt>`) is replaced by the smallest Swift that holds it.
import Foundation
import FoundationModels

// https://developer.apple.com/documentation/foundationmodels/generating-content-and-performing-tasks-with-foundation-models
// and https://developer.apple.com/documentation/foundationmodels/systemlanguagemodel (the body of
// their SwiftUI view, which Linux lacks).
enum GeneratingContent {
    static func availability() -> String {
        // Create a reference to the system language model.
        let model = SystemLanguageModel.default
        switch model.availability {
        case .available:
            return "Show your intelligence UI."
        case .unavailable(.deviceNotEligible):
            return "Show an alternative UI."
        case .unavailable(.modelNotReady):
            return "The model isn't ready because it's downloading or because of other system reasons."
        case .unavailable(let other):
            return "The model is unavailable for an unknown reason: \(other)."
        }
    }

    static func samples() async throws {
        do {
            let instructions = """
                Suggest five related topics. Keep them concise (three to seven words) and make sure they \
                build naturally from the person's topic.
                """

            let session = LanguageModelSession(instructions: instructions)

            let prompt = "Making homemade bread"

            let response = try await session.respond(to: prompt)
            _ = response
        }
        do {
            // Customize the temperature to increase creativity.
            let options = GenerationOptions(temperature: 1.0)

            let session = LanguageModelSession()

            let prompt = "Write me a story about coffee."

            let response = try await session.respond(
                to: prompt,
                options: options
            )
            _ = response
        }
    }
}

// https://developer.apple.com/documentation/foundationmodels/improving-the-safety-of-generative-model-output
enum ImprovingSafety {
    @Generable
    enum Breakfast {
        case waffles
        case pancakes
        case bagels
        case eggs
    }

    static func samples() async throws {
        do {
            let session = LanguageModelSession()
            let topic = "" // A potentially sensitive topic.
            let prompt = "Write a respectful and funny story about \(topic)."
            let response = try await session.respond(to: prompt)
            _ = response
        } catch LanguageModelError.guardrailViolation(let violation) {
            // Handle the safety error.
            _ = violation
        }

        do {
            let session = LanguageModelSession()
            let topic = ""  // A sensitive topic.
            let response = try await session.respond(
                to: "List five key points about: \(topic)",
                generating: [String].self
            )
            _ = response
        } catch LanguageModelError.refusal(let refusal) {
            do {
                // Attempt to retrieve an explanation for the refusal.
                let explanation = try await refusal.explanation.content
                _ = explanation
            } catch {
                // The explanation request may fail, so fall back to the debug text.
                let explanation = refusal.debugDescription
                _ = explanation
            }
        }

        let session = LanguageModelSession()
        let userInput = "I want something sweet."
        let prompt = "Pick the ideal breakfast for request: \(userInput)"
        let response = try await session.respond(to: prompt, generating: Breakfast.self)
        _ = response

        let model = SystemLanguageModel(guardrails: .permissiveContentTransformations)
        _ = model
    }

    static func verified() async throws -> LanguageModelSession.Response<String>? {
        let session = LanguageModelSession()
        let userInput = "" // The input a person enters in the app.
        let prompt = "Generate a wholesome story about: \(userInput)"

        // A function you create that evaluates whether the input
        // contains anything in your deny list.
        if verifyText(prompt) {
            let response = try await session.respond(to: prompt)

            // Compare the output to evaluate whether it contains anything in your deny list.
            if verifyText(response.content) {
                return response
            } else {
                // Handle the unsafe output.
            }
        } else {
            // Handle the unsafe input.
        }
        return nil
    }
}

// https://developer.apple.com/documentation/foundationmodels/languagemodelsession,
// .../instructions and .../prompt
enum SessionPages {
    static func samples() async throws {
        let session = LanguageModelSession(instructions: """
            You are a motivational workout coach that provides quotes to inspire \
            and motivate athletes.
            """
        )
        let prompt = "Generate a motivational quote for my next workout."
        let response = try await session.respond(to: prompt)
        _ = response

        let question = Prompt("What are miniature schnauzers known for?")
        _ = question

        let responseShouldRhyme = true
        let rhyming = Prompt {
            "Answer the following question: Do Siberian Huskies love cold weather?"
            if responseShouldRhyme {
                "Your response MUST rhyme!"
            }
        }
        _ = rhyming
    }
}

// https://developer.apple.com/documentation/foundationmodels/transcript
enum TranscriptPage {
    static func describe(_ session: LanguageModelSession) -> [String] {
        session.transcript.map { entry in
            switch entry {
            case let .instructions(instructions):
                "\(instructions)"
            case let .prompt(prompt):
                "\(prompt)"
            case let .reasoning(reasoning):
                "\(reasoning)"
            case let .toolCalls(toolCalls):
                "\(toolCalls)"
            case let .toolOutput(toolOutput):
                "\(toolOutput)"
            case let .response(response):
                "\(response)"
            }
        }
    }

    // Create a new session with the first and last entries from a previous session.
    static func newContextualSession(with originalSession: LanguageModelSession) -> LanguageModelSession {
        let allEntries = originalSession.transcript

        // Collect the entries to keep from the original session.
        let entries = [allEntries.first, allEntries.last].compactMap { $0 }
        let transcript = Transcript(entries: entries)

        // Create a new session with the result and preload the session resources.
        var session = LanguageModelSession(transcript: transcript)
        session.prewarm()
        return session
    }
}

// https://developer.apple.com/documentation/foundationmodels/managing-the-context-window
// (and TN3193, whose `catch let error as ….exceededContextWindowSize(let context)` isn't Swift).
enum ManagingTheContextWindow {
    @Generable
    struct GameSettings {
        @Guide(.minimumCount(1), .maximumCount(20))
        @Guide(description: "Keyboard shortcuts for desktop")
        var keyboardShortcuts: [String]
    }

    @Generable
    struct ContentAnalysis {
        // Clear property names that the model can infer won't need an `@Guide`.
        var title: String
        var summary: String

        // A minimum and maximum to a rating provides details to the model that it
        // otherwise wouldn't know. There is no need for a description because the
        // property name is clear.
        @Guide(.minimum(1), .maximum(10))
        var rating: Int
    }

    static func summarize(_ chunks: [String]) async throws -> String {
        var chunkSummaries: [String] = []

        // Use a separate session to summarize each chunk.
        for (index, chunk) in chunks.enumerated() {
            let session = LanguageModelSession()
            var prompt = """
                Summarize this section of an article:

                \(chunk)
                """

            // Include the previous summary to maintain continuity.
            if index > 0 {
                prompt = """
                Previous section summary: \(chunkSummaries[index - 1])

                \(prompt)
                """
            }

            // Perform the request and track the response.
            let response = try await session.respond(to: prompt)
            chunkSummaries.append(response.content)
        }

        // Combine all chunk summaries in a final session.
        let finalSession = LanguageModelSession()
        let combined = chunkSummaries.joined(separator: "\n")
        let prompt = """
            Combine these section summaries into one cohesive summary:

            \(combined)
            """

        // Perform the request to get the final summary.
        let finalSummary = try await finalSession.respond(to: prompt).content
        return finalSummary
    }

    static func overflow(_ session: LanguageModelSession, _ prompt: String) async {
        do {
            // Perform a request that exceeds the context window.
            let response = try await session.respond(to: prompt)
            _ = response
        } catch LanguageModelError.contextSizeExceeded(let context) {
            // Handle exceeding the context window size by creating a new session.
            _ = context
        } catch {
            // Handle other errors that are thrown.
        }
    }

    static func newContextualSession(with originalSession: LanguageModelSession) -> LanguageModelSession {
        let allEntries = originalSession.transcript
        let condensedEntries = [allEntries.first, allEntries.last].compactMap { $0 }
        let condensedTranscript = Transcript(entries: condensedEntries)
        let newSession = LanguageModelSession(transcript: condensedTranscript)
        newSession.prewarm()
        return newSession
    }
}

// https://developer.apple.com/documentation/foundationmodels/inspecting-session-transcripts-and-reporting-model-feedback
enum InspectingTranscripts {
    struct AnnotatedTranscript: Encodable {
        var transcript: Transcript
        var annotations: [String: String]
    }

    static func samples(_ session: LanguageModelSession) async throws {
        for entry in session.transcript {
            switch entry {
            case .instructions(let instructions):
                // The guidance you gave the language model.
                _ = instructions
            case .prompt(let prompt):
                // A request from a person using your app.
                _ = prompt
            case .response(let response):
                // A response the language model generated.
                _ = response
            default:
                // Other entries, like reasoning, tool calls, and tool output.
                break
            }
        }

        let entries = session.transcript
        let kept = [entries.first, entries.last].compactMap { $0 }
        session.transcript = Transcript(entries: kept)

        do {
            let session = LanguageModelSession()
            let response = try await session.respond(to: "Help me plan a trip to Tokyo")
            _ = response

            // Encode the transcript that now holds both the prompt and the response.
            let data = try JSONEncoder().encode(session.transcript)
            _ = data
        }

        let issue = LanguageModelFeedback.Issue(
            category: .incorrect,
            explanation: "The response named the wrong capital city."
        )
        let data = session.logFeedbackAttachment(
            sentiment: .negative,
            issues: [issue],
            desiredResponseText: "The capital of Australia is Canberra."
        )
        _ = data

        let playerName = "Ada" // The player's name.
        let inventoryDescription = "a lamp" // Information related to the player's inventory.
        let annotated = AnnotatedTranscript(
            transcript: session.transcript,
            annotations: ["player": playerName,
                          "inventory": inventoryDescription]
        )
        _ = annotated

        let context = "player: \(playerName), inventory: \(inventoryDescription)"
        let contextIssue = LanguageModelFeedback.Issue(
            category: .incorrect,
            explanation: "Unexpected trade offer. App context — \(context)"
        )
        let contextData = session.logFeedbackAttachment(sentiment: .negative,
                                                        issues: [contextIssue])
        _ = contextData
    }
}

// https://developer.apple.com/documentation/foundationmodels/adding-server-side-intelligence-with-private-cloud-compute
// and https://developer.apple.com/documentation/foundationmodels/privatecloudcomputelanguagemodel
enum PrivateCloudCompute {
    static func samples() async throws {
        // Create a session with the server-side model.
        let session = LanguageModelSession(model: PrivateCloudComputeLanguageModel())

        let model = PrivateCloudComputeLanguageModel()
        switch model.availability {
        case .available:
            break // Show your intelligence UI.
        case .unavailable(.deviceNotEligible):
            break // Show an alternative UI.
        case .unavailable(.systemNotReady):
            break // PCC isn't ready to serve requests.
        case .unavailable(let other):
            _ = other // The model is unavailable for an unknown reason.
        }

        // Depending on the quota state, display a label (a Text in the page) to keep a person
        // aware of the status of their daily limit.
        var label = ""
        if model.quotaUsage.isLimitReached {
            label = "Usage limit exceeded"
        } else if case .belowLimit(let info) = model.quotaUsage.status {
            if info.isApproachingLimit {
                label = "Nearing usage limit"
            }
        }
        _ = label

        // Display a button in your UI to present the available upgrade options.
        if let suggestion = model.quotaUsage.limitIncreaseSuggestion {
            suggestion.show()
        }

        let response = try await session.respond(
            to: "What are the tradeoffs in this architecture?",
            contextOptions: ContextOptions(reasoningLevel: .deep)
        )
        _ = response

        let analysis = try await session.respond(to: "Analyze this document...")
        _ = analysis
    }
}
