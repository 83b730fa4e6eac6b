import Foundation
import PlinthRuntime
import Synchronization

/// Runs a request's `n` choices on one model's scheduler, all at once, and merges their events
/// into one stream tagged with the choice's index. The stream ends when every choice has
/// finished. Ending it early — the consumer goes away (a disconnected client) or the deadline
/// passes — cancels every choice still running, which frees their slots at the next step.
struct Choices: Sendable {
    typealias Event = (index: Int, event: GenerationEvent)

    let events: AsyncThrowingStream<Event, any Error>
    private let handles: [GenerationHandle]

    /// Submits the choices; throws an ``APIError``, cancelling them all, when the scheduler
    /// refuses one at once (its queue is full or it has shut down). Each finished choice is
    /// counted in `metrics`, read by its client or not (one that left is counted too).
    /// `param` names the field that asked for the choices (in errors).
    init(_ requests: [GenerationRequest], on scheduler: Scheduler, timeout: Double?, modelID: String, metrics: Metrics,
         param: String = "n") throws {
        // A request with more choices than the server takes at once (running and waiting)
        // would be refused however long its client waited: not a "busy, retry" 429.
        let capacity = scheduler.configuration.maxQueued + scheduler.configuration.maxRunning
        if requests.count > capacity {
            throw APIError.invalid(param, "The request asks for \(requests.count) choices (prompts × n); the server takes at most \(capacity) at once (--parallel running, --max-queue waiting).")
        }
        let (stream, continuation) = AsyncThrowingStream<Event, any Error>.makeStream()
        let left = Counter(requests.count)
        // While submitting, a refusal comes back at once, on this thread: it is kept here.
        let submission = Mutex((open: true, refusal: (any Error)?.none))
        var handles: [GenerationHandle] = []
        for (i, request) in requests.enumerated() {
            handles.append(scheduler.submit(request) { event in
                switch event {
                case .failed(let error):
                    submission.withLock { if $0.open { $0.refusal = error } }
                    continuation.finish(throwing: error)
                case .finished(let summary):
                    metrics.generation(model: modelID, summary)
                    continuation.yield((i, event))
                    if left.decrement() == 0 { continuation.finish() }
                default:
                    continuation.yield((i, event))
                }
            })
        }
        if let error = submission.withLock({ s in s.open = false; return s.refusal }) {
            for handle in handles { handle.cancel() }
            throw (error as? SchedulerError).map(APIError.init(scheduler:)) ?? error
        }
        continuation.onTermination = { [handles] reason in
            // A failed choice or a consumer that left: stop the others too.
            if case .finished(nil) = reason { return }
            for handle in handles { handle.cancel() }
        }
        if let timeout {
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                continuation.finish(throwing: APIError.timeout(seconds: timeout))
            }
        }
        events = stream
        self.handles = handles
    }

    /// Hands each event to `body` in order, and turns scheduler failures into API errors.
    func consume(_ body: (Int, GenerationEvent) async throws -> Void) async throws {
        do {
            for try await (i, event) in events {
                try await body(i, event)
            }
        } catch let error as SchedulerError {
            throw APIError(scheduler: error)
        } catch let error as APIError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw APIError.server("Generation failed: \(error.localizedDescription)")
        }
    }

    /// Stops one choice; its last event is `finished` with reason `cancelled`.
    func cancel(_ index: Int) { handles[index].cancel() }
}

/// A count shared by the scheduler's callbacks.
final class Counter: Sendable {
    private let value: Mutex<Int>
    init(_ value: Int) { self.value = Mutex(value) }
    func decrement() -> Int { value.withLock { $0 -= 1; return $0 } }
}
