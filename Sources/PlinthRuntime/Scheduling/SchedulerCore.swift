import Foundation

/// A sequence admitted to a slot.
final class ActiveSequence {
    let job: SchedulerInbox.Job
    let slot: Int
    /// The context's id of the sequence's adapter (0: none).
    let adapter: Int
    var decoder: SequenceDecoder
    /// Positions of `decoder.history` whose keys and values the slot holds.
    var computed: Int
    /// Prompt tokens that came from the prefix cache.
    var cached: Int
    /// A prefix to copy from another slot once it is computed there.
    var pendingCopy: PrefixCache.Match?
    /// Whether the prompt is done and the sequence samples.
    var decoding = false
    let admitted: UInt64
    var prefillEnd: UInt64 = 0
    var firstToken: UInt64 = 0
    /// Positions the sequence may come to hold (its prompt and token limit, at most the context),
    /// where the context's cache admits by pages (``InferenceContext/kvPageBudget``).
    var positions = 0

    init(job: SchedulerInbox.Job, slot: Int, adapter: Int, decoder: SequenceDecoder, admitted: UInt64) {
        self.job = job
        self.slot = slot
        self.adapter = adapter
        self.decoder = decoder
        self.admitted = admitted
        computed = 0
        cached = 0
    }

    var id: UInt64 { job.id }
    var wantsTokens: Bool { decoder.limit > 0 }
    func emit(_ event: GenerationEvent) { job.handler(event) }
}

/// The scheduler's loop and the state only its thread touches: the context, the slots, the
/// waiting queue and the running sequences. It is handed to that thread once and never shared,
/// which the compiler cannot see through `Thread`'s closure.
final class SchedulerCore: @unchecked Sendable {
    private let model: Model
    private let context: InferenceContext
    private let configuration: Scheduler.Configuration
    private let inbox: SchedulerInbox
    private var cache: PrefixCache
    private var queue: [SchedulerInbox.Job] = []
    private var queueHead = 0
    private var running: [ActiveSequence] = []

    init(model: Model, context: InferenceContext, configuration: Scheduler.Configuration, inbox: SchedulerInbox) {
        self.model = model
        self.context = context
        self.configuration = configuration
        self.inbox = inbox
        cache = PrefixCache(count: context.slotCount)
    }

    private var queued: Int { queue.count - queueHead }
    /// `PLINTH_SCHEDULER_TRACE=1` prints one line per step to stderr.
    private static let trace = ProcessInfo.processInfo.environment["PLINTH_SCHEDULER_TRACE"] == "1"

    func run() {
        while true {
            let idle = running.isEmpty && queued == 0
            let (jobs, messages, closed) = inbox.take(block: idle)
            if closed {
                let error = SchedulerError.shutDown
                for seq in running { seq.emit(.failed(error)) }
                for job in queue[queueHead...] { job.handler(.failed(error)) }
                return
            }
            queue += jobs
            for message in messages {
                switch message {
                case .cancel(let id): cancel(id)
                case .forgetCache:
                    cache.forgetAll()
                    for i in cache.slots.indices where cache.slots[i].owner == nil { context.reset(slot: i) }
                }
            }
            resolveCopies()
            admit()
            tellPlaces()
            if !running.isEmpty { step() }
            tellPlaces()
            inbox.statistics.withLock {
                $0.queued = queued
                $0.running = running.count
            }
        }
    }

    /// Tells the inbox how many places are taken. A request left waiting means no place takes
    /// one now (slots or KV pages short): newcomers count as waiting until a sequence ends.
    private func tellPlaces() {
        inbox.setRunning(queued > 0 ? configuration.maxRunning : running.count)
    }

    private func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    private func summary(_ seq: ActiveSequence, _ reason: FinishReason) -> GenerationSummary {
        let end = now(), submitted = seq.job.submitted
        let first = seq.firstToken == 0 ? end : seq.firstToken
        return GenerationSummary(
            promptTokens: seq.job.request.prompt.count, cachedTokens: seq.cached, tokens: Array(seq.decoder.generated),
            finishReason: reason,
            queueSeconds: Double(seq.admitted - submitted) / 1e9,
            prefillSeconds: Double((seq.prefillEnd == 0 ? end : seq.prefillEnd) - seq.admitted) / 1e9,
            timeToFirstToken: Double(first - submitted) / 1e9,
            decodeSeconds: Double(end - first) / 1e9, budgetRefusals: seq.decoder.budgetRefusals)
    }

    // MARK: Admission

    private func cancel(_ id: UInt64) {
        if let i = queue[queueHead...].firstIndex(where: { $0.id == id }) {
            let job = queue.remove(at: i)
            inbox.admitted(1, running: false)
            let t = Double(now() - job.submitted) / 1e9
            // It never started: no prompt token was processed.
            job.handler(.finished(GenerationSummary(
                promptTokens: 0, cachedTokens: 0, tokens: [], finishReason: .cancelled,
                queueSeconds: t, prefillSeconds: 0, timeToFirstToken: t, decodeSeconds: 0)))
        } else if let seq = running.first(where: { $0.id == id }) {
            finish(seq, .cancelled, flush: false)
        }
    }

    /// Admits waiting requests, in arrival order, while slots are free.
    private func admit() {
        while queued > 0 && running.count < configuration.maxRunning {
            let job = queue[queueHead]
            let request = job.request
            // Requests that can never run fail at once, without a slot.
            if let error = refusal(request) {
                popQueue()
                job.handler(.failed(error))
                continue
            }
            let limit = request.maxTokens ?? Int.max
            let adapter: Int
            do {
                adapter = try request.adapter.map { try context.attach($0) } ?? 0
            } catch {
                popQueue()
                job.handler(.failed(error))
                continue
            }
            var decoder: SequenceDecoder
            do {
                decoder = SequenceDecoder(tokenizer: model.tokenizer, prompt: request.prompt, sampling: request.sampling,
                                          limit: limit, contextLength: context.contextLength, stopSequences: request.stopSequences,
                                          constraint: try request.constraint?(), logprobs: request.logprobs)
            } catch {
                popQueue()
                job.handler(.failed(error))
                continue
            }
            // Tokens the constraint forces first join the prompt's prefill. What they show is
            // held until the request is admitted: it may wait for a slot and begin again.
            var early: FinishReason?
            var beginning: [GenerationEvent] = []
            if limit > 0 {
                do {
                    if case .finish(let reason) = try decoder.begin({ beginning.append($0) }) { early = reason }
                } catch {
                    popQueue()
                    job.handler(.failed(error))
                    continue
                }
            }
            // The decoder keeps forced tokens within the context; a prefill past it would fail
            // the whole step, every sequence in it.
            if decoder.history.count > context.contextLength { early = .contextFull }
            let tokens = decoder.history
            // The last token must go through the model for its logits, unless nothing is sampled.
            let reusable = limit > 0 && early == nil ? tokens.count - 1 : tokens.count
            var match = cache.bestMatch(for: tokens, adapter: adapter) { owner in
                self.running.first { $0.id == owner }.map { ($0.decoder.history[...], $0.computed) }
            }
            if let m = match, m.shared > reusable { match?.shared = reusable }
            if let m = match, m.shared == 0 { match = nil }
            // A scored prompt goes through the model whole: a cached position has no logits.
            if job.request.promptLogprobs != nil { match = nil }
            // A conversation coming back takes over its idle slot; others copy the prefix.
            let slot: Int
            if let m = match, m.owner == nil, 2 * m.shared >= cache.slots[m.slot].tokens.count {
                slot = m.slot
            } else if let free = cache.freeSlot(excluding: match?.owner == nil ? match?.slot : nil) ?? (match?.owner == nil ? match?.slot : nil) {
                slot = free
            } else {
                return  // every slot is running: wait for one
            }
            var positions = 0
            if let budget = context.kvPageBudget {
                positions = min(context.contextLength, tokens.count + decoder.remaining)
                func room(_ prefix: PrefixCache.Match?) -> Bool {
                    roomForPages(slot: slot, positions: positions, promptCount: decoder.promptCount, prefix: prefix, pageLength: budget.pageLength)
                }
                if !room(match) {
                    // Without the prefix's entry (whose slot may then be emptied) it may fit now;
                    // with nothing running it does (a budget holds one whole context). Else it waits.
                    guard match != nil, room(nil) else { return }
                    match = nil
                }
            }
            popQueue(admitting: true)
            let seq = ActiveSequence(job: job, slot: slot, adapter: adapter, decoder: decoder, admitted: now())
            seq.positions = positions
            cache.claim(slot, for: job.id, adapter: adapter)
            running.append(seq)
            for event in beginning { seq.emit(event) }
            if let m = match {
                if m.slot == slot {
                    context.reset(slot: slot, keeping: m.shared)
                    seq.computed = m.shared
                    seq.cached = min(m.shared, decoder.promptCount)
                    inbox.statistics.withLock { $0.cachedTokens += seq.cached }
                } else {
                    context.reset(slot: slot)
                    seq.pendingCopy = m
                    copyIfReady(seq)
                }
            } else {
                context.reset(slot: slot)
            }
            if let early { finish(seq, early) }
            else if seq.pendingCopy == nil && seq.computed == tokens.count && limit == 0 { finish(seq, .maxTokens) }
        }
    }

    /// Whether a sequence in `slot` that may come to hold `positions` positions has the KV pages
    /// for them: those it takes (past the prefix it keeps in `slot` or shares from an idle slot's
    /// whole pages, and its copy of a page it shares and writes) must fit the free pages, with
    /// those that emptying `slot` frees, beside what the running sequences may still take. Where
    /// emptying idle slots (never the prefix's) makes room, they are emptied, least recently used
    /// first, until it does. A page shared by several slots counts once: the pages the running
    /// sequences still take stay within the free ones, however those holding a shared page end.
    /// Pages are counted from ``firstWrite(kept:promptCount:)``.
    private func roomForPages(slot: Int, positions: Int, promptCount: Int, prefix match: PrefixCache.Match?, pageLength: Int) -> Bool {
        let need: Int
        var emptied: Set<Int> = []
        var keeping: Int?
        if let m = match, m.owner == nil, m.slot == slot {
            // A conversation coming back keeps its positions before `shared`.
            need = context.kvPagesToWrite(slot: slot, from: Self.firstWrite(kept: m.shared, promptCount: promptCount), through: positions - 1)
        } else {
            emptied.insert(slot)
            // The prefix's whole pages are shared at admission where they are computed (an idle
            // slot's, or a running sequence's past them); a copy that waits counts none.
            var whole = 0
            if let m = match {
                if m.owner == nil { keeping = m.slot }
                let ready = m.owner.map { owner in running.contains { $0.id == owner && $0.computed >= m.shared } } ?? true
                if ready { whole = Self.firstWrite(kept: m.shared, promptCount: promptCount) / pageLength }
            }
            need = (positions + pageLength - 1) / pageLength - whole
        }
        let taking = running.reduce(0) {
            $0 + context.kvPagesToWrite(slot: $1.slot, from: Self.firstWrite(kept: $1.computed, promptCount: $1.decoder.promptCount),
                                        through: $1.positions - 1)
        }
        func freed() -> Int { context.kvPagesFreed(emptying: emptied) }
        func room() -> Bool { context.kvPagesFree + freed() >= taking + need }
        if room() { return true }
        // Nothing is emptied unless emptying is enough.
        let idle = cache.slots.indices.filter { cache.slots[$0].owner == nil && $0 != slot && $0 != keeping }
        guard context.kvPagesFree + context.kvPagesFreed(emptying: emptied.union(idle)) >= taking + need else { return false }
        func empty(_ i: Int) {
            cache.forget(i)
            context.reset(slot: i)
        }
        // First the slots that free pages by themselves; then those whose pages only idle slots share.
        var left: [Int] = []
        for i in idle.sorted(by: { cache.slots[$0].lastUse < cache.slots[$1].lastUse }) where !room() {
            if context.kvPagesFreed(emptying: emptied.union([i])) > freed() { empty(i) } else { left.append(i) }
        }
        for i in left where !room() { empty(i) }
        return room()
    }

    /// The first position a sequence holding `kept` positions may still write: a constraint may
    /// rewind it to its last prompt token, so a page it shares from there on may be copied again.
    private static func firstWrite(kept: Int, promptCount: Int) -> Int { min(kept, promptCount - 1) }

    /// Takes the first waiting job off the queue; `admitting`: into the running sequences.
    private func popQueue(admitting: Bool = false) {
        queueHead += 1
        inbox.admitted(1, running: admitting)
        if queueHead > 64 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }

    private func refusal(_ request: GenerationRequest) -> SchedulerError? {
        if request.prompt.isEmpty { return .emptyPrompt }
        let room = (request.maxTokens ?? 1) == 0 ? 0 : 1
        if request.prompt.count + room > context.contextLength {
            return .promptTooLong(tokens: request.prompt.count, contextLength: context.contextLength)
        }
        if let bad = request.prompt.first(where: { $0 < 0 || Int($0) >= model.config.vocabularySize }) {
            return .stepFailed(ModelError.tokenOutOfRange(token: bad, vocabularySize: model.config.vocabularySize).localizedDescription)
        }
        return nil
    }

    /// Copies waiting sequences' prefixes whose source has computed them.
    private func resolveCopies() {
        for seq in running where seq.pendingCopy != nil { copyIfReady(seq) }
    }

    private func copyIfReady(_ seq: ActiveSequence) {
        guard var m = seq.pendingCopy else { return }
        if let owner = m.owner {
            if let source = running.first(where: { $0.id == owner }) {
                guard source.computed >= m.shared else { return }  // still being prefilled there
            } else {
                // The source has finished since: its slot keeps what it computed, unless reused.
                let slot = cache.slots[m.slot]
                m.shared = slot.owner == nil ? min(m.shared, PrefixCache.sharedLength(seq.decoder.history, slot.tokens[...])) : 0
            }
        }
        seq.pendingCopy = nil
        if m.shared > 0 {
            do {
                try context.copyPrefix(from: m.slot, to: seq.slot, count: m.shared)
                seq.computed = m.shared
                // Forced tokens past the prompt may match too; the prompt's are what is cached.
                seq.cached = min(m.shared, seq.decoder.promptCount)
                inbox.statistics.withLock { $0.cachedTokens += seq.cached }
            } catch {
                // A failed copy (the device's error) ends the request: admission counted its pages
                // with the prefix shared, and computing the prefix instead could take pages that
                // running sequences were promised.
                fail(seq, SchedulerError.stepFailed("copying a cached prefix: \(error.localizedDescription)"), keeping: 0)
                return
            }
        }
        if !seq.wantsTokens && seq.computed == seq.decoder.history.count { finish(seq, .maxTokens) }
    }

    // MARK: Steps

    /// How many prompt tokens each prefilling sequence feeds this step, within `room`: the
    /// oldest prompt first takes a quarter of it (so that it advances whatever arrives after
    /// it), then the shortest remaining prompts first, so that a short prompt is not held behind
    /// a long one's whole prefill, and what is left goes to the oldest again. Which rows share
    /// a step doesn't change any sequence's output.
    private func prefillShares(room: Int) -> [(ActiveSequence, Int)] {
        let prompts = running.filter { !$0.decoding && $0.pendingCopy == nil && $0.decoder.history.count > $0.computed }
        guard !prompts.isEmpty, room > 0 else { return [] }
        var shares = Array(repeating: 0, count: prompts.count)
        var left = room
        // Scored prompts' rows each return a vocabulary's logits: a step takes a bounded number.
        var scoredLeft = Self.scoredRowsPerStep
        func need(_ i: Int) -> Int { prompts[i].decoder.history.count - prompts[i].computed }
        func give(_ i: Int, _ most: Int) {
            let scored = prompts[i].job.request.promptLogprobs != nil
            let n = min(need(i) - shares[i], most, left, scored ? scoredLeft : .max)
            shares[i] += n
            left -= n
            if scored { scoredLeft -= n }
        }
        give(0, max(1, room / 4))
        let byNeed = prompts.indices.dropFirst().sorted { (need($0), $0) < (need($1), $1) }
        for i in byNeed where left > 0 { give(i, left) }
        give(0, left)
        return zip(prompts, shares).filter { $0.1 > 0 }
    }

    /// The most prompt rows with their logits (``GenerationRequest/promptLogprobs``) in one step.
    static let scoredRowsPerStep = 256

    private func step() {
        let began = Self.trace ? now() : 0
        var batch = Batch()
        var fed: [(seq: ActiveSequence, count: Int, logits: Bool, scored: Range<Int>)] = []
        var budget = configuration.stepTokens
        func add(_ seq: ActiveSequence, _ count: Int, use known: LogitsUse? = nil) {
            let history = seq.decoder.history
            let end = seq.computed + count
            let logits = end == history.count && seq.wantsTokens
            // A backend that picks greedy tokens itself gets the masks now, not the logits later.
            let use = logits && context.choosesTokens ? known ?? seq.decoder.logitsUse() : .full
            // A scored prompt's rows that predict its next prompt token give their logits too.
            // (Forced tokens join the prefill after the prompt: a chunk among them scores nothing.)
            let scored = seq.job.request.promptLogprobs == nil || seq.decoding
                ? seq.computed..<seq.computed : seq.computed..<max(seq.computed, min(end, seq.decoder.promptCount - 1))
            for p in seq.computed..<end {
                let sampled = logits && p == end - 1
                batch.add(history[p], position: p, slot: seq.slot, logits: sampled || scored.contains(p), use: sampled ? use : .full,
                          adapter: seq.adapter)
            }
            fed.append((seq, count, logits, scored))
            budget -= count
        }
        // Decoding sequences feed everything they have; prompts share what is left.
        let decoding = running.filter(\.decoding)
        let uses = context.choosesTokens ? logitsUses(decoding) : nil
        for (i, seq) in decoding.enumerated() {
            add(seq, seq.decoder.history.count - seq.computed, use: uses?[i])
        }
        for (seq, n) in prefillShares(room: batch.count == 0 ? configuration.stepTokens : budget) { add(seq, n) }
        guard batch.count > 0 else { return }
        let started = Self.trace ? now() : 0
        do {
            try context.forward(batch)
        } catch {
            // A step that fails leaves its slots' caches unknown: forget them.
            for (seq, _, _, _) in fed {
                context.reset(slot: seq.slot)
                fail(seq, SchedulerError.stepFailed(error.localizedDescription), keeping: 0)
            }
            return
        }
        let stepped = Self.trace ? now() : 0
        defer {
            if Self.trace {
                // The host's share: building the batch (the constraints' masks) and advancing the
                // sequences with the step's tokens, around the forward step.
                let decodeRows = fed.filter(\.seq.decoding).count
                try? FileHandle.standardError.write(contentsOf: Data(String(format: "step: %d tokens, %d decoding, %d prefilling, %d waiting, %.2f ms (host: %.2f ms before, %.2f after)\n",
                    batch.count, decodeRows, fed.count - decodeRows, queued, Double(stepped - started) / 1e6,
                    Double(started - began) / 1e6, Double(now() - stepped) / 1e6).utf8))
            }
        }
        inbox.statistics.withLock { s in
            s.steps += 1
            s.tokens += batch.count
            s.prefillTokens += fed.reduce(0) { $0 + ($1.seq.decoding ? 0 : $1.count) }
            s.largestBatch = max(s.largestBatch, fed.count)
            s.sequencesServed += fed.count
            if let i = SchedulerStatistics.batchBounds.firstIndex(where: { fed.count <= $0 }) { s.stepsBySequenceBound[i] += 1 }
        }
        var advancing: [ActiveSequence] = []
        // Logits rows come in batch order: a sequence's scored prompt rows, then its sampled row.
        var logitRow = 0
        var sampledRows: [Int] = []
        var scoredRows: [(seq: ActiveSequence, token: Int32, top: Int, row: Int)] = []
        for (seq, _, logits, scored) in fed {
            for p in scored {
                scoredRows.append((seq, seq.decoder.history[p + 1], seq.job.request.promptLogprobs ?? 0, logitRow))
                logitRow += 1
            }
            if logits {
                sampledRows.append(logitRow)
                logitRow += 1
            }
        }
        // Each a log-softmax over the vocabulary: on several threads, sent in order.
        if !scoredRows.isEmpty {
            var entries = [TokenLogprob?](repeating: nil, count: scoredRows.count)
            entries.withUnsafeMutableBufferPointer { out in
                let rows = ScoredRows(rows: scoredRows, context: context, out: out)
                forEachRow(scoredRows.count, rows.score)
            }
            for (r, entry) in zip(scoredRows, entries) { if let entry { r.seq.emit(.promptLogprob(entry)) } }
        }
        for (seq, count, logits, _) in fed {
            seq.computed += count
            if !seq.decoding && seq.computed == seq.decoder.history.count {
                seq.prefillEnd = now()
                guard seq.wantsTokens else { finish(seq, .maxTokens); continue }
                seq.decoding = true
            }
            if logits { advancing.append(seq) }
        }
        let outcomes = advance(advancing, rows: sampledRows)
        for (seq, outcome) in zip(advancing, outcomes) {
            for event in outcome.events { seq.emit(event) }
            let next: SequenceDecoder.Next
            switch outcome.next {
            case .success(let n): next = n
            case .failure(let error):
                fail(seq, error, keeping: seq.computed)
                continue
            }
            if seq.firstToken == 0 { seq.firstToken = outcome.at }
            switch next {
            case .feed:
                if seq.decoder.history.count > context.contextLength { finish(seq, .contextFull) }
                // A constraint that adds nothing and does not finish would spin: end it here.
                else if seq.decoder.history.count == seq.computed { finish(seq, .endOfGeneration) }
            case .rewind(let keeping):
                // Back to the logits after the kept tokens: the last one goes through again.
                let keep = seq.decoder.promptCount + keeping - 1
                context.reset(slot: seq.slot, keeping: keep)
                seq.computed = min(seq.computed, keep)
            case .finish(let reason):
                finish(seq, reason)
            }
        }
    }

    /// What a sequence's decoder made of its row of a step: what it does next, and the events
    /// to send for it.
    private struct Outcome {
        var next: Result<SequenceDecoder.Next, any Error> = .success(.feed)
        var events: [GenerationEvent] = []
        /// When the decoder was done (a first token's time).
        var at: UInt64 = 0
    }

    /// Rows from which the decoders advance on several threads.
    private static let parallelRows = 16
    /// Threads that advance the decoders: `PLINTH_SCHEDULER_THREADS`, else every core.
    private static let cores = ProcessInfo.processInfo.environment["PLINTH_SCHEDULER_THREADS"].flatMap { Int($0) }
        .map { max(1, $0) } ?? ProcessInfo.processInfo.activeProcessorCount

    /// Each sequence's decoder takes its row's token (the backend's choice, its best tokens or
    /// its logits; row i is `sequences[i]`). The decoders are independent (the grammars they
    /// share lock their caches), so a step of many rows advances them on several threads; their
    /// events are returned, to be sent from this thread in row order.
    private func advance(_ sequences: [ActiveSequence], rows logitRows: [Int]) -> [Outcome] {
        var outcomes = [Outcome](repeating: Outcome(), count: sequences.count)
        outcomes.withUnsafeMutableBufferPointer { out in
            let rows = StepRows(sequences: sequences, logitRows: logitRows, context: context, outcomes: out)
            if forEachRow(sequences.count, rows.advance) { inbox.statistics.withLock { $0.threadedSteps += 1 } }
        }
        return outcomes
    }

    /// The decoding rows' ``SequenceDecoder/logitsUse()`` for a backend that chooses tokens: their
    /// constraints' allowed tokens, computed (as ``advance(_:)`` computes its rows) on several
    /// threads for a step of many rows. The grammar work is the same as in ``advance(_:)``'s
    /// decoders on the CPU, which mask the logits there.
    private func logitsUses(_ sequences: [ActiveSequence]) -> [LogitsUse] {
        var uses = [LogitsUse](repeating: .full, count: sequences.count)
        uses.withUnsafeMutableBufferPointer { out in
            // Row i's sequence is touched by one thread only, which writes out[i].
            forEachRow(sequences.count) { i in
                if sequences[i].wantsTokens { out[i] = sequences[i].decoder.logitsUse() }
            }
        }
        return uses
    }

    /// Calls `row` for each of `count` rows, on several threads (at most 8: the decoders of one
    /// schema meet at its grammar's cache locks) from ``parallelRows`` rows on; whether it did.
    /// `row(i)` must touch only row i's sequence and output.
    @discardableResult
    private func forEachRow(_ count: Int, _ row: (Int) -> Void) -> Bool {
        guard count >= Self.parallelRows, Self.cores > 1 else {
            for i in 0..<count { row(i) }
            return false
        }
        let threads = min(Self.cores, 8, count / (Self.parallelRows / 2))
        withoutActuallyEscaping(row) { row in
            let rows = RowBody(call: row)
            DispatchQueue.concurrentPerform(iterations: threads) { t in
                for i in stride(from: t, to: count, by: threads) { rows.call(i) }
            }
        }
        return true
    }

    /// Scored prompt rows as ``forEachRow(_:_:)``'s threads see them: the step's logits are
    /// only read, and each row's entry is written by the thread that scores it.
    private struct ScoredRows: @unchecked Sendable {
        let rows: [(seq: ActiveSequence, token: Int32, top: Int, row: Int)]
        let context: InferenceContext
        let out: UnsafeMutableBufferPointer<TokenLogprob?>

        func score(_ i: Int) {
            let r = rows[i]
            out[i] = TokenLogprob(token: r.token, logits: context.logits(r.row), top: r.top)
        }
    }

    /// A row's work as ``forEachRow(_:_:)``'s threads see it: each calls it for its own rows.
    private struct RowBody: @unchecked Sendable {
        let call: (Int) -> Void
    }

    /// A step's rows as the threads that advance them see them: each row's sequence is touched by
    /// one thread only, the context's results of the step are only read, and each row's outcome
    /// is written by the thread that advanced it.
    private struct StepRows: @unchecked Sendable {
        let sequences: [ActiveSequence]
        /// The step's logits row of each sequence (its index among the rows that have logits).
        let logitRows: [Int]
        let context: InferenceContext
        let outcomes: UnsafeMutableBufferPointer<Outcome>

        func advance(_ i: Int) {
            let seq = sequences[i]
            let row = logitRows[i]
            let chosen = context.chosenToken(row)
            let top = chosen == nil ? context.topCandidates(row) : nil
            var events: [GenerationEvent] = []
            let keep = { (event: GenerationEvent) in events.append(event) }
            let next: Result<SequenceDecoder.Next, any Error>
            do {
                if let chosen {
                    next = .success(try seq.decoder.advance(chosen: chosen, keep))
                } else if let top {
                    next = .success(try seq.decoder.advance(top: top, keep))
                } else {
                    next = .success(try seq.decoder.advance(context.logits(row), keep))
                }
            } catch {
                next = .failure(error)
            }
            outcomes[i] = Outcome(next: next, events: events, at: DispatchTime.now().uptimeNanoseconds)
        }
    }

    // MARK: Ending

    private func remove(_ seq: ActiveSequence, keeping: Int) {
        running.removeAll { $0 === seq }
        cache.release(seq.slot, holding: seq.decoder.history.prefix(keeping))
        context.reset(slot: seq.slot, keeping: keeping)
    }

    private func finish(_ seq: ActiveSequence, _ reason: FinishReason, flush: Bool = true) {
        remove(seq, keeping: seq.computed)
        if flush {
            do {
                try seq.decoder.end(reason, seq.emit)
            } catch {
                seq.emit(.failed(error))
                return
            }
        }
        inbox.statistics.withLock { $0.requestsFinished += 1 }
        seq.emit(.finished(summary(seq, reason)))
    }

    private func fail(_ seq: ActiveSequence, _ error: any Error, keeping: Int) {
        remove(seq, keeping: keeping)
        seq.emit(.failed(error))
    }
}
