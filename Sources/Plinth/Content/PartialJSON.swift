import Foundation
internal import PlinthRuntime

/// Parses JSON, and the beginning of JSON that is still being written, into `GeneratedContent`.
///
/// Values that have started are kept: a string or number is cut where the text ends, an object
/// keeps the properties whose value has started, an array the elements that have started. A key
/// that isn't finished and a literal (`true`, `false`, `null`) that isn't finished are dropped.
struct PartialJSONParser {
    private let bytes: [UInt8]
    private var index = 0
    private let text: String
    /// Whether the text is all there is: a number that ends with the text is then complete.
    private let final: Bool

    private init(_ text: String, final: Bool) {
        self.text = text
        self.final = final
        self.bytes = Array(text.utf8)
    }

    /// Signals that the input ended inside a value.
    private struct EndOfInput: Error {}

    static func parse(_ text: String, final: Bool = true) throws -> GeneratedContent {
        var parser = PartialJSONParser(text, final: final)
        parser.skipWhitespace()
        guard parser.index < parser.bytes.count else {
            throw GeneratedContent.ParsingError(rawContent: text, debugDescription: "The text is empty.")
        }
        guard let value = try parser.parseValue() else {
            // Only the start of a literal: nothing that can be represented yet.
            throw GeneratedContent.ParsingError(rawContent: text, debugDescription: "The text holds no value yet.")
        }
        if value.complete {
            parser.skipWhitespace()
            if parser.index < parser.bytes.count {
                throw parser.error("Unexpected text after the end of the value")
            }
        }
        return value
    }

    private func error(_ message: String) -> GeneratedContent.ParsingError {
        GeneratedContent.ParsingError(rawContent: text, debugDescription: "\(message) at offset \(index).")
    }

    private var atEnd: Bool { index >= bytes.count }

    private mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    /// Parses one value; `nil` when the input ends before anything representable.
    private mutating func parseValue() throws -> GeneratedContent? {
        skipWhitespace()
        guard !atEnd else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""):
            let (string, done) = try parseString()
            return GeneratedContent(storage: .string(string), complete: done)
        case UInt8(ascii: "t"): return try parseLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try parseLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try parseLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("Unexpected character '\(Character(Unicode.Scalar(bytes[index])))'")
        }
    }

    private mutating func parseLiteral(_ word: String, _ kind: GeneratedContent.Kind) throws -> GeneratedContent? {
        for expected in word.utf8 {
            guard !atEnd else { return nil }
            guard bytes[index] == expected else { throw error("Invalid literal, expected '\(word)'") }
            index += 1
        }
        return GeneratedContent(storage: kind, complete: true)
    }

    private mutating func parseNumber() throws -> GeneratedContent? {
        let start = index
        while index < bytes.count {
            let c = bytes[index]
            let isNumberByte = (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || c == UInt8(ascii: "-") || c == UInt8(ascii: "+") || c == UInt8(ascii: ".")
                || c == UInt8(ascii: "e") || c == UInt8(ascii: "E")
            guard isNumberByte else { break }
            index += 1
        }
        let literal = String(decoding: bytes[start..<index], as: UTF8.self)
        let done = !atEnd || final
        if let value = Double(literal) {
            return GeneratedContent(storage: .number(value), complete: done)
        }
        guard !done else { throw error("Invalid number '\(literal)'") }
        // The input stops inside the number ("-", "1.", "1e"): keep the digits written so far.
        var prefix = Substring(literal)
        while !prefix.isEmpty, Double(prefix) == nil { prefix = prefix.dropLast() }
        guard let value = Double(prefix) else { return nil }
        return GeneratedContent(storage: .number(value), complete: false)
    }

    /// Returns the string and whether its closing quote was seen.
    private mutating func parseString() throws -> (String, Bool) {
        index += 1  // opening quote
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flush(_ parser: PartialJSONParser, to end: Int) {
            scalars.append(contentsOf: String(decoding: parser.bytes[runStart..<end], as: UTF8.self).unicodeScalars)
        }
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                flush(self, to: index)
                index += 1
                return (String(scalars), true)
            }
            if c == UInt8(ascii: "\\") {
                flush(self, to: index)
                index += 1
                guard index < bytes.count else { return (String(scalars), false) }
                let e = bytes[index]
                index += 1
                switch (e, JSONEscape.character(e)) {
                case (_, let c?): scalars.append(c)
                case (UInt8(ascii: "u"), nil):
                    guard let unit = try readHex4() else { return (String(scalars), false) }
                    if (0xD800...0xDBFF).contains(unit) {
                        // A surrogate pair: the low half follows as another \u escape.
                        guard index < bytes.count else { return (String(scalars), false) }
                        guard bytes[index] == UInt8(ascii: "\\") else { throw error("Unpaired surrogate in string") }
                        guard index + 1 < bytes.count else { return (String(scalars), false) }
                        guard bytes[index + 1] == UInt8(ascii: "u") else { throw error("Unpaired surrogate in string") }
                        index += 2
                        guard let low = try readHex4() else { return (String(scalars), false) }
                        guard (0xDC00...0xDFFF).contains(low),
                              let scalar = Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)) else {
                            throw error("Invalid surrogate pair in string")
                        }
                        scalars.append(scalar)
                    } else {
                        guard let scalar = Unicode.Scalar(unit) else { throw error("Invalid unicode escape") }
                        scalars.append(scalar)
                    }
                default: throw error("Invalid escape '\\\(Character(Unicode.Scalar(e)))'")
                }
                runStart = index
                continue
            }
            index += 1
        }
        flush(self, to: index)
        return (String(scalars), false)
    }

    /// Reads four hex digits; `nil` when the input ends first.
    private mutating func readHex4() throws -> UInt32? {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard index < bytes.count else { return nil }
            guard let digit = JSONEscape.hexValue(bytes[index]) else { throw error("Invalid unicode escape") }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func parseArray() throws -> GeneratedContent {
        index += 1
        var elements: [GeneratedContent] = []
        func partial() -> GeneratedContent { GeneratedContent(storage: .array(elements), complete: false) }
        skipWhitespace()
        guard !atEnd else { return partial() }
        if bytes[index] == UInt8(ascii: "]") {
            index += 1
            return GeneratedContent(storage: .array([]), complete: true)
        }
        while true {
            guard let element = try parseValue() else { return partial() }
            elements.append(element)
            guard element.complete else { return partial() }
            skipWhitespace()
            guard !atEnd else { return partial() }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return GeneratedContent(storage: .array(elements), complete: true)
            default: throw error("Expected ',' or ']' in array")
            }
        }
    }

    private mutating func parseObject() throws -> GeneratedContent {
        index += 1
        var properties: [String: GeneratedContent] = [:]
        var keys: [String] = []
        func make(_ complete: Bool) -> GeneratedContent {
            GeneratedContent(storage: .structure(properties: properties, orderedKeys: keys), complete: complete)
        }
        skipWhitespace()
        guard !atEnd else { return make(false) }
        if bytes[index] == UInt8(ascii: "}") {
            index += 1
            return make(true)
        }
        while true {
            skipWhitespace()
            guard !atEnd else { return make(false) }
            guard bytes[index] == UInt8(ascii: "\"") else { throw error("Expected a property name in object") }
            let (key, keyDone) = try parseString()
            guard keyDone else { return make(false) }
            skipWhitespace()
            guard !atEnd else { return make(false) }
            guard bytes[index] == UInt8(ascii: ":") else { throw error("Expected ':' after property name") }
            index += 1
            guard let value = try parseValue() else { return make(false) }
            if properties[key] == nil { keys.append(key) }
            properties[key] = value
            guard value.complete else { return make(false) }
            skipWhitespace()
            guard !atEnd else { return make(false) }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return make(true)
            default: throw error("Expected ',' or '}' in object")
            }
        }
    }
}

/// The parts of JSON string escapes both parsers read.
enum JSONEscape {
    /// The character of a one-letter escape (`\n`, `\"`, …); nil for `u` and invalid ones.
    static func character(_ c: UInt8) -> Unicode.Scalar? {
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

    static func hexValue(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(c - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}

/// Writes `GeneratedContent` as compact JSON, properties in order.
enum JSONWriter {
    static func write(_ content: GeneratedContent, into out: inout String) {
        write(content, into: &out, prefix: false)
    }

    /// Writes complete values whole and an incomplete one without its end (see
    /// `GeneratedContent.jsonPrefix`); only the last member of a partial container can be
    /// incomplete.
    static func writePrefix(_ content: GeneratedContent, into out: inout String) {
        write(content, into: &out, prefix: true)
    }

    /// With `prefix`, an incomplete value leaves out what would close it: its scalar (not yet
    /// final), a string's closing quote, a container's bracket.
    private static func write(_ content: GeneratedContent, into out: inout String, prefix: Bool) {
        let open = prefix && !content.isComplete
        switch content.storage {
        case .null: if !open { out += "null" }
        case .bool(let b): if !open { out += b ? "true" : "false" }
        case .number(let n): if !open { out += number(n) }
        case .string(let s):
            if open {
                var quoted = ""
                string(s, into: &quoted)
                out += quoted.dropLast()
            } else {
                string(s, into: &out)
            }
        case .array(let elements):
            out += "["
            for (i, e) in elements.enumerated() {
                if i > 0 { out += "," }
                write(e, into: &out, prefix: open)
            }
            if !open { out += "]" }
        case .structure(let properties, let keys):
            out += "{"
            var first = true
            for key in keys {
                guard let value = properties[key] else { continue }
                if !first { out += "," }
                first = false
                string(key, into: &out)
                out += ":"
                write(value, into: &out, prefix: open)
            }
            if !open { out += "}" }
        }
    }

    static func number(_ n: Double) -> String {
        guard n.isFinite else { return "null" }
        if n == n.rounded(), abs(n) < 9.007_199_254_740_992e15 {
            return String(Int64(n))
        }
        return "\(n)"
    }

    static func string(_ s: String, into out: inout String) {
        JSONString.append(s, to: &out)
    }

    static func quoted(_ s: String) -> String {
        var out = ""
        string(s, into: &out)
        return out
    }
}
