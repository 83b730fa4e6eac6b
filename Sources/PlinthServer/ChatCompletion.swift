import Foundation
import Plinth
import PlinthGrammar
import PlinthRuntime

/// One `POST /v1/chat/completions`: its choices submitted to the model's scheduler, answered
/// whole or streamed as chunks.
struct ChatCompletion: Sendable {
    let request: ChatRequest
    let modelID: String
    let model: ServedModel
    let choices: Choices
    let id = OpenAIWire.id("chatcmpl")
    let created = OpenAIWire.now()

    /// Renders, compiles and submits the request; throws an ``APIError`` for anything wrong with it.
    init(body: Data, host: ModelHost, settings: ServerSettings, metrics: Metrics) async throws {
        let request = try ChatRequest(body: body)
        let selection = try host.model(named: request.model)
        let (modelID, model) = (selection.id, selection.model)
        try request.parameters.checkTokens(vocabularySize: model.tokenizer.vocabularySize)
        let (tools, required) = request.callableTools
        let prompt: [Int32]
        do {
            prompt = try model.promptTokens(for: request.transcript, tools: tools)
        } catch {
            throw APIError.invalid("messages", "The model's chat template can't render these messages: \(error.localizedDescription)")
        }
        let limit = request.parameters.maxTokens
        if prompt.count + (limit ?? 1) > model.contextLength {
            throw APIError.contextLength(prompt: prompt.count, limit: limit ?? 0, context: model.contextLength, param: "messages")
        }
        // Grammars compile off the cooperative pool: a large schema may take seconds.
        let timeLimit = settings.schemaTimeLimit
        let constraint = try await offPool { () throws -> (@Sendable () throws -> any Constraint)? in
            var grammar: CompiledGrammar?
            if let schema = request.enforcedSchema {
                do {
                    grammar = try model.grammar(jsonSchema: schema, timeLimit: timeLimit)
                } catch {
                    throw APIError.invalid("response_format", "The response schema can't be enforced: \(error.localizedDescription)",
                                           code: "unsupported_schema")
                }
            }
            do {
                return try model.constraint(response: grammar, tools: tools, required: required, after: request.transcript,
                                            timeLimit: timeLimit)
            } catch {
                throw APIError.invalid("tools", "The tools' parameter schemas can't be enforced: \(error.localizedDescription)",
                                       code: "unsupported_schema")
            }
        }
        let p = request.parameters
        let adapter = try selection.adapter(scale: p.adapterScale)
        let requests = (0..<p.n).map { i in
            GenerationRequest(prompt: prompt, sampling: p.sampling(forChoice: i), maxTokens: limit, stopSequences: p.stop,
                              constraint: constraint, logprobs: p.logprobs, adapter: adapter)
        }
        self.request = request
        self.modelID = modelID
        self.model = model
        choices = try Choices(requests, on: model.scheduler, timeout: settings.requestTimeout, modelID: modelID, metrics: metrics)
    }

    /// What one choice has produced so far.
    private struct Choice {
        var text = ""
        var calls: [(id: String, name: String, arguments: String)] = []
        var logprobs: [JSONValue] = []
        var summary: GenerationSummary?
        var started = false
    }

    /// Runs every choice to its end and answers with the whole completion.
    func response() async throws -> JSONValue {
        var state = Array(repeating: Choice(), count: request.parameters.n)
        try await choices.consume { i, event in
            switch event {
            case .text(let t, _): state[i].text += t
            case .logprob(let entry): state[i].logprobs.append(OpenAIWire.chatLogprob(entry, tokenizer: model.tokenizer))
            case .toolCall(let json, _):
                endIfSingleCall(i)
                try state[i].calls.append(call(json, choice: i, made: state[i].calls.count))
            case .finished(let s): state[i].summary = s
            case .failed, .promptLogprob: break
            }
        }
        let choices: [JSONValue] = state.enumerated().map { i, c in
            var message: [(String, JSONValue)] = [("role", .string("assistant")),
                                                  ("content", c.calls.isEmpty || !c.text.isEmpty ? .string(c.text) : .null)]
            if !c.calls.isEmpty { message.append(("tool_calls", .array(c.calls.map(Self.callJSON)))) }
            message.append(("refusal", .null))
            return .object([
                ("index", OpenAIWire.int(i)),
                ("message", .object(message)),
                ("logprobs", request.parameters.logprobs == nil ? .null : .object([("content", .array(c.logprobs)), ("refusal", .null)])),
                ("finish_reason", OpenAIWire.finishReason(c.summary, toolCalls: !c.calls.isEmpty)),
            ])
        }
        return .object(envelope("chat.completion") + [("choices", .array(choices)), ("usage", usage(state.map(\.summary)))])
    }

    /// Streams chunks as server-sent events: each choice's role, its text and calls as they
    /// come, its finish reason, then usage when asked for, then `[DONE]`. A failure after the
    /// first chunk is sent as an error event.
    func stream(_ send: (String) async throws -> Void) async throws {
        var state = Array(repeating: Choice(), count: request.parameters.n)
        func chunk(_ i: Int, _ delta: [(String, JSONValue)], logprobs: JSONValue = .null, finish: JSONValue = .null) -> String {
            OpenAIWire.event(.object(envelope("chat.completion.chunk") + [
                ("choices", .array([.object([("index", OpenAIWire.int(i)), ("delta", .object(delta)), ("logprobs", logprobs),
                                             ("finish_reason", finish)])])),
            ] + (request.parameters.includeUsageInStream ? [("usage", .null)] : [])))
        }
        var pendingLogprobs = Array(repeating: [JSONValue](), count: request.parameters.n)
        do {
            try await choices.consume { i, event in
                // The role opens a choice's first chunk that shows something: content "" before
                // text, null (as OpenAI's) before a call.
                var opensWithCall = false, shows = true
                switch event {
                case .toolCall: opensWithCall = true
                case .text(let t, _): shows = !t.isEmpty || !pendingLogprobs[i].isEmpty
                case .logprob, .promptLogprob: shows = false
                case .finished, .failed: break
                }
                if !state[i].started && shows {
                    state[i].started = true
                    try await send(chunk(i, [("role", .string("assistant")), ("content", opensWithCall ? .null : .string("")),
                                             ("refusal", .null)]))
                }
                switch event {
                case .text(let t, _):
                    // Text with nothing to show carries only the tokens it stands for, if any.
                    guard shows else { break }
                    let lp: JSONValue = request.parameters.logprobs == nil ? .null
                        : .object([("content", .array(pendingLogprobs[i])), ("refusal", .null)])
                    pendingLogprobs[i] = []
                    try await send(chunk(i, [("content", .string(t))], logprobs: lp))
                case .logprob(let entry):
                    pendingLogprobs[i].append(OpenAIWire.chatLogprob(entry, tokenizer: model.tokenizer))
                case .toolCall(let json, _):
                    endIfSingleCall(i)
                    let made = try call(json, choice: i, made: state[i].calls.count)
                    var entry = Self.callJSON(made)
                    if case .object(let pairs) = entry { entry = .object([("index", OpenAIWire.int(state[i].calls.count))] + pairs) }
                    state[i].calls.append(made)
                    try await send(chunk(i, [("tool_calls", .array([entry]))]))
                case .finished(let s):
                    state[i].summary = s
                    try await send(chunk(i, [], finish: OpenAIWire.finishReason(s, toolCalls: !state[i].calls.isEmpty)))
                case .failed, .promptLogprob: break
                }
            }
        } catch let error as APIError {
            try await send(OpenAIWire.event(error.json))
            throw error
        }
        if request.parameters.includeUsageInStream {
            try await send(OpenAIWire.event(.object(envelope("chat.completion.chunk")
                + [("choices", .array([])), ("usage", usage(state.map(\.summary)))])))
        }
        try await send(OpenAIWire.done)
    }

    private func envelope(_ object: String) -> [(String, JSONValue)] {
        OpenAIWire.envelope(id: id, object: object, created: created, model: modelID)
    }

    /// Without parallel tool calls a choice ends at its first call.
    private func endIfSingleCall(_ i: Int) {
        if !request.parallelToolCalls { choices.cancel(i) }
    }

    private func call(_ json: String, choice: Int, made: Int) throws -> (id: String, name: String, arguments: String) {
        let parsed = try ServedModel.parseToolCall(json)
        return ("call_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(24).lowercased(), parsed.name, parsed.arguments)
    }

    private static func callJSON(_ c: (id: String, name: String, arguments: String)) -> JSONValue {
        .object([("id", .string(c.id)), ("type", .string("function")),
                 ("function", .object([("name", .string(c.name)), ("arguments", .string(c.arguments))]))])
    }

    private func usage(_ summaries: [GenerationSummary?]) -> JSONValue {
        let first = summaries.compactMap { $0 }.first
        return OpenAIWire.usage(prompt: first?.promptTokens ?? 0, cached: first?.cachedTokens ?? 0,
                                completion: summaries.reduce(0) { $0 + ($1?.generatedTokens ?? 0) })
    }
}

extension APIError {
    init(scheduler error: SchedulerError) {
        switch error {
        case .queueFull(let capacity): self = .queueFull(capacity: capacity)
        case .shutDown: self = .shuttingDown()
        case .promptTooLong(let tokens, let context): self = .contextLength(prompt: tokens, limit: 0, context: context, param: "messages")
        case .emptyPrompt: self = .invalid("prompt", "The prompt holds no tokens.")
        case .stepFailed(let why): self = .server("A model step failed: \(why)")
        }
    }
}

/// Runs blocking work (grammar compilation) on a thread of its own, not the cooperative pool.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}
