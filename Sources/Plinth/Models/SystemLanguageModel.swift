import Foundation
import Observation
internal import PlinthRuntime

/// The language model that runs on this machine.
///
/// On Apple platforms this is the on-device model of Apple Intelligence. In Plinth it is the
/// default local model (SmolLM2-135M-Instruct, which `plinth models fetch` downloads), run
/// in-process by Plinth's own runtime.
///
/// Check ``availability`` before you use the model, and tell people why it can't be used:
///
/// ```swift
/// switch SystemLanguageModel.default.availability {
/// case .available:
///     // Show your intelligence UI.
/// case .unavailable(.modelNotReady):
///     // The model file isn't downloaded yet: run `plinth models fetch`.
/// case .unavailable(let reason):
///     // Show an alternative UI.
/// }
/// ```
///
/// The model loads on first use and is shared with every ``LocalLanguageModel`` that uses the
/// same file. Generation throws ``LanguageModelSession/GenerationError/assetsUnavailable(_:)``
/// when the file isn't downloaded.
public final class SystemLanguageModel: Sendable {
    let useCase: UseCase
    let guardrails: Guardrails
    let store: ModelStore
    /// The adapter given to ``init(adapter:guardrails:)``.
    let adapter: Adapter?

    init(useCase: UseCase, guardrails: Guardrails, store: ModelStore, adapter: Adapter? = nil) {
        self.useCase = useCase
        self.guardrails = guardrails
        self.store = store
        self.adapter = adapter
    }

    /// The base version of the model.
    ///
    /// The model is specialized for general use: generating text, answering questions, and
    /// extracting and generating structured content.
    public static let `default` = SystemLanguageModel(useCase: .general, guardrails: .default, store: ModelStore())

    /// Creates a system language model for a specific use case.
    ///
    /// ```swift
    /// let model = SystemLanguageModel(useCase: .contentTagging)
    /// let session = LanguageModelSession(model: model)
    /// ```
    public convenience init(useCase: UseCase = .general, guardrails: Guardrails = Guardrails.default) {
        self.init(useCase: useCase, guardrails: guardrails, store: ModelStore())
    }

    /// The availability of the language model.
    public var availability: Availability {
        guard store.isFetched(ModelCatalog.defaultModel) else { return .unavailable(.modelNotReady) }
        guard let engine = SystemLanguageModelEngines.current else { return .unavailable(.deviceNotEligible) }
        return engine.availability(for: self)
    }

    /// A convenience getter to check if the system is entirely ready.
    public var isAvailable: Bool {
        availability == .available
    }

    /// Languages that the model supports.
    public var supportedLanguages: Set<Locale.Language> {
        SystemLanguageModelEngines.current?.supportedLanguages ?? [Locale.Language(identifier: "en")]
    }

    /// Returns a Boolean indicating whether the given locale is supported by the model.
    ///
    /// Use this method over ``supportedLanguages`` to check whether the given locale qualifies
    /// a user for using this model, as this method will take into consideration language
    /// fallbacks.
    public func supportsLocale(_ locale: Locale = Locale.current) -> Bool {
        guard let code = locale.language.languageCode else { return false }
        return supportedLanguages.contains { $0.languageCode == code }
    }

    /// The number of tokens the model can attend to: instructions, prompts, tool outputs and
    /// responses together.
    ///
    /// This is 4,096 tokens (the context size Apple documents for its on-device model, and the
    /// cap of Plinth's local models) until the model is loaded.
    public var contextSize: Int {
        SystemLanguageModelEngines.current?.contextSize ?? 4096
    }

    /// The number of tokens a prompt takes in the model's context.
    public func tokenCount(for prompt: some PromptRepresentable) async throws -> Int {
        try await tokenCount(entries: [.prompt(Transcript.Prompt(segments: prompt.promptRepresentation.segments))])
    }

    /// The number of tokens instructions take in the model's context.
    public func tokenCount(for instructions: Instructions) async throws -> Int {
        try await tokenCount(entries: [.instructions(Transcript.Instructions(segments: instructions.segments, toolDefinitions: []))])
    }

    /// The number of tokens the definitions of tools take in the model's context.
    public func tokenCount(for tools: [any Tool]) async throws -> Int {
        let definitions = tools.map { Transcript.ToolDefinition(tool: $0) }
        return try await tokenCount(entries: [.instructions(Transcript.Instructions(segments: [], toolDefinitions: definitions))])
    }

    /// The number of tokens a schema takes in the model's context when the session includes
    /// it in the prompt.
    public func tokenCount(for schema: GenerationSchema) async throws -> Int {
        try await tokenCount(entries: [.prompt(Transcript.Prompt(segments: [], responseFormat: .init(schema: schema)))])
    }

    /// The number of tokens transcript entries take in the model's context.
    public func tokenCount(for transcriptEntries: some Collection<Transcript.Entry>) async throws -> Int {
        try await tokenCount(entries: Array(transcriptEntries))
    }

    private func tokenCount(entries: [Transcript.Entry]) async throws -> Int {
        guard let engine = SystemLanguageModelEngines.current else {
            throw Error.assetsUnavailable(.init(debugDescription: SystemLanguageModelEngines.missingMessage))
        }
        return try await engine.tokenCount(for: Transcript(entries: entries), model: self)
    }
}

extension SystemLanguageModel: Observable {}

extension SystemLanguageModel {
    /// A type that represents the use case for prompting.
    public struct UseCase: Sendable, Equatable, Hashable {
        let name: String

        /// A use case for general prompting.
        ///
        /// This is the default use case for the base version of the model, so if you use
        /// ``SystemLanguageModel/default``, you don't need to specify a use case.
        public static let general = UseCase(name: "general")

        /// A use case for content tagging.
        ///
        /// Content tagging produces a list of categorizing tags based on the input prompt.
        /// When specializing the model for the `contentTagging` use case, it always responds
        /// with tags.
        public static let contentTagging = UseCase(name: "contentTagging")
    }

    /// Guardrails flag sensitive content from model input and output.
    public struct Guardrails: Sendable, Hashable {
        let name: String

        /// Default guardrails.
        public static let `default` = Guardrails(name: "default")

        /// Guardrails that allow for permissively transforming text input, including
        /// potentially unsafe content, to text responses, such as summarizing an article.
        public static let permissiveContentTransformations = Guardrails(name: "permissiveContentTransformations")
    }

    /// The availability status for a specific system language model.
    @frozen
    public enum Availability: Equatable, Sendable {
        /// The system is ready for making requests.
        case available
        /// Indicates that the system is not ready for requests.
        case unavailable(UnavailableReason)

        /// The reason the model is unavailable.
        public enum UnavailableReason: Equatable, Sendable, Hashable {
            /// The machine can't run the model: on Linux, this build of Plinth has no executor
            /// for the local model.
            case deviceNotEligible
            /// The system has turned the model off. Plinth doesn't report this on Linux.
            case appleIntelligenceNotEnabled
            /// The model isn't ready yet: on Linux, the model file isn't downloaded. Run
            /// `plinth models fetch` to download it.
            case modelNotReady
        }
    }

    /// Errors of the system language model.
    public enum Error: LocalizedError {
        /// The model's assets (its file, or an executor to run it) are unavailable.
        case assetsUnavailable(SystemLanguageModel.Error.AssetsUnavailable)

        /// The context of an `assetsUnavailable` error.
        public struct AssetsUnavailable: Sendable {
            /// A description for developers.
            public var debugDescription: String

            /// Creates the context.
            public init(debugDescription: String) {
                self.debugDescription = debugDescription
            }
        }

        /// A string representation of the error description.
        public var errorDescription: String? {
            switch self {
            case .assetsUnavailable(let c): "The language model is not available: \(c.debugDescription)"
            }
        }
    }
}

extension SystemLanguageModel.Error: CustomDebugStringConvertible {
    /// A description of the error for developers.
    public var debugDescription: String {
        switch self {
        case .assetsUnavailable(let c): c.debugDescription
        }
    }
}

extension SystemLanguageModel: LanguageModel {
    /// Plinth's local models enforce JSON Schema while decoding and call tools.
    public var capabilities: LanguageModelCapabilities {
        LanguageModelCapabilities([.guidedGeneration, .toolCalling])
    }

    /// The configuration of the executor for this model's use case and guardrails.
    public var executorConfiguration: Executor.Configuration {
        Executor.Configuration(useCase: useCase, guardrails: guardrails, adapter: adapter)
    }

    /// The executor that runs the system language model.
    public struct Executor: LanguageModelExecutor {
        public typealias Model = SystemLanguageModel

        /// The values that determine a distinct executor: the use case and the guardrails.
        public struct Configuration: Hashable & Sendable {
            let useCase: UseCase
            let guardrails: Guardrails
            let adapter: Adapter?
        }

        let configuration: Configuration

        /// Creates an executor.
        public init(configuration: Configuration) {
            self.configuration = configuration
        }

        /// Prepares the local model for the transcript.
        public func prewarm(model: SystemLanguageModel, transcript: Transcript) {
            SystemLanguageModelEngines.current?.prewarm(model: model, transcript: transcript)
        }

        /// Generates a turn with the local model.
        ///
        /// - Throws: ``SystemLanguageModel/Error/assetsUnavailable(_:)`` when the model file
        ///   isn't downloaded or no local executor is installed.
        nonisolated(nonsending) public func respond(to request: LanguageModelExecutorGenerationRequest,
                                                    model: SystemLanguageModel,
                                                    streamingInto channel: LanguageModelExecutorGenerationChannel) async throws {
            guard model.store.isFetched(ModelCatalog.defaultModel) else {
                throw Error.assetsUnavailable(.init(debugDescription:
                    "The model file \(ModelCatalog.defaultModelName) isn't downloaded: run `plinth models fetch`."))
            }
            guard let engine = SystemLanguageModelEngines.current else {
                throw Error.assetsUnavailable(.init(debugDescription: SystemLanguageModelEngines.missingMessage))
            }
            try await engine.respond(to: request, model: model, streamingInto: channel)
        }
    }
}

/// The engine that runs ``SystemLanguageModel`` on this machine: Plinth's local runtime, or
/// one a task scopes for itself (``SystemLanguageModelEngines/with(_:_:)``). Where a task scopes
/// none, the system model is unavailable and generation throws a clear error.
protocol SystemLanguageModelEngine: Sendable {
    func availability(for model: SystemLanguageModel) -> SystemLanguageModel.Availability
    var contextSize: Int { get }
    var supportedLanguages: Set<Locale.Language> { get }
    func prewarm(model: SystemLanguageModel, transcript: Transcript)
    func respond(to request: LanguageModelExecutorGenerationRequest, model: SystemLanguageModel,
                 streamingInto channel: LanguageModelExecutorGenerationChannel) async throws
    func tokenCount(for transcript: Transcript, model: SystemLanguageModel) async throws -> Int
}

enum SystemLanguageModelEngines {
    /// Plinth's own runtime serves the system model unless a task scoped another (``with(_:_:)``).
    static let local: any SystemLanguageModelEngine = LocalSystemLanguageModelEngine()

    /// An engine (or none) for one task and its child tasks only (``with(_:_:)``).
    private struct Scoped: Sendable { let engine: (any SystemLanguageModelEngine)? }
    @TaskLocal private static var scoped: Scoped?

    static var current: (any SystemLanguageModelEngine)? {
        if let scoped { return scoped.engine }
        return local
    }

    /// Runs `body` with `engine` (nil: none) as the current engine for this task alone, so that
    /// tests running side by side do not see each other's engines.
    static func with<T>(_ engine: (any SystemLanguageModelEngine)?, _ body: () async throws -> T) async rethrows -> T {
        try await $scoped.withValue(Scoped(engine: engine), operation: body)
    }

    static let missingMessage =
        "This build of Plinth has no executor for the local model yet; pass another LanguageModel to the session."
}
