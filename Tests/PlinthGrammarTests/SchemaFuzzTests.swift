import Foundation
import Testing
@testable import PlinthGrammar

/// Random schemas from a grammar of keywords, with random instances and the decoder's own random
/// outputs, refereed by python-jsonschema: no instance it calls invalid may be accepted (or
/// generated), none it calls valid rejected. Formats are left out (python-jsonschema checks
/// them more loosely than their RFCs). `PLINTH_FUZZ_SCHEMAS=N` runs N schemas instead of the
/// test's slice; `PLINTH_FUZZ_SEED` picks another seed.
@Suite("Schema fuzzing")
struct SchemaFuzzTests {
    /// Builds random schemas and values from small pools, so that keywords meet and values hit
    /// their boundaries.
    struct Generator {
        var rng: SplitMix
        static let names = ["a", "b", "c", "x1"]
        static let strings = ["", "a", "b", "ab", "ba", "abc", "x", "12", "aXb", "c"]
        static let patterns = ["^a", "b$", "^[a-c]+$", "x", "^[0-9]{2}$", "a|c"]

        mutating func int(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        mutating func chance(_ p: Double) -> Bool { Double(rng.next() % 1000) < p * 1000 }
        mutating func pick<T>(_ xs: [T]) -> T { xs[int(xs.count)] }
        mutating func subset<T>(_ xs: [T], max: Int) -> [T] { Array(xs.shuffled(using: &rng).prefix(int(max + 1))) }

        mutating func scalar() -> JSONValue {
            switch int(6) {
            case 0: return .string(pick(Self.strings))
            case 1: return .number(String(pick([-1, 0, 1, 2, 3, 5, 10])))
            case 2: return .number(pick(["0.5", "2.5", "-1.5"]))
            case 3: return .bool(chance(0.5))
            case 4: return .null
            default: return .string(pick(Self.strings))
            }
        }

        mutating func value(_ depth: Int) -> JSONValue {
            guard depth > 0, chance(0.45) else { return scalar() }
            if chance(0.5) { return .array((0..<int(4)).map { _ in value(depth - 1) }) }
            return .object(subset(Self.names + ["d"], max: 3).map { (key: $0, value: value(depth - 1)) })
        }

        mutating func schema(_ depth: Int) -> JSONValue {
            var m: [(key: String, value: JSONValue)] = []
            let kinds = depth > 0 ? 9 : 5
            switch int(kinds) {
            case 0:
                let types = ["string", "integer", "number", "boolean", "null", "array", "object"]
                m.append(("type", chance(0.7) ? .string(pick(types)) : .array(subset(types, max: 2).map(JSONValue.string))))
            case 1:
                m.append(("type", .string("string")))
                if chance(0.5) { m.append(("minLength", .number(String(int(3))))) }
                if chance(0.5) { m.append(("maxLength", .number(String(1 + int(4))))) }
                if chance(0.6) { m.append(("pattern", .string(pick(Self.patterns)))) }
            case 2:
                m.append(("type", .string(pick(["integer", "number"]))))
                for k in subset(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"], max: 2) {
                    m.append((k, .number(String(k == "multipleOf" ? 2 + int(2) : int(6) - 1))))
                }
            case 3:
                if chance(0.5) { m.append(("enum", .array((0..<1 + int(3)).map { _ in scalar() }))) } else { m.append(("const", scalar())) }
            case 4:
                if chance(0.5) { m.append(("not", schema(0))) } else { m.append(("type", .string(pick(["string", "boolean", "null"])))) }
            case 5:
                m.append(("type", .string("object")))
                let props = subset(Self.names, max: 3)
                if !props.isEmpty { m.append(("properties", .object(props.map { (key: $0, value: schema(depth - 1)) }))) }
                let required = subset(props + ["d"], max: 2)
                if !required.isEmpty { m.append(("required", .array(required.map(JSONValue.string)))) }
                if chance(0.4) { m.append(("additionalProperties", chance(0.5) ? .bool(false) : schema(depth - 1))) }
                if chance(0.15) { m.append(("patternProperties", .object([("^x", schema(depth - 1))]))) }
                if chance(0.15) { m.append(("propertyNames", .object([("pattern", .string("^[a-c]"))]))) }
                if chance(0.15) { m.append(("dependentRequired", .object([(pick(Self.names), .array([.string(pick(Self.names))]))]))) }
                if chance(0.15) { m.append((pick(["minProperties", "maxProperties"]), .number(String(int(3))))) }
            case 6:
                m.append(("type", .string("array")))
                if chance(0.3) { m.append(("prefixItems", .array([schema(depth - 1), schema(depth - 1)]))) }
                if chance(0.7) { m.append(("items", chance(0.2) ? .bool(false) : schema(depth - 1))) }
                if chance(0.4) { m.append(("minItems", .number(String(int(3))))) }
                if chance(0.4) { m.append(("maxItems", .number(String(1 + int(3))))) }
                if chance(0.2) { m.append(("uniqueItems", .bool(true))) }
            case 7:
                let key = pick(["anyOf", "oneOf", "allOf"])
                m.append((key, .array((0..<2 + int(2)).map { _ in schema(depth - 1) })))
            default:
                if chance(0.5) { m.append(("not", schema(depth - 1))) } else {
                    m.append(("if", schema(depth - 1)))
                    if chance(0.8) { m.append(("then", schema(depth - 1))) }
                    if chance(0.6) { m.append(("else", schema(depth - 1))) }
                }
            }
            return .object(m)
        }
    }

    /// The referee's verdicts on (schema, instance text) pairs (nil where a number is beyond its
    /// exact arithmetic); nil without python-jsonschema.
    static func referee(_ pairs: [(schema: String, instance: String)]) throws -> [Bool?]? {
        guard SoundnessTests.pythonJSONSchema else { return nil }
        let input = try JSONSerialization.data(withJSONObject: pairs.map { ["schema": $0.schema, "instance": $0.instance] })
        // Numbers as exact decimals (JSON Schema's numbers are mathematical; a float would round
        // a long integer and fail its multipleOf), an integral decimal counting as an integer.
        let script = """
        import json, sys, jsonschema, decimal
        from decimal import Decimal
        decimal.getcontext().prec = 5000
        decimal.getcontext().Emax = decimal.MAX_EMAX
        decimal.getcontext().Emin = decimal.MIN_EMIN
        def integer(checker, x):
            if isinstance(x, bool): return False
            return isinstance(x, int) or (isinstance(x, Decimal) and x == x.to_integral_value())
        types = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", integer)
        Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=types)
        out = []
        for p in json.load(sys.stdin):
            try: out.append(Validator(json.loads(p["schema"])).is_valid(json.loads(p["instance"], parse_float=Decimal)))
            except decimal.DecimalException: out.append(None)  # beyond exact arithmetic: undecided
        print(json.dumps(out))
        """
        let out = try SoundnessTests.runPython(script, input: input)
        return (try JSONSerialization.jsonObject(with: out) as? [Any])?.map { $0 as? Bool }
    }

    @Test("Random schemas and instances agree with python-jsonschema",
          .enabled(if: SoundnessTests.pythonJSONSchema, "python3 with the jsonschema package is not installed"))
    func randomSchemasAgreeWithTheReferee() throws {
        let env = ProcessInfo.processInfo.environment
        let count = env["PLINTH_FUZZ_SCHEMAS"].flatMap(Int.init) ?? 300
        var gen = Generator(rng: SplitMix(state: env["PLINTH_FUZZ_SEED"].flatMap(UInt64.init) ?? 21))
        let options = GrammarOptions(additionalPropertiesByDefault: true)
        // (schema, instance, whether the decoder accepts it, whether it came from the decoder)
        var cases: [(schema: String, instance: String, accepted: Bool, generated: Bool)] = []
        var compiled = 0, refused = 0
        for i in 0..<count {
            let schema = gen.schema(3)
            let text = schema.compactText
            guard let g = try? TestVocab.grammar(text, options) else { refused += 1; continue }
            compiled += 1
            for _ in 0..<12 {
                let v = gen.value(2)
                let instance = v.reordered(forSchema: schema).compactText
                cases.append((text, instance, TestVocab.accepts(g, instance), false))
            }
            for out in SoundnessTests.randomWalks(g, seed: UInt64(1000 + i), walks: 3, checkAll: false) {
                cases.append((text, out, true, true))
            }
        }
        guard let verdicts = try Self.referee(cases.map { ($0.schema, $0.instance) }) else {
            Issue.record("the referee gave no verdicts")
            return
        }
        #expect(verdicts.count == cases.count)
        var acceptedInvalid: [String] = [], rejectedValid: [String] = []
        var valid = 0, generated = 0, undecided = 0
        for (c, verdict) in zip(cases, verdicts) {
            guard let ok = verdict else { undecided += 1; continue }
            if ok { valid += 1 }
            if c.generated { generated += 1 }
            if c.accepted && !ok { acceptedInvalid.append("\(c.schema) \(c.instance)") }
            if !c.accepted && ok { rejectedValid.append("\(c.schema) \(c.instance)") }
        }
        print("schema fuzzing: \(count) schemas, \(compiled) compiled, \(refused) refused; \(cases.count) instances (\(generated) generated by the decoder), \(valid) valid, \(undecided) undecided; accepted invalid \(acceptedInvalid.count), rejected valid \(rejectedValid.count)")
        #expect(compiled > count / 2)
        #expect(undecided * 100 <= cases.count)
        #expect(acceptedInvalid.isEmpty, "invalid instances accepted or generated: \(acceptedInvalid.prefix(5))")
        #expect(rejectedValid.isEmpty, "valid instances rejected: \(rejectedValid.prefix(5))")
    }
}
