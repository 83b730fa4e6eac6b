extension Jinja {
    /// A JSON parser with Python's `json.loads` behaviour: keys keep their order, a repeated key
    /// keeps its first position and last value, integers stay integers, `NaN` and `Infinity`
    /// are accepted, control characters inside strings are not.
    struct JSONParser {
        private let bytes: [UInt8]
        private var i = 0
        private var depth = 0
        /// Python's `json` gives up at about this nesting depth (its recursion limit).
        static let maxDepth = 1000

        init(_ text: String) {
            bytes = Array(text.utf8)
        }

        private func error(_ message: String) -> ChatTemplateError {
            .invalidJSON(message, offset: i)
        }

        mutating func parseDocument() throws(ChatTemplateError) -> JinjaValue {
            skipWhitespace()
            let value = try parseValue()
            skipWhitespace()
            guard i == bytes.count else { throw error("extra data after the JSON value") }
            return value
        }

        private mutating func skipWhitespace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        private mutating func literal(_ word: String) -> Bool {
            let w = Array(word.utf8)
            guard i + w.count <= bytes.count, Array(bytes[i..<(i + w.count)]) == w else { return false }
            i += w.count
            return true
        }

        private mutating func enter() throws(ChatTemplateError) {
            guard depth < JSONParser.maxDepth else { throw error("nested more than \(JSONParser.maxDepth) levels deep") }
            depth += 1
        }

        private mutating func parseValue() throws(ChatTemplateError) -> JinjaValue {
            guard i < bytes.count else { throw error("expecting a value, found the end of the text") }
            switch bytes[i] {
            case UInt8(ascii: "{"):
                try enter()
                defer { depth -= 1 }
                i += 1
                var object = JinjaObject()
                skipWhitespace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(object) }
                while true {
                    skipWhitespace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
                        throw error("expecting a property name in double quotes")
                    }
                    let key = try parseString()
                    skipWhitespace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw error("expecting ':' delimiter") }
                    i += 1
                    skipWhitespace()
                    object[key] = try parseValue()
                    skipWhitespace()
                    guard i < bytes.count else { throw error("expecting ',' or '}'") }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(object) }
                    throw error("expecting ',' delimiter")
                }
            case UInt8(ascii: "["):
                try enter()
                defer { depth -= 1 }
                i += 1
                var items: [JinjaValue] = []
                skipWhitespace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                while true {
                    skipWhitespace()
                    items.append(try parseValue())
                    skipWhitespace()
                    guard i < bytes.count else { throw error("expecting ',' or ']'") }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                    throw error("expecting ',' delimiter")
                }
            case UInt8(ascii: "\""):
                return .string(try parseString())
            default:
                if literal("true") { return .bool(true) }
                if literal("false") { return .bool(false) }
                if literal("null") { return .null }
                if literal("NaN") { return .double(.nan) }
                if literal("Infinity") { return .double(.infinity) }
                if literal("-Infinity") { return .double(-.infinity) }
                return try parseNumber()
            }
        }

        private func isDigit(_ at: Int) -> Bool {
            at < bytes.count && bytes[at] >= UInt8(ascii: "0") && bytes[at] <= UInt8(ascii: "9")
        }

        private mutating func parseNumber() throws(ChatTemplateError) -> JinjaValue {
            let start = i
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard isDigit(i) else {
                i = start
                throw error("expecting a value")
            }
            if bytes[i] == UInt8(ascii: "0") { i += 1 } else { while isDigit(i) { i += 1 } }
            var isInteger = true
            if i < bytes.count, bytes[i] == UInt8(ascii: "."), isDigit(i + 1) {
                isInteger = false
                i += 1
                while isDigit(i) { i += 1 }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                var j = i + 1
                if j < bytes.count, bytes[j] == UInt8(ascii: "+") || bytes[j] == UInt8(ascii: "-") { j += 1 }
                if isDigit(j) {
                    isInteger = false
                    i = j
                    while isDigit(i) { i += 1 }
                }
            }
            let text = String(decoding: bytes[start..<i], as: UTF8.self)
            if isInteger, let n = Int(text) { return .int(n) }
            guard let d = Double(text) else { throw error("invalid number '\(text)'") }
            return .double(d)
        }

        private mutating func hex4() throws(ChatTemplateError) -> UInt32 {
            guard i + 4 <= bytes.count else { throw error("invalid \\uXXXX escape") }
            var v: UInt32 = 0
            for k in 0..<4 {
                let b = bytes[i + k]
                let d: UInt32
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(b - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(b - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(b - UInt8(ascii: "A") + 10)
                default: throw error("invalid \\uXXXX escape")
                }
                v = v * 16 + d
            }
            i += 4
            return v
        }

        private mutating func parseString() throws(ChatTemplateError) -> String {
            i += 1  // opening quote
            var out: [UInt8] = []
            while true {
                guard i < bytes.count else { throw error("unterminated string") }
                let b = bytes[i]
                if b == UInt8(ascii: "\"") { i += 1; break }
                if b < 0x20 { throw error("invalid control character in string") }
                if b != UInt8(ascii: "\\") {
                    out.append(b)
                    i += 1
                    continue
                }
                i += 1
                guard i < bytes.count else { throw error("unterminated string") }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""): out.append(e)
                case UInt8(ascii: "\\"): out.append(e)
                case UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if code >= 0xD800 && code < 0xDC00, i + 6 <= bytes.count,
                       bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") {
                        let save = i
                        i += 2
                        let low = try hex4()
                        if low >= 0xDC00 && low < 0xE000 {
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            i = save
                        }
                    }
                    let scalar = Unicode.Scalar(code) ?? "\u{FFFD}"
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    i -= 1
                    throw error("invalid escape '\\\(Character(Unicode.Scalar(e)))'")
                }
            }
            return String(decoding: out, as: UTF8.self)
        }
    }
}
