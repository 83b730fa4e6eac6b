import Foundation
package import PlinthRuntime

/// An open-weight model that Plinth runs on this machine, in-process, from a GGUF file.
///
/// Create one from the name of a model in Plinth's catalog (which `plinth models fetch NAME`
/// downloads) or from the path of a GGUF file, and pass it to a session:
///
/// ```swift
/// let model = LocalLanguageModel(name: "qwen2.5-coder")
/// guard model.isAvailable else { print(model.availabilityDescription ?? ""); return }
/// let session = LanguageModelSession(model: model, instructions: "Answer briefly.")
/// let answer = try await session.respond(to: "What is a monad?")
/// ```
///
/// The weights load on first use and stay loaded for the life of the process; every session
/// that uses the same file (on the same ``Backend``) shares them. Responses with a schema are decoded under a grammar, so
/// they always parse into the requested type. Turns of one conversation reuse the KV cache of
/// the turns before them.
public struct LocalLanguageModel: Sendable, Hashable {
    /// The catalog name or the file path this model was created with.
    public let name: String
    /// The LoRA adapter every response runs with (a PEFT folder or a GGUF LoRA file), if any.
    /// It is applied unmerged: sessions with different adapters on one model share its steps.
    public let adapter: URL?
    /// The factor on the adapter's update (``LoRAAdapter/scaled(by:)``): 1 as trained.
    package let adapterScale: Float
    /// Where the model runs.
    public let backend: Backend
    /// Sequences decoding at once when this model is first loaded (the backend's default where
    /// nil): `plinth eval --parallel` and `plinth serve --parallel`.
    let parallel: Int?
    /// Tokens per sequence when this model is first loaded (the model's, at most
    /// ``LocalModelInstance/maximumContextLength``, where nil): `--context` of the session commands.
    let contextLength: Int?
    let home: URL

    /// Where a local model's forward steps run. The scheduler, the sampler and the constrained
    /// decoder run on the CPU whatever the backend.
    public enum Backend: String, Sendable, Hashable, CaseIterable {
        /// An NVIDIA GPU when one is usable (its driver, NVRTC and cuBLAS are loaded at run time),
        /// else the CPU, with one line on standard error saying why.
        case auto
        /// The CPU.
        case cpu
        /// An NVIDIA GPU; loading fails with ``LocalLanguageModelError/loadFailed(file:reason:)``
        /// where none is usable.
        case cuda

        /// `PLINTH_BACKEND` (`auto`, `cpu` or `cuda`), else ``auto``.
        public static var `default`: Backend { Backend(PlinthRuntime.Backend.default) }

        package init(_ runtime: PlinthRuntime.Backend) {
            switch runtime {
            case .auto: self = .auto
            case .cpu: self = .cpu
            case .cuda: self = .cuda
            }
        }

        package var runtime: PlinthRuntime.Backend {
            switch self {
            case .auto: .auto
            case .cpu: .cpu
            case .cuda: .cuda
            }
        }
    }

    /// The default model, SmolLM2-135M-Instruct.
    public static var `default`: LocalLanguageModel { LocalLanguageModel(name: ModelCatalog.defaultModelName) }

    /// Creates a model from a catalog name (or alias), or from the path of a GGUF file.
    public init(name: String) {
        self.init(name: name, store: ModelStore())
    }

    /// Creates a model from a GGUF file.
    public init(url: URL) {
        self.init(name: url.path, store: ModelStore())
    }

    /// Creates a model from a catalog name or GGUF path, specialized by the LoRA adapter at
    /// `adapter` (a PEFT folder with `adapter_config.json` and `adapter_model.safetensors`, or
    /// a llama.cpp GGUF LoRA file). The adapter is read, and checked against the model, on
    /// first use: a mismatched one makes responses throw ``LocalLanguageModelError/adapterFailed(adapter:reason:)``.
    public init(name: String, adapter: URL?) {
        self.init(name: name, store: ModelStore(), adapter: adapter)
    }

    /// Creates a model from a catalog name or GGUF path that runs on `backend`, with the
    /// LoRA adapter at `adapter` if one is given.
    public init(name: String, adapter: URL? = nil, backend: Backend) {
        self.init(name: name, store: ModelStore(), adapter: adapter, backend: backend)
    }

    /// A model that, loaded first by this value, runs `parallel` sequences at once of
    /// `contextLength` tokens each (the model's context, at most 4096, where nil; never more
    /// than the model's).
    package init(name: String, adapter: URL?, adapterScale: Float = 1, backend: Backend, parallel: Int?, contextLength: Int? = nil) {
        self.init(name: name, store: ModelStore(), adapter: adapter, adapterScale: adapterScale, backend: backend, parallel: parallel,
                  contextLength: contextLength)
    }

    init(name: String, store: ModelStore, adapter: URL? = nil, adapterScale: Float = 1, backend: Backend = .default, parallel: Int? = nil,
         contextLength: Int? = nil) {
        self.name = name
        self.home = store.home
        self.adapter = adapter
        self.adapterScale = adapterScale
        self.backend = backend
        self.parallel = parallel
        self.contextLength = contextLength
    }

    /// The file of the model, or the error that says why there is none.
    func resolvedURL() throws -> URL {
        do {
            return try ModelStore(home: home).resolve(name)
        } catch let error as ModelStoreError {
            throw LocalLanguageModelError.modelNotFound(error.errorDescription ?? "\(error)")
        }
    }

    /// Whether the model's file is present: `.unavailable(.modelNotReady)` until it is downloaded.
    public var availability: SystemLanguageModel.Availability {
        (try? resolvedURL()) != nil ? .available : .unavailable(.modelNotReady)
    }

    /// Whether the model can be used now.
    public var isAvailable: Bool { availability == .available }

    /// What to do when the model isn't available (for example, the command that downloads it),
    /// or nil when it is.
    public var availabilityDescription: String? {
        do {
            _ = try resolvedURL()
            return nil
        } catch {
            return (error as? LocalizedError)?.errorDescription ?? "\(error)"
        }
    }

    /// The number of tokens the model attends to (prompt and response together). This loads the
    /// model; it is 0 when the model can't be loaded.
    public var contextSize: Int {
        (try? instance().contextSize) ?? 0
    }

    /// The number of tokens transcript entries take in the model's context.
    public func tokenCount(for transcriptEntries: some Collection<Transcript.Entry>) throws -> Int {
        try LocalGeneration.tokenCount(for: Transcript(entries: transcriptEntries), instance: instance())
    }

    /// Drops the prompt prefixes the model keeps cached (requests in flight keep theirs), so
    /// that the next request starts cold: for benchmarks that compare cold runs.
    public func forgetCachedPrompts() throws {
        try instance().scheduler.forgetCachedPrefixes()
    }

    /// The loaded model, shared process-wide.
    func instance() throws -> LocalModelInstance {
        try LocalModelRegistry.instance(for: resolvedURL(), backend: backend.runtime, parallel: parallel, contextLength: contextLength)
    }

    /// Where the loaded model runs (``Backend/cpu`` or ``Backend/cuda``, after `auto` chose)
    /// and how many sequences it decodes at once. This loads the model.
    package func loadedSizing() throws -> (backend: Backend, parallel: Int) {
        let scheduler = try instance().scheduler
        return (Backend(scheduler.backend), scheduler.configuration.maxRunning)
    }

    /// The adapter, read and checked against the loaded model now rather than at the first
    /// response (the model keeps it for its sessions); nil without one.
    ///
    /// - Throws: ``LocalLanguageModelError/adapterFailed(adapter:reason:)`` for an adapter that
    ///   doesn't fit, or the error that says why the model can't load.
    package func loadedAdapter() throws -> LoRAAdapter? {
        guard let adapter else { return nil }
        return try instance().adapter(at: adapter, scale: adapterScale)
    }

    /// Compiles `schema`'s grammar for this model now (it is kept for the responses that use it),
    /// so that a schema the decoder can't enforce fails before any work.
    ///
    /// - Throws: ``LocalLanguageModelError/schemaNotEnforceable(schema:reason:)``, or the error
    ///   that says why the model can't load.
    package func checkEnforceable(_ schema: GenerationSchema) throws {
        _ = try LocalGeneration.grammar(for: schema, instance: instance())
    }
}

extension LocalLanguageModel: LanguageModel {
    public typealias Executor = LocalLanguageModelExecutor

    /// Local models enforce JSON schemas while decoding, and call tools (see ``ToolCallFormat``
    /// for how calls are written and constrained).
    public var capabilities: LanguageModelCapabilities { LanguageModelCapabilities([.guidedGeneration, .toolCalling]) }

    /// The configuration of this model's executor: one per model file location and backend.
    public var executorConfiguration: LocalLanguageModelExecutor.Configuration {
        .init(name: name, home: home, backend: backend)
    }
}

/// The executor of ``LocalLanguageModel``: it renders the transcript with the model's chat
/// template, decodes with Plinth's runtime, and streams text into the session's channel.
public struct LocalLanguageModelExecutor: LanguageModelExecutor {
    public typealias Model = LocalLanguageModel

    /// The values that determine a distinct executor: where the model comes from and where it runs.
    public struct Configuration: Hashable, Sendable {
        let name: String
        let home: URL
        let backend: LocalLanguageModel.Backend
    }

    let configuration: Configuration

    /// Creates an executor. The model loads when it is first used.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Loads the model and prefills the transcript's instructions into its KV cache.
    public func prewarm(model: LocalLanguageModel, transcript: Transcript) {
        Task.detached(priority: .utility) {
            guard let instance = try? model.instance() else { return }
            await LocalGeneration.prewarm(transcript: transcript, instance: instance, adapter: model.adapter,
                                          adapterScale: model.adapterScale)
        }
    }

    /// Generates the next turn of the request with the local model.
    ///
    /// - Throws: ``LocalLanguageModelError`` when the model file is missing or can't be loaded,
    ///   ``LanguageModelError/contextSizeExceeded(_:)`` when the request can't fit the context.
    nonisolated(nonsending) public func respond(to request: LanguageModelExecutorGenerationRequest, model: LocalLanguageModel,
                                                streamingInto channel: LanguageModelExecutorGenerationChannel) async throws {
        try await LocalGeneration.respond(to: request, instance: model.instance(), adapter: model.adapter,
                                         adapterScale: model.adapterScale, streamingInto: channel)
    }
}
