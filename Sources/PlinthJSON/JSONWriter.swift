/// How JSON text is laid out.
public struct JSONFormat: Sendable {
    /// The indentation unit; nil writes one line.
    public var indent: String?
    /// Between the items of an array or object (before the newline when indenting).
    public var itemSeparator: String
    /// Between a member's name and its value.
    public var keySeparator: String
    /// Escape everything past ASCII as `\uXXXX` (surrogate pairs beyond the BMP).
    public var asciiOnly: Bool

    public init(indent: String?, itemSeparator: String, keySeparator: String, asciiOnly: Bool) {
        self.indent = indent
        self.itemSeparator = itemSeparator
        self.keySeparator = keySeparator
        self.asciiOnly = asciiOnly
    }

    /// No whitespace at all.
    public static let compact = JSONFormat(indent: nil, itemSeparator: ",", keySeparator: ":", asciiOnly: false)
    /// Two-space indentation.
    public static let pretty = JSONFormat(indent: "  ", itemSeparator: ",", keySeparator: ": ", asciiOnly: false)

    /// Python's `json.dumps` with these arguments: its default separators are `", "` and `": "`
    /// on one line and `","` and `": "` when indenting; `ensure_ascii` defaults to true there.
    public static func python(indent: String?, separators: (item: String, key: String)?, ensureASCII: Bool) -> JSONFormat {
        let (item, key) = separators ?? (indent == nil ? ", " : ",", ": ")
        return JSONFormat(indent: indent, itemSeparator: item, keySeparator: key, asciiOnly: ensureASCII)
    }
}

/// Writes JSON text one token at a time, placing separators and indentation: the one writer
/// behind `JSONValue`'s text, generated content, and templates' `tojson`.
///
/// Values go in document order: `beginObject`, then `key` and a value for each member, then
/// `endObject`. A container that is never ended stays open, which is how a prefix of a value
/// still being generated is written.
public struct JSONWriter {
    public let format: JSONFormat
    public private(set) var text = ""
    /// Per open container: whether it holds an item yet.
    private var hasItems: [Bool] = []
    /// A member name was just written; its value follows with no separator.
    private var afterKey = false

    public init(format: JSONFormat = .compact) {
        self.format = format
    }

    public mutating func null() { place(); text += "null" }

    public mutating func bool(_ b: Bool) { place(); text += b ? "true" : "false" }

    /// A number, as its JSON text.
    public mutating func number(_ literal: String) { place(); text += literal }

    /// A string; with `closed: false` the closing quote is left off (a string still being written).
    public mutating func string(_ s: String, closed: Bool = true) {
        place()
        JSONWriter.appendQuoted(s, to: &text, asciiOnly: format.asciiOnly, closed: closed)
    }

    public mutating func beginArray() { place(); text += "["; hasItems.append(false) }

    public mutating func endArray() { close("]") }

    public mutating func beginObject() { place(); text += "{"; hasItems.append(false) }

    /// The name of the next member; its value is written next.
    public mutating func key(_ name: String) {
        place()
        JSONWriter.appendQuoted(name, to: &text, asciiOnly: format.asciiOnly, closed: true)
        text += format.keySeparator
        afterKey = true
    }

    public mutating func endObject() { close("}") }

    /// Before a value or member name: the separator after the previous item and the new line.
    private mutating func place() {
        if afterKey {
            afterKey = false
            return
        }
        guard let last = hasItems.indices.last else { return }
        if hasItems[last] { text += format.itemSeparator }
        hasItems[last] = true
        newline(depth: hasItems.count)
    }

    private mutating func close(_ bracket: String) {
        guard let hadItems = hasItems.popLast() else { return }
        if hadItems { newline(depth: hasItems.count) }
        text += bracket
    }

    private mutating func newline(depth: Int) {
        guard let indent = format.indent else { return }
        text += "\n"
        for _ in 0..<depth { text += indent }
    }

    /// `s` as a quoted JSON string literal: the short escapes for quote, backslash and the named
    /// control characters, `\u00XX` (lower-case hex) for other control characters and, with
    /// `asciiOnly`, `\uXXXX` for everything past ASCII — exactly what Python's `json.dumps`
    /// writes, and what the decoder generates.
    public static func quoted(_ s: String, asciiOnly: Bool = false) -> String {
        var out = ""
        appendQuoted(s, to: &out, asciiOnly: asciiOnly, closed: true)
        return out
    }

    static func appendQuoted(_ s: String, to out: inout String, asciiOnly: Bool, closed: Bool) {
        out += "\""
        defer { if closed { out += "\"" } }
        // Most strings need no escape: copy them whole.
        let limit: UInt8 = asciiOnly ? 0x7F : 0xFF
        if s.utf8.allSatisfy({ $0 >= 0x20 && $0 < limit && $0 != 0x22 && $0 != 0x5C }) {
            out += s
            return
        }
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
    }

    private static func hex4(_ v: UInt32) -> String {
        let h = String(v, radix: 16)
        return String(repeating: "0", count: 4 - h.count) + h
    }
}
