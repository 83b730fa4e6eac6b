/// A JSON value that keeps object members in the order they were written and numbers as their
/// literal text.
///
/// Order matters because the decoder generates properties in declaration order and templates
/// print them as given; number text matters because schema bounds such as `0.1` are compared
/// exactly, and because an id like `12345678901234567890` must come back as it went in.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number, as its literal JSON text (`12`, `-0.5`, `1e3`).
    case number(String)
    case string(String)
    case array([JSONValue])
    /// An object, members in document order, each name once.
    case object([(key: String, value: JSONValue)])

    /// Numbers are equal when their decimal values are (`1.0 == 1`), objects when they have the
    /// same members in any order: JSON's equality, as JSON Schema's `const` and `enum` use it.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b || DecimalNumber(a) == DecimalNumber(b)
        case let (.string(a), .string(b)): return a.unicodeScalars.elementsEqual(b.unicodeScalars)
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            guard a.count == b.count else { return false }
            for (k, v) in a {
                guard let other = b.first(where: { $0.key.unicodeScalars.elementsEqual(k.unicodeScalars) }), other.value == v
                else { return false }
            }
            return true
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .number(let n): hasher.combine(DecimalNumber(n)?.description ?? n)
        case .string(let s): hasher.combine(Array(s.utf8))
        case .array(let a): hasher.combine(a)
        case .object(let o): hasher.combine(o.count)
        }
    }

    /// An integer.
    public static func integer(_ n: some BinaryInteger) -> JSONValue { .number(String(n)) }

    /// A floating-point number: whole values below 2^53 as integers, others in the shortest text
    /// that reads back as the same `Double`; `null` for NaN and infinities, which JSON lacks.
    public static func double(_ d: Double) -> JSONValue {
        guard d.isFinite else { return .null }
        if d == d.rounded(), abs(d) < 9.007_199_254_740_992e15 { return .number(String(Int64(d))) }
        return .number(d.description)
    }

    /// An object with a dictionary's members, sorted by name (a dictionary has no order of its own).
    public init(sortingMembersOf dictionary: [String: JSONValue]) {
        self = .object(dictionary.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) })
    }

    /// The member named `key` of an object, or nil.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first(where: { $0.key == key })?.value
    }

    public var objectMembers: [(key: String, value: JSONValue)]? {
        if case .object(let m) = self { return m }
        return nil
    }
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    public var numberText: String? {
        if case .number(let n) = self { return n }
        return nil
    }
    /// The number as a `Double` (nearest), if this is a number.
    public var doubleValue: Double? {
        guard case .number(let n) = self else { return nil }
        return Double(n)
    }
    /// An integer value (also for `2.0`), if this is a number that is whole and fits.
    public var integerValue: Int? {
        guard case .number(let n) = self, let d = DecimalNumber(n), d.isInteger else { return nil }
        return d.intValue
    }

    /// The JSON type name of the value as JSON Schema spells it (integers report `integer`).
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number(let n): return (DecimalNumber(n)?.isInteger ?? false) ? "integer" : "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// Parses a whole JSON document (RFC 8259; a repeated member name keeps its first place and
    /// its last value).
    public init(parsing text: String, options: JSONReaderOptions = .init()) throws(JSONSyntaxError) {
        try self.init(parsing: Array(text.utf8), options: options)
    }

    /// Parses a whole JSON document from UTF-8 bytes.
    public init(parsing bytes: some Sequence<UInt8>, options: JSONReaderOptions = .init()) throws(JSONSyntaxError) {
        try self.init(parsing: Array(bytes), options: options)
    }

    /// Parses a whole JSON document from UTF-8 bytes. Every parse comes here, so the reader is
    /// compiled for this one builder and buffer type, whatever module calls.
    public init(parsing bytes: [UInt8], options: JSONReaderOptions = .init()) throws(JSONSyntaxError) {
        let parsed = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONSyntaxError) in try JSONReader.parse(buffer, builder: JSONValueBuilder(), options: options) }
        }
        self = try parsed.get()
    }

    /// The text of the value in `format`.
    public func text(_ format: JSONFormat) -> String {
        var writer = JSONWriter(format: format)
        writer.write(self)
        return writer.text
    }

    /// Compact text: no whitespace, members in order, only the escapes JSON requires — the form
    /// the decoder generates.
    public var compactText: String { text(.compact) }

    /// Indented text (two spaces), members in order.
    public var prettyText: String { text(.pretty) }
}

/// Builds `JSONValue`s for the reader; partial snapshots keep what has started.
public struct JSONValueBuilder: JSONTreeBuilder {
    public init() {}
    public func scalar(_ scalar: JSONScalar, complete: Bool) -> JSONValue {
        switch scalar {
        case .null: .null
        case .bool(let b): .bool(b)
        case .number(let n): .number(n)
        case .string(let s): .string(s)
        }
    }
    public func array(_ elements: [JSONValue], complete: Bool) -> JSONValue { .array(elements) }
    public func object(_ members: [(key: String, value: JSONValue)], complete: Bool) -> JSONValue { .object(members) }
}

extension JSONWriter {
    /// Writes `value` whole.
    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b): bool(b)
        case .number(let n): number(n)
        case .string(let s): string(s)
        case .array(let items):
            beginArray()
            for item in items { write(item) }
            endArray()
        case .object(let members):
            beginObject()
            for (key, value) in members {
                self.key(key)
                write(value)
            }
            endObject()
        }
    }
}

/// Literals build values as they read: `["model": "m", "tokens": [1, 2], "rate": 1.5]`, members in
/// the order written.
extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(elements.map { (key: $0.0, value: $0.1) }) }
}
