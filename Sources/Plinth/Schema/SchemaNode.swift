import Foundation
internal import PlinthJSON

/// The shape of a value, as the types, guides and dynamic schemas describe it.
///
/// A node of a Generable type is `.generable`: it stays lazy until the schema is resolved, so
/// that recursive types (a node whose children are nodes) have a finite schema.
indirect enum SchemaNode: Sendable {
    case object(ObjectNode)
    case anyOf(AnyOfNode)
    case string(StringNode)
    case integer(NumberNode)
    case number(NumberNode)
    case boolean
    case null
    case array(ArrayNode)
    /// A named type defined elsewhere in the schema (`$defs`).
    case reference(String)
    /// A Generable type whose schema is read when the schema is resolved, with the guides to
    /// apply to it.
    case generable(any Generable.Type, [GuideKind])
    /// Any JSON value.
    case anyValue

    /// The name of a named type (an object, a choice, an enumeration), which is defined once
    /// and referred to by name.
    var typeName: String? {
        switch self {
        case .object(let o): o.name
        case .anyOf(let a): a.name
        case .string(let s): s.name
        default: nil
        }
    }
}

struct ObjectNode: Sendable {
    var name: String?
    var description: String?
    var properties: [PropertyNode]
    /// Whether optional properties are always present, `null` when they have no value.
    var explicitNil = false
}

struct PropertyNode: Sendable {
    var name: String
    var description: String?
    var node: SchemaNode
    var isOptional: Bool
}

struct AnyOfNode: Sendable {
    var name: String?
    var description: String?
    var choices: [SchemaNode]
}

struct StringNode: Sendable {
    var name: String?
    var description: String?
    var choices: [String]?
    var pattern: String?
}

struct NumberNode: Sendable {
    var minimum: Double?
    var maximum: Double?
}

struct ArrayNode: Sendable {
    var items: SchemaNode
    var minItems: Int?
    var maxItems: Int?
}

/// A schema with every Generable type read and every named type collected in `defs`.
struct ResolvedSchema: Sendable {
    var root: SchemaNode
    var defs: [(String, SchemaNode)]
    /// Guides that Plinth can't enforce, named for the error that reports them.
    var unsupportedGuides: [String]
}

/// Reads Generable types, applies guides, and hoists named types into definitions.
struct SchemaResolver {
    private var defs: [(String, SchemaNode)] = []
    private var defined: Set<String> = []
    private var pending: [String: SchemaNode] = [:]
    private var rootName: String?
    private var rootReferenced = false
    private var unsupported: [String] = []

    static func resolve(_ schema: GenerationSchema) -> ResolvedSchema {
        var resolver = SchemaResolver()
        for (name, node) in schema.defs where resolver.pending[name] == nil {
            resolver.pending[name] = node
        }
        var root = schema.root
        // The root is written inline; a Generable root is read first so that its name is known.
        var rootGuides: [GuideKind] = []
        while case .generable(let type, let guides) = root {
            let inner = type.generationSchema
            for (name, node) in inner.defs where resolver.pending[name] == nil { resolver.pending[name] = node }
            root = inner.root
            rootGuides += guides
        }
        resolver.rootName = root.typeName
        if let name = resolver.rootName { resolver.defined.insert(name) }
        let resolvedRoot = resolver.resolve(root, guides: rootGuides, hoist: false)
        if resolver.rootReferenced, let name = resolver.rootName {
            resolver.defs.insert((name, resolvedRoot), at: 0)
        }
        return ResolvedSchema(root: resolvedRoot, defs: resolver.defs, unsupportedGuides: resolver.unsupported)
    }

    private mutating func reference(_ name: String) -> SchemaNode {
        if name == rootName { rootReferenced = true; return .reference(name) }
        if !defined.contains(name), let node = pending[name] {
            defined.insert(name)
            let index = defs.count
            defs.append((name, .null))
            defs[index].1 = resolve(node, guides: [], hoist: false)
        }
        return .reference(name)
    }

    private mutating func resolve(_ node: SchemaNode, guides: [GuideKind], hoist: Bool = true) -> SchemaNode {
        if hoist, let name = node.typeName {
            if !defined.contains(name) && name != rootName {
                defined.insert(name)
                let index = defs.count
                defs.append((name, .null))
                defs[index].1 = resolve(node, guides: guides, hoist: false)
            }
            if name == rootName { rootReferenced = true }
            return .reference(name)
        }
        switch node {
        case .generable(let type, let more):
            let schema = type.generationSchema
            for (name, def) in schema.defs where pending[name] == nil { pending[name] = def }
            return resolve(schema.root, guides: more + guides, hoist: true)
        case .reference(let name):
            return reference(name)
        case .object(var object):
            for i in object.properties.indices {
                object.properties[i].node = resolve(object.properties[i].node, guides: [])
            }
            return .object(object)
        case .anyOf(var choice):
            choice.choices = choice.choices.map { resolve($0, guides: []) }
            return .anyOf(choice)
        case .string(var string):
            for guide in guides {
                switch guide {
                case .constant(let value): string.choices = [value]
                case .anyOf(let values): string.choices = values
                case .pattern(let pattern):
                    if let pattern { string.pattern = pattern } else { unsupported.append("a Regex without a literal pattern") }
                default: unsupported.append("\(guide) on a string")
                }
            }
            return .string(string)
        case .integer(var number), .number(var number):
            for guide in guides {
                switch guide {
                case .minimum(let v): number.minimum = max(number.minimum ?? -.infinity, v)
                case .maximum(let v): number.maximum = min(number.maximum ?? .infinity, v)
                default: unsupported.append("\(guide) on a number")
                }
            }
            if case .integer = node { return .integer(number) }
            return .number(number)
        case .array(var array):
            var elementGuides: [GuideKind] = []
            for guide in guides {
                switch guide {
                case .minimumCount(let n): array.minItems = max(array.minItems ?? 0, n)
                case .maximumCount(let n): array.maxItems = min(array.maxItems ?? .max, n)
                case .element(let inner): elementGuides += inner
                default: unsupported.append("\(guide) on an array")
                }
            }
            array.items = resolve(array.items, guides: elementGuides)
            return .array(array)
        case .boolean, .null, .anyValue:
            for guide in guides { unsupported.append("\(guide) on \(node)") }
            return node
        }
    }
}

// MARK: - JSON Schema

extension ResolvedSchema {
    /// The JSON Schema form: the root inline, named types under `$defs`, properties in order
    /// (both as the key order and as `x-order`).
    var json: JSONValue {
        var root = Self.json(root)
        if !defs.isEmpty, case .object(var pairs) = root {
            pairs.append(("$defs", .object(defs.map { ($0.0, Self.json($0.1)) })))
            root = .object(pairs)
        }
        return root
    }

    static func json(_ node: SchemaNode) -> JSONValue {
        switch node {
        case .object(let object):
            var pairs: [(String, JSONValue)] = [("type", .string("object"))]
            if let name = object.name { pairs.append(("title", .string(name))) }
            if let d = object.description { pairs.append(("description", .string(d))) }
            var properties: [(String, JSONValue)] = []
            var required: [JSONValue] = []
            for property in object.properties {
                var schema = json(property.node)
                if property.isOptional && object.explicitNil {
                    schema = .object([("anyOf", .array([schema, .object([("type", .string("null"))])]))])
                }
                if let d = property.description { schema = adding("description", .string(d), to: schema) }
                properties.append((property.name, schema))
                if !property.isOptional || object.explicitNil { required.append(.string(property.name)) }
            }
            pairs.append(("properties", .object(properties)))
            pairs.append(("required", .array(required)))
            pairs.append(("x-order", .array(object.properties.map { .string($0.name) })))
            pairs.append(("additionalProperties", .bool(false)))
            return .object(pairs)
        case .anyOf(let choice):
            var pairs: [(String, JSONValue)] = []
            if let name = choice.name { pairs.append(("title", .string(name))) }
            if let d = choice.description { pairs.append(("description", .string(d))) }
            pairs.append(("anyOf", .array(choice.choices.map(json))))
            return .object(pairs)
        case .string(let string):
            var pairs: [(String, JSONValue)] = [("type", .string("string"))]
            if let name = string.name { pairs.append(("title", .string(name))) }
            if let d = string.description { pairs.append(("description", .string(d))) }
            if let choices = string.choices { pairs.append(("enum", .array(choices.map { .string($0) }))) }
            if let pattern = string.pattern { pairs.append(("pattern", .string(pattern))) }
            return .object(pairs)
        case .integer(let number), .number(let number):
            var pairs: [(String, JSONValue)] = [("type", .string(node.isInteger ? "integer" : "number"))]
            if let v = number.minimum { pairs.append(("minimum", .double(v))) }
            if let v = number.maximum { pairs.append(("maximum", .double(v))) }
            return .object(pairs)
        case .boolean: return .object([("type", .string("boolean"))])
        case .null: return .object([("type", .string("null"))])
        case .array(let array):
            var pairs: [(String, JSONValue)] = [("type", .string("array")), ("items", json(array.items))]
            if let n = array.minItems { pairs.append(("minItems", .integer(n))) }
            if let n = array.maxItems { pairs.append(("maxItems", .integer(n))) }
            return .object(pairs)
        case .reference(let name): return .object([("$ref", .string("#/$defs/\(name)"))])
        case .generable(let type, _): return .object([("$ref", .string("#/$defs/\(type)"))])
        case .anyValue: return .object([])
        }
    }

    private static func adding(_ key: String, _ value: JSONValue, to schema: JSONValue) -> JSONValue {
        guard case .object(var pairs) = schema else { return schema }
        pairs.removeAll { $0.0 == key }
        pairs.append((key, value))
        return .object(pairs)
    }
}

extension SchemaNode {
    var isInteger: Bool {
        if case .integer = self { return true }
        return false
    }

    /// Reads a JSON Schema (the subset Plinth writes) back into a node.
    static func parse(_ json: JSONValue) throws -> SchemaNode {
        guard case .object = json else { throw SchemaParseError("a schema must be a JSON object") }
        let title = json["title"]?.stringValue
        let description = json["description"]?.stringValue
        if let ref = json["$ref"]?.stringValue {
            let prefix = "#/$defs/"
            guard ref.hasPrefix(prefix) else { throw SchemaParseError("unsupported reference '\(ref)'") }
            return .reference(String(ref.dropFirst(prefix.count)))
        }
        if let choices = json["anyOf"]?.arrayValue {
            return .anyOf(AnyOfNode(name: title, description: description, choices: try choices.map(parse)))
        }
        guard let type = json["type"]?.stringValue else {
            if let values = json["enum"]?.arrayValue {
                return .string(StringNode(name: title, description: description, choices: values.compactMap(\.stringValue)))
            }
            return .anyValue
        }
        switch type {
        case "object":
            var pairs: [(String, JSONValue)] = []
            if case .object(let p) = json["properties"] ?? .object([]) { pairs = p }
            if let order = json["x-order"]?.arrayValue?.compactMap(\.stringValue) {
                pairs.sort { (order.firstIndex(of: $0.0) ?? .max) < (order.firstIndex(of: $1.0) ?? .max) }
            }
            let required = Set(json["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            var explicitNil = false
            var properties: [PropertyNode] = []
            for (name, schema) in pairs {
                var node = try parse(schema)
                var isOptional = !required.contains(name)
                if case .anyOf(let choice) = node, choice.name == nil, choice.choices.count == 2,
                   case .null = choice.choices[1] {
                    node = choice.choices[0]
                    isOptional = true
                    explicitNil = true
                }
                properties.append(PropertyNode(name: name, description: schema["description"]?.stringValue,
                                               node: node.removingDescription, isOptional: isOptional))
            }
            return .object(ObjectNode(name: title, description: description, properties: properties, explicitNil: explicitNil))
        case "string":
            var choices = json["enum"]?.arrayValue?.compactMap(\.stringValue)
            if let constant = json["const"]?.stringValue { choices = [constant] }
            return .string(StringNode(name: title, description: description, choices: choices,
                                      pattern: json["pattern"]?.stringValue))
        case "integer", "number":
            let number = NumberNode(minimum: json["minimum"]?.doubleValue, maximum: json["maximum"]?.doubleValue)
            return type == "integer" ? .integer(number) : .number(number)
        case "boolean": return .boolean
        case "null": return .null
        case "array":
            let items = try json["items"].map(parse) ?? .anyValue
            return .array(ArrayNode(items: items, minItems: try count(json, "minItems"), maxItems: try count(json, "maxItems")))
        default:
            throw SchemaParseError("unsupported type '\(type)'")
        }
    }

    /// A count keyword's value: a non-negative integer (a double's conversion trapped past Int's range).
    private static func count(_ json: JSONValue, _ key: String) throws -> Int? {
        guard let v = json[key] else { return nil }
        guard let n = v.integerValue, n >= 0 else { throw SchemaParseError("'\(key)' must be a non-negative integer, not \(v.compactText)") }
        return n
    }

    /// A property's description lives on the property, not on its type.
    var removingDescription: SchemaNode {
        switch self {
        case .string(var s) where s.name == nil:
            s.description = nil
            return .string(s)
        default: return self
        }
    }
}

struct SchemaParseError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
