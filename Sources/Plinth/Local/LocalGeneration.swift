import Foundation
internal import PlinthGrammar
internal import PlinthRuntime

/// Runs one turn of a request on a loaded local model: the part shared by
/// ``LocalLanguageModel`` and ``SystemLanguageModel``.
enum LocalGeneration {
    /// Sampling parameters for generation options.
    ///
    /// Without a sampling mode the model samples at random (temperature 0.8, top-k 40,
    /// top-p 0.95), like Apple's default; a temperature of 0 is greedy.
    static func sampling(for options: GenerationOptions) throws -> SamplingParameters {
        if let t = options.temperature, !(t >= 0 && t.isFinite) {
            throw LocalLanguageModelError.invalidGenerationOptions("the temperature must be 0 or more, not \(t)")
        }
        let temperature = Float(options.temperature ?? 0.8)
        // A fresh seed for each request unless the caller fixes one.
        func seed(_ fixed: UInt64?) -> UInt64 { fixed ?? UInt64.random(in: .min ... .max) }
        switch options.samplingMode?.kind {
        case .greedy?:
            return .greedy
        case .randomTopK(let k, let fixed)?:
            guard k >= 1 else { throw LocalLanguageModelError.invalidGenerationOptions("top-k must be at least 1, not \(k)") }
            return SamplingParameters(temperature: temperature, topK: k, topP: 1, minP: 0, seed: seed(fixed))
        case .randomProbabilityThreshold(let threshold, let fixed)?:
            guard threshold > 0 && threshold <= 1 else {
                throw LocalLanguageModelError.invalidGenerationOptions("the probability threshold must be in (0, 1], not \(threshold)")
            }
            return SamplingParameters(temperature: temperature, topK: 0, topP: Float(threshold), minP: 0, seed: seed(fixed))
        case nil:
            return SamplingParameters(temperature: temperature, topK: 40, topP: 0.95, minP: 0.05, seed: seed(nil))
        }
    }

    /// The grammar for a response schema (compiled once per model and schema).
    static func grammar(for schema: GenerationSchema, instance: LocalModelInstance) throws -> CompiledGrammar {
        let compiler = try instance.compiler()
        do {
            return try compiler.compile(schema: DecodingSchema.jsonSchema(for: schema),
                                        options: GrammarOptions(generatedNumbers: true))
        } catch {
            throw LocalLanguageModelError.schemaNotEnforceable(schema: schema.name, reason: error.localizedDescription)
        }
    }

    /// Whether this turn must call a tool: `.required` asks for at least one call per request,
    /// so only until the request's first tool outputs are in the transcript.
    static func requiresCall(_ request: LanguageModelExecutorGenerationRequest) -> Bool {
        guard request.generationOptions.toolCallingMode == .required else { return false }
        for entry in request.transcript.reversed() {
            if case .toolOutput = entry { return false }
            if case .prompt = entry { return true }
        }
        return true
    }

    /// The calls made since the last prompt, as compact `{"name","arguments"}` JSON.
    static func answeredCalls(_ transcript: Transcript) -> Set<String> {
        var out = Set<String>()
        for entry in transcript.reversed() {
            if case .prompt = entry { break }
            if case .toolCalls(let calls) = entry {
                for call in calls {
                    out.insert(JSONValue.object([("name", .string(call.toolName)), ("arguments", JSONValue(call.arguments))]).compactText)
                }
            }
        }
        return out
    }

    /// How the model may call `tools` this turn, or nil when it has none.
    static func toolCalling(_ tools: [Transcript.ToolDefinition], required: Bool, answered: Set<String> = [],
                            instance: LocalModelInstance, timeLimit: Double? = 10) throws -> LocalToolCalling? {
        guard !tools.isEmpty else { return nil }
        let compiler = try instance.compiler()
        let grammar: CompiledGrammar
        do {
            // Whitespace as the model was trained to write calls (`{"name": "f", "arguments": …}`).
            grammar = try compiler.compile(schema: ToolCallFormat.callSchema(for: tools),
                                           options: GrammarOptions(whitespace: .flexible(maxRun: 1), timeLimit: timeLimit, generatedNumbers: true))
        } catch {
            throw LocalLanguageModelError.schemaNotEnforceable(
                schema: tools.map(\.name).joined(separator: ", "), reason: error.localizedDescription)
        }
        let markers = instance.toolMarkerTokens()
        return LocalToolCalling(grammar: grammar, openingTokens: markers.opening, separatorTokens: markers.separator,
                                required: required, answeredCalls: answered)
    }

    /// Generates the next turn of the request into the channel.
    static func respond(to request: LanguageModelExecutorGenerationRequest, instance: LocalModelInstance, adapter: URL? = nil,
                        adapterScale: Float = 1, streamingInto channel: LanguageModelExecutorGenerationChannel) async throws {
        let lora = try adapter.map { try instance.adapter(at: $0, scale: adapterScale) }
        if let m = request.generationOptions.maximumResponseTokens, m < 1 {
            throw LocalLanguageModelError.invalidGenerationOptions("maximumResponseTokens must be at least 1, not \(m)")
        }
        let withAttachments = Array(request.transcript).filter { $0.segments.contains { if case .attachment = $0 { true } else { false } } }
        if !withAttachments.isEmpty {
            throw LanguageModelError.unsupportedTranscriptContent(.init(
                unsupportedContent: withAttachments,
                debugDescription: "The model reads text only; \(withAttachments.count) transcript entries hold image attachments."))
        }
        let tools = request.generationOptions.toolCallingMode == .disallowed ? [] : request.enabledToolDefinitions
        // Text far past the context is refused before it is tokenized (a record of 40 MB took
        // 27 s and 3 GB to count): every token holds at most the longest token's bytes. The
        // rendered text, as the template has it (it may trim, or leave entries out).
        let rendered = try TranscriptRenderer.text(for: request.transcript, model: instance.model, tools: tools)
        let atLeast = rendered.utf8.count / instance.longestTokenBytes
        if atLeast >= instance.contextSize {
            throw LanguageModelError.contextSizeExceeded(.init(
                contextSize: instance.contextSize, tokenCount: atLeast,
                debugDescription: "The transcript is \(rendered.utf8.count) bytes as the chat template writes it, at least \(atLeast) "
                    + "tokens, past the model's context of \(instance.contextSize) tokens."))
        }
        // The template writes control tokens (<|im_start|>) as text; they are parsed back into ids.
        let prompt = instance.model.tokenizer.encodeRendered(rendered)
        // Checked here, before any work: a transcript that leaves no room for one token. The
        // response limit is a cap, not a reservation (Apple's "the maximum number of tokens the
        // model is allowed to produce"): a response may take what the context has left.
        let room = instance.contextSize - prompt.count
        if room < 1 {
            throw LanguageModelError.contextSizeExceeded(.init(
                contextSize: instance.contextSize, tokenCount: prompt.count + 1,
                debugDescription: "The transcript is \(prompt.count) tokens, which leaves no room for a response "
                    + "in the model's context of \(instance.contextSize) tokens."))
        }
        // A cap past the room left is no cap: the context's end is met as such (a limit of the
        // room would steer a schema's value to an early end and report it complete).
        let limit = request.generationOptions.maximumResponseTokens.flatMap { $0 <= room ? $0 : nil }
        let parameters = try sampling(for: request.generationOptions)
        let responseGrammar = try request.schema.map { try grammar(for: $0, instance: instance) }
        let calling = try toolCalling(tools, required: requiresCall(request), answered: answeredCalls(request.transcript),
                                      instance: instance)
        let tokenizer = instance.model.tokenizer
        var constraint: (@Sendable () throws -> any Constraint)?
        if responseGrammar != nil || calling != nil {
            constraint = { @Sendable in TurnConstraint(tokenizer: tokenizer, grammar: responseGrammar, tools: calling) }
        }
        let events = instance.scheduler.stream(GenerationRequest(prompt: prompt, sampling: parameters, maxTokens: limit,
                                                                 constraint: constraint, adapter: lora))
        var outcome: GenerationSummary?
        do {
            for try await event in events {
                switch event {
                case .text(let text, let count):
                    channel.sendNow(.response(action: .appendText(text, tokenCount: count)))
                case .toolCall(let json, let count):
                    let call = try ToolCallFormat.parseCall(json)
                    channel.sendNow(.toolCalls(action: .toolCall(
                        id: "call_" + UUID().uuidString.prefix(8).lowercased(), name: call.name,
                        action: .appendArguments(call.arguments, tokenCount: count))))
                case .finished(let summary):
                    outcome = summary
                case .failed(let error):
                    throw error
                case .logprob, .promptLogprob:
                    break  // not asked for
                }
            }
        } catch let error as SchedulerError {
            throw LocalLanguageModelError.inferenceFailed(error.localizedDescription)
        }
        try Task.checkCancellation()
        guard let outcome else { throw CancellationError() }
        if outcome.finishReason == .contextFull || (limit == nil && outcome.finishReason == .maxTokens) {
            // The context filled up before the model finished its answer.
            throw LanguageModelError.contextSizeExceeded(.init(
                contextSize: instance.contextSize, tokenCount: prompt.count + outcome.generatedTokens + 1,
                debugDescription: "The response filled the context window before it ended."))
        }
        await channel.send(.response(action: .updateUsage(
            input: .init(totalTokenCount: outcome.promptTokens, cachedTokenCount: outcome.cachedTokens),
            output: .init(totalTokenCount: outcome.generatedTokens, reasoningTokenCount: 0))))
        await channel.send(.response(action: .updateMetadata([
            "timeToFirstTokenSeconds": outcome.timeToFirstToken,
            "tokensPerSecond": outcome.decodeTokensPerSecond,
            "prefillSeconds": outcome.prefillSeconds,
            "queueSeconds": outcome.queueSeconds,
            // The token budget steered a schema's value to an early, valid end.
            "truncatedByBudget": outcome.truncatedByBudget,
        ])))
    }

    /// Loads the instructions of a transcript into a KV slot, so the first request starts warm.
    static func prewarm(transcript: Transcript, instance: LocalModelInstance, adapter: URL? = nil, adapterScale: Float = 1) async {
        let instructions = Transcript(entries: transcript.prefix { if case .instructions = $0 { true } else { false } })
        guard !instructions.isEmpty,
              let tokens = try? TranscriptRenderer.tokens(for: instructions, model: instance.model, addGenerationPrompt: false)
        else { return }
        // A request that generates nothing: the scheduler only prefills what its cache lacks.
        let lora = adapter.flatMap { try? instance.adapter(at: $0, scale: adapterScale) }
        let events = instance.scheduler.stream(GenerationRequest(prompt: tokens, maxTokens: 0, adapter: lora))
        do { for try await _ in events {} } catch {}
    }

    /// The number of tokens of transcript entries, as the model's template renders them.
    static func tokenCount(for transcript: Transcript, instance: LocalModelInstance) throws -> Int {
        try TranscriptRenderer.tokens(for: transcript, model: instance.model, addGenerationPrompt: false).count
    }
}
