import Foundation

/// The decode state of one sequence: its sampler and random state, its constraint, stop rules,
/// token limit and streaming text. It turns each step's logits into the tokens the sequence
/// feeds next, and reports text as it completes.
struct SequenceDecoder {
    /// What the sequence does after a call.
    enum Next {
        /// Feed these tokens (the model's next step continues from the last one).
        case feed
        /// Feed after taking back generated tokens past `keeping`.
        case rewind(keeping: Int)
        case finish(FinishReason)
    }

    let tokenizer: Tokenizer
    private var sampler: Sampler
    private let constraint: (any Constraint)?
    private var detokenizer: StreamingDetokenizer
    private let stops: StopSequenceFilter?
    /// The most tokens to generate.
    let limit: Int
    /// Positions the sequence may fill (the context window).
    let contextLength: Int
    /// Steps at which the constraint refused the sampler's choice because the output could not
    /// have been completed in the tokens left after it (the budget steered the output to its end).
    private(set) var budgetRefusals = 0
    /// The backend's choice did not fit the budget: the next choice is made here, from logits.
    private var needsLogits = false
    /// The prompt followed by the generated tokens (the repetition penalty's history).
    private(set) var history: [Int32]
    let promptCount: Int
    private var mask: [UInt32]
    /// Tokens whose text has not been reported yet.
    private var pendingTokens = 0
    /// Alternatives to report with each token's log-probability; nil: none reported.
    private let logprobCount: Int?
    /// The log-probability of the token just sampled, reported when its text is.
    private var sampledLogprob: TokenLogprob?
    /// Log-probabilities of tokens whose text is not shown yet (held back as a possible stop
    /// sequence or an incomplete character), each with where its text starts; reported just
    /// before the text that shows them, and dropped when a stop sequence cuts them off.
    private var heldLogprobs: [TokenLogprob] = []
    /// Log-probabilities of tokens a constraint took in unseen (text it holds back, or a tool
    /// call's), with their place among the generated tokens: its text, when it comes, shows
    /// the oldest (``ConstraintOutput/emitText(_:tokenCount:)`` names how many); a call drops them.
    private var unseenLogprobs: [(entry: TokenLogprob, index: Int)] = []
    /// Unicode scalars of generated text decoded, and shown, so far.
    private var decodedScalars = 0, shownScalars = 0

    var generatedCount: Int { history.count - promptCount }
    var generated: ArraySlice<Int32> { history[promptCount...] }
    /// Tokens the sequence may still add: its token limit, or the room left in the context.
    var remaining: Int { max(0, min(limit - generatedCount, contextLength - history.count)) }

    init(tokenizer: Tokenizer, prompt: [Int32], sampling: SamplingParameters, limit: Int, contextLength: Int = .max,
         stopSequences: [String], constraint: (any Constraint)?, logprobs: Int? = nil) {
        self.tokenizer = tokenizer
        sampler = Sampler(sampling)
        self.constraint = constraint
        detokenizer = StreamingDetokenizer(tokenizer: tokenizer)
        stops = stopSequences.isEmpty ? nil : StopSequenceFilter(stopSequences)
        self.limit = limit
        self.contextLength = contextLength
        history = prompt
        promptCount = prompt.count
        mask = constraint == nil ? [] : Array(repeating: 0, count: (tokenizer.vocabularySize + 31) / 32)
        logprobCount = logprobs
    }

    /// Tokens the constraint forces before the first sample.
    mutating func begin(_ emit: (GenerationEvent) -> Void) throws -> Next {
        guard let constraint else { return .feed }
        // Forced tokens go through the model with the prompt: they must fit in the context.
        var out = ConstraintOutput(remaining: remaining)
        try constraint.begin(&out)
        return apply(out, emit)
    }

    /// Chooses the next token(s) from the logits of the sequence's last token.
    mutating func advance(_ logits: UnsafeBufferPointer<Float>, _ emit: (GenerationEvent) -> Void) throws -> Next {
        needsLogits = false
        let next = try choose(logits, emit)
        sampledLogprob = nil
        return next
    }

    private mutating func choose(_ logits: UnsafeBufferPointer<Float>, _ emit: (GenerationEvent) -> Void) throws -> Next {
        /// Takes the chosen token, noting its log-probability first when they are reported.
        func take(_ token: Int32, _ emit: (GenerationEvent) -> Void) throws -> Next {
            if let k = logprobCount { sampledLogprob = TokenLogprob(token: token, logits: logits, top: k) }
            return try accept(token, emit)
        }
        guard let constraint else {
            return try take(sampler.sample(logits, history: history[...]), emit)
        }
        let masked = mask.withUnsafeMutableBufferPointer { constraint.fillAllowed($0) }
        guard masked else { return try take(sampler.sample(logits, history: history[...]), emit) }
        func sample() -> Int32 { mask.withUnsafeBufferPointer { sampler.sample(logits, history: history[...], allowedMask: $0) } }
        let first = sample()
        let left = remaining
        guard !constraint.fits(first, remaining: left) else { return try take(first, emit) }
        // The choice would leave the output unable to end in time: choose as if the mask held
        // only the tokens that fit (some always does: a byte toward the end).
        budgetRefusals += 1
        let p = sampler.parameters
        if p.isGreedy && !p.adjustsLogits(history: history[...]) {
            // Greedy: the best token that fits, walking down the allowed tokens by logit.
            var ranked: [(id: Int32, logit: Float)] = []
            Self.forEachAllowed(in: mask) { t in
                if Int(t) < logits.count && t != first { ranked.append((t, logits[Int(t)])) }
            }
            ranked.sort { $0.logit > $1.logit || ($0.logit == $1.logit && $0.id < $1.id) }
            let token = ranked.first { constraint.fits($0.id, remaining: left) }?.id ?? first
            return try take(token, emit)
        }
        // Sampling: the mask of the tokens that fit, checked token by token, then one draw.
        disallow(first)
        Self.forEachAllowed(in: mask) { t in if !constraint.fits(t, remaining: left) { disallow(t) } }
        let token = mask.contains(where: { $0 != 0 }) ? sample() : first
        return try take(token, emit)
    }

    /// Calls `body` with each token `words` allows, in increasing order. `words` is a copy, so
    /// `body` may change the decoder's mask.
    private static func forEachAllowed(in words: [UInt32], _ body: (Int32) -> Void) {
        for w in 0..<words.count where words[w] != 0 {
            var bits = words[w]
            while bits != 0 {
                body(Int32(w * 32 + bits.trailingZeroBitCount))
                bits &= bits - 1
            }
        }
    }

    private mutating func disallow(_ token: Int32) { mask[Int(token) >> 5] &= ~(1 << (UInt32(token) & 31)) }

    /// How the next step may treat this sequence's logits: ``LogitsUse/argmax(allowed:)`` when the
    /// sampler's choice is the greedy one with no bias or penalty, with the constraint's allowed tokens
    /// (computed now, as ``advance(_:_:)`` would after the step: nothing changes them between),
    /// else ``LogitsUse/full``. For a backend that chooses tokens itself; then the step's token
    /// goes to ``advance(chosen:_:)``.
    mutating func logitsUse() -> LogitsUse {
        let p = sampler.parameters
        guard !needsLogits, logprobCount == nil else { return .full }
        let greedy = p.isGreedy && !p.adjustsLogits(history: history[...])
        let top = !greedy && p.topK <= LogitsUse.maxTopK
            && sampler.canSampleFromTop(history: history[...], vocabularySize: tokenizer.vocabularySize)
        guard greedy || top else { return .full }
        var allowed: [UInt32]? = nil
        if let constraint, mask.withUnsafeMutableBufferPointer({ constraint.fillAllowed($0) }) { allowed = mask }
        return greedy ? .argmax(allowed: allowed) : .top(k: p.topK, allowed: allowed)
    }

    /// Continues with a draw among the row's best tokens, which the backend found under
    /// ``logitsUse()``'s ``LogitsUse/top(k:allowed:)``: the token ``advance(_:_:)`` would draw.
    /// A token the constraint's budget refuses (or no candidate at all) asks again with the
    /// logits, the draw given back: the rewound step draws it again, as the whole row's path
    /// does, so a seeded run goes on as it would on the CPU.
    mutating func advance(top: UnsafeBufferPointer<TokenCandidate>, _ emit: (GenerationEvent) -> Void) throws -> Next {
        needsLogits = false
        let before = sampler
        guard let token = sampler.sample(top: top) else {
            sampler = before
            needsLogits = true
            return .rewind(keeping: generatedCount)
        }
        let next = try advance(chosen: token, emit)
        // Refused by the budget (the step asks for the logits again): the draw is given back.
        if needsLogits { sampler = before }
        return next
    }

    /// Continues with the token the backend chose under ``logitsUse()``.
    mutating func advance(chosen token: Int32, _ emit: (GenerationEvent) -> Void) throws -> Next {
        if let constraint, !constraint.fits(token, remaining: remaining) {
            // Ask again with the logits, where refused choices can be replaced (one step more);
            // the refusal is counted there, where the same choice is refused again.
            needsLogits = true
            return .rewind(keeping: generatedCount)
        }
        return try accept(token, emit)
    }

    /// Takes the sampled `token`: through the constraint (which may add forced tokens, rewind or
    /// finish), or straight into the history.
    private mutating func accept(_ token: Int32, _ emit: (GenerationEvent) -> Void) throws -> Next {
        guard let constraint else {
            if tokenizer.isEndOfGeneration(token) { return .finish(.endOfGeneration) }
            history.append(token)
            if let reason = report(token, emit) { return .finish(reason) }
            return generatedCount >= limit ? .finish(.maxTokens) : .feed
        }
        // The sampled token may be the one past the context's end (it is not fed: the sequence
        // ends there); tokens forced after it no further.
        let room = contextLength - history.count
        var out = ConstraintOutput(remaining: min(limit - generatedCount, room == .max ? room : room + 1))
        try constraint.accept(token, &out)
        return apply(out, emit)
    }

    /// Flushes held text at the end (and lets the constraint object to an incomplete output).
    mutating func end(_ reason: FinishReason, _ emit: (GenerationEvent) -> Void) throws {
        if let constraint {
            var out = ConstraintOutput(remaining: 0)
            try constraint.end(reason, &out)
            // Held text the constraint lets go may reach a stop sequence too.
            if case .finish(.stopSequence) = apply(out, emit) { return }
        }
        guard reason != .stopSequence else { return }
        var rest = detokenizer.finish()
        if let stops { rest = stops.flush(rest) }
        // The last text shows every token left, those whose text is empty too.
        if !rest.isEmpty || pendingTokens > 0 || !heldLogprobs.isEmpty { show(rest, all: true, emit) }
    }

    private mutating func apply(_ out: ConstraintOutput, _ emit: (GenerationEvent) -> Void) -> Next {
        for item in out.items {
            switch item {
            case .token(let token, let visible):
                history.append(token)
                if visible {
                    if let reason = report(token, emit) { return .finish(reason) }
                } else if let entry = logprob(of: token) {
                    unseenLogprobs.append((entry, generatedCount - 1))
                }
            case .text(let text, let count):
                // Text the constraint held back: its tokens are shown by it, and it goes
                // through the stop sequences as the tokens' own text does.
                for i in unseenLogprobs.indices.prefix(count) {
                    var entry = unseenLogprobs[i].entry
                    entry.textOffset = decodedScalars
                    heldLogprobs.append(entry)
                }
                unseenLogprobs.removeFirst(min(count, unseenLogprobs.count))
                pendingTokens += count
                if let reason = showDecoded(text, emit) { return .finish(reason) }
            case .toolCall(let json, let count):
                unseenLogprobs.removeFirst(min(count, unseenLogprobs.count))
                emit(.toolCall(json, tokenCount: count))
            }
        }
        if let keep = out.rewindTo, keep < generatedCount {
            unseenLogprobs.removeAll { $0.index >= keep }
            history.removeSubrange((promptCount + keep)...)
            return .rewind(keeping: keep)
        }
        if out.finished { return .finish(.endOfGeneration) }
        return generatedCount >= limit ? .finish(.maxTokens) : .feed
    }

    /// Streams a visible token's text; returns `.stopSequence` when the text reached a stop.
    private mutating func report(_ token: Int32, _ emit: (GenerationEvent) -> Void) -> FinishReason? {
        if var entry = logprob(of: token) {
            entry.textOffset = decodedScalars
            heldLogprobs.append(entry)
        }
        pendingTokens += 1
        return showDecoded(detokenizer.append(token), emit)
    }

    /// The log-probability of `token` when they are reported: the one noted when it was
    /// sampled, or a forced token's.
    private mutating func logprob(of token: Int32) -> TokenLogprob? {
        guard let k = logprobCount else { return nil }
        defer { sampledLogprob = nil }
        return sampledLogprob?.token == token ? sampledLogprob! : TokenLogprob(forced: token, top: k)
    }

    /// Decoded text, through the stop sequences, to the client; `.stopSequence` when it reached one.
    private mutating func showDecoded(_ text: String, _ emit: (GenerationEvent) -> Void) -> FinishReason? {
        decodedScalars += text.unicodeScalars.count
        var piece = text
        var stopped = false
        if let stops { (piece, stopped) = stops.filter(piece) }
        if !piece.isEmpty || (stopped && pendingTokens > 0) { show(piece, emit) }
        if stopped { heldLogprobs = [] }
        return stopped ? .stopSequence : nil
    }

    /// Emits text, after the log-probabilities of the tokens whose text begins in it or before.
    private mutating func show(_ text: String, all: Bool = false, _ emit: (GenerationEvent) -> Void) {
        shownScalars += text.unicodeScalars.count
        let shown = heldLogprobs.prefix { all || $0.textOffset < shownScalars }
        for entry in shown { emit(.logprob(entry)) }
        heldLogprobs.removeFirst(shown.count)
        emit(.text(text, tokenCount: pendingTokens))
        pendingTokens = 0
    }
}

/// Holds back streamed text while it could be the start of a stop sequence, and cuts the text
/// where one appears.
final class StopSequenceFilter {
    private let stops: [String]
    private var held = ""

    init(_ stops: [String]) { self.stops = stops.filter { !$0.isEmpty } }

    /// The text that can be shown now, and whether a stop sequence was reached.
    func filter(_ piece: String) -> (String, Bool) {
        held += piece
        var cut: String.Index?
        for stop in stops {
            if let r = held.range(of: stop), cut.map({ r.lowerBound < $0 }) ?? true { cut = r.lowerBound }
        }
        if let cut {
            let out = String(held[..<cut])
            held = ""
            return (out, true)
        }
        // Keep the longest tail that begins some stop sequence.
        var keep = 0
        for stop in stops {
            var n = min(stop.count, held.count)
            while n > keep && !held.hasSuffix(stop.prefix(n)) { n -= 1 }
            keep = max(keep, n)
        }
        let out = String(held.dropLast(keep))
        held = String(held.suffix(keep))
        return (out, false)
    }

    /// Everything held, at the end of the output.
    func flush(_ tail: String) -> String {
        let (out, stopped) = filter(tail)
        if stopped { return out }
        let rest = out + held
        held = ""
        return rest
    }
}
