import Foundation
import Testing
@testable import PlinthGrammar

/// Cases that the schema corpus once got wrong, reduced to small schemas.
@Suite("Grammar regressions")
struct RegressionTests {
    /// Reorders `instance` for `schema` as the benchmark does, then walks it byte by byte.
    func acceptsReordered(_ schema: String, _ instance: String, _ options: GrammarOptions = GrammarOptions()) throws -> (Bool, String) {
        let s = try JSONValue(parsing: schema)
        let text = try JSONValue(parsing: instance).reordered(forSchema: s).compactText
        return (TestVocab.accepts(try TestVocab.compiler.compile(schema: s, options: options), text), text)
    }

    /// Strings that Swift's `==` calls equal (canonically equivalent) but JSON tells apart: the
    /// grammar cache and the leaf caches must not hand one's automaton to the other.
    @Test func canonicallyEquivalentStringsAreDifferentSchemas() throws {
        let composed = "\u{E9}", decomposed = "e\u{301}"
        #expect(composed == decomposed && Array(composed.utf8) != Array(decomposed.utf8))
        for (a, b) in [(composed, decomposed), (decomposed, composed)] {
            let first = try TestVocab.grammar(#"{"const":""# + a + #""}"#)
            let second = try TestVocab.grammar(#"{"const":""# + b + #""}"#)
            #expect(TestVocab.accepts(first, "\"" + a + "\"") && !TestVocab.accepts(first, "\"" + b + "\""))
            #expect(TestVocab.accepts(second, "\"" + b + "\"") && !TestVocab.accepts(second, "\"" + a + "\""))
            let p = try TestVocab.grammar(#"{"type":"string","pattern":"^"# + a + #"$","maxLength":3}"#)
            let q = try TestVocab.grammar(#"{"type":"string","pattern":"^"# + b + #"$","maxLength":3}"#)
            #expect(TestVocab.accepts(p, "\"" + a + "\"") && !TestVocab.accepts(p, "\"" + b + "\""))
            #expect(TestVocab.accepts(q, "\"" + b + "\"") && !TestVocab.accepts(q, "\"" + a + "\""))
            TestVocab.compiler.removeAllCachedGrammars()
            GrammarCompiler.removeAllSharedLeaves()
        }
    }

    // o48873: required names that no `properties` declares were emitted in sorted order, while
    // the generation order (and the instance) lists them in `required` order.
    @Test func undeclaredRequiredFollowRequiredOrder() throws {
        let schema = #"{"type":"object","required":["username","password"],"properties":{"id":{"type":"integer"}}}"#
        let open = GrammarOptions(additionalPropertiesByDefault: true)
        let (ok, text) = try acceptsReordered(schema, #"{"password":"p","id":1,"username":"u"}"#, open)
        #expect(text == #"{"id":1,"username":"u","password":"p"}"#)
        #expect(ok, "rejected \(text)")
        let g = try TestVocab.grammar(schema, open)
        #expect(TestVocab.accepts(g, #"{"username":"u","password":"p","extra":true}"#))
        #expect(!TestVocab.accepts(g, #"{"username":"u"}"#))
        #expect(!TestVocab.accepts(g, #"{"password":"p","username":"u"}"#))
    }

    // wp_29: under anyOf the reordering merged the property orders of all alternatives, so an
    // instance of the second alternative came out in an order its own rule does not generate.
    @Test func reorderingFollowsTheMatchingAlternative() throws {
        let schema = #"""
        {"anyOf":[{"$ref":"#/definitions/list"},{"$ref":"#/definitions/text"}],
         "definitions":{
          "list":{"type":"object","additionalProperties":false,"required":["type"],
                  "properties":{"items":{"type":"array","items":{"$ref":"#"}},"type":{"enum":["list"]}}},
          "text":{"type":"object","additionalProperties":false,"required":["type","content"],
                  "properties":{"content":{"type":"string"},"type":{"enum":["text"]}}}}}
        """#
        let (ok, text) = try acceptsReordered(schema, #"{"type":"list","items":[{"type":"text","content":"a"},{"type":"list","items":[]}]}"#)
        #expect(text == #"{"items":[{"content":"a","type":"text"},{"items":[],"type":"list"}],"type":"list"}"#)
        #expect(ok, "rejected \(text)")
        // An instance that fits no alternative still gets reordered (by the union) and rejected.
        let (bad, _) = try acceptsReordered(schema, #"{"type":"other","content":"a"}"#)
        #expect(!bad)
    }

    // search_news_036e12d4: format "date" accepted days that do not exist (2022-02-31).
    @Test func dateFormatIsCalendarExact() throws {
        let g = try TestVocab.grammar(#"{"type":"string","format":"date"}"#)
        for v in ["2022-01-31", "2022-04-30", "2022-02-28", "2024-02-29", "2000-02-29", "1600-02-29", "2022-12-31"] {
            #expect(TestVocab.accepts(g, "\"\(v)\""), "should accept \(v)")
        }
        for v in ["2022-02-31", "2022-04-31", "2022-02-29", "1900-02-29", "2100-02-29", "2022-12-32", "2022-00-10", "2022-06-00"] {
            #expect(!TestVocab.accepts(g, "\"\(v)\""), "should reject \(v)")
        }
        let dt = try TestVocab.grammar(#"{"type":"string","format":"date-time"}"#)
        #expect(TestVocab.accepts(dt, #""2024-02-29T12:00:00Z""#))
        #expect(!TestVocab.accepts(dt, #""2023-02-29T12:00:00Z""#))
        // Enum values are checked against the same format.
        let e = try TestVocab.grammar(#"{"type":"string","format":"date","enum":["2023-02-29","2023-03-01"]}"#)
        #expect(TestVocab.accepts(e, #""2023-03-01""#))
        #expect(!TestVocab.accepts(e, #""2023-02-29""#))
    }

    // o33033 (2.5 s to compile): an unanchored pattern's "already matched" tail multiplied with
    // every partial match; it is now absorbing. The language must not change.
    @Test func unanchoredPatternLanguage() throws {
        let g = try TestVocab.grammar(#"{"type":"string","pattern":"(top-left|top-right|middle-center)"}"#)
        for v in ["top-left", "xxtop-rightyy", "top-top-left", "middle-center\\n", "\u{e9}top-left\u{4e2d}"] {
            #expect(TestVocab.accepts(g, "\"\(v)\""), "should accept \(v)")
        }
        for v in ["top-", "top-lef", "middle-centre", ""] { #expect(!TestVocab.accepts(g, "\"\(v)\""), "should reject \(v)") }
    }

    // Length bounds beside a pattern come from a counted automaton now (not a determinized
    // repetition): characters count once whatever their encoding.
    @Test func patternWithLengthBounds() throws {
        let g = try TestVocab.grammar(#"{"type":"string","pattern":"[a-z\u00e9]+","minLength":3,"maxLength":5}"#)
        for v in ["abc", "abcde", "\u{e9}\u{e9}\u{e9}", "12a45", "a\\nb"] { #expect(TestVocab.accepts(g, "\"\(v)\""), "should accept \(v)") }
        for v in ["ab", "abcdef", "\u{e9}\u{e9}", "123", "\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}"] { #expect(!TestVocab.accepts(g, "\"\(v)\""), "should reject \(v)") }
        let open = try TestVocab.grammar(#"{"type":"string","pattern":"^x","minLength":2}"#)
        #expect(TestVocab.accepts(open, #""xy""#))
        #expect(TestVocab.accepts(open, #""xyzzzzzzzzzz""#))
        #expect(!TestVocab.accepts(open, #""x""#))
        #expect(!TestVocab.accepts(open, #""yx""#))
    }
}
