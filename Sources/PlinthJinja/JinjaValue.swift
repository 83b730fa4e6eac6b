public import PlinthJSON

/// A JSON-like value that a chat template can read: the messages, tool definitions and any
/// extra variables you pass to a template.
///
/// Objects keep their keys in the order given, so that a template that prints a tool
/// definition with `tojson` produces the same text as Python's `json.dumps` on the same data.
/// Build values with literals, or parse JSON text with ``init(json:)``:
///
/// ```swift
/// let tool: JinjaValue = [
///     "type": "function",
///     "function": ["name": "get_weather", "parameters": ["type": "object"]],
/// ]
/// let same = try JinjaValue(json: #"{"type": "function", "function": {"name": "get_weather"}}"#)
/// ```
public enum JinjaValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JinjaValue])
    case object(JinjaObject)

    /// Parses JSON text, keeping the order of object keys.
    ///
    /// Integers without a fraction or exponent become ``int(_:)``, as in Python's `json`.
    public init(json text: String) throws(ChatTemplateError) {
        do {
            self = try JSONReader.parse(text.utf8, builder: Builder(), options: Builder.options)
        } catch {
            throw .invalidJSON(error.message, offset: error.offset)
        }
    }

    /// The template value of a JSON value, with numbers as Python's `json` reads their text.
    public init(_ json: JSONValue) {
        let builder = Builder()
        switch json {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .number(let n): self = builder.scalar(.number(n), complete: true)
        case .string(let s): self = .string(s)
        case .array(let items): self = .array(items.map(JinjaValue.init))
        case .object(let members): self = .object(JinjaObject(members.map { ($0.key, JinjaValue($0.value)) }))
        }
    }

    /// The value as JSON text, exactly as Python's `json.dumps(value, ensure_ascii=False)`
    /// writes it (`", "` and `": "` separators, or newlines and `indent` spaces when given).
    public func jsonString(indent: Int? = nil, sortKeys: Bool = false) -> String {
        let dumper = Jinja.JSONDumper(indent: indent.map { String(repeating: " ", count: max(0, $0)) },
                                separators: nil, sortKeys: sortKeys, ensureASCII: false)
        // A JinjaValue holds only JSON data, which always serializes.
        return (try? dumper.dump(Jinja.Value(self), at: TemplateSourceLocation(line: 0, column: 0))) ?? ""
    }

    /// The value of `key` when this is an object.
    public subscript(key: String) -> JinjaValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
}

/// A JSON object whose keys keep the order in which they were added.
public struct JinjaObject: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The keys, in order.
    public private(set) var keys: [String] = []
    private var storage: [String: JinjaValue] = [:]

    /// An empty object.
    public init() {}

    public init(dictionaryLiteral elements: (String, JinjaValue)...) {
        for (k, v) in elements { self[k] = v }
    }

    /// An object with these members, in this order.
    public init<S: Sequence>(_ pairs: S) where S.Element == (String, JinjaValue) {
        for (k, v) in pairs { self[k] = v }
    }

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }

    /// The value for `key`; assigning `nil` removes the key, assigning a new key appends it.
    public subscript(key: String) -> JinjaValue? {
        get { storage[key] }
        set {
            if let newValue {
                if storage.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if storage.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    /// The members in order.
    public func makeIterator() -> AnyIterator<(key: String, value: JinjaValue)> {
        var i = 0
        return AnyIterator {
            guard i < keys.count else { return nil }
            defer { i += 1 }
            return (keys[i], storage[keys[i]]!)
        }
    }

    /// Objects are equal when they hold the same keys and values, in any order (as in Python).
    public static func == (a: JinjaObject, b: JinjaObject) -> Bool {
        a.storage == b.storage
    }
}

extension JinjaValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral {
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JinjaValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JinjaValue)...) {
        self = .object(JinjaObject(elements))
    }
}
