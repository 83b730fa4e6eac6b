/// Compiles a JSON Schema document (draft 2020-12 or draft-07) into a ``Grammar``: the typed
/// schema that ``SchemaParser`` reads becomes one rule per subschema (a deterministic automaton
/// that calls the rules of its members, items and alternatives); strings, numbers and literal
/// sets become leaf automata shared across grammars.
final class SchemaCompiler {
    let parser: SchemaParser
    let algebra: SchemaAlgebra
    let options: GrammarOptions
    let b: GrammarBuilder
    var refRules: [ExactString: Int32] = [:]
    var anyValueRule: Int32?
    /// Subschemas being compiled inside one another. References nest without nesting the
    /// document (a chain of a thousand overflowed the stack), so the depth is bounded here: a
    /// reference takes two levels, and 256 fit Linux threads' 8 MiB stacks with room to spare
    /// (not the 512 KiB of macOS's concurrency threads).
    private var depth = 0
    static let maxDepth = 256

    /// Keywords lenient mode let through, as JSON pointers.
    var ignored: [String] { algebra.ignored }

    init(_ doc: JSONValue, options: GrammarOptions) {
        parser = SchemaParser(doc)
        algebra = SchemaAlgebra(parser: parser, options: options)
        self.options = options
        b = GrammarBuilder(stateBudget: options.stateBudget, timeLimit: options.timeLimit)
    }

    func compile() throws(GrammarError) -> Grammar {
        let root = try rule(try parser.root(), "#")
        return try Grammar(builder: b, root: root, pointer: "#")
    }

    // MARK: Dispatch

    func rule(_ s: Schema, _ ptr: String) throws(GrammarError) -> Int32 {
        try b.checkLimits()
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maxDepth else {
            throw .budgetExceeded("subschemas nest more than \(Self.maxDepth) deep (through references) at \(ptr)")
        }
        switch s {
        case .any: return try anyValue()
        case .never: return emptyRule()
        case .ref(let target): return try refRule(target, ptr + "/$ref")
        case .node(let n): return try rule(n, ptr)
        }
    }

    func rule(_ node: SchemaNode, _ ptr: String) throws(GrammarError) -> Int32 {
        if !node.allOf.isEmpty {
            guard let n = try algebra.resolvingAllOf(node, ptr) else { return emptyRule() }
            return try rule(n, ptr)
        }
        if let rewritten = try algebra.rewritingUnenforced(node, ptr) { return try rule(rewritten, ptr) }
        if let a = node.anyOf, let o = node.oneOf {
            // Both: exactly one oneOf branch (checked exclusive) and some anyOf branch.
            if !algebra.provablyDisjoint(o) { try algebra.unenforceable("oneOf", ptr + "/oneOf") }
            var n = node
            n.oneOf = nil
            n.anyOf = try algebra.product(a, o, ptr)
            return try rule(n, ptr)
        }
        if let alts = node.anyOf ?? node.oneOf {
            let key = node.anyOf != nil ? "anyOf" : "oneOf"
            var siblings = node
            siblings.anyOf = nil; siblings.oneOf = nil
            let mergeSiblings = siblings.hasAssertions
            var branches: [(Schema, String)] = []
            for (i, a) in alts.enumerated() {
                let aptr = ptr + "/\(key)/\(i)"
                if mergeSiblings {
                    guard let an = try algebra.inline(a, aptr) else { continue }
                    branches.append((.node(try algebra.intersect(siblings, an, pointer: aptr)), aptr))
                } else {
                    branches.append((a, aptr))
                }
            }
            if key == "oneOf" && branches.count > 1 && !algebra.provablyDisjoint(branches.map(\.0)) {
                // Exactly one: each alternative with the others' negations, where they exist.
                if let exclusive = algebra.exclusive(alts, ptr) {
                    var n = node
                    n.oneOf = nil
                    n.anyOf = exclusive
                    return try rule(n, ptr)
                }
                try algebra.unenforceable("oneOf", ptr + "/oneOf")
            }
            var rules: [Int32] = []
            for (a, aptr) in branches { rules.append(try rule(a, aptr)) }
            return try dispatch(rules, ptr)
        }
        try algebra.checkUnenforced(node, ptr)
        if node.literals != nil { return try literalRule(node, ptr) }
        return try typedRule(node, ptr)
    }

    func refRule(_ target: String, _ ptr: String) throws(GrammarError) -> Int32 {
        if let r = refRules[ExactString(target)] { return r }
        let r = b.reserve(pointer: target)
        refRules[ExactString(target)] = r
        let t = try rule(try parser.schema(at: target), target)
        guard t != r, b.rules[Int(t)].dfa != nil else { throw .leftRecursion(pointer: ptr) }
        let src = b.rules[Int(t)]
        try b.define(r, src.dfa!, counted: src.counted, returnLabels: src.returnLabels, leafKey: src.leafKey, shared: src.shared)
        return r
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

    /// `bytes` then optional whitespace; the state after both.
    func token(_ nfa: inout NFA, _ from: Int32, _ bytes: [UInt8]) -> Int32 { ws(&nfa, nfa.literal(from, bytes)) }

    /// A call of `rule` (its return labelled `label`) then optional whitespace; the state after both.
    func call(_ nfa: inout NFA, _ from: Int32, _ rule: Int32, _ labels: inout [Int32: Int32], _ label: Int32?) -> Int32 {
        let ret = nfa.add()
        nfa.call(from, rule, ret)
        if let label { labels[ret] = label }
        return ws(&nfa, ret)
    }

    /// Any JSON value.
    func anyValue() throws(GrammarError) -> Int32 {
        if let r = anyValueRule { return r }
        let v = b.reserve(pointer: "#")
        anyValueRule = v
        let str = try stringLeaf(minLength: 0, maxLength: nil)
        var labels: [Int32: Int32] = [:]
        // Object: `{`, then members (key, `:`, value) separated by commas, then `}`.
        var o = NFA()
        let os = o.add(), oe = o.add(), open = token(&o, os, [0x7B]), loop = o.add()
        o.range(open, 0x7D, 0x7D, oe)
        o.range(loop, 0x7D, 0x7D, oe)
        for from in [open, token(&o, loop, [0x2C])] {
            o.epsilon(call(&o, token(&o, call(&o, from, str, &labels, nil), [0x3A]), v, &labels, nil), loop)
        }
        let objRule = try b.rule(o, start: os, accept: oe, pointer: "#")
        // Array: `[`, then values separated by commas, then `]`.
        var a = NFA()
        let as_ = a.add(), ae = a.add(), aopen = token(&a, as_, [0x5B]), item = a.add()
        a.range(aopen, 0x5D, 0x5D, ae)
        a.call(aopen, v, item)
        let aloop = ws(&a, item)
        a.range(aloop, 0x5D, 0x5D, ae)
        a.call(token(&a, aloop, [0x2C]), v, item)
        let arrRule = try b.rule(a, start: as_, accept: ae, pointer: "#")
        let num = try numberLeaf(integer: false, NumberFacet(), "#")
        let lits = try wordsLeaf(["true", "false", "null"], "#")
        var dn = NFA()
        let ds = dn.add(), de = dn.add()
        for r in [objRule, arrRule, str, num, lits] { dn.call(ds, r, de) }
        let dfa = try DFA.determinize(dn, start: ds, accepting: [de], budget: 100)
        try b.define(v, dfa)
        return v
    }

    func typedRule(_ n: SchemaNode, _ ptr: String) throws(GrammarError) -> Int32 {
        var types = n.types ?? .all
        if types.contains(.number) { types.remove(.integer) }
        var rules: [Int32] = []
        var lits: [String] = []
        if types.contains(.object) { rules.append(try objectRule(n.object, ptr)) }
        if types.contains(.array) { rules.append(try arrayRule(n.array, ptr)) }
        if types.contains(.string) { rules.append(try stringRule(n.string, ptr)) }
        if types.contains(.number) { rules.append(try numberLeaf(integer: false, n.number, ptr)) }
        if types.contains(.integer) { rules.append(try numberLeaf(integer: true, n.number, ptr)) }
        if types.contains(.boolean) { lits += ["true", "false"] }
        if types.contains(.null) { lits.append("null") }
        if !lits.isEmpty { rules.append(try wordsLeaf(lits, ptr)) }
        if rules.isEmpty { return emptyRule() }
        return try dispatch(rules, ptr)
    }

    /// `true`, `false` and `null`, as listed.
    func wordsLeaf(_ words: [String], _ ptr: String) throws(GrammarError) -> Int32 {
        try b.leaf("lit:" + words.joined(separator: ","), pointer: ptr) { () throws(GrammarError) -> DFA in
            var n = NFA(); let s = n.add(), e = n.add()
            for w in words { n.epsilon(n.literal(s, Array(w.utf8)), e) }
            return try DFA.determinize(n, start: s, accepting: [e], budget: 1000)
        }
    }

    // MARK: Objects

    func objectRule(_ f: ObjectFacet, _ ptr: String) throws(GrammarError) -> Int32 {
        var props = f.orderedProperties.map { (key: $0.name, value: $0.schema) }
        let requiredOrder = f.required ?? []
        let required = Set(requiredOrder)
        let ap = f.additionalProperties ?? (options.additionalPropertiesByDefault ? .any : .never)
        let patterns = (f.patternProperties ?? []).map { (regex: $0.name, schema: $0.schema) }
        guard patterns.count <= 4 else { throw .budgetExceeded("more than 4 patternProperties in one object at \(ptr)") }
        // Each pattern's automaton, built once for the names below and the key leaves.
        let budget = options.stateBudget
        var patternDFAs: [DFA] = []
        for (re, _) in patterns { patternDFAs.append(try StringAutomata.pattern(re, fullMatch: false, budget: budget)) }
        // A key's value satisfies the schema of every pattern the key matches; a key no
        // property declares and no pattern matches is an additional property.
        func patternSchemas(_ name: String) -> [Schema] {
            guard !patterns.isEmpty else { return [] }
            let key = Array(JSONWriter.quoted(name).utf8)
            return patterns.indices.filter { patternDFAs[$0].accepts(key) }.map { patterns[$0].schema }
        }
        // propertyNames: the keys as strings, an automaton every key must be in.
        let names = try f.propertyNames.map { s throws(GrammarError) in try keyAutomaton(s, ptr + "/propertyNames") }
        if let names {
            for i in props.indices where !names.dfa.accepts(Array(JSONWriter.quoted(props[i].key).utf8)) { props[i].value = .never }
            for name in requiredOrder where !names.dfa.accepts(Array(JSONWriter.quoted(name).utf8)) { return emptyRule() }
        }
        for i in props.indices {
            let extra = patternSchemas(props[i].key)
            if !extra.isEmpty && props[i].value != .never { props[i].value = Schema.allOf([props[i].value] + extra) }
        }
        // Undeclared required names follow the declared ones in `required` order, the order
        // schema authors (and `reordered(forSchema:)`) list them in.
        for name in requiredOrder where !props.contains(where: { $0.key == name }) {
            let matched = patternSchemas(name)
            if matched.isEmpty && ap == .never { return emptyRule() }
            props.append((name, matched.isEmpty ? ap : Schema.allOf(matched)))
        }
        // Compile property value rules.
        var valueRules: [Int32?] = []
        for (name, schema) in props {
            if schema == .never {
                if required.contains(name) { return emptyRule() }
                valueRules.append(nil)
                continue
            }
            valueRules.append(try rule(schema, ptr + "/properties/" + escapePointer(name)))
        }
        // Members after the declared ones: (key automaton, value rule) pairs.
        var extras: [(key: Int32, value: Int32)] = []
        let declared = props.map(\.key)
        let namesKey = "key-except:" + declared.joined(separator: "\u{0}") + (names.map { "\u{1}names:" + $0.key } ?? "")
        func undeclaredKeys() throws(GrammarError) -> DFA {
            let str = names?.dfa ?? StringAutomata.plainString
            let kept = declared.map { Array(JSONWriter.quoted($0).utf8) }.filter(str.accepts)
            return kept.isEmpty ? str : DFA.strings(of: str, except: kept)
        }
        if patterns.isEmpty {
            if ap != .never {
                // The plain string automaton is trim, so the keys outside the names are too.
                extras.append((try b.leaf(namesKey, pointer: ptr, alreadyTrim: true, undeclaredKeys), try rule(ap, ptr + "/additionalProperties")))
            }
        } else {
            // One alternative per set of patterns a key can match together: the keys that match
            // exactly those patterns (the empty set: none, the additional properties).
            for set in 0..<(1 << patterns.count) {
                let members = patterns.indices.filter { set & (1 << $0) != 0 }
                if members.isEmpty && ap == .never { continue }
                if members.contains(where: { patterns[$0].schema == .never }) { continue }
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
                    : try rule(Schema.allOf(members.map { patterns[$0].schema }), ptr + "/patternProperties")
                extras.append((keyRule, valueRule))
            }
        }
        return try objectAutomaton(props, required, valueRules, extras, f, ptr)
    }

    /// The object rule's automaton: the declared members in order (each optional one may be
    /// skipped), then the extra members, with the member count in the states when it is bounded.
    func objectAutomaton(_ props: [(key: String, value: Schema)], _ required: Set<String>, _ valueRules: [Int32?],
                         _ extras: [(key: Int32, value: Int32)], _ f: ObjectFacet, _ ptr: String) throws(GrammarError) -> Int32 {
        var nfa = NFA()
        let start = nfa.add(), accept = nfa.add()
        let open = token(&nfa, start, [0x7B])
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
        var minP = max(f.minProperties ?? 0, 0)
        var maxP = f.maxProperties
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
                if keyFrom[i] && next != nil { nfa.epsilon(token(&nfa, A[c][i], [0x2C]), K[c][i]) }
                guard i < n else { continue }
                if !required.contains(props[i].key) { nfa.epsilon(K[c][i], K[c][i + 1]) }
                guard let vr = valueRules[i], let next else { continue }
                let s = token(&nfa, token(&nfa, K[c][i], keys[i]), [0x3A])
                nfa.epsilon(call(&nfa, s, vr, &callLabels, b.label(.property(props[i].key))), A[next][i + 1])
            }
            // Extra properties come after the declared ones.
            guard let next else { continue }
            for (kr, ar) in extras {
                let s = token(&nfa, call(&nfa, K[c][n], kr, &callLabels, nil), [0x3A])
                nfa.epsilon(call(&nfa, s, ar, &callLabels, b.label(.additionalProperty)), A[next][n])
            }
        }
        return try b.rule(nfa, start: start, accept: accept, pointer: ptr, callLabels: callLabels)
    }

    /// The keys `propertyNames` allows, as a trim automaton of JSON strings, and its leaf key.
    func keyAutomaton(_ s: Schema, _ ptr: String) throws(GrammarError) -> (dfa: DFA, key: String) {
        guard let n = try algebra.flattened(s, ptr) else { return (StringAutomata.noStrings, "none") }
        guard n.anyOf == nil, n.oneOf == nil, n.unenforced.isEmpty, n.types?.contains(.string) ?? true else {
            if n.types.map({ !$0.contains(.string) }) ?? false { return (StringAutomata.noStrings, "none") }
            try algebra.unenforceable("propertyNames", ptr)
            return (StringAutomata.plainString, "")
        }
        if let values = n.literals {
            // A finite set: the string values the rest of the schema admits, as exclusions' complement.
            var kept: [String] = []
            for v in values { if case .string(let s) = v, try algebra.admits(v, n, ptr) { kept.append(s) } }
            let lits = DFA.literals(kept.map { Array(JSONWriter.quoted($0).utf8) }.sorted { $0.lexicographicallyPrecedes($1) })
            return (lits, "lits:" + kept.sorted().joined(separator: "\u{0}"))
        }
        let f = try knownFormat(n.string, ptr)
        let key = f.leafKey(lengths: true)
        let budget = options.stateBudget
        let shared = try GrammarBuilder.sharedLeaf("names:" + key) { () throws(GrammarError) -> DFA in
            try StringAutomata.matching(f, lengths: true, budget: budget)!.trimmed()
        }
        return (shared.dfa, key)
    }

    // MARK: Arrays

    func arrayRule(_ f: ArrayFacet, _ ptr: String) throws(GrammarError) -> Int32 {
        if f.uniqueItems && (f.maxItems ?? 2) > 1 { return try uniqueArrayRule(f, ptr) }
        let prefix = f.prefixItems
        let rest = f.items ?? .any
        let restPtr = ptr + (f.itemsIsAdditional ? "/additionalItems" : "/items")
        var minItems = f.minItems ?? 0
        var maxItems = f.maxItems
        if let m = maxItems, m < 0 { return emptyRule() }
        minItems = max(minItems, 0)
        if rest == .never { maxItems = min(maxItems ?? prefix.count, prefix.count) }
        if let f = prefix.firstIndex(of: .never) { maxItems = min(maxItems ?? f, f) }
        if let m = maxItems, m < minItems { return emptyRule() }
        let unroll = max(prefix.count, minItems) + 1
        let positions = maxItems.map { min($0, max(unroll, $0)) } ?? unroll
        if positions > 20_000 { throw .budgetExceeded("arrays with more than 20000 distinct positions") }
        var itemRules: [Int32] = []
        for (i, p) in prefix.enumerated() where i < positions { itemRules.append(try rule(p, ptr + "/prefixItems/\(i)")) }
        let restRule: Int32? = (maxItems ?? Int.max) > prefix.count ? try rule(rest, restPtr) : nil
        var nfa = NFA()
        let start = nfa.add(), accept = nfa.add()
        let open = token(&nfa, start, [0x5B])
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
                    nfa.epsilon(call(&nfa, token(&nfa, q, [0x2C]), rr, &callLabels, elementLabel), q)
                }
                break
            }
            let itemRule = k < itemRules.count ? itemRules[k] : restRule
            guard let ir = itemRule else { break }
            Q.append(call(&nfa, k > 0 ? token(&nfa, q, [0x2C]) : q, ir, &callLabels, elementLabel))
        }
        return try b.rule(nfa, start: start, accept: accept, pointer: ptr, callLabels: callLabels)
    }

    /// Arrays of distinct items, each position drawing from a finite set: which values came
    /// already is in the states (a subset of at most 10 values; its size is the position).
    func uniqueArrayRule(_ f: ArrayFacet, _ ptr: String) throws(GrammarError) -> Int32 {
        // Per position (the last entry: every later one), the values allowed there.
        var positions: [[JSONValue]] = []
        for (i, s) in (f.prefixItems + [f.items ?? .any]).enumerated() {
            let sptr = i < f.prefixItems.count ? ptr + "/prefixItems/\(i)" : ptr + "/items"
            guard let vs = try finiteValues(s, sptr) else { positions = []; break }
            positions.append(vs)
        }
        var values: [JSONValue] = []
        for vs in positions { for v in vs where !values.contains(v) { values.append(v) } }
        guard !positions.isEmpty, values.count <= 10 else {
            try algebra.unenforceable("uniqueItems", ptr + "/uniqueItems")
            var plain = f
            plain.uniqueItems = false
            return try arrayRule(plain, ptr)
        }
        let allowed = positions.map { vs in vs.map { v in values.firstIndex(of: v)! } }
        let minItems = max(f.minItems ?? 0, 0), maxItems = min(f.maxItems ?? values.count, values.count)
        if maxItems < minItems { return emptyRule() }
        var itemRules: [Int32] = []
        for v in values { itemRules.append(try literalLeaf([v], ptr)) }
        var nfa = NFA()
        let start = nfa.add(), accept = nfa.add()
        let open = token(&nfa, start, [0x5B])
        var state = [Int32](repeating: -1, count: 1 << values.count)
        state[0] = open
        let elementLabel = b.label(.element(0))
        var callLabels: [Int32: Int32] = [:]
        for set in 0..<(1 << values.count) where state[set] >= 0 {
            let used = set.nonzeroBitCount
            if used >= minItems { nfa.range(state[set], 0x5D, 0x5D, accept) }
            guard used < maxItems else { continue }
            let before = set == 0 ? state[set] : token(&nfa, state[set], [0x2C])
            for i in allowed[min(used, allowed.count - 1)] where set & (1 << i) == 0 {
                let next = set | (1 << i)
                if state[next] < 0 { state[next] = nfa.add() }
                nfa.epsilon(call(&nfa, before, itemRules[i], &callLabels, elementLabel), state[next])
            }
        }
        return try b.rule(nfa, start: start, accept: accept, pointer: ptr, callLabels: callLabels)
    }

    /// The values a schema admits when they are finitely many: its literals, or booleans and
    /// null; nil otherwise.
    func finiteValues(_ s: Schema, _ ptr: String) throws(GrammarError) -> [JSONValue]? {
        guard let n = try algebra.flattened(s, ptr) else { return [] }
        guard n.anyOf == nil, n.oneOf == nil else { return nil }
        var candidates: [JSONValue]
        if let l = n.literals { candidates = l } else {
            guard let t = n.types, t.isSubset(of: [.boolean, .null]) else { return nil }
            candidates = (t.contains(.boolean) ? [.bool(false), .bool(true)] : []) + (t.contains(.null) ? [.null] : [])
        }
        var out: [JSONValue] = []
        for v in candidates where !out.contains(v) { if try algebra.admits(v, n, ptr) { out.append(v) } }
        return out
    }

    // MARK: Strings

    func stringLeaf(minLength: Int, maxLength: Int?) throws(GrammarError) -> Int32 {
        if minLength == 0 && maxLength == nil {
            return try b.leaf("str", pointer: "#") { () throws(GrammarError) -> DFA in StringAutomata.plainString }
        }
        return try b.leaf("str:\(minLength):\(maxLength ?? -1)", pointer: "#", counted: (minLength, maxLength ?? -1)) { () throws(GrammarError) -> DFA in
            StringAutomata.plainString
        }
    }

    func stringRule(_ facet: StringFacet, _ ptr: String) throws(GrammarError) -> Int32 {
        let f = try knownFormat(facet, ptr)
        let minL = max(f.minLength ?? 0, 0)
        let maxL = [f.maxLength, f.format.flatMap(SchemaFormats.longest)].compactMap { $0 }.min()
        if let m = maxL, m < minL { return emptyRule() }
        if f.patterns.isEmpty && f.format == nil && f.excluded.isEmpty && f.negated.isEmpty { return try stringLeaf(minLength: minL, maxLength: maxL) }
        let patternKey = f.leafKey(lengths: false)
        let budget = options.stateBudget
        func patternDFA() throws(GrammarError) -> DFA { try StringAutomata.matching(f, lengths: false, budget: budget)! }
        if minL == 0 && maxL == nil { return try b.leaf(patternKey, pointer: ptr, patternDFA) }
        // Length bounds: characters counted in the frame against a table, or where the pattern
        // doesn't allow that, a counter in the states. The pattern's automaton is shared by
        // every bound it is combined with.
        let inStates = options.countsInStates
        let key = f.leafKey(lengths: true) + (inStates ? "\u{1}in-states" : "")
        if let r = b.leafCache[ExactString(key)] { return r }
        let pattern = try GrammarBuilder.sharedLeaf(patternKey, patternDFA)
        let leaf = try GrammarBuilder.sharedLeaf(key, leaf: { () throws(GrammarError) -> SharedLeaf in
            if !inStates, let counts = CountTable(pattern.dfa, minCount: minL, maxCount: maxL, budget: budget) { return SharedLeaf(pattern, counts: counts) }
            return SharedLeaf(try StringAutomata.bounded(pattern.dfa, minL, maxL, budget: budget).trimmed())
        })
        return try b.leaf(key, pointer: ptr, counted: leaf.counts == nil ? nil : (minL, maxL ?? -1), leaf)
    }

    /// The facet without a format the decoder doesn't know, once that is reported (an error,
    /// or in lenient mode a note).
    func knownFormat(_ f: StringFacet, _ ptr: String) throws(GrammarError) -> StringFacet {
        guard let name = f.format, SchemaFormats.pattern(name) == nil else { return f }
        try algebra.unenforceable("format", ptr + "/format")
        var known = f
        known.format = nil
        return known
    }

    // MARK: Numbers

    func numberLeaf(integer: Bool, _ f: NumberFacet, _ ptr: String) throws(GrammarError) -> Int32 {
        let lower = f.lower.map { [($0.value, $0.exclusive)] } ?? [], upper = f.upper.map { [($0.value, $0.exclusive)] } ?? [], mult = f.multipleOf
        for (x, _) in lower + upper where x.digits.count + abs(x.exponent) > 400 {
            throw .unsupportedKeyword(keyword: f.lower.map { $0.value == x } == true ? "minimum" : "maximum", pointer: ptr)
        }
        let key = "num:\(integer):" + lower.map { "\($0.0)\($0.1)" }.joined(separator: ",") + "|" + upper.map { "\($0.0)\($0.1)" }.joined(separator: ",") + "|\(mult?.description ?? "")"
            + (options.generatedNumbers ? "|generated" : "")
        let budget = options.stateBudget
        let generated = options.generatedNumbers
        func numbers(_ generated: Bool) throws(GrammarError) -> DFA {
            let exponent = lower.isEmpty && upper.isEmpty && mult == nil
            var acc = try NumberAutomata.form(integer: integer, exponent: exponent, generated: generated, budget: budget)
            for (v, strict) in lower { acc = try DFA.product(acc, try NumberAutomata.lowerBound(v, strict: strict, budget: budget), intersect: true, budget: budget) }
            for (v, strict) in upper { acc = try DFA.product(acc, try NumberAutomata.upperBound(v, strict: strict, budget: budget), intersect: true, budget: budget) }
            if let m = mult {
                let k = max(-m.exponent, 0)
                var a = 0
                for dgt in m.digits + Array(repeating: 0, count: max(m.exponent, 0)) {
                    a = a * 10 + Int(dgt)
                    if a > 100_000 { throw GrammarError.budgetExceeded("multipleOf \(m) needs too many states") }
                }
                acc = try DFA.product(acc, try NumberAutomata.multipleOf(a: a, fractionDigits: k, budget: budget), intersect: true, budget: budget)
            }
            return acc
        }
        return try b.leaf(key, pointer: ptr) { () throws(GrammarError) -> DFA in
            let generatedForm = try numbers(generated)
            // Bounds past what generation writes (1e16, 1e-20) leave no number: said as such,
            // not as a schema that admits nothing.
            if generated, generatedForm.isEmptyLanguage, !(try numbers(false).isEmptyLanguage) { throw .numbersOutOfReach(pointer: ptr) }
            return generatedForm
        }
    }

    // MARK: enum / const

    func literalRule(_ n: SchemaNode, _ ptr: String) throws(GrammarError) -> Int32 {
        var values = n.literals ?? []
        var siblings = n
        siblings.literals = nil
        if siblings.hasAssertions {
            var kept: [JSONValue] = []
            for v in values where try algebra.admits(v, siblings, ptr) { kept.append(v) }
            values = kept
        }
        return try literalLeaf(values, ptr)
    }

    /// The values' texts (a number also in the other spellings a serializer may produce).
    func literalLeaf(_ values: [JSONValue], _ ptr: String) throws(GrammarError) -> Int32 {
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
