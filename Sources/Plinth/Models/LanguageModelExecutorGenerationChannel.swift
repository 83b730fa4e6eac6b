import Foundation

/// The channel an executor streams a turn into: response text, reasoning, tool calls, usage
/// and metadata, as events.
///
/// ```swift
/// await channel.send(.response(action: .appendText("Hello", tokenCount: 1)))
/// await channel.send(.response(action: .updateUsage(
///     input: .init(totalTokenCount: 12, cachedTokenCount: 0),
///     output: .init(totalTokenCount: 1, reasoningTokenCount: 0))))
/// ```
///
/// Usage values are cumulative for the turn: each `updateUsage` replaces the previous one.
public struct LanguageModelExecutorGenerationChannel: AsyncSequence, Sendable {
    public typealias Element = any LanguageModelExecutorGenerationChannel.Event

    private let stream: AsyncStream<any Event>
    private let continuation: AsyncStream<any Event>.Continuation

    /// Creates a channel.
    public init() {
        (stream, continuation) = AsyncStream.makeStream(of: (any Event).self)
    }

    /// Sends an event to the session.
    nonisolated(nonsending) public func send(_ event: some LanguageModelExecutorGenerationChannel.Event) async {
        continuation.yield(event)
    }

    /// Sends an event without suspending, for executors that decode in a synchronous loop
    /// (the local executor holds its model's context for the whole turn).
    func sendNow(_ event: some LanguageModelExecutorGenerationChannel.Event) {
        continuation.yield(event)
    }

    /// Ends the channel: the session reads no more events.
    func finish() {
        continuation.finish()
    }

    /// Creates the iterator of the channel's events.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator())
    }

    /// The iterator of a channel's events.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = any LanguageModelExecutorGenerationChannel.Event
        var base: AsyncStream<any Event>.Iterator

        /// The next event, or `nil` when the turn is over.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> (any Event)? {
            await base.next(isolation: actor)
        }

        /// The next event, or `nil` when the turn is over.
        public mutating func next() async throws -> (any Event)? {
            await base.next(isolation: nil)
        }
    }
}

extension LanguageModelExecutorGenerationChannel {
    /// An event an executor sends.
    public protocol Event: Sendable {
        /// What the event is about.
        var kind: LanguageModelExecutorGenerationChannel.EventKind { get }
    }

    /// What an event is about: the response, reasoning, or tool calls.
    public struct EventKind: Sendable, Hashable {
        let name: String
    }

    /// Values an executor attaches to an entry.
    public struct Metadata: Sendable {
        /// The values.
        public var values: [String: any Sendable & Codable & Equatable]
    }

    /// How many tokens a turn used so far.
    public struct Usage: Sendable {
        /// Tokens of the request.
        public var input: LanguageModelExecutorGenerationChannel.Usage.Input
        /// Tokens the model generated.
        public var output: LanguageModelExecutorGenerationChannel.Usage.Output

        /// Creates a usage value.
        public init(input: LanguageModelExecutorGenerationChannel.Usage.Input,
                    output: LanguageModelExecutorGenerationChannel.Usage.Output) {
            self.input = input
            self.output = output
        }

        /// Tokens of the request.
        public struct Input: Sendable {
            /// All tokens of the request.
            public var totalTokenCount: Int
            /// Tokens of the request that were cached from an earlier turn.
            public var cachedTokenCount: Int

            /// Creates an input usage value.
            public init(totalTokenCount: Int, cachedTokenCount: Int) {
                self.totalTokenCount = totalTokenCount
                self.cachedTokenCount = cachedTokenCount
            }
        }

        /// Tokens the model generated.
        public struct Output: Sendable {
            /// All generated tokens.
            public var totalTokenCount: Int
            /// Generated tokens that were reasoning.
            public var reasoningTokenCount: Int

            /// Creates an output usage value.
            public init(totalTokenCount: Int, reasoningTokenCount: Int) {
                self.totalTokenCount = totalTokenCount
                self.reasoningTokenCount = reasoningTokenCount
            }
        }
    }

    /// Text appended to a segment.
    public struct TextFragment: Sendable {
        /// The text.
        public var content: String
        /// The segment the text belongs to; `nil` for the entry's main text.
        public var segmentID: String?
        /// How many tokens the text is.
        public var tokenCount: Int
    }

    /// Text that replaces a segment's text.
    public struct TextSegmentReplacement: Sendable {
        /// The new text.
        public var content: String
        /// The segment to replace; `nil` for the entry's main text.
        public var segmentID: String?
        /// How many tokens the new text is.
        public var tokenCount: Int
    }

    /// An event about the response entry.
    public struct Response: LanguageModelExecutorGenerationChannel.Event {
        /// The identifier of the response entry, if the executor chooses one.
        public var entryID: String?
        /// What happens to the response.
        public var action: LanguageModelExecutorGenerationChannel.Response.Action

        /// What the event is about: the response.
        public var kind: LanguageModelExecutorGenerationChannel.EventKind { .init(name: "response") }

        /// What happens to the response.
        public enum Action: Sendable {
            /// Text is appended.
            case appendText(LanguageModelExecutorGenerationChannel.TextFragment)
            /// A segment's text is replaced.
            case replaceTextSegment(LanguageModelExecutorGenerationChannel.TextSegmentReplacement)
            /// A custom segment is added, or replaced when one with its identifier exists.
            case updateCustomSegment(any Transcript.CustomSegment)
            /// An attachment segment is added, or replaced when one with its identifier exists.
            case addAttachmentSegment(Transcript.AttachmentSegment)
            /// The attachment segment with this identifier is removed.
            case removeAttachmentSegment(id: String)
            /// Metadata values are added or replaced.
            case updateMetadata(LanguageModelExecutorGenerationChannel.Metadata)
            /// The turn's usage so far.
            case updateUsage(LanguageModelExecutorGenerationChannel.Usage)

            /// Appends text to the response.
            public static func appendText(_ text: String, segmentID: String? = nil, tokenCount: Int) -> Action {
                .appendText(.init(content: text, segmentID: segmentID, tokenCount: tokenCount))
            }

            /// Replaces the text of a segment of the response.
            public static func replaceTextSegment(_ text: String, segmentID: String? = nil, tokenCount: Int) -> Action {
                .replaceTextSegment(.init(content: text, segmentID: segmentID, tokenCount: tokenCount))
            }

            /// Adds or replaces metadata values of the response.
            public static func updateMetadata(_ values: [String: any Sendable & Codable & Equatable]) -> Action {
                .updateMetadata(.init(values: values))
            }

            /// Reports the turn's usage so far.
            public static func updateUsage(input: LanguageModelExecutorGenerationChannel.Usage.Input,
                                           output: LanguageModelExecutorGenerationChannel.Usage.Output) -> Action {
                .updateUsage(.init(input: input, output: output))
            }
        }
    }

    /// An event about the reasoning entry.
    public struct Reasoning: LanguageModelExecutorGenerationChannel.Event {
        /// The identifier of the reasoning entry, if the executor chooses one.
        public var entryID: String?
        /// What happens to the reasoning.
        public var action: LanguageModelExecutorGenerationChannel.Reasoning.Action

        /// What the event is about: reasoning.
        public var kind: LanguageModelExecutorGenerationChannel.EventKind { .init(name: "reasoning") }

        /// What happens to the reasoning.
        public enum Action: Sendable {
            /// Text is appended.
            case appendText(LanguageModelExecutorGenerationChannel.TextFragment)
            /// A segment's text is replaced.
            case replaceTextSegment(LanguageModelExecutorGenerationChannel.TextSegmentReplacement)
            /// The provider's signature over the reasoning.
            case updateSignature(LanguageModelExecutorGenerationChannel.ReasoningSignature)
            /// Metadata values are added or replaced.
            case updateMetadata(LanguageModelExecutorGenerationChannel.Metadata)
            /// The turn's usage so far.
            case updateUsage(LanguageModelExecutorGenerationChannel.Usage)

            /// Appends text to the reasoning.
            public static func appendText(_ text: String, segmentID: String? = nil, tokenCount: Int) -> Action {
                .appendText(.init(content: text, segmentID: segmentID, tokenCount: tokenCount))
            }

            /// Replaces the text of a segment of the reasoning.
            public static func replaceTextSegment(_ text: String, segmentID: String? = nil, tokenCount: Int) -> Action {
                .replaceTextSegment(.init(content: text, segmentID: segmentID, tokenCount: tokenCount))
            }

            /// Sets the provider's signature over the reasoning.
            public static func updateSignature(_ signature: Data, tokenCount: Int) -> Action {
                .updateSignature(.init(signature: signature, tokenCount: tokenCount))
            }

            /// Adds or replaces metadata values of the reasoning.
            public static func updateMetadata(_ values: [String: any Sendable & Codable & Equatable]) -> Action {
                .updateMetadata(.init(values: values))
            }

            /// Reports the turn's usage so far.
            public static func updateUsage(input: LanguageModelExecutorGenerationChannel.Usage.Input,
                                           output: LanguageModelExecutorGenerationChannel.Usage.Output) -> Action {
                .updateUsage(.init(input: input, output: output))
            }
        }
    }

    /// A provider's signature over reasoning.
    public struct ReasoningSignature: Sendable {
        /// The signature.
        public var signature: Data
        /// How many tokens the signature is.
        public var tokenCount: Int
    }

    /// An event about the tool calls of the turn.
    public struct ToolCalls: LanguageModelExecutorGenerationChannel.Event {
        /// The identifier of the tool calls entry, if the executor chooses one.
        public var entryID: String?
        /// What happens to the tool calls.
        public var action: LanguageModelExecutorGenerationChannel.ToolCalls.Action

        /// What the event is about: tool calls.
        public var kind: LanguageModelExecutorGenerationChannel.EventKind { .init(name: "toolCalls") }

        /// What happens to the tool calls.
        public enum Action: Sendable {
            /// A call is started or continued.
            case toolCall(LanguageModelExecutorGenerationChannel.ToolCalls.ToolCall)
            /// A call is withdrawn.
            case removeToolCall(id: String)
            /// Metadata values are added or replaced.
            case updateMetadata(LanguageModelExecutorGenerationChannel.Metadata)
            /// The turn's usage so far.
            case updateUsage(LanguageModelExecutorGenerationChannel.Usage)

            /// Starts or continues the call with the identifier you give.
            public static func toolCall(id: String, name: String,
                                        action: LanguageModelExecutorGenerationChannel.ToolCalls.ToolCall.Action) -> Action {
                .toolCall(.init(id: id, name: name, action: action))
            }

            /// Adds or replaces metadata values of the tool calls.
            public static func updateMetadata(_ values: [String: any Sendable & Codable & Equatable]) -> Action {
                .updateMetadata(.init(values: values))
            }

            /// Reports the turn's usage so far.
            public static func updateUsage(input: LanguageModelExecutorGenerationChannel.Usage.Input,
                                           output: LanguageModelExecutorGenerationChannel.Usage.Output) -> Action {
                .updateUsage(.init(input: input, output: output))
            }
        }

        /// One call of a tool.
        public struct ToolCall: Sendable {
            /// The call's identifier.
            public var id: String
            /// The name of the tool.
            public var name: String
            /// What happens to the call.
            public var action: LanguageModelExecutorGenerationChannel.ToolCalls.ToolCall.Action

            /// What happens to a call.
            public enum Action: Sendable {
                /// JSON text is appended to the call's arguments.
                case appendArguments(LanguageModelExecutorGenerationChannel.ToolCalls.ToolCall.ArgumentsFragment)
                /// Metadata values of the call are added or replaced.
                case updateMetadata(LanguageModelExecutorGenerationChannel.Metadata)

                /// Appends JSON text to the call's arguments.
                public static func appendArguments(_ content: String, tokenCount: Int) -> Action {
                    .appendArguments(.init(content: content, tokenCount: tokenCount))
                }

                /// Adds or replaces metadata values of the call.
                public static func updateMetadata(_ values: [String: any Sendable & Codable & Equatable]) -> Action {
                    .updateMetadata(.init(values: values))
                }
            }

            /// JSON text of a call's arguments.
            public struct ArgumentsFragment: Sendable {
                /// The text.
                public var content: String
                /// How many tokens the text is.
                public var tokenCount: Int
            }
        }
    }
}

extension LanguageModelExecutorGenerationChannel.Event where Self == LanguageModelExecutorGenerationChannel.Response {
    /// An event about the response.
    public static func response(entryID: String? = nil,
                                action: LanguageModelExecutorGenerationChannel.Response.Action) -> Self {
        .init(entryID: entryID, action: action)
    }
}

extension LanguageModelExecutorGenerationChannel.Event where Self == LanguageModelExecutorGenerationChannel.ToolCalls {
    /// An event about tool calls.
    public static func toolCalls(entryID: String? = nil,
                                 action: LanguageModelExecutorGenerationChannel.ToolCalls.Action) -> Self {
        .init(entryID: entryID, action: action)
    }
}

extension LanguageModelExecutorGenerationChannel.Event where Self == LanguageModelExecutorGenerationChannel.Reasoning {
    /// An event about reasoning.
    public static func reasoning(entryID: String? = nil,
                                 action: LanguageModelExecutorGenerationChannel.Reasoning.Action) -> Self {
        .init(entryID: entryID, action: action)
    }
}
