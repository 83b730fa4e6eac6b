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
    /// How the model may call tools, or nil when it may not.
    var tools: LocalToolCalling? = nil
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
    /// A complete tool call: its JSON object (`{"name": …, "arguments": …}`) and how many
    /// tokens it took, tags included.
    case toolCall(String, tokenCount: Int)
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

    /// The slot for `prompt`, and how many of its first tokens that slot already holds.
    ///
    /// A slot whose cache the prompt continues for at least half its length is the same
    /// conversation coming back: the one sharing most is reused (the least recently used among
    /// equals). Otherwise the least recently used slot is taken, so that a prompt sharing only
    /// the chat template's opening with another conversation doesn't evict it.
    private func chooseSlot(for prompt: [Int32]) -> (slot: Int, shared: Int) {
        func shared(_ slot: Int) -> Int {
            let tokens = slotTokens[slot]
            var n = 0
            let limit = min(tokens.count, prompt.count)
            while n < limit && tokens[n] == prompt[n] { n += 1 }
            return n
        }
        var best: (slot: Int, shared: Int)?
        for slot in slotTokens.indices {
            let n = shared(slot)
            guard n > 0, 2 * n >= slotTokens[slot].count else { continue }
            if let b = best, n < b.shared || (n == b.shared && slotUse[slot] >= slotUse[b.slot]) { continue }
            best = (slot, n)
        }
        if let best { return best }
        let leastRecent = slotUse.indices.min { slotUse[$0] < slotUse[$1] } ?? 0
        return (leastRecent, shared(leastRecent))
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
        let responseMatcher = job.grammar?.makeMatcher()
        let tools = job.tools
        let wordCount = job.grammar?.vocabulary.maskWordCount ?? tools?.grammar.vocabulary.maskWordCount ?? 0
        var mask = [UInt32](repeating: 0, count: wordCount)
        var history = prompt
        var generated = 0
        var pendingTokens = 0
        var endedByModel = false
        var firstToken: UInt64 = 0

        /// Where the decoder is: the answer (free text or the response schema), inside a call's
        /// JSON object, or after a call (another call or the end of the turn).
        enum Phase { case answer, call(GrammarMatcher), betweenCalls(written: Int) }
        var phase = Phase.answer
        // Free text with tools is held back while it could be the start of `<tool_call>`.
        let holdsText = tools != nil && responseMatcher == nil
        var held: [UInt8] = []
        var textEmitted = false
        var callsMade = Set<String>()
        var repeatedCall = false
        // Where the current call's text began (tags included), for taking back a repeated call.
        var callStart = history.count
        var toolsBarred = false
        var rewind: Int?
        // Where the tags of the call being opened began.
        var openedAt: Int?
        var answerStarted = false
        var callBytes: [UInt8] = []
        var callTokens = 0

        enum Route { case text, call, markup }
        func push(_ token: Int32, _ route: Route = .text) {
            if firstToken == 0 { firstToken = DispatchTime.now().uptimeNanoseconds }
            generated += 1
            history.append(token)
            switch route {
            case .text where holdsText:
                pendingTokens += 1
                held += tokenizer.tokenBytes(token)
            case .text:
                pendingTokens += 1
                let piece = detokenizer.append(token)
                if !piece.isEmpty {
                    emit(.text(piece, tokenCount: pendingTokens))
                    pendingTokens = 0
                }
            case .call:
                callTokens += 1
                callBytes += tokenizer.tokenBytes(token)
            case .markup:
                callTokens += 1
            }
        }
        /// Emits held text that can no longer turn into `<tool_call>` (all of it when `all`).
        func releaseHeld(all: Bool) {
            var n = held.count
            if !all {
                let marker = LocalToolCalling.openingBytes
                var keep = min(held.count, marker.count - 1)
                while keep > 0 && !held.suffix(keep).elementsEqual(marker.prefix(keep)) { keep -= 1 }
                n = Self.completeUTF8Length(held, upTo: held.count - keep)
            }
            guard n > 0 else { return }
            textEmitted = true
            emit(.text(String(decoding: held[..<n], as: UTF8.self), tokenCount: pendingTokens))
            pendingTokens = 0
            held.removeSubrange(..<n)
        }
        /// Jump-forward: text the grammar allows in one way only (keys, punctuation) is taken
        /// without sampling, and its tokens go through the model in one batched step.
        func forcedTokens(_ matcher: GrammarMatcher, _ route: Route) -> [Int32] {
            let forced = matcher.forcedTokens { bytes in
                (try? tokenizer.encode(bytes: bytes, addSpecial: false, parseSpecial: false)) ?? []
            }
            var taken: [Int32] = []
            for token in forced.prefix(max(limit - generated, 0)) {
                guard matcher.accept(token) else { break }
                push(token, route)
                taken.append(token)
            }
            return taken
        }
        /// Writes fixed text (tool-call tags) without sampling.
        func forceMarkup(_ bytes: ArraySlice<UInt8>) -> [Int32] {
            guard !bytes.isEmpty else { return [] }
            let tokens = (try? tokenizer.encode(bytes: Array(bytes), addSpecial: false, parseSpecial: true)) ?? []
            for token in tokens { push(token, .markup) }
            return tokens
        }
        /// Starts decoding a call's JSON object; `leading` is text after `<tool_call>` the
        /// model already wrote.
        func beginCall(leading: ArraySlice<UInt8>) throws -> [Int32] {
            guard let tools else { return [] }
            let matcher = tools.grammar.makeMatcher()
            phase = .call(matcher)
            callBytes = []
            callStart = openedAt ?? history.count
            openedAt = nil
            var out: [Int32] = []
            var rest = leading
            if rest.first == UInt8(ascii: "\n") { rest = rest.dropFirst() } else if rest.isEmpty { out += forceMarkup([UInt8(ascii: "\n")]) }
            if !rest.isEmpty {
                guard matcher.accept(bytes: Array(rest)) else {
                    throw LanguageModelSession.GenerationError.decodingFailure(.init(
                        debugDescription: "The model began a tool call with text that isn't a call: \(String(decoding: rest, as: UTF8.self))"))
                }
                callBytes += rest
            }
            out += forcedTokens(matcher, .call)
            // A tool without arguments is written whole by jump-forward.
            if matcher.isComplete { out += endCall() }
            return out
        }
        /// Ends a complete call: reports it and writes the closing tag.
        func endCall() -> [Int32] {
            let call = String(decoding: callBytes, as: UTF8.self)
            let key = (try? JSONValue.parse(call))?.text ?? call
            // Small models fall into repeating a call. A call answered in an earlier round is
            // taken back and the model answers instead; the same call twice in a turn ends it.
            if tools?.answeredCalls.contains(key) == true {
                takeBackCall()
                return []
            }
            if !callsMade.insert(key).inserted {
                repeatedCall = true
                return []
            }
            emit(.toolCall(call, tokenCount: callTokens))
            callTokens = 0
            phase = .betweenCalls(written: 0)
            return forceMarkup(ArraySlice(Array(("\n" + ToolCallFormat.closing).utf8)))
        }
        func takeBackCall() {
            let start = callStart
            generated -= history.count - start
            history.removeSubrange(start...)
            callTokens = 0
            toolsBarred = true
            phase = .answer
            rewind = start
        }
        func feed(_ tokens: [Int32]) throws {
            if Task.isCancelled { throw CancellationError() }
            try forward(Batch.sequence(tokens, startingAt: history.count - tokens.count, slot: slot), slot: slot)
            slotTokens[slot] += tokens
        }
        func sample(allowed: @escaping (Int32) -> Bool) -> Int32 {
            sampler.sample(context.logits(0), history: history[...], allowed: allowed)
        }
        func sampleUnderMask(_ matcher: GrammarMatcher, or extra: Set<Int32>? = nil) -> Int32 {
            mask.withUnsafeMutableBufferPointer { matcher.fillAllowedTokens($0) }
            if let extra { for t in extra { mask[Int(t) >> 5] |= 1 << (UInt32(t) & 31) } }
            // The mask form visits only the allowed tokens (a closure call per token of the
            // vocabulary cost more than the mask itself).
            return mask.withUnsafeBufferPointer { sampler.sample(context.logits(0), history: history[...], allowedMask: $0) }
        }

        var step: [Int32] = []
        if tools?.required == true {
            openedAt = history.count
            step = forceMarkup(ArraySlice(LocalToolCalling.openingBytes))
            step += try beginCall(leading: [])
        } else if tools == nil, let responseMatcher {
            step = forcedTokens(responseMatcher, .text)
        }
        if !step.isEmpty && generated < limit { try feed(step) }
        while generated < limit {
            step = []
            switch phase {
            case .call(let matcher):
                let token = sampleUnderMask(matcher)
                guard matcher.accept(token), !tokenizer.isEndOfGeneration(token) else {
                    throw LocalLanguageModelError.inferenceFailed("the sampler chose token \(token), which the tool-call grammar forbids")
                }
                push(token, .call)
                step = [token] + forcedTokens(matcher, .call)
                if matcher.isComplete { step += endCall() }
            case .betweenCalls(let written):
                // The model chooses, token by token, between ending its turn and another call:
                // after a newline it may still end.
                let more = (written == 0 ? tools?.separatorTokens : tools?.openingTokens) ?? []
                let token = sample(allowed: { tokenizer.isEndOfGeneration($0) || more.contains($0) })
                if tokenizer.isEndOfGeneration(token) { endedByModel = true; break }
                openedAt = openedAt ?? history.count
                push(token, .markup)
                let bytes = tokenizer.tokenBytes(token)
                if written == 0 && bytes == [UInt8(ascii: "\n")] {
                    phase = .betweenCalls(written: 1)
                    step = [token]
                    break
                }
                let separator = LocalToolCalling.separatorBytes
                step = [token] + forceMarkup(separator[min(written + bytes.count, separator.count)...])
                step += try beginCall(leading: [])
            case .answer:
                if let responseMatcher {
                    let canCall = tools != nil && !answerStarted
                    let token = sampleUnderMask(responseMatcher, or: canCall ? tools?.openingTokens : nil)
                    if canCall, tools?.openingTokens.contains(token) == true {
                        openedAt = history.count
                        push(token, .markup)
                        let written = tokenizer.tokenBytes(token).count
                        step = [token] + forceMarkup(LocalToolCalling.openingBytes[written...])
                        step += try beginCall(leading: [])
                        break
                    }
                    guard responseMatcher.accept(token) else {
                        throw LocalLanguageModelError.inferenceFailed("the sampler chose token \(token), which the grammar forbids")
                    }
                    if responseMatcher.isTerminated { endedByModel = true; break }
                    answerStarted = true
                    push(token)
                    step = [token] + forcedTokens(responseMatcher, .text)
                } else {
                    let barred = toolsBarred ? tools?.openingTokens : nil
                    let token = barred.map { barred in
                        sample(allowed: { !barred.contains($0) && !(held.isEmpty && !textEmitted && tokenizer.tokenBytes($0).first == UInt8(ascii: "{")) })
                    } ?? sampler.sample(context.logits(0), history: history[...])
                    if tokenizer.isEndOfGeneration(token) { endedByModel = true; break }
                    push(token)
                    step = [token]
                    if holdsText && !toolsBarred {
                        let marker = LocalToolCalling.openingBytes
                        let start = held.firstIndex { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }
                        if !textEmitted, let start, held[start] == UInt8(ascii: "{") {
                            // A turn that opens with a JSON object is a call without its tags.
                            let leading = held[start...]
                            held = []
                            pendingTokens = 0
                            openedAt = history.count - 1
                            step += try beginCall(leading: ArraySlice([UInt8(ascii: "\n")] + leading))
                        } else if let at = Self.firstRange(of: marker, in: held) {
                            let after = held[(at + marker.count)...]
                            held.removeSubrange(at...)
                            pendingTokens = max(pendingTokens - 1, 0)
                            releaseHeld(all: true)
                            openedAt = history.count - 1
                            step += try beginCall(leading: after)
                        } else {
                            releaseHeld(all: false)
                        }
                    }
                }
            }
            if repeatedCall { endedByModel = true }
            if endedByModel || generated >= limit { break }
            if let start = rewind {
                // Back to the logits before the repeated call: the slot keeps what came before it.
                rewind = nil
                context.reset(slot: slot, keeping: start - 1)
                slotTokens[slot].removeSubrange((start - 1)...)
                step = [history[start - 1]]
            }
            try feed(step)
        }
        if holdsText { releaseHeld(all: true) }
        let rest = detokenizer.finish()
        if !rest.isEmpty || pendingTokens > 0 { emit(.text(rest, tokenCount: pendingTokens)) }
        if case .call = phase {
            throw LanguageModelSession.GenerationError.decodingFailure(.init(
                debugDescription: "The response token limit ended a tool call before its arguments were complete."))
        }
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

    /// The length of the longest prefix of `bytes[..<n]` that doesn't end inside a UTF-8 sequence.
    static func completeUTF8Length(_ bytes: [UInt8], upTo n: Int) -> Int {
        var i = n - 1
        while i >= 0 && i >= n - 4 && bytes[i] & 0xC0 == 0x80 { i -= 1 }
        guard i >= 0 && i < n else { return n }
        let lead = bytes[i]
        let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
        return n - i < length ? i : n
    }

    /// Where `needle` first occurs in `haystack`.
    static func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
        return nil
    }
}
