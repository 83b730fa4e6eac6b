import Foundation
import PlinthRuntime

/// The fields chat and text completions share: sampling, limits, stops, choices, log-probabilities.
struct GenerationParameters: Sendable {
    var sampling: SamplingParameters
    var maxTokens: Int?
    var stop: [String]
    var n: Int
    var stream: Bool
    var includeUsageInStream: Bool
    /// Alternatives to report per token when log-probabilities are asked for; nil when not.
    var logprobs: Int?
    /// `adapter_scale`: the named adapter's update multiplied by this (0: the base model; nil
    /// and 1: as trained), as `--adapter-scale` and llama-server's per-request `lora` scale.
    var adapterScale: Float?

    /// Reads the shared fields. OpenAI's defaults: temperature 1, top_p 1, no top-k; `top_k`
    /// and `min_p` are accepted as llama-server accepts them.
    /// `fewestTokens`: 0 where a request may generate nothing (completions scoring an echoed prompt).
    init(_ r: RequestReader, maxTokenKeys: [String], fewestTokens: Int = 1) throws {
        let temperature = try r.number("temperature", in: 0...2) ?? 1
        // top_p 0 keeps only the most likely token, as OpenAI and llama-server take it.
        let topP = try r.number("top_p", in: 0...1) ?? 1
        let topK = try r.integer("top_k", in: 0...100_000) ?? 0
        let minP = try r.number("min_p", in: 0...1) ?? 0
        let penalty = try r.number("repetition_penalty", in: 0.01...10) ?? 1
        // OpenAI's penalties, over the last 64 tokens (prompt included) as llama-server applies them.
        let presence = try r.number("presence_penalty", in: -2...2) ?? 0
        let frequency = try r.number("frequency_penalty", in: -2...2) ?? 0
        let seed = try r.seed("seed")
        try Self.refuseUnsupported(r)
        sampling = SamplingParameters(temperature: Float(temperature), topK: topP == 0 ? 1 : topK, topP: Float(topP), minP: Float(minP),
                                      repetitionPenalty: Float(penalty), presencePenalty: Float(presence),
                                      frequencyPenalty: Float(frequency), seed: seed ?? UInt64.random(in: .min ... .max))
        sampling.logitBias = try Self.logitBias(r)
        if temperature == 0 {
            // Greedy, but the bias and penalties still change which token is the best.
            var greedy = SamplingParameters.greedy
            greedy.repetitionPenalty = sampling.repetitionPenalty
            greedy.presencePenalty = sampling.presencePenalty
            greedy.frequencyPenalty = sampling.frequencyPenalty
            greedy.logitBias = sampling.logitBias
            sampling = greedy
        }
        maxTokens = nil
        for key in maxTokenKeys {
            if let m = try r.integer(key, in: fewestTokens...1_000_000) { maxTokens = m }
        }
        stop = try r.stopSequences()
        n = try r.integer("n", in: 1...16) ?? 1
        stream = try r.bool("stream") ?? false
        includeUsageInStream = try r.object("stream_options")?.bool("include_usage") ?? false
        if r.raw("stream_options").map({ $0 != .null }) == true && !stream {
            throw APIError.invalid("stream_options", "`stream_options` is only allowed when `stream` is true.")
        }
        logprobs = nil
        adapterScale = try r.number("adapter_scale", in: -100...100).map(Float.init)
    }

    /// The sampling of choice `index`: its own seed, so choices differ and a seeded request
    /// repeats. Choice 0 uses the request's seed (a request with n = 1 repeats `generate
    /// --seed`); the others a mix of seed and index, so that seeds 6 and 7 share no choice.
    func sampling(forChoice index: Int) -> SamplingParameters {
        var s = sampling
        if index > 0 { s.seed = RandomSource.mix(sampling.seed, UInt64(index)) }
        return s
    }

    /// `logit_bias`: token ids (as strings, OpenAI's form) mapped to a bias from -100 to 100.
    private static func logitBias(_ r: RequestReader) throws -> [Int32: Float] {
        guard let bias = try r.object("logit_bias"), case .object(let members) = bias.value else { return [:] }
        var out: [Int32: Float] = [:]
        for (key, _) in members {
            // Written as OpenAI writes them ("5", not "+5" or "05", which would name 5 again).
            guard let id = Int(key), id >= 0, String(id) == key else {
                throw APIError.invalid("logit_bias", "`logit_bias` keys must be token ids (non-negative integers), not \"\(key)\".")
            }
            guard let token = Int32(exactly: id) else {
                throw APIError.invalid("logit_bias", "`logit_bias` names token \(key), which no model's vocabulary reaches.")
            }
            guard let value = try bias.number(key, in: -100...100) else {
                throw APIError.invalid(bias.name(key), "`\(bias.name(key))` must be a number, not null.", code: "invalid_type")
            }
            out[token] = Float(value)
        }
        return out
    }

    /// Refuses, rather than ignores, the fields of OpenAI's and llama-server's APIs that would
    /// change the output in a way this server doesn't (at their default values they are fine).
    private static func refuseUnsupported(_ r: RequestReader) throws {
        func refuse(_ key: String, _ why: String) throws {
            throw APIError.invalid(key, "`\(key)` \(why) is not supported.", code: "unsupported_parameter")
        }
        if let bestOf = try r.integer("best_of", in: 0...1_000), bestOf > 1 { try refuse("best_of", "above 1") }
        if let typical = try r.number("typical_p", in: 0...1), typical < 1 { try refuse("typical_p", "below 1") }
        if let mirostat = try r.integer("mirostat", in: 0...2), mirostat != 0 { try refuse("mirostat", "other than 0") }
        // Empty values ask for nothing (llama.cpp's clients send `"grammar": ""`).
        if let grammar = r.raw("grammar"), grammar != .string("") { try refuse("grammar", "(a GBNF grammar; use response_format)") }
        if let functions = r.raw("functions"), functions != .array([]) { try refuse("functions", "(use tools)") }
        if let call = r.raw("function_call"), call != .string("none"), call != .string("auto") {
            try refuse("function_call", "(use tool_choice)")
        }
        // Text is all these models write.
        if case .array(let kinds)? = r.raw("modalities"), kinds.contains(where: { $0 != .string("text") }) {
            try refuse("modalities", "other than [\"text\"]")
        }
        if let audio = r.raw("audio"), audio != .null { try refuse("audio", "(audio output)") }
    }

    /// Refuses bias on tokens the model doesn't have.
    func checkTokens(vocabularySize: Int) throws {
        if let id = sampling.logitBias.keys.first(where: { Int($0) >= vocabularySize }) {
            throw APIError.invalid("logit_bias", "`logit_bias` names token \(id), outside the model's \(vocabularySize)-token vocabulary.")
        }
    }
}
