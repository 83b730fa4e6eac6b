import Foundation
import Synchronization

/// A language model that a session can use to respond to prompts.
///
/// A model describes what it can do (its ``capabilities``) and how to run it (its
/// ``executorConfiguration``). The session creates the model's ``Executor`` from that
/// configuration, keeps one executor per unique configuration, and drives it through
/// ``LanguageModelExecutor/respond(to:model:streamingInto:)`` for every turn of a request.
///
/// ```swift
/// struct EchoModel: LanguageModel {
///     typealias Executor = EchoExecutor
///     var capabilities: LanguageModelCapabilities { LanguageModelCapabilities([]) }
///     var executorConfiguration: EchoExecutor.Configuration { .init() }
/// }
/// let session = LanguageModelSession(model: EchoModel())
/// ```
public protocol LanguageModel: Sendable {
    /// The type that runs the model.
    associatedtype Executor: LanguageModelExecutor where Self == Self.Executor.Model

    /// What the model can do.
    var capabilities: LanguageModelCapabilities { get }

    /// The configuration the session creates the executor with.
    var executorConfiguration: Self.Executor.Configuration { get }
}

/// A type that runs a language model: it turns a generation request into a stream of events.
///
/// The session creates an executor with ``init(configuration:)`` and caches one executor per
/// unique configuration. For each turn of a request, it calls
/// ``respond(to:model:streamingInto:)`` and reads the events the executor sends into the
/// channel: text appended to the response, tool calls, reasoning, usage and metadata. The
/// session handles everything else: it calls tools, appends entries to the transcript, makes
/// snapshots for streaming responses, and converts the response to the requested type.
///
/// An executor must stop promptly when its task is cancelled (check `Task.isCancelled` or call
/// `Task.checkCancellation()` between tokens); the session then leaves the transcript as it
/// was before the request.
public protocol LanguageModelExecutor: Sendable {
    /// The values that determine a distinct executor.
    associatedtype Configuration: Hashable & Sendable
    /// The model this executor runs.
    associatedtype Model: LanguageModel

    /// Prepares to respond to a transcript, for example by loading the model and processing
    /// the transcript's prefix. The default implementation does nothing.
    func prewarm(model: Self.Model, transcript: Transcript)

    /// Creates an executor.
    init(configuration: Self.Configuration) throws

    /// Generates the next turn of the request's transcript, sending events into the channel.
    ///
    /// - Parameters:
    ///   - request: The transcript so far, the tools the model may call, the schema the
    ///     response must follow (if any), and the options.
    ///   - model: The model to run.
    ///   - channel: The channel to send the response, tool calls, reasoning and usage into.
    /// - Throws: A ``LanguageModelError`` for problems with the request or the model.
    nonisolated(nonsending) func respond(to request: LanguageModelExecutorGenerationRequest, model: Self.Model,
                                         streamingInto channel: LanguageModelExecutorGenerationChannel) async throws
}

extension LanguageModelExecutor {
    /// Does nothing.
    public func prewarm(model: Self.Model, transcript: Transcript) {}
}

/// One executor per executor type and unique configuration, created on first use.
final class ExecutorCache: Sendable {
    static let shared = ExecutorCache()

    private let executors = Mutex<[ObjectIdentifier: any Sendable]>([:])

    func executor<E: LanguageModelExecutor>(_ type: E.Type, configuration: E.Configuration) throws -> E {
        try executors.withLock { table in
            var byConfiguration = table[ObjectIdentifier(E.self)] as? [E.Configuration: E] ?? [:]
            if let executor = byConfiguration[configuration] { return executor }
            let executor = try E(configuration: configuration)
            byConfiguration[configuration] = executor
            table[ObjectIdentifier(E.self)] = byConfiguration
            return executor
        }
    }

    /// Runs one turn of a request on a model, with its cached executor.
    static func respond<M: LanguageModel>(_ model: M, to request: LanguageModelExecutorGenerationRequest,
                                          streamingInto channel: LanguageModelExecutorGenerationChannel) async throws {
        let executor = try shared.executor(M.Executor.self, configuration: model.executorConfiguration)
        try await executor.respond(to: request, model: model, streamingInto: channel)
    }

    static func prewarm<M: LanguageModel>(_ model: M, transcript: Transcript) {
        guard let executor = try? shared.executor(M.Executor.self, configuration: model.executorConfiguration) else { return }
        executor.prewarm(model: model, transcript: transcript)
    }
}
