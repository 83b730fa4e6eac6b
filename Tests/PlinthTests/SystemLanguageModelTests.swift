import Foundation
import FoundationModels
@testable import Plinth
import PlinthRuntime
import Testing

/// An engine that stands in for the local executor of issue 6.
struct FakeEngine: SystemLanguageModelEngine {
    func availability(for model: SystemLanguageModel) -> SystemLanguageModel.Availability { .available }
    var contextSize: Int { 8192 }
    var supportedLanguages: Set<Locale.Language> { [Locale.Language(identifier: "en"), Locale.Language(identifier: "de")] }
    func prewarm(model: SystemLanguageModel, transcript: Transcript) {}
    func respond(to request: LanguageModelExecutorGenerationRequest, model: SystemLanguageModel,
                 streamingInto channel: LanguageModelExecutorGenerationChannel) async throws {
        let tags = model.useCase == .contentTagging ? #"{"tags": ["swift", "linux"]}"# : "general"
        await channel.send(.response(action: .appendText(tags, tokenCount: 3)))
    }
    func tokenCount(for transcript: Transcript, model: SystemLanguageModel) async throws -> Int {
        transcript.map(\.description).joined(separator: " ").split(separator: " ").count
    }
}

@Generable
struct Tags {
    var tags: [String]
}

/// This process's scratch stores, removed when it exits.
private let scratchStores: URL = {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-api-\(getpid())")
    atexit { try? FileManager.default.removeItem(at: scratchStores) }
    return root
}()

/// A model store with a verified copy of the default model's file, without the real bytes.
func storeWithDefaultModel() throws -> ModelStore {
    let home = scratchStores.appendingPathComponent(UUID().uuidString)
    let store = ModelStore(home: home)
    let entry = ModelCatalog.defaultModel
    try FileManager.default.createDirectory(at: store.directory(for: entry), withIntermediateDirectories: true)
    FileManager.default.createFile(atPath: store.path(for: entry).path, contents: nil)
    let handle = try FileHandle(forWritingTo: store.path(for: entry))
    try handle.truncate(atOffset: UInt64(entry.size))
    try handle.close()
    try entry.sha256.write(to: store.path(for: entry).appendingPathExtension("sha256"), atomically: true, encoding: .utf8)
    return store
}

@Suite(.serialized) struct SystemLanguageModelTests {
    func describe(_ model: SystemLanguageModel) -> String {
        switch model.availability {
        case .available: "available"
        case .unavailable(.deviceNotEligible): "no executor"
        case .unavailable(.appleIntelligenceNotEnabled): "turned off"
        case .unavailable(.modelNotReady): "not downloaded"
        case .unavailable(let other): "unavailable: \(other)"
        }
    }

    @Test func availabilitySwitch() async throws {
        let empty = ModelStore(home: FileManager.default.temporaryDirectory.appendingPathComponent("plinth-empty-\(UUID().uuidString)"))
        let missing = SystemLanguageModel(useCase: .general, guardrails: .default, store: empty)
        #expect(describe(missing) == "not downloaded")
        #expect(!missing.isAvailable)

        let present = SystemLanguageModel(useCase: .general, guardrails: .default, store: try storeWithDefaultModel())
        // The local engine is installed by default: a present file is enough.
        #expect(describe(present) == "available")
        #expect(describe(missing) == "not downloaded")

        await SystemLanguageModelEngines.with(nil) {
            #expect(describe(present) == "no executor")
        }
        await SystemLanguageModelEngines.with(FakeEngine()) {
            #expect(describe(present) == "available")
            #expect(present.isAvailable)
            #expect(present.contextSize == 8192)
            #expect(present.supportsLocale(Locale(identifier: "de_DE")))
            #expect(!present.supportsLocale(Locale(identifier: "ja_JP")))
        }
    }

    @Test func defaultSessionOnLinuxWithoutAnExecutorThrowsAClearError() async throws {
        await SystemLanguageModelEngines.with(nil) {
            let session = LanguageModelSession()
            let error = await #expect(throws: LanguageModelSession.GenerationError.self) {
                try await session.respond(to: "Hello")
            }
            guard case .assetsUnavailable(let context)? = error else {
                Issue.record("expected assetsUnavailable, got \(String(describing: error))")
                return
            }
            #expect(!context.debugDescription.isEmpty)
            #expect(error?.recoverySuggestion?.contains("plinth models fetch") == true)
            #expect(session.transcript.isEmpty)
        }
    }

    @Test func withoutAnExecutor() async throws {
        await SystemLanguageModelEngines.with(nil) {
            let model = SystemLanguageModel.default
            #expect(model.contextSize == 4096)
            #expect(model.supportedLanguages.contains(Locale.Language(identifier: "en")))
            #expect(model.supportsLocale(Locale(identifier: "en_US")))
            #expect(model.capabilities.contains(.guidedGeneration))
            await #expect(throws: SystemLanguageModel.Error.self) { try await model.tokenCount(for: "Hello") }
            let error = SystemLanguageModel.Error.assetsUnavailable(.init(debugDescription: "missing"))
            #expect(error.errorDescription == "The language model is not available: missing")
            #expect(error.debugDescription == "missing")
        }
    }

    @Test func contentTaggingUseCase() async throws {
        let model = SystemLanguageModel(useCase: .contentTagging, guardrails: .permissiveContentTransformations,
                                        store: try storeWithDefaultModel())
        try await SystemLanguageModelEngines.with(FakeEngine()) {
            let session = LanguageModelSession(model: model, instructions: "Tag the text.")
            let response = try await session.respond(to: "Swift runs on Linux.", generating: Tags.self)
            #expect(response.content.tags == ["swift", "linux"])
            #expect(SystemLanguageModel(useCase: .contentTagging).executorConfiguration
                    != SystemLanguageModel.default.executorConfiguration)
        }
    }

    @Test func tokenCounts() async throws {
        try await SystemLanguageModelEngines.with(FakeEngine()) { () async throws in
            let model = SystemLanguageModel.default
            #expect(try await model.tokenCount(for: "one two three") == 4)
            #expect(try await model.tokenCount(for: Instructions("be brief")) == 3)
            #expect(try await model.tokenCount(for: [GetWeatherTool()] as [any Tool]) >= 1)
            #expect(try await model.tokenCount(for: SearchSuggestions.generationSchema) >= 1)
            let entries = [Transcript.Entry.prompt(Transcript.Prompt(segments: [.text(.init(content: "a b"))]))]
            #expect(try await model.tokenCount(for: entries) == 3)
        }
    }

    /// Code written for Xcode 26 catches GenerationError from a system-model session.
    @Test func systemModelSessionsReportXcode26Errors() async throws {
        let system = SystemLanguageModel.default
        func mapped(_ error: LanguageModelError) -> LanguageModelSession.GenerationError? {
            LanguageModelSession.sessionError(error, model: system) as? LanguageModelSession.GenerationError
        }
        if case .exceededContextWindowSize(let c)? = mapped(.contextSizeExceeded(.init(contextSize: 4096, tokenCount: 5000, debugDescription: "long"))) {
            #expect(c.debugDescription.contains("5000"))
        } else { Issue.record("contextSizeExceeded") }
        if case .rateLimited? = mapped(.rateLimited(.init(resetDate: nil, debugDescription: "slow"))) {} else { Issue.record("rateLimited") }
        if case .guardrailViolation? = mapped(.guardrailViolation(.init(debugDescription: "no"))) {} else { Issue.record("guardrail") }
        if case .refusal(let refusal, _)? = mapped(.refusal(.init(explanation: "I can't help with that.", debugDescription: "x"))) {
            #expect(try await refusal.explanation.content == "I can't help with that.")
            var text = ""
            for try await snapshot in refusal.explanationStream { text = snapshot.content }
            #expect(text == "I can't help with that.")
        } else { Issue.record("refusal") }
        if case .unsupportedLanguageOrLocale? = mapped(.unsupportedLanguageOrLocale(.init(languageCode: "fr", debugDescription: "fr"))) {} else {
            Issue.record("language")
        }
        if case .unsupportedGuide? = mapped(.unsupportedGenerationGuide(.init(schemaName: "X", debugDescription: "guide"))) {} else {
            Issue.record("guide")
        }
        // Without an Xcode 26 counterpart, and on any other model, the error stays as it is.
        #expect(LanguageModelSession.sessionError(LanguageModelError.timeout(.init(debugDescription: "t")), model: system) is LanguageModelError)
        let other = LanguageModelSession.sessionError(LanguageModelError.rateLimited(.init(resetDate: nil, debugDescription: "s")),
                                                      model: PrivateCloudComputeLanguageModel())
        #expect(other is LanguageModelError)
    }

    @Test func missingDefaultModelWithTheLocalEngine() async throws {
        let empty = ModelStore(home: FileManager.default.temporaryDirectory.appendingPathComponent("plinth-empty-\(UUID().uuidString)"))
        let model = SystemLanguageModel(useCase: .general, guardrails: .default, store: empty)
        let session = LanguageModelSession(model: model)
        let error = await #expect(throws: LanguageModelSession.GenerationError.self) { try await session.respond(to: "Hi") }
        guard case .assetsUnavailable(let context)? = error else {
            Issue.record("expected assetsUnavailable, got \(String(describing: error))")
            return
        }
        #expect(context.debugDescription.contains("plinth models fetch"))
    }

    @Test(.enabled(if: LocalTestModels.hasSmolLM2, LocalTestModels.smolLM2Missing))
    func defaultModelRunsLocally() async throws {
        let model = SystemLanguageModel.default
        #expect(model.availability == .available)
        let session = LanguageModelSession(instructions: "Answer in one word.")
        let response = try await session.respond(to: "What colour is the sky?",
                                                 options: GenerationOptions(sampling: .greedy, maximumResponseTokens: 8))
        #expect(!response.content.isEmpty)
        #expect(response.usage.output.totalTokenCount > 0)
        let weather = try await session.respond(to: "And the weather?", generating: LocalWeather.self,
                                                options: GenerationOptions(sampling: .greedy, maximumResponseTokens: 48))
        #expect((-20...40).contains(weather.content.celsius))
        #expect(try await model.tokenCount(for: "Hello there") > 2)
        #expect(model.contextSize == 4096)
    }
}
