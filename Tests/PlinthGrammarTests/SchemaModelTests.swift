import Foundation
import Testing
@testable import PlinthGrammar

/// The typed schema model on its own: the parser (JSON to `Schema`), the algebra on typed
/// nodes, and the formats' expressions, without compiling a grammar.
private func parse(_ text: String) throws -> (SchemaParser, Schema) {
    let p = SchemaParser(try JSONValue(parsing: text))
    return (p, try p.root())
}

private func node(_ text: String) throws -> SchemaNode {
    guard case .node(let n) = try parse(text).1 else { throw GrammarError.invalidSchema(reason: "not a node", pointer: "#") }
    return n
}

private func parseError(_ text: String) -> GrammarError? {
    do { _ = try parse(text); return nil } catch let e as GrammarError { return e } catch { return nil }
}

private func algebra(_ text: String = "{}", _ options: GrammarOptions = GrammarOptions()) throws -> SchemaAlgebra {
    SchemaAlgebra(parser: SchemaParser(try JSONValue(parsing: text)), options: options)
}

@Suite("Schema parser")
struct SchemaParserTests {
    @Test func keywordsBecomeTypedFields() throws {
        let n = try node(##"""
            {"type":["integer","number","string"],"minLength":2,"pattern":"^a","format":"date",
             "exclusiveMinimum":0,"maximum":10,"multipleOf":0.5,"minItems":1,
             "properties":{"a/b":{"type":"null"}},"required":["a/b","a/b","c"],"x-order":["a/b"]}
            """##)
        #expect(n.types == [.number, .string])  // integer is within number
        #expect(n.string == StringFacet(minLength: 2, maxLength: nil, patterns: ["^a"], format: "date"))
        #expect(n.number.lower == .init(value: DecimalNumber("0")!, exclusive: true))
        #expect(n.number.upper == .init(value: DecimalNumber("10")!, exclusive: false) && n.number.multipleOf == DecimalNumber("0.5"))
        #expect(n.array.minItems == 1 && !n.array.isPositional)
        #expect(n.object.required == ["a/b", "c"])
        #expect(n.object.order == ["a/b"])
        var nullNode = SchemaNode()
        nullNode.types = .null
        #expect(n.object.properties == [.init(name: "a/b", schema: .node(nullNode))])
        #expect(n.hasAssertions)
        #expect(try !node(##"{"title":"t","x-order":["a"],"x-custom":1}"##).hasAssertions)
    }

    @Test func enumAndConstMeet() throws {
        #expect(try node(##"{"enum":[1,2,3],"const":2}"##).literals == [.number("2")])
        #expect(try node(##"{"enum":[1,3],"const":2}"##).literals == [])
        #expect(try node(##"{"const":null}"##).literals == [.null])
    }

    @Test func draft04ExclusiveFlags() throws {
        let n = try node(##"{"exclusiveMinimum":true,"minimum":1,"maximum":5}"##)
        #expect(n.number.lower == .init(value: DecimalNumber("1")!, exclusive: true))
        #expect(n.number.upper == .init(value: DecimalNumber("5")!, exclusive: false))
        // Both forms of a side: the tighter one (at equal values, the exclusive one).
        #expect(try node(##"{"minimum":3,"exclusiveMinimum":2}"##).number.lower == .init(value: DecimalNumber("3")!, exclusive: false))
        #expect(try node(##"{"maximum":3,"exclusiveMaximum":3}"##).number.upper == .init(value: DecimalNumber("3")!, exclusive: true))
    }

    @Test func arrayFormsOfBothDrafts() throws {
        let tuple = try node(##"{"items":[{"type":"string"},true],"additionalItems":false}"##)
        #expect(tuple.array.prefixItems.count == 2 && tuple.array.items == .never && tuple.array.itemsIsAdditional)
        let prefix = try node(##"{"prefixItems":[{"type":"string"}],"items":false}"##)
        #expect(prefix.array.prefixItems.count == 1 && prefix.array.items == .never && !prefix.array.itemsIsAdditional)
        // additionalItems without array-form items says nothing.
        let rest = try node(##"{"items":{"type":"null"},"additionalItems":false}"##)
        #expect(rest.array.prefixItems.isEmpty && rest.array.items != .never && rest.array.isPositional)
    }

    @Test func referencesResolveToPointers() throws {
        let (p, root) = try parse(##"{"$defs":{"n":{"$anchor":"num","type":"number"}},"properties":{"a":{"$ref":"#/$defs/n"},"b":{"$ref":"#num"}}}"##)
        guard case .node(let n) = root else { Issue.record("root is not a node"); return }
        #expect(n.object.property("a") == .ref("#/$defs/n"))
        #expect(n.object.property("b") == .ref("#/$defs/n"))
        guard case .node(let target) = try p.schema(at: "#/$defs/n") else { Issue.record("target is not a node"); return }
        #expect(target.types == .number)
    }

    @Test func referenceSiblingsDependOnTheDraft() throws {
        // 2020-12: the reference joins its siblings as the first conjunct.
        let n = try node(##"{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":3}"##)
        #expect(n.allOf == [.ref("#/$defs/s")] && n.string.maxLength == 3)
        // Siblings that only annotate leave a plain reference.
        #expect(try parse(##"{"$defs":{"s":{}},"$ref":"#/$defs/s","description":"d"}"##).1 == .ref("#/$defs/s"))
        // Draft-07: the reference replaces its siblings.
        let d7 = ##"{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{}},"$ref":"#/definitions/s","maxLength":3}"##
        #expect(try parse(d7).1 == .ref("#/definitions/s"))
    }

    @Test func unenforcedKeywordsAreKeptForTheCompiler() throws {
        let n = try node(##"{"type":"array","uniqueItems":true,"not":{"type":"null"}}"##)
        #expect(n.unenforced.map(\.name) == ["not"] && n.array.uniqueItems)
    }

    @Test func malformedKeywordsNameTheirPointer() {
        #expect(parseError(##"{"properties":{"a":{"properties":[]}}}"##) == .invalidSchema(reason: "properties must be an object", pointer: "#/properties/a/properties"))
        #expect(parseError(##"{"allOf":[]}"##) == .invalidSchema(reason: "allOf must be a non-empty array", pointer: "#/allOf"))
        #expect(parseError(##"{"items":{"type":"text"}}"##) == .invalidSchema(reason: "unknown type 'text'", pointer: "#/items/type"))
        #expect(parseError(##"{"multipleOf":0}"##) == .invalidSchema(reason: "multipleOf must be positive", pointer: "#/multipleOf"))
        #expect(parseError(##"{"minimum":"1"}"##) == .invalidSchema(reason: "minimum must be a number", pointer: "#/minimum"))
        #expect(parseError(##"{"anyOf":[{"type":"null"},3]}"##) == .invalidSchema(reason: "a schema must be an object or a boolean", pointer: "#/anyOf/1"))
        #expect(parseError(##"{"$ref":"#/$defs/missing"}"##) == .unresolvedReference("#/$defs/missing", pointer: "#/$ref"))
        #expect(parseError(##"{"$ref":"other.json"}"##) == .unresolvedReference("other.json", pointer: "#/$ref"))
        #expect(parseError(##"{"maxProperties":-1}"##) == .invalidSchema(reason: "maxProperties must be a non-negative integer", pointer: "#/maxProperties"))
    }
}

@Suite("Schema algebra")
struct SchemaAlgebraTests {
    @Test func typesMeetWithIntegersInsideNumbers() {
        #expect(JSONTypes([.integer, .string]).meet(.number) == .integer)
        #expect(JSONTypes.number.meet([.number, .null]) == .number)
        #expect(JSONTypes.string.meet(.object).isEmpty)
        #expect(JSONTypes.number.admits(.integer) && !JSONTypes.integer.admits(.number))
    }

    @Test func intersectionTightensEveryFacet() throws {
        let a = try algebra()
        let x = try node(##"{"type":["string","number"],"minLength":1,"maxLength":9,"minimum":0,"multipleOf":4,"enum":["a","b",1],"required":["p"]}"##)
        let y = try node(##"{"type":"string","minLength":3,"maxLength":5,"minimum":2,"multipleOf":6,"enum":["b","c"],"required":["q","p"]}"##)
        let z = try a.intersect(x, y, pointer: "#")
        #expect(z.types == .string)
        #expect(z.string.minLength == 3 && z.string.maxLength == 5)
        #expect(z.number.lower == .init(value: DecimalNumber("2")!, exclusive: false))
        #expect(z.number.multipleOf == DecimalNumber("12"))
        #expect(z.literals == [.string("b")])
        #expect(z.object.required == ["p", "q"])
    }

    @Test func propertiesMeetEachOthersAdditionalProperties() throws {
        let a = try algebra()
        let x = try node(##"{"properties":{"a":{"type":"string"}},"additionalProperties":false}"##)
        let y = try node(##"{"properties":{"a":{"maxLength":2},"b":{}}}"##)
        let z = try a.intersect(x, y, pointer: "#")
        #expect(z.object.properties?.map(\.name) == ["a", "b"])
        // "a" is both sides' schema; "b" also meets x's additionalProperties (false).
        guard case .node(let pa)? = z.object.property("a"), case .node(let pb)? = z.object.property("b") else {
            Issue.record("expected conjunctions"); return
        }
        #expect(pa.allOf.count == 2 && pb.allOf.last == .never)
        #expect(z.object.additionalProperties == .never)
    }

    @Test func positionalItemsMeetPositionByPosition() throws {
        let a = try algebra()
        let x = try node(##"{"prefixItems":[{"type":"string"}],"items":{"type":"number"}}"##)
        let y = try node(##"{"prefixItems":[{},{"minimum":1}]}"##)
        let z = try a.intersect(x, y, pointer: "#")
        #expect(z.array.prefixItems.count == 2)
        guard case .node(let second) = z.array.prefixItems[1] else { Issue.record("expected a conjunction"); return }
        #expect(second.allOf.count == 2) // x's rest schema and y's second item
    }

    @Test func conflictsTheDecoderCannotExpressAreNamed() throws {
        let a = try algebra()
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "format", pointer: "#/allOf/1")) {
            try a.intersect(try node(##"{"format":"date"}"##), try node(##"{"format":"uuid"}"##), pointer: "#/allOf/1")
        }
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "patternProperties", pointer: "#")) {
            try a.intersect(try node(##"{"patternProperties":{"^x":{}},"additionalProperties":false}"##), try node(##"{"properties":{"a":{}}}"##), pointer: "#")
        }
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "multipleOf", pointer: "#")) {
            try a.intersect(try node(##"{"multipleOf":0.5}"##), try node(##"{"multipleOf":3}"##), pointer: "#")
        }
    }

    @Test func allOfIsResolvedThroughReferences() throws {
        let doc = ##"{"$defs":{"base":{"type":"object","required":["id"]},"named":{"allOf":[{"$ref":"#/$defs/base"},{"required":["name"]}]}},"allOf":[{"$ref":"#/$defs/named"}],"required":["extra"]}"##
        let a = try algebra(doc)
        guard let n = try a.flattened(try a.parser.root(), "#") else { Issue.record("empty"); return }
        #expect(n.types == .object)
        #expect(n.object.required == ["extra", "id", "name"])
        #expect(n.allOf.isEmpty)
        // A conjunct that admits nothing makes the whole schema admit nothing.
        #expect(try a.flattened(.node(try node(##"{"allOf":[{"type":"string"},false]}"##)), "#") == nil)
        // A schema that is its own conjunct is refused, not expanded forever.
        let loop = try algebra(##"{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}],"type":"object"}},"$ref":"#/$defs/a"}"##)
        #expect(throws: GrammarError.leftRecursion(pointer: "#")) { try loop.flattened(try loop.parser.root(), "#") }
    }

    @Test func exclusiveAlternatives() throws {
        // JSON Schema's own default: properties not declared are allowed.
        let a = try algebra("{}", GrammarOptions(additionalPropertiesByDefault: true))
        func disjoint(_ alts: String) throws -> Bool {
            a.provablyDisjoint(try node(##"{"oneOf":"## + alts + "}").oneOf!)
        }
        #expect(try disjoint(##"[{"type":"string"},{"type":"integer"},{"type":"null"}]"##))
        #expect(try !disjoint(##"[{"type":"number"},{"type":"integer"}]"##))
        #expect(try disjoint(##"[{"enum":[1,2]},{"const":3}]"##))
        #expect(try disjoint(##"[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"]},{"properties":{"k":{"enum":["b","c"]}},"required":["k"]}]"##))
        // Without `required` the discriminator may be absent from both.
        #expect(try !disjoint(##"[{"type":"object","properties":{"k":{"const":"a"}}},{"type":"object","properties":{"k":{"const":"b"}}}]"##))
        // A discriminator reached through allOf counts too; without `type` a string satisfies both.
        #expect(try disjoint(##"[{"allOf":[{"type":"object","properties":{"k":{"type":"string"}}},{"properties":{"k":{"const":"a"}},"required":["k"]}]},{"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}]"##))
        #expect(try !disjoint(##"[{"allOf":[{"properties":{"k":{"type":"string"}}},{"properties":{"k":{"const":"a"}},"required":["k"]}]},{"properties":{"k":{"const":"b"}},"required":["k"]}]"##))
        // A key one side requires and the other forbids (additionalProperties false).
        #expect(try disjoint(##"[{"type":"object","required":["a"]},{"type":"object","properties":{"b":{}},"additionalProperties":false}]"##))
        #expect(try !disjoint(##"[{"type":"object","required":["a"]},{"type":"object","properties":{"b":{}}}]"##))
        // Plinth's default closes the objects it generates, but validators judge `oneOf` with
        // open ones: {"a":1} generated for the first side satisfies the second too.
        #expect(try !algebra().provablyDisjoint(node(##"{"oneOf":[{"type":"object","required":["a"]},{"type":"object","properties":{"b":{}}}]}"##).oneOf!))
        // ... or whose values can't meet: patterns with no common string, number ranges apart.
        #expect(try disjoint(##"[{"type":"object","properties":{"s":{"type":"string","pattern":"^ok$"}},"required":["s"]},{"type":"object","properties":{"s":{"type":"string","pattern":"^fail$"}},"required":["s"]}]"##))
        #expect(try !disjoint(##"[{"type":"string","pattern":"ok"},{"type":"string","pattern":"fail"}]"##))
        #expect(try disjoint(##"[{"type":"integer","maximum":3},{"type":"number","exclusiveMinimum":3}]"##))
        #expect(try !disjoint(##"[{"type":"integer","maximum":3},{"type":"number","minimum":3}]"##))
        // A literal the other side's keywords reject.
        #expect(try disjoint(##"[{"enum":["x","yy"]},{"type":"string","minLength":3}]"##))
        #expect(try !disjoint(##"[{"enum":["x","yyy"]},{"type":"string","minLength":3}]"##))
    }

    @Test func negationsAdmitExactlyTheOtherValues() throws {
        let a = try algebra("{}", GrammarOptions(additionalPropertiesByDefault: true))
        let schemas = [
            #"{}"#, #"{"type":["string","null"]}"#, #"{"enum":["a","b",null]}"#, #"{"enum":[true,false]}"#,
            #"{"required":["k"]}"#, #"{"type":"object","required":["k","m"]}"#,
            #"{"properties":{"k":{"const":"x"}}}"#, #"{"properties":{"k":{"type":"string"},"m":{"enum":["y"]}},"required":["k"]}"#,
            #"{"minLength":2}"#, #"{"type":"string","pattern":"^a","maxLength":1}"#, #"{"format":"ipv4","not":{"const":"1.2.3.4"}}"#,
            #"{"anyOf":[{"type":"string","maxLength":1},{"required":["k"]}]}"#, #"{"properties":{"k":{"minLength":2}}}"#,
        ]
        let values = [#"null"#, #"true"#, #"false"#, #"1"#, #""a""#, #""b""#, #""c""#, #""ab""#, #""ba""#, #""1.2.3.4""#, #""1.2.3.5""#,
                      #"[]"#, #"{}"#, #"{"k":"x"}"#, #"{"k":"z"}"#, #"{"k":"zz"}"#,
                      #"{"k":1}"#, #"{"k":"x","m":"y"}"#, #"{"k":"x","m":"n"}"#, #"{"m":"y"}"#].map { try! JSONValue(parsing: $0) }
        for text in schemas {
            let s = Schema.node(try node(text))
            let not = try #require(try a.negation(s, "#"), "\(text) has a negation")
            for v in values {
                #expect(try a.admits(v, s, "#") != a.admits(v, not, "#"), "\(text) and its negation on \(v.compactText)")
            }
        }
        // What no keyword can say has no negation.
        for text in [#"{"type":"integer"}"#, #"{"const":1}"#, #"{"const":true}"#, #"{"format":"zip-code"}"#, #"{"additionalProperties":false}"#,
                     #"{"oneOf":[{"required":["a"]},{"required":["b"]}]}"#, #"{"anyOf":[{"required":["a"]},{"type":"integer"}]}"#] {
            #expect(try a.negation(.node(try node(text)), "#") == nil, "\(text)")
        }
    }

    @Test func overlappingAlternativesBecomeExclusive() throws {
        let a = try algebra("{}", GrammarOptions(additionalPropertiesByDefault: true))
        let alts = try node(##"{"oneOf":[{"required":["a"]},{"required":["b"]},{"type":"string"}]}"##).oneOf!
        let exclusive = try #require(a.exclusive(alts, "#"))
        for text in [#"{"a":1}"#, #"{"b":1}"#, #"{"a":1,"b":2}"#, #"{}"#, #""s""#, "3"] {
            let v = try JSONValue(parsing: text)
            let holding = try alts.filter { try a.admits(v, $0, "#") }.count
            let branches = try exclusive.filter { try a.admits(v, $0, "#") }.count
            #expect(branches == (holding == 1 ? 1 : 0), "\(text)")
        }
    }

    @Test func literalValuesAreCheckedAgainstTheirSiblings() throws {
        let a = try algebra()
        let n = try node(##"{"type":"object","properties":{"n":{"type":"integer","minimum":2}},"required":["n"],"additionalProperties":{"type":"string"}}"##)
        #expect(try a.admits(try JSONValue(parsing: ##"{"n":3,"x":"s"}"##), n, "#"))
        #expect(try !a.admits(try JSONValue(parsing: ##"{"n":1}"##), n, "#"))
        #expect(try !a.admits(try JSONValue(parsing: ##"{"n":2.5}"##), n, "#"))
        #expect(try !a.admits(try JSONValue(parsing: ##"{"n":2,"x":1}"##), n, "#"))
        #expect(try !a.admits(try JSONValue(parsing: ##"{"x":"s"}"##), n, "#"))
        let tuple = try node(##"{"items":[{"type":"string"}],"additionalItems":{"type":"integer"},"maxItems":3}"##)
        #expect(try a.admits(try JSONValue(parsing: ##"["a",1,2]"##), tuple, "#"))
        #expect(try !a.admits(try JSONValue(parsing: ##"["a","b"]"##), tuple, "#"))
        #expect(try !a.admits(try JSONValue(parsing: ##"["a",1,2,3]"##), tuple, "#"))
        let strict = try node(##"{"minimum":1,"exclusiveMinimum":true}"##)
        #expect(try !a.admits(.number("1"), strict, "#") && a.admits(.number("1.5"), strict, "#"))
        #expect(throws: GrammarError.unsupportedKeyword(keyword: "format", pointer: "#")) {
            try a.admits(.string("x"), try node(##"{"format":"zip-code"}"##), "#")
        }
    }

    @Test func vacuousUnenforcedKeywords() throws {
        let a = try algebra()
        func vacuous(_ text: String) throws -> Bool {
            let n = try node(text)
            return n.unenforced.allSatisfy { a.isVacuous($0, in: n) }
        }
        #expect(try vacuous(##"{"then":{"type":"null"}}"##))
        #expect(try !vacuous(##"{"if":{"type":"null"},"then":false}"##))
        #expect(try vacuous(##"{"required":["a","b"],"dependentRequired":{"a":["b"]}}"##))
        // Strict mode: an undeclared property can't occur, so its dependency can't bite.
        #expect(try vacuous(##"{"properties":{"b":{}},"dependentRequired":{"a":["b"]}}"##))
        #expect(try !vacuous(##"{"properties":{"a":{}},"dependentRequired":{"a":["b"]}}"##))
    }
}

@Suite("Schema formats")
struct SchemaFormatsTests {
    static let cases: [(format: String, valid: [String], invalid: [String])] = [
        ("date", ["2024-02-29", "2000-02-29", "1999-12-31"], ["2023-02-29", "1900-02-29", "2024-04-31", "2024-1-01", "2024-01-01T00:00:00Z"]),
        ("time", ["23:59:60Z", "08:30:00.125+05:30", "00:00:00z"], ["24:00:00Z", "08:30:00", "8:30:00Z", "08:60:00Z"]),
        ("date-time", ["2024-01-01T00:00:00Z", "2024-01-01t12:00:00-01:00"], ["2024-01-01 00:00:00Z", "2024-01-01T00:00:00"]),
        ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"]),
        ("email", ["a.b+c@example.co", "x@y"], ["a@", "@b.c", "a..b@c.d", "a@-b.c"]),
        ("ipv4", ["0.0.0.0", "255.255.255.255"], ["256.0.0.1", "1.2.3", "01.2.3.4"]),
        ("hostname", ["example.com", "a-b.c"], ["-a.com", "a_b.com", String(repeating: "a", count: 64) + ".com"]),
        ("uri", ["https://example.com/a?b=c#d", "urn:isbn:0451450523"], ["//example.com", "exa mple:x", "1http://x"]),
        ("duration", ["P1Y2M3DT4H5M6S", "P4W", "PT0S", "P1M"], ["1Y", "P1H", "P1.5Y", "PT0.5S", "P", "P1Y2W", "PT"]),
        ("url", ["https://example.com/stripe-webhook", "HTTP://user@[::1]:8080/a?b#c", "ftp://host"],
         ["https://", "mailto:a@b.c", "https://exa mple.com", "example.com/a", "file:///etc"]),
        ("regex", ["", "^[a-z0-9_-]+$", "([abc])+\\s+$", "(?:a|b)*?c{2,5}", "x(?=y)", "\\bfoo\\b|\\d{3}-\\d{4}", "[^\\]x]", "a|", "((a)(b|(c)))"],
         ["(", ")", "[", "a**", "*a", "[z-a]", "a{5,2}", "(?<n>x)", "\\1", "(?=a)*", "[]", "a]", "a{", "((((a))))"]),
        ("byte", ["", "QQ==", "QUI=", "QUJD", "QUJDRA=="], ["Q", "QQ=", "QQ", "Q===", "QUJD\n", "Q-==", "QUJDRA"]),
        ("cidr", ["10.0.0.0/16", "0.0.0.0/0", "2001:db8::/32", "::/128"], ["10.0.0.0", "10.0.0.0/33", "2001:db8::/129", "256.0.0.0/8", "10.0.0.0/016"]),
    ]

    @Test(arguments: cases.map(\.format))
    func formatIsExact(_ name: String) throws {
        let c = Self.cases.first { $0.format == name }!
        let re = try #require(SchemaFormats.pattern(name))
        for v in c.valid { #expect(try StringAutomata.matches(v, pattern: re, fullMatch: true), "\(name) should accept \(v)") }
        for v in c.invalid { #expect(try !StringAutomata.matches(v, pattern: re, fullMatch: true), "\(name) should reject \(v)") }
    }

    @Test func unknownFormatsHaveNoExpression() {
        #expect(SchemaFormats.pattern("zip-code") == nil)
        #expect(Set(SchemaFormats.patterns.keys) == ["date", "time", "date-time", "uuid", "email", "ipv4", "ipv6", "hostname", "uri", "uri-reference", "iri", "iri-reference", "duration", "host-name", "ip-address", "url", "cidr", "regex", "byte"])
    }
}

extension SchemaFormatsTests {
    /// The official suite's optional format tests, for every format the decoder enforces: a
    /// string the suite calls valid must match, an invalid one must not.
    @Test(.enabled(if: SchemaTestSuiteTests.suiteRoot != nil, "../shared/json-schema-test-suite is not beside this repository"))
    func officialFormatTests() throws {
        let dir = SchemaTestSuiteTests.suiteRoot!.appendingPathComponent("draft2020-12/optional/format")
        var report: [String] = []
        for name in SchemaFormats.patterns.keys.sorted() {
            let file = dir.appendingPathComponent(name + ".json")
            guard FileManager.default.fileExists(atPath: file.path) else { continue }
            let re = SchemaFormats.pattern(name)!
            var agree = 0, disagree: [String] = []
            for group in try JSONValue(parsing: Data(contentsOf: file)).arrayValue ?? [] {
                for t in group["tests"]?.arrayValue ?? [] {
                    guard case .string(let s)? = t["data"], case .bool(let valid)? = t["valid"] else { continue }
                    if try StringAutomata.matches(s, pattern: re, fullMatch: true) == valid { agree += 1 } else { disagree.append("\(valid ? "rejects" : "accepts") \(s.debugDescription)") }
                }
            }
            report.append("\(name): \(agree)/\(agree + disagree.count)" + (disagree.isEmpty ? "" : " — " + disagree.joined(separator: ", ")))
        }
        print("JSON-Schema-Test-Suite optional formats:\n" + report.joined(separator: "\n"))
    }
}
