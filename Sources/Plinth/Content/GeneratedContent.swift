import Foundation

/// A type that represents structured, generated content.
///
/// Generated content may contain a single value, an array, or key-value pairs with unique keys.
/// It's the currency between the model and your types: the model produces `GeneratedContent`,
/// and your ``Generable`` types convert from and to it.
///
/// Content can be partial. While a response streams, the framework parses the incomplete JSON
/// text the model has produced so far into `GeneratedContent`, and ``isComplete`` is `false`
/// until the value is closed.
public struct GeneratedContent: Sendable, Equatable, Generable {
    /// A unique identifier of this content, stable across the snapshots of a streamed value.
    public var id: GenerationID?

    var storage: Kind
    var complete: Bool
    /// A number's JSON text where its `Double` would be written as another value (an integer
    /// past 2^53, more digits than a double holds, a magnitude past its range): the value the
    /// decoder checked against the schema is the text, so the text is what is written.
    var exactText: String?

    init(storage: Kind, id: GenerationID? = nil, complete: Bool, exactText: String? = nil) {
        self.storage = storage
        self.id = id
        self.complete = complete
        self.exactText = exactText
    }

    public static func == (a: GeneratedContent, b: GeneratedContent) -> Bool {
        a.storage == b.storage && a.exactText == b.exactText
    }
}

extension GeneratedContent {
    /// A representation of the different types of content that can be stored in
    /// `GeneratedContent`.
    ///
    /// `Kind` represents the various types of JSON-compatible data that can be held within a
    /// ``GeneratedContent`` instance, including primitive types, arrays, and structured objects.
    public enum Kind: Equatable, Sendable {
        /// Represents a null value.
        case null
        /// Represents a Boolean value.
        case bool(Bool)
        /// Represents a numeric value.
        case number(Double)
        /// Represents a string value.
        case string(String)
        /// Represents an array of `GeneratedContent` elements.
        case array([GeneratedContent])
        /// Represents a structured object with key-value pairs.
        ///
        /// - Parameters:
        ///   - properties: A dictionary mapping string keys to `GeneratedContent` values.
        ///   - orderedKeys: An array of keys that specifies the order of the properties.
        case structure(properties: [String: GeneratedContent], orderedKeys: [String])
    }

    /// Creates a new `GeneratedContent` instance with the specified kind and generation
    /// identifier.
    ///
    /// - Parameters:
    ///   - kind: The kind of content to create.
    ///   - id: An optional `GenerationID` to associate with this content.
    public init(kind: Kind, id: GenerationID? = nil) {
        self.init(storage: kind, id: id, complete: true)
    }

    /// The kind representation of this generated content.
    public var kind: Kind { storage }

    /// A Boolean that indicates whether the generated content is completed.
    ///
    /// Content parsed from the beginning of a JSON text that the model is still writing is not
    /// complete; content you create yourself always is.
    public var isComplete: Bool {
        guard complete else { return false }
        switch storage {
        case .array(let elements): return elements.allSatisfy(\.isComplete)
        case .structure(let properties, _): return properties.values.allSatisfy(\.isComplete)
        default: return true
        }
    }
}

extension GeneratedContent {
    /// A representation of this type's schema: any JSON value.
    public static var generationSchema: GenerationSchema {
        GenerationSchema(root: .anyValue)
    }

    /// Creates generated content from another value, which is the identity for this type.
    public init(_ content: GeneratedContent) throws {
        self = content
    }

    /// This generated content.
    public var generatedContent: GeneratedContent { self }

    /// Creates an object with the properties you specify.
    ///
    /// The order of the properties is preserved.
    ///
    /// ```swift
    /// let content = GeneratedContent(properties: [
    ///     "name": "Sam",
    ///     "age": 31,
    /// ])
    /// ```
    public init(properties: KeyValuePairs<String, any ConvertibleToGeneratedContent>, id: GenerationID? = nil) {
        var dict: [String: GeneratedContent] = [:]
        var keys: [String] = []
        for (key, value) in properties {
            if dict[key] == nil { keys.append(key) }
            dict[key] = value.generatedContent
        }
        self.init(kind: .structure(properties: dict, orderedKeys: keys), id: id)
    }

    /// Creates an object with properties, using a closure to resolve duplicate keys.
    ///
    /// - Parameters:
    ///   - properties: A sequence of key-value pairs.
    ///   - id: An optional identifier for the content.
    ///   - combine: A closure that receives the existing and the new value for a duplicate key
    ///     and returns the value to keep.
    public init<S>(
        properties: S, id: GenerationID? = nil,
        uniquingKeysWith combine: (GeneratedContent, GeneratedContent) throws -> some ConvertibleToGeneratedContent
    ) rethrows where S: Sequence, S.Element == (String, any ConvertibleToGeneratedContent) {
        var dict: [String: GeneratedContent] = [:]
        var keys: [String] = []
        for (key, value) in properties {
            let content = value.generatedContent
            if let existing = dict[key] {
                dict[key] = try combine(existing, content).generatedContent
            } else {
                keys.append(key)
                dict[key] = content
            }
        }
        self.init(kind: .structure(properties: dict, orderedKeys: keys), id: id)
    }

    /// Creates an array of the elements you specify.
    public init<S>(elements: S, id: GenerationID? = nil)
    where S: Sequence, S.Element == any ConvertibleToGeneratedContent {
        self.init(kind: .array(elements.map(\.generatedContent)), id: id)
    }

    /// Creates content that represents the value you provide.
    public init(_ value: some ConvertibleToGeneratedContent) {
        self = value.generatedContent
    }

    /// Creates content that represents the value you provide, with an identifier.
    public init(_ value: some ConvertibleToGeneratedContent, id: GenerationID) {
        self = value.generatedContent
        self.id = id
    }

    /// Creates content by parsing a JSON string.
    ///
    /// The string may be the beginning of a JSON text that isn't finished yet, as the model
    /// produces it while it streams: the parser keeps every value that has started, includes
    /// the characters of a string or number written so far, and marks the result as not
    /// complete (``isComplete`` is `false`).
    ///
    /// - Throws: ``ParsingError`` if the text is not JSON, or not the beginning of one.
    public init(json: String) throws {
        self = try GeneratedContent.parse(json)
    }

    /// A JSON representation of this content, with the properties of objects in their order.
    public var jsonString: String {
        jsonText(prefix: false)
    }

    /// The JSON text of the content as far as it has been generated (a Plinth extension).
    ///
    /// For complete content this is ``jsonString``. For a snapshot of content that is still
    /// streaming it is text that every later snapshot of the stream extends: open strings,
    /// arrays and objects stay open, and a number that may still grow is left out. Printing
    /// the new end of each snapshot's prefix streams exactly the final JSON.
    public var jsonPrefix: String {
        jsonText(prefix: true)
    }

    /// Reads this content as a value of the type you specify.
    public func value<Value>(_ type: Value.Type = Value.self) throws -> Value
    where Value: ConvertibleFromGeneratedContent {
        try Value(self)
    }

    /// Reads the property with the name you specify as a value of the given type.
    ///
    /// - Throws: A `decodingFailure` when this content isn't an object, the property is
    ///   missing, or its value can't be converted.
    public func value<Value>(_ type: Value.Type = Value.self, forProperty property: String) throws -> Value
    where Value: ConvertibleFromGeneratedContent {
        guard case .structure(let properties, _) = storage else {
            throw GeneratedContent.decodingFailure("Expected an object with a property '\(property)', found \(kindName).")
        }
        guard let value = properties[property] else {
            throw GeneratedContent.decodingFailure("Missing property '\(property)'.")
        }
        do {
            return try Value(value)
        } catch let error as LanguageModelSession.GenerationError {
            throw error.prefixed(with: "Property '\(property)': ")
        }
    }

    /// Reads the property with the name you specify as an optional value.
    ///
    /// A property that is missing or `null` reads as `nil`.
    public func value<Value>(_ type: Value?.Type = Value?.self, forProperty property: String) throws -> Value?
    where Value: ConvertibleFromGeneratedContent {
        guard case .structure(let properties, _) = storage else {
            throw GeneratedContent.decodingFailure("Expected an object with a property '\(property)', found \(kindName).")
        }
        guard let value = properties[property] else { return nil }
        if case .null = value.storage { return nil }
        do {
            return try Value(value)
        } catch let error as LanguageModelSession.GenerationError {
            throw error.prefixed(with: "Property '\(property)': ")
        }
    }
}

extension GeneratedContent: CustomDebugStringConvertible {
    /// A JSON description of the content, marked when it is not complete.
    public var debugDescription: String {
        isComplete ? jsonString : "\(jsonString) (incomplete)"
    }
}

extension GeneratedContent {
    /// An error that occurs when the framework can't parse JSON into generated content.
    public struct ParsingError: LocalizedError, Sendable {
        /// The text that could not be parsed.
        public var rawContent: String
        /// The error that caused this one, if any.
        public var underlyingError: (any Error)?
        /// A description of the problem for developers.
        public var debugDescription: String

        /// Creates a parsing error.
        public init(rawContent: String, underlyingError: (any Error)? = nil, debugDescription: String) {
            self.rawContent = rawContent
            self.underlyingError = underlyingError
            self.debugDescription = debugDescription
        }

        /// A localized message describing what error occurred.
        public var errorDescription: String? {
            "The generated content is not valid JSON: \(debugDescription)"
        }
    }
}

extension GeneratedContent.ParsingError: CustomDebugStringConvertible {}

extension GeneratedContent {
    var kindName: String {
        switch storage {
        case .null: "null"
        case .bool: "a Boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .structure: "an object"
        }
    }

    static func decodingFailure(_ message: String) -> LanguageModelSession.GenerationError {
        .decodingFailure(.init(debugDescription: message))
    }

    /// The properties of an object in order, or `nil` for other kinds.
    var orderedProperties: [(String, GeneratedContent)]? {
        guard case .structure(let properties, let keys) = storage else { return nil }
        return keys.compactMap { key in properties[key].map { (key, $0) } }
    }
}
