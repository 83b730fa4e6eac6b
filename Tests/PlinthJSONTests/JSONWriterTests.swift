import PlinthJSON
import Testing

/// The one JSON writer: compact, indented, and Python's `json.dumps` layouts; the escapes; and
/// JSONValue's equality and number helpers.
struct JSONWriterTests {
    static let value = JSONValue.object([
        ("b", .array([.integer(1), .number("2.50"), .string("é\n\"\u{1}😀")])),
        ("a", .object([])), ("c", .array([])), ("d", .null),
    ])

    @Test func layouts() {
        #expect(Self.value.compactText == "{\"b\":[1,2.50,\"é\\n\\\"\\u0001😀\"],\"a\":{},\"c\":[],\"d\":null}")
        #expect(Self.value.prettyText == """
            {
              "b": [
                1,
                2.50,
                "é\\n\\"\\u0001😀"
              ],
              "a": {},
              "c": [],
              "d": null
            }
            """)
        // json.dumps(v) and json.dumps(v, indent=1, separators=(",", ":"), ensure_ascii=True)
        #expect(Self.value.text(.python(indent: nil, separators: nil, ensureASCII: false))
            == "{\"b\": [1, 2.50, \"é\\n\\\"\\u0001😀\"], \"a\": {}, \"c\": [], \"d\": null}")
        #expect(Self.value.text(.python(indent: " ", separators: (",", ":"), ensureASCII: true))
            == "{\n \"b\":[\n  1,\n  2.50,\n  \"\\u00e9\\n\\\"\\u0001\\ud83d\\ude00\"\n ],\n \"a\":{},\n \"c\":[],\n \"d\":null\n}")
    }

    @Test func quotingMatchesPython() {
        // Python: json.dumps("\x7f\x1f\b\f\t/") and with ensure_ascii=True.
        #expect(JSONWriter.quoted("\u{7F}\u{1F}\u{08}\u{0C}\t/") == "\"\u{7F}\\u001f\\b\\f\\t/\"")
        #expect(JSONWriter.quoted("\u{7F}é", asciiOnly: true) == "\"\\u007f\\u00e9\"")
        #expect(JSONWriter.quoted("plain") == "\"plain\"")
    }

    @Test func openContainersAndStringsStayOpen() {
        var w = JSONWriter()
        w.beginObject()
        w.key("a")
        w.beginArray()
        w.number("1")
        w.string("ab", closed: false)
        #expect(w.text == #"{"a":[1,"ab"#)
    }

    @Test func equalityIsJSONs() {
        #expect(JSONValue.number("1.0") == .number("1"))
        #expect(JSONValue.number("1e2") == .integer(100))
        #expect(JSONValue.object([("a", .null), ("b", .bool(true))]) == .object([("b", .bool(true)), ("a", .null)]))
        #expect(JSONValue.number("1") != .string("1"))
        #expect(Set([JSONValue.number("10"), .number("1e1"), .number("10.0")]).count == 1)
    }

    @Test func doublesAndIntegers() {
        #expect(JSONValue.double(3) == .number("3"))
        #expect(JSONValue.double(3).numberText == "3")
        #expect(JSONValue.double(0.1).numberText == "0.1")
        #expect(JSONValue.double(.nan) == .null)
        #expect(JSONValue.integer(-7).integerValue == -7)
        #expect(JSONValue.number("2.0").integerValue == 2)
        #expect(JSONValue.number("2.5").integerValue == nil)
        #expect(JSONValue.number("2.5").typeName == "number" && JSONValue.number("2.0").typeName == "integer")
    }
}
