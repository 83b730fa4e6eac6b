import Foundation

/// A prompt from a person to the model.
///
/// Prompts can contain content written by you, an outside source, or input directly from
/// people using your app. You can initialize a `Prompt` from a string literal, or build one
/// from several parts with the ``PromptBuilder``:
///
/// ```swift
/// let prompt = Prompt {
///     "Generate a bedtime story about a fox."
///     if kidFriendly {
///         "Keep it suitable for a five-year-old."
///     }
/// }
/// ```
public struct Prompt: Sendable {
    var segments: [Transcript.Segment]

    init(segments: [Transcript.Segment]) {
        self.segments = segments
    }

    init(text: String) {
        segments = [.text(Transcript.TextSegment(content: text))]
    }

    /// Joins prompts: consecutive text becomes one text segment, its parts on separate lines.
    init(joining parts: [Prompt]) {
        segments = Transcript.Segment.joined(parts.map(\.segments))
    }

    /// Creates a prompt from a value that represents a prompt.
    public init(_ content: some PromptRepresentable) {
        self = content.promptRepresentation
    }

    /// Creates a prompt from the components you build.
    public init(@PromptBuilder _ content: () throws -> Prompt) rethrows {
        self = try content()
    }

    /// The prompt's text, parts on separate lines; structured content as JSON.
    var text: String {
        segments.map(\.plainText).joined(separator: "\n")
    }
}

extension Prompt: PromptRepresentable {
    /// The prompt itself.
    public var promptRepresentation: Prompt { return self }
}

/// A type that can be represented as a prompt.
public protocol PromptRepresentable {
    /// An instance that represents a prompt.
    @PromptBuilder var promptRepresentation: Prompt { get }
}

/// A type that represents a prompt builder.
@resultBuilder
public struct PromptBuilder {
    /// Creates a builder with a block.
    public static func buildBlock<each P>(_ components: repeat each P) -> Prompt where repeat each P: PromptRepresentable {
        var parts: [Prompt] = []
        for component in repeat each components {
            parts.append(component.promptRepresentation)
        }
        return Prompt(joining: parts)
    }

    /// Creates a builder with an array of prompts.
    public static func buildArray(_ prompts: [some PromptRepresentable]) -> Prompt {
        Prompt(joining: prompts.map(\.promptRepresentation))
    }

    /// Creates a builder with the first component.
    public static func buildEither(first component: some PromptRepresentable) -> Prompt {
        component.promptRepresentation
    }

    /// Creates a builder with the second component.
    public static func buildEither(second component: some PromptRepresentable) -> Prompt {
        component.promptRepresentation
    }

    /// Creates a builder with an optional component.
    public static func buildOptional(_ component: Prompt?) -> Prompt {
        component ?? Prompt(segments: [])
    }

    /// Creates a builder with a limited availability prompt.
    public static func buildLimitedAvailability(_ prompt: some PromptRepresentable) -> Prompt {
        prompt.promptRepresentation
    }

    /// Creates a builder with a prompt expression.
    public static func buildExpression<P>(_ expression: P) -> P where P: PromptRepresentable {
        expression
    }

    /// Creates a builder with a prompt expression.
    public static func buildExpression(_ expression: Prompt) -> Prompt {
        expression
    }
}
