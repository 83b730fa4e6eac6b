/// Operations on typed schemas: following references, intersection (`allOf`), which
/// `oneOf` alternatives are provably exclusive, whether a literal value satisfies a schema, and
/// which unenforced keywords are vacuous.
final class SchemaAlgebra {
    let parser: SchemaParser
    let options: GrammarOptions
    /// Keywords lenient mode let through, as JSON pointers.
    var ignored: [String] = []
    /// How many ``negation(_:_:)`` calls are under way (a recursive schema's negation would not end).
    private var negationDepth = 0
    /// Negations of referenced schemas, by pointer (`.some(nil)`: none, or under way).
    private var negationsByRef: [ExactString: Schema?] = [:]

    init(parser: SchemaParser, options: GrammarOptions) {
        self.parser = parser
        self.options = options
    }

    /// A keyword the decoder can't enforce here: an error, or in lenient mode a note.
    func unenforceable(_ keyword: String, _ ptr: String) throws(GrammarError) {
        if options.lenient { ignored.append(ptr); return }
        throw .unsupportedKeyword(keyword: keyword, pointer: ptr)
    }

    // MARK: References

    /// A subschema as a node, following a chain of references; nil for `false`.
    func inline(_ s: Schema, _ ptr: String) throws(GrammarError) -> SchemaNode? {
        var cur = s
        var seen: Set<String> = []
        for _ in 0..<32 {
            switch cur {
            case .any: return SchemaNode()
            case .never: return nil
            case .ref(let p):
                guard seen.insert(p).inserted else { throw .leftRecursion(pointer: ptr) }
                cur = try parser.schema(at: p)
            case .node(let n): return n
            }
        }
        throw .budgetExceeded("more than 32 references lead from \(ptr) to a schema")
    }

    /// A subschema as a node with its `allOf` (references included) intersected in; nil when
    /// it admits nothing (`false` among the conjuncts).
    func flattened(_ s: Schema, _ ptr: String) throws(GrammarError) -> SchemaNode? {
        guard let n = try inline(s, ptr) else { return nil }
        return try resolvingAllOf(n, ptr)
    }

    /// The node with its conjuncts intersected in, left to right (a conjunct's own `allOf` joins
    /// the queue, and so do the rewrites of ``rewritingUnenforced(_:_:)``); nil when one of them
    /// is `false`.
    func resolvingAllOf(_ node: SchemaNode, _ ptr: String) throws(GrammarError) -> SchemaNode? {
        var n = try rewritingUnenforced(node, ptr) ?? node
        var rounds = 0
        var referenced: [String: Int] = [:]
        while !n.allOf.isEmpty {
            rounds += 1
            if rounds > 64 {
                // A conjunct that came back round after round includes itself; else it is depth.
                if referenced.values.contains(where: { $0 > 1 }) { throw .leftRecursion(pointer: ptr) }
                throw .budgetExceeded("allOf at \(ptr) nests more than 64 deep")
            }
            let conjuncts = n.allOf
            n.allOf = []
            for c in conjuncts { if case .ref(let p) = c { referenced[p, default: 0] += 1 } }
            for (i, c) in conjuncts.enumerated() {
                guard let cn = try inline(c, ptr + "/allOf/\(i)") else { return nil }
                n = try intersect(n, cn, pointer: ptr + "/allOf/\(i)")
            }
            n = try rewritingUnenforced(n, ptr) ?? n
        }
        return n
    }

    /// What the disjointness proofs look at: the flattened node where flattening succeeds, the
    /// node itself where it does not (an error there is the compiler's to report, not this
    /// approximation's); nil for `false`.
    private func shape(_ s: Schema) -> SchemaNode? {
        let noted = ignored.count
        defer { ignored.removeLast(ignored.count - noted) }
        do { return try flattened(s, "#") } catch {
            do { return try inline(s, "#") } catch { return SchemaNode() }
        }
    }

    // MARK: Intersection

    /// A schema both `a` and `b` describe. Subschemas that meet (a property both declare, items
    /// at one position) become `allOf` pairs, resolved when they are compiled.
    func intersect(_ a: SchemaNode, _ b: SchemaNode, pointer ptr: String) throws(GrammarError) -> SchemaNode {
        var out = a
        if let y = b.types { out.types = a.types.map { $0.meet(y) } ?? y }
        if let y = b.literals { out.literals = a.literals.map { $0.filter { y.contains($0) } } ?? y }
        out.allOf = a.allOf + b.allOf
        if let y = b.anyOf { out.anyOf = try a.anyOf.map { x throws(GrammarError) in x == y ? x : try product(x, y, ptr) } ?? y }
        if let y = b.oneOf { out.oneOf = try a.oneOf.map { x throws(GrammarError) in x == y ? x : try product(x, y, ptr) } ?? y }
        out.string = try intersect(a.string, b.string, ptr)
        out.number = try intersect(a.number, b.number, ptr)
        out.array = intersect(a.array, b.array)
        out.object = try intersect(a.object, b.object, ptr)
        // Both sides' keywords hold (each is rewritten or refused on its own), except that an
        // `if` pairs with its own `then`/`else`.
        for k in b.unenforced where !a.unenforced.contains(k) {
            if ["if", "then", "else"].contains(k.name) && a.unenforced.contains(where: { $0.name == k.name }) {
                try unenforceable(k.name, ptr + "/" + k.name)
                continue
            }
            out.unenforced.append(k)
        }
        return out
    }

    /// The pairwise conjunctions of two lists of alternatives.
    func product(_ a: [Schema], _ b: [Schema], _ ptr: String) throws(GrammarError) -> [Schema] {
        guard a.count * b.count <= 256 else { throw .budgetExceeded("allOf over unions with more than 256 combinations at \(ptr)") }
        var out: [Schema] = []
        for x in a { for y in b { out.append(conjunction(x, y)) } }
        return out
    }

    /// `allOf: [x, y]`, resolved when compiled.
    func conjunction(_ x: Schema, _ y: Schema) -> Schema { .build { $0.allOf = [x, y] } }

    private func intersect(_ a: StringFacet, _ b: StringFacet, _ ptr: String) throws(GrammarError) -> StringFacet {
        var out = a
        if let y = b.minLength { out.minLength = max(a.minLength ?? y, y) }
        if let y = b.maxLength { out.maxLength = min(a.maxLength ?? y, y) }
        if a.patterns != b.patterns { out.patterns = a.patterns + b.patterns }
        if let y = b.format {
            if let x = a.format, x != y { throw .unsupportedKeyword(keyword: "format", pointer: ptr) }
            out.format = y
        }
        out.excluded = a.excluded + b.excluded.filter { x in !a.excluded.contains { $0.unicodeScalars.elementsEqual(x.unicodeScalars) } }
        out.negated = a.negated + b.negated.filter { !a.negated.contains($0) }
        return out
    }

    private func intersect(_ a: NumberFacet, _ b: NumberFacet, _ ptr: String) throws(GrammarError) -> NumberFacet {
        var out = a
        out.lower = NumberFacet.tighter(a.lower, b.lower, lower: true)
        out.upper = NumberFacet.tighter(a.upper, b.upper, lower: false)
        if let y = b.multipleOf, let x = a.multipleOf, x != y {
            guard let xi = x.intValue, let yi = y.intValue else { throw .unsupportedKeyword(keyword: "multipleOf", pointer: ptr) }
            func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
            out.multipleOf = DecimalNumber(integer: xi / gcd(xi, yi) * yi)
        } else if let y = b.multipleOf {
            out.multipleOf = y
        }
        return out
    }

    /// Positions intersect one by one: `items` applies after its own schema's prefix only.
    private func intersect(_ a: ArrayFacet, _ b: ArrayFacet) -> ArrayFacet {
        var out = a
        if a.isPositional && b.isPositional {
            let ra = a.items ?? .any, rb = b.items ?? .any
            out.prefixItems = (0..<max(a.prefixItems.count, b.prefixItems.count)).map { i in
                conjunction(i < a.prefixItems.count ? a.prefixItems[i] : ra, i < b.prefixItems.count ? b.prefixItems[i] : rb)
            }
            out.items = conjunction(ra, rb)
            out.itemsIsAdditional = false
        } else if b.isPositional {
            out.prefixItems = b.prefixItems
            out.items = b.items
            out.itemsIsAdditional = b.itemsIsAdditional
            out.isPositional = true
        }
        if let y = b.minItems { out.minItems = max(a.minItems ?? y, y) }
        if let y = b.maxItems { out.maxItems = min(a.maxItems ?? y, y) }
        out.uniqueItems = a.uniqueItems || b.uniqueItems
        return out
    }

    /// Each side's additional properties constrain the other's declared ones.
    private func intersect(_ a: ObjectFacet, _ b: ObjectFacet, _ ptr: String) throws(GrammarError) -> ObjectFacet {
        var out = a
        // Patterns of both sides apply together. A side's explicit additionalProperties would
        // also govern the keys only the other side's patterns match (and its own patterns decide
        // which of the other side's properties it governs): that difference of key sets isn't
        // expressible in the merged properties.
        func saysProperties(_ f: ObjectFacet) -> Bool { f.properties != nil || f.additionalProperties != nil || f.patternProperties != nil }
        func conflicts(_ x: ObjectFacet, _ y: ObjectFacet) -> Bool {
            guard let ap = x.additionalProperties, ap != .any else { return false }
            return (x.patternProperties != nil && saysProperties(y)) || y.patternProperties != nil
        }
        if conflicts(a, b) || conflicts(b, a) { throw .unsupportedKeyword(keyword: "patternProperties", pointer: ptr) }
        if let p = b.patternProperties { out.patternProperties = (a.patternProperties ?? []) + p }
        if a.properties != nil || b.properties != nil || a.additionalProperties != nil || b.additionalProperties != nil {
            let apA = a.additionalProperties ?? .any, apB = b.additionalProperties ?? .any
            let pa = a.properties ?? [], pb = b.properties ?? []
            var props: [ObjectFacet.Property] = []
            for p in pa {
                if let w = b.property(p.name) { props.append(.init(name: p.name, schema: conjunction(p.schema, w))) }
                else { props.append(apB == .any ? p : .init(name: p.name, schema: conjunction(p.schema, apB))) }
            }
            for p in pb where a.property(p.name) == nil {
                props.append(apA == .any ? p : .init(name: p.name, schema: conjunction(p.schema, apA)))
            }
            out.properties = props.isEmpty ? nil : props
            if a.additionalProperties != nil || b.additionalProperties != nil {
                out.additionalProperties = apA == .any ? apB : apB == .any ? apA : conjunction(apA, apB)
            }
        }
        if let y = b.required { out.required = (a.required ?? []) + y.filter { !(a.required ?? []).contains($0) } }
        if let y = b.propertyNames { out.propertyNames = a.propertyNames.map { conjunction($0, y) } ?? y }
        if let y = b.minProperties { out.minProperties = max(a.minProperties ?? y, y) }
        if let y = b.maxProperties { out.maxProperties = min(a.maxProperties ?? y, y) }
        if out.order == nil { out.order = b.order }
        return out
    }

    // MARK: Unenforced keywords

    /// Refuses the node's unenforced keywords, except where their value makes them vacuous.
    func checkUnenforced(_ n: SchemaNode, _ ptr: String) throws(GrammarError) {
        for k in n.unenforced where !isVacuous(k, in: n) { try unenforceable(k.name, ptr + "/" + k.name) }
    }

    /// The node with the unenforced keywords that have an exact equivalent among the enforced
    /// ones rewritten as conjuncts; nil when there are none. A dependency (`dependentRequired`,
    /// `dependentSchemas`, draft-07 `dependencies`) is "the property is absent, or present with
    /// what it needs"; `not` of `required` is "an object without one of them", `not` of `type`
    /// the other types; `if`/`then`/`else` is "(if and then) or (not if and else)" where the
    /// condition has a ``negation(_:_:)``.
    func rewritingUnenforced(_ n: SchemaNode, _ ptr: String) throws(GrammarError) -> SchemaNode? {
        var out = n
        out.unenforced = []
        for k in n.unenforced {
            if let conjuncts = try equivalent(k, in: n, ptr + "/" + k.name) { out.allOf += conjuncts } else { out.unenforced.append(k) }
        }
        return out.unenforced == n.unenforced ? nil : out
    }

    private func equivalent(_ k: SchemaNode.Keyword, in n: SchemaNode, _ ptr: String) throws(GrammarError) -> [Schema]? {
        func without(_ name: String) -> Schema { .build { $0.object.properties = [.init(name: name, schema: .never)] } }
        switch k.name {
        case "dependentRequired", "dependentSchemas", "dependencies":
            guard !isVacuous(k, in: n), let deps = k.value.objectMembers else { return nil }
            var out: [Schema] = []
            for (name, dep) in deps {
                var present = SchemaNode()
                present.object.required = [name]
                if let list = dep.arrayValue {
                    guard k.name != "dependentSchemas", list.allSatisfy({ $0.stringValue != nil }) else { return nil }
                    present.object.required! += list.compactMap(\.stringValue).filter { $0 != name }
                } else {
                    guard k.name != "dependentRequired" else { return nil }
                    present.allOf = [try parser.parse(dep, ptr + "/" + escapePointer(name))]
                }
                out.append(.anyOf([without(name), .node(present)]))
            }
            return out
        case "not":
            return try negation(try parser.parse(k.value, ptr), ptr).map { [$0] }
        case "if":
            // The condition's value decides the branch: (if and then) or (not if and else).
            guard !isVacuous(k, in: n), let cond = Optional(try parser.parse(k.value, ptr)), let notCond = try negation(cond, ptr) else { return nil }
            func branch(_ name: String) throws(GrammarError) -> Schema {
                guard let v = n.unenforced.first(where: { $0.name == name })?.value else { return .any }
                return try parser.parse(v, String(ptr.dropLast(2)) + name)
            }
            let then = try branch("then"), otherwise = try branch("else")
            return [.anyOf([conjunction(cond, then), conjunction(notCond, otherwise)])]
        case "then", "else":
            // Part of the `if` rewrite when there is one.
            guard let cond = n.unenforced.first(where: { $0.name == "if" }), !isVacuous(cond, in: n) else { return nil }
            return try negation(try parser.parse(cond.value, String(ptr.dropLast(k.name.count)) + "if"), ptr) == nil ? nil : []
        default:
            return nil
        }
    }

    /// A schema for exactly the values `s` does not admit, where the enforced keywords can say
    /// it: `not` of types (but not `integer` alone), of `const`/`enum` over strings, null and
    /// both booleans, of string facets (strings matching none of them), of `required`, and of
    /// `properties` and `anyOf` whose schemas have negations; nil otherwise (and for negations
    /// nested more than 16 deep, as a recursive schema's would be). `not (A and B)` is
    /// `(not A) or (not B)`, and `not (A or B)` is `(not A) and (not B)`.
    func negation(_ s: Schema, _ ptr: String) throws(GrammarError) -> Schema? {
        // A reference's negation is computed once; one under way (a reference to itself) has
        // none. Without this, a condition that refers to itself is negated exponentially often.
        if case .ref(let target) = s {
            if let known = negationsByRef[ExactString(target)] { return known }
            negationsByRef[ExactString(target)] = .some(nil)
            let n = try negationOfNode(s, ptr)
            negationsByRef[ExactString(target)] = n
            return n
        }
        return try negationOfNode(s, ptr)
    }

    private func negationOfNode(_ s: Schema, _ ptr: String) throws(GrammarError) -> Schema? {
        negationDepth += 1
        defer { negationDepth -= 1 }
        guard negationDepth <= 16 else { return nil }
        guard let m = try flattened(s, ptr) else { return .any }
        guard m.oneOf == nil, m.unenforced.isEmpty else { return nil }
        var parts: [Schema] = []
        var rest = m
        if let alts = m.anyOf {
            var negations: [Schema] = []
            for (i, a) in alts.enumerated() {
                guard let na = try negation(a, ptr + "/anyOf/\(i)") else { return nil }
                negations.append(na)
            }
            parts.append(.build { $0.allOf = negations })
            rest.anyOf = nil
        }
        if rest.string != StringFacet() {
            // Only a format whose expression refuses no valid string has a negation (the
            // complement of a stricter one would admit valid strings).
            guard rest.string.format.map(SchemaFormats.admitsEveryValidString) ?? true else { return nil }
            let f = rest.string
            parts.append(.build { $0.types = .string; $0.string.negated = [f] })
            rest.string = StringFacet()
        }
        func objects(_ setUp: (inout SchemaNode) -> Void) -> Schema { .build { $0.types = .object; setUp(&$0) } }
        if let t = m.types {
            if t.contains(.integer) { return nil } // the non-integer numbers have no keyword
            parts.append(.build { $0.types = JSONTypes.all.subtracting(t) })
            rest.types = nil
        }
        if let values = m.literals {
            var x = SchemaNode()
            var types = JSONTypes.all
            for v in values {
                switch v {
                case .string(let str): x.string.excluded.append(str)
                case .null: types.remove(.null)
                case .bool: if values.contains(.bool(true)) && values.contains(.bool(false)) { types.remove(.boolean) } else { return nil }
                default: return nil
                }
            }
            x.types = types
            parts.append(.node(x))
            rest.literals = nil
        }
        if let required = m.object.required, !required.isEmpty {
            // `required` holds for every non-object, so its negation only for objects.
            parts.append(objects { x in x.anyOf = required.map { name in objects { $0.object.properties = [.init(name: name, schema: .never)] } } })
            rest.object.required = nil
        }
        for p in m.object.properties ?? [] {
            guard let np = try negation(p.schema, ptr + "/properties/" + escapePointer(p.name)) else { return nil }
            parts.append(objects { x in
                x.object.required = [p.name]
                x.object.properties = [.init(name: p.name, schema: np)]
            })
        }
        rest.object.properties = nil
        guard !rest.hasAssertions else { return nil }
        return parts.isEmpty ? .never : parts.count == 1 ? parts[0] : .anyOf(parts)
    }

    func isVacuous(_ k: SchemaNode.Keyword, in n: SchemaNode) -> Bool {
        let present = Set(n.unenforced.map(\.name))
        switch k.name {
        case "then", "else": return !present.contains("if")
        case "if": return !present.contains("then") && !present.contains("else")
        case "dependentRequired", "dependencies":
            // Vacuous when every dependency is already required, or its property can't occur.
            guard let deps = k.value.objectMembers else { return false }
            let required = Set(n.object.required ?? [])
            return deps.allSatisfy { dep in
                guard let list = dep.value.arrayValue else { return false }
                return list.allSatisfy { $0.stringValue.map(required.contains) ?? false } || !propertyPossible(n, dep.key)
            }
        default: return false
        }
    }

    /// Whether an object of `n` may have the property (true where the node's conjuncts or
    /// alternatives, not merged yet, could declare it).
    func propertyPossible(_ n: SchemaNode, _ name: String) -> Bool {
        if !n.allOf.isEmpty || n.anyOf != nil || n.oneOf != nil { return true }
        if n.object.property(name) != nil || n.object.patternProperties != nil { return true }
        guard let ap = n.object.additionalProperties else { return options.additionalPropertiesByDefault }
        return ap != .never
    }

    // MARK: oneOf exclusivity

    /// The types a node can produce (from above), with `integer` inside `number`.
    func possibleTypes(_ n: SchemaNode) -> JSONTypes {
        if let l = n.literals { return l.reduce(into: JSONTypes()) { $0.formUnion(JSONTypes(of: $1)) } }
        var r = (n.types ?? JSONTypes.all).withIntegers
        if let alts = n.anyOf ?? n.oneOf {
            r.formIntersection(alts.reduce(into: JSONTypes()) { t, a in t.formUnion(shape(a).map(possibleTypes) ?? []) })
        }
        return r
    }

    /// `oneOf` as alternatives that exclude each other: each one and the negations of the others
    /// (at most 64 combinations of their parts each); nil where a negation doesn't exist.
    func exclusive(_ alts: [Schema], _ ptr: String) -> [Schema]? {
        var negations: [Schema] = []
        for (i, a) in alts.enumerated() {
            guard let n = (try? negation(a, ptr + "/oneOf/\(i)")) ?? nil else { return nil }
            negations.append(n)
        }
        func parts(_ s: Schema) -> Int { if case .node(let n) = s { return n.anyOf?.count ?? 1 } else { return 1 } }
        var out: [Schema] = []
        for i in alts.indices {
            let others = negations.indices.filter { $0 != i }.map { negations[$0] }
            guard others.reduce(1, { $0 * parts($1) }) <= 64 else { return nil }
            out.append(.build { $0.allOf = [alts[i]] + others })
        }
        return out
    }

    /// Whether no two of `alts` admit a common value (so `oneOf` is `anyOf`).
    func provablyDisjoint(_ alts: [Schema]) -> Bool {
        let nodes = alts.map(shape)
        for i in nodes.indices {
            for j in nodes.indices where j > i && !disjoint(nodes[i], nodes[j], depth: 0) { return false }
        }
        return true
    }

    /// Whether no value satisfies both nodes (nil: `false`). Sound, not complete: `false`
    /// where no proof is found.
    func disjoint(_ x: SchemaNode?, _ y: SchemaNode?, depth: Int) -> Bool {
        guard let a = x, let b = y else { return true }
        guard depth < 8 else { return false }
        let common = possibleTypes(a).intersection(possibleTypes(b))
        if common.isEmpty { return true }
        // A finite side: none of its values satisfies the other (an undecidable check counts as satisfied).
        for (l, other) in [(a.literals, b), (b.literals, a)] {
            if let l, !l.contains(where: { (try? admits($0, other, "#")) ?? true }) { return true }
        }
        if common.isSubset(of: [.number, .integer]) && (below(a.number.upper, b.number.lower) || below(b.number.upper, a.number.lower)) { return true }
        if common == .string && stringsDisjoint(a.string, b.string) { return true }
        // Objects: each side's generated values fail the other (a validator judges `oneOf`, with
        // its open objects: {"a":5} generated for {required:[a]} satisfies {properties:{b}}).
        if common == .object && excludes(a, b, depth: depth) && excludes(b, a, depth: depth) { return true }
        return false
    }

    /// Whether no object the decoder generates for `q` satisfies `p`: `p` requires a key that
    /// `q` can't generate, `q` requires one that `p` forbids itself, or a key one side requires
    /// has values the two can't agree on.
    private func excludes(_ p: SchemaNode, _ q: SchemaNode, depth: Int) -> Bool {
        func valuesApart(_ k: String) -> Bool {
            guard let sp = p.object.property(k), let sq = q.object.property(k) else { return false }
            return disjoint(shape(sp), shape(sq), depth: depth + 1)
        }
        for k in p.object.required ?? [] where !propertyPossible(q, k) || valuesApart(k) { return true }
        for k in q.object.required ?? [] where forbids(p, k) || valuesApart(k) { return true }
        return false
    }

    /// Whether the schema itself (not the decoder's default) rules the property out.
    private func forbids(_ n: SchemaNode, _ name: String) -> Bool {
        n.allOf.isEmpty && n.anyOf == nil && n.oneOf == nil && n.object.property(name) == nil
            && n.object.patternProperties == nil && n.object.additionalProperties == .never
    }

    /// Whether every number under `upper` is below every number over `lower`.
    private func below(_ upper: NumberFacet.Bound?, _ lower: NumberFacet.Bound?) -> Bool {
        guard let u = upper, let l = lower else { return false }
        return u.value < l.value || (u.value == l.value && (u.exclusive || l.exclusive))
    }

    /// Whether the strings two facets allow can't meet (their automata's product is empty).
    private func stringsDisjoint(_ a: StringFacet, _ b: StringFacet) -> Bool {
        // A proof, not a requirement: small automata only.
        let budget = 20_000
        guard [a, b].allSatisfy({ max($0.minLength ?? 0, $0.maxLength ?? 0) <= 256 }) else { return false }
        do {
            guard let x = try StringAutomata.matching(a, lengths: true, budget: budget),
                  let y = try StringAutomata.matching(b, lengths: true, budget: budget) else { return false }
            return try DFA.product(x, y, intersect: true, budget: budget).isEmptyLanguage
        } catch {
            return false
        }
    }

    // MARK: Generation order

    /// The node the decoder generates `value` under: `s` with its conjuncts intersected in and,
    /// of an `anyOf`/`oneOf`, the first alternative `value` fits merged with its siblings (as
    /// the compiler merges them). nil where `s` admits nothing or can't be flattened.
    func generated(_ s: Schema, for value: JSONValue, depth: Int = 0) -> SchemaNode? {
        guard depth < 16, let n = try? flattened(s, "#") else { return nil }
        var alternatives = n.anyOf ?? n.oneOf
        if let x = n.anyOf, let y = n.oneOf { alternatives = try? product(x, y, "#") }
        guard let alternatives else { return n }
        var siblings = n
        siblings.anyOf = nil; siblings.oneOf = nil
        for alt in alternatives {
            guard let an = try? inline(alt, "#") else { continue }
            let merged = siblings.hasAssertions ? (try? intersect(siblings, an, pointer: "#")).map(Schema.node) ?? alt : alt
            // A keyword the check can't decide counts as fitting.
            if (try? admits(value, merged, "#")) ?? true { return generated(merged, for: value, depth: depth + 1) }
        }
        return siblings
    }

    // MARK: Literal values

    /// Whether a value satisfies a schema (for `enum`/`const` values checked against their
    /// sibling keywords, so that only values the whole schema accepts become literals).
    func admits(_ v: JSONValue, _ s: Schema, _ ptr: String) throws(GrammarError) -> Bool {
        guard let n = try inline(s, ptr) else { return false }
        return try admits(v, n, ptr)
    }

    func admits(_ v: JSONValue, _ n: SchemaNode, _ ptr: String) throws(GrammarError) -> Bool {
        if let t = n.types, !t.admits(JSONTypes(of: v)) { return false }
        if let l = n.literals, !l.contains(v) { return false }
        for c in n.allOf where !(try admits(v, c, ptr)) { return false }
        /// How many of `alts` admit the value, counted up to `limit`.
        func admitting(_ alts: [Schema], upTo limit: Int) throws(GrammarError) -> Int {
            var count = 0
            for a in alts where count < limit { if try admits(v, a, ptr) { count += 1 } }
            return count
        }
        if let alts = n.anyOf, try admitting(alts, upTo: 1) == 0 { return false }
        if let alts = n.oneOf, try admitting(alts, upTo: 2) != 1 { return false }
        if let r = try rewritingUnenforced(n, ptr) { return try admits(v, r, ptr) }
        if !options.lenient, let k = n.unenforced.first(where: { !isVacuous($0, in: n) }) {
            throw .unsupportedKeyword(keyword: k.name, pointer: ptr + "/" + k.name)
        }
        switch v {
        case .string(let s): return try admits(s, n.string, ptr)
        case .number(let t):
            guard let x = DecimalNumber(t) else { return true }
            return try admits(x, n.number, ptr)
        case .array(let items): return try admits(items, n.array, ptr)
        case .object(let members): return try admits(members, n.object, ptr)
        default: return true
        }
    }

    private func admits(_ s: String, _ f: StringFacet, _ ptr: String) throws(GrammarError) -> Bool {
        if f.excluded.contains(where: { $0.unicodeScalars.elementsEqual(s.unicodeScalars) }) { return false }
        for g in f.negated where try admits(s, g, ptr) { return false }
        let count = s.unicodeScalars.count
        if count < (f.minLength ?? 0) || count > (f.maxLength ?? Int.max) { return false }
        if let longest = f.format.flatMap(SchemaFormats.longest), count > longest { return false }
        for p in f.patterns where !(try StringAutomata.matches(s, pattern: p)) { return false }
        if let name = f.format {
            guard let re = SchemaFormats.pattern(name) else { throw .unsupportedKeyword(keyword: "format", pointer: ptr) }
            if !(try StringAutomata.matches(s, pattern: re, fullMatch: true)) { return false }
        }
        return true
    }

    private func admits(_ x: DecimalNumber, _ f: NumberFacet, _ ptr: String) throws(GrammarError) -> Bool {
        if let b = f.lower, b.exclusive ? !(b.value < x) : x < b.value { return false }
        if let b = f.upper, b.exclusive ? !(x < b.value) : b.value < x { return false }
        if let m = f.multipleOf {
            guard let xi = x.intValue, let mi = m.intValue, mi > 0 else { throw .unsupportedKeyword(keyword: "multipleOf", pointer: ptr) }
            if xi % mi != 0 { return false }
        }
        return true
    }

    private func admits(_ items: [JSONValue], _ f: ArrayFacet, _ ptr: String) throws(GrammarError) -> Bool {
        if items.count < (f.minItems ?? 0) || items.count > (f.maxItems ?? Int.max) { return false }
        if f.uniqueItems, items.indices.contains(where: { i in items[..<i].contains(items[i]) }) { return false }
        for (x, s) in zip(items, f.prefixItems) where !(try admits(x, s, ptr)) { return false }
        if let rest = f.items {
            for x in items.dropFirst(f.prefixItems.count) where !(try admits(x, rest, ptr)) { return false }
        }
        return true
    }

    private func admits(_ members: [(key: String, value: JSONValue)], _ f: ObjectFacet, _ ptr: String) throws(GrammarError) -> Bool {
        if members.count < (f.minProperties ?? 0) || members.count > (f.maxProperties ?? Int.max) { return false }
        for name in f.required ?? [] where !members.contains(where: { $0.key == name }) { return false }
        for (k, v) in members {
            if let names = f.propertyNames, !(try admits(.string(k), names, ptr)) { return false }
            var governed = false
            if let s = f.property(k) {
                governed = true
                if !(try admits(v, s, ptr)) { return false }
            }
            for p in f.patternProperties ?? [] where try StringAutomata.matches(k, pattern: p.name) {
                governed = true
                if !(try admits(v, p.schema, ptr)) { return false }
            }
            if !governed, let ap = f.additionalProperties, !(try admits(v, ap, ptr)) { return false }
        }
        return true
    }
}
