import Foundation

/// Errors that a language model, or its executor, reports while generating a response.
///
/// Executors throw these errors from
/// ``LanguageModelExecutor/respond(to:model:streamingInto:)``. The session passes them on to
/// your code; the errors that have an Xcode 26 counterpart in
/// ``LanguageModelSession/GenerationError`` are reported as that error, so that code written
/// for either release catches them (see ``LanguageModelSession`` for details).
public enum LanguageModelError: LocalizedError {
    /// The request holds more tokens than the model's context.
    case contextSizeExceeded(LanguageModelError.ContextSizeExceeded)
    /// The model provider limits how often it can be called.
    case rateLimited(LanguageModelError.RateLimited)
    /// A safety guardrail blocked the request or the response.
    case guardrailViolation(LanguageModelError.GuardrailViolation)
    /// The model declined to respond.
    case refusal(LanguageModelError.Refusal)
    /// The request needs a capability the model doesn't declare.
    case unsupportedCapability(LanguageModelError.UnsupportedCapability)
    /// The transcript holds content the model can't read.
    case unsupportedTranscriptContent(LanguageModelError.UnsupportedTranscriptContent)
    /// The schema uses a generation guide the model can't enforce.
    case unsupportedGenerationGuide(LanguageModelError.UnsupportedGenerationGuide)
    /// The request is in a language the model doesn't support.
    case unsupportedLanguageOrLocale(LanguageModelError.UnsupportedLanguageOrLocale)
    /// The model took too long to respond.
    case timeout(LanguageModelError.Timeout)

    /// The context of a `contextSizeExceeded` error.
    public struct ContextSizeExceeded: Sendable {
        /// The number of tokens the model can attend to.
        public var contextSize: Int
        /// The number of tokens the request needed.
        public var tokenCount: Int
        /// A description for developers.
        public var debugDescription: String
        /// Values the provider attached.
        public var metadata: [String: any Sendable]

        /// Creates the context.
        public init(contextSize: Int, tokenCount: Int, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.contextSize = contextSize
            self.tokenCount = tokenCount
            self.debugDescription = debugDescription
            self.metadata = metadata
        }
    }

    /// The context of a `rateLimited` error.
    public struct RateLimited: Sendable {
        /// When requests are accepted again, if known.
        public var resetDate: Date?
        /// A description for developers.
        public var debugDescription: String
        /// Values the provider attached.
        public var metadata: [String: any Sendable]

        /// Creates the context.
        public init(resetDate: Date?, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.resetDate = resetDate
            self.debugDescription = debugDescription
            self.metadata = metadata
        }
    }

    /// The context of a `guardrailViolation` error.
    public struct GuardrailViolation: Sendable {
        /// A description for developers.
        public var debugDescription: String
        /// Values the provider attached.
        public var metadata: [String: any Sendable]

        /// Creates the context.
        public init(debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.debugDescription = debugDescription
            self.metadata = metadata
        }
    }

    /// The context of a `refusal` error.
    public struct Refusal: Sendable {
        let explanationText: String
        /// A description for developers.
        public var debugDescription: String
        /// Values the provider attached.
        public var metadata: [String: any Sendable]

        /// Creates the context, with the model's explanation of the refusal.
        public init(explanation: String, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.explanationText = explanation
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// The model's explanation of why it refused.
        public var explanation: LanguageModelSession.Response<String> {
            get async throws {
                LanguageModelSession.Response(content: explanationText, rawContent: GeneratedContent(explanationText),
                                              transcriptEntries: [], usage: .zero)
            }
        }

        /// The model's explanation of why it refused, as a stream.
        public var explanationStream: LanguageModelSession.ResponseStream<String> {
            LanguageModelSession.ResponseStream(fixed: RawResult(content: GeneratedContent(explanationText), entries: [], usage: .zero))
        }
    }

    /// The context of an `unsupportedCapability` error.
    public struct UnsupportedCapability: Sendable {
        /// The capability the request needs.
        public var capability: LanguageModelCapabilities.Capability
        /// A description for developers.
        public var debugDescription: String
        /// Values the provider attached.
        public var metadata: [String: any Sendable]

        /// Creates the context.
        public init(capability: LanguageModelCapabilities.Capability, debugDescription: String,
                    metadata: [String: any Sendable] = [:]) {
            self.capability = capability
            self.debugDescription = debugDescription
            self.metadata = metadata
        }
    }

    /// The context of an `unsupportedTranscriptContent` error.
    public struct UnsupportedTranscriptContent: Sendable {
        /// The entries the model can't read.
        public var unsupportedContent: [Transcript.Entry]
        /// A description for developers.
        public var debugDescription: String
        /// Values the provider attached.
        public var metadata: [String: any Sendable]

        /// Creates the context.
        public init(unsupportedContent: [Transcript.Entry], debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.unsupportedContent = unsupportedContent
            self.debugDescription = debugDescription
            self.metadata = metadata
        }
    }

    /// The context of an `unsupportedGenerationGuide` error.
    public struct UnsupportedGenerationGuide: Sendable {
        /// The name of the schema that uses the guide.
        public var schemaName: String?
        /// A description for developers.
        public var debugDescription: String
        /// Values the provider attached.
        public var metadata: [String: any Sendable]

        /// Creates the context.
        public init(schemaName: String?, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.schemaName = schemaName
            self.debugDescription = debugDescription
            self.metadata = metadata
        }
    }

    /// The context of an `unsupportedLanguageOrLocale` error.
    public struct UnsupportedLanguageOrLocale: Sendable {
        /// The language of the request.
        public var languageCode: Locale.LanguageCode
        /// A description for developers.
        public var debugDescription: String
        /// Values the provider attached.
        public var metadata: [String: any Sendable]

        /// Creates the context.
        public init(languageCode: Locale.LanguageCode, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.languageCode = languageCode
            self.debugDescription = debugDescription
            self.metadata = metadata
        }
    }

    /// The context of a `timeout` error.
    public struct Timeout: Sendable {
        /// A description for developers.
        public var debugDescription: String
        /// Values the provider attached.
        public var metadata: [String: any Sendable]

        /// Creates the context.
        public init(debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.debugDescription = debugDescription
            self.metadata = metadata
        }
    }
}

extension LanguageModelError: CustomDebugStringConvertible {
    /// The description for developers of the error's context.
    public var debugDescription: String {
        switch self {
        case .contextSizeExceeded(let c): c.debugDescription
        case .rateLimited(let c): c.debugDescription
        case .guardrailViolation(let c): c.debugDescription
        case .refusal(let c): c.debugDescription
        case .unsupportedCapability(let c): c.debugDescription
        case .unsupportedTranscriptContent(let c): c.debugDescription
        case .unsupportedGenerationGuide(let c): c.debugDescription
        case .unsupportedLanguageOrLocale(let c): c.debugDescription
        case .timeout(let c): c.debugDescription
        }
    }
}

extension LanguageModelError {
    /// A string representation of the error description.
    public var errorDescription: String? {
        switch self {
        case .contextSizeExceeded(let c):
            // At least: a text far past the context is refused by its bytes, before it is tokenized.
            "The request needs at least \(c.tokenCount) tokens, more than the context of \(c.contextSize) tokens."
        case .rateLimited(let c):
            if let date = c.resetDate { "The model is rate limited until \(date)." } else { "The model is rate limited." }
        case .guardrailViolation: "A safety guardrail blocked the request or the response."
        case .refusal(let c): "The model refused to respond: \(c.explanationText)"
        case .unsupportedCapability(let c): "The model doesn't support \(c.capability)."
        case .unsupportedTranscriptContent(let c):
            "The model can't read \(c.unsupportedContent.count) entr\(c.unsupportedContent.count == 1 ? "y" : "ies") of the transcript."
        case .unsupportedGenerationGuide(let c):
            "The schema\(c.schemaName.map { " '\($0)'" } ?? "") uses a generation guide the model can't enforce."
        case .unsupportedLanguageOrLocale(let c):
            "The model doesn't support the language '\(c.languageCode.identifier)'."
        case .timeout: "The model took too long to respond."
        }
    }
}
