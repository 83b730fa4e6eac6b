import Foundation
internal import PlinthJSON

/// A type that can be initialized from generated content.
public protocol ConvertibleFromGeneratedContent: SendableMetatype {
    /// Creates an instance with the content.
    ///
    /// - Parameter content: The generated content to read.
    /// - Throws: An error when the content doesn't match the shape of this type.
    init(_ content: GeneratedContent) throws
}

/// A type that can be converted to generated content.
public protocol ConvertibleToGeneratedContent: InstructionsRepresentable, PromptRepresentable {
    /// This instance represented as generated content.
    ///
    /// Conformance to this protocol is provided by the `@Generable` macro. A manual
    /// implementation may be used to map values onto properties using different names.
    var generatedContent: GeneratedContent { get }
}

extension ConvertibleToGeneratedContent {
    /// An instance that represents the instructions: the content as a structured segment.
    public var instructionsRepresentation: Instructions {
        return Instructions(segments: [.structure(.init(source: String(describing: Self.self), content: generatedContent))])
    }

    /// An instance that represents a prompt: the content as a structured segment.
    public var promptRepresentation: Prompt {
        return Prompt(segments: [.structure(.init(source: String(describing: Self.self), content: generatedContent))])
    }
}

/// A type that the model uses when responding to prompts.
///
/// Annotate your own types with the `@Generable` macro to allow the model to respond to prompts
/// by generating an instance of your type. Use the `@Guide` macro to provide natural language
/// descriptions of your properties, and programmatic requirements on the values generated.
///
/// ```swift
/// @Generable
/// struct SearchSuggestions {
///     @Guide(description: "A list of suggested search terms", .count(4))
///     var searchTerms: [String]
/// }
/// ```
///
/// `Generable` types are composed of properties whose types are also generable: `String`,
/// `Int`, `Float`, `Double`, `Decimal`, `Bool`, arrays and optionals of generable types,
/// `GeneratedContent`, and other types annotated with `@Generable`.
public protocol Generable: ConvertibleFromGeneratedContent, ConvertibleToGeneratedContent {
    /// A representation of partially generated content.
    ///
    /// While a response streams, each snapshot holds a value of this type: the macro makes
    /// every property optional, so that the properties generated so far can be read.
    associatedtype PartiallyGenerated: ConvertibleFromGeneratedContent = Self

    /// An instance of the generation schema.
    static var generationSchema: GenerationSchema { get }
}

extension Generable {
    /// The partially generated type of this struct.
    ///
    /// For a complete value, the partial value holds every property.
    public func asPartiallyGenerated() -> Self.PartiallyGenerated {
        if let same = self as? Self.PartiallyGenerated { return same }
        // Every partial type reads the complete content of its full type.
        return try! Self.PartiallyGenerated(generatedContent)
    }
}

extension Generable {
    /// An instance that represents a prompt: the value as a structured segment.
    public var promptRepresentation: Prompt {
        return Prompt(segments: [.structure(.init(source: String(describing: Self.self), content: generatedContent))])
    }

    /// An instance that represents the instructions: the value as a structured segment.
    public var instructionsRepresentation: Instructions {
        return Instructions(segments: [.structure(.init(source: String(describing: Self.self), content: generatedContent))])
    }
}

extension Optional where Wrapped: Generable {
    /// The partially generated type of the wrapped type.
    public typealias PartiallyGenerated = Wrapped.PartiallyGenerated
}

extension Optional: ConvertibleToGeneratedContent, PromptRepresentable, InstructionsRepresentable
where Wrapped: ConvertibleToGeneratedContent {
    /// The wrapped value's content, or `null`.
    public var generatedContent: GeneratedContent {
        switch self {
        case .some(let value): value.generatedContent
        case .none: GeneratedContent(kind: .null)
        }
    }
}

// MARK: - Standard types

extension Bool: Generable {
    /// A schema for Boolean values.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .boolean) }

    /// Reads a Boolean from generated content.
    public init(_ content: GeneratedContent) throws {
        guard case .bool(let value) = content.kind else {
            throw GeneratedContent.decodingFailure("Expected a Boolean, found \(content.kindName).")
        }
        self = value
    }

    /// This value as generated content.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .bool(self)) }
    /// This value as the text of a prompt.
    public var promptRepresentation: Prompt { return Prompt(text: String(self)) }
    /// This value as the text of instructions.
    public var instructionsRepresentation: Instructions { return Instructions(text: String(self)) }
}

extension String: Generable {
    /// A schema for strings.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .string(.init())) }

    /// Reads a string from generated content.
    public init(_ content: GeneratedContent) throws {
        guard case .string(let value) = content.kind else {
            throw GeneratedContent.decodingFailure("Expected a string, found \(content.kindName).")
        }
        self = value
    }

    /// This value as generated content.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .string(self)) }
}

extension String: InstructionsRepresentable {
    /// This string as the text of instructions.
    public var instructionsRepresentation: Instructions { return Instructions(text: self) }
}

extension String: PromptRepresentable {
    /// This string as the text of a prompt.
    public var promptRepresentation: Prompt { return Prompt(text: self) }
}

extension Int: Generable {
    /// A schema for integers.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .integer(.init())) }

    /// Reads an integer from generated content.
    public init(_ content: GeneratedContent) throws {
        guard case .number(let value) = content.kind else {
            throw GeneratedContent.decodingFailure("Expected an integer, found \(content.kindName).")
        }
        // An integer past 2^53 is exact in its text, not in its double.
        if let text = content.exactText, let number = DecimalNumber(text) {
            guard number.isInteger else { throw GeneratedContent.decodingFailure("Expected an integer, found \(text).") }
            guard let exact = Int(text) ?? number.intValue else { throw GeneratedContent.decodingFailure("The integer \(text) is out of Int's range.") }
            self = exact
            return
        }
        guard let exact = Int(exactly: value) else {
            throw GeneratedContent.decodingFailure("Expected an integer, found \(content.exactText ?? GeneratedContent.numberText(value)).")
        }
        self = exact
    }

    /// This value as generated content.
    public var generatedContent: GeneratedContent { GeneratedContent.number(text: String(self)) }
    /// This value as the text of a prompt.
    public var promptRepresentation: Prompt { return Prompt(text: String(self)) }
    /// This value as the text of instructions.
    public var instructionsRepresentation: Instructions { return Instructions(text: String(self)) }
}

extension Float: Generable {
    /// A schema for floating-point numbers.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .number(.init())) }

    /// Reads a number from generated content.
    public init(_ content: GeneratedContent) throws {
        guard case .number(let value) = content.kind else {
            throw GeneratedContent.decodingFailure("Expected a number, found \(content.kindName).")
        }
        self = Float(value)
    }

    /// This value as generated content.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .number(Double(self))) }
    /// This value as the text of a prompt.
    public var promptRepresentation: Prompt { return Prompt(text: String(self)) }
    /// This value as the text of instructions.
    public var instructionsRepresentation: Instructions { return Instructions(text: String(self)) }
}

extension Double: Generable {
    /// A schema for floating-point numbers.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .number(.init())) }

    /// Reads a number from generated content.
    public init(_ content: GeneratedContent) throws {
        guard case .number(let value) = content.kind else {
            throw GeneratedContent.decodingFailure("Expected a number, found \(content.kindName).")
        }
        self = value
    }

    /// This value as generated content.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .number(self)) }
    /// This value as the text of a prompt.
    public var promptRepresentation: Prompt { return Prompt(text: String(self)) }
    /// This value as the text of instructions.
    public var instructionsRepresentation: Instructions { return Instructions(text: String(self)) }
}

extension Decimal: Generable {
    /// A schema for decimal numbers.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .number(.init())) }

    /// Reads a number from generated content.
    public init(_ content: GeneratedContent) throws {
        guard case .number(let value) = content.kind else {
            throw GeneratedContent.decodingFailure("Expected a number, found \(content.kindName).")
        }
        self = Decimal(string: content.exactText ?? GeneratedContent.numberText(value)) ?? Decimal(value)
    }

    /// This value as generated content.
    public var generatedContent: GeneratedContent { GeneratedContent.number(text: "\(self)") }
    /// This value as the text of a prompt.
    public var promptRepresentation: Prompt { return Prompt(text: "\(self)") }
    /// This value as the text of instructions.
    public var instructionsRepresentation: Instructions { return Instructions(text: "\(self)") }
}

extension Array: Generable where Element: Generable {
    /// An array of the partially generated elements.
    public typealias PartiallyGenerated = [Element.PartiallyGenerated]

    /// A schema for arrays of the element type.
    public static var generationSchema: GenerationSchema {
        GenerationSchema(root: .array(.init(items: .generable(Element.self, []))))
    }
}

extension Array: ConvertibleToGeneratedContent where Element: ConvertibleToGeneratedContent {
    /// The elements as generated content.
    public var generatedContent: GeneratedContent {
        GeneratedContent(kind: .array(map(\.generatedContent)))
    }
}

extension Array: ConvertibleFromGeneratedContent where Element: ConvertibleFromGeneratedContent {
    /// Reads an array from generated content.
    ///
    /// When the content is partial, an element that can't be read yet (the last one, still
    /// being generated) is left out.
    public init(_ content: GeneratedContent) throws {
        guard case .array(let elements) = content.kind else {
            throw GeneratedContent.decodingFailure("Expected an array, found \(content.kindName).")
        }
        if content.isComplete {
            self = try elements.map { try Element($0) }
        } else {
            self = elements.compactMap { try? Element($0) }
        }
    }
}

extension Array: InstructionsRepresentable where Element: InstructionsRepresentable {
    /// The elements' instructions, one after another.
    public var instructionsRepresentation: Instructions {
        return Instructions(joining: map(\.instructionsRepresentation))
    }
}

extension Array: PromptRepresentable where Element: PromptRepresentable {
    /// The elements' prompts, one after another.
    public var promptRepresentation: Prompt {
        return Prompt(joining: map(\.promptRepresentation))
    }
}

extension Never: Generable {
    /// A schema that no value matches.
    public static var generationSchema: GenerationSchema {
        GenerationSchema(root: .object(.init(name: "Never", properties: [])))
    }

    /// Always throws: no content represents `Never`.
    public init(_ content: GeneratedContent) throws {
        throw GeneratedContent.decodingFailure("No value can be read as Never.")
    }

    /// Unreachable.
    public var generatedContent: GeneratedContent { switch self {} }
}
