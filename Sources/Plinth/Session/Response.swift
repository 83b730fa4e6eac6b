import Foundation
import Synchronization

extension LanguageModelSession {
    /// A structure that stores the output of a response call.
    public struct Response<Content> where Content: Generable {
        /// The response content.
        public let content: Content
        /// The raw response content.
        ///
        /// When `Content` is ``GeneratedContent``, this is the same as ``content``.
        public let rawContent: GeneratedContent
        /// The list of transcript entries: the prompt, any tool calls and outputs, and the
        /// response.
        public let transcriptEntries: ArraySlice<Transcript.Entry>
        /// The tokens the request used, over all its rounds of tool calls.
        public let usage: LanguageModelSession.Usage

        init(content: Content, rawContent: GeneratedContent, transcriptEntries: ArraySlice<Transcript.Entry>,
             usage: LanguageModelSession.Usage) {
            self.content = content
            self.rawContent = rawContent
            self.transcriptEntries = transcriptEntries
            self.usage = usage
        }
    }

    /// The tokens a request or a session used.
    public struct Usage: Sendable {
        /// Tokens the model read.
        public var input: LanguageModelSession.Usage.Input
        /// Tokens the model generated.
        public var output: LanguageModelSession.Usage.Output
        /// Values the model provider attached.
        public var metadata: [String: any Sendable & Codable & Equatable]

        /// Creates a usage value.
        public init(input: LanguageModelSession.Usage.Input, output: LanguageModelSession.Usage.Output,
                    metadata: [String: any Sendable & Codable & Equatable] = [:]) {
            self.input = input
            self.output = output
            self.metadata = metadata
        }

        /// Tokens the model read.
        public struct Input: Sendable {
            /// All tokens read.
            public var totalTokenCount: Int
            /// Tokens read from a cache of an earlier turn.
            public var cachedTokenCount: Int

            /// Creates an input usage value.
            public init(totalTokenCount: Int, cachedTokenCount: Int) {
                self.totalTokenCount = totalTokenCount
                self.cachedTokenCount = cachedTokenCount
            }
        }

        /// Tokens the model generated.
        public struct Output: Sendable {
            /// All tokens generated.
            public var totalTokenCount: Int
            /// Generated tokens that were reasoning.
            public var reasoningTokenCount: Int

            /// Creates an output usage value.
            public init(totalTokenCount: Int, reasoningTokenCount: Int) {
                self.totalTokenCount = totalTokenCount
                self.reasoningTokenCount = reasoningTokenCount
            }
        }

        /// All tokens read and generated.
        public var totalTokenCount: Int { input.totalTokenCount + output.totalTokenCount }

        static var zero: Usage {
            Usage(input: .init(totalTokenCount: 0, cachedTokenCount: 0), output: .init(totalTokenCount: 0, reasoningTokenCount: 0))
        }

        static func + (a: Usage, b: Usage) -> Usage {
            var metadata = a.metadata
            metadata.merge(b.metadata) { $1 }
            return Usage(
                input: .init(totalTokenCount: a.input.totalTokenCount + b.input.totalTokenCount,
                             cachedTokenCount: a.input.cachedTokenCount + b.input.cachedTokenCount),
                output: .init(totalTokenCount: a.output.totalTokenCount + b.output.totalTokenCount,
                              reasoningTokenCount: a.output.reasoningTokenCount + b.output.reasoningTokenCount),
                metadata: metadata)
        }
    }

    /// An async sequence of snapshots of partially generated content.
    ///
    /// ```swift
    /// let stream = session.streamResponse(to: "Plan a trip to Tokyo.", generating: Itinerary.self)
    /// for try await snapshot in stream {
    ///     print(snapshot.content.title ?? "…")
    /// }
    /// let itinerary = try await stream.collect().content
    /// ```
    ///
    /// Generation starts when you first iterate the stream or call ``collect()``. Each
    /// snapshot holds everything generated so far; the last one holds the complete content.
    /// Leaving the loop early lets the request run on while you keep the stream (for
    /// ``collect()``); once no copy of it is left, the request stops and is reverted like a
    /// cancelled one, and the session's next request waits for it to end.
    public struct ResponseStream<Content> where Content: Generable {
        let source: StreamSource

        init(start: @escaping @Sendable (_ yield: @escaping @Sendable (RawResult) -> Void) async throws -> RawResult) {
            source = StreamSource(start: start)
        }

        init(fixed result: RawResult) {
            source = StreamSource { yield in
                yield(result)
                return result
            }
        }

        /// A snapshot of partially generated content.
        public struct Snapshot {
            /// The content of the response, with every property generated so far.
            public var content: Content.PartiallyGenerated
            /// The raw content of the response.
            public var rawContent: GeneratedContent
            /// The transcript entries of the request so far.
            public var transcriptEntries: ArraySlice<Transcript.Entry>
            /// The tokens the request used so far.
            public var usage: LanguageModelSession.Usage
        }

        /// The iterator of a response stream.
        public struct AsyncIterator: AsyncIteratorProtocol {
            public typealias Element = Snapshot
            let source: StreamSource
            var base: AsyncThrowingStream<RawResult, any Swift.Error>.Iterator?

            /// The next snapshot, or `nil` when the response is complete.
            public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws -> Snapshot? {
                if base == nil { base = source.start().stream.makeAsyncIterator() }
                var iterator = base!
                defer { base = iterator }
                let task = source.start().task
                while true {
                    let raw = try await withTaskCancellationHandler {
                        try await iterator.next(isolation: actor)
                    } onCancel: {
                        task.cancel()
                    }
                    // The stream ends when the request does, and when this task is cancelled: the
                    // request's own outcome tells which, so that a cut stream doesn't read as whole.
                    guard let raw else {
                        _ = try await task.value
                        return nil
                    }
                    // A snapshot that can't be read as the partial type yet is skipped.
                    if let content = try? Content.PartiallyGenerated(raw.content) {
                        return Snapshot(content: content, rawContent: raw.content,
                                        transcriptEntries: ArraySlice(raw.entries), usage: raw.usage)
                    }
                }
            }

            /// The next snapshot, or `nil` when the response is complete.
            public mutating func next() async throws -> Snapshot? {
                try await next(isolation: nil)
            }
        }
    }
}

extension LanguageModelSession.Response: Sendable where Content: Sendable {}
extension LanguageModelSession.ResponseStream: Sendable {}
extension LanguageModelSession.ResponseStream.Snapshot: Sendable where Content.PartiallyGenerated: Sendable {}

extension LanguageModelSession.ResponseStream: AsyncSequence {
    public typealias Element = Snapshot

    /// Creates the iterator; the first call starts generation.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(source: source, base: nil)
    }

    /// The result from a streaming response, after it completes.
    ///
    /// If the streaming response was terminated due to an error, this method throws the
    /// error.
    nonisolated(nonsending) public func collect() async throws -> sending LanguageModelSession.Response<Content> {
        let task = source.start().task
        let raw = try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
        return try LanguageModelSession.typedResponse(raw, as: Content.self)
    }
}

/// The content, entries and usage of a request: a snapshot while it streams, the result when
/// it is done.
struct RawResult: Sendable {
    var content: GeneratedContent
    var entries: [Transcript.Entry]
    var usage: LanguageModelSession.Usage
}

/// Starts a streaming request once, and hands out its snapshots and its result.
final class StreamSource: Sendable {
    struct Started: Sendable {
        var task: Task<RawResult, any Swift.Error>
        var stream: AsyncThrowingStream<RawResult, any Swift.Error>
    }

    private let body: @Sendable (_ yield: @escaping @Sendable (RawResult) -> Void) async throws -> RawResult
    private let started = Mutex<Started?>(nil)

    init(start: @escaping @Sendable (_ yield: @escaping @Sendable (RawResult) -> Void) async throws -> RawResult) {
        body = start
    }

    // Once no stream value (or iterator) is left, nothing can read the request's snapshots or
    // result: it stops, as when its task is cancelled (a `break` out of the loop over a stream
    // that isn't kept for `collect()` ends the request).
    deinit {
        started.withLock { $0?.task.cancel() }
    }

    func start() -> Started {
        started.withLock { started in
            if let started { return started }
            let (stream, continuation) = AsyncThrowingStream.makeStream(of: RawResult.self)
            let body = self.body
            let task = Task {
                do {
                    let result = try await body { continuation.yield($0) }
                    continuation.finish()
                    return result
                } catch {
                    continuation.finish(throwing: error)
                    throw error
                }
            }
            continuation.onTermination = { termination in
                if case .cancelled = termination { task.cancel() }
            }
            let value = Started(task: task, stream: stream)
            started = value
            return value
        }
    }
}
