import Foundation
internal import PlinthGrammar
internal import PlinthRuntime

/// What one turn asks the engine for.
struct LocalGenerationJob: Sendable {
    var prompt: [Int32]
    /// The most tokens to generate; nil means until the context is full.
    var maximumTokens: Int?
    var sampling: SamplingParameters
    /// The grammar the output must follow, or nil for free text.
    var grammar: CompiledGrammar?
}

/// What a turn produced, for usage and metadata.
struct LocalGenerationOutcome: Sendable {
    var promptTokens: Int
    var cachedTokens: Int
    var generatedTokens: Int
    var endedByModel: Bool
    var prefillSeconds: Double
    var decodeSeconds: Double
    var timeToFirstToken: Double
}

/// Events the engine reports while it decodes.
enum LocalGenerationEvent: Sendable {
    /// Text completed by the last tokens, and how many tokens that was.
    case text(String, tokenCount: Int)
}

/// Owns a model's ``InferenceContext``: one turn runs at a time, and each KV slot remembers the
/// tokens it holds so that a conversation that comes back only prefills what is new.
///
/// A turn runs synchronously inside the actor (no suspension points), so no other turn can
/// touch the context in between; callers wait for the actor, they don't block a thread. The
/// actor runs on its own thread (``EngineThread``), not on the cooperative pool.
actor LocalInferenceEngine {
    private let thread = EngineThread(name: "plinth-engine")
    nonisolated var unownedExecutor: UnownedSerialExecutor { thread.asUnownedSerialExecutor() }
    nonisolated let contextLength: Int
    let model: PlinthRuntime.Model
    private let context: InferenceContext
    /// The tokens in each slot's cache.
    private var slotTokens: [[Int32]]
    /// When each slot was last used, to evict the least recently used.
    private var slotUse: [UInt64]
    private var clock: UInt64 = 0

    init(model: PlinthRuntime.Model, contextLength: Int, slots: Int) throws {
        self.model = model
        context = try InferenceContext(transformer: model.transformer, contextLength: contextLength, slots: slots, maxBatch: 256)
        self.contextLength = context.contextLength
        slotTokens = Array(repeating: [], count: context.slotCount)
        slotUse = Array(repeating: 0, count: context.slotCount)
    }

    /// The slot whose cache shares the longest prefix with `prompt` (the least recently used
    /// among equals), and the length of that prefix.
    private func chooseSlot(for prompt: [Int32]) -> (slot: Int, shared: Int) {
        var best = (slot: 0, shared: -1)
        for (slot, tokens) in slotTokens.enumerated() {
            var n = 0
            let limit = min(tokens.count, prompt.count)
            while n < limit && tokens[n] == prompt[n] { n += 1 }
            if n > best.shared || (n == best.shared && slotUse[slot] < slotUse[best.slot]) { best = (slot, n) }
        }
        return (best.slot, max(best.shared, 0))
    }

    /// Forgets every slot's tokens, so the next turn starts cold.
    func forgetCachedTokens() {
        for slot in slotTokens.indices {
            context.reset(slot: slot)
            slotTokens[slot] = []
        }
    }

    /// Prefills `tokens` into a slot (reusing a shared prefix) without generating: for prewarming.
    func prefill(_ tokens: [Int32]) throws {
        guard !tokens.isEmpty, tokens.count < contextLength else { return }
        let (slot, shared) = chooseSlot(for: tokens)
        guard shared < tokens.count else { return }
        try load(tokens, into: slot, keeping: shared)
    }

    /// Puts `tokens` in a slot, keeping its first `keeping` tokens, and leaves the last token's
    /// logits ready. Cancellation is checked between chunks.
    private func load(_ tokens: [Int32], into slot: Int, keeping: Int) throws {
        clock += 1
        slotUse[slot] = clock
        context.reset(slot: slot, keeping: keeping)
        slotTokens[slot].removeSubrange(keeping...)
        var start = keeping
        let chunk = 256
        while start < tokens.count {
            try Task.checkCancellation()
            let end = min(start + chunk, tokens.count)
            try forward(Batch.sequence(Array(tokens[start..<end]), startingAt: start, slot: slot), slot: slot)
            slotTokens[slot] += tokens[start..<end]
            start = end
        }
    }

    private func forward(_ batch: Batch, slot: Int) throws {
        do {
            try context.forward(batch)
        } catch {
            // The slot's cache is in an unknown state: forget it.
            context.reset(slot: slot)
            slotTokens[slot] = []
            throw LocalLanguageModelError.inferenceFailed(error.localizedDescription)
        }
    }

    /// Runs one turn: prefills what the slot doesn't hold yet, then samples token by token,
    /// under the grammar's mask when there is one, reporting text as it completes.
    func generate(_ job: LocalGenerationJob, emit: @Sendable (LocalGenerationEvent) -> Void) throws -> LocalGenerationOutcome {
        let prompt = job.prompt
        let tokenizer = model.tokenizer
        let limit = job.maximumTokens ?? (contextLength - prompt.count)
        guard !prompt.isEmpty, prompt.count + max(limit, 1) <= contextLength else {
            throw LanguageModelError.contextSizeExceeded(.init(
                contextSize: contextLength, tokenCount: prompt.count + max(limit, 1),
                debugDescription: "The prompt is \(prompt.count) tokens and the response may take \(limit)."))
        }
        let t0 = DispatchTime.now().uptimeNanoseconds
        let (slot, shared) = chooseSlot(for: prompt)
        // At least the last prompt token goes through the model: its logits choose the first token.
        let keep = min(shared, prompt.count - 1)
        try load(prompt, into: slot, keeping: keep)
        let t1 = DispatchTime.now().uptimeNanoseconds

        var sampler = Sampler(job.sampling)
        var detokenizer = StreamingDetokenizer(tokenizer: tokenizer)
        let matcher = job.grammar?.makeMatcher()
        var mask = [UInt32](repeating: 0, count: job.grammar?.vocabulary.maskWordCount ?? 0)
        var history = prompt
        var generated = 0
        var pendingTokens = 0
        var endedByModel = false
        var firstToken: UInt64 = 0

        func push(_ token: Int32) {
            if firstToken == 0 { firstToken = DispatchTime.now().uptimeNanoseconds }
            generated += 1
            pendingTokens += 1
            history.append(token)
            let piece = detokenizer.append(token)
            if !piece.isEmpty {
                emit(.text(piece, tokenCount: pendingTokens))
                pendingTokens = 0
            }
        }
        /// Jump-forward: text the grammar allows in one way only (keys, punctuation) is taken
        /// without sampling, and its tokens go through the model in one batched step.
        func forcedTokens() throws -> [Int32] {
            guard let matcher else { return [] }
            let forced = matcher.forcedTokens { bytes in
                (try? tokenizer.encode(bytes: bytes, addSpecial: false, parseSpecial: false)) ?? []
            }
            var taken: [Int32] = []
            for token in forced.prefix(limit - generated) {
                guard matcher.accept(token) else { break }
                push(token)
                taken.append(token)
            }
            return taken
        }
        func feed(_ tokens: [Int32]) throws {
            if Task.isCancelled { throw CancellationError() }
            try forward(Batch.sequence(tokens, startingAt: history.count - tokens.count, slot: slot), slot: slot)
            slotTokens[slot] += tokens
        }

        let opening = try forcedTokens()
        if !opening.isEmpty && generated < limit { try feed(opening) }
        while generated < limit {
            let token: Int32
            if let matcher {
                mask.withUnsafeMutableBufferPointer { matcher.fillAllowedTokens($0) }
                token = mask.withUnsafeBufferPointer { words in
                    sampler.sample(context.logits(0), history: history[...],
                                   allowed: { words[Int($0) >> 5] & (1 << (UInt32($0) & 31)) != 0 })
                }
                guard matcher.accept(token) else {
                    throw LocalLanguageModelError.inferenceFailed("the sampler chose token \(token), which the grammar forbids")
                }
                if matcher.isTerminated { endedByModel = true; break }
            } else {
                token = sampler.sample(context.logits(0), history: history[...])
                if tokenizer.isEndOfGeneration(token) { endedByModel = true; break }
            }
            push(token)
            let step = try [token] + forcedTokens()
            if generated >= limit { break }
            try feed(step)
        }
        let rest = detokenizer.finish()
        if !rest.isEmpty || pendingTokens > 0 { emit(.text(rest, tokenCount: pendingTokens)) }
        if !endedByModel && job.maximumTokens == nil {
            // The context filled up before the model finished its answer.
            throw LanguageModelError.contextSizeExceeded(.init(
                contextSize: contextLength, tokenCount: prompt.count + generated + 1,
                debugDescription: "The response filled the context window before it ended."))
        }
        let t2 = DispatchTime.now().uptimeNanoseconds
        return LocalGenerationOutcome(
            promptTokens: prompt.count, cachedTokens: keep, generatedTokens: generated, endedByModel: endedByModel,
            prefillSeconds: Double(t1 - t0) / 1e9, decodeSeconds: Double(t2 - t1) / 1e9,
            timeToFirstToken: Double((firstToken == 0 ? t2 : firstToken) - t0) / 1e9)
    }
}
