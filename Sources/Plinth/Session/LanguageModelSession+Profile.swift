import Foundation

/// What one model request runs with: the session's model and tools, or what its profile
/// resolves to at that moment.
struct RequestConfiguration {
    var model: any LanguageModel
    var tools: [any Tool]
    /// The tools' definitions, made once for the request's turns.
    var toolDefinitions: [Transcript.ToolDefinition]
    /// The leading instructions entry a profile's instructions make; `nil` without a profile.
    var instructions: Transcript.Instructions?
    /// The resolved profile; `nil` without one.
    var resolution: ProfileResolution?

    /// The call's options, with the profile's values where the call sets none.
    func options(_ options: GenerationOptions) -> GenerationOptions {
        guard let r = resolution else { return options }
        var merged = options
        merged.temperature = options.temperature ?? r.temperature
        merged.samplingMode = options.samplingMode ?? r.samplingMode
        merged.maximumResponseTokens = options.maximumResponseTokens ?? r.maximumResponseTokens
        merged.toolCallingMode = options.toolCallingMode ?? r.toolCallingMode
        return merged
    }

    /// The call's context options, with the profile's reasoning level where the call sets none.
    func contextOptions(_ options: ContextOptions) -> ContextOptions {
        var merged = options
        merged.reasoningLevel = options.reasoningLevel ?? resolution?.reasoningLevel
        return merged
    }

    /// The transcript the model sees: the profile's history transforms applied, innermost first.
    func requestTranscript(_ transcript: Transcript) -> Transcript {
        guard let transforms = resolution?.historyTransforms, !transforms.isEmpty else { return transcript }
        var history = Array(transcript.history)
        for transform in transforms.reversed() { history = transform.function(history) }
        var result = transcript
        result.history = ArraySlice(history)
        return result
    }
}

extension LanguageModelSession {
    /// Resolves the profile and evaluates its dynamic instructions, with the history read-only.
    func dynamicConfiguration() -> RequestConfiguration {
        guard let profile else {
            return RequestConfiguration(model: model, tools: tools, toolDefinitions: toolDefinitions)
        }
        return SessionPropertyValues.$current.withValue(.init(values: propertyValues, historyIsWritable: false)) {
            var resolution = ProfileResolution()
            resolution.resolve(profile)
            var content = InstructionsContent()
            if let instructions = resolution.instructions { content.add(instructions) }
            let instructions = content.instructions
            let definitions = content.tools.map { Transcript.ToolDefinition(tool: $0) }
            return RequestConfiguration(
                model: resolution.model ?? model, tools: content.tools, toolDefinitions: definitions,
                instructions: Self.instructionsEntry(instructions.segments.isEmpty ? nil : instructions, definitions: definitions),
                resolution: resolution)
        }
    }

    /// The configuration of the next model request. With a profile: its instructions become the
    /// transcript's leading entry, and profiles that became active or inactive since the last
    /// request are told so.
    func requestConfiguration() async throws -> RequestConfiguration {
        let configuration = dynamicConfiguration()
        guard let resolution = configuration.resolution else { return configuration }
        try updateRequestTranscript { $0.setLeadingInstructions(configuration.instructions) }
        let (activated, deactivated) = state.withLock { s in
            let previous = s.activeProfiles
            s.activeProfiles = resolution.lifecycle
            let now = Set(resolution.lifecycle.map(\.place)), before = Set(previous.map(\.place))
            return (resolution.lifecycle.filter { !before.contains($0.place) }.flatMap(\.activate),
                    previous.filter { !now.contains($0.place) }.flatMap(\.deactivate))
        }
        if !activated.isEmpty || !deactivated.isEmpty {
            // Life cycle callbacks are profile callbacks: they see the session's properties.
            await SessionPropertyValues.$current.withValue(.init(values: propertyValues, historyIsWritable: true)) {
                for callback in deactivated { await callback.function() }
                for callback in activated { await callback.function() }
            }
        }
        return configuration
    }

    /// Runs profile callbacks, which may write the history; the first error stops them.
    func runCallbacks<Argument>(_ callbacks: [Callback<nonisolated(nonsending) (Argument) async throws -> Void>],
                                _ argument: Argument) async throws {
        guard !callbacks.isEmpty else { return }
        try await SessionPropertyValues.$current.withValue(.init(values: propertyValues, historyIsWritable: true)) {
            for callback in callbacks { try await callback.function(argument) }
        }
    }

    /// Runs `body` where tools see the session's properties, with the history read-only.
    func withToolBinding<T>(_ body: () async throws -> T) async rethrows -> T {
        try await SessionPropertyValues.$current.withValue(.init(values: propertyValues, historyIsWritable: false)) {
            try await body()
        }
    }
}
