/// A `JSONValue` goes through any coder as the JSON it is. Decoders do not report member order
/// or number text, so a value read this way has its decoder's key order, and numbers that are
/// whole and fit in 64 bits are read as integers, others as `Double`.
extension JSONValue: Codable {
    private struct MemberKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: MemberKey.self) {
            var members: [(key: String, value: JSONValue)] = []
            for key in keyed.allKeys {
                members.append((key.stringValue, try keyed.decode(JSONValue.self, forKey: key)))
            }
            self = .object(members)
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
        } else if let n = try? single.decode(Int64.self) {
            self = .integer(n)
        } else if let n = try? single.decode(Double.self) {
            self = .double(n)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var c = encoder.singleValueContainer()
            try c.encodeNil()
        case .bool(let b):
            var c = encoder.singleValueContainer()
            try c.encode(b)
        case .number(let text):
            var c = encoder.singleValueContainer()
            if let n = Int64(text) {
                try c.encode(n)
            } else {
                try c.encode(Double(text) ?? .nan)
            }
        case .string(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .array(let items):
            var c = encoder.unkeyedContainer()
            for item in items { try c.encode(item) }
        case .object(let members):
            var c = encoder.container(keyedBy: MemberKey.self)
            for (key, value) in members { try c.encode(value, forKey: MemberKey(key)) }
        }
    }
}
