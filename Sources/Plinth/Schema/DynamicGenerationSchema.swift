import Foundation

/// The dynamic counterpart to the generation schema type that you use to construct schemas at
/// runtime.
///
/// An individual schema may reference other schemas by name, and references are resolved when
/// converting a set of dynamic schemas into a ``GenerationSchema``.
///
/// ```swift
/// let riddle = DynamicGenerationSchema(
///     name: "Riddle",
///     properties: [
///         .init(name: "question", schema: .init(type: String.self)),
///         .init(name: "answers", schema: .init(arrayOf: .init(referenceTo: "Answer"))),
///     ])
/// let answer = DynamicGenerationSchema(
///     name: "Answer",
///     properties: [
///         .init(name: "text", schema: .init(type: String.self)),
///         .init(name: "isCorrect", schema: .init(type: Bool.self)),
///     ])
/// let schema = try GenerationSchema(root: riddle, dependencies: [answer])
/// ```
public struct DynamicGenerationSchema: Sendable {
    var node: SchemaNode

    init(node: SchemaNode) {
        self.node = node
    }
}

extension DynamicGenerationSchema {
    /// A schema for the `null` value.
    public static var null: DynamicGenerationSchema { .init(node: .null) }

    /// Creates an object schema.
    ///
    /// - Parameters:
    ///   - name: A name this dynamic schema can be referenced by.
    ///   - description: A natural language description of this schema.
    ///   - properties: The properties to associated with this schema.
    public init(name: String, description: String? = nil, properties: [DynamicGenerationSchema.Property]) {
        node = .object(ObjectNode(name: name, description: description, properties: properties.map(\.node)))
    }

    /// Creates an object schema, choosing whether `nil` values are written as `null`.
    public init(name: String, description: String? = nil,
                representNilExplicitlyInGeneratedContent explicitNil: Bool, properties: [DynamicGenerationSchema.Property]) {
        node = .object(ObjectNode(name: name, description: description, properties: properties.map(\.node),
                                  explicitNil: explicitNil))
    }

    /// Creates an any-of schema.
    ///
    /// - Parameters:
    ///   - name: A name this schema can be referenced by.
    ///   - description: A natural language description of this dynamic schema.
    ///   - choices: An array of schemas this one will be a union of.
    public init(name: String, description: String? = nil, anyOf choices: [DynamicGenerationSchema]) {
        node = .anyOf(AnyOfNode(name: name, description: description, choices: choices.map(\.node)))
    }

    /// Creates an enum schema.
    ///
    /// - Parameters:
    ///   - name: A name this schema can be referenced by.
    ///   - description: A natural language description of this dynamic schema.
    ///   - choices: An array of string values this schema allows.
    public init(name: String, description: String? = nil, anyOf choices: [String]) {
        node = .string(StringNode(name: name, description: description, choices: choices))
    }

    /// Creates an array schema.
    ///
    /// - Parameters:
    ///   - itemSchema: The schema of the array's elements.
    ///   - minimumElements: The minimum number of elements, if any.
    ///   - maximumElements: The maximum number of elements, if any.
    public init(arrayOf itemSchema: DynamicGenerationSchema, minimumElements: Int? = nil, maximumElements: Int? = nil) {
        node = .array(ArrayNode(items: itemSchema.node, minItems: minimumElements, maxItems: maximumElements))
    }

    /// Creates a schema from a generable type and guides.
    ///
    /// - Parameters:
    ///   - type: A `Generable` type.
    ///   - guides: Generation guides to apply to this `DynamicGenerationSchema`.
    public init<Value>(type: Value.Type, guides: [GenerationGuide<Value>] = []) where Value: Generable {
        node = .generable(Value.self, guides.flatMap(\.kinds))
    }

    /// Creates a reference to a schema.
    ///
    /// The name of the referenced schema must be part of the dependencies you pass to
    /// ``GenerationSchema/init(root:dependencies:)``.
    ///
    /// - Parameter name: The name of the dynamic schema this references.
    public init(referenceTo name: String) {
        node = .reference(name)
    }

    /// A property that belongs to a dynamic generation schema.
    ///
    /// Fields are named members of object types. Fields are strongly typed and have optional
    /// descriptions.
    public struct Property: Sendable {
        var node: PropertyNode
    }
}

extension DynamicGenerationSchema.Property {
    /// Creates a property referencing a dynamic schema.
    ///
    /// - Parameters:
    ///   - name: A name for this property.
    ///   - description: An optional natural language description of this property's contents.
    ///   - schema: A schema representing the type this property contains.
    ///   - isOptional: Determines if this property is required or not.
    public init(name: String, description: String? = nil, schema: DynamicGenerationSchema, isOptional: Bool = false) {
        node = PropertyNode(name: name, description: description, node: schema.node, isOptional: isOptional)
    }
}
