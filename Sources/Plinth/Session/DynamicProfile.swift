import Foundation

extension LanguageModelSession {
    /// A dynamic profile that contains one or more profiles.
    ///
    /// A dynamic profile decides which ``Profile`` is active and lets a session switch between
    /// configurations as app state changes. Its body is evaluated again before every model
    /// request and must resolve to a single profile:
    ///
    /// ```swift
    /// struct PresentationProfile: LanguageModelSession.DynamicProfile {
    ///     var isEditingImage = true
    ///
    ///     var body: some LanguageModelSession.DynamicProfile {
    ///         if isEditingImage {
    ///             Profile { ImageEditingInstructions() }
    ///         } else {
    ///             Profile { PresentationInstructions() }
    ///                 .temperature(0.8)
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// Value modifiers (model, temperature, sampling mode, response tokens, reasoning level, tool
    /// calling mode, error policy) closest to the profile win over those further out, and the
    /// options of a `respond` call win over both. Life cycle callbacks accumulate: every
    /// callback on the active path runs, the outermost first.
    public protocol DynamicProfile {
        /// The type of dynamic profile that represent this profile.
        associatedtype Body: LanguageModelSession.DynamicProfile

        /// The content of the dynamic profile.
        @LanguageModelSession.DynamicProfileBuilder var body: Body { get }
    }

    /// A profile that contains dynamic instructions.
    ///
    /// A profile binds ``DynamicInstructions`` to session-level configuration values:
    ///
    /// ```swift
    /// Profile {
    ///     Instructions("Write poems.")
    /// }
    /// .temperature(likesPoetry ? 0.8 : 0.1)
    /// ```
    public struct Profile: LanguageModelSession.DynamicProfile, ProfileLeaf {
        let instructions: AnyDynamicInstructions

        /// Creates a profile that contains dynamic instructions.
        ///
        /// - Parameter dynamicInstructions: The dynamic instructions.
        public init(@DynamicInstructionsBuilder _ dynamicInstructions: () -> some DynamicInstructions) {
            instructions = AnyDynamicInstructions(erasing: dynamicInstructions())
        }

        public typealias Body = Never
        /// The content of the dynamic profile.
        public var body: Never { Never.unreachableBody(Self.self) }

        func resolve(into resolution: inout ProfileResolution) {
            resolution.instructions = instructions
        }
    }

    /// A type-erased dynamic profile.
    public struct AnyDynamicProfile: LanguageModelSession.DynamicProfile, ProfileLeaf {
        private let resolveContent: (inout ProfileResolution) -> Void

        /// Creates an instance from the dynamic profile you specify.
        public init(_ dynamicProfile: any LanguageModelSession.DynamicProfile) {
            resolveContent = { $0.resolve(dynamicProfile) }
        }

        /// Creates an instance from the dynamic profile you specify.
        public init(erasing dynamicProfile: some LanguageModelSession.DynamicProfile) {
            resolveContent = { $0.resolve(dynamicProfile) }
        }

        public typealias Body = Never
        /// The content of the dynamic profile.
        public var body: Never { Never.unreachableBody(Self.self) }

        func resolve(into resolution: inout ProfileResolution) { resolveContent(&resolution) }
    }

    /// A dynamic profile that selects one of two profiles.
    public struct ConditionalDynamicProfile<TrueContent, FalseContent>: LanguageModelSession.DynamicProfile, ProfileLeaf
    where TrueContent: LanguageModelSession.DynamicProfile, FalseContent: LanguageModelSession.DynamicProfile {
        enum Branch {
            case trueContent(TrueContent)
            case falseContent(FalseContent)
        }

        let branch: Branch

        public typealias Body = Never
        /// The content of the dynamic profile.
        public var body: Never { Never.unreachableBody(Self.self) }

        func resolve(into resolution: inout ProfileResolution) {
            switch branch {
            case .trueContent(let c): resolution.resolve(c, step: "true")
            case .falseContent(let c): resolution.resolve(c, step: "false")
            }
        }
    }

    /// A result builder for a dynamic profile's body: it resolves to exactly one profile, chosen
    /// with `if`/`else` or `switch`.
    @resultBuilder
    public struct DynamicProfileBuilder {
        public static func buildBlock<T>(_ content: T) -> T where T: LanguageModelSession.DynamicProfile {
            content
        }

        @available(*, unavailable, message: "The body of a 'DynamicProfile' must evaluate to a single active profile")
        public static func buildBlock<each Content>(_ contents: repeat each Content) -> Never
        where repeat each Content: LanguageModelSession.DynamicProfile {
            fatalError("unavailable")
        }

        public static func buildEither<TrueContent, FalseContent>(first content: TrueContent)
        -> LanguageModelSession.ConditionalDynamicProfile<TrueContent, FalseContent>
        where TrueContent: LanguageModelSession.DynamicProfile, FalseContent: LanguageModelSession.DynamicProfile {
            ConditionalDynamicProfile(branch: .trueContent(content))
        }

        public static func buildEither<TrueContent, FalseContent>(second content: FalseContent)
        -> LanguageModelSession.ConditionalDynamicProfile<TrueContent, FalseContent>
        where TrueContent: LanguageModelSession.DynamicProfile, FalseContent: LanguageModelSession.DynamicProfile {
            ConditionalDynamicProfile(branch: .falseContent(content))
        }

        public static func buildLimitedAvailability(_ component: some LanguageModelSession.DynamicProfile)
        -> LanguageModelSession.AnyDynamicProfile {
            AnyDynamicProfile(erasing: component)
        }
    }

    /// A protocol for creating reusable wrappers around dynamic profile content.
    ///
    /// ```swift
    /// struct DebugProfileModifier: LanguageModelSession.DynamicProfileModifier {
    ///     func body(content: Content) -> some LanguageModelSession.DynamicProfile {
    ///         content
    ///             .temperature(0.0)
    ///             .onResponse { response in print("Debug response: \(response)") }
    ///     }
    /// }
    /// ```
    public protocol DynamicProfileModifier {
        /// The type of dynamic profile modifier that represents this modifier.
        associatedtype Body: LanguageModelSession.DynamicProfile

        /// The content of the dynamic profile modifier.
        @LanguageModelSession.DynamicProfileBuilder func body(content: Content) -> Body

        typealias Content = LanguageModelSession.DynamicProfileModifierContent<Self>
    }

    /// The profile a ``DynamicProfileModifier`` wraps, as its `body(content:)` receives it.
    public struct DynamicProfileModifierContent<Modifier>: LanguageModelSession.DynamicProfile, ProfileLeaf
    where Modifier: LanguageModelSession.DynamicProfileModifier {
        let content: AnyDynamicProfile

        public typealias Body = Never
        /// The content of the dynamic profile.
        public var body: Never { Never.unreachableBody(Self.self) }

        func resolve(into resolution: inout ProfileResolution) {
            resolution.resolve(content, step: "content")
        }
    }

    /// A dynamic profile with a modifier applied to it.
    public struct ModifiedDynamicProfile<Content, Modifier>: LanguageModelSession.DynamicProfile, ProfileLeaf
    where Content: LanguageModelSession.DynamicProfile, Modifier: LanguageModelSession.DynamicProfileModifier {
        let content: Content
        let modifier: Modifier

        public typealias Body = Never
        /// The content of the dynamic profile.
        public var body: Never { Never.unreachableBody(Self.self) }

        func resolve(into resolution: inout ProfileResolution) {
            let wrapped = DynamicProfileModifierContent<Modifier>(content: AnyDynamicProfile(erasing: content))
            resolution.resolve(modifier.body(content: wrapped), step: String(reflecting: Modifier.self))
        }
    }
}

extension Never: LanguageModelSession.DynamicProfile {}

/// Dynamic profiles that hold their content themselves instead of in a body.
protocol ProfileLeaf {
    func resolve(into resolution: inout ProfileResolution)
}

/// A profile with one setting or callback added: what the built-in modifiers return.
struct ProfileSetting<Content: LanguageModelSession.DynamicProfile>: LanguageModelSession.DynamicProfile, ProfileLeaf {
    let content: Content
    let apply: (inout ProfileResolution) -> Void

    var body: Never { Never.unreachableBody(Self.self) }

    func resolve(into resolution: inout ProfileResolution) {
        apply(&resolution)
        resolution.resolve(content, step: "setting")
    }
}

/// A closure that may be stored with the session although it isn't `Sendable`: the session
/// calls it from its own request, one at a time.
struct Callback<Function>: @unchecked Sendable {
    let function: Function
}

/// What a dynamic profile resolves to before a model request: the active profile's
/// instructions, its settings with the innermost value of each, and every callback on the way.
struct ProfileResolution {
    var instructions: AnyDynamicInstructions?
    var model: (any LanguageModel)?
    var temperature: Double?
    var samplingMode: GenerationOptions.SamplingMode?
    var maximumResponseTokens: Int?
    var reasoningLevel: ContextOptions.ReasoningLevel?
    var toolCallingMode: GenerationOptions.ToolCallingMode?
    var transcriptErrorHandlingPolicy: TranscriptErrorHandlingPolicy?
    /// Outermost first; the innermost transforms the history first.
    var historyTransforms: [Callback<([Transcript.Entry]) -> [Transcript.Entry]>] = []
    var onPrompt: [Callback<nonisolated(nonsending) (Transcript.Prompt) async throws -> Void>] = []
    var onResponse: [Callback<nonisolated(nonsending) (Transcript.Response) async throws -> Void>] = []
    var onReasoning: [Callback<nonisolated(nonsending) (Transcript.Reasoning) async throws -> Void>] = []
    var onToolCall: [Callback<nonisolated(nonsending) (Transcript.ToolCall) async throws -> Void>] = []
    var onToolOutput: [Callback<nonisolated(nonsending) ((Transcript.ToolCall, Transcript.ToolOutput)) async throws -> Void>] = []
    /// Activation callbacks by where they are in the profile tree (the same place in two
    /// resolutions is the same profile), outermost first.
    var lifecycle: [Lifecycle] = []

    struct Lifecycle {
        let place: String
        var activate: [Callback<() async -> Void>] = []
        var deactivate: [Callback<() async -> Void>] = []
    }

    /// The callbacks of the profile at the current place, added when it has none yet.
    mutating func addLifecycle(_ update: (inout Lifecycle) -> Void) {
        let place = self.place
        if let i = lifecycle.firstIndex(where: { $0.place == place }) {
            update(&lifecycle[i])
        } else {
            var entry = Lifecycle(place: place)
            update(&entry)
            lifecycle.append(entry)
        }
    }
    /// The steps from the root to the node being resolved.
    var path: [String] = []

    /// Resolves `profile` and everything under it.
    mutating func resolve(_ profile: some LanguageModelSession.DynamicProfile, step: String? = nil) {
        if let step { path.append(step) }
        defer { if step != nil { path.removeLast() } }
        if let leaf = profile as? any ProfileLeaf {
            leaf.resolve(into: &self)
        } else {
            path.append(String(reflecting: type(of: profile)))
            defer { path.removeLast() }
            resolve(profile.body)
        }
    }

    /// A value setting: later (inner) settings replace earlier (outer) ones; `nil` sets nothing.
    static func setting<Value>(_ keyPath: WritableKeyPath<ProfileResolution, Value?>, _ value: Value?)
    -> (inout ProfileResolution) -> Void {
        { resolution in
            if let value { resolution[keyPath: keyPath] = value }
        }
    }

    var place: String { path.joined(separator: "/") }
}

// MARK: - Modifiers

extension LanguageModelSession.DynamicProfile {
    public typealias Profile = LanguageModelSession.Profile
    public typealias DynamicProfile = LanguageModelSession.DynamicProfile
    public typealias SessionProperty = LanguageModelSession.SessionProperty

    private func setting(_ apply: @escaping (inout ProfileResolution) -> Void) -> some LanguageModelSession.DynamicProfile {
        ProfileSetting(content: self, apply: apply)
    }

    /// Apply a modifier to the dynamic profile.
    public func modifier<Modifier>(_ modifier: Modifier) -> some LanguageModelSession.DynamicProfile
    where Modifier: LanguageModelSession.DynamicProfileModifier {
        LanguageModelSession.ModifiedDynamicProfile(content: self, modifier: modifier)
    }

    /// Sets the model.
    public func model(_ model: any LanguageModel) -> some LanguageModelSession.DynamicProfile {
        setting(ProfileResolution.setting(\.model, model))
    }

    /// Sets the model.
    @_disfavoredOverload
    public func model(_ model: some LanguageModel) -> some LanguageModelSession.DynamicProfile {
        setting(ProfileResolution.setting(\.model, model as any LanguageModel))
    }

    /// Sets the model temperature.
    public func temperature(_ temperature: Double?) -> some LanguageModelSession.DynamicProfile {
        setting(ProfileResolution.setting(\.temperature, temperature))
    }

    /// Sets the sampling mode.
    public func samplingMode(_ samplingMode: GenerationOptions.SamplingMode?) -> some LanguageModelSession.DynamicProfile {
        setting(ProfileResolution.setting(\.samplingMode, samplingMode))
    }

    /// Sets the maximum response tokens.
    public func maximumResponseTokens(_ maximumResponseTokens: Int?) -> some LanguageModelSession.DynamicProfile {
        setting(ProfileResolution.setting(\.maximumResponseTokens, maximumResponseTokens))
    }

    /// Sets the reasoning level.
    public func reasoningLevel(_ reasoningLevel: ContextOptions.ReasoningLevel?) -> some LanguageModelSession.DynamicProfile {
        setting(ProfileResolution.setting(\.reasoningLevel, reasoningLevel))
    }

    /// Sets the tool calling mode.
    public func toolCallingMode(_ toolCallingMode: GenerationOptions.ToolCallingMode?) -> some LanguageModelSession.DynamicProfile {
        setting(ProfileResolution.setting(\.toolCallingMode, toolCallingMode))
    }

    /// Sets the tool calling mode (the spelling of an earlier beta).
    public func toolCalling(_ toolCallingMode: GenerationOptions.ToolCallingMode?) -> some LanguageModelSession.DynamicProfile {
        self.toolCallingMode(toolCallingMode)
    }

    /// The session's policy for managing the transcript when errors occur.
    public func transcriptErrorHandlingPolicy(_ transcriptErrorHandlingPolicy: TranscriptErrorHandlingPolicy?)
    -> some LanguageModelSession.DynamicProfile {
        setting(ProfileResolution.setting(\.transcriptErrorHandlingPolicy, transcriptErrorHandlingPolicy))
    }

    /// Apply a transformation to the history prior to invoking the model.
    ///
    /// The transform changes what the model sees for a request, not the session's transcript.
    public func historyTransform(_ transform: @escaping ([Transcript.Entry]) -> [Transcript.Entry])
    -> some LanguageModelSession.DynamicProfile {
        setting { $0.historyTransforms.append(Callback(function: transform)) }
    }

    /// Apply a transformation to the transcript prior to invoking the model (the spelling of an
    /// earlier beta of ``historyTransform(_:)``).
    public func inputFilter(_ filter: @escaping ([Transcript.Entry]) -> [Transcript.Entry]) -> some LanguageModelSession.DynamicProfile {
        historyTransform(filter)
    }

    /// Runs an action after the prompt is added to the transcript, before the model is invoked.
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it.
    public func onPrompt(perform action: nonisolated(nonsending) sending @escaping () async throws -> Void)
    -> some LanguageModelSession.DynamicProfile {
        onPrompt { (_: Transcript.Prompt) in try await action() }
    }

    /// Runs an action after the prompt is added to the transcript, before the model is invoked.
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it.
    public func onPrompt(perform action: nonisolated(nonsending) sending @escaping (Transcript.Prompt) async throws -> Void)
    -> some LanguageModelSession.DynamicProfile {
        setting { $0.onPrompt.append(Callback(function: action)) }
    }

    /// Runs an action after this dynamic profile produces a response.
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it.
    public func onResponse(perform action: nonisolated(nonsending) sending @escaping () async throws -> Void)
    -> some LanguageModelSession.DynamicProfile {
        onResponse { (_: Transcript.Response) in try await action() }
    }

    /// Runs an action after this dynamic profile produces a response.
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it.
    public func onResponse(perform action: nonisolated(nonsending) sending @escaping (Transcript.Response) async throws -> Void)
    -> some LanguageModelSession.DynamicProfile {
        setting { $0.onResponse.append(Callback(function: action)) }
    }

    /// Runs an action whenever the model calls a tool, before the tool runs.
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it
    /// and the tool isn't called.
    public func onToolCall(perform action: nonisolated(nonsending) sending @escaping () async throws -> Void)
    -> some LanguageModelSession.DynamicProfile {
        onToolCall { (_: Transcript.ToolCall) in try await action() }
    }

    /// Runs an action whenever the model calls a tool, before the tool runs.
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it
    /// and the tool isn't called.
    public func onToolCall(perform action: nonisolated(nonsending) sending @escaping (Transcript.ToolCall) async throws -> Void)
    -> some LanguageModelSession.DynamicProfile {
        setting { $0.onToolCall.append(Callback(function: action)) }
    }

    /// Runs an action whenever a tool call produces output.
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it.
    public func onToolOutput(perform action: nonisolated(nonsending) sending @escaping () async throws -> Void)
    -> some LanguageModelSession.DynamicProfile {
        onToolOutput { (_: Transcript.ToolCall, _: Transcript.ToolOutput) in try await action() }
    }

    /// Runs an action whenever a tool call produces output.
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it.
    public func onToolOutput(
        perform action: nonisolated(nonsending) sending @escaping (Transcript.ToolCall, Transcript.ToolOutput) async throws -> Void
    ) -> some LanguageModelSession.DynamicProfile {
        let perform: nonisolated(nonsending) ((Transcript.ToolCall, Transcript.ToolOutput)) async throws -> Void = { pair in
            try await action(pair.0, pair.1)
        }
        return setting { $0.onToolOutput.append(Callback(function: perform)) }
    }

    /// Runs an action after the model produces reasoning (a page of a later SDK than the
    /// Xcode 27 beta interface documents it).
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it.
    public func onReasoning(perform action: nonisolated(nonsending) sending @escaping () async throws -> Void)
    -> some LanguageModelSession.DynamicProfile {
        onReasoning { (_: Transcript.Reasoning) in try await action() }
    }

    /// Runs an action after the model produces reasoning, with the reasoning entry.
    ///
    /// When the closure throws an error, the caller's `respond` or `streamResponse` throws it.
    public func onReasoning(perform action: nonisolated(nonsending) sending @escaping (Transcript.Reasoning) async throws -> Void)
    -> some LanguageModelSession.DynamicProfile {
        setting { $0.onReasoning.append(Callback(function: action)) }
    }

    /// Runs an action when this dynamic profile becomes active: when a model request first
    /// resolves to it, or resolves to it again after it was absent.
    public func onActivate(perform action: sending @escaping @isolated(any) () async -> Void) -> some LanguageModelSession.DynamicProfile {
        setting { r in r.addLifecycle { $0.activate.append(Callback(function: { await action() })) } }
    }

    /// Runs an action when this dynamic profile becomes inactive: when a model request
    /// resolves to another profile after this one was active.
    public func onDeactivate(perform action: sending @escaping @isolated(any) () async -> Void) -> some LanguageModelSession.DynamicProfile {
        setting { r in r.addLifecycle { $0.deactivate.append(Callback(function: { await action() })) } }
    }
}

extension LanguageModelSession.DynamicProfileModifier {
    public typealias DynamicProfile = LanguageModelSession.DynamicProfile
    public typealias SessionProperty = LanguageModelSession.SessionProperty
}
