import Foundation

/// A JSON value that keeps the order of object members as written.
///
/// JSON Schema documents are read into this type because property order matters for
/// generation: properties are produced in declaration order. Numbers keep their literal text so
/// that bounds such as `0.1` are compared exactly, not through binary floating point.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number, as its literal JSON text (for example `12`, `-0.5`, `1e3`).
    case number(String)
    case string(String)
    case array([JSONValue])
    /// An object, members in document order.
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b || DecimalNumber(a) == DecimalNumber(b)
        case let (.string(a), .string(b)): return Array(a.unicodeScalars) == Array(b.unicodeScalars)
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

    /// Parses a JSON document.
    public init(parsing data: Data) throws(GrammarError) {
        var parser = JSONParser(bytes: [UInt8](data))
        self = try parser.parseDocument()
    }

    /// Parses a JSON document.
    public init(parsing text: String) throws(GrammarError) {
        var parser = JSONParser(bytes: Array(text.utf8))
        self = try parser.parseDocument()
    }

    /// The compact JSON text of the value (no whitespace; members in order; only the escapes
    /// JSON requires), the form the decoder generates by default.
    public var compactText: String {
        var out: [UInt8] = []
        writeCompact(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func writeCompact(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: n.utf8)
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                v.writeCompact(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, m) in o.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(m.key, into: &out)
                out.append(UInt8(ascii: ":"))
                m.value.writeCompact(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Writes a string literal the way the decoder generates strings: raw UTF-8 except `"`,
    /// `\` and control characters, which use the short escapes or `\u00XX`.
    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(0x22)
        // Only ASCII bytes are ever escaped, and UTF-8 continuation and lead bytes are all
        // >= 0x80, so the text can be copied byte by byte (whole, when nothing needs escaping).
        let utf8 = s.utf8
        let plain = utf8.withContiguousStorageIfAvailable { p -> Bool in
            for b in p where b < 0x20 || b == 0x22 || b == 0x5C { return false }
            out.append(contentsOf: p)
            return true
        }
        if plain == true {
            out.append(0x22)
            return
        }
        let hex = Array("0123456789abcdef".utf8)
        for b in utf8 {
            switch b {
            case 0x22: out.append(0x5C); out.append(0x22)
            case 0x5C: out.append(0x5C); out.append(0x5C)
            case 0x08: out.append(0x5C); out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(0x5C); out.append(UInt8(ascii: "f"))
            case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
            case 0..<0x20: out += [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 15)]]
            default: out.append(b)
            }
        }
        out.append(0x22)
    }
}

/// A small recursive-descent JSON reader that keeps member order and number text.
struct JSONParser {
    let bytes: [UInt8]
    var pos = 0
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(GrammarError) -> JSONValue {
        let v = try parseValue()
        skipWhitespace()
        guard pos == bytes.count else { throw fail("trailing characters") }
        return v
    }

    func fail(_ what: String) -> GrammarError { .invalidJSON("\(what) at byte \(pos)") }

    mutating func skipWhitespace() {
        while pos < bytes.count, bytes[pos] == 0x20 || bytes[pos] == 0x0A || bytes[pos] == 0x0D || bytes[pos] == 0x09 { pos += 1 }
    }

    mutating func parseValue() throws(GrammarError) -> JSONValue {
        skipWhitespace()
        guard pos < bytes.count else { throw fail("unexpected end") }
        depth += 1
        defer { depth -= 1 }
        guard depth < 512 else { throw fail("nesting too deep") }
        switch bytes[pos] {
        case UInt8(ascii: "{"):
            pos += 1
            var members: [(key: String, value: JSONValue)] = []
            skipWhitespace()
            if pos < bytes.count, bytes[pos] == UInt8(ascii: "}") { pos += 1; return .object(members) }
            while true {
                skipWhitespace()
                guard pos < bytes.count, bytes[pos] == 0x22 else { throw fail("expected a member name") }
                let key = try parseString()
                skipWhitespace()
                guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                pos += 1
                let value = try parseValue()
                if let i = members.firstIndex(where: { $0.key == key }) { members[i].value = value } else { members.append((key, value)) }
                skipWhitespace()
                guard pos < bytes.count else { throw fail("unexpected end") }
                if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if bytes[pos] == UInt8(ascii: "}") { pos += 1; return .object(members) }
                throw fail("expected ',' or '}'")
            }
        case UInt8(ascii: "["):
            pos += 1
            var items: [JSONValue] = []
            skipWhitespace()
            if pos < bytes.count, bytes[pos] == UInt8(ascii: "]") { pos += 1; return .array(items) }
            while true {
                items.append(try parseValue())
                skipWhitespace()
                guard pos < bytes.count else { throw fail("unexpected end") }
                if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if bytes[pos] == UInt8(ascii: "]") { pos += 1; return .array(items) }
                throw fail("expected ',' or ']'")
            }
        case 0x22:
            return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default:
            let start = pos
            if bytes[pos] == UInt8(ascii: "-") { pos += 1 }
            func digits(_ p: inout Int, _ b: [UInt8]) -> Int { let s = p; while p < b.count, b[p] >= 0x30, b[p] <= 0x39 { p += 1 }; return p - s }
            let intDigits = digits(&pos, bytes)
            guard intDigits > 0 else { throw fail("unexpected character") }
            if intDigits > 1, bytes[pos - intDigits] == 0x30 { throw fail("leading zero") }
            if pos < bytes.count, bytes[pos] == UInt8(ascii: ".") {
                pos += 1
                guard digits(&pos, bytes) > 0 else { throw fail("expected digits") }
            }
            if pos < bytes.count, bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E") {
                pos += 1
                if pos < bytes.count, bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-") { pos += 1 }
                guard digits(&pos, bytes) > 0 else { throw fail("expected exponent digits") }
            }
            return .number(String(decoding: bytes[start..<pos], as: UTF8.self))
        }
    }

    mutating func literal(_ word: String) throws(GrammarError) {
        let w = Array(word.utf8)
        guard pos + w.count <= bytes.count, Array(bytes[pos..<pos + w.count]) == w else { throw fail("unexpected character") }
        pos += w.count
    }

    mutating func hex4() throws(GrammarError) -> UInt32 {
        guard pos + 4 <= bytes.count else { throw fail("bad \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[pos]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw fail("bad \\u escape")
            }
            v = v * 16 + d
            pos += 1
        }
        return v
    }

    mutating func parseString() throws(GrammarError) -> String {
        pos += 1
        var out: [UInt8] = []
        while true {
            guard pos < bytes.count else { throw fail("unterminated string") }
            let c = bytes[pos]
            if c == 0x22 { pos += 1; break }
            if c < 0x20 { throw fail("control character in string") }
            if c != 0x5C { out.append(c); pos += 1; continue }
            pos += 1
            guard pos < bytes.count else { throw fail("unterminated string") }
            let e = bytes[pos]
            pos += 1
            switch e {
            case 0x22, 0x5C, 0x2F: out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var v = try hex4()
                if v >= 0xD800, v < 0xDC00, pos + 6 <= bytes.count, bytes[pos] == 0x5C, bytes[pos + 1] == UInt8(ascii: "u") {
                    let save = pos
                    pos += 2
                    let lo = try hex4()
                    if lo >= 0xDC00, lo < 0xE000 { v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00) } else { pos = save }
                }
                out += Array(String(Unicode.Scalar(v) ?? "\u{FFFD}").utf8)
            default: throw fail("bad escape")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8 in string") }
        return s
    }
}

/// An exact decimal: sign, digits and a power-of-ten exponent. Used for bounds and multipleOf.
struct DecimalNumber: Hashable, CustomStringConvertible {
    /// Significant digits without leading or trailing zeros (empty for zero).
    var digits: [UInt8]
    /// value = digits × 10^exponent
    var exponent: Int
    var negative: Bool

    init?(_ text: String) {
        var bytes = Array(text.utf8)[...]
        negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes = bytes.dropFirst() }
        var mantissa: [UInt8] = []
        var exp = 0
        var seenDot = false
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let c = bytes[i]
            if c >= 0x30 && c <= 0x39 { mantissa.append(c - 0x30); if seenDot { exp -= 1 } }
            else if c == UInt8(ascii: ".") { if seenDot { return nil }; seenDot = true }
            else if c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                guard let e = Int(String(decoding: bytes[(i + 1)...], as: UTF8.self)), abs(e) < 100_000 else { return nil }
                exp += e
                break
            } else { return nil }
            i += 1
        }
        if mantissa.isEmpty { return nil }
        while let f = mantissa.first, f == 0 { mantissa.removeFirst() }
        while let l = mantissa.last, l == 0 { mantissa.removeLast(); exp += 1 }
        if mantissa.isEmpty { exp = 0; negative = false }
        digits = mantissa
        exponent = exp
    }

    init(integer: Int) { self.init(String(integer))! }

    var isZero: Bool { digits.isEmpty }
    var isInteger: Bool { isZero || exponent >= 0 }
    var intValue: Int? {
        guard isInteger, digits.count + exponent <= 18 else { return nil }
        var v = 0
        for d in digits { v = v * 10 + Int(d) }
        for _ in 0..<max(exponent, 0) { v *= 10 }
        return negative ? -v : v
    }
    /// Digits of the integer part of |value| ([0] for values below one).
    var integerPartDigits: [UInt8] {
        let n = digits.count + exponent
        if n <= 0 { return [0] }
        var r = Array(digits.prefix(n))
        while r.count < n { r.append(0) }
        return r
    }
    /// Digits of the fractional part of |value| (no trailing zeros; empty when whole).
    var fractionDigits: [UInt8] {
        if exponent >= 0 { return [] }
        let fracLen = -exponent
        if digits.count >= fracLen { return Array(digits.suffix(fracLen)) }
        return Array(repeating: 0, count: fracLen - digits.count) + digits
    }
    var magnitude: DecimalNumber { var m = self; m.negative = false; return m }
    var description: String {
        let ip = integerPartDigits.map { String($0) }.joined()
        let fp = fractionDigits.map { String($0) }.joined()
        return (negative ? "-" : "") + ip + (fp.isEmpty ? "" : "." + fp)
    }
    static func < (a: DecimalNumber, b: DecimalNumber) -> Bool {
        if a.negative != b.negative { return a.negative }
        return a.negative ? DecimalNumber.magnitudeLess(b, a) : DecimalNumber.magnitudeLess(a, b)
    }
    static func magnitudeLess(_ a: DecimalNumber, _ b: DecimalNumber) -> Bool {
        if a.isZero { return !b.isZero }
        if b.isZero { return false }
        let ma = a.digits.count + a.exponent, mb = b.digits.count + b.exponent
        if ma != mb { return ma < mb }
        let n = max(a.digits.count, b.digits.count)
        for i in 0..<n {
            let x = i < a.digits.count ? a.digits[i] : 0, y = i < b.digits.count ? b.digits[i] : 0
            if x != y { return x < y }
        }
        return false
    }
}
