import Foundation

/// Why generation stopped.
public enum FinishReason: String, Sendable, Equatable {
    /// The model produced an end-of-generation token (or its constraint ended the output).
    case endOfGeneration
    /// The requested number of tokens was produced.
    case maxTokens
    /// The context window is full.
    case contextFull
    /// The text reached one of the request's stop sequences.
    case stopSequence
    /// The caller cancelled the request.
    case cancelled
}

/// One generation to run on a ``Scheduler``: a prompt and how to continue it.
public struct GenerationRequest: Sendable {
    /// The prompt's tokens (at least one).
    public var prompt: [Int32]
    public var sampling: SamplingParameters
    /// The most tokens to generate; nil means until the model ends or the context is full.
    /// 0 only prefills the prompt into the prefix cache (prewarming).
    public var maxTokens: Int?
    /// Text that ends the output when it appears (it is not part of the output).
    public var stopSequences: [String]
    /// Makes the sequence's constraint, on the scheduler's thread, when the request starts.
    public var constraint: (@Sendable () throws -> any Constraint)?
    /// When set, each generated token's log-probability is reported (a ``GenerationEvent/logprob(_:)``
    /// before the text that shows it) with this many of the most likely alternatives. Tokens a
    /// stop sequence cut off are not reported.
    public var logprobs: Int?
    /// The adapter the sequence runs with, unmerged (nil: the base model). Sequences with
    /// different adapters share the scheduler's steps; prefixes are shared only between
    /// sequences of the same adapter.
    public var adapter: LoRAAdapter?
    /// When set, each prompt token after the first is scored: its log-probability given the
    /// tokens before it (a ``GenerationEvent/promptLogprob(_:)`` each, in order, before anything
    /// generated) with this many of the most likely alternatives. The prompt is then computed
    /// whole, never taken from the prefix cache (a cached position has no logits).
    public var promptLogprobs: Int?

    public init(prompt: [Int32], sampling: SamplingParameters = .greedy, maxTokens: Int? = nil,
                stopSequences: [String] = [], constraint: (@Sendable () throws -> any Constraint)? = nil, logprobs: Int? = nil,
                adapter: LoRAAdapter? = nil, promptLogprobs: Int? = nil) {
        self.prompt = prompt
        self.promptLogprobs = promptLogprobs.map { max(0, $0) }
        self.adapter = adapter
        self.sampling = sampling
        self.maxTokens = maxTokens
        self.stopSequences = stopSequences
        self.constraint = constraint
        self.logprobs = logprobs.map { max(0, $0) }
    }
}

/// What one request produced, with its timings (seconds).
public struct GenerationSummary: Sendable, Equatable {
    /// The prompt's tokens (0 for a request cancelled before it started).
    public var promptTokens: Int
    /// Prompt tokens taken from the prefix cache instead of being prefilled.
    public var cachedTokens: Int
    /// The generated tokens, in order (forced tokens included; taken-back ones not).
    public var tokens: [Int32]
    public var finishReason: FinishReason
    /// From submission to admission (waiting for a slot).
    public var queueSeconds: Double
    /// From admission to the prompt's last step.
    public var prefillSeconds: Double
    /// From submission to the first generated token.
    public var timeToFirstToken: Double
    /// From the first generated token to the end.
    public var decodeSeconds: Double
    /// Steps at which the constraint refused the sampler's choice because the output could not
    /// have been completed in the tokens left after it: when not 0, the token budget (the
    /// request's limit or the context's room) steered the output to an early, valid end.
    public var budgetRefusals: Int = 0

    public var generatedTokens: Int { tokens.count }
    /// Whether the token budget shaped the output (``budgetRefusals`` is not 0).
    public var truncatedByBudget: Bool { budgetRefusals > 0 }
    public var decodeTokensPerSecond: Double { decodeSeconds > 0 ? Double(max(tokens.count - 1, 0)) / decodeSeconds : 0 }
    public var prefillTokensPerSecond: Double {
        prefillSeconds > 0 ? Double(promptTokens - cachedTokens) / prefillSeconds : 0
    }
}

/// A generated token's log-probability under the model (its raw logits, before sampling
/// filters and masks), with the most likely tokens at its position.
public struct TokenLogprob: Sendable, Equatable {
    public struct Alternative: Sendable, Equatable {
        public var token: Int32
        public var logprob: Float
    }

    public var token: Int32
    /// 0 for a token the constraint forced (jump-forward): it had no alternative.
    public var logprob: Float
    /// The most likely tokens, most likely first.
    public var alternatives: [Alternative]
    /// Where the token's text starts in the generated text, in Unicode scalars (as Python
    /// indexes a string). A token that only begins a character starts where that character does.
    public var textOffset = 0

    /// The log-softmax of `logits` at `token`, and the `top` most likely tokens.
    public init(token: Int32, logits: UnsafeBufferPointer<Float>, top: Int) {
        var maximum = -Float.infinity
        for x in logits where x > maximum { maximum = x }
        var sum: Double = 0
        for x in logits { sum += Double(expf(x - maximum)) }
        let logZ = maximum + Float(log(sum))
        self.token = token
        logprob = Int(token) < logits.count ? logits[Int(token)] - logZ : -.infinity
        // The best `top`, kept sorted in a short array (top is at most a few dozen).
        var best: [Alternative] = []
        if top > 0 {
            best.reserveCapacity(top + 1)
            for (i, x) in logits.enumerated() where best.count < top || x > best[best.count - 1].logprob {
                let at = best.firstIndex { x > $0.logprob } ?? best.count
                best.insert(Alternative(token: Int32(i), logprob: x), at: at)
                if best.count > top { best.removeLast() }
            }
        }
        alternatives = best.map { Alternative(token: $0.token, logprob: $0.logprob - logZ) }
    }

    /// A token the constraint forced.
    public init(forced token: Int32, top: Int) {
        self.token = token
        logprob = 0
        alternatives = top > 0 ? [Alternative(token: token, logprob: 0)] : []
    }
}

/// What a request reports while it runs, in order; `finished` or `failed` comes last.
public enum GenerationEvent: Sendable {
    /// Text completed by the last tokens, and how many tokens that was.
    case text(String, tokenCount: Int)
    /// The log-probability of a visible token (when the request asks for them), sent just
    /// before the `text` event that shows the token's text (or its first part).
    case logprob(TokenLogprob)
    /// The log-probability of a prompt token given those before it (``GenerationRequest/promptLogprobs``),
    /// from the second prompt token on, in order, before any other event.
    case promptLogprob(TokenLogprob)
    /// A complete tool call's JSON object, and how many tokens it took (tags included).
    case toolCall(String, tokenCount: Int)
    case finished(GenerationSummary)
    case failed(any Error)
}
