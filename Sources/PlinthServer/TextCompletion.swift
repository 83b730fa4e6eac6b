import Foundation
import Plinth
import PlinthGrammar
import PlinthRuntime

/// One `POST /v1/completions`: raw prompts continued without a chat template.
struct TextCompletion: Sendable {
    let modelID: String
    let model: ServedModel
    let parameters: GenerationParameters
    let echo: [String]
    /// Each echo's length in Unicode scalars, where the generated text's offsets start.
    let echoLengths: [Int]
    /// The first prompt token of each choice whose echoed prompt is scored (it has no
    /// log-probability: nothing comes before it); nil for the others.
    let firstTokens: [Int32?]
    let choices: Choices
    let id = OpenAIWire.id("cmpl")
    let created = OpenAIWire.now()

    init(body: Data, host: ModelHost, settings: ServerSettings, metrics: Metrics) async throws {
        let r = try RequestReader(body: body)
        let selection = try host.model(named: try r.requiredString("model"))
        let (modelID, model) = (selection.id, selection.model)
        var p = try GenerationParameters(r, maxTokenKeys: ["max_tokens", "max_completion_tokens"], fewestTokens: 0)
        if p.maxTokens == nil { p.maxTokens = 16 }  // OpenAI's default for this endpoint
        try p.checkTokens(vocabularySize: model.tokenizer.vocabularySize)
        p.logprobs = try r.integer("logprobs", in: 0...20)
        if r.raw("suffix") != nil {
            throw APIError.invalid("suffix", "`suffix` (insertion) is not supported.", code: "unsupported_parameter")
        }
        let tokenizer = model.tokenizer
        // A string, an array of strings, an array of token ids, or an array of such arrays.
        var prompts: [(text: String, tokens: [Int32])] = []
        guard let v = r.raw("prompt") else { throw APIError.invalid("prompt", "`prompt` is required.", code: "missing_required_parameter") }
        if let s = v.stringValue {
            prompts = [(s, tokenizer.encode(s, addSpecial: true, parseSpecial: true))]
        } else if let items = v.arrayValue, !items.isEmpty {
            if items.allSatisfy({ $0.integerValue != nil }) {
                let t = try RequestReader.tokenIDs(items, param: "prompt", vocabularySize: tokenizer.vocabularySize)
                prompts = [(tokenizer.decode(t), t)]
            } else {
                prompts = try items.enumerated().map { i, item in
                    if let s = item.stringValue { return (s, tokenizer.encode(s, addSpecial: true, parseSpecial: true)) }
                    if let ids = item.arrayValue { let t = try RequestReader.tokenIDs(ids, param: "prompt[\(i)]", vocabularySize: tokenizer.vocabularySize); return (tokenizer.decode(t), t) }
                    throw APIError.invalid("prompt[\(i)]", "`prompt[\(i)]` must be a string or an array of token ids.", code: "invalid_type")
                }
            }
        } else {
            throw APIError.invalid("prompt", "`prompt` must be a string, an array of strings or an array of token ids.", code: "invalid_type")
        }
        guard prompts.count * p.n <= 64 else { throw APIError.invalid("prompt", "At most 64 completions per request (prompts × n).") }
        for (i, prompt) in prompts.enumerated() {
            guard !prompt.tokens.isEmpty else { throw APIError.invalid("prompt", "Prompt \(i) holds no tokens.") }
            if prompt.tokens.count + (p.maxTokens ?? 1) > model.contextLength {
                throw APIError.contextLength(prompt: prompt.tokens.count, limit: p.maxTokens ?? 0, context: model.contextLength, param: "prompt")
            }
        }
        // response_format as on chat (llama-server and vLLM take it here too), compiled off the pool.
        let constraint: (@Sendable () throws -> any Constraint)?
        if let schema = try ChatRequest.responseFormat(r).enforcedSchema {
            let timeLimit = settings.schemaTimeLimit
            constraint = try await offPool {
                let grammar: CompiledGrammar
                do {
                    grammar = try model.grammar(jsonSchema: schema, timeLimit: timeLimit)
                } catch {
                    throw APIError.invalid("response_format", "The response schema can't be enforced: \(error.localizedDescription)",
                                           code: "unsupported_schema")
                }
                return try model.constraint(response: grammar, tools: [], required: false, after: Transcript(), timeLimit: timeLimit)
            }
        } else {
            constraint = nil
        }
        var requests: [GenerationRequest] = []
        var echo: [String] = []
        var firstTokens: [Int32?] = []
        let echoes = try r.bool("echo") ?? false
        // Generating nothing is for scoring a prompt: echoed, with its log-probabilities.
        if p.maxTokens == 0 && !echoes {
            throw APIError.invalid("max_tokens", "`max_tokens` 0 generates nothing: it is for scoring the prompt, with `echo` (and `logprobs`).")
        }
        // A response format's forced opening would come before the prompt's scores.
        if echoes && p.logprobs != nil && constraint != nil {
            throw APIError.invalid("response_format", "`response_format` with `echo` and `logprobs` (scoring the prompt) is not supported.",
                                   code: "unsupported_parameter")
        }
        let adapter = try selection.adapter(scale: p.adapterScale)
        for prompt in prompts {
            // Each prompt's choices are seeded as the prompt alone would be: a prompt's text
            // doesn't depend on the others in the list.
            for choice in 0..<p.n {
                // With echo, OpenAI lists the prompt's tokens with their log-probabilities (how
                // lm-evaluation-harness scores text), the first without one.
                requests.append(GenerationRequest(prompt: prompt.tokens, sampling: p.sampling(forChoice: choice),
                                                  maxTokens: p.maxTokens, stopSequences: p.stop, constraint: constraint,
                                                  logprobs: p.logprobs, adapter: adapter,
                                                  promptLogprobs: echoes ? p.logprobs : nil))
                firstTokens.append(echoes && p.logprobs != nil ? prompt.tokens[0] : nil)
                echo.append(echoes ? prompt.text : "")
            }
        }
        self.modelID = modelID
        self.model = model
        self.parameters = p
        self.echo = echo
        echoLengths = echo.map(\.unicodeScalars.count)
        self.firstTokens = firstTokens
        choices = try Choices(requests, on: model.scheduler, timeout: settings.requestTimeout, modelID: modelID, metrics: metrics,
                              param: prompts.count > 1 ? "prompt" : "n")
    }

    private struct Choice {
        var text = ""
        var tokens: [JSONValue] = []
        var tokenLogprobs: [JSONValue] = []
        var top: [JSONValue] = []
        var offsets: [JSONValue] = []
        var summary: GenerationSummary?
        /// The bytes of the scored prompt's tokens so far (where the next one starts).
        var promptBytes: [UInt8] = []
    }

    /// Legacy `logprobs`: parallel arrays of tokens, their log-probabilities, alternatives and text offsets.
    private static func logprobs(_ c: Choice) -> JSONValue {
        .object([("tokens", .array(c.tokens)), ("token_logprobs", .array(c.tokenLogprobs)), ("top_logprobs", .array(c.top)),
                 ("text_offset", .array(c.offsets))])
    }

    /// A scored prompt's first token, which has no log-probability (null, as OpenAI's).
    private func recordFirst(_ token: Int32, into c: inout Choice) {
        c.tokens.append(.string(tokenText(token)))
        c.tokenLogprobs.append(.null)
        c.top.append(.null)
        c.offsets.append(OpenAIWire.int(0))
        c.promptBytes = model.tokenizer.tokenBytes(token)
    }

    /// A token's text; one that is not whole UTF-8 is named by its bytes, as OpenAI does
    /// ("bytes:\\xe6"), so that alternatives made of parts of one character stay apart.
    private func tokenText(_ id: Int32) -> String {
        let bytes = model.tokenizer.tokenBytes(id)
        if let s = String(validating: bytes, as: UTF8.self) { return s }
        return "bytes:" + bytes.map { String(format: "\\x%02x", $0) }.joined()
    }

    /// A scored prompt token's entries; its offset counts the Unicode scalars of the prompt's
    /// tokens before it (a token that only begins a character starts where that character does).
    private func recordPrompt(_ entry: TokenLogprob, into c: inout Choice) {
        let whole = Tokenizer.completeUTF8Length(c.promptBytes, upTo: c.promptBytes.count)
        record(entry, into: &c, offset: String(decoding: c.promptBytes[..<whole], as: UTF8.self).unicodeScalars.count)
        c.promptBytes += model.tokenizer.tokenBytes(entry.token)
    }

    /// One token's entries at `offset`, in Unicode scalars (Python's string indices) from the
    /// start of the choice's text, echoed prompt included.
    private func record(_ entry: TokenLogprob, into c: inout Choice, offset: Int) {
        c.tokens.append(.string(tokenText(entry.token)))
        c.tokenLogprobs.append(OpenAIWire.float(entry.logprob))
        var top: [(key: String, value: JSONValue)] = []
        for alt in entry.alternatives where !top.contains(where: { $0.key == tokenText(alt.token) }) {
            top.append((tokenText(alt.token), OpenAIWire.float(alt.logprob)))
        }
        c.top.append(.object(top))
        c.offsets.append(OpenAIWire.int(offset))
    }

    /// A choice's event into its state: text, a generated or scored prompt token, its end.
    private func take(_ event: GenerationEvent, _ i: Int, into c: inout Choice) {
        switch event {
        case .text(let t, _): c.text += t
        case .logprob(let e): record(e, into: &c, offset: echoLengths[i] + e.textOffset)
        case .promptLogprob(let e): recordPrompt(e, into: &c)
        case .finished(let s): c.summary = s
        default: break
        }
    }

    func response() async throws -> JSONValue {
        var state = echo.map { Choice(text: $0) }
        var begun = Array(repeating: false, count: echo.count)
        try await choices.consume { i, event in
            // A scored prompt's first token leads its list (a one-token prompt has no other).
            if !begun[i], let first = firstTokens[i] { recordFirst(first, into: &state[i]) }
            begun[i] = true
            take(event, i, into: &state[i])
        }
        let choices: [JSONValue] = state.enumerated().map { i, c in
            .object([("text", .string(c.text)), ("index", OpenAIWire.int(i)),
                     ("logprobs", parameters.logprobs == nil ? .null : Self.logprobs(c)),
                     ("finish_reason", OpenAIWire.finishReason(c.summary, toolCalls: false))])
        }
        return .object(envelope + [("choices", .array(choices)), ("usage", usage(state.map(\.summary)))])
    }

    func stream(_ send: (String) async throws -> Void) async throws {
        var state = echo.map { _ in Choice() }
        var echoed = Array(repeating: false, count: echo.count)
        func chunk(_ i: Int, _ text: String, _ c: Choice?, finish: JSONValue = .null) -> String {
            OpenAIWire.event(.object(envelope + [
                ("choices", .array([.object([("text", .string(text)), ("index", OpenAIWire.int(i)),
                                             ("logprobs", c.map(Self.logprobs) ?? .null), ("finish_reason", finish)])])),
            ] + (parameters.includeUsageInStream ? [("usage", .null)] : [])))
        }
        do {
            try await choices.consume { i, event in
                if !echoed[i] {
                    echoed[i] = true
                    if !echo[i].isEmpty { try await send(chunk(i, echo[i], nil)) }
                    if let first = firstTokens[i] { recordFirst(first, into: &state[i]) }
                }
                switch event {
                case .text(let t, _):
                    // Text with nothing to show carries only the tokens it stands for, if any.
                    guard !t.isEmpty || !state[i].tokens.isEmpty else { break }
                    try await send(chunk(i, t, parameters.logprobs == nil ? nil : state[i]))
                    state[i] = Choice()
                case .finished(let s):
                    take(event, i, into: &state[i])
                    // A scored prompt's tokens not sent with text yet go with the last chunk.
                    let pending = state[i].tokens.isEmpty || parameters.logprobs == nil ? nil : state[i]
                    try await send(chunk(i, "", pending, finish: OpenAIWire.finishReason(s, toolCalls: false)))
                    state[i] = Choice(summary: s)
                default:
                    take(event, i, into: &state[i])
                }
            }
        } catch let error as APIError {
            try await send(OpenAIWire.event(error.json))
            throw error
        }
        if parameters.includeUsageInStream {
            try await send(OpenAIWire.event(.object(envelope + [("choices", .array([])), ("usage", usage(state.map(\.summary)))])))
        }
        try await send(OpenAIWire.done)
    }

    private var envelope: [(String, JSONValue)] {
        OpenAIWire.envelope(id: id, object: "text_completion", created: created, model: modelID)
    }

    private func usage(_ summaries: [GenerationSummary?]) -> JSONValue {
        let s = summaries.compactMap { $0 }
        return OpenAIWire.usage(prompt: s.reduce(0) { $0 + $1.promptTokens } / max(1, parameters.n),
                                cached: s.reduce(0) { $0 + $1.cachedTokens } / max(1, parameters.n),
                                completion: s.reduce(0) { $0 + $1.generatedTokens })
    }
}
