import Foundation
import Testing
@testable import PlinthGrammar

@Suite("JSON Schema grammars")
struct SchemaGrammarTests {
    func check(_ schema: String, valid: [String], invalid: [String], options: GrammarOptions = GrammarOptions(),
               sourceLocation: SourceLocation = #_sourceLocation) throws {
        let g = try TestVocab.grammar(schema, options)
        for v in valid { #expect(TestVocab.accepts(g, v), "should accept \(v)", sourceLocation: sourceLocation) }
        for v in invalid { #expect(!TestVocab.accepts(g, v), "should reject \(v)", sourceLocation: sourceLocation) }
    }

    @Test func objectsKeepDeclarationOrder() throws {
        try check(#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]}"#,
                  valid: [#"{"name":"x"}"#, #"{"name":"x","age":3}"#, #"{"name":"","age":-12}"#],
                  invalid: [#"{"age":3,"name":"x"}"#, #"{}"#, #"{"name":"x","other":1}"#, #"{"name":"x",}"#, #"{"name":x}"#])
    }

    @Test func additionalPropertiesWhenAllowed() throws {
        try check(#"{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}}"#,
                  valid: [#"{}"#, #"{"a":1}"#, #"{"a":1,"b":true}"#, #"{"zz":false,"y":true}"#],
                  invalid: [#"{"a":true}"#, #"{"b":1}"#, #"{"a":1,"a":2}"#])
        try check(#"{"type":"object","properties":{"a":{"type":"integer"}}}"#,
                  valid: [#"{"a":1,"b":[1,{"c":null}]}"#], invalid: [],
                  options: GrammarOptions(additionalPropertiesByDefault: true))
    }

    /// A key's value satisfies every pattern the key matches (and its declared schema); keys
    /// that no property declares and no pattern matches are additional properties.
    @Test func patternProperties() throws {
        let schema = #"{"type":"object","properties":{"id":{"type":"integer"},"x_n":{"type":"integer"}},"#
            + #""patternProperties":{"^x_":{"type":"integer","minimum":0},"n$":{"type":"integer","maximum":9}},"#
            + #""additionalProperties":false}"#
        try check(schema,
                  valid: [#"{"id":-5}"#, #"{"id":1,"x_n":9}"#, #"{"x_a":100}"#, #"{"zn":-3}"#, #"{"x_an":0,"x_b":7}"#],
                  invalid: [#"{"x_n":10}"#, #"{"x_n":-1}"#, #"{"x_a":-1}"#, #"{"zn":10}"#, #"{"x_an":10}"#, #"{"x_an":-1}"#,
                            #"{"other":1}"#, #"{"x_a":"s"}"#, #"{"x_a":1,"id":1}"#])
        // Without additionalProperties: false, unmatched keys take anything (JSON Schema's default).
        try check(#"{"type":"object","patternProperties":{"^[0-9]+$":{"type":"boolean"}}}"#,
                  valid: [#"{"12":true}"#, #"{"a":[1]}"#, #"{"a1":"s","2":false}"#], invalid: [#"{"12":1}"#, #"{"a":1,"3":null}"#],
                  options: GrammarOptions(additionalPropertiesByDefault: true))
        // A required name that only a pattern covers; a pattern whose schema is false.
        try check(#"{"type":"object","required":["x_k"],"patternProperties":{"^x_":{"type":"string"},"^no":false},"additionalProperties":{"type":"null"}}"#,
                  valid: [#"{"x_k":"v"}"#, #"{"x_k":"v","y":null}"#], invalid: [#"{}"#, #"{"x_k":1}"#, #"{"x_k":"v","no":null}"#, #"{"x_k":"v","y":1}"#])
        // allOf merges patterns and properties; both sides' keys keep their schemas.
        try check(#"{"allOf":[{"type":"object","patternProperties":{"^n[0-9]":{"type":"integer"}}},{"properties":{"name":{"type":"string"}}}]}"#,
                  valid: [#"{"name":"a"}"#, #"{"n1":2}"#, #"{"x":true}"#], invalid: [#"{"n1":"s"}"#, #"{"name":2}"#],
                  options: GrammarOptions(additionalPropertiesByDefault: true))
        // A side's explicit additionalProperties over the other side's patterns isn't expressible:
        // a named error, not a wrong grammar.
        do {
            _ = try TestVocab.grammar(#"{"allOf":[{"patternProperties":{"a":{}}},{"properties":{"b":{}},"additionalProperties":false}]}"#)
            Issue.record("expected an unsupported-keyword error")
        } catch GrammarError.unsupportedKeyword(let keyword, _) {
            #expect(keyword == "patternProperties")
        }
    }

    @Test func propertyCounts() throws {
        let props = #""properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}"#
        try check(#"{"type":"object",\#(props),"minProperties":1}"#,
                  valid: [#"{"a":1}"#, #"{"c":1}"#, #"{"a":1,"b":2,"c":3}"#], invalid: [#"{}"#])
        try check(#"{"type":"object",\#(props),"minProperties":2,"maxProperties":2}"#,
                  valid: [#"{"a":1,"b":2}"#, #"{"a":1,"c":3}"#, #"{"b":1,"c":3}"#], invalid: [#"{}"#, #"{"a":1}"#, #"{"a":1,"b":2,"c":3}"#])
        try check(#"{"type":"object","minProperties":1,"maxProperties":2,"additionalProperties":{"type":"string"}}"#,
                  valid: [#"{"x":"1"}"#, #"{"x":"1","y":"2"}"#], invalid: [#"{}"#, #"{"x":"1","y":"2","z":"3"}"#])
        // A repeated undeclared key would count twice in the text but once parsed.
        do {
            _ = try TestVocab.grammar(#"{"type":"object","minProperties":2,"additionalProperties":true}"#)
            Issue.record("expected an unsupported-keyword error")
        } catch GrammarError.unsupportedKeyword(let keyword, _) {
            #expect(keyword == "minProperties")
        }
    }

    @Test func arraysWithBounds() throws {
        try check(#"{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}"#,
                  valid: ["[1]", "[1,2,3]"], invalid: ["[]", "[1,2,3,4]", "[1,]", "[\"a\"]"])
        try check(#"{"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false}"#,
                  valid: ["[]", "[\"a\"]", "[\"a\",true]"], invalid: ["[true]", "[\"a\",true,1]"])
    }

    @Test func stringsWithLengthPatternAndFormat() throws {
        try check(#"{"type":"string","minLength":2,"maxLength":3}"#,
                  valid: [#""ab""#, #""abc""#, #""\u00e9\u4e2d""#.replacingOccurrences(of: "\\u00e9", with: "\u{e9}").replacingOccurrences(of: "\\u4e2d", with: "\u{4e2d}"), #""a\n""#],
                  invalid: [#""a""#, #""abcd""#, #""""#])
        try check(#"{"type":"string","pattern":"^[a-z]+-[0-9]{2}$"}"#, valid: [#""ab-12""#], invalid: [#""ab-1""#, #""Ab-12""#])
        try check(#"{"type":"string","pattern":"b+"}"#, valid: [#""abba""#, #""b""#], invalid: [#""aaa""#])
        try check(#"{"type":"string","format":"date"}"#, valid: [#""2024-02-29""#], invalid: [#""2024-13-01""#, #""24-01-01""#])
        try check(#"{"type":"string","format":"uuid"}"#, valid: [#""123e4567-e89b-12d3-a456-426614174000""#], invalid: [#""123""#])
        try check(#"{"type":"string","format":"ipv4"}"#, valid: [#""192.168.0.1""#], invalid: [#""256.1.1.1""#])
    }

    /// Numbers as a generator writes them: one spelling per value a Double tells apart, no
    /// endless runs of digits; the default still accepts every JSON spelling.
    @Test func generatedNumbersAreBounded() throws {
        let generated = GrammarOptions(generatedNumbers: true)
        try check(#"{"type":"integer"}"#, valid: ["0", "-7", "1234567890123456"],
                  invalid: ["1.0", "12345678901234567", "01", "1e3"], options: generated)
        try check(#"{"type":"integer"}"#, valid: ["1.0", "12345678901234567", "1.000000000000000000"], invalid: [])
        try check(#"{"type":"number"}"#, valid: ["2.5", "-0.999999999999999", "1e99", "6.02E+23", "3.0"],
                  invalid: ["2.9999999999999999", "1e100", "12345678901234567.5"], options: generated)
        try check(#"{"type":"number","minimum":0,"maximum":1}"#, valid: ["0", "0.25", "1"],
                  invalid: ["1.5", "0.1234567890123456"], options: generated)
        try check(#"{"type":"integer","minimum":3,"maximum":300}"#, valid: ["3", "300"], invalid: ["3.0", "301"], options: generated)
    }

    @Test func numbersWithBounds() throws {
        try check(#"{"type":"integer","minimum":-5,"maximum":120}"#,
                  valid: ["-5", "0", "7", "99", "120", "-0"], invalid: ["-6", "121", "1000", "01", "1.5", "-"])
        try check(#"{"type":"integer","exclusiveMinimum":0,"multipleOf":5}"#,
                  valid: ["5", "100", "1005"], invalid: ["0", "-5", "7"])
        try check(#"{"type":"number","minimum":0.5,"exclusiveMaximum":2.25}"#,
                  valid: ["0.5", "0.75", "1", "2.2", "2.24999", "2"], invalid: ["0.49", "2.25", "2.250", "3", "-1", "0"])
        try check(#"{"type":"number","multipleOf":0.01}"#, valid: ["1.25", "3", "-0.5"], invalid: ["1.255"])
        try check(#"{"type":"number"}"#, valid: ["1e5", "-2.5E-3", "0"], invalid: ["1e", ".5", "+1"])
    }

    @Test func enumsConstsAndUnions() throws {
        try check(#"{"enum":["red","green",1,null]}"#, valid: [#""red""#, "1", "null", "1.0"], invalid: [#""blue""#, "2"])
        try check(#"{"const":{"a":[1,2]}}"#, valid: [#"{"a":[1,2]}"#], invalid: [#"{"a":[1]}"#])
        try check(#"{"type":["string","null"]}"#, valid: ["null", #""x""#], invalid: ["1"])
        try check(#"{"anyOf":[{"type":"object","properties":{"name":{"const":"a"},"x":{"type":"integer"}},"required":["name","x"]},{"type":"object","properties":{"name":{"const":"b"},"y":{"type":"boolean"}},"required":["name","y"]}]}"#,
                  valid: [#"{"name":"a","x":1}"#, #"{"name":"b","y":true}"#], invalid: [#"{"name":"a","y":true}"#])
        try check(#"{"type":"string","enum":["a","bb",3]}"#, valid: [#""a""#], invalid: ["3"])
    }

    @Test func referencesAndRecursion() throws {
        let schema = ##"{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"}"##
        try check(schema, valid: [#"{"v":1,"next":null}"#, #"{"v":1,"next":{"v":2,"next":{"v":3,"next":null}}}"#],
                  invalid: [#"{"v":1,"next":{"v":2}}"#])
        #expect(throws: GrammarError.self) { try TestVocab.grammar(##"{"$ref":"#"}"##) }
        #expect(throws: GrammarError.unresolvedReference("#/$defs/missing", pointer: "#/$ref")) { try TestVocab.grammar(##"{"$ref":"#/$defs/missing"}"##) }
    }

    @Test func allOfMergesObjects() throws {
        try check(#"{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"}},"required":["b"]}]}"#,
                  valid: [#"{"a":1,"b":"x"}"#], invalid: [#"{"a":1}"#, #"{"b":"x"}"#])
    }

    @Test func unsupportedKeywordsNameKeywordAndPointer() throws {
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "not", pointer: "#/properties/a/not")) {
            try TestVocab.grammar(#"{"type":"object","properties":{"a":{"not":{"minimum":3}}}}"#)
        }
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "uniqueItems", pointer: "#/uniqueItems")) {
            try TestVocab.grammar(#"{"type":"array","uniqueItems":true}"#)
        }
        let lenient = try TestVocab.grammar(#"{"type":"array","uniqueItems":true}"#, GrammarOptions(lenient: true))
        #expect(lenient.ignoredKeywords == ["#/uniqueItems"])
        #expect(throws: GrammarError.emptyLanguage(pointer: "#")) { try TestVocab.grammar(##"{"type":"string","minLength":3,"maxLength":2}"##) }
        #expect(throws: GrammarError.self) { try TestVocab.grammar("{not json") }
        let error = GrammarError.unsupportedKeyword(keyword: "not", pointer: "#/not")
        #expect(error.errorDescription?.contains("'not'") == true)
    }

    @Test func oneOfMustBeExclusive() throws {
        try check(#"{"oneOf":[{"type":"string"},{"type":"integer"}]}"#, valid: [#""a""#, "1"], invalid: ["true"])
        // Overlapping alternatives with negations: each one without the others.
        try check(#"{"type":"object","properties":{"a":{},"b":{}},"oneOf":[{"required":["a"]},{"required":["b"]}]}"#,
                  valid: [#"{"a":1}"#, #"{"b":2}"#], invalid: [#"{"a":1,"b":2}"#, "{}"])
        try check(#"{"oneOf":[{"type":"string"},{"enum":["x",null]}]}"#, valid: [#""y""#, "null"], invalid: [#""x""#, "2"])
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "oneOf", pointer: "#/oneOf")) {
            try TestVocab.grammar(#"{"oneOf":[{"type":"number"},{"type":"integer"}]}"#)
        }
    }

    @Test func keywordsRewrittenExactly() throws {
        let open = GrammarOptions(additionalPropertiesByDefault: true)
        // A dependency: the property absent, or present with what it needs.
        try check(#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"dependentRequired":{"a":["b"]}}"#,
                  valid: ["{}", #"{"b":1}"#, #"{"a":1,"b":2}"#], invalid: [#"{"a":1}"#])
        try check(#"{"type":"object","dependentSchemas":{"a":{"required":["c"]}}}"#,
                  valid: ["{}", #"{"b":1}"#, #"{"a":1,"c":2}"#], invalid: [#"{"a":1}"#, #"{"a":1,"b":2}"#], options: open)
        // not: of a type, of string literals (by their one spelling), of required, of a property's value.
        try check(#"{"not":{"type":["object","array","number"]}}"#, valid: [#""s""#, "null", "true"], invalid: ["1", "[]", "{}"])
        try check(#"{"type":"string","not":{"enum":["a","b"]}}"#, valid: [#""c""#, #""ab""#, #""""#], invalid: [#""a""#, #""b""#])
        try check(#"{"type":"object","not":{"required":["x"]}}"#, valid: ["{}", #"{"y":1}"#], invalid: [#"{"x":1}"#], options: open)
        try check(#"{"not":{"properties":{"k":{"const":"a"}}}}"#, valid: [#"{"k":"b"}"#, #"{"k":1}"#], invalid: ["{}", #"{"k":"a"}"#, "1"], options: open)
        // if/then/else decided by a key's constant.
        let conditional = #"{"type":"object","properties":{"kind":{"enum":["a","b"]},"x":{"type":"integer"},"y":{"type":"string"}},"#
            + #""required":["kind"],"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["x"]},"else":{"required":["y"]}}"#
        try check(conditional, valid: [#"{"kind":"a","x":1}"#, #"{"kind":"b","y":"s"}"#, #"{"kind":"a","x":1,"y":"s"}"#],
                  invalid: [#"{"kind":"a","y":"s"}"#, #"{"kind":"b","x":1}"#])
        // propertyNames: every key, declared or not, as a string.
        try check(#"{"type":"object","properties":{"ok":{},"BAD":{}},"propertyNames":{"pattern":"^[a-z]+$","maxLength":3}}"#,
                  valid: ["{}", #"{"ok":1}"#, #"{"abc":2}"#], invalid: [#"{"BAD":1}"#, #"{"abcd":1}"#, #"{"a1":1}"#], options: open)
        try check(#"{"type":"object","propertyNames":{"enum":["x","y"]}}"#, valid: [#"{"x":1,"y":2}"#], invalid: [#"{"z":1}"#], options: open)
        #expect(throws: GrammarError.emptyLanguage(pointer: "#")) {
            try TestVocab.grammar(#"{"type":"object","required":["Q"],"propertyNames":{"pattern":"^[a-z]+$"}}"#, open)
        }
        // uniqueItems over a finite set of values: the values used so far are in the states.
        try check(#"{"type":"array","items":{"enum":["a","b","c"]},"uniqueItems":true,"minItems":2}"#,
                  valid: [#"["a","b"]"#, #"["c","a","b"]"#], invalid: [#"["a","a"]"#, #"["a"]"#, #"["a","b","a"]"#])
        try check(#"{"type":"array","items":{"type":["boolean","null"]},"uniqueItems":true}"#,
                  valid: ["[]", "[true,null,false]"], invalid: ["[true,true]", "[null,false,null]"])
        try check(#"{"type":"array","uniqueItems":true,"maxItems":1}"#, valid: ["[]", "[1]"], invalid: ["[1,2]"])
        try check(#"{"type":"array","prefixItems":[{"type":"boolean"},{"const":0}],"items":{"enum":[0,true,"x"]},"uniqueItems":true}"#,
                  valid: ["[true,0]", #"[false,0,true,"x"]"#, "[false]"], invalid: ["[true,0,true]", "[0]", "[false,0,0]"])
        // Alternatives that could declare a key don't prove a branch forbids it (closed objects):
        // {"a":1} satisfies both branches here, so this oneOf is not an anyOf; made exclusive, it
        // is the objects without "a".
        try check(#"{"oneOf":[{"type":"object","required":["a"],"properties":{"a":{}}},{"type":"object","anyOf":[{"properties":{"a":{}}}]}]}"#,
                  valid: ["{}"], invalid: [#"{"a":1}"#])
        // Strings that Swift finds canonically equal are two strings to JSON.
        try check(#"{"type":"string","allOf":[{"not":{"const":"é"}},{"not":{"const":"é"}}]}"#,
                  valid: [#""e""#], invalid: ["\"\u{e9}\"", "\"e\u{301}\""])
        // oneOf of overlapping string facets: strings matching exactly one (non-strings match both).
        try check(#"{"oneOf":[{"pattern":"APPROVER"},{"pattern":"SIGNER"}]}"#,
                  valid: [#""APPROVER""#, #""a SIGNER""#], invalid: [#""APPROVER SIGNER""#, #""x""#, "1", "null"])
        try check(#"{"type":"string","oneOf":[{"pattern":"^a"},{"pattern":"b$"},{"pattern":"c"},{"pattern":"d","maxLength":2}]}"#,
                  valid: [#""a""#, #""xb""#, #""xcx""#, #""dd""#, #""xd""#],
                  invalid: [#""ab""#, #""acb""#, #""cb""#, #""x""#, #""ad""#, #""ddd""#])
        try check(#"{"type":"string","not":{"minLength":2,"pattern":"^a"}}"#, valid: [#""a""#, #""ba""#, #""""#], invalid: [#""ab""#, #""abc""#])
        // not of anyOf: neither alternative.
        try check(#"{"type":"object","not":{"anyOf":[{"required":["a"]},{"required":["b"]}]}}"#,
                  valid: ["{}", #"{"c":1}"#], invalid: [#"{"a":1}"#, #"{"b":1}"#], options: open)
        // Patterns with anchors or alternation are subtracted one by one (grouping them would change them).
        try check(#"{"type":"string","allOf":[{"not":{"pattern":"^a|b"}},{"not":{"pattern":"c"}},{"not":{"pattern":"d"}}]}"#,
                  valid: [#""x""#, #""xa""#], invalid: [#""ax""#, #""xb""#, #""c""#, #""d""#])
        // A format negates only where its expression refuses no valid string: not so for time
        // (leap seconds at other offsets), so {"not":{"format":"time"}} can't be enforced.
        try check(#"{"type":"string","not":{"format":"date"}}"#, valid: [#""2024-02-30""#, #""x""#], invalid: [#""2024-02-29""#])
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "not", pointer: "#/not")) {
            try TestVocab.grammar(#"{"type":"string","not":{"format":"time"}}"#)
        }
        // A condition that refers to itself has no negation, found once (not exponentially often).
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "if", pointer: "#/$defs/a/if")) {
            try TestVocab.grammar(##"{"$defs":{"a":{"if":{"$ref":"#/$defs/a"},"then":{},"else":{}}},"$ref":"#/$defs/a"}"##)
        }
        // A recursive schema's negation would not end: refused, by name.
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "not", pointer: "#/not")) {
            try TestVocab.grammar(##"{"not":{"properties":{"a":{"$ref":"#"}}}}"##)
        }
        // What has no exact rewrite stays a named refusal.
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "not", pointer: "#/not")) { try TestVocab.grammar(#"{"not":{"type":"integer"}}"#) }
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "if", pointer: "#/if")) {
            try TestVocab.grammar(#"{"if":{"minimum":3},"then":{"multipleOf":2}}"#)
        }
    }

    @Test func flexibleWhitespace() throws {
        try check(#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]}"#,
                  valid: ["{ \"a\" : [ 1 , 2 ] }", "{\"a\":[1]}", "{\n  \"a\": []\n}"], invalid: ["{\"a\":[1]}   "],
                  options: GrammarOptions(whitespace: .flexible(maxRun: 4)))
        try check(#"{"type":"object","properties":{"a":{"type":"integer"}}}"#, valid: ["{\"a\":1}"], invalid: ["{ \"a\":1}"])
    }

    @Test func appleGenerationSchemaShape() throws {
        // What Plinth's GenerationSchema encodes: x-order, $defs/$ref, anyOf, enum, bounds.
        let schema = #"""
        {"type":"object","title":"Trip","x-order":["city","days","tags","kind","stop"],
         "properties":{"stop":{"$ref":"#/$defs/Stop"},"kind":{"anyOf":[{"type":"string","enum":["a","b"]},{"type":"null"}]},
           "city":{"type":"string","description":"City"},"days":{"type":"integer","minimum":1,"maximum":14},
           "tags":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"},"minItems":1,"maxItems":3}},
         "required":["city","days","tags","kind","stop"],"additionalProperties":false,
         "$defs":{"Stop":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}}}
        """#
        try check(schema, valid: [#"{"city":"Oslo","days":3,"tags":["x"],"kind":null,"stop":{"name":"n"}}"#],
                  invalid: [#"{"city":"Oslo","days":15,"tags":["x"],"kind":null,"stop":{"name":"n"}}"#,
                            #"{"city":"Oslo","days":3,"tags":["X"],"kind":null,"stop":{"name":"n"}}"#])
    }

    @Test func regexEntryPoint() throws {
        let g = try TestVocab.compiler.compile(regex: "[0-9]{3}-[A-Z]+")
        #expect(TestVocab.accepts(g, "123-AB"))
        #expect(!TestVocab.accepts(g, "12-AB"))
        #expect(!TestVocab.accepts(g, "123-"))
        #expect(throws: GrammarError.self) { try TestVocab.compiler.compile(regex: "(?=a)b") }
    }

    @Test func cacheSharesGrammars() throws {
        let c = GrammarCompiler(vocabulary: TestVocab.vocabulary)
        let a = try c.compile(jsonSchema: #"{"type":"integer"}"#)
        let b = try c.compile(jsonSchema: #"{"type":"integer"}"#)
        #expect(a === b)
        #expect(c.cachedGrammarCount == 1)
        let results = Mutex<[ObjectIdentifier]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let g = try! c.compile(jsonSchema: #"{"type":"string","maxLength":4}"#)
            let m = g.makeMatcher()
            _ = m.allowedTokens()
            results.withLock { $0.append(ObjectIdentifier(g)) }
        }
        #expect(Set(results.withLock { $0 }).count == 1)
    }
}

import Synchronization
