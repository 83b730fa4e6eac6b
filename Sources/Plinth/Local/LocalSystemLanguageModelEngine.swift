import Foundation
internal import PlinthRuntime

/// Serves ``SystemLanguageModel`` with the default local model from the system model's store:
/// the engine installed unless something else is.
struct LocalSystemLanguageModelEngine: SystemLanguageModelEngine {
    private func model(for system: SystemLanguageModel) -> LocalLanguageModel {
        LocalLanguageModel(name: ModelCatalog.defaultModelName, store: system.store, adapter: system.adapterURL)
    }

    func availability(for model: SystemLanguageModel) -> SystemLanguageModel.Availability {
        self.model(for: model).availability
    }

    /// The context of the loaded default model; before it loads, the cap every local model has.
    var contextSize: Int {
        let model = LocalLanguageModel.default
        if let url = try? model.resolvedURL(), LocalModelRegistry.isLoaded(url, backend: model.backend.runtime), let instance = try? model.instance() {
            return instance.contextSize
        }
        return LocalModelInstance.maximumContextLength
    }

    /// SmolLM2 is trained on English text.
    var supportedLanguages: Set<Locale.Language> { [Locale.Language(identifier: "en")] }

    func prewarm(model: SystemLanguageModel, transcript: Transcript) {
        let local = self.model(for: model)
        Task.detached(priority: .utility) {
            guard let instance = try? local.instance() else { return }
            await LocalGeneration.prewarm(transcript: transcript, instance: instance, adapter: local.adapter)
        }
    }

    func respond(to request: LanguageModelExecutorGenerationRequest, model: SystemLanguageModel,
                 streamingInto channel: LanguageModelExecutorGenerationChannel) async throws {
        let instance: LocalModelInstance
        let local = self.model(for: model)
        do {
            instance = try local.instance()
        } catch let error as LocalLanguageModelError {
            throw SystemLanguageModel.Error.assetsUnavailable(.init(debugDescription: error.errorDescription ?? "\(error)"))
        }
        // A system model's adapter is made for it: one naming another base model doesn't run
        // (as `compile()` and `isCompatible(_:)` say), whatever its shapes.
        if let url = local.adapter, let note = try instance.adapter(at: url).baseModelNote {
            throw LocalLanguageModelError.adapterFailed(adapter: url.path, reason: note)
        }
        try await LocalGeneration.respond(to: request, instance: instance, adapter: local.adapter, streamingInto: channel)
    }

    func tokenCount(for transcript: Transcript, model: SystemLanguageModel) async throws -> Int {
        let instance: LocalModelInstance
        do {
            instance = try self.model(for: model).instance()
        } catch let error as LocalLanguageModelError {
            throw SystemLanguageModel.Error.assetsUnavailable(.init(debugDescription: error.errorDescription ?? "\(error)"))
        }
        return try LocalGeneration.tokenCount(for: transcript, instance: instance)
    }
}
