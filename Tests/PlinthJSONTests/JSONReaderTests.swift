import PlinthJSON
import Testing

/// The one JSON reader: whole documents (strict RFC 8259), and the same text streamed in
/// pieces, whose snapshots keep what has started.
struct JSONReaderTests {
    /// A tree that shows completeness: `~` marks a value the text may still extend.
    struct ShapeBuilder: JSONTreeBuilder {
        func scalar(_ scalar: JSONScalar, complete: Bool) -> String {
            let mark = complete ? "" : "~"
            switch scalar {
            case .null: return "null"
            case .bool(let b): return "\(b)"
            case .number(let n): return mark + n
            case .string(let s): return mark + JSONWriter.quoted(s)
            }
        }
        func array(_ elements: [String], complete: Bool) -> String {
            (complete ? "" : "~") + "[" + elements.joined(separator: ",") + "]"
        }
        func object(_ members: [(key: String, value: String)], complete: Bool) -> String {
            (complete ? "" : "~") + "{" + members.map { "\($0.key):\($0.value)" }.joined(separator: ",") + "}"
        }
    }

    static func snapshot(_ text: String) throws -> String? {
        var reader = JSONReader(builder: ShapeBuilder())
        try reader.append(text.utf8)
        return reader.snapshot
    }

    /// Integers convert up to Int's ends and no further (19 digits were refused, so Int.max
    /// written by the transcript's encoder didn't read back).
    @Test func decimalNumbersConvertToIntAtItsEnds() {
        #expect(DecimalNumber("9223372036854775807")?.intValue == Int.max)
        #expect(DecimalNumber("-9223372036854775808")?.intValue == Int.min)
        #expect(DecimalNumber("9223372036854775808")?.intValue == nil)
        #expect(DecimalNumber("-9223372036854775809")?.intValue == nil)
        #expect(DecimalNumber("1e18")?.intValue == 1_000_000_000_000_000_000)
        #expect(DecimalNumber("1e19")?.intValue == nil)
        #expect(DecimalNumber("-0")?.intValue == 0)
        #expect(DecimalNumber("12.5")?.intValue == nil)
    }

    @Test func wholeDocumentsKeepOrderAndNumberText() throws {
        let value = try JSONValue(parsing: #" {"b": [1, -0.50, 1E+3, true, null], "a": {"x": "\u00e9\ud83d\ude00\n"}, "b": 2} "#)
        // A repeated name keeps its first place and its last value.
        #expect(value.objectMembers?.map(\.key) == ["b", "a"])
        #expect(value["b"] == .number("2"))
        #expect(value["a"]?["x"] == .string("é😀\n"))
        #expect(try JSONValue(parsing: "[1, -0.50, 1E+3]").arrayValue?.compactMap(\.numberText) == ["1", "-0.50", "1E+3"])
        #expect(value.compactText == #"{"b":2,"a":{"x":"é😀\n"}}"#)
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", "[1,,2]", "{\"a\" 1}", "{\"a\":}", "{1:2}", "[1] x", "01", "1.", ".5", "-", "+1", "1e",
        "tru", "nul", "\"abc", "\"tab\there\"", "\"\\x\"", "\"\\ud800\"", "\"\\ud800\\u0041\"", "NaN", "Infinity", "[1}",
    ])
    func invalidDocumentsAreErrors(text: String) {
        #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: text) }
    }

    @Test func errorsSayWhereAndWhat() {
        let e = #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: "[1, 2] x") }
        #expect(e?.offset == 7)
        #expect(e?.description == "Unexpected text after the end of the value at offset 7")
        let invalidUTF8 = #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: [0x22, 0xC3, 0x22]) }
        #expect(invalidUTF8?.message == "Invalid UTF-8 in string")
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: deep) }
        #expect(throws: Never.self) { try JSONValue(parsing: deep, options: .init(maxDepth: 1000)) }
    }

    @Test func nonFiniteNumbersOnlyWhenAllowed() throws {
        let python = JSONReaderOptions(allowNonFiniteNumbers: true)
        #expect(try JSONValue(parsing: "[NaN, Infinity, -Infinity, -1]", options: python)
            == .array([.number("NaN"), .number("Infinity"), .number("-Infinity"), .number("-1")]))
        #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: "-Infinity") }
        #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: "-Inf", options: python) }
    }

    @Test func snapshotsKeepWhatHasStarted() throws {
        #expect(try Self.snapshot(#"{"a": "hel"#) == #"~{a:~"hel"}"#)
        #expect(try Self.snapshot(#"{"a": 12"#) == "~{a:~12}")
        #expect(try Self.snapshot(#"{"a": 1.5e"#) == "~{a:~1.5}")
        #expect(try Self.snapshot(#"[1, -"#) == "~[1]")
        #expect(try Self.snapshot(#"[1, tr"#) == "~[1]")
        #expect(try Self.snapshot(#"{"a": true, "b"#) == "~{a:true}")
        #expect(try Self.snapshot(#"{"a": true, "b": "#) == "~{a:true}")
        #expect(try Self.snapshot(#"["caf\u00"#) == #"~[~"caf"]"#)
        #expect(try Self.snapshot(#"[{"x": [], "y": {}}, ["#) == "~[{x:[],y:{}},~[]]")
        #expect(try Self.snapshot("tr") == nil)
        #expect(try Self.snapshot("") == nil)
    }

    /// Every way of cutting a text into two or three pieces gives, after each piece, the snapshot
    /// of reading the text so far at once: the state carried between pieces loses nothing.
    @Test(arguments: [
        #"{"name": "Sam \"S\" \\ é😀 \u00e9\ud83d\ude00", "age": 31, "tags": ["a", [], {}], "x": -1.5e-3, "n": null}"#,
        #"[true, false, null, 0, -0, 10.25, "\n\t"]"#,
        "  \"plain\"  ",
    ])
    func piecesReadAsTheWhole(text: String) throws {
        let bytes = Array(text.utf8)
        for cut1 in 0...bytes.count {
            for cut2 in stride(from: cut1, through: bytes.count, by: max(1, bytes.count / 7)) {
                var reader = JSONReader(builder: ShapeBuilder())
                for (start, end) in [(0, cut1), (cut1, cut2), (cut2, bytes.count)] {
                    try reader.append(bytes[start..<end])
                    var whole = JSONReader(builder: ShapeBuilder())
                    try whole.append(bytes[..<end])
                    #expect(reader.snapshot == whole.snapshot, "cut at \(cut1), \(cut2), after \(end) bytes")
                }
                try reader.end()
                #expect(reader.isComplete)
            }
        }
    }

    @Test func aNumberAtTheEndIsCompleteOnlyWhenTheTextEnds() throws {
        var reader = JSONReader(builder: ShapeBuilder())
        try reader.append("12".utf8)
        #expect(reader.snapshot == "~12" && !reader.isComplete)
        try reader.end()
        #expect(reader.snapshot == "12" && reader.isComplete)
        // Cut short, a number stays partial; not a number at all, it is an error.
        var short = JSONReader(builder: ShapeBuilder())
        try short.append("[1.".utf8)
        try short.end()
        #expect(short.snapshot == "~[~1]" && !short.isComplete)
        var bad = JSONReader(builder: ShapeBuilder())
        try bad.append("[01".utf8)
        #expect(throws: JSONSyntaxError.self) { try bad.end() }
    }
}
