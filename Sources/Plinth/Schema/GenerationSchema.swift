import Foundation
package import PlinthJSON

/// A type that describes the properties of an object and any guides on their values.
///
/// Generation schemas guide the output of a model to deterministically ensure the output is in
/// the desired format. The `@Generable` macro creates the schema of your types; you can also
/// build one at run time from a ``DynamicGenerationSchema``.
///
/// A schema encodes to standard JSON Schema: objects with `properties`, `required`,
/// `additionalProperties: false` and the property order in `x-order`; choices as `anyOf` or
/// `enum`; named types under `$defs`, referred to with `$ref`; guides as `minimum`, `maximum`,
/// `minItems`, `maxItems` and `pattern`. That JSON is exactly what Plinth's constrained
/// decoder compiles.
public struct GenerationSchema: Sendable {
    var root: SchemaNode
    var defs: [(String, SchemaNode)]
    /// The JSON Schema this schema was read from by ``init(jsonSchema:)``, which the decoder
    /// enforces as written (keywords the node tree doesn't model included).
    var source: JSONValue?

    init(root: SchemaNode, defs: [(String, SchemaNode)] = []) {
        self.root = root
        self.defs = defs
    }

    /// The name of the schema's root type.
    public var name: String {
        var node = root
        while case .generable(let type, _) = node { node = type.generationSchema.root }
        if let name = node.typeName { return name }
        switch node {
        case .string: return "String"
        case .integer: return "Int"
        case .number: return "Double"
        case .boolean: return "Bool"
        case .array: return "Array"
        case .null: return "Null"
        case .reference(let name): return name
        default: return "GeneratedContent"
        }
    }

    /// A property that belongs to a generation schema.
    ///
    /// Fields are named members of object types. Fields are strongly typed and have optional
    /// descriptions and guides.
    public struct Property: Sendable {
        var node: PropertyNode
    }
}

extension GenerationSchema.Property {
    /// Create a property that contains a generable type.
    ///
    /// - Parameters:
    ///   - name: The property's name.
    ///   - description: A natural language description of what content should be generated
    ///     for this property.
    ///   - type: The type this property represents.
    ///   - guides: A list of guides to apply to this property.
    public init<Value>(name: String, description: String? = nil, type: Value.Type,
                       guides: [GenerationGuide<Value>] = []) where Value: Generable {
        node = PropertyNode(name: name, description: description,
                            node: .generable(Value.self, guides.flatMap(\.kinds)), isOptional: false)
    }

    /// Create an optional property that contains a generable type.
    public init<Value>(name: String, description: String? = nil, type: Value?.Type,
                       guides: [GenerationGuide<Value>] = []) where Value: Generable {
        node = PropertyNode(name: name, description: description,
                            node: .generable(Value.self, guides.flatMap(\.kinds)), isOptional: true)
    }

    /// Create a property that contains a string type whose values follow regular expressions.
    public init<RegexOutput>(name: String, description: String? = nil, type: String.Type,
                             guides: [Regex<RegexOutput>] = []) {
        node = PropertyNode(name: name, description: description,
                            node: .generable(String.self, guides.map { .pattern($0._literalPattern) }),
                            isOptional: false)
    }

    /// Create an optional property that contains a string type whose values follow regular
    /// expressions.
    public init<RegexOutput>(name: String, description: String? = nil, type: String?.Type,
                             guides: [Regex<RegexOutput>] = []) {
        node = PropertyNode(name: name, description: description,
                            node: .generable(String.self, guides.map { .pattern($0._literalPattern) }),
                            isOptional: true)
    }
}

extension GenerationSchema {
    /// Creates a schema by providing an array of properties.
    ///
    /// - Parameters:
    ///   - type: The type this schema represents.
    ///   - description: A natural language description of this schema.
    ///   - properties: An array of properties.
    public init(type: any Generable.Type, description: String? = nil, properties: [GenerationSchema.Property]) {
        self.init(root: .object(ObjectNode(name: Self.typeName(type), description: description,
                                           properties: properties.map(\.node))))
    }

    /// Creates a schema by providing an array of properties, choosing whether `nil` values are
    /// written as `null` in generated content.
    public init(type: any Generable.Type, description: String? = nil,
                representNilExplicitlyInGeneratedContent explicitNil: Bool, properties: [GenerationSchema.Property]) {
        self.init(root: .object(ObjectNode(name: Self.typeName(type), description: description,
                                           properties: properties.map(\.node), explicitNil: explicitNil)))
    }

    /// Creates a schema for a string choice with the specified options.
    ///
    /// - Parameters:
    ///   - type: The type this schema represents.
    ///   - description: A natural language description of this schema.
    ///   - choices: An array of string choices.
    public init(type: any Generable.Type, description: String? = nil, anyOf choices: [String]) {
        self.init(root: .string(StringNode(name: Self.typeName(type), description: description, choices: choices)))
    }

    /// Creates a schema as the union of several other types.
    ///
    /// - Parameters:
    ///   - type: The type this schema represents.
    ///   - description: A natural language description of this schema.
    ///   - types: Types the generated value may be.
    public init(type: any Generable.Type, description: String? = nil, anyOf types: [any Generable.Type]) {
        self.init(root: .anyOf(AnyOfNode(name: Self.typeName(type), description: description,
                                         choices: types.map { .generable($0, []) })))
    }

    /// Creates the schema of an enumeration whose cases may have associated values.
    ///
    /// The `@Generable` macro uses this for enumerations; you don't call it yourself. A case
    /// without associated values is generated as its name; a case with associated values as an
    /// object with one property, named after the case, whose value holds the associated values.
    public static func _enumeration(type: any Generable.Type, description: String?,
                                    cases: [_EnumerationCase]) -> GenerationSchema {
        let plain = cases.filter { $0.properties == nil }.map(\.name)
        var choices: [SchemaNode] = []
        if !plain.isEmpty { choices.append(.string(StringNode(choices: plain))) }
        for c in cases {
            guard let properties = c.properties else { continue }
            let payload = SchemaNode.object(ObjectNode(properties: properties.map(\.node)))
            choices.append(.object(ObjectNode(properties: [
                PropertyNode(name: c.name, description: c.description, node: payload, isOptional: false),
            ])))
        }
        return GenerationSchema(root: .anyOf(AnyOfNode(name: typeName(type), description: description, choices: choices)))
    }

    /// One case of an enumeration, for the `@Generable` macro.
    public struct _EnumerationCase: Sendable {
        var name: String
        var description: String?
        var properties: [GenerationSchema.Property]?

        /// A case, with the properties of its associated values or `nil` when it has none.
        public init(name: String, description: String? = nil, properties: [GenerationSchema.Property]? = nil) {
            self.name = name
            self.description = description
            self.properties = properties
        }
    }

    /// The name a type's schema is defined under: its own name, qualified by the types it is
    /// nested in (`OuterA.Item` and `OuterB.Item` are two schemas; both were `Item`, and the
    /// second took the first's definition). Not the module, a private or local context, nor a
    /// parent's generic arguments.
    static func typeName(_ type: any Any.Type) -> String {
        // "Module.(unknown context at $…).Outer<Swift.Int>.Item<Swift.Int>": the components.
        var parts: [String] = [], part = "", depth = 0
        for c in String(reflecting: type) {
            switch c {
            case "<", "(": depth += 1
            case ">", ")": depth -= 1
            case "." where depth == 0:
                parts.append(part)
                part = ""
                continue
            default: break
            }
            part.append(c)
        }
        let parents = parts.dropFirst().filter { !$0.hasPrefix("(") }.map { $0.prefix { $0 != "<" } }
        return (parents + [Substring(String(describing: type))]).joined(separator: ".")
    }
}

extension GenerationSchema {
    /// Creates a schema from a dynamic schema and the dynamic schemas it refers to.
    ///
    /// - Parameters:
    ///   - root: The schema of the generated value.
    ///   - dependencies: Named schemas that `root` and each other refer to by name.
    /// - Throws: A ``SchemaError`` when two types share a name, an object names a property
    ///   twice, a choice has no options, or a reference names no type.
    public init(root: DynamicGenerationSchema, dependencies: [DynamicGenerationSchema]) throws {
        var defined: [String: SchemaNode] = [:]
        var order: [String] = []
        var references: [String] = []
        func visit(_ node: SchemaNode, isDefinition: Bool) throws {
            switch node {
            case .object(let object):
                if let name = object.name, !isDefinition { try define(name, node) }
                var seen: Set<String> = []
                for property in object.properties {
                    guard seen.insert(property.name).inserted else {
                        throw SchemaError.duplicateProperty(
                            schema: object.name ?? "", property: property.name,
                            context: .init(debugDescription: "The property '\(property.name)' appears more than once."))
                    }
                    try visit(property.node, isDefinition: false)
                }
            case .anyOf(let choice):
                if let name = choice.name, !isDefinition { try define(name, node) }
                guard !choice.choices.isEmpty else {
                    throw SchemaError.emptyTypeChoices(schema: choice.name ?? "",
                                                       context: .init(debugDescription: "A choice needs at least one option."))
                }
                for c in choice.choices { try visit(c, isDefinition: false) }
            case .string(let string):
                if let name = string.name, !isDefinition { try define(name, node) }
                if let choices = string.choices, choices.isEmpty {
                    throw SchemaError.emptyTypeChoices(schema: string.name ?? "",
                                                       context: .init(debugDescription: "A choice needs at least one option."))
                }
            case .array(let array): try visit(array.items, isDefinition: false)
            case .reference(let name): references.append(name)
            default: break
            }
        }
        func define(_ name: String, _ node: SchemaNode) throws {
            if defined[name] != nil {
                throw SchemaError.duplicateType(schema: nil, type: name,
                                                context: .init(debugDescription: "Two types are named '\(name)'."))
            }
            defined[name] = node
            order.append(name)
        }
        for dependency in dependencies {
            guard let name = dependency.node.typeName else {
                throw SchemaError.undefinedReferences(
                    schema: nil, references: [],
                    context: .init(debugDescription: "A dependency must be a named object or choice."))
            }
            try define(name, dependency.node)
            try visit(dependency.node, isDefinition: true)
        }
        if let name = root.node.typeName { try define(name, root.node) }
        try visit(root.node, isDefinition: true)
        let undefined = references.filter { defined[$0] == nil }
        if !undefined.isEmpty {
            var unique: [String] = []
            for name in undefined where !unique.contains(name) { unique.append(name) }
            throw SchemaError.undefinedReferences(
                schema: root.node.typeName, references: unique,
                context: .init(debugDescription: "No type is named \(unique.map { "'\($0)'" }.joined(separator: ", "))."))
        }
        self.init(root: root.node, defs: dependencies.compactMap { d in d.node.typeName.map { ($0, d.node) } })
    }
}

extension GenerationSchema {
    /// A error that occurs when there is a problem creating a generation schema.
    public enum SchemaError: Error, LocalizedError {
        /// An error that represents an attempt to construct a schema from dynamic schemas, and
        /// two or more of the subschemas have the same type name.
        case duplicateType(schema: String?, type: String, context: GenerationSchema.SchemaError.Context)
        /// An error that represents an attempt to construct a dynamic schema with properties
        /// that have conflicting names.
        case duplicateProperty(schema: String, property: String, context: GenerationSchema.SchemaError.Context)
        /// An error that represents an attempt to construct an anyOf schema with an empty array
        /// of type choices.
        case emptyTypeChoices(schema: String, context: GenerationSchema.SchemaError.Context)
        /// An error that represents an attempt to construct a schema from dynamic schemas, and
        /// one of those schemas references an undefined schema.
        case undefinedReferences(schema: String?, references: [String], context: GenerationSchema.SchemaError.Context)

        /// The context in which the error occurred.
        public struct Context: Sendable {
            /// A string representation of the debug description.
            ///
            /// This string is not localized and is not appropriate for display to end users.
            public let debugDescription: String

            /// Creates a context.
            public init(debugDescription: String) {
                self.debugDescription = debugDescription
            }
        }

        /// A string representation of the error description.
        public var errorDescription: String? {
            switch self {
            case .duplicateType(_, let type, _):
                "The schema defines the type '\(type)' more than once."
            case .duplicateProperty(let schema, let property, _):
                "The schema '\(schema)' has more than one property named '\(property)'."
            case .emptyTypeChoices(let schema, _):
                "The schema '\(schema)' offers a choice between no types."
            case .undefinedReferences(_, let references, let context):
                references.isEmpty ? context.debugDescription
                    : "The schema refers to types it doesn't define: \(references.joined(separator: ", "))."
            }
        }

        /// A suggestion that indicates how to handle the error.
        public var recoverySuggestion: String? {
            switch self {
            case .duplicateType: "Give each dynamic schema a unique name."
            case .duplicateProperty: "Give each property of an object a unique name."
            case .emptyTypeChoices: "Provide at least one choice."
            case .undefinedReferences: "Pass every schema that is referred to by name in the dependencies."
            }
        }
    }
}

extension GenerationSchema: Codable {
    /// Creates a schema from its JSON Schema form.
    public init(from decoder: any Decoder) throws {
        let json = try JSONValue(from: decoder)
        do {
            try self.init(json: json)
        } catch let error as SchemaParseError {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                    debugDescription: "Not a schema Plinth can read: \(error)"))
        }
    }

    init(json: JSONValue) throws {
        var defs: [(String, SchemaNode)] = []
        if case .object(let pairs) = json["$defs"] ?? .object([]) {
            defs = try pairs.map { ($0.0, try SchemaNode.parse($0.1)) }
        }
        self.init(root: try SchemaNode.parse(json), defs: defs)
    }

    /// Encodes the schema as JSON Schema.
    ///
    /// - Throws: `EncodingError.invalidValue` when the schema holds a guide that can't be
    ///   written as JSON Schema, such as a `Regex` built without a literal pattern.
    public func encode(to encoder: any Encoder) throws {
        let resolved = resolved
        if let first = resolved.unsupportedGuides.first {
            throw EncodingError.invalidValue(self, .init(codingPath: encoder.codingPath,
                                                          debugDescription: "The schema uses \(first), which can't be enforced."))
        }
        try resolved.json.encode(to: encoder)
    }

    /// The schema with every type read and every named type collected.
    var resolved: ResolvedSchema { SchemaResolver.resolve(self) }

    /// The JSON Schema form, keys in order.
    var jsonSchema: JSONValue { source ?? resolved.json }
}

extension GenerationSchema {
    /// Creates a schema from a JSON Schema document (draft 2020-12 or draft-07), to be enforced
    /// as JSON Schema defines it: `pattern` matches anywhere in a string, and every keyword counts.
    ///
    /// This is a Plinth extension for schemas that come from outside Swift (files, other
    /// services). A local model compiles the document itself, so a keyword its decoder can't
    /// enforce is an error naming the keyword when the schema is used, not a silent omission.
    ///
    /// - Throws: `GeneratedContent.ParsingError` when the text isn't a JSON object.
    public init(jsonSchema text: String) throws {
        let json: JSONValue
        do {
            json = try JSONValue(parsing: text)
        } catch {
            throw GeneratedContent.ParsingError(rawContent: text, underlyingError: error,
                                                debugDescription: "The schema isn't JSON: \(error)")
        }
        try self.init(jsonSchema: json)
    }

    /// A schema from a JSON Schema document already read.
    package init(jsonSchema json: JSONValue) throws {
        // JSON Schema's boolean schemas: `true` admits any value (as `{}`), `false` none.
        if json == .bool(true) { try self.init(jsonSchema: .object([])); return }
        if json == .bool(false) {
            throw GeneratedContent.ParsingError(rawContent: "false", debugDescription: "The schema false admits no value, so nothing can be generated.")
        }
        guard case .object = json else {
            throw GeneratedContent.ParsingError(rawContent: json.compactText, debugDescription: "A JSON Schema must be a JSON object.")
        }
        // The node tree names the type and shapes partial content; what it can't model still
        // reaches the decoder through the source.
        if let parsed = try? GenerationSchema(json: json) {
            self = parsed
        } else {
            self.init(root: .anyValue)
        }
        source = json
    }
}

extension GenerationSchema: CustomDebugStringConvertible {
    /// The schema as indented JSON Schema.
    public var debugDescription: String { jsonSchema.prettyText }
}

extension GenerationSchema: Equatable {
    /// Two schemas are equal when their JSON Schema forms are.
    public static func == (a: GenerationSchema, b: GenerationSchema) -> Bool {
        a.jsonSchema == b.jsonSchema
    }
}
