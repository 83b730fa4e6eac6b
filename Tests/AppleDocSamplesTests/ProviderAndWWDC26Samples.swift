// Samples of Apple's documentation of the language model provider API and of the WWDC26
// sessions "What's new in Foundation Models" (241) and "Build agentic app experiences" (242).
import Foundation
import FoundationModels

// https://developer.apple.com/documentation/foundationmodels/languagemodel,
// .../languagemodelcapabilities, .../languagemodelexecutor and
// .../languagemodelexecutorgenerationchannel
struct MyLanguageModel: LanguageModel {
    typealias Executor = MyExecutor

    var capabilities: LanguageModelCapabilities {
        LanguageModelCapabilities([
            .toolCalling,
            .guidedGeneration,
            .reasoning
        ])
    }

    var executorConfiguration: MyExecutor.Configuration { .init() }
}

struct MyExecutor: LanguageModelExecutor {
    struct Configuration: Hashable, Sendable {}

    init(configuration: Configuration) {}

    func respond(
        to request: LanguageModelExecutorGenerationRequest,
        model: MyLanguageModel,
        streamingInto channel: LanguageModelExecutorGenerationChannel
    ) async throws {
        // The request includes a sampling set to `greedy`, but your
        // model only uses temperature.
        if request.generationOptions.samplingMode == .greedy {
            // Use the temperature of `0` to approximate the intention.
        }

        let entryID = UUID().uuidString

        // Calculate your total and cached tokens counts for the input.
        let totalTokens = 0
        let cachedTokens = 0

        // Send model identification.
        await channel.send(.response(entryID: entryID, action: .updateMetadata([
            "modelID": "my-model-2026-06-08",
            "requestID": request.id.uuidString
        ])))

        // Report prompt token usage upfront.
        await channel.send(.response(
            entryID: entryID,
            action: .updateUsage(
                input: .init(
                    totalTokenCount: totalTokens,
                    cachedTokenCount: cachedTokens
                ),
                output: .init(
                    totalTokenCount: 0,
                    reasoningTokenCount: 0
                )
            )
        ))
        await channel.send(.response(entryID: entryID, action: .appendText("Why did the model cross the road?", tokenCount: 8)))
    }
}

enum ProviderPages {
    @Generable struct MySchema { var joke: String }

    static func samples() async throws {
        // Initialize a session with a custom server model.
        let session = LanguageModelSession(model: MyLanguageModel())

        // Use the same API surface to prompt the model.
        let response = try await session.respond(to: "Tell me a joke!")
        _ = response

        let selectedModel = MyLanguageModel()
        // Before prompting the model with a generable type, check whether it
        // supports guided generation.
        if selectedModel.capabilities.contains(.guidedGeneration) {
            let structured = try await session.respond(to: "...", generating: MySchema.self)
            _ = structured
        }
    }
}

// https://developer.apple.com/videos/play/wwdc2026/241/
enum WhatsNew {
    static func samples(session: LanguageModelSession) async throws {
        // Context size and token counting
        let model = SystemLanguageModel()
        print(try await model.contextSize)
        let count = try await model.tokenCount(for: "What are the Japanese characters for origami?")
        print(count)

        // Inspecting usage
        let response = try await session.respond(
            to: "Recommend a craft that doesn't require scissors.",
            contextOptions: ContextOptions(reasoningLevel: .light)
        )
        print(response.usage.input.totalTokenCount)
        print(response.usage.input.cachedTokenCount)
        print(response.usage.output.totalTokenCount)
        print(response.usage.output.reasoningTokenCount)
    }

    // Describing the profile for craft app
    struct CraftProfile: LanguageModelSession.DynamicProfile {
        var body: some DynamicProfile {
            Profile {
                Instructions {
                    """
                    You are an expert crafting assistant. \
                    Record craft project image analyses   \
                    using the recordImageAnalysis tool.
                    """
                }
                RecordImageAnalysisTool()
            }
        }
    }

    static func craftSession() -> LanguageModelSession {
        let session = LanguageModelSession(
            profile: CraftProfile()
        )
        return session
    }

    // Routing between craft analysis and brainstorm, with new sessions over one conversation.
    final class Router: @unchecked Sendable {
        let appStates = CraftProjectStates()
        var session: LanguageModelSession?

        func updateSession() {
            let originalTranscript = session?.transcript.dropFirstInstructions() ?? Transcript()

            // Create a new session with new instructions and tools
            switch appStates.mode {
            case .craftAnalysis:
                session = LanguageModelSession(
                    tools: [
                        RecordImageAnalysisTool(),
                        SwitchModeTool(states: appStates)
                    ],
                    instructions: "Analyze the user's craft project...",
                    transcript: originalTranscript
                )
            case .brainstorm:
                session = LanguageModelSession(
                    tools: [
                        RecordBrainstormTool(),
                    ],
                    instructions: "Brainstorm some ideas...",
                    transcript: originalTranscript
                )
            }
        }
    }

    struct SwitchModeTool: Tool {
        let description = "Switch to a different mode."
        let states: CraftProjectStates

        @Generable
        struct Arguments {
            let mode: String
        }

        func call(arguments: Arguments) async throws -> some PromptRepresentable {
            states.mode = Mode(rawValue: arguments.mode) ?? states.mode
            return "Successfully switched to \(arguments.mode)."
        }
    }

    struct ModalCraftProfile: LanguageModelSession.DynamicProfile {
        let states: CraftProjectStates

        var body: some DynamicProfile {
            switch states.mode {
            case .craftAnalysis:
                Profile {
                    Instructions { "Analyze the craft project." }
                    RecordImageAnalysisTool()
                    SwitchModeTool(states: states)
                }
            case .brainstorm:
                Profile {
                    Instructions { "Brainstorm ideas." }
                    BrainstormRecordTool()
                }
                .model(states.privateCloudCompute)
                .reasoningLevel(.deep)
            }
        }
    }
}

// https://developer.apple.com/videos/play/wwdc2026/242/
enum AgenticExperiences {
    struct BrainstormFacilitator: DynamicInstructions {
        var orchestrator: CraftOrchestrator

        var body: some DynamicInstructions {
            Instructions {
                "You are a warm and friendly expert crafting brainstorm facilitator."
            }

            // Tools
            GenerateProjectTitle()

            // Conditionally include Origami knowledge
            if orchestrator.techniques.contains(.origami) {
                OrigamiExpert()
            }
        }
    }

    struct CraftProfile: LanguageModelSession.DynamicProfile {
        var orchestrator: CraftOrchestrator

        var body: some DynamicProfile {
            switch orchestrator.mode {
            case .brainstorming:
                Profile { BrainstormFacilitator(orchestrator: orchestrator) }
                    .model(orchestrator.pccLanguageModel)
                    .temperature(1)
            case .planning:
                Profile { TutorialAuthor(orchestrator: orchestrator) }
                    .model(orchestrator.pccLanguageModel)
                    .reasoningLevel(.deep)
            case .reviewing:
                Profile { CraftCoach() }
                    .model(orchestrator.systemLanguageModel)
            }
        }
    }
}

// https://developer.apple.com/videos/play/wwdc2026/339/ ("Bring an LLM provider to Foundation
// Models"): its conformances, option parsing and custom segment, where the slides' code is whole.
enum BringAProvider {
    // LanguageModel conformance
    public struct MyLanguageModel: LanguageModel {
        public typealias Executor = MyLanguageModelExecutor

        public var capabilities: LanguageModelCapabilities {
            LanguageModelCapabilities(capabilities: [
                .toolCalling, .guidedGeneration, .reasoning
            ])
        }

        public var executorConfiguration: Executor.Configuration {
            Executor.Configuration(/* ... */)
        }
    }

    // Executor conformance
    public struct MyLanguageModelExecutor: LanguageModelExecutor {
        public typealias Model = MyLanguageModel

        public struct Configuration: Hashable, Sendable { /* ... */ }

        public init(configuration: Configuration) throws { /* ... */ }

        public func respond(
            to request: LanguageModelExecutorGenerationRequest,
            model: MyLanguageModel,
            streamingInto channel: LanguageModelExecutorGenerationChannel
        ) async throws {
            // Parse generation and context options
            let reasoningLevel = request.contextOptions.reasoningLevel
            let temperature = request.generationOptions.temperature
            let maxTokens = request.generationOptions.maximumResponseTokens
            _ = (reasoningLevel, temperature, maxTokens)

            // Honor the developer's intention where possible
            // The developer set sampling: .greedy, but our service only takes temperature
            var serviceTemperature = temperature ?? 1
            if request.generationOptions.sampling?.kind == .greedy {
                serviceTemperature = 0
            }
            _ = serviceTemperature

            // Otherwise, throw an error
            // The token budget is too small to satisfy the schema
            if let schema = request.schema,
               let budget = request.generationOptions.maximumResponseTokens,
               budget < minimumTokens(for: schema) {
                throw LanguageModelError.unsupportedCapability(
                    .init(
                        capability: .guidedGeneration,
                        debugDescription: "Token budget too small to satisfy this schema."
                    )
                )
            }

            // 1. Report metadata
            await channel.send(.response(action: .updateMetadata([
                "modelID": "my-model-2026-06-08",
                "requestID": request.id.uuidString
            ])))
        }

        private func minimumTokens(for schema: GenerationSchema) -> Int { 16 }
    }

    // Define a custom segment
    public struct AudioSegment: Transcript.CustomSegment {
        public var id: String
        public var content: URL
    }

    static func audio(session: LanguageModelSession) async throws {
        // Pass it in a prompt
        let recording = AudioSegment(id: UUID().uuidString, content: URL(filePath: "/path/to/recording.m4a"))
        let response = try await session.respond {
            "Where was Frank Lloyd Wright's original architecture school located?"
            recording
        }
        _ = response
    }
}
