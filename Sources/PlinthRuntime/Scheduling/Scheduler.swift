import Foundation
import Synchronization

/// One model's engine: it owns an ``InferenceContext`` and runs every request submitted to it in
/// shared, continuously batched steps.
///
/// Requests come from any thread or task and stream their events back. Each step takes one
/// batch from all live sequences: the tokens decoding sequences feed next (one sampled token,
/// or a run of forced ones) and prefill chunks of new prompts, within a per-step token budget,
/// so a long prompt never stalls everyone's decode. After the step every sequence that has
/// logits samples under its own decode state (sampler, constraint, stop rule, token limit).
/// Requests beyond the free slots wait in arrival order. Shared prompt prefixes are reused (see
/// ``PrefixCache``). On a GPU whose memory holds fewer KV pages than every slot's whole context,
/// a request also waits until the pages it may still take (for its prompt and token limit, at
/// most the context, less the prefix pages it shares) fit the free ones beside what the running
/// sequences may still take, a shared page counted once; cached prefixes are dropped least
/// recently used first to make room. On the CPU the kernels compute every row on its own,
/// so a request's greedy output is the same bits whatever else is in the batch; on a GPU a row's
/// arithmetic depends on its step's row count (fused launches at one or two rows, int8 rows
/// below 9, f16 products from 9), so a near-tie may go the other way.
public final class Scheduler: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// Tokens each sequence may hold (prompt and output); nil: the model's, at most 4096.
        public var contextLength: Int?
        /// KV slots: sequences running at once plus cached prefixes. The KV cache's memory is at
        /// most `slots × contextLength` positions; on a GPU, what its memory holds, at least one
        /// slot's context: sequences then start as their pages allow (``Scheduler``).
        public var slots: Int
        /// Most sequences decoding in one step.
        public var maxRunning: Int
        /// Most tokens one step computes (decode tokens and prefill chunks together).
        public var stepTokens: Int
        /// Most requests waiting for a slot before `submit` refuses more.
        public var maxQueued: Int
        /// Kernel threads; nil: PLINTH_THREADS or every core.
        public var threads: Int?
        /// Where the forward step runs (``Backend/default``: PLINTH_BACKEND, else auto).
        public var backend: Backend
        /// Sizes that replace `slots`, `maxRunning` and `stepTokens` when the step runs on a GPU,
        /// where a step of many more rows costs little more than a step of a few; nil keeps them.
        public var gpuSizing: Sizing?
        /// At most this many pages in a GPU's KV cache (never fewer than one slot's context), as if
        /// its memory held no more: for tests of admission by pages.
        var maxKVPages: Int?

        /// The batch dimensions of an engine.
        public struct Sizing: Sendable, Equatable {
            public var slots: Int
            public var maxRunning: Int
            public var stepTokens: Int

            public init(slots: Int, maxRunning: Int, stepTokens: Int) {
                self.slots = max(1, slots)
                self.maxRunning = max(1, min(maxRunning, self.slots))
                self.stepTokens = max(1, stepTokens)
            }
        }

        public init(contextLength: Int? = nil, slots: Int = 24, maxRunning: Int = 16, stepTokens: Int = 256,
                    maxQueued: Int = 65536, threads: Int? = nil, backend: Backend = .default, gpuSizing: Sizing? = nil) {
            self.contextLength = contextLength
            self.slots = max(1, slots)
            self.maxRunning = max(1, min(maxRunning, self.slots))
            self.stepTokens = max(1, stepTokens)
            self.maxQueued = max(1, maxQueued)
            self.threads = threads
            self.backend = backend
            self.gpuSizing = gpuSizing
        }
    }

    public let model: Model
    /// The configuration in force: `slots`, `maxRunning` and `stepTokens` are the GPU sizing's
    /// when the step runs on a GPU.
    public let configuration: Configuration
    /// Where the step runs (``Backend/cpu`` or ``Backend/cuda``).
    public let backend: Backend
    /// Tokens each sequence may hold.
    public let contextLength: Int
    private let inbox: SchedulerInbox

    public init(model: Model, configuration: Configuration = Configuration()) throws {
        self.model = model
        var configuration = configuration
        // Admission keeps sequences within a GPU cache of the pages that fit (SchedulerCore).
        func make(_ sizing: Configuration.Sizing, _ backend: Backend) throws -> InferenceContext {
            try InferenceContext(transformer: model.transformer, contextLength: configuration.contextLength, slots: sizing.slots,
                                 maxBatch: sizing.stepTokens, threads: configuration.threads, backend: backend, recordedLayers: false,
                                 pagesByUse: true, maxPages: configuration.maxKVPages)
        }
        let cpuSizing = Configuration.Sizing(slots: configuration.slots, maxRunning: configuration.maxRunning,
                                             stepTokens: configuration.stepTokens)
        let context: InferenceContext
        if let gpu = configuration.gpuSizing, configuration.backend.expectsGPU,
           let found = try? make(gpu, .cuda) {
            // Sized for the GPU on the GPU (where not even one sequence's context fits its
            // memory, or there is none, sized as configured on the configured backend).
            (configuration.slots, configuration.maxRunning, configuration.stepTokens) = (gpu.slots, gpu.maxRunning, gpu.stepTokens)
            context = found
        } else {
            context = try make(cpuSizing, configuration.backend)
        }
        if let budget = context.kvPageBudget {
            let positions = budget.pages * budget.pageLength
            BackendNotes.say("the GPU's memory holds a KV cache of \(positions) positions (\(budget.pages) pages of \(budget.pageLength)), not \(configuration.slots) slots × \(context.contextLength); up to \(configuration.maxRunning) sequences run at once as their pages allow")
        }
        self.configuration = configuration
        backend = context.backend
        contextLength = context.contextLength
        inbox = SchedulerInbox(maxQueued: configuration.maxQueued, maxRunning: configuration.maxRunning)
        let core = SchedulerCore(model: model, context: context, configuration: configuration, inbox: inbox)
        let thread = Thread { core.run() }
        thread.name = "plinth-scheduler"
        thread.start()
    }

    deinit { inbox.shutDown() }

    /// Starts a request. `handler` receives its events on the scheduler's thread (keep it short),
    /// the last one `finished` or `failed`.
    @discardableResult
    public func submit(_ request: GenerationRequest, handler: @escaping @Sendable (GenerationEvent) -> Void) -> GenerationHandle {
        inbox.submit(request, handler: handler)
    }

    /// Starts a request and streams its events; the stream ends after `finished`, throws what
    /// `failed` carries, and cancels the request when its consumer goes away.
    public func stream(_ request: GenerationRequest) -> AsyncThrowingStream<GenerationEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<GenerationEvent, any Error>.makeStream()
        let handle = submit(request) { event in
            switch event {
            case .failed(let error): continuation.finish(throwing: error)
            case .finished:
                continuation.yield(event)
                continuation.finish()
            default: continuation.yield(event)
            }
        }
        continuation.onTermination = { reason in
            if case .cancelled = reason { handle.cancel() }
        }
        return stream
    }

    /// Runs a request to the end on the calling thread, handing its events to `onEvent`.
    public func run(_ request: GenerationRequest, onEvent: @escaping @Sendable (GenerationEvent) -> Void = { _ in }) throws -> GenerationSummary {
        try runWhile(request) { event in
            onEvent(event)
            return true
        }
    }

    /// Runs a request on the calling thread, handing its events to `continuing`, while it
    /// returns true: the request ends as it would, or when `continuing` returns false (the request is then cancelled: it finishes
    /// `.cancelled` at the next step, its later events not handed on).
    public func runWhile(_ request: GenerationRequest, _ continuing: @escaping @Sendable (GenerationEvent) -> Bool) throws -> GenerationSummary {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<GenerationSummary, any Error>?>(nil)
        // The handle arrives after the first events may have: a stop asked before is made then.
        let control = Mutex<(handle: GenerationHandle?, stopped: Bool)>((nil, false))
        let handle = submit(request) { event in
            switch event {
            case .finished(let summary):
                if !control.withLock({ $0.stopped }) { _ = continuing(event) }
                result.withLock { $0 = .success(summary) }
                done.signal()
            case .failed(let error):
                result.withLock { $0 = .failure(error) }
                done.signal()
            default:
                guard !control.withLock({ $0.stopped }), !continuing(event) else { return }
                control.withLock { c in
                    c.stopped = true
                    c.handle?.cancel()
                }
            }
        }
        control.withLock { c in
            c.handle = handle
            if c.stopped { handle.cancel() }
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// Drops every cached prefix that no running sequence uses, so the next request starts cold.
    public func forgetCachedPrefixes() { inbox.post(.forgetCache) }

    /// Counters since the scheduler started.
    public var statistics: SchedulerStatistics { inbox.statistics.withLock { $0 } }
}

/// What a ``Scheduler`` has done so far.
public struct SchedulerStatistics: Sendable, Equatable {
    public var steps = 0
    /// Tokens computed (prefill and decode), and of them prefilled prompt tokens.
    public var tokens = 0
    public var prefillTokens = 0
    /// Prompt tokens copied from the prefix cache instead of computed.
    public var cachedTokens = 0
    public var requestsFinished = 0
    /// The largest number of sequences one step served.
    public var largestBatch = 0
    /// Steps by the sequences they served: entry `i` counts the steps that served more than
    /// `batchBounds[i-1]` and at most `batchBounds[i]` (larger steps are not counted here).
    public var stepsBySequenceBound = Array(repeating: 0, count: SchedulerStatistics.batchBounds.count)
    public static let batchBounds = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    /// The sequences of every step, summed (over `steps`, the mean batch).
    public var sequencesServed = 0
    /// Steps whose sequences' decoders advanced on several threads (16 rows or more).
    public var threadedSteps = 0
    /// Requests waiting for a slot, and sequences running, after the last step.
    public var queued = 0
    public var running = 0
}

/// A request in flight: cancel it from anywhere.
public struct GenerationHandle: Sendable {
    public let id: UInt64
    fileprivate let inbox: SchedulerInbox

    /// Stops the request: a waiting one never starts, a running one frees its slot at the next
    /// step. Its last event is `finished` with reason `.cancelled`.
    public func cancel() { inbox.post(.cancel(id)) }
}

/// The part of a scheduler other threads touch: submissions, cancellations and a wake-up.
final class SchedulerInbox: Sendable {
    struct Job: Sendable {
        var id: UInt64
        var request: GenerationRequest
        var handler: @Sendable (GenerationEvent) -> Void
        var submitted: UInt64
    }
    enum Message: Sendable {
        case cancel(UInt64)
        case forgetCache
    }
    struct State {
        var jobs: [Job] = []
        var messages: [Message] = []
        var nextID: UInt64 = 1
        var waiting = 0
        /// Sequences running, as the scheduler's thread last said.
        var running = 0
        var closed = false
    }

    let state = Mutex(State())
    let statistics = Mutex(SchedulerStatistics())
    private let wake = DispatchSemaphore(value: 0)
    let maxQueued: Int
    let maxRunning: Int

    init(maxQueued: Int, maxRunning: Int) {
        self.maxQueued = maxQueued
        self.maxRunning = maxRunning
    }

    func submit(_ request: GenerationRequest, handler: @escaping @Sendable (GenerationEvent) -> Void) -> GenerationHandle {
        let now = DispatchTime.now().uptimeNanoseconds
        let (id, refusal): (UInt64, SchedulerError?) = state.withLock { s in
            let id = s.nextID
            s.nextID += 1
            if s.closed { return (id, .shutDown) }
            // Those that free places will take at once don't wait: a burst into an idle
            // scheduler fills its places before anything queues.
            if s.waiting >= maxQueued + max(0, maxRunning - s.running) { return (id, .queueFull(capacity: maxQueued)) }
            s.waiting += 1
            s.jobs.append(Job(id: id, request: request, handler: handler, submitted: now))
            return (id, nil)
        }
        if let refusal { handler(.failed(refusal)) } else { wake.signal() }
        return GenerationHandle(id: id, inbox: self)
    }

    func post(_ message: Message) {
        state.withLock { $0.messages.append(message) }
        wake.signal()
    }

    func shutDown() {
        state.withLock { $0.closed = true }
        wake.signal()
    }

    /// Takes what arrived; with `block`, first waits until something does.
    func take(block: Bool) -> (jobs: [Job], messages: [Message], closed: Bool) {
        while true {
            let got = state.withLock { s in
                let out = (s.jobs, s.messages, s.closed)
                s.jobs = []
                s.messages = []
                return out
            }
            if !block || !got.0.isEmpty || !got.1.isEmpty || got.2 { return got }
            wake.wait()
        }
    }

    /// `count` jobs left the queue; `running`: they run (counted at once, so that a submit
    /// never sees them neither waiting nor running).
    func admitted(_ count: Int, running: Bool) {
        state.withLock { s in
            s.waiting -= count
            if running { s.running += count }
        }
    }

    /// The sequences running (as many as may, while a request can't be admitted).
    func setRunning(_ count: Int) { state.withLock { $0.running = count } }
}
