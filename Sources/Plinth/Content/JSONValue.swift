import Foundation

/// A JSON value whose objects keep their key order: the form schemas and transcripts take on
/// their way to and from an encoder, and the text Plinth writes for them.
indirect enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)):
            x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    subscript(key: String) -> JSONValue? {
        guard case .object(let pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }

    var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    var numberValue: Double? {
        if case .number(let n) = self { return n }
        return nil
    }

    var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// Compact JSON text, keys in order.
    var text: String {
        var out = ""
        write(into: &out, indent: nil, level: 0)
        return out
    }

    /// Indented JSON text, keys in order.
    var prettyText: String {
        var out = ""
        write(into: &out, indent: "  ", level: 0)
        return out
    }

    private func write(into out: inout String, indent: String?, level: Int) {
        func newline(_ level: Int) {
            guard let indent else { return }
            out += "\n" + String(repeating: indent, count: level)
        }
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += JSONWriter.number(n)
        case .string(let s): JSONWriter.string(s, into: &out)
        case .array(let items):
            guard !items.isEmpty else { out += "[]"; return }
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                newline(level + 1)
                item.write(into: &out, indent: indent, level: level + 1)
            }
            newline(level)
            out += "]"
        case .object(let pairs):
            guard !pairs.isEmpty else { out += "{}"; return }
            out += "{"
            for (i, (key, value)) in pairs.enumerated() {
                if i > 0 { out += "," }
                newline(level + 1)
                JSONWriter.string(key, into: &out)
                out += indent == nil ? ":" : ": "
                value.write(into: &out, indent: indent, level: level + 1)
            }
            newline(level)
            out += "}"
        }
    }

    init(_ content: GeneratedContent) {
        switch content.kind {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .number(let n): self = .number(n)
        case .string(let s): self = .string(s)
        case .array(let elements): self = .array(elements.map(JSONValue.init))
        case .structure:
            self = .object((content.orderedProperties ?? []).map { ($0.0, JSONValue($0.1)) })
        }
    }

    var generatedContent: GeneratedContent {
        switch self {
        case .null: GeneratedContent(kind: .null)
        case .bool(let b): GeneratedContent(kind: .bool(b))
        case .number(let n): GeneratedContent(kind: .number(n))
        case .string(let s): GeneratedContent(kind: .string(s))
        case .array(let items): GeneratedContent(kind: .array(items.map(\.generatedContent)))
        case .object(let pairs):
            GeneratedContent(kind: .structure(
                properties: Dictionary(pairs.map { ($0.0, $0.1.generatedContent) }, uniquingKeysWith: { $1 }),
                orderedKeys: pairs.map(\.0)))
        }
    }
}

struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension JSONValue: Codable {
    init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: AnyCodingKey.self) {
            var pairs: [(String, JSONValue)] = []
            for key in keyed.allKeys {
                pairs.append((key.stringValue, try keyed.decode(JSONValue.self, forKey: key)))
            }
            self = .object(pairs)
            return
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var items: [JSONValue] = []
            while !unkeyed.isAtEnd { items.append(try unkeyed.decode(JSONValue.self)) }
            self = .array(items)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let b = try? single.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? single.decode(Double.self) {
            self = .number(n)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var c = encoder.singleValueContainer()
            try c.encodeNil()
        case .bool(let b):
            var c = encoder.singleValueContainer()
            try c.encode(b)
        case .number(let n):
            var c = encoder.singleValueContainer()
            if n == n.rounded(), abs(n) < 9.007_199_254_740_992e15 {
                try c.encode(Int64(n))
            } else {
                try c.encode(n)
            }
        case .string(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .array(let items):
            var c = encoder.unkeyedContainer()
            for item in items { try c.encode(item) }
        case .object(let pairs):
            var c = encoder.container(keyedBy: AnyCodingKey.self)
            for (key, value) in pairs { try c.encode(value, forKey: AnyCodingKey(key)) }
        }
    }

    /// Parses complete JSON text.
    static func parse(_ text: String) throws -> JSONValue {
        let content = try PartialJSONParser.parse(text)
        guard content.isComplete else {
            throw GeneratedContent.ParsingError(rawContent: text, debugDescription: "The JSON text is incomplete.")
        }
        return JSONValue(content)
    }
}
