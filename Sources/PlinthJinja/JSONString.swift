/// JSON string literals, written the way Python's `json.dumps` writes them: the short escapes
/// for quote, backslash and the named control characters, `\uXXXX` (lower-case hex) for the other
/// control characters and, with `asciiOnly`, for everything past ASCII (as surrogate pairs
/// beyond the Basic Multilingual Plane).
public enum JSONString {
    /// Appends `s` as a quoted JSON string literal to `out`.
    public static func append(_ s: String, to out: inout String, asciiOnly: Bool = false) {
        out += "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if c.value < 0x20 {
                    out += "\\u" + hex4(c.value)
                } else if asciiOnly, c.value > 0x7E {
                    if c.value > 0xFFFF {
                        let v = c.value - 0x10000
                        out += "\\u" + hex4(0xD800 + (v >> 10)) + "\\u" + hex4(0xDC00 + (v & 0x3FF))
                    } else {
                        out += "\\u" + hex4(c.value)
                    }
                } else {
                    out.unicodeScalars.append(c)
                }
            }
        }
        out += "\""
    }

    private static func hex4(_ v: UInt32) -> String {
        let h = String(v, radix: 16)
        return String(repeating: "0", count: 4 - h.count) + h
    }
}
