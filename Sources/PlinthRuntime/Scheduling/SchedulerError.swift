import Foundation

/// Why the scheduler refused or ended a request.
public enum SchedulerError: Error, LocalizedError, Equatable, Sendable {
    /// The prompt has no tokens.
    case emptyPrompt
    /// The prompt leaves no room to generate in the context window.
    case promptTooLong(tokens: Int, contextLength: Int)
    /// More requests are waiting than the queue holds.
    case queueFull(capacity: Int)
    /// The scheduler was shut down before the request finished.
    case shutDown
    /// A step of the model failed; the request's cached tokens were dropped.
    case stepFailed(String)

    public var errorDescription: String? {
        switch self {
        case .emptyPrompt: "the prompt holds no tokens"
        case .promptTooLong(let n, let c):
            "the prompt is \(n) tokens, but the context holds \(c) tokens and at least one must be left to generate"
        case .queueFull(let c): "\(c) requests are already waiting; try again when some have finished"
        case .shutDown: "the model's scheduler was shut down"
        case .stepFailed(let why): "a model step failed: \(why)"
        }
    }
}
