import Foundation
import Observation
import Synchronization

/// An object that represents a session that interacts with a language model.
///
/// A session is a single context that you use to generate content with, and maintains state
/// between requests. You can reuse the existing instance or create a new one each time you
/// call the model. When you create a session you can provide instructions that tells the
/// model what its role is and provides guidance on how to respond.
///
/// ```swift
/// let session = LanguageModelSession(instructions: """
///     You are a motivational workout coach that provides quotes to inspire \
///     and motivate athletes.
///     """
/// )
/// let prompt = "Generate a motivational quote for my next workout."
/// let response = try await session.respond(to: prompt)
/// ```
///
/// The framework records each call to the model in a ``Transcript`` that includes all
/// prompts and responses. If your session exceeds the available context size, it throws
/// ``GenerationError/exceededContextWindowSize(_:)``.
///
/// A session answers one request at a time: a second request while one is running throws
/// ``GenerationError/concurrentRequests(_:)``. Cancelling the task that awaits a response
/// stops generation and leaves the transcript as it was before the request; a request made
/// while a cancelled one is still ending waits for it instead of throwing.
///
/// Errors: a session on ``SystemLanguageModel`` reports the errors of its executor that have an
/// Xcode 26 counterpart as ``GenerationError`` (for example
/// ``LanguageModelError/contextSizeExceeded(_:)`` as ``GenerationError/exceededContextWindowSize(_:)``),
/// the others (`unsupportedCapability`, `unsupportedTranscriptContent`, `timeout`) as
/// ``LanguageModelError``. A session on a model of your own throws the model's
/// ``LanguageModelError`` as it is, as in Xcode 27, where `GenerationError` is deprecated.
public final class LanguageModelSession: @unchecked Sendable {
    // `@unchecked`: every mutable property lives in `state`, behind a mutex.
    /// The model, unless a profile chooses another.
    let model: any LanguageModel
    /// The tools of a session without a profile, and their definitions.
    let tools: [any Tool]
    let toolDefinitions: [Transcript.ToolDefinition]
    /// The dynamic profile (or dynamic instructions) resolved before each model request.
    let profile: AnyDynamicProfile?
    let state: Mutex<State>
    let registrar = ObservationRegistrar()
    let propertyValues = SessionPropertyValues()

    struct State {
        var transcript: Transcript
        var isResponding = false
        /// Someone other than the request under way changed the transcript: the request stops
        /// with ``LanguageModelSession/Error/transcriptMutationWhileResponding``.
        var mutatedWhileResponding = false
        /// Counts requests, so that a late cancellation handler marks only its own.
        var requestNumber: UInt64 = 0
        /// The request under way was cancelled (its task, or its stream dropped) and is
        /// unwinding: a new request waits for it instead of failing as concurrent.
        var requestCancelled = false
        /// Requests waiting for a cancelled one to end, by number.
        var idleWaiters: [(id: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
        var nextWaiter: UInt64 = 0
        /// Waiters whose task was cancelled before they began to wait.
        var cancelledWaiters: Set<UInt64> = []
        var usage = Usage.zero
        var transcriptErrorHandlingPolicy: TranscriptErrorHandlingPolicy?
        /// The profiles the last resolution found active (their places and deactivation
        /// callbacks), outermost first.
        var activeProfiles: [ProfileResolution.Lifecycle] = []
    }

    /// The most rounds of tool calls in one request; after that, the model answers without
    /// tools.
    static let maximumToolRounds = 10

    init(anyModel: any LanguageModel, tools: [any Tool], transcript: Transcript, profile: AnyDynamicProfile? = nil) {
        self.model = anyModel
        self.tools = tools
        self.toolDefinitions = tools.map { Transcript.ToolDefinition(tool: $0) }
        self.profile = profile
        self.state = Mutex(State(transcript: transcript))
        propertyValues.attach(to: self)
        if profile != nil {
            // The instructions entry is there from the start, as with static instructions.
            let configuration = dynamicConfiguration()
            state.withLock { $0.transcript.setLeadingInstructions(configuration.instructions) }
        }
    }

    static func initialTranscript(tools: [any Tool], instructions: Instructions?) -> Transcript {
        Transcript(entries: instructionsEntry(instructions, definitions: tools.map { Transcript.ToolDefinition(tool: $0) })
            .map { [.instructions($0)] } ?? [])
    }

    /// The instructions entry of instructions and tools; none without either.
    static func instructionsEntry(_ instructions: Instructions?, definitions: [Transcript.ToolDefinition]) -> Transcript.Instructions? {
        guard instructions != nil || !definitions.isEmpty else { return nil }
        return Transcript.Instructions(segments: instructions?.segments ?? [], toolDefinitions: definitions)
    }

    /// Start a new session in blank slate state with string-based instructions.
    ///
    /// - Parameters:
    ///   - model: The language model to use for this session.
    ///   - tools: Tools to make available to the model for this session.
    ///   - instructions: Instructions that control the model's behavior.
    public convenience init(model: SystemLanguageModel = .default, tools: [any Tool] = [], instructions: String? = nil) {
        self.init(anyModel: model, tools: tools,
                  transcript: Self.initialTranscript(tools: tools, instructions: instructions.map(Instructions.init)))
    }

    /// Start a new session in blank slate state with instructions builder.
    ///
    /// - Parameters:
    ///   - model: The language model to use for this session.
    ///   - tools: Tools to make available to the model for this session.
    ///   - instructions: Instructions that control the model's behavior.
    public convenience init(model: SystemLanguageModel = .default, tools: [any Tool] = [],
                            @InstructionsBuilder instructions: () throws -> Instructions) rethrows {
        self.init(anyModel: model, tools: tools, transcript: Self.initialTranscript(tools: tools, instructions: try instructions()))
    }

    /// Start a new session in blank slate state with instructions.
    ///
    /// - Parameters:
    ///   - model: The language model to use for this session.
    ///   - tools: Tools to make available to the model for this session.
    ///   - instructions: Instructions that control the model's behavior.
    @_disfavoredOverload
    public convenience init(model: SystemLanguageModel = .default, tools: [any Tool] = [], instructions: Instructions? = nil) {
        self.init(anyModel: model, tools: tools, transcript: Self.initialTranscript(tools: tools, instructions: instructions))
    }

    /// Start a session by rehydrating from a transcript.
    ///
    /// ```swift
    /// let condensed = Transcript(entries: [session.transcript.first!, session.transcript.last!])
    /// let newSession = LanguageModelSession(transcript: condensed)
    /// ```
    ///
    /// - Parameters:
    ///   - model: The language model to use for this session.
    ///   - tools: Tools to make available to the model for this session.
    ///   - transcript: A transcript that resumes the session.
    public convenience init(model: SystemLanguageModel = .default, tools: [any Tool] = [], transcript: Transcript) {
        self.init(anyModel: model, tools: tools, transcript: transcript)
    }

    /// Start a session with new instructions and tools over an earlier conversation: the
    /// transcript's own leading instructions are replaced (WWDC26's session code writes this
    /// initializer; the Xcode 27 beta interface doesn't list it yet).
    ///
    /// - Parameters:
    ///   - model: The language model to use for this session.
    ///   - tools: Tools to make available to the model for this session.
    ///   - instructions: Instructions that control the model's behavior.
    ///   - transcript: The conversation to continue.
    public convenience init(model: some LanguageModel = SystemLanguageModel.default, tools: [any Tool] = [],
                            instructions: String?, transcript: Transcript) {
        var full = Self.initialTranscript(tools: tools, instructions: instructions.map(Instructions.init))
        full.append(contentsOf: transcript.history)
        self.init(anyModel: model, tools: tools, transcript: full)
    }

    /// Start a new session with a language model of your choice and an instructions builder.
    public convenience init<Failure>(model: some LanguageModel, tools: [any Tool] = [],
                                     @InstructionsBuilder instructions: () throws(Failure) -> Instructions) throws(Failure)
    where Failure: Swift.Error {
        self.init(anyModel: model, tools: tools, transcript: Self.initialTranscript(tools: tools, instructions: try instructions()))
    }

    /// Start a session with a language model of your choice from a transcript.
    public convenience init(model: some LanguageModel, tools: [any Tool] = [], transcript: Transcript) {
        self.init(anyModel: model, tools: tools, transcript: transcript)
    }

    /// Start a new session with a language model of your choice and instructions.
    @_disfavoredOverload
    public convenience init(model: some LanguageModel, tools: [any Tool] = [], instructions: Instructions? = nil) {
        self.init(anyModel: model, tools: tools, transcript: Self.initialTranscript(tools: tools, instructions: instructions))
    }

    /// Start a new session with a language model of your choice and string-based
    /// instructions.
    public convenience init(model: some LanguageModel, tools: [any Tool] = [], instructions: String? = nil) {
        self.init(anyModel: model, tools: tools,
                  transcript: Self.initialTranscript(tools: tools, instructions: instructions.map(Instructions.init)))
    }

    /// Create a session with a profile.
    ///
    /// The profile is resolved again before every model request: its instructions become the
    /// transcript's leading instructions entry, and its model, tools and settings are the
    /// request's.
    ///
    /// - Parameters:
    ///   - profile: The profile to use for this session.
    ///   - history: Transcript entries without the initial instructions, since that's defined
    ///     by the profile.
    public convenience init(profile: sending some LanguageModelSession.DynamicProfile,
                            history: some Collection<Transcript.Entry> = []) {
        self.init(anyModel: SystemLanguageModel.default, tools: [], transcript: Transcript(entries: history),
                  profile: AnyDynamicProfile(erasing: profile))
    }

    /// Create a session with dynamic instructions.
    ///
    /// The instructions are evaluated again before every model request.
    ///
    /// - Parameters:
    ///   - model: The language model to use for this session.
    ///   - dynamicInstructions: The instructions to use for this session.
    ///   - history: Transcript entries without the initial instructions, since that's defined
    ///     by the profile.
    public convenience init(model: some LanguageModel = SystemLanguageModel.default,
                            dynamicInstructions: sending some DynamicInstructions,
                            history: some Collection<Transcript.Entry> = []) {
        let instructions = AnyDynamicInstructions(erasing: dynamicInstructions)
        self.init(anyModel: model, tools: [], transcript: Transcript(entries: history),
                  profile: AnyDynamicProfile(erasing: Profile { instructions }))
    }

    /// The session's property values: its history and the custom entries of
    /// ``SessionPropertyValues``.
    public var properties: SessionPropertyValues { propertyValues }

    /// A full history of interactions, including user inputs and model responses.
    ///
    /// Replace it while the session isn't responding: a change while it responds is kept, and
    /// the request under way stops with
    /// ``LanguageModelSession/Error/transcriptMutationWhileResponding`` without writing to it.
    public var transcript: Transcript {
        get {
            registrar.access(self, keyPath: \.transcript)
            return state.withLock { $0.transcript }
        }
        set { updateTranscript(fromOutside: true) { $0 = newValue } }
    }

    /// A Boolean value that indicates a response is being generated.
    ///
    /// - Important: Attempting to call any of the respond methods while this property is
    ///   `true` is a programmer error.
    public var isResponding: Bool {
        registrar.access(self, keyPath: \.isResponding)
        return state.withLock { $0.isResponding }
    }

    /// The tokens this session used so far, over all its requests.
    public var usage: Usage {
        registrar.access(self, keyPath: \.usage)
        return state.withLock { $0.usage }
    }

    /// What happens to the transcript when a request fails or is cancelled: `nil` and
    /// ``TranscriptErrorHandlingPolicy/revertTranscript`` leave it as it was before the
    /// request; ``TranscriptErrorHandlingPolicy/preserveTranscript`` keeps the prompt and
    /// the complete tool calls and outputs.
    public var transcriptErrorHandlingPolicy: TranscriptErrorHandlingPolicy? {
        get { state.withLock { $0.transcriptErrorHandlingPolicy } }
        set { state.withLock { $0.transcriptErrorHandlingPolicy = newValue } }
    }

    /// Requests that the system eagerly load the resources required for this session into
    /// memory and optionally caches a prefix of your prompt.
    ///
    /// This method can be useful in cases where you have a strong signal that the user will
    /// interact with session within a few seconds. Prewarming is best-effort: it does nothing
    /// when the model can't be loaded.
    ///
    /// - Parameter promptPrefix: An optional prompt prefix to cache.
    public func prewarm(promptPrefix: Prompt? = nil) {
        var transcript = self.transcript
        if let promptPrefix {
            transcript.append(.prompt(Transcript.Prompt(segments: promptPrefix.segments)))
        }
        // A profile is evaluated by one request at a time: while one runs, the session's model.
        let model = profile == nil || isResponding ? self.model : dynamicConfiguration().model
        ExecutorCache.prewarm(model, transcript: transcript)
    }

    /// Requests that the system eagerly load the resources for this session and cache a prompt
    /// prefix written as a string, as Apple's key-value caching article does.
    @_disfavoredOverload
    public func prewarm(promptPrefix: String) {
        prewarm(promptPrefix: Prompt(promptPrefix))
    }

    /// Ends the request under way, and wakes the requests waiting for it.
    func endResponding() {
        let waiters = registrar.withMutation(of: self, keyPath: \.isResponding) {
            state.withLock { s in
                s.isResponding = false
                defer { s.idleWaiters = [] }
                return s.idleWaiters
            }
        }
        for waiter in waiters { waiter.continuation.resume() }
    }

    /// Changes the transcript, telling its observers. A change `fromOutside` the request under
    /// way (if any) stops that request; the request's own changes (its callbacks') are refused
    /// once that happened.
    func updateTranscript(fromOutside: Bool, _ body: (inout Transcript) -> Void) {
        registrar.withMutation(of: self, keyPath: \.transcript) {
            state.withLock { s in
                if fromOutside && s.isResponding { s.mutatedWhileResponding = true }
                if !fromOutside && s.isResponding && s.mutatedWhileResponding { return }
                body(&s.transcript)
            }
        }
    }

    /// After a failed request: unless someone else wrote the transcript meanwhile (then it stays
    /// as they wrote it and this returns false), `body` settles it (checked under the same lock).
    func settleFailedRequest(_ body: (inout Transcript) -> Void) -> Bool {
        registrar.withMutation(of: self, keyPath: \.transcript) {
            state.withLock { s in
                if s.mutatedWhileResponding { return false }
                body(&s.transcript)
                return true
            }
        }
    }

    /// A change by the request under way; it throws when someone else changed the transcript
    /// meanwhile (checked under the same lock as the change).
    func updateRequestTranscript(_ body: (inout Transcript) -> Void) throws {
        try registrar.withMutation(of: self, keyPath: \.transcript) {
            try state.withLock { s in
                if s.mutatedWhileResponding { throw Error.transcriptMutationWhileResponding }
                body(&s.transcript)
            }
        }
    }

    /// Throws when someone other than the request under way changed the transcript.
    func checkTranscriptUnchangedByOthers() throws {
        if state.withLock({ $0.mutatedWhileResponding }) { throw Error.transcriptMutationWhileResponding }
    }

    func addUsage(_ usage: Usage) {
        registrar.withMutation(of: self, keyPath: \.usage) {
            state.withLock { $0.usage = $0.usage + usage }
        }
    }
}

extension LanguageModelSession: Observable {}

/// What a session does with its transcript when a request fails or is cancelled.
public struct TranscriptErrorHandlingPolicy: Sendable, Equatable {
    let preserves: Bool

    /// Leave the transcript as it was before the request.
    public static let revertTranscript = TranscriptErrorHandlingPolicy(preserves: false)
    /// Keep the prompt and the complete tool calls and outputs of the failed request.
    public static let preserveTranscript = TranscriptErrorHandlingPolicy(preserves: true)
}
