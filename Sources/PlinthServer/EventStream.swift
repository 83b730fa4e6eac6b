import Foundation
import Hummingbird
import Synchronization

/// Writes a generation's server-sent events to its client, and notices a client that is gone
/// or has stopped reading.
///
/// While a response streams, the connection's close is not watched (Hummingbird watches it only
/// while the handler runs); a client that left is seen when a write fails. So the generation
/// writes into a buffer, and a comment line (`: keep-alive`, which SSE readers skip) goes out
/// whenever nothing else has for a second: a client that leaves while its request waits in the
/// queue or in a long prefill ends it within a second or two, instead of holding its place.
/// A write the client doesn't take within `stall` ends the response too (a client that stopped
/// reading, once the socket's buffers are full), so that one such client can't hold a shutdown
/// open. The generation itself isn't held back: it runs on in the scheduler's steps.
enum EventStream {
    static let heartbeat: Duration = .seconds(1)

    /// Runs `chunks`, writing what it sends; returns when it has ended and everything is
    /// written, or throws when the client is gone (the generation is then cancelled).
    static func write(_ chunks: @escaping HTTPServer.ChunkWriter, to writer: inout any ResponseBodyWriter,
                      stall: Duration) async throws {
        let (texts, continuation) = AsyncStream<String>.makeStream()
        let clock = ContinuousClock()
        let activity = Activity(clock.now)
        let producer = Task {
            try? await chunks { text in
                activity.state.withLock { $0.sent = clock.now }
                continuation.yield(text)
            }
            continuation.finish()
        }
        let transfer = UncheckedWriter(writer: writer)
        let writing = Task {
            var writer = transfer.writer
            for await text in texts {
                activity.state.withLock { $0.pending = clock.now }
                try await writer.write(ByteBuffer(string: text))
                activity.state.withLock { $0.pending = nil }
            }
            // Cancelled while waiting for the next event: not a complete stream (no `[DONE]`).
            try Task.checkCancellation()
        }
        let result = await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    while (try? await Task.sleep(for: heartbeat)) != nil {
                        let (sent, pending) = activity.state.withLock { ($0.sent, $0.pending) }
                        // A write the client hasn't taken in time: cancelling it ends the response.
                        if let pending, clock.now - pending > stall { writing.cancel() }
                        if pending == nil && clock.now - sent >= heartbeat {
                            activity.state.withLock { $0.sent = clock.now }
                            continuation.yield(": keep-alive\n\n")
                        }
                    }
                }
                let result = await writing.result
                group.cancelAll()
                return result
            }
        } onCancel: {
            writing.cancel()
        }
        producer.cancel()
        try result.get()
    }
}

/// The response's writer, moved to the task that writes (it is used by one task at a time:
/// the response waits for that task before it writes the end).
private struct UncheckedWriter: @unchecked Sendable {
    var writer: any ResponseBodyWriter
}

/// When the buffer was last sent to, and since when a write has been waiting (nil: none is).
private final class Activity: Sendable {
    let state: Mutex<(sent: ContinuousClock.Instant, pending: ContinuousClock.Instant?)>
    init(_ now: ContinuousClock.Instant) { state = Mutex((now, nil)) }
}
