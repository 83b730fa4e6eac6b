/// Automata over JSON strings (quotes included): any string, strings matching a pattern, and
/// strings of a bounded length.
enum StringAutomata {
    /// JSON strings (quotes included) whose content matches `pattern`: JSON Schema's search
    /// semantics, or the whole content when `fullMatch` (formats). Trim, and built once per
    /// process (the literal checks, disjointness proofs and leaves of a schema ask for the same
    /// patterns again and again).
    static func pattern(_ pattern: String, fullMatch: Bool, budget: Int) throws(GrammarError) -> DFA {
        try GrammarBuilder.sharedLeaf((fullMatch ? "pattern-full:" : "pattern:") + pattern) { () throws(GrammarError) -> DFA in
            var n = NFA()
            let s = n.add(), open = n.add(), e = n.add()
            n.range(s, 0x22, 0x22, open)
            let end = try RegexBuilder.contentNFA(pattern, fullMatch: fullMatch, nfa: &n, from: open)
            n.range(end, 0x22, 0x22, e)
            return try DFA.determinize(n, start: s, accepting: [e], budget: budget)
        }.dfa
    }

    /// Whether `text` matches `pattern` (search semantics unless `fullMatch`).
    static func matches(_ text: String, pattern: String, fullMatch: Bool = false) throws(GrammarError) -> Bool {
        try StringAutomata.pattern(pattern, fullMatch: fullMatch, budget: 100_000).accepts(Array(JSONWriter.quoted(text).utf8))
    }

    /// Strings a facet allows: its patterns (search semantics), its format (the whole string),
    /// less its excluded strings (each has one spelling in these automata, so leaving it out is
    /// exact) and the strings of its negated facets, and with `lengths` its length bounds; nil
    /// when a format is unknown.
    static func matching(_ f: StringFacet, lengths: Bool, budget: Int) throws(GrammarError) -> DFA? {
        var parts = f.patterns.map { ($0, false) }
        if let name = f.format {
            guard let re = SchemaFormats.pattern(name) else { return nil }
            parts.append((re, true))
        }
        var strings: DFA? = nil
        for (p, full) in parts {
            let part = try pattern(p, fullMatch: full, budget: budget)
            strings = try strings.map { a throws(GrammarError) in try DFA.product(a, part, intersect: true, budget: budget) } ?? part
        }
        var out = strings ?? plainString
        let excluded = f.excluded.map { Array(JSONWriter.quoted($0).utf8) }.filter(out.accepts)
        if !excluded.isEmpty { out = DFA.strings(of: out.trimmed(), except: excluded) }
        // Negated facets that are one plain pattern each (no anchors, alternation, groups,
        // classes or escapes, which a surrounding group could change) become one pattern, their
        // alternation: one automaton and one difference instead of one of each per facet.
        var negated: [StringFacet] = [], plain: [String] = []
        for g in f.negated {
            if g.patterns.count == 1 && g == StringFacet(patterns: g.patterns) && !g.patterns[0].contains(where: { "^$|()[]\\".contains($0) }) {
                plain.append(g.patterns[0])
            } else {
                negated.append(g)
            }
        }
        if !plain.isEmpty { negated.append(StringFacet(patterns: [plain.count == 1 ? plain[0] : "(" + plain.joined(separator: ")|(") + ")"])) }
        for g in negated {
            guard let not = try matching(g, lengths: true, budget: budget) else { return nil }
            out = try DFA.product(out, not, intersect: false, budget: budget)
        }
        if lengths && (f.minLength != nil || f.maxLength != nil) { out = try bounded(out, max(f.minLength ?? 0, 0), f.maxLength, budget: budget) }
        return out
    }

    /// The strings of `strings` of `minL...maxL` characters: the product with a character counter.
    static func bounded(_ strings: DFA, _ minL: Int, _ maxL: Int?, budget: Int) throws(GrammarError) -> DFA {
        if (maxL ?? minL) > 5000 { throw .budgetExceeded("string length bounds above 5000 combined with a pattern") }
        return try DFA.product(strings, length(minL, maxL), intersect: true, budget: budget)
    }

    /// No string at all.
    static let noStrings: DFA = {
        var d = DFA()
        d.add()
        return d
    }()

    /// `"` any JSON string content `"` (state 1: between characters). Built once.
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
    static func length(_ minL: Int, _ maxL: Int?) -> DFA {
        /// (plain state, count) pairs, interned through a dense table.
        struct Builder {
            let plain = StringAutomata.plainString
            let width: Int
            var out = DFA()
            var index: [Int32]
            var work: [(Int32, Int)] = []
            init(cap: Int) {
                width = cap + 2
                index = [Int32](repeating: -1, count: StringAutomata.plainString.count * (cap + 2))
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
}
