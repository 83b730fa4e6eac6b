/// Where JSON text stops being JSON.
public struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    /// The byte offset of the byte that could not be read (the text's length when it ended early).
    public var offset: Int

    public init(_ message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }

    public var description: String { "\(message) at offset \(offset)" }
}

public struct JSONReaderOptions: Sendable {
    /// Containers nested deeper than this are an error (a guard against hostile input).
    public var maxDepth: Int
    /// Read `NaN`, `Infinity` and `-Infinity` as numbers, as Python's `json.loads` does.
    public var allowNonFiniteNumbers: Bool

    public init(maxDepth: Int = 512, allowNonFiniteNumbers: Bool = false) {
        self.maxDepth = maxDepth
        self.allowNonFiniteNumbers = allowNonFiniteNumbers
    }
}

/// A scalar as the reader hands it to a builder.
public enum JSONScalar: Sendable, Equatable {
    case null
    case bool(Bool)
    /// Number text: valid JSON (or a non-finite word when allowed); while the number may still
    /// grow, the longest prefix of it that is a number.
    case number(String)
    case string(String)
}

/// Makes the reader's values: `JSONValue`, or another tree such as generated content, which
/// also records which values are complete.
public protocol JSONTreeBuilder {
    associatedtype Node
    /// `complete` is false only for a string or number that the text may still extend.
    func scalar(_ scalar: JSONScalar, complete: Bool) -> Node
    func array(_ elements: [Node], complete: Bool) -> Node
    /// Members in document order, each name once (a repeated name keeps its first place and
    /// its last value).
    func object(_ members: [(key: String, value: Node)], complete: Bool) -> Node
}

/// Reads JSON as it arrives, a piece at a time, and gives the value so far whenever asked
/// without reading earlier text again; also the whole-document parser.
///
/// The reader keeps the open containers (with their finished members, already built), the name
/// being filled and the scalar being read. A snapshot wraps the scalar in the open containers,
/// so it costs the depth of the value plus copying the open containers' members, never a parse.
/// A snapshot keeps every value that has started: a string or number is cut where the text ends,
/// an object keeps the members whose value has started, an array the elements that have
/// started; a name or a literal (`true`, `false`, `null`) that is not finished is left out.
public struct JSONReader<Builder: JSONTreeBuilder> {
    private typealias Node = Builder.Node

    /// An open array or object. Mutated in place on the stack (`stack[last]`): a frame popped
    /// and pushed back would copy its elements at every value, quadratic in the container's size.
    private struct Frame {
        let isObject: Bool
        var elements: [Node] = []
        var members: [(key: String, value: Node)] = []
        /// A member's place by name.
        var index: [String: Int] = [:]
        /// The name whose value comes next.
        var key: String?

        /// A member's value: a repeated name keeps its first place and takes the last value.
        mutating func set(_ key: String, _ value: Node) {
            if let i = index[key] {
                members[i].value = value
            } else {
                index[key] = members.count
                members.append((key, value))
            }
        }
    }

    private enum Expect { case value, valueOrClose, keyOrClose, key, colon, commaOrClose, end }

    /// Where a string stands inside an escape.
    private enum Escape: Equatable {
        case none, backslash
        case hex(digits: Int, value: UInt32, high: UInt32?)
        /// After a high surrogate: its low half must follow as `\u`.
        case low(high: UInt32, sawBackslash: Bool)
    }

    private enum Scalar {
        case none
        /// The string's UTF-8 so far (escapes decoded), validated when it closes.
        case string([UInt8], Escape, isKey: Bool)
        case number([UInt8])
        case literal(word: [UInt8], matched: Int, value: JSONScalar)
    }

    public let builder: Builder
    public let options: JSONReaderOptions
    private var stack: [Frame] = []
    private var expect = Expect.value
    private var scalar = Scalar.none
    private var root: Node?
    /// Bytes read so far.
    public private(set) var offset = 0

    public init(builder: Builder, options: JSONReaderOptions = .init()) {
        self.builder = builder
        self.options = options
    }

    /// Parses a whole document: the value, with nothing but whitespace around it.
    public static func parse(_ bytes: some Sequence<UInt8>, builder: Builder,
                             options: JSONReaderOptions = .init()) throws(JSONSyntaxError) -> Builder.Node {
        var reader = JSONReader(builder: builder, options: options)
        try reader.append(bytes)
        try reader.end()
        guard let root = reader.root else {
            throw JSONSyntaxError(reader.offset == 0 ? "The text is empty" : "The text ends inside the value",
                                  offset: reader.offset)
        }
        return root
    }

    /// Reads the next piece of the text.
    public mutating func append(_ bytes: some Sequence<UInt8>) throws(JSONSyntaxError) {
        // Contiguous bytes (arrays, Data, native strings' UTF-8) are read through a buffer, which
        // callers in other modules reach without a generic iterator per byte.
        var failure: JSONSyntaxError?
        let contiguous: Bool? = bytes.withContiguousStorageIfAvailable { buffer in
            do throws(JSONSyntaxError) { try append(buffer: buffer) } catch { failure = error }
            return true
        }
        if let failure { throw failure }
        if contiguous == true { return }
        for byte in bytes {
            try read(byte)
            offset += 1
        }
    }

    private mutating func append(buffer: UnsafeBufferPointer<UInt8>) throws(JSONSyntaxError) {
        var i = 0
        while i < buffer.count {
            // Runs that need no decision are taken whole: whitespace between values, and a
            // string's bytes up to its next quote, backslash or control character.
            switch scalar {
            case .none where Self.isWhitespace(buffer[i]):
                i += 1
                offset += 1
                continue
            case .string(var s, .none, let isKey):
                var j = i
                while j < buffer.count, buffer[j] >= 0x20, buffer[j] != 0x22, buffer[j] != 0x5C { j += 1 }
                if j > i {
                    scalar = .none  // keeps `s` uniquely referenced while it grows
                    s.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[i..<j]))
                    scalar = .string(s, .none, isKey: isKey)
                    offset += j - i
                    i = j
                    continue
                }
            default: break
            }
            try read(buffer[i])
            offset += 1
            i += 1
        }
    }

    /// The text is over: a number that reaches its end is complete (one cut short, such as `1.`,
    /// stays a partial value). The value is then `snapshot`, complete when `isComplete`.
    public mutating func end() throws(JSONSyntaxError) {
        guard case .number(let bytes) = scalar, !JSONNumberSyntax.isNumberStart(bytes) || JSONNumberSyntax.isNumber(bytes)
        else { return }
        scalar = .none
        try finish(try number(bytes))
    }

    /// Whether a whole value has been read.
    public var isComplete: Bool { root != nil }

    /// The value so far; nil while nothing representable has started.
    public var snapshot: Builder.Node? {
        if let root { return root }
        var child: Node?
        switch scalar {
        case .string(let s, _, isKey: false):
            child = builder.scalar(.string(String(decoding: s[..<Self.wholeScalars(s)], as: UTF8.self)), complete: false)
        case .number(let bytes):
            if let prefix = JSONNumberSyntax.longestNumberPrefix(bytes) {
                child = builder.scalar(.number(prefix), complete: false)
            }
        default: break
        }
        for var frame in stack.reversed() {  // a copy: the frames themselves stay as they are
            if frame.isObject {
                if let key = frame.key, let child { frame.set(key, child) }
                child = builder.object(frame.members, complete: false)
            } else {
                if let child { frame.elements.append(child) }
                child = builder.array(frame.elements, complete: false)
            }
        }
        return child
    }

    private func error(_ message: String) -> JSONSyntaxError { JSONSyntaxError(message, offset: offset) }

    private static func isWhitespace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }

    private static func isNumberByte(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: "+")
            || c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E")
    }

    private func number(_ bytes: [UInt8]) throws(JSONSyntaxError) -> Node {
        let literal = String(decoding: bytes, as: UTF8.self)
        guard JSONNumberSyntax.isNumber(bytes) else { throw error("Invalid number '\(literal)'") }
        return builder.scalar(.number(literal), complete: true)
    }

    private mutating func read(_ b: UInt8) throws(JSONSyntaxError) {
        switch scalar {
        case .none: break
        case .string(var s, let escape, let isKey):
            scalar = .none  // keeps `s` uniquely referenced while it grows
            if let done = try readString(b, &s, escape, isKey: isKey) {
                if isKey { setKey(done) } else { try finish(builder.scalar(.string(done), complete: true)) }
            }
            return
        case .number(var bytes):
            if bytes == [UInt8(ascii: "-")], b == UInt8(ascii: "I"), options.allowNonFiniteNumbers {
                scalar = .literal(word: Array("-Infinity".utf8), matched: 2, value: .number("-Infinity"))
                return
            }
            if Self.isNumberByte(b) {
                scalar = .none
                bytes.append(b)
                scalar = .number(bytes)
                return
            }
            scalar = .none
            try finish(try number(bytes))
        // The byte that ended the number is read as what follows it.
        case .literal(let word, let matched, let value):
            guard b == word[matched] else {
                throw error("Invalid literal, expected '\(String(decoding: word, as: UTF8.self))'")
            }
            if matched + 1 == word.count {
                scalar = .none
                try finish(builder.scalar(value, complete: true))
            } else {
                scalar = .literal(word: word, matched: matched + 1, value: value)
            }
            return
        }
        if Self.isWhitespace(b) { return }
        switch expect {
        case .end:
            throw error("Unexpected text after the end of the value")
        case .value, .valueOrClose:
            if expect == .valueOrClose && b == UInt8(ascii: "]") { return try closeContainer() }
            try startValue(b)
        case .keyOrClose, .key:
            if expect == .keyOrClose && b == UInt8(ascii: "}") { return try closeContainer() }
            guard b == UInt8(ascii: "\"") else { throw error("Expected a property name in object") }
            scalar = .string([], .none, isKey: true)
        case .colon:
            guard b == UInt8(ascii: ":") else { throw error("Expected ':' after property name") }
            expect = .value
        case .commaOrClose:
            guard stack.last?.isObject == true else {
                switch b {
                case UInt8(ascii: ","): expect = .value
                case UInt8(ascii: "]"): try closeContainer()
                default: throw error("Expected ',' or ']' in array")
                }
                return
            }
            switch b {
            case UInt8(ascii: ","): expect = .key
            case UInt8(ascii: "}"): try closeContainer()
            default: throw error("Expected ',' or '}' in object")
            }
        }
    }

    private mutating func startValue(_ b: UInt8) throws(JSONSyntaxError) {
        switch b {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard stack.count < options.maxDepth else { throw error("Nested more than \(options.maxDepth) levels deep") }
            if b == UInt8(ascii: "{") {
                stack.append(Frame(isObject: true))
                expect = .keyOrClose
            } else {
                stack.append(Frame(isObject: false))
                expect = .valueOrClose
            }
        case UInt8(ascii: "\""): scalar = .string([], .none, isKey: false)
        case UInt8(ascii: "t"): scalar = .literal(word: Array("true".utf8), matched: 1, value: .bool(true))
        case UInt8(ascii: "f"): scalar = .literal(word: Array("false".utf8), matched: 1, value: .bool(false))
        case UInt8(ascii: "n"): scalar = .literal(word: Array("null".utf8), matched: 1, value: .null)
        case UInt8(ascii: "N") where options.allowNonFiniteNumbers:
            scalar = .literal(word: Array("NaN".utf8), matched: 1, value: .number("NaN"))
        case UInt8(ascii: "I") where options.allowNonFiniteNumbers:
            scalar = .literal(word: Array("Infinity".utf8), matched: 1, value: .number("Infinity"))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): scalar = .number([b])
        default: throw error("Unexpected character '\(Character(Unicode.Scalar(b)))'")
        }
    }

    /// Reads one byte of a string; returns the string when this byte closed it.
    private mutating func readString(_ b: UInt8, _ s: inout [UInt8], _ escape: Escape,
                                     isKey: Bool) throws(JSONSyntaxError) -> String? {
        var next = Escape.none
        switch escape {
        case .none:
            if b == UInt8(ascii: "\"") {
                guard let string = String(strictUTF8: s) else { throw error("Invalid UTF-8 in string") }
                return string
            }
            if b < 0x20 { throw error("Control character in string") }
            if b == UInt8(ascii: "\\") { next = .backslash } else { s.append(b) }
        case .backslash:
            switch (b, Self.escaped(b)) {
            case (_, let c?): s.append(UInt8(c.value))
            case (UInt8(ascii: "u"), nil): next = .hex(digits: 0, value: 0, high: nil)
            default: throw error("Invalid escape '\\\(Character(Unicode.Scalar(b)))'")
            }
        case .hex(let digits, let value, let high):
            guard let digit = Self.hexValue(b) else { throw error("Invalid unicode escape") }
            let unit = value << 4 | digit
            guard digits == 3 else {
                next = .hex(digits: digits + 1, value: unit, high: high)
                break
            }
            if let high {
                guard (0xDC00...0xDFFF).contains(unit),
                      let scalar = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)) else {
                    throw error("Invalid surrogate pair in string")
                }
                Self.append(scalar, to: &s)
            } else if (0xD800...0xDBFF).contains(unit) {
                next = .low(high: unit, sawBackslash: false)
            } else {
                guard let scalar = Unicode.Scalar(unit) else { throw error("Unpaired surrogate in string") }
                Self.append(scalar, to: &s)
            }
        case .low(let high, let sawBackslash):
            let expected = sawBackslash ? UInt8(ascii: "u") : UInt8(ascii: "\\")
            guard b == expected else { throw error("Unpaired surrogate in string") }
            next = sawBackslash ? .hex(digits: 0, value: 0, high: high) : .low(high: high, sawBackslash: true)
        }
        scalar = .string(s, next, isKey: isKey)
        return nil
    }

    /// The character of a one-letter escape (`\n`, `\"`, …); nil for `u` and invalid ones.
    private static func escaped(_ c: UInt8) -> Unicode.Scalar? {
        switch c {
        case UInt8(ascii: "\""): "\""
        case UInt8(ascii: "\\"): "\\"
        case UInt8(ascii: "/"): "/"
        case UInt8(ascii: "b"): "\u{08}"
        case UInt8(ascii: "f"): "\u{0C}"
        case UInt8(ascii: "n"): "\n"
        case UInt8(ascii: "r"): "\r"
        case UInt8(ascii: "t"): "\t"
        default: nil
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(c - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    private static func append(_ scalar: Unicode.Scalar, to s: inout [UInt8]) {
        UTF8.encode(scalar) { s.append($0) }
    }

    /// The length of the bytes' prefix that ends on a whole scalar: a sequence still arriving is
    /// left out of a snapshot.
    private static func wholeScalars(_ s: [UInt8]) -> Int {
        var i = s.count
        while i > 0, s.count - i < 4, s[i - 1] & 0xC0 == 0x80 { i -= 1 }
        guard i > 0 else { return s.count }
        let lead = s[i - 1], need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
        return s.count - (i - 1) < need ? i - 1 : s.count
    }

    private mutating func setKey(_ key: String) {
        guard let last = stack.indices.last, stack[last].isObject else { return }
        stack[last].key = key
        expect = .colon
    }

    private mutating func closeContainer() throws(JSONSyntaxError) {
        guard let frame = stack.popLast() else { return }
        try finish(frame.isObject ? builder.object(frame.members, complete: true) : builder.array(frame.elements, complete: true))
    }

    /// Puts a finished value into the container that holds it, or makes it the root.
    private mutating func finish(_ value: Node) throws(JSONSyntaxError) {
        guard let last = stack.indices.last else {
            root = value
            expect = .end
            return
        }
        if stack[last].isObject {
            guard let key = stack[last].key else { throw error("A value without a property name") }
            stack[last].set(key, value)
            stack[last].key = nil
        } else {
            stack[last].elements.append(value)
        }
        expect = .commaOrClose
    }
}

/// JSON's number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
enum JSONNumberSyntax {
    /// The length of the longest prefix that is a number, and how far the bytes follow the
    /// grammar (all of them when they are a number or the start of one).
    private static func scan(_ bytes: [UInt8]) -> (longest: Int, followed: Int) {
        func isDigit(_ i: Int) -> Bool { i < bytes.count && bytes[i] >= 0x30 && bytes[i] <= 0x39 }
        var i = 0
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard isDigit(i) else { return (0, i) }
        if bytes[i] == 0x30 { i += 1 } else { while isDigit(i) { i += 1 } }
        var longest = i
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard isDigit(i) else { return (longest, i) }
            while isDigit(i) { i += 1 }
            longest = i
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard isDigit(i) else { return (longest, i) }
            while isDigit(i) { i += 1 }
            longest = i
        }
        return (longest, i)
    }

    static func isNumber(_ bytes: [UInt8]) -> Bool { scan(bytes).longest == bytes.count }

    /// Whether more text could make `bytes` a number (`-`, `1.`, `2e+`).
    static func isNumberStart(_ bytes: [UInt8]) -> Bool { scan(bytes).followed == bytes.count }

    /// The longest prefix that is a number; nil when there is none yet (`-`).
    static func longestNumberPrefix(_ bytes: [UInt8]) -> String? {
        let n = scan(bytes).longest
        return n > 0 ? String(decoding: bytes[..<n], as: UTF8.self) : nil
    }
}
