import Foundation
internal import PlinthJSON

/// Feedback about a model's response, for people who improve the model.
///
/// On Apple platforms, feedback attachments go to Apple through Feedback Assistant. Plinth
/// returns the same information as JSON data that you can store or send to whoever maintains
/// your model.
public struct LanguageModelFeedback {
    /// A sentiment regarding the model's response.
    public enum Sentiment: Sendable, CaseIterable, Equatable, Hashable {
        /// A positive sentiment.
        case positive
        /// A negative sentiment.
        case negative
        /// A neutral sentiment.
        case neutral
    }

    /// An issue with the model's response.
    public struct Issue: Sendable {
        let category: Category
        let explanation: String?

        /// Creates a new issue.
        ///
        /// - Parameters:
        ///   - category: A category for this issue.
        ///   - explanation: An optional explanation of this issue.
        public init(category: LanguageModelFeedback.Issue.Category, explanation: String? = nil) {
            self.category = category
            self.explanation = explanation
        }

        /// Categories for model response issues.
        public enum Category: Sendable, CaseIterable, Equatable, Hashable {
            /// The response was not helpful.
            case unhelpful
            /// The response was too verbose.
            case tooVerbose
            /// The model did not follow instructions correctly.
            case didNotFollowInstructions
            /// The response contained incorrect information.
            case incorrect
            /// The response contained stereotypes or biases.
            case stereotypeOrBias
            /// The response contained suggestive or sexual content.
            case suggestiveOrSexual
            /// The response contained vulgar or offensive content.
            case vulgarOrOffensive
            /// The model incorrectly triggered safety guardrails.
            case triggeredGuardrailUnexpectedly
        }
    }
}

extension LanguageModelSession {
    /// Logs and serializes data that includes session information that you attach when
    /// reporting feedback.
    ///
    /// - Parameters:
    ///   - sentiment: An optional sentiment about the model's output (positive, negative, or
    ///     neutral).
    ///   - issues: An array of specific issues with the model's output.
    ///   - desiredOutput: An optional transcript entry that represents the output you expect.
    /// - Returns: The session's transcript and the feedback, as JSON data.
    @discardableResult
    public func logFeedbackAttachment(sentiment: LanguageModelFeedback.Sentiment?, issues: [LanguageModelFeedback.Issue] = [],
                                      desiredOutput: Transcript.Entry? = nil) -> Data {
        feedback(sentiment: sentiment, issues: issues, desired: desiredOutput.map { ("desiredOutput", (try? TranscriptCoding.json($0)) ?? .null) })
    }

    /// Logs feedback with the response text you expected.
    @discardableResult
    public func logFeedbackAttachment(sentiment: LanguageModelFeedback.Sentiment?, issues: [LanguageModelFeedback.Issue] = [],
                                      desiredResponseText: String?) -> Data {
        feedback(sentiment: sentiment, issues: issues, desired: desiredResponseText.map { ("desiredResponseText", .string($0)) })
    }

    /// Logs feedback with the response content you expected.
    @discardableResult
    public func logFeedbackAttachment(sentiment: LanguageModelFeedback.Sentiment?, issues: [LanguageModelFeedback.Issue] = [],
                                      desiredResponseContent: (any ConvertibleToGeneratedContent)?) -> Data {
        feedback(sentiment: sentiment, issues: issues,
                 desired: desiredResponseContent.map { ("desiredResponseContent", JSONValue($0.generatedContent)) })
    }

    private func feedback(sentiment: LanguageModelFeedback.Sentiment?, issues: [LanguageModelFeedback.Issue],
                          desired: (String, JSONValue)?) -> Data {
        var pairs: [(String, JSONValue)] = []
        pairs.append(("sentiment", sentiment.map { .string("\($0)") } ?? .null))
        pairs.append(("issues", .array(issues.map { issue in
            .object([("category", .string("\(issue.category)")), ("explanation", issue.explanation.map { .string($0) } ?? .null)])
        })))
        if let desired { pairs.append(desired) }
        pairs.append(("transcript", (try? TranscriptCoding.json(transcript)) ?? .null))
        return Data(JSONValue.object(pairs).compactText.utf8)
    }
}
