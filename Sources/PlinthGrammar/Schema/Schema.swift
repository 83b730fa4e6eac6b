/// A JSON Schema in typed form: what the decoder enforces, keyword by keyword.
///
/// ``SchemaParser`` reads a document into it, ``SchemaAlgebra`` rewrites it (intersection,
/// negation, exclusivity) and ``SchemaCompiler`` turns it into grammar rules. A keyword is a
/// field of one facet (strings, numbers, arrays, objects): adding one is that field, its case in
/// ``SchemaParser/node(_:_:)``, its line in the facet's intersection and admission check, and
/// its use in the facet's rule.
indirect enum Schema: Equatable, Sendable {
    /// `true`: any JSON value.
    case any
    /// `false`: no value.
    case never
    /// A `$ref` without sibling assertions: the subschema at this resolved JSON pointer
    /// (kept by name, so that recursive schemas stay finite).
    case ref(String)
    /// A schema object.
    case node(SchemaNode)

    /// The conjunction of `schemas`, dropping `true`s.
    static func allOf(_ schemas: [Schema]) -> Schema {
        let kept = schemas.filter { $0 != .any }
        if kept.isEmpty { return .any }
        return kept.count == 1 ? kept[0] : .build { $0.allOf = kept }
    }

    /// A node set up by `setUp` from an empty one.
    static func build(_ setUp: (inout SchemaNode) -> Void) -> Schema {
        var n = SchemaNode()
        setUp(&n)
        return .node(n)
    }

    /// `anyOf: alternatives`.
    static func anyOf(_ alternatives: [Schema]) -> Schema { .build { $0.anyOf = alternatives } }
}

/// The JSON types a schema allows (`number` includes `integer`).
struct JSONTypes: OptionSet, Hashable, Sendable {
    let rawValue: UInt8
    static let null = JSONTypes(rawValue: 1)
    static let boolean = JSONTypes(rawValue: 2)
    static let object = JSONTypes(rawValue: 4)
    static let array = JSONTypes(rawValue: 8)
    static let number = JSONTypes(rawValue: 16)
    static let integer = JSONTypes(rawValue: 32)
    static let string = JSONTypes(rawValue: 64)
    /// Every value (`integer` is within `number`).
    static let all: JSONTypes = [.null, .boolean, .object, .array, .number, .string]

    init(rawValue: UInt8) { self.rawValue = rawValue }

    static let names: [String: JSONTypes] = [
        "null": .null, "boolean": .boolean, "object": .object, "array": .array, "number": .number, "integer": .integer, "string": .string,
    ]

    /// The type of a value (integral numbers are `integer`).
    init(of value: JSONValue) { self = JSONTypes.names[value.typeName]! }

    /// With `integer` where `number` is (a value of type `integer` is also a `number`).
    var withIntegers: JSONTypes { contains(.number) ? union(.integer) : self }

    /// Whether a value of type `t` (as ``init(of:)`` gives it) is allowed.
    func admits(_ t: JSONTypes) -> Bool { !intersection(t).isEmpty || (t == .integer && contains(.number)) }

    /// Both sets' values: an `integer` on one side and a `number` on the other meet in `integer`.
    func meet(_ other: JSONTypes) -> JSONTypes {
        var r = intersection(other)
        if (contains(.integer) && other.contains(.number)) || (other.contains(.integer) && contains(.number)) { r.insert(.integer) }
        if r.contains(.integer) && r.contains(.number) { r.remove(.integer) }
        return r
    }
}

/// A schema object's assertions, by facet.
struct SchemaNode: Equatable, Sendable {
    /// `type` (nil: every type).
    var types: JSONTypes?
    /// `enum` and `const` together: the values allowed (nil: not restricted).
    var literals: [JSONValue]?
    /// Conjuncts: `allOf`, and a `$ref` that has sibling assertions (2020-12).
    var allOf: [Schema] = []
    var anyOf: [Schema]?
    var oneOf: [Schema]?
    var string = StringFacet()
    var number = NumberFacet()
    var array = ArrayFacet()
    var object = ObjectFacet()
    /// Keywords the decoder does not enforce (unless their value makes them vacuous, which
    /// the compiler decides on the merged schema), with their values.
    var unenforced: [Keyword] = []

    struct Keyword: Equatable, Sendable {
        var name: String
        var value: JSONValue
    }

    /// Whether the node asserts anything (`{}` asserts nothing).
    var hasAssertions: Bool { self != SchemaNode(object: ObjectFacet(order: object.order)) }
}

/// `minLength`, `maxLength`, `pattern` (several after intersection) and `format`.
struct StringFacet: Equatable, Sendable {
    var minLength: Int?
    var maxLength: Int?
    var patterns: [String] = []
    var format: String?
    /// Strings not allowed (from `not` of `const`/`enum`); each has one spelling in the grammar.
    var excluded: [String] = []
    /// Facets no string may satisfy (from `not` of string keywords).
    var negated: [StringFacet] = []

    /// The facet as the key of the shared leaf automaton that enforces it (its length bounds
    /// only with `lengths`; a format by its expression).
    func leafKey(lengths: Bool) -> String {
        "re:" + patterns.joined(separator: "\u{0}") + "\u{1}" + (format.map { SchemaFormats.pattern($0) ?? "?" + $0 } ?? "")
            + (excluded.isEmpty ? "" : "\u{1}not:" + excluded.sorted().joined(separator: "\u{0}"))
            + negated.map { "\u{1}neg:(" + $0.leafKey(lengths: true) + ")" }.joined()
            + (lengths ? "\u{1}len:\(minLength ?? 0):\(maxLength ?? -1)" : "")
    }
}

/// The tightest lower and upper bounds, and `multipleOf`.
struct NumberFacet: Equatable, Sendable {
    struct Bound: Equatable, Sendable {
        var value: DecimalNumber
        var exclusive: Bool
    }
    var lower: Bound?
    var upper: Bound?
    var multipleOf: DecimalNumber?

    /// The tighter of two bounds of one side; at equal values the exclusive one.
    static func tighter(_ x: Bound?, _ y: Bound?, lower: Bool) -> Bound? {
        guard let x else { return y }
        guard let y else { return x }
        if x.value == y.value { return Bound(value: x.value, exclusive: x.exclusive || y.exclusive) }
        return (x.value < y.value) == lower ? y : x
    }
}

/// Positional items, the rest, and the count bounds.
struct ArrayFacet: Equatable, Sendable {
    /// `prefixItems` (or draft-07's array form of `items`).
    var prefixItems: [Schema] = []
    /// The schema of items after the prefix (`items`, or draft-07's `additionalItems`); nil: absent.
    var items: Schema?
    /// Whether the rest came from `additionalItems` (error pointers name it).
    var itemsIsAdditional = false
    /// Whether any positional keyword was present (they intersect position by position).
    var isPositional = false
    var minItems: Int?
    var maxItems: Int?
    var uniqueItems = false
}

/// Declared, pattern and additional properties, `required`, and the count bounds.
struct ObjectFacet: Equatable, Sendable {
    struct Property: Equatable, Sendable {
        var name: String
        var schema: Schema
    }
    var properties: [Property]?
    var required: [String]?
    var additionalProperties: Schema?
    var patternProperties: [Property]?
    var minProperties: Int?
    var maxProperties: Int?
    /// The schema every key (as a string) must satisfy.
    var propertyNames: Schema?
    /// `x-order`: the order to generate declared properties in (an annotation).
    var order: [String]?

    func property(_ name: String) -> Schema? { properties?.first { $0.name == name }?.schema }

    /// The declared properties in the order they are generated (`x-order` first).
    var orderedProperties: [Property] {
        guard let order else { return properties ?? [] }
        return (properties ?? []).sorted { (order.firstIndex(of: $0.name) ?? Int.max) < (order.firstIndex(of: $1.name) ?? Int.max) }
    }
}
