import Foundation

/// Details you provide that define the model's intended behavior on prompts.
///
/// Instructions are typically provided by you to define the role and behavior of the model.
/// The model follows instructions over the content of prompts, so put what you trust in
/// instructions and what people type in prompts.
///
/// ```swift
/// let session = LanguageModelSession {
///     "You are a helpful assistant that writes haiku."
///     "Respond in three lines."
/// }
/// ```
public struct Instructions: Sendable {
    var segments: [Transcript.Segment]

    init(segments: [Transcript.Segment]) {
        self.segments = segments
    }

    init(text: String) {
        segments = [.text(Transcript.TextSegment(content: text))]
    }

    init(joining parts: [Instructions]) {
        segments = Transcript.Segment.joined(parts.map(\.segments))
    }

    /// Creates instructions from a value that represents instructions.
    public init(_ content: some InstructionsRepresentable) {
        self = content.instructionsRepresentation
    }

    /// Creates instructions from the components you build.
    public init(@InstructionsBuilder _ content: () throws -> Instructions) rethrows {
        self = try content()
    }
}

extension Instructions: InstructionsRepresentable {
    /// The instructions themselves.
    public var instructionsRepresentation: Instructions { return self }
}

/// A type that can be represented as instructions.
public protocol InstructionsRepresentable {
    /// An instance that represents the instructions.
    @InstructionsBuilder var instructionsRepresentation: Instructions { get }
}

/// A type that represents an instructions builder.
@resultBuilder
public struct InstructionsBuilder {
    /// Creates a builder with a block.
    public static func buildBlock<each I>(_ components: repeat each I) -> Instructions
    where repeat each I: InstructionsRepresentable {
        var parts: [Instructions] = []
        for component in repeat each components {
            parts.append(component.instructionsRepresentation)
        }
        return Instructions(joining: parts)
    }

    /// Creates a builder with an array of instructions.
    public static func buildArray(_ instructions: [some InstructionsRepresentable]) -> Instructions {
        Instructions(joining: instructions.map(\.instructionsRepresentation))
    }

    /// Creates a builder with the first component.
    public static func buildEither(first component: some InstructionsRepresentable) -> Instructions {
        component.instructionsRepresentation
    }

    /// Creates a builder with the second component.
    public static func buildEither(second component: some InstructionsRepresentable) -> Instructions {
        component.instructionsRepresentation
    }

    /// Creates a builder with optional instructions.
    public static func buildOptional(_ instructions: Instructions?) -> Instructions {
        instructions ?? Instructions(segments: [])
    }

    /// Creates a builder with limited availability instructions.
    public static func buildLimitedAvailability(_ instructions: some InstructionsRepresentable) -> Instructions {
        instructions.instructionsRepresentation
    }

    /// Creates a builder with an instructions expression.
    public static func buildExpression<I>(_ expression: I) -> I where I: InstructionsRepresentable {
        expression
    }

    /// Creates a builder with an instructions expression.
    public static func buildExpression(_ expression: Instructions) -> Instructions {
        expression
    }
}
