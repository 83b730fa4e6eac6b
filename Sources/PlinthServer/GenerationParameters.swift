import Foundation
import PlinthRuntime

/// The fields chat and text completions share: sampling, limits, stops, choices, log-probabilities.
struct GenerationParameters: Sendable {
    var sampling: SamplingParameters
    /// Whether the request fixed its seed (each choice `i` then uses `seed + i`).
    var seeded: Bool
    var maxTokens: Int?
    var stop: [String]
    var n: Int
    var stream: Bool
    var includeUsageInStream: Bool
    /// Alternatives to report per token when log-probabilities are asked for; nil when not.
    var logprobs: Int?

    /// Reads the shared fields. OpenAI's defaults: temperature 1, top_p 1, no top-k; `top_k`
    /// and `min_p` are accepted as llama-server accepts them.
    init(_ r: RequestReader, maxTokenKeys: [String]) throws {
        let temperature = try r.number("temperature", in: 0...2) ?? 1
        let topP = try r.number("top_p", in: 0...1) ?? 1
        guard topP > 0 else { throw APIError.invalid("top_p", "`top_p` must be greater than 0.") }
        let topK = try r.integer("top_k", in: 0...100_000) ?? 0
        let minP = try r.number("min_p", in: 0...1) ?? 0
        let penalty = try r.number("repetition_penalty", in: 0.01...10) ?? 1
        // OpenAI's penalties, over the last 64 tokens (prompt included) as llama-server applies them.
        let presence = try r.number("presence_penalty", in: -2...2) ?? 0
        let frequency = try r.number("frequency_penalty", in: -2...2) ?? 0
        let seed = try r.seed("seed")
        seeded = seed != nil
        sampling = SamplingParameters(temperature: Float(temperature), topK: topK, topP: Float(topP), minP: Float(minP),
                                      repetitionPenalty: Float(penalty), presencePenalty: Float(presence),
                                      frequencyPenalty: Float(frequency), seed: seed ?? UInt64.random(in: .min ... .max))
        if temperature == 0 {
            // Greedy, but the penalties still change which token is the best.
            var greedy = SamplingParameters.greedy
            greedy.repetitionPenalty = sampling.repetitionPenalty
            greedy.presencePenalty = sampling.presencePenalty
            greedy.frequencyPenalty = sampling.frequencyPenalty
            sampling = greedy
        }
        maxTokens = nil
        for key in maxTokenKeys {
            if let m = try r.integer(key, in: 1...1_000_000) { maxTokens = m }
        }
        stop = try r.stopSequences()
        n = try r.integer("n", in: 1...16) ?? 1
        stream = try r.bool("stream") ?? false
        includeUsageInStream = try r.object("stream_options")?.bool("include_usage") ?? false
        logprobs = nil
    }

    /// The sampling of choice `index`: its own seed, so choices differ and a seeded request repeats.
    func sampling(forChoice index: Int) -> SamplingParameters {
        var s = sampling
        s.seed = sampling.seed &+ UInt64(index)
        return s
    }
}
