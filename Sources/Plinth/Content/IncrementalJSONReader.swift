import Foundation

/// Reads JSON as it streams in, one appended piece at a time, and gives a snapshot of the value
/// so far whenever asked, without reading the earlier text again.
///
/// It keeps the parser's state between pieces: the containers that are open (with the members
/// they already hold, as finished `GeneratedContent`), the key being filled, and the scalar being
/// read. A snapshot wraps the scalar in the open containers, so it costs the depth of the value
/// plus copying the open containers' members, never a parse. Snapshots are those of
/// `PartialJSONParser.parse(text, final: false)` on the text so far (a test checks every cut).
struct IncrementalJSONReader {
    private enum Frame {
        case array([GeneratedContent])
        case object(keys: [String], values: [String: GeneratedContent], key: String?)
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
        case string(String.UnicodeScalarView, Escape, isKey: Bool)
        case number([UInt8])
        case literal(word: [UInt8], matched: Int, value: GeneratedContent.Kind)
    }

    private var stack: [Frame] = []
    private var expect = Expect.value
    private var scalar = Scalar.none
    private var root: GeneratedContent?
    /// Every byte read so far, for error messages.
    private var offset = 0
    private var text = ""

    /// Reads the next piece of the text.
    ///
    /// - Throws: `GeneratedContent.ParsingError` when the text can't be the beginning of JSON.
    mutating func append(_ piece: String) throws {
        text += piece
        for byte in piece.utf8 {
            try read(byte)
            offset += 1
        }
    }

    /// The value so far; nil while nothing representable has started.
    var snapshot: GeneratedContent? {
        if let root { return root }
        var child: GeneratedContent?
        switch scalar {
        case .string(let s, _, isKey: false): child = GeneratedContent(storage: .string(String(s)), complete: false)
        case .number(let bytes): child = Self.partialNumber(bytes)
        default: break
        }
        for frame in stack.reversed() {
            switch frame {
            case .array(var elements):
                if let child { elements.append(child) }
                child = GeneratedContent(storage: .array(elements), complete: false)
            case .object(var keys, var values, let key):
                if let key, let child {
                    if values[key] == nil { keys.append(key) }
                    values[key] = child
                }
                child = GeneratedContent(storage: .structure(properties: values, orderedKeys: keys), complete: false)
            }
        }
        return child
    }

    private static func isWhitespace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }

    private static func isNumberByte(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: "+")
            || c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E")
    }

    /// A number the text may still extend: the longest prefix that reads as one.
    private static func partialNumber(_ bytes: [UInt8]) -> GeneratedContent? {
        var prefix = Substring(String(decoding: bytes, as: UTF8.self))
        while !prefix.isEmpty, Double(prefix) == nil { prefix = prefix.dropLast() }
        return Double(prefix).map { GeneratedContent(storage: .number($0), complete: false) }
    }

    private func error(_ message: String) -> GeneratedContent.ParsingError {
        GeneratedContent.ParsingError(rawContent: text, debugDescription: "\(message) at offset \(offset).")
    }

    private mutating func read(_ b: UInt8) throws {
        switch scalar {
        case .none: break
        case .string(var s, let escape, let isKey):
            scalar = .none  // keeps `s` uniquely referenced while it grows
            if let done = try readString(b, &s, escape, isKey: isKey) {
                if isKey { setKey(done) } else { try finish(GeneratedContent(storage: .string(done), complete: true)) }
            }
            return
        case .number(var bytes):
            if Self.isNumberByte(b) {
                scalar = .none
                bytes.append(b)
                scalar = .number(bytes)
                return
            }
            scalar = .none
            let literal = String(decoding: bytes, as: UTF8.self)
            guard let value = Double(literal) else { throw error("Invalid number '\(literal)'") }
            try finish(GeneratedContent(storage: .number(value), complete: true))
            // The byte that ended the number is read as what follows it.
        case .literal(let word, let matched, let value):
            guard b == word[matched] else {
                throw error("Invalid literal, expected '\(String(decoding: word, as: UTF8.self))'")
            }
            if matched + 1 == word.count {
                scalar = .none
                try finish(GeneratedContent(storage: value, complete: true))
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
            scalar = .string(String.UnicodeScalarView(), .none, isKey: true)
        case .colon:
            guard b == UInt8(ascii: ":") else { throw error("Expected ':' after property name") }
            expect = .value
        case .commaOrClose:
            guard case .object? = stack.last else {
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

    private mutating func startValue(_ b: UInt8) throws {
        switch b {
        case UInt8(ascii: "{"):
            stack.append(.object(keys: [], values: [:], key: nil))
            expect = .keyOrClose
        case UInt8(ascii: "["):
            stack.append(.array([]))
            expect = .valueOrClose
        case UInt8(ascii: "\""): scalar = .string(String.UnicodeScalarView(), .none, isKey: false)
        case UInt8(ascii: "t"): scalar = .literal(word: Array("true".utf8), matched: 1, value: .bool(true))
        case UInt8(ascii: "f"): scalar = .literal(word: Array("false".utf8), matched: 1, value: .bool(false))
        case UInt8(ascii: "n"): scalar = .literal(word: Array("null".utf8), matched: 1, value: .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): scalar = .number([b])
        default: throw error("Unexpected character '\(Character(Unicode.Scalar(b)))'")
        }
    }

    /// Reads one byte of a string; returns the string when this byte closed it.
    private mutating func readString(_ b: UInt8, _ s: inout String.UnicodeScalarView, _ escape: Escape,
                                     isKey: Bool) throws -> String? {
        var next = Escape.none
        switch escape {
        case .none:
            if b == UInt8(ascii: "\"") { return String(s) }
            if b == UInt8(ascii: "\\") {
                next = .backslash
            } else {
                appendByte(b, to: &s)
            }
        case .backslash:
            switch (b, JSONEscape.character(b)) {
            case (_, let c?): s.append(c)
            case (UInt8(ascii: "u"), nil): next = .hex(digits: 0, value: 0, high: nil)
            default: throw error("Invalid escape '\\\(Character(Unicode.Scalar(b)))'")
            }
        case .hex(let digits, let value, let high):
            guard let digit = JSONEscape.hexValue(b) else { throw error("Invalid unicode escape") }
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
                s.append(scalar)
            } else if (0xD800...0xDBFF).contains(unit) {
                next = .low(high: unit, sawBackslash: false)
            } else {
                guard let scalar = Unicode.Scalar(unit) else { throw error("Invalid unicode escape") }
                s.append(scalar)
            }
        case .low(let high, let sawBackslash):
            let expected = sawBackslash ? UInt8(ascii: "u") : UInt8(ascii: "\\")
            guard b == expected else { throw error("Unpaired surrogate in string") }
            next = sawBackslash ? .hex(digits: 0, value: 0, high: high) : .low(high: high, sawBackslash: true)
        }
        scalar = .string(s, next, isKey: isKey)
        return nil
    }

    /// UTF-8 arrives a byte at a time; a scalar is added when its last byte is in.
    private var pendingUTF8: [UInt8] = []

    private mutating func appendByte(_ b: UInt8, to s: inout String.UnicodeScalarView) {
        if b < 0x80 && pendingUTF8.isEmpty {
            s.append(Unicode.Scalar(b))
            return
        }
        pendingUTF8.append(b)
        let lead = pendingUTF8[0]
        let length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
        guard pendingUTF8.count >= length else { return }
        s.append(contentsOf: String(decoding: pendingUTF8, as: UTF8.self).unicodeScalars)
        pendingUTF8.removeAll(keepingCapacity: true)
    }

    private mutating func setKey(_ key: String) {
        guard case .object(let keys, let values, _)? = stack.popLast() else { return }
        stack.append(.object(keys: keys, values: values, key: key))
        expect = .colon
    }

    private mutating func closeContainer() throws {
        guard let frame = stack.popLast() else { return }
        switch frame {
        case .array(let elements): try finish(GeneratedContent(storage: .array(elements), complete: true))
        case .object(let keys, let values, _):
            try finish(GeneratedContent(storage: .structure(properties: values, orderedKeys: keys), complete: true))
        }
    }

    /// Puts a finished value into the container that holds it, or makes it the root.
    private mutating func finish(_ value: GeneratedContent) throws {
        guard let frame = stack.popLast() else {
            root = value
            expect = .end
            return
        }
        switch frame {
        case .array(var elements):
            elements.append(value)
            stack.append(.array(elements))
        case .object(var keys, var values, let key):
            guard let key else { throw error("A value without a property name") }
            if values[key] == nil { keys.append(key) }
            values[key] = value
            stack.append(.object(keys: keys, values: values, key: nil))
        }
        expect = .commaOrClose
    }
}
