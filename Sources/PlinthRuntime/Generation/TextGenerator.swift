import Foundation

/// Why generation stopped.
public enum FinishReason: String, Sendable, Equatable {
    /// The model produced an end-of-generation token.
    case endOfGeneration
    /// The requested number of tokens was produced.
    case maxTokens
    /// The context window is full.
    case contextFull
    /// The caller asked to stop.
    case stopped
}

/// What one generation produced, with its timings.
public struct GenerationResult: Sendable, Equatable {
    public var promptTokens: Int
    public var tokens: [Int32]
    public var text: String
    public var finishReason: FinishReason
    public var prefillSeconds: Double
    public var decodeSeconds: Double

    public var decodeTokensPerSecond: Double { decodeSeconds > 0 ? Double(tokens.count) / decodeSeconds : 0 }
    public var prefillTokensPerSecond: Double { prefillSeconds > 0 ? Double(promptTokens) / prefillSeconds : 0 }
}

/// Runs prompt → tokens for one sequence on an ``InferenceContext`` slot, streaming text.
public struct TextGenerator {
    public let model: Model
    public let context: InferenceContext
    public var slot: Int

    public init(model: Model, context: InferenceContext, slot: Int = 0) {
        self.model = model
        self.context = context
        self.slot = slot
    }

    /// Generates up to `maxTokens` tokens after `prompt` (the slot is cleared first).
    /// `onText` receives each complete piece of UTF-8 text as it is produced and returns false to stop.
    public func generate(prompt: [Int32], maxTokens: Int, sampling: SamplingParameters,
                         onText: (String) -> Bool = { _ in true }) throws -> GenerationResult {
        guard !prompt.isEmpty else { throw ModelError.emptyBatch }
        guard prompt.count < context.contextLength else {
            throw ModelError.contextOverflow(slot: slot, needed: prompt.count + 1, capacity: context.contextLength)
        }
        context.reset(slot: slot)
        var sampler = Sampler(sampling)
        var detok = StreamingDetokenizer(tokenizer: model.tokenizer)
        var history = prompt
        var produced: [Int32] = []
        var text = ""
        var reason = FinishReason.maxTokens

        let t0 = DispatchTime.now().uptimeNanoseconds
        try context.forward(.sequence(prompt, slot: slot))
        let t1 = DispatchTime.now().uptimeNanoseconds
        var position = prompt.count
        while produced.count < maxTokens {
            let token = sampler.sample(context.logits(0), history: history[...])
            if model.tokenizer.isEndOfGeneration(token) { reason = .endOfGeneration; break }
            produced.append(token)
            history.append(token)
            let piece = detok.append(token)
            text += piece
            if !piece.isEmpty && !onText(piece) { reason = .stopped; break }
            if produced.count == maxTokens { break }
            guard position < context.contextLength else { reason = .contextFull; break }
            var b = Batch()
            b.add(token, position: position, slot: slot, logits: true)
            try context.forward(b)
            position += 1
        }
        let rest = detok.finish()
        if !rest.isEmpty {
            text += rest
            _ = onText(rest)
        }
        let t2 = DispatchTime.now().uptimeNanoseconds
        return GenerationResult(promptTokens: prompt.count, tokens: produced, text: text, finishReason: reason,
                                prefillSeconds: Double(t1 - t0) / 1e9, decodeSeconds: Double(t2 - t1) / 1e9)
    }
}
