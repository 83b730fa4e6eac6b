/// Compiles a JSON Schema document (draft 2020-12 or draft-07) into a ``Grammar``.
final class SchemaCompiler {
    typealias Members = [(key: String, value: JSONValue)]

    let doc: JSONValue
    let options: GrammarOptions
    let b: GrammarBuilder
    var ignored: [String] = []
    var refRules: [String: Int32] = [:]
    var anyValueRule: Int32?
    let draft7: Bool
    let rootID: String?
    var mergeDepth = 0

    static let annotations: Set<String> = [
        "title", "description", "default", "examples", "example", "$comment", "$schema", "$id", "id", "$anchor",
        "$dynamicAnchor", "$recursiveAnchor", "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
        "contentMediaType", "contentEncoding", "contentSchema", "x-order", "$vocabulary", "discriminator", "nullable",
    ]
    static let handled: Set<String> = [
        "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
        "additionalItems", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "multipleOf", "minLength", "maxLength", "pattern", "format", "anyOf", "oneOf", "allOf", "$ref",
        "patternProperties", "minProperties", "maxProperties",
    ]
    static let unsupported: Set<String> = [
        "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains",
        "uniqueItems", "$dynamicRef", "$recursiveRef",
    ]
    static let formats: [String: String] = {
        // Calendar-exact (RFC 3339 full-date): day ranges per month, 29 February only in
        // Gregorian leap years (divisible by 4, centuries only when divisible by 400).
        let leap = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
        let date = "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))|\(leap)-02-29)"
        let time = "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
        let octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
        let hex = "[0-9a-fA-F]"
        return [
            "date": date,
            "time": time,
            "date-time": date + "[Tt]" + time,
            "uuid": "\(hex){8}-\(hex){4}-\(hex){4}-\(hex){4}-\(hex){12}",
            "email": "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*",
            "ipv4": "\(octet)\\.\(octet)\\.\(octet)\\.\(octet)",
            "hostname": "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*",
            "uri": "[A-Za-z][A-Za-z0-9+.-]*:[^\\s\"<>\\\\^`{|}]*",
            "duration": "P(([0-9]+Y)?([0-9]+M)?([0-9]+W)?([0-9]+D)?(T([0-9]+H)?([0-9]+M)?([0-9]+(\\.[0-9]+)?S)?)?)",
        ]
    }()

    init(_ doc: JSONValue, options: GrammarOptions) {
        self.doc = doc
        self.options = options
        b = GrammarBuilder(stateBudget: options.stateBudget, timeLimit: options.timeLimit)
        let schemaURI = doc["$schema"]?.stringValue ?? ""
        draft7 = schemaURI.contains("draft-07") || schemaURI.contains("draft-06") || schemaURI.contains("draft-04")
        rootID = (doc["$id"] ?? doc["id"])?.stringValue
    }

    func compile() throws(GrammarError) -> Grammar {
        let root = try rule(doc, "#")
        return try Grammar(builder: b, root: root, pointer: "#")
    }

    // MARK: Dispatch

    func rule(_ s: JSONValue, _ ptr: String) throws(GrammarError) -> Int32 {
        try b.checkLimits()
        switch s {
        case .bool(true): return try anyValue()
        case .bool(false): return emptyRule()
        case .object(let d): return try ruleFor(d, ptr)
        default: throw .invalidSchema(reason: "a schema must be an object or a boolean", pointer: ptr)
        }
    }

    func get(_ d: Members, _ k: String) -> JSONValue? { d.first(where: { $0.key == k })?.value }
    func without(_ d: Members, _ keys: Set<String>) -> Members { d.filter { !keys.contains($0.key) } }
    func hasAssertions(_ d: Members) -> Bool { d.contains { SchemaCompiler.handled.contains($0.key) || SchemaCompiler.unsupported.contains($0.key) } }

    func ruleFor(_ d0: Members, _ ptr: String) throws(GrammarError) -> Int32 {
        var d = d0
        if let ref = get(d, "$ref") {
            guard case .string(let r) = ref else { throw .invalidSchema(reason: "$ref must be a string", pointer: ptr + "/$ref") }
            let siblings = without(d, ["$ref"])
            if draft7 || !hasAssertions(siblings) { return try refRule(r, ptr + "/$ref") }
            let (target, tptr) = try resolve(r, ptr + "/$ref")
            guard case .object(let td) = target else {
                if case .bool(false) = target { return emptyRule() }
                d = siblings
                return try ruleFor(d, ptr)
            }
            _ = tptr
            d = try merge(siblings, td, ptr)
            return try ruleFor(d, ptr)
        }
        if let all = get(d, "allOf") {
            guard case .array(let members) = all, !members.isEmpty else { throw .invalidSchema(reason: "allOf must be a non-empty array", pointer: ptr + "/allOf") }
            var acc = without(d, ["allOf"])
            for (i, m) in members.enumerated() {
                let md = try inlineDict(m, ptr + "/allOf/\(i)")
                guard let md else { return emptyRule() }
                acc = try merge(acc, md, ptr + "/allOf/\(i)")
            }
            return try ruleFor(acc, ptr)
        }
        let anyOf = get(d, "anyOf"), oneOf = get(d, "oneOf")
        if anyOf != nil || oneOf != nil {
            if anyOf != nil && oneOf != nil {
                // Both: exactly one oneOf branch (checked exclusive) and some anyOf branch.
                guard let a = anyOf?.arrayValue, let o = oneOf?.arrayValue else {
                    throw .invalidSchema(reason: "anyOf and oneOf must be arrays", pointer: ptr)
                }
                if !(try provablyDisjoint(o, ptr)) {
                    if options.lenient { ignored.append(ptr + "/oneOf") } else { throw .unsupportedKeyword(keyword: "oneOf", pointer: ptr + "/oneOf") }
                }
                return try ruleFor(without(d, ["anyOf", "oneOf"]) + [("anyOf", try product(a, o, ptr))], ptr)
            }
            let key = anyOf != nil ? "anyOf" : "oneOf"
            guard case .array(let alts) = (anyOf ?? oneOf)!, !alts.isEmpty else {
                throw .invalidSchema(reason: "\(key) must be a non-empty array", pointer: ptr + "/" + key)
            }
            let siblings = without(d, [key])
            let mergeSiblings = hasAssertions(siblings)
            var altDicts: [(JSONValue, String)] = []
            for (i, a) in alts.enumerated() {
                let aptr = ptr + "/\(key)/\(i)"
                if mergeSiblings {
                    guard let ad = try inlineDict(a, aptr) else { continue }
                    altDicts.append((.object(try merge(siblings, ad, aptr)), aptr))
                } else {
                    altDicts.append((a, aptr))
                }
            }
            if key == "oneOf" && altDicts.count > 1 {
                if !(try provablyDisjoint(altDicts.map(\.0), ptr)) {
                    if options.lenient { ignored.append(ptr + "/oneOf") } else {
                        throw .unsupportedKeyword(keyword: "oneOf", pointer: ptr + "/oneOf")
                    }
                }
            }
            var rules: [Int32] = []
            for (a, aptr) in altDicts { rules.append(try rule(a, aptr)) }
            return try dispatch(rules, ptr)
        }
        try checkKeywords(d, ptr)
        if get(d, "enum") != nil || get(d, "const") != nil { return try literalRule(d, ptr) }
        return try typedRule(d, ptr)
    }

    /// The pairwise conjunctions of two lists of alternatives.
    func product(_ a: [JSONValue], _ b: [JSONValue], _ ptr: String) throws(GrammarError) -> JSONValue {
        guard a.count * b.count <= 256 else { throw .budgetExceeded("allOf over unions with more than 256 combinations at \(ptr)") }
        var out: [JSONValue] = []
        for x in a { for y in b { out.append(.object([("allOf", .array([x, y]))])) } }
        return .array(out)
    }

    /// A subschema as an object (resolving a top-level `$ref` chain); nil for `false`.
    func inlineDict(_ s: JSONValue, _ ptr: String) throws(GrammarError) -> Members? {
        var cur = s
        var p = ptr
        for _ in 0..<32 {
            switch cur {
            case .bool(true): return []
            case .bool(false): return nil
            case .object(let d):
                if let r = get(d, "$ref")?.stringValue {
                    let siblings = without(d, ["$ref"])
                    let (t, tp) = try resolve(r, p + "/$ref")
                    if !hasAssertions(siblings) || draft7 { cur = t; p = tp; continue }
                    guard let td = try inlineDict(t, tp) else { return nil }
                    return try merge(siblings, td, p)
                }
                return d
            default: throw .invalidSchema(reason: "a schema must be an object or a boolean", pointer: p)
            }
        }
        throw .leftRecursion(pointer: ptr)
    }

    func checkKeywords(_ d: Members, _ ptr: String) throws(GrammarError) {
        for (k, v) in d where SchemaCompiler.unsupported.contains(k) {
            // Keywords whose value makes them vacuous here.
            switch k {
            case "uniqueItems" where v == .bool(false): continue
            case "uniqueItems" where (get(d, "maxItems")?.integerValue ?? 2) <= 1: continue
            case "then" where get(d, "if") == nil, "else" where get(d, "if") == nil: continue
            case "if" where get(d, "then") == nil && get(d, "else") == nil: continue
            case "dependentRequired", "dependencies":
                // Vacuous when every dependency is already required.
                if let deps = v.objectMembers {
                    let req = Set(get(d, "required")?.arrayValue?.compactMap(\.stringValue) ?? [])
                    let ok = deps.allSatisfy { dep in
                        guard let list = dep.value.arrayValue else { return false }
                        return list.allSatisfy { ($0.stringValue).map(req.contains) ?? false } || !propertyPossible(d, dep.key)
                    }
                    if ok { continue }
                }
            default: break
            }
            if options.lenient { ignored.append(ptr + "/" + k); continue }
            throw .unsupportedKeyword(keyword: k, pointer: ptr + "/" + k)
        }
    }

    func propertyPossible(_ d: Members, _ name: String) -> Bool {
        if get(d, "properties")?[name] != nil || get(d, "patternProperties") != nil { return true }
        let ap = get(d, "additionalProperties")
        return !(ap == .bool(false) || (ap == nil && !options.additionalPropertiesByDefault))
    }

    // MARK: References

    func unescape(_ s: Substring) -> String {
        if !s.utf8.contains(where: { $0 == 0x7E || $0 == 0x25 }) { return String(s) }
        var r = String(s).replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
        if r.contains("%"), let dec = r.removingPercentEncoding { r = dec }
        return r
    }

    func resolve(_ ref: String, _ ptr: String) throws(GrammarError) -> (JSONValue, String) {
        var r = ref
        if let id = rootID, r.hasPrefix(id) { r = String(r.dropFirst(id.count)) }
        if r.isEmpty { r = "#" }
        guard r.hasPrefix("#") else { throw .unresolvedReference(ref, pointer: ptr) }
        if r == "#" { return (doc, "#") }
        if !r.hasPrefix("#/") {
            let name = String(r.dropFirst())
            if let (v, p) = findAnchor(doc, name, "#") { return (v, p) }
            throw .unresolvedReference(ref, pointer: ptr)
        }
        var cur = doc
        for part in r.dropFirst(2).split(separator: "/", omittingEmptySubsequences: false) {
            let key = unescape(part)
            switch cur {
            case .object(let m):
                guard let v = m.first(where: { $0.key == key })?.value else { throw .unresolvedReference(ref, pointer: ptr) }
                cur = v
            case .array(let a):
                guard let i = Int(key), i >= 0, i < a.count else { throw .unresolvedReference(ref, pointer: ptr) }
                cur = a[i]
            default: throw .unresolvedReference(ref, pointer: ptr)
            }
        }
        return (cur, r)
    }

    func findAnchor(_ v: JSONValue, _ name: String, _ p: String) -> (JSONValue, String)? {
        switch v {
        case .object(let m):
            if m.contains(where: { ($0.key == "$anchor" && $0.value.stringValue == name) || ($0.key == "$id" && $0.value.stringValue == "#" + name) }) { return (v, p) }
            for (k, x) in m { if let f = findAnchor(x, name, p + "/" + k) { return f } }
        case .array(let a):
            for (i, x) in a.enumerated() { if let f = findAnchor(x, name, p + "/\(i)") { return f } }
        default: break
        }
        return nil
    }

    func refRule(_ ref: String, _ ptr: String) throws(GrammarError) -> Int32 {
        let (target, tptr) = try resolve(ref, ptr)
        if let r = refRules[tptr] { return r }
        let r = b.reserve(pointer: tptr)
        refRules[tptr] = r
        let t = try rule(target, tptr)
        guard t != r, b.rules[Int(t)].dfa != nil else { throw .leftRecursion(pointer: ptr) }
        let src = b.rules[Int(t)]
        try b.define(r, src.dfa!, counted: src.counted, returnLabels: src.returnLabels, leafKey: src.leafKey, shared: src.shared)
        return r
    }

    // MARK: Merging (allOf)

    func merge(_ a: Members, _ bd: Members, _ ptr: String) throws(GrammarError) -> Members {
        mergeDepth += 1
        defer { mergeDepth -= 1 }
        if mergeDepth > 64 { throw .leftRecursion(pointer: ptr) }
        var out = a
        func set(_ k: String, _ v: JSONValue) {
            if let i = out.firstIndex(where: { $0.key == k }) { out[i].value = v } else { out.append((k, v)) }
        }
        let aProps = get(a, "properties")?.objectMembers
        let bProps = get(bd, "properties")?.objectMembers
        // Positional array keywords: `items` applies after the prefix of its own schema only.
        let arrayKeys: Set<String> = ["items", "prefixItems", "additionalItems"]
        let aArr = a.filter { arrayKeys.contains($0.key) }, bArr = bd.filter { arrayKeys.contains($0.key) }
        if !aArr.isEmpty && !bArr.isEmpty {
            func parts(_ d: Members) throws(GrammarError) -> (prefix: [JSONValue], rest: JSONValue) {
                if case .array(let t)? = get(d, "items") { return (t, get(d, "additionalItems") ?? .bool(true)) }
                return (get(d, "prefixItems")?.arrayValue ?? [], get(d, "items") ?? .bool(true))
            }
            let (pa, ra) = try parts(a), (pb, rb) = try parts(bd)
            var prefix: [JSONValue] = []
            for i in 0..<max(pa.count, pb.count) {
                let x = i < pa.count ? pa[i] : ra, y = i < pb.count ? pb[i] : rb
                prefix.append(.object([("allOf", .array([x, y]))]))
            }
            out.removeAll { arrayKeys.contains($0.key) }
            if !prefix.isEmpty { out.append(("prefixItems", .array(prefix))) }
            out.append(("items", .object([("allOf", .array([ra, rb]))])))
        }
        for (k, v) in bd {
            if k == "properties" || k == "additionalProperties" { continue } // handled below
            if arrayKeys.contains(k) && !aArr.isEmpty { continue } // merged above
            guard let cur = get(out, k) else { out.append((k, v)); continue }
            if cur == v { continue }
            switch k {
            case "type":
                let x = typeSet(cur), y = typeSet(v)
                var r = x.intersection(y)
                if x.contains("integer") && y.contains("number") { r.insert("integer") }
                if y.contains("integer") && x.contains("number") { r.insert("integer") }
                if r.contains("integer") { r.remove("number") }
                set(k, .array(r.sorted().map { .string($0) }))
            case "required":
                let x = cur.arrayValue ?? [], y = v.arrayValue ?? []
                set(k, .array(x + y.filter { !x.contains($0) }))
            case "minLength", "minItems", "minProperties":
                set(k, (cur.integerValue ?? 0) >= (v.integerValue ?? 0) ? cur : v)
            case "maxLength", "maxItems", "maxProperties":
                set(k, (cur.integerValue ?? Int.max) <= (v.integerValue ?? Int.max) ? cur : v)
            case "minimum", "exclusiveMinimum":
                guard let x = cur.numberText.flatMap(DecimalNumber.init), let y = v.numberText.flatMap(DecimalNumber.init) else { fallthrough }
                set(k, x < y ? v : cur)
            case "maximum", "exclusiveMaximum":
                guard let x = cur.numberText.flatMap(DecimalNumber.init), let y = v.numberText.flatMap(DecimalNumber.init) else {
                    throw .unsupportedKeyword(keyword: k, pointer: ptr)
                }
                set(k, x < y ? cur : v)
            case "pattern":
                let x = cur.arrayValue ?? [cur], y = v.arrayValue ?? [v]
                set(k, .array(x + y))
            case "enum":
                let x = cur.arrayValue ?? [], y = v.arrayValue ?? []
                set(k, .array(x.filter { y.contains($0) }))
            case "const":
                set("enum", .array([]))
            case "items", "additionalItems":
                set(k, .object([("allOf", .array([cur, v]))]))
            case "anyOf", "oneOf":
                set(k, try product(cur.arrayValue ?? [], v.arrayValue ?? [], ptr))
            case "allOf":
                set(k, .array((cur.arrayValue ?? []) + (v.arrayValue ?? [])))
            case "format":
                set("pattern", .array((get(out, "pattern").map { $0.arrayValue ?? [$0] } ?? [])))
                throw .unsupportedKeyword(keyword: "format", pointer: ptr)
            case "multipleOf":
                guard let x = cur.integerValue, let y = v.integerValue, x > 0, y > 0 else { throw .unsupportedKeyword(keyword: k, pointer: ptr) }
                func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
                set(k, .number(String(x / gcd(x, y) * y)))
            default:
                if SchemaCompiler.annotations.contains(k) || !(SchemaCompiler.handled.contains(k) || SchemaCompiler.unsupported.contains(k)) { continue }
                if options.lenient { ignored.append(ptr + "/" + k); continue }
                throw .unsupportedKeyword(keyword: k, pointer: ptr + "/" + k)
            }
        }
        // Which keys a side's patternProperties govern isn't expressible in the merged properties
        // below, so patterns merge only with a side that says nothing about properties.
        let objectKeys: Set<String> = ["properties", "additionalProperties", "patternProperties"]
        if get(a, "patternProperties") != nil || get(bd, "patternProperties") != nil,
           a.contains(where: { objectKeys.contains($0.key) }) && bd.contains(where: { objectKeys.contains($0.key) }) {
            throw .unsupportedKeyword(keyword: "patternProperties", pointer: ptr)
        }
        // Properties and additionalProperties: each side constrains the other's extra properties.
        if aProps != nil || bProps != nil || get(a, "additionalProperties") != nil || get(bd, "additionalProperties") != nil {
            let apA = get(a, "additionalProperties") ?? .bool(true)
            let apB = get(bd, "additionalProperties") ?? .bool(true)
            var props: Members = []
            let pa = aProps ?? [], pb = bProps ?? []
            for (k, v) in pa {
                if let w = pb.first(where: { $0.key == k })?.value { props.append((k, .object([("allOf", .array([v, w]))]))) }
                else { props.append((k, apB == .bool(true) ? v : .object([("allOf", .array([v, apB]))]))) }
            }
            for (k, w) in pb where !pa.contains(where: { $0.key == k }) {
                props.append((k, apA == .bool(true) ? w : .object([("allOf", .array([w, apA]))])))
            }
            out.removeAll { $0.key == "properties" || $0.key == "additionalProperties" }
            if !props.isEmpty { out.append(("properties", .object(props))) }
            let hadA = get(a, "additionalProperties") != nil, hadB = get(bd, "additionalProperties") != nil
            if hadA || hadB {
                let ap: JSONValue
                if apA == .bool(true) { ap = apB } else if apB == .bool(true) { ap = apA }
                else { ap = .object([("allOf", .array([apA, apB]))]) }
                out.append(("additionalProperties", ap))
            }
        }
        return out
    }

    func typeSet(_ v: JSONValue) -> Set<String> {
        if case .string(let s) = v { return [s] }
        return Set(v.arrayValue?.compactMap(\.stringValue) ?? [])
    }

    // MARK: oneOf exclusivity

    /// The JSON types a schema can produce (approximate from above).
    func possibleTypes(_ s: JSONValue) throws(GrammarError) -> Set<String> {
        let all: Set<String> = ["null", "boolean", "object", "array", "number", "integer", "string"]
        guard let d = try inlineDict(s, "#") else { return [] }
        if let e = get(d, "enum")?.arrayValue { return Set(e.map(\.typeName)) }
        if let c = get(d, "const") { return [c.typeName] }
        if let alts = (get(d, "anyOf") ?? get(d, "oneOf"))?.arrayValue {
            var r = Set<String>()
            for a in alts { r.formUnion(try possibleTypes(a)) }
            if let t = get(d, "type") { r.formIntersection(expand(typeSet(t))) }
            return r
        }
        if let t = get(d, "type") { return expand(typeSet(t)) }
        return all
    }

    func expand(_ t: Set<String>) -> Set<String> { t.contains("number") ? t.union(["integer"]) : t }

    /// Const/enum values a required property is restricted to, if any.
    func discriminators(_ s: JSONValue) throws(GrammarError) -> [String: [JSONValue]] {
        guard let d = try inlineDict(s, "#"), let props = get(d, "properties")?.objectMembers else { return [:] }
        let req = Set(get(d, "required")?.arrayValue?.compactMap(\.stringValue) ?? [])
        var out: [String: [JSONValue]] = [:]
        for (k, v) in props where req.contains(k) {
            guard let pd = try inlineDict(v, "#") else { continue }
            if let c = get(pd, "const") { out[k] = [c] } else if let e = get(pd, "enum")?.arrayValue { out[k] = e }
        }
        return out
    }

    func provablyDisjoint(_ alts: [JSONValue], _ ptr: String) throws(GrammarError) -> Bool {
        let types = try alts.map { a throws(GrammarError) in try possibleTypes(a) }
        let discs = try alts.map { a throws(GrammarError) in try discriminators(a) }
        let lits = try alts.map { a throws(GrammarError) -> [JSONValue]? in
            guard let d = try inlineDict(a, "#") else { return [] }
            if let c = get(d, "const") { return [c] }
            return get(d, "enum")?.arrayValue
        }
        for i in 0..<alts.count {
            for j in (i + 1)..<alts.count {
                let common = types[i].intersection(types[j])
                if common.isEmpty { continue }
                if let x = lits[i], let y = lits[j], !x.contains(where: { y.contains($0) }) { continue }
                if common.isSubset(of: ["object"]) {
                    let shared = Set(discs[i].keys).intersection(discs[j].keys)
                    if shared.contains(where: { k in !discs[i][k]!.contains(where: { discs[j][k]!.contains($0) }) }) { continue }
                }
                return false
            }
        }
        return true
    }

    // MARK: Rules

    func emptyRule() -> Int32 {
        (try? b.leaf("empty", pointer: "#") { () throws(GrammarError) -> DFA in var d = DFA(); d.add(); return d }) ?? 0
    }

    func dispatch(_ rules: [Int32], _ ptr: String) throws(GrammarError) -> Int32 {
        var unique: [Int32] = []
        for r in rules where !unique.contains(r) { unique.append(r) }
        if unique.count == 1 { return unique[0] }
        // Start, a call of each alternative, then the accepting end: already deterministic.
        var dfa = DFA()
        let s = dfa.add(), e = dfa.add(accepting: true)
        dfa.calls[Int(s)] = unique.map { CallEdge(rule: $0, to: e) }
        let r = b.reserve(pointer: ptr)
        try b.define(r, dfa)
        return r
    }

    func ws(_ nfa: inout NFA, _ from: Int32) -> Int32 {
        guard case .flexible(let maxRun) = options.whitespace, maxRun > 0 else { return from }
        let end = nfa.add()
        nfa.epsilon(from, end)
        var s = from
        for _ in 0..<maxRun {
            let t = nfa.add()
            for c: UInt8 in [0x20, 0x0A, 0x0D, 0x09] { nfa.range(s, c, c, t) }
            nfa.epsilon(t, end)
            s = t
        }
        return end
    }

    var wsKey: String {
        if case .flexible(let n) = options.whitespace { return "ws\(n)" }
        return "c"
    }

    /// Any JSON value.
    func anyValue() throws(GrammarError) -> Int32 {
        if let r = anyValueRule { return r }
        let v = b.reserve(pointer: "#")
        anyValueRule = v
        let str = try stringLeaf(minLength: 0, maxLength: nil)
        // Object
        var o = NFA()
        let os = o.add(), oe = o.add()
        var s = ws(&o, o.literal(os, [0x7B]))
        o.range(s, 0x7D, 0x7D, oe)
        let loop = o.add()
        let k = o.add(); o.call(s, str, k)
        var t = ws(&o, k); t = ws(&o, o.literal(t, [0x3A]))
        let val = o.add(); o.call(t, v, val)
        s = ws(&o, val)
        o.epsilon(s, loop)
        o.range(loop, 0x7D, 0x7D, oe)
        var c = ws(&o, o.literal(loop, [0x2C]))
        let k2 = o.add(); o.call(c, str, k2)
        t = ws(&o, k2); t = ws(&o, o.literal(t, [0x3A]))
        let val2 = o.add(); o.call(t, v, val2)
        o.epsilon(ws(&o, val2), loop)
        let objRule = try b.rule(o, start: os, accept: oe, pointer: "#")
        // Array
        var a = NFA()
        let as_ = a.add(), ae = a.add()
        let open = ws(&a, a.literal(as_, [0x5B]))
        a.range(open, 0x5D, 0x5D, ae)
        let item = a.add(); a.call(open, v, item)
        let aloop = ws(&a, item)
        a.range(aloop, 0x5D, 0x5D, ae)
        c = ws(&a, a.literal(aloop, [0x2C]))
        a.call(c, v, item)
        let arrRule = try b.rule(a, start: as_, accept: ae, pointer: "#")
        let num = try numberLeaf(integer: false, d: [], ptr: "#")
        let lits = try b.leaf("lit:tfn", pointer: "#") { () throws(GrammarError) -> DFA in
            var n = NFA(); let s = n.add(), e = n.add()
            for w in ["true", "false", "null"] { n.epsilon(n.literal(s, Array(w.utf8)), e) }
            return try DFA.determinize(n, start: s, accepting: [e], budget: 1000)
        }
        var dn = NFA()
        let ds = dn.add(), de = dn.add()
        for r in [objRule, arrRule, str, num, lits] { dn.call(ds, r, de) }
        let dfa = try DFA.determinize(dn, start: ds, accepting: [de], budget: 100)
        try b.define(v, dfa)
        return v
    }

    func typedRule(_ d: Members, _ ptr: String) throws(GrammarError) -> Int32 {
        var types: [String]
        if let t = get(d, "type") {
            switch t {
            case .string(let s): types = [s]
            case .array(let xs):
                types = []
                for x in xs {
                    guard let s = x.stringValue else { throw .invalidSchema(reason: "type entries must be strings", pointer: ptr + "/type") }
                    types.append(s)
                }
            default: throw .invalidSchema(reason: "type must be a string or an array", pointer: ptr + "/type")
            }
        } else {
            types = ["object", "array", "string", "number", "boolean", "null"]
        }
        let known: Set<String> = ["object", "array", "string", "number", "integer", "boolean", "null"]
        for t in types where !known.contains(t) { throw .invalidSchema(reason: "unknown type '\(t)'", pointer: ptr + "/type") }
        if types.contains("number") { types.removeAll { $0 == "integer" } }
        var rules: [Int32] = []
        var lits: [String] = []
        for t in ["object", "array", "string", "number", "integer", "boolean", "null"] where types.contains(t) {
            switch t {
            case "object": rules.append(try objectRule(d, ptr))
            case "array": rules.append(try arrayRule(d, ptr))
            case "string": rules.append(try stringRule(d, ptr))
            case "number": rules.append(try numberLeaf(integer: false, d: d, ptr: ptr))
            case "integer": rules.append(try numberLeaf(integer: true, d: d, ptr: ptr))
            case "boolean": lits += ["true", "false"]
            default: lits.append("null")
            }
        }
        if !lits.isEmpty {
            rules.append(try b.leaf("lit:" + lits.joined(separator: ","), pointer: ptr) { () throws(GrammarError) -> DFA in
                var n = NFA(); let s = n.add(), e = n.add()
                for w in lits { n.epsilon(n.literal(s, Array(w.utf8)), e) }
                return try DFA.determinize(n, start: s, accepting: [e], budget: 1000)
            })
        }
        if rules.isEmpty { return emptyRule() }
        return try dispatch(rules, ptr)
    }

    // MARK: Objects

    func objectRule(_ d: Members, _ ptr: String) throws(GrammarError) -> Int32 {
        var props: Members = []
        if let p = get(d, "properties") {
            guard let m = p.objectMembers else { throw .invalidSchema(reason: "properties must be an object", pointer: ptr + "/properties") }
            props = m
        }
        if let order = get(d, "x-order")?.arrayValue?.compactMap(\.stringValue) {
            props.sort { (order.firstIndex(of: $0.key) ?? Int.max) < (order.firstIndex(of: $1.key) ?? Int.max) }
        }
        var required = Set<String>()
        var requiredOrder: [String] = []
        if let r = get(d, "required") {
            guard let arr = r.arrayValue else { throw .invalidSchema(reason: "required must be an array", pointer: ptr + "/required") }
            for x in arr { if let s = x.stringValue, required.insert(s).inserted { requiredOrder.append(s) } }
        }
        let ap = get(d, "additionalProperties") ?? .bool(options.additionalPropertiesByDefault)
        var patterns: [(regex: String, schema: JSONValue)] = []
        if let pp = get(d, "patternProperties") {
            guard let m = pp.objectMembers else {
                throw .invalidSchema(reason: "patternProperties must be an object", pointer: ptr + "/patternProperties")
            }
            patterns = m.map { ($0.key, $0.value) }
            guard patterns.count <= 4 else {
                throw .budgetExceeded("more than 4 patternProperties in one object at \(ptr)")
            }
        }
        // Each pattern's automaton, built once for the names below and the key leaves.
        let budget = options.stateBudget
        var patternDFAs: [DFA] = []
        for (re, _) in patterns { patternDFAs.append(try SchemaCompiler.patternStringDFA(re, fullMatch: false, budget: budget)) }
        // A key's value satisfies the schema of every pattern the key matches; a key no
        // property declares and no pattern matches is an additional property.
        func patternSchemas(_ name: String) -> [JSONValue] {
            guard !patterns.isEmpty else { return [] }
            let key = Array(JSONWriter.quoted(name).utf8)
            return patterns.indices.filter { patternDFAs[$0].accepts(key) }.map { patterns[$0].schema }
        }
        func allOf(_ schemas: [JSONValue]) -> JSONValue {
            let kept = schemas.filter { $0 != .bool(true) }
            return kept.count == 1 ? kept[0] : kept.isEmpty ? .bool(true) : .object([("allOf", .array(kept))])
        }
        for i in props.indices {
            let extra = patternSchemas(props[i].key)
            if !extra.isEmpty && props[i].value != .bool(false) { props[i].value = allOf([props[i].value] + extra) }
        }
        // Undeclared required names follow the declared ones in `required` order, the order
        // schema authors (and `reordered(forSchema:)`) list them in.
        for name in requiredOrder where !props.contains(where: { $0.key == name }) {
            let matched = patternSchemas(name)
            if matched.isEmpty && ap == .bool(false) { return emptyRule() }
            props.append((name, matched.isEmpty ? ap : allOf(matched)))
        }
        // Compile property value rules.
        var valueRules: [Int32?] = []
        for (name, schema) in props {
            if schema == .bool(false) {
                if required.contains(name) { return emptyRule() }
                valueRules.append(nil)
                continue
            }
            valueRules.append(try rule(schema, ptr + "/properties/" + escapePointer(name)))
        }
        // Members after the declared ones: (key automaton, value rule) pairs.
        var extras: [(key: Int32, value: Int32)] = []
        let names = props.map(\.key)
        let namesKey = "key-except:" + names.joined(separator: "\u{0}")
        func undeclaredKeys() throws(GrammarError) -> DFA {
            let str = try plainStringDFA()
            if names.isEmpty { return str }
            return DFA.strings(of: str, except: names.map { Array(JSONWriter.quoted($0).utf8) })
        }
        if patterns.isEmpty {
            if ap != .bool(false) {
                // The plain string automaton is trim, so the keys outside the names are too.
                extras.append((try b.leaf(namesKey, pointer: ptr, alreadyTrim: true, undeclaredKeys), try rule(ap, ptr + "/additionalProperties")))
            }
        } else {
            // One alternative per set of patterns a key can match together: the keys that match
            // exactly those patterns (the empty set: none, the additional properties).
            for set in 0..<(1 << patterns.count) {
                let members = patterns.indices.filter { set & (1 << $0) != 0 }
                if members.isEmpty && ap == .bool(false) { continue }
                if members.contains(where: { patterns[$0].schema == .bool(false) }) { continue }
                // Through the shared leaves, so that a recurring object reuses its key automata
                // (and knows which are empty) without recomputing the products.
                let leafKey = namesKey + "\u{1}" + patterns.map(\.regex).joined(separator: "\u{0}") + "\u{1}\(set)"
                let keys = try GrammarBuilder.sharedLeaf(leafKey) { () throws(GrammarError) -> DFA in
                    var keys = try undeclaredKeys()
                    for i in patterns.indices {
                        keys = try DFA.product(keys, patternDFAs[i], intersect: members.contains(i), budget: budget)
                    }
                    return keys
                }
                if keys.dfa.isEmptyLanguage { continue }
                let keyRule = try b.leaf(leafKey, pointer: ptr + "/patternProperties") { () throws(GrammarError) -> DFA in keys.dfa }
                let valueRule = members.isEmpty ? try rule(ap, ptr + "/additionalProperties")
                    : members.count == 1 ? try rule(patterns[members[0]].schema, ptr + "/patternProperties/" + escapePointer(patterns[members[0]].regex))
                    : try rule(allOf(members.map { patterns[$0].schema }), ptr + "/patternProperties")
                extras.append((keyRule, valueRule))
            }
        }
        var nfa = NFA()
        let start = nfa.add(), accept = nfa.add()
        let open = ws(&nfa, nfa.literal(start, [0x7B]))
        var callLabels: [Int32: Int32] = [:]
        // K[i]: before the key of property i, or of a later one when i is optional (K[n]: an
        // extra key); A[i]: after a member, with property i next. Whether a member came before
        // only decides the comma, so both ways into a key share one chain per property, and a
        // member's end is one state (not the closure over every optional property after it).
        let n = props.count
        // optionalFrom[i]: the object may end before property i; keyFrom[i]: a key can follow
        // (a comma leading nowhere would leave dead states to trim).
        var optionalFrom = [Bool](repeating: true, count: n + 1), keyFrom = [Bool](repeating: !extras.isEmpty, count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) {
            let optional = !required.contains(props[i].key)
            optionalFrom[i] = optionalFrom[i + 1] && optional
            keyFrom[i] = valueRules[i] != nil || (optional && keyFrom[i + 1])
        }
        // minProperties/maxProperties: the member count goes into the states, as a level
        // 0...levels-1 (without a maximum the top level stands for "at least the minimum").
        // Bounds that the declared and required properties already imply cost nothing.
        var minP = max(get(d, "minProperties")?.integerValue ?? 0, 0)
        var maxP = get(d, "maxProperties")?.integerValue
        if let m = maxP, m < 0 { throw .invalidSchema(reason: "maxProperties must not be negative", pointer: ptr + "/maxProperties") }
        if minP <= required.count { minP = 0 }
        if let m = maxP, extras.isEmpty, valueRules.filter({ $0 != nil }).count <= m { maxP = nil }
        if let m = maxP, m < max(minP, required.count) { return emptyRule() }
        // Undeclared keys may repeat in the text, and a repeated key is one property once
        // parsed: a minimum above 1 that undeclared keys could help reach can't be enforced.
        if minP > 1 && !extras.isEmpty { throw .unsupportedKeyword(keyword: "minProperties", pointer: ptr + "/minProperties") }
        let levels = (maxP ?? minP) + 1
        if levels > 64 { throw .budgetExceeded("minProperties/maxProperties above 63 at \(ptr)") }
        /// The level after one more member; nil where the maximum is reached.
        func up(_ c: Int) -> Int? { c + 1 < levels ? c + 1 : (maxP == nil ? c : nil) }
        var K: [[Int32]] = [], A: [[Int32]] = []
        for _ in 0..<levels {
            var k: [Int32] = [], a: [Int32] = []
            for _ in 0...n { k.append(nfa.add()); a.append(nfa.add()) }
            K.append(k); A.append(a)
        }
        nfa.epsilon(open, K[0][0])
        if optionalFrom[0] && minP == 0 { nfa.range(open, 0x7D, 0x7D, accept) }
        let keys = props.map { Array(JSONWriter.quoted($0.key).utf8) }
        for c in 0..<levels {
            let next = up(c)
            for i in 0...n {
                if optionalFrom[i] && c >= minP { nfa.range(A[c][i], 0x7D, 0x7D, accept) }
                if keyFrom[i] && next != nil { nfa.epsilon(ws(&nfa, nfa.literal(A[c][i], [0x2C])), K[c][i]) }
                guard i < n else { continue }
                if !required.contains(props[i].key) { nfa.epsilon(K[c][i], K[c][i + 1]) }
                guard let vr = valueRules[i], let next else { continue }
                let s = ws(&nfa, nfa.literal(ws(&nfa, nfa.literal(K[c][i], keys[i])), [0x3A]))
                let ret = nfa.add()
                nfa.call(s, vr, ret)
                callLabels[ret] = b.label(.property(props[i].key))
                nfa.epsilon(ws(&nfa, ret), A[next][i + 1])
            }
            // Extra properties come after the declared ones.
            guard let next else { continue }
            for (kr, ar) in extras {
                let k = nfa.add(); nfa.call(K[c][n], kr, k)
                let s = ws(&nfa, nfa.literal(ws(&nfa, k), [0x3A]))
                let ret = nfa.add(); nfa.call(s, ar, ret)
                callLabels[ret] = b.label(.additionalProperty)
                nfa.epsilon(ws(&nfa, ret), A[next][n])
            }
        }
        return try b.rule(nfa, start: start, accept: accept, pointer: ptr, callLabels: callLabels)
    }

    func escapePointer(_ s: String) -> String {
        if !s.utf8.contains(where: { $0 == 0x7E || $0 == 0x2F }) { return s }
        return s.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }

    // MARK: Arrays

    func arrayRule(_ d: Members, _ ptr: String) throws(GrammarError) -> Int32 {
        var prefix: [JSONValue] = []
        var rest: JSONValue = .bool(true)
        var restPtr = ptr + "/items"
        if let items = get(d, "items") {
            if case .array(let tuple) = items {
                prefix = tuple
                rest = get(d, "additionalItems") ?? .bool(true)
                restPtr = ptr + "/additionalItems"
            } else {
                rest = items
            }
        }
        if let p = get(d, "prefixItems") {
            guard let arr = p.arrayValue else { throw .invalidSchema(reason: "prefixItems must be an array", pointer: ptr + "/prefixItems") }
            prefix = arr
        }
        var minItems = get(d, "minItems")?.integerValue ?? 0
        var maxItems = get(d, "maxItems")?.integerValue
        if let m = maxItems, m < 0 { return emptyRule() }
        minItems = max(minItems, 0)
        if rest == .bool(false) { maxItems = min(maxItems ?? prefix.count, prefix.count) }
        if let f = prefix.firstIndex(of: .bool(false)) { maxItems = min(maxItems ?? f, f) }
        if let m = maxItems, m < minItems { return emptyRule() }
        let unroll = max(prefix.count, minItems) + 1
        let positions = maxItems.map { min($0, max(unroll, $0)) } ?? unroll
        if positions > 20_000 { throw .budgetExceeded("arrays with more than 20000 distinct positions") }
        var itemRules: [Int32] = []
        for (i, p) in prefix.enumerated() where i < positions { itemRules.append(try rule(p, ptr + "/prefixItems/\(i)")) }
        let restRule: Int32? = (maxItems ?? Int.max) > prefix.count ? try rule(rest, restPtr) : nil
        var nfa = NFA()
        let start = nfa.add(), accept = nfa.add()
        let open = ws(&nfa, nfa.literal(start, [0x5B]))
        let elementLabel = b.label(.element(0))
        var callLabels: [Int32: Int32] = [:]
        // Q(k): k items emitted.
        var Q: [Int32] = [open]
        let last = maxItems ?? unroll
        for k in 0...last {
            let q = Q[k]
            if k >= minItems { nfa.range(q, 0x5D, 0x5D, accept) }
            if k == last {
                if maxItems == nil {
                    // Loop: more items of the rest schema.
                    guard let rr = restRule else { break }
                    let s = ws(&nfa, nfa.literal(q, [0x2C]))
                    let ret = nfa.add(); nfa.call(s, rr, ret); callLabels[ret] = elementLabel
                    nfa.epsilon(ws(&nfa, ret), q)
                }
                break
            }
            let itemRule = k < itemRules.count ? itemRules[k] : restRule
            guard let ir = itemRule else { break }
            var s = q
            if k > 0 { s = ws(&nfa, nfa.literal(s, [0x2C])) }
            let ret = nfa.add(); nfa.call(s, ir, ret); callLabels[ret] = elementLabel
            let next = ws(&nfa, ret)
            Q.append(next)
        }
        return try b.rule(nfa, start: start, accept: accept, pointer: ptr, callLabels: callLabels)
    }

    // MARK: Strings

    /// JSON strings (quotes included) whose content matches `pattern`: JSON Schema's search
    /// semantics, or the whole content when `fullMatch` (formats).
    static func patternStringDFA(_ pattern: String, fullMatch: Bool, budget: Int) throws(GrammarError) -> DFA {
        var n = NFA()
        let s = n.add(), open = n.add(), e = n.add()
        n.range(s, 0x22, 0x22, open)
        let end = try RegexBuilder.contentNFA(pattern, fullMatch: fullMatch, nfa: &n, from: open)
        n.range(end, 0x22, 0x22, e)
        return try DFA.determinize(n, start: s, accepting: [e], budget: budget)
    }

    /// Whether `text` matches `pattern` (search semantics unless `fullMatch`).
    static func matches(_ text: String, pattern: String, fullMatch: Bool = false) throws(GrammarError) -> Bool {
        try patternStringDFA(pattern, fullMatch: fullMatch, budget: 100_000).accepts(Array(JSONWriter.quoted(text).utf8))
    }

    /// `"` any JSON string content `"` (state 1: between characters). Built once.
    func plainStringDFA() throws(GrammarError) -> DFA { SchemaCompiler.plainString }

    static let plainString: DFA = {
        var n = NFA()
        let s = n.add(), open = n.add(), e = n.add()
        n.range(s, 0x22, 0x22, open)
        RegexBuilder.addChars(.all, &n, from: open, to: open)
        n.range(open, 0x22, 0x22, e)
        let d = try! DFA.determinize(n, start: s, accepting: [e], budget: 10_000)
        precondition(d.next(0, 0x22) == 1 && d.next(1, 0x41) == 1, "the open state must be state 1")
        return d
    }()

    /// JSON strings of `minL...maxL` characters, built directly from the plain string automaton
    /// with a character counter (a regex repetition of `maxL` characters determinizes slowly).
    static func lengthDFA(_ minL: Int, _ maxL: Int?) -> DFA {
        /// (plain state, count) pairs, interned through a dense table.
        struct Builder {
            let plain = SchemaCompiler.plainString
            let width: Int
            var out = DFA()
            var index: [Int32]
            var work: [(Int32, Int)] = []
            init(cap: Int) {
                width = cap + 2
                index = [Int32](repeating: -1, count: SchemaCompiler.plainString.count * (cap + 2))
            }
            mutating func intern(_ s: Int32, _ k: Int) -> Int32 {
                let key = Int(s) * width + k
                if index[key] >= 0 { return index[key] }
                let i = out.add(accepting: plain.accepting[Int(s)])
                index[key] = i
                work.append((s, k))
                return i
            }
        }
        let plain = plainString
        let cap = maxL ?? minL // unbounded: counts above minL are all alike
        var b = Builder(cap: cap)
        _ = b.intern(0, 0)
        var cursor = 0
        var edges: [ByteEdge] = []
        while cursor < b.work.count {
            let (s, k) = b.work[cursor]
            cursor += 1
            edges.removeAll(keepingCapacity: true)
            for e in plain.trans[Int(s)] {
                var nk = k
                if s == 1 {
                    if e.lo <= 0x22 && 0x22 <= e.hi {
                        // The closing quote: split it off the range, allowed only from minL on.
                        if e.lo < 0x22 { edges.append(ByteEdge(lo: e.lo, hi: 0x21, to: -2)) }
                        if k >= minL { edges.append(ByteEdge(lo: 0x22, hi: 0x22, to: b.intern(e.to, k))) }
                        if e.hi > 0x22 { edges.append(ByteEdge(lo: 0x23, hi: e.hi, to: -2)) }
                        continue
                    }
                    if let m = maxL, k >= m { continue }
                    nk = maxL == nil ? min(k + 1, cap) : k + 1
                }
                edges.append(ByteEdge(lo: e.lo, hi: e.hi, to: b.intern(e.to, nk)))
            }
            // Resolve split-off pieces of the quote range (a character start).
            var kept = 0
            for e in edges {
                guard e.to == -2 else { edges[kept] = e; kept += 1; continue }
                if let m = maxL, k >= m { continue }
                let nk = maxL == nil ? min(k + 1, cap) : k + 1
                edges[kept] = ByteEdge(lo: e.lo, hi: e.hi, to: b.intern(plain.next(1, e.lo), nk))
                kept += 1
            }
            edges.removeLast(edges.count - kept)
            edges.sort { $0.lo < $1.lo }
            b.out.trans[cursor - 1] = edges
        }
        return b.out
    }

    func stringLeaf(minLength: Int, maxLength: Int?) throws(GrammarError) -> Int32 {
        if minLength == 0 && maxLength == nil {
            return try b.leaf("str", pointer: "#") { () throws(GrammarError) -> DFA in try plainStringDFA() }
        }
        return try b.leaf("str:\(minLength):\(maxLength ?? -1)", pointer: "#", counted: (minLength, maxLength ?? -1)) { () throws(GrammarError) -> DFA in
            try plainStringDFA()
        }
    }

    func stringRule(_ d: Members, _ ptr: String) throws(GrammarError) -> Int32 {
        let minL = max(get(d, "minLength")?.integerValue ?? 0, 0)
        let maxL = get(d, "maxLength")?.integerValue
        if let m = maxL, m < minL { return emptyRule() }
        var patterns: [String] = []
        if let p = get(d, "pattern") {
            for x in p.arrayValue ?? [p] {
                guard let s = x.stringValue else { throw .invalidSchema(reason: "pattern must be a string", pointer: ptr + "/pattern") }
                patterns.append(s)
            }
        }
        var fullPatterns: [String] = []
        if let f = get(d, "format")?.stringValue, !f.isEmpty {
            if let re = SchemaCompiler.formats[f] { fullPatterns.append(re) }
            else if options.lenient { ignored.append(ptr + "/format") }
            else { throw .unsupportedKeyword(keyword: "format", pointer: ptr + "/format") }
        }
        if patterns.isEmpty && fullPatterns.isEmpty { return try stringLeaf(minLength: minL, maxLength: maxL) }
        let patternKey = "re:" + patterns.joined(separator: "\u{0}") + "\u{1}" + fullPatterns.joined(separator: "\u{0}")
        let budget = options.stateBudget
        func patternDFA() throws(GrammarError) -> DFA {
            var acc: DFA? = nil
            for (p, full) in patterns.map({ ($0, false) }) + fullPatterns.map({ ($0, true) }) {
                let part = try SchemaCompiler.patternStringDFA(p, fullMatch: full, budget: budget)
                acc = try acc.map { a throws(GrammarError) in try DFA.product(a, part, intersect: true, budget: budget) } ?? part
            }
            return acc!
        }
        if minL == 0 && maxL == nil { return try b.leaf(patternKey, pointer: ptr, patternDFA) }
        // Length bounds: a character counter in the states. The pattern's automaton is shared
        // by every bound it is combined with.
        let pattern = try GrammarBuilder.sharedLeaf(patternKey, patternDFA)
        return try b.leaf("len:\(minL):\(maxL ?? -1):" + patternKey, pointer: ptr) { () throws(GrammarError) -> DFA in
            if (maxL ?? minL) > 5000 { throw .budgetExceeded("string length bounds above 5000 combined with a pattern") }
            return try DFA.product(pattern.dfa, SchemaCompiler.lengthDFA(minL, maxL), intersect: true, budget: budget)
        }
    }

    // MARK: Numbers

    func numberLeaf(integer: Bool, d: Members, ptr: String) throws(GrammarError) -> Int32 {
        func dec(_ k: String) throws(GrammarError) -> DecimalNumber? {
            guard let v = get(d, k) else { return nil }
            if case .bool = v { return nil } // draft-04 boolean exclusive flags are handled below
            guard let t = v.numberText, let n = DecimalNumber(t) else { throw .invalidSchema(reason: "\(k) must be a number", pointer: ptr + "/" + k) }
            return n
        }
        var lower: [(DecimalNumber, Bool)] = [], upper: [(DecimalNumber, Bool)] = []
        if let m = try dec("minimum") { lower.append((m, get(d, "exclusiveMinimum") == .bool(true))) }
        if let m = try dec("exclusiveMinimum") { lower.append((m, true)) }
        if let m = try dec("maximum") { upper.append((m, get(d, "exclusiveMaximum") == .bool(true))) }
        if let m = try dec("exclusiveMaximum") { upper.append((m, true)) }
        let mult = try dec("multipleOf")
        if let m = mult, m.isZero || m.negative { throw .invalidSchema(reason: "multipleOf must be positive", pointer: ptr + "/multipleOf") }
        for (x, _) in lower + upper where x.digits.count + abs(x.exponent) > 400 {
            throw .unsupportedKeyword(keyword: "minimum", pointer: ptr)
        }
        let key = "num:\(integer):" + lower.map { "\($0.0)\($0.1)" }.joined(separator: ",") + "|" + upper.map { "\($0.0)\($0.1)" }.joined(separator: ",") + "|\(mult?.description ?? "")"
            + (options.generatedNumbers ? "|generated" : "")
        let budget = options.stateBudget
        let generated = options.generatedNumbers
        return try b.leaf(key, pointer: ptr) { () throws(GrammarError) -> DFA in
            let exponent = lower.isEmpty && upper.isEmpty && mult == nil
            var acc = try NumberAutomata.form(integer: integer, exponent: exponent, generated: generated, budget: budget)
            for (v, strict) in lower { acc = try DFA.product(acc, try NumberAutomata.lowerBound(v, strict: strict, budget: budget), intersect: true, budget: budget) }
            for (v, strict) in upper { acc = try DFA.product(acc, try NumberAutomata.upperBound(v, strict: strict, budget: budget), intersect: true, budget: budget) }
            if let m = mult {
                let k = max(-m.exponent, 0)
                var a = 0
                for dgt in m.digits { a = a * 10 + Int(dgt); if a > 100_000 { throw GrammarError.budgetExceeded("multipleOf \(m) needs too many states") } }
                for _ in 0..<max(m.exponent, 0) { a *= 10; if a > 100_000 { throw GrammarError.budgetExceeded("multipleOf \(m) needs too many states") } }
                acc = try DFA.product(acc, try NumberAutomata.multipleOf(a: a, fractionDigits: k, budget: budget), intersect: true, budget: budget)
            }
            return acc
        }
    }

    // MARK: enum / const

    func literalRule(_ d: Members, _ ptr: String) throws(GrammarError) -> Int32 {
        var values: [JSONValue] = []
        if let c = get(d, "const") { values = [c] }
        if let e = get(d, "enum") {
            guard let arr = e.arrayValue else { throw .invalidSchema(reason: "enum must be an array", pointer: ptr + "/enum") }
            values = get(d, "const") != nil ? values.filter { arr.contains($0) } : arr
        }
        let siblings = without(d, ["enum", "const"])
        if hasAssertions(siblings) {
            var kept: [JSONValue] = []
            for v in values where try LiteralValidator(compiler: self, pointer: ptr).satisfies(v, .object(siblings)) { kept.append(v) }
            values = kept
        }
        var texts = Set<[UInt8]>()
        for v in values {
            texts.insert(Array(v.compactText.utf8))
            if case .number(let t) = v, let n = DecimalNumber(t) {
                // Other spellings of the same number that a serializer may produce.
                texts.insert(Array(n.description.utf8))
                if n.isInteger { texts.insert(Array((n.description + ".0").utf8)) }
            }
        }
        if texts.isEmpty { return emptyRule() }
        let sorted = texts.sorted { $0.lexicographicallyPrecedes($1) }
        let key = "lits:" + sorted.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "\u{0}")
        return try b.leaf(key, pointer: ptr) { () throws(GrammarError) -> DFA in
            let d = DFA.literals(sorted)
            if d.count > options.stateBudget { throw GrammarError.budgetExceeded("an automaton needs more than \(options.stateBudget) states") }
            return d
        }
    }
}

/// Checks an `enum`/`const` value against sibling keywords, so that only values the whole
/// schema accepts become literals.
struct LiteralValidator {
    let compiler: SchemaCompiler
    let pointer: String

    func satisfies(_ v: JSONValue, _ schema: JSONValue) throws(GrammarError) -> Bool {
        guard let d = try compiler.inlineDict(schema, pointer) else { return false }
        for (k, s) in d {
            switch k {
            case "type":
                let ts = compiler.typeSet(s)
                let t = v.typeName
                if !(ts.contains(t) || (t == "integer" && ts.contains("number"))) { return false }
            case "enum": if !(s.arrayValue ?? []).contains(v) { return false }
            case "const": if s != v { return false }
            case "minLength", "maxLength", "pattern", "format":
                guard case .string(let str) = v else { continue }
                let n = str.unicodeScalars.count
                if k == "minLength", n < (s.integerValue ?? 0) { return false }
                if k == "maxLength", n > (s.integerValue ?? Int.max) { return false }
                if k == "pattern" || k == "format" {
                    let pats: [(String, Bool)]
                    if k == "format" {
                        guard let f = s.stringValue, !f.isEmpty else { continue }
                        guard let re = SchemaCompiler.formats[f] else { throw .unsupportedKeyword(keyword: "format", pointer: pointer) }
                        pats = [(re, true)]
                    } else {
                        pats = (s.arrayValue ?? [s]).compactMap(\.stringValue).map { ($0, false) }
                    }
                    for (p, full) in pats where !(try SchemaCompiler.matches(str, pattern: p, fullMatch: full)) { return false }
                }
            case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf":
                guard case .number(let t) = v, let x = DecimalNumber(t) else { continue }
                if case .bool = s { continue }
                guard let bt = s.numberText, let bound = DecimalNumber(bt) else { continue }
                switch k {
                case "minimum": if x < bound { return false }
                case "maximum": if bound < x { return false }
                case "exclusiveMinimum": if !(bound < x) { return false }
                case "exclusiveMaximum": if !(x < bound) { return false }
                default:
                    guard let xi = x.intValue, let bi = bound.intValue, bi > 0 else { throw .unsupportedKeyword(keyword: k, pointer: pointer) }
                    if xi % bi != 0 { return false }
                }
            case "required":
                guard case .object(let m) = v else { continue }
                for r in s.arrayValue ?? [] { if let name = r.stringValue, !m.contains(where: { $0.key == name }) { return false } }
            case "properties":
                guard case .object(let m) = v else { continue }
                for (pk, pv) in m { if let ps = s[pk], !(try satisfies(pv, ps)) { return false } }
            case "additionalProperties":
                guard case .object(let m) = v else { continue }
                let declared = compiler.get(d, "properties")?.objectMembers?.map(\.key) ?? []
                let patterns = compiler.get(d, "patternProperties")?.objectMembers?.map(\.key) ?? []
                members: for (pk, pv) in m where !declared.contains(pk) {
                    for p in patterns where try SchemaCompiler.matches(pk, pattern: p) { continue members }
                    if !(try satisfies(pv, s)) { return false }
                }
            case "patternProperties":
                guard case .object(let m) = v else { continue }
                for (p, ps) in s.objectMembers ?? [] {
                    for (pk, pv) in m where try SchemaCompiler.matches(pk, pattern: p) {
                        if !(try satisfies(pv, ps)) { return false }
                    }
                }
            case "items":
                guard case .array(let a) = v else { continue }
                if case .array = s { throw .unsupportedKeyword(keyword: k, pointer: pointer) }
                let start = compiler.get(d, "prefixItems")?.arrayValue?.count ?? 0
                for x in a.dropFirst(start) { if !(try satisfies(x, s)) { return false } }
            case "prefixItems":
                guard case .array(let a) = v else { continue }
                for (x, ps) in zip(a, s.arrayValue ?? []) { if !(try satisfies(x, ps)) { return false } }
            case "minProperties", "maxProperties":
                guard case .object(let m) = v else { continue }
                if k == "minProperties", m.count < (s.integerValue ?? 0) { return false }
                if k == "maxProperties", m.count > (s.integerValue ?? Int.max) { return false }
            case "minItems", "maxItems":
                guard case .array(let a) = v else { continue }
                if k == "minItems", a.count < (s.integerValue ?? 0) { return false }
                if k == "maxItems", a.count > (s.integerValue ?? Int.max) { return false }
            case "anyOf", "oneOf", "allOf":
                let alts = s.arrayValue ?? []
                var n = 0
                for a in alts where try satisfies(v, a) { n += 1 }
                if k == "anyOf", n == 0 { return false }
                if k == "oneOf", n != 1 { return false }
                if k == "allOf", n != alts.count { return false }
            default:
                if SchemaCompiler.unsupported.contains(k) {
                    if compiler.options.lenient { continue }
                    throw .unsupportedKeyword(keyword: k, pointer: pointer + "/" + k)
                }
            }
        }
        return true
    }
}
