import Foundation
import PlinthRuntime
import Synchronization
import Testing

/// The scheduler against a plain greedy loop on its own context: whatever shares the steps
/// (other requests, arrival order, chunking, cancellations, prefix copies), every request gets
/// the reference's tokens bit for bit.
@Suite(.enabled(if: TestModels.path(TestModels.smolLM2) != nil, "SmolLM2 not fetched (plinth models fetch smollm2)"))
struct SchedulerTests {
    static let model: Model? = TestModels.path(TestModels.smolLM2).flatMap { try? Model(url: $0) }

    /// The prompt of a chat with a shared system message.
    static func prompt(_ model: Model, _ user: String, system: String = "You are a careful assistant. Answer in one short sentence.") throws -> [Int32] {
        model.tokenizer.encodeRendered(try model.renderChat([.system(system), .user(user)]))
    }

    static let questions = [
        "What is the capital of France?", "Name a prime number.", "Why is the sky blue?",
        "Write a word that rhymes with cat.", "What do bees make?", "How many legs does a spider have?",
        "What is two plus two?", "Name a colour of the rainbow.", "What is ice made of?",
        "Who wrote Hamlet?", "What is the opposite of hot?", "Name a planet.",
    ]

    /// Greedy decoding the simplest way: the whole prompt in one step, then one token a step.
    static func reference(_ model: Model, _ prompt: [Int32], maxTokens: Int) throws -> [Int32] {
        let context = try InferenceContext(transformer: model.transformer, contextLength: prompt.count + maxTokens + 1, slots: 1)
        try context.forward(.sequence(prompt))
        var out: [Int32] = []
        while out.count < maxTokens {
            let token = Sampler.argmax(context.logits(0))
            if model.tokenizer.isEndOfGeneration(token) { break }
            out.append(token)
            var b = Batch()
            b.add(token, position: prompt.count + out.count - 1, logits: true)
            try context.forward(b)
        }
        return out
    }

    /// Submits and collects a request's summary (or error) through the callback interface.
    final class Collector: Sendable {
        let done = DispatchSemaphore(value: 0)
        let state = Mutex((text: "", summary: GenerationSummary?.none, error: (any Error)?.none, events: 0, logprobs: [TokenLogprob](),
                           promptLogprobs: [TokenLogprob]()))
        var summary: GenerationSummary? { state.withLock { $0.summary } }
        var text: String { state.withLock { $0.text } }

        func handle(_ event: GenerationEvent) {
            state.withLock { s in
                s.events += 1
                switch event {
                case .text(let t, _): s.text += t
                case .finished(let summary): s.summary = summary
                case .failed(let error): s.error = error
                case .toolCall: break
                case .logprob(let entry): s.logprobs.append(entry)
                case .promptLogprob(let entry): s.promptLogprobs.append(entry)
                }
            }
            if case .finished = event { done.signal() }
            if case .failed = event { done.signal() }
        }

        func wait() { done.wait() }
    }

    func submit(_ scheduler: Scheduler, _ request: GenerationRequest) -> (GenerationHandle, Collector) {
        let c = Collector()
        let handle = scheduler.submit(request) { c.handle($0) }
        return (handle, c)
    }

    @Test func outputsAreBitIdenticalWhateverShareTheSteps() throws {
        let model = try #require(Self.model)
        let prompts = try Self.questions.map { try Self.prompt(model, $0) }
        let maxTokens = 24
        let expected = try prompts.map { try Self.reference(model, $0, maxTokens: maxTokens) }
        // Small steps: prompts are prefilled in chunks next to other sequences' decode tokens.
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 8, maxRunning: 6, stepTokens: 24))
        var runs: [(Int, Collector)] = []
        var cancelled: [Collector] = []
        for (i, prompt) in prompts.enumerated() {
            let (_, c) = submit(scheduler, GenerationRequest(prompt: prompt, maxTokens: maxTokens))
            runs.append((i, c))
            if i % 3 == 1 {
                // Staggered arrivals, and a request cancelled while others run.
                let (h, extra) = submit(scheduler, GenerationRequest(prompt: prompts[(i + 5) % prompts.count], maxTokens: 200))
                cancelled.append(extra)
                Thread.sleep(forTimeInterval: 0.03)
                h.cancel()
            }
        }
        for (i, c) in runs {
            c.wait()
            let summary = try #require(c.summary)
            #expect(summary.tokens == expected[i], "request \(i) differs from the reference")
        }
        for c in cancelled {
            c.wait()
            #expect(c.summary?.finishReason == .cancelled)
        }
        let stats = scheduler.statistics
        #expect(stats.largestBatch > 1)
        #expect(stats.cachedTokens > 0, "the shared system prompt was never reused")
    }

    /// A step of 16 or more rows advances its decoders on several threads: still every request
    /// gets the reference's tokens, and its events (text pieces, then the summary) in order.
    @Test func manyRowsAdvanceOnThreadsAsOneByOne() throws {
        let model = try #require(Self.model)
        let users = Self.questions + Self.questions.map { $0 + " Be brief." }
        let prompts = try users.map { try Self.prompt(model, $0) }
        let maxTokens = 12
        let expected = try prompts.map { try Self.reference(model, $0, maxTokens: maxTokens) }
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 28, maxRunning: 24, stepTokens: 2048))
        let runs = prompts.map { submit(scheduler, GenerationRequest(prompt: $0, maxTokens: maxTokens)) }
        for (i, (_, c)) in runs.enumerated() {
            c.wait()
            let summary = try #require(c.summary)
            #expect(summary.tokens == expected[i], "request \(i) differs from the reference")
            // The text events, in order, are the tokens' text.
            #expect(c.text == model.tokenizer.decode(summary.tokens), "request \(i): text out of order")
        }
        if ProcessInfo.processInfo.activeProcessorCount > 1 {
            #expect(scheduler.statistics.threadedSteps > 0, "no step advanced its decoders on threads")
        }
    }

    /// Log-probabilities are the log-softmax of the reference's own logits, and asking for them
    /// changes no token.
    @Test func logprobsAreTheLogSoftmaxOfTheLogits() throws {
        let model = try #require(Self.model)
        let prompt = try Self.prompt(model, "Name three fruits.")
        let expected = try Self.reference(model, prompt, maxTokens: 10)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 2, maxRunning: 2))
        let (_, c) = submit(scheduler, GenerationRequest(prompt: prompt, maxTokens: 10, logprobs: 4))
        c.wait()
        #expect(c.summary?.tokens == expected)
        let entries = c.state.withLock { $0.logprobs }
        #expect(entries.map(\.token) == expected)
        // The first token's distribution, computed here from a fresh context.
        let context = try InferenceContext(transformer: model.transformer, contextLength: prompt.count + 1, slots: 1)
        try context.forward(.sequence(prompt))
        let logits = Array(context.logits(0))
        let maximum = logits.max()!
        let logZ = Double(maximum) + log(logits.reduce(0.0) { $0 + exp(Double($1 - maximum)) })
        let first = try #require(entries.first)
        #expect(abs(Double(logits[Int(first.token)]) - logZ - Double(first.logprob)) < 1e-3)
        for entry in entries {
            #expect(entry.alternatives.count == 4)
            #expect(entry.alternatives.first?.token == entry.token, "greedy takes the most likely token")
            #expect(entry.alternatives.map(\.logprob) == entry.alternatives.map(\.logprob).sorted(by: >))
            #expect(entry.logprob <= 0)
        }
    }

    /// A scored prompt: each token after the first gets the log-softmax, at the row before it,
    /// of one forward of the whole prompt; in chunks of 8 (small steps), whole again when the
    /// prefix is cached, and next to a request whose tokens stay the reference's.
    @Test func promptTokensAreScoredAsOneForwardScoresThem() throws {
        let model = try #require(Self.model)
        let prompt = try Self.prompt(model, "Name three fruits and say which is the sweetest.")
        let context = try InferenceContext(transformer: model.transformer, contextLength: prompt.count + 1, slots: 1)
        var whole = Batch()
        for (i, t) in prompt.enumerated() { whole.add(t, position: i, logits: true) }
        try context.forward(whole)
        let expected: [Double] = (1..<prompt.count).map { p in
            let logits = Array(context.logits(p - 1))
            let maximum = logits.max()!
            let logZ = Double(maximum) + log(logits.reduce(0.0) { $0 + exp(Double($1 - maximum)) })
            return Double(logits[Int(prompt[p])]) - logZ
        }
        let other = try Self.prompt(model, "What is two plus two?")
        let reference = try Self.reference(model, other, maxTokens: 12)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 4, maxRunning: 4, stepTokens: 8))
        for round in 0..<2 {
            let (_, neighbour) = submit(scheduler, GenerationRequest(prompt: other, maxTokens: 12))
            let (_, c) = submit(scheduler, GenerationRequest(prompt: prompt, maxTokens: round == 0 ? 0 : 3, promptLogprobs: 2))
            c.wait()
            neighbour.wait()
            let entries = c.state.withLock { $0.promptLogprobs }
            #expect(entries.map(\.token) == Array(prompt.dropFirst()), "round \(round)")
            for (entry, want) in zip(entries, expected) {
                #expect(abs(Double(entry.logprob) - want) < 1e-3, "round \(round): \(entry.logprob) against \(want)")
                #expect(entry.alternatives.count == 2 && entry.alternatives[0].logprob >= entry.logprob - 1e-4)
            }
            #expect(c.summary?.tokens.count == (round == 0 ? 0 : 3) && c.summary?.cachedTokens == 0)
            #expect(neighbour.summary?.tokens == reference, "round \(round): the neighbour's tokens changed")
        }
        // Forced tokens join the prefill after the prompt: a chunk among them scores nothing
        // (a step starting past the prompt's last scored row trapped).
        let opening = model.tokenizer.encode("The answer is", addSpecial: false, parseSpecial: false)
        let odd = Array(prompt.prefix(15))  // chunks of 8: the third starts after the prompt, among the forced tokens
        let (_, forced) = submit(scheduler, GenerationRequest(prompt: odd, maxTokens: opening.count + 2,
                                                             constraint: { OpeningConstraint(opening) }, promptLogprobs: 1))
        forced.wait()
        #expect(forced.state.withLock { $0.error } == nil)
        #expect(forced.state.withLock { $0.promptLogprobs.map(\.token) } == Array(odd.dropFirst()))
        #expect(forced.summary?.tokens.starts(with: opening) == true)
    }

    @Test func cancellingFreesTheSlot() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 512, slots: 1, maxRunning: 1, stepTokens: 8))
        // Mid-prefill: a long prompt takes dozens of 8-token steps.
        let long = try Self.prompt(model, String(repeating: "Tell me about the sea and its tides. ", count: 12))
        let (h1, c1) = submit(scheduler, GenerationRequest(prompt: long, maxTokens: 16))
        while scheduler.statistics.steps < 2 { Thread.sleep(forTimeInterval: 0.001) }
        h1.cancel()
        c1.wait()
        #expect(c1.summary?.finishReason == .cancelled)
        #expect(c1.summary?.generatedTokens == 0)
        // Mid-decode: cancelled after its first text.
        let prompt = try Self.prompt(model, "Write a long story about a fox.")
        let started = DispatchSemaphore(value: 0)
        let c2 = Collector()
        let h2 = scheduler.submit(GenerationRequest(prompt: prompt, maxTokens: 300)) { event in
            if case .text = event { started.signal() }
            c2.handle(event)
        }
        started.wait()
        h2.cancel()
        c2.wait()
        #expect(c2.summary?.finishReason == .cancelled)
        #expect((c2.summary?.generatedTokens ?? 300) < 300)
        // Stopped by its handler (generate's failed write): no event after the one that stopped it.
        let after = Mutex(0)
        let stopped = try scheduler.runWhile(GenerationRequest(prompt: prompt, maxTokens: 300)) { event in
            guard case .text = event else { return true }
            return after.withLock { $0 += 1; return $0 < 1 }
        }
        #expect(stopped.finishReason == .cancelled && stopped.generatedTokens < 300)
        #expect(after.withLock { $0 } == 1)
        // The one slot is free again: a new request runs to the end, with the reference's tokens.
        let short = try Self.prompt(model, "Name a fruit.")
        let summary = try scheduler.run(GenerationRequest(prompt: short, maxTokens: 12))
        #expect(summary.tokens == (try Self.reference(model, short, maxTokens: 12)))
        #expect(scheduler.statistics.running == 0)
    }

    /// `maxQueued` bounds the requests waiting for a place: a burst into an idle scheduler
    /// fills its free places first (4 run, 1 waits), and only the one past both is refused.
    @Test func aBurstFillsFreePlacesBeforeTheQueue() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 4, maxRunning: 4, maxQueued: 1))
        let prompt = try Self.prompt(model, "Write a long story about a fox.")
        let runs = (0..<6).map { _ in submit(scheduler, GenerationRequest(prompt: prompt, maxTokens: 24)).1 }
        for c in runs { c.wait() }
        let refused = runs.map { c in
            c.state.withLock { s in if case .queueFull? = s.error as? SchedulerError { true } else { false } }
        }
        #expect(refused == [false, false, false, false, false, true])
        #expect(runs.prefix(5).allSatisfy { $0.summary?.generatedTokens ?? 0 > 0 })
    }

    @Test func requestsBeyondTheSlotsWaitTheirTurn() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 2, maxRunning: 2))
        let prompts = try Self.questions.prefix(6).map { try Self.prompt(model, $0) }
        let runs = prompts.map { submit(scheduler, GenerationRequest(prompt: $0, maxTokens: 12)).1 }
        for (prompt, c) in zip(prompts, runs) {
            c.wait()
            #expect(c.summary?.tokens == (try Self.reference(model, prompt, maxTokens: 12)))
        }
        #expect(scheduler.statistics.largestBatch <= 2)
        // The last ones waited for a slot.
        #expect((runs.last?.summary?.queueSeconds ?? 0) > 0)
    }

    @Test func sharedPrefixesArePrefilledOnce() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 8, stepTokens: 16))
        let prompts = try Self.questions.prefix(4).map { try Self.prompt(model, $0) }
        var shared = prompts[0].count
        for p in prompts.dropFirst() {
            shared = min(shared, zip(prompts[0], p).prefix { $0 == $1 }.count)
        }
        #expect(shared >= 20)
        // Arriving together: the later ones wait for the first to compute the shared part.
        let runs = prompts.map { submit(scheduler, GenerationRequest(prompt: $0, maxTokens: 4)).1 }
        runs.forEach { $0.wait() }
        let summaries = runs.compactMap(\.summary)
        #expect(summaries.count == 4)
        #expect(summaries[0].cachedTokens == 0)
        for s in summaries.dropFirst() { #expect(s.cachedTokens >= shared) }
        let stats = scheduler.statistics
        #expect(stats.prefillTokens == prompts.reduce(0) { $0 + $1.count } - summaries.reduce(0) { $0 + $1.cachedTokens })
        for (prompt, s) in zip(prompts, summaries) {
            #expect(s.tokens == (try Self.reference(model, prompt, maxTokens: 4)))
        }
    }

    @Test func prewarmingFillsThePrefixCache() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 4))
        let instructions = model.tokenizer.encodeRendered(try model.renderChat([.system("You answer with one word.")], addGenerationPrompt: false))
        let warm = try scheduler.run(GenerationRequest(prompt: instructions, maxTokens: 0))
        #expect(warm.generatedTokens == 0)
        let prompt = try Self.prompt(model, "Name a tree.", system: "You answer with one word.")
        let summary = try scheduler.run(GenerationRequest(prompt: prompt, maxTokens: 8))
        #expect(summary.cachedTokens == zip(instructions, prompt).prefix { $0 == $1 }.count)
        #expect(summary.cachedTokens > 0)
        #expect(summary.tokens == (try Self.reference(model, prompt, maxTokens: 8)))
    }

    @Test func stopSequencesCutTheText() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 1))
        let prompt = try Self.prompt(model, "Describe the sea in three sentences.")
        let all = Collector()
        scheduler.submit(GenerationRequest(prompt: prompt, maxTokens: 40)) { all.handle($0) }
        all.wait()
        let full = all.text
        try #require(full.count > 20, "too short to cut: \(full)")
        // A stop string from the middle of the text; the output ends before its first occurrence.
        let middle = full.index(full.startIndex, offsetBy: full.count / 2)
        let stop = String(full[middle..<full.index(middle, offsetBy: 5)])
        let cut = Collector()
        scheduler.submit(GenerationRequest(prompt: prompt, maxTokens: 40, stopSequences: [stop])) { cut.handle($0) }
        cut.wait()
        #expect(cut.summary?.finishReason == .stopSequence)
        #expect(cut.text == String(full[..<full.range(of: stop)!.lowerBound]))
    }

    /// Forces a fixed answer opening, then lets the model write three tokens.
    final class OpeningConstraint: Constraint {
        let opening: [Int32]
        var sampled = 0
        init(_ opening: [Int32]) { self.opening = opening }
        func begin(_ out: inout ConstraintOutput) throws { for t in opening { out.append(t) } }
        func fillAllowed(_ mask: UnsafeMutableBufferPointer<UInt32>) -> Bool { false }
        func accept(_ token: Int32, _ out: inout ConstraintOutput) throws {
            out.append(token)
            sampled += 1
            if sampled == 3 { out.finish() }
        }
        func end(_ reason: FinishReason, _ out: inout ConstraintOutput) throws {}
    }

    @Test func forcedTokensJoinThePrefill() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 256, slots: 2))
        let prompt = try Self.prompt(model, "What is the capital of Italy?")
        let opening = model.tokenizer.encode("The capital is", addSpecial: false, parseSpecial: false)
        let summary = try scheduler.run(GenerationRequest(prompt: prompt, maxTokens: 20, constraint: { OpeningConstraint(opening) }))
        let expected = try opening + Self.reference(model, prompt + opening, maxTokens: 3)
        #expect(summary.tokens == expected)
        #expect(summary.finishReason == .endOfGeneration)
    }

    /// A request whose forced opening would run past the context ends at the context's end,
    /// alone: the requests sharing its step go on (the step once failed for all of them).
    @Test func forcedTokensStayInTheContext() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 128, slots: 2))
        let other = try Self.prompt(model, "Name a planet.")
        let (_, running) = submit(scheduler, GenerationRequest(prompt: other, maxTokens: 30))
        let opening = model.tokenizer.encode("The capital is", addSpecial: false, parseSpecial: false)
        let long = Array(repeating: Int32(1000), count: 126)
        let (_, tight) = submit(scheduler, GenerationRequest(prompt: long, constraint: { OpeningConstraint(opening) }))
        tight.wait()
        running.wait()
        #expect(tight.state.withLock { $0.error } == nil)
        #expect(tight.summary?.finishReason == .contextFull)
        #expect(tight.summary.map { long.count + $0.generatedTokens - 1 } ?? 0 <= 128)
        #expect(running.state.withLock { $0.error } == nil)
        #expect(running.summary?.tokens == (try Self.reference(model, other, maxTokens: 30)))
    }

    /// A short prompt that arrives behind a long one is prefilled at once (shortest first), not
    /// after the long one's whole prefill; the long one still advances every step.
    @Test func aShortPromptIsNotHeldBehindALongPrefill() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 1024, slots: 2, stepTokens: 32))
        let long = Array(repeating: Int32(1000), count: 600)
        let short = try Self.prompt(model, "Name a planet.")
        let (_, first) = submit(scheduler, GenerationRequest(prompt: long, maxTokens: 1))
        let (_, second) = submit(scheduler, GenerationRequest(prompt: short, maxTokens: 1))
        first.wait()
        second.wait()
        let a = try #require(first.summary), b = try #require(second.summary)
        #expect(b.timeToFirstToken < a.timeToFirstToken / 2, "short \(b.timeToFirstToken) s, long \(a.timeToFirstToken) s")
        #expect(b.tokens == (try Self.reference(model, short, maxTokens: 1)))
        #expect(a.tokens == (try Self.reference(model, long, maxTokens: 1)))
    }

    @Test func badRequestsGetTypedErrors() throws {
        let model = try #require(Self.model)
        let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 64, slots: 1))
        #expect(throws: SchedulerError.emptyPrompt) { try scheduler.run(GenerationRequest(prompt: [])) }
        #expect(throws: SchedulerError.promptTooLong(tokens: 64, contextLength: 64)) {
            try scheduler.run(GenerationRequest(prompt: Array(repeating: 1, count: 64), maxTokens: 1))
        }
        #expect(throws: SchedulerError.self) { try scheduler.run(GenerationRequest(prompt: [Int32.max], maxTokens: 1)) }
        // Still serving afterwards.
        #expect(try scheduler.run(GenerationRequest(prompt: [1, 2, 3], maxTokens: 2)).generatedTokens <= 2)
    }
}
