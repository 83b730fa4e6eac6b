/// A byte range transition `lo...hi → to`.
struct ByteEdge: Hashable {
    var lo: UInt8
    var hi: UInt8
    var to: Int32
}

/// A call transition: run rule `rule`, then continue at `to`.
struct CallEdge: Hashable {
    var rule: Int32
    var to: Int32
}

/// A nondeterministic automaton over bytes with ε-moves and rule calls; the construction
/// medium for every rule before it is made deterministic. Arcs are kept in flat lists in the
/// order they are added (``SubsetConstruction`` groups them by state), so that building one
/// costs no allocation per state.
struct NFA {
    private(set) var count = 0
    var epsFrom: [Int32] = []
    var epsTo: [Int32] = []
    var edgeFrom: [Int32] = []
    var edgeList: [ByteEdge] = []
    var callFrom: [Int32] = []
    var callList: [CallEdge] = []
    /// States from which every continuation the automaton allows at all is accepted (the `.*`
    /// after an unanchored pattern). A subset holding one stands for just its absorbing members,
    /// which keeps "already matched" from multiplying with every partial match (exact: the
    /// members share one continuation, of which these accept everything).
    var absorbing: Set<Int32> = []

    @discardableResult
    mutating func add() -> Int32 {
        count += 1
        return Int32(count - 1)
    }
    mutating func epsilon(_ from: Int32, _ to: Int32) { epsFrom.append(from); epsTo.append(to) }
    mutating func range(_ from: Int32, _ lo: UInt8, _ hi: UInt8, _ to: Int32) {
        edgeFrom.append(from); edgeList.append(ByteEdge(lo: lo, hi: hi, to: to))
    }
    mutating func call(_ from: Int32, _ rule: Int32, _ to: Int32) { callFrom.append(from); callList.append(CallEdge(rule: rule, to: to)) }

    /// Appends `bytes` after `from`; returns the end state.
    mutating func literal(_ from: Int32, _ bytes: [UInt8]) -> Int32 {
        var s = from
        for b in bytes { let t = add(); range(s, b, b, t); s = t }
        return s
    }

    /// Copies `dfa` (a leaf automaton, no calls) into this NFA after `from`; returns a state
    /// reached by ε from every accepting state of the copy.
    mutating func embed(_ dfa: DFA, from: Int32) -> Int32 {
        let base = Int32(count)
        for _ in 0..<dfa.count { add() }
        epsilon(from, base)
        let end = add()
        for s in 0..<dfa.count {
            for e in dfa.trans[s] { range(base + Int32(s), e.lo, e.hi, base + e.to) }
            for c in dfa.calls[s] { call(base + Int32(s), c.rule, base + c.to) }
            if dfa.accepting[s] { epsilon(base + Int32(s), end) }
        }
        return end
    }
}

/// A deterministic automaton over bytes; a state may also carry call edges (rules that may
/// start there). State 0 is the start.
struct DFA: Hashable {
    var trans: [[ByteEdge]] = []
    var calls: [[CallEdge]] = []
    var accepting: [Bool] = []

    var count: Int { trans.count }

    @discardableResult
    mutating func add(accepting acc: Bool = false) -> Int32 {
        trans.append([]); calls.append([]); accepting.append(acc)
        return Int32(trans.count - 1)
    }

    func next(_ s: Int32, _ b: UInt8) -> Int32 {
        for e in trans[Int(s)] where b >= e.lo && b <= e.hi { return e.to }
        return -1
    }

    /// Whether the automaton (without calls) accepts `bytes` from the start.
    func accepts(_ bytes: [UInt8]) -> Bool {
        var s: Int32 = 0
        for b in bytes { s = next(s, b); if s < 0 { return false } }
        return accepting[Int(s)]
    }

    /// The trie of `words` as an automaton (accepting exactly them), built directly.
    static func literals(_ words: [[UInt8]]) -> DFA {
        var d = DFA()
        d.add()
        for w in words {
            var s: Int32 = 0
            for b in w {
                if let e = d.trans[Int(s)].first(where: { $0.lo == b }) { s = e.to; continue }
                let t = d.add()
                d.trans[Int(s)].append(ByteEdge(lo: b, hi: b, to: t))
                s = t
            }
            d.accepting[Int(s)] = true
        }
        for i in 0..<d.count { d.trans[i].sort { $0.lo < $1.lo } }
        return d
    }

    /// What `strings` accepts except the byte strings `excluded` (which it must accept): the
    /// product of `strings` with the trie of `excluded`, built directly. A state is a trie node
    /// with the state of `strings` its bytes lead to, or, once the input has left the trie, a
    /// state of `strings` alone. (Every object that allows extra properties needs one, for the
    /// keys it doesn't declare, so it is worth not going through the general product.)
    /// When `strings` is trim, so is the result.
    static func strings(of strings: DFA, except excluded: [[UInt8]]) -> DFA {
        // The trie in flat arrays, children linked in byte order (the words are sorted);
        // `final`: a whole excluded string ends at the node.
        let words = excluded.sorted { $0.lexicographicallyPrecedes($1) }
        var byte: [UInt8] = [0], firstChild: [Int32] = [-1], nextSibling: [Int32] = [-1], final: [Bool] = [false]
        var lastChild: [Int32] = [-1]
        for word in words {
            var node: Int32 = 0
            for b in word {
                // Sorted words only ever extend the last child.
                let last = lastChild[Int(node)]
                if last >= 0 && byte[Int(last)] == b { node = last; continue }
                let child = Int32(byte.count)
                byte.append(b); firstChild.append(-1); nextSibling.append(-1); final.append(false); lastChild.append(-1)
                if last >= 0 { nextSibling[Int(last)] = child } else { firstChild[Int(node)] = child }
                lastChild[Int(node)] = child
                node = child
            }
            final[Int(node)] = true
        }
        var out = DFA()
        var trieState = [Int32](repeating: -1, count: byte.count)
        var plainState = [Int32](repeating: -1, count: strings.count)
        var work: [(node: Int32, state: Int32)] = [] // node -1: left the trie
        func stateFor(node: Int32, state q: Int32) -> Int32 {
            if node >= 0 {
                if trieState[Int(node)] < 0 {
                    trieState[Int(node)] = out.add(accepting: strings.accepting[Int(q)] && !final[Int(node)])
                    work.append((node, q))
                }
                return trieState[Int(node)]
            }
            if plainState[Int(q)] < 0 {
                plainState[Int(q)] = out.add(accepting: strings.accepting[Int(q)])
                work.append((-1, q))
            }
            return plainState[Int(q)]
        }
        _ = stateFor(node: 0, state: 0)
        var cursor = 0
        while cursor < work.count {
            let (node, q) = work[cursor]
            let from = node >= 0 ? trieState[Int(node)] : plainState[Int(q)]
            cursor += 1
            // One allocation per state: a trie node adds two edges per child, and most have one.
            var edges: [ByteEdge] = []
            edges.reserveCapacity(strings.trans[Int(q)].count + (node >= 0 ? 4 : 0))
            var kid = node >= 0 ? firstChild[Int(node)] : -1
            for e in strings.trans[Int(q)] {
                // Split the edge at the bytes that stay in the trie.
                var lo = Int(e.lo)
                while kid >= 0 && Int(byte[Int(kid)]) < lo { kid = nextSibling[Int(kid)] }
                while kid >= 0 && byte[Int(kid)] <= e.hi {
                    let b = Int(byte[Int(kid)])
                    if b > lo { edges.append(ByteEdge(lo: UInt8(lo), hi: UInt8(b - 1), to: stateFor(node: -1, state: e.to))) }
                    // An excluded string that `strings` can't continue is a dead end: no edge,
                    // so the result needs no trimming.
                    if !(final[Int(kid)] && strings.trans[Int(e.to)].isEmpty) {
                        edges.append(ByteEdge(lo: UInt8(b), hi: UInt8(b), to: stateFor(node: kid, state: e.to)))
                    }
                    lo = b + 1
                    kid = nextSibling[Int(kid)]
                }
                if lo <= Int(e.hi) { edges.append(ByteEdge(lo: UInt8(lo), hi: e.hi, to: stateFor(node: -1, state: e.to))) }
            }
            out.trans[Int(from)] = edges
        }
        return out
    }

    /// The subset construction; `accepting` lists the NFA's accepting states.
    static func determinize(_ nfa: NFA, start: Int32, accepting acc: Set<Int32>, budget: Int) throws(GrammarError) -> DFA {
        try determinizeWithSets(nfa, start: start, accepting: acc, budget: budget).dfa
    }

    /// The subset construction, also returning the NFA states each DFA state stands for
    /// (``SubsetConstruction/members(of:)``).
    static func determinizeWithSets(_ nfa: NFA, start: Int32, accepting acc: Set<Int32>, budget: Int,
                                    reusing scratch: SubsetConstruction.Scratch? = nil) throws(GrammarError) -> (dfa: DFA, sets: SubsetConstruction) {
        var sc = SubsetConstruction(nfa, accepting: acc, budget: budget, reusing: scratch)
        try sc.run(start: start)
        return (sc.dfa, sc)
    }

    /// The product of two call-free automata: `intersect` accepts what both accept; otherwise
    /// the result accepts what `a` accepts and `b` does not. Not trimmed (dead states are left
    /// for whoever takes the final automaton to trim once).
    static func product(_ a: DFA, _ b: DFA, intersect: Bool, budget: Int) throws(GrammarError) -> DFA {
        let (aStart, aEdges) = a.flatEdges(), (bStart, bEdges) = b.flatEdges()
        var p = ProductStates(a, b, intersect: intersect, budget: budget)
        defer { p.release() }
        _ = try p.intern(0, 0)
        var cursor = 0
        var edges: [ByteEdge] = []
        while cursor < p.work.count {
            let (x, y) = p.work[cursor]
            let from = cursor
            cursor += 1
            edges.removeAll(keepingCapacity: true)
            // Both edge lists are sorted and disjoint: one merge pass, pieces in byte order.
            var j = y < 0 ? 0 : Int(bStart[Int(y)])
            let jEnd = y < 0 ? 0 : Int(bStart[Int(y) + 1])
            for ia in Int(aStart[Int(x)])..<Int(aStart[Int(x) + 1]) {
                let ea = aEdges[ia]
                while j < jEnd && bEdges[j].hi < ea.lo { j += 1 }
                var uncovered = Int(ea.lo)
                var k = j
                while k < jEnd && bEdges[k].lo <= ea.hi {
                    let eb = bEdges[k]
                    let lo = max(ea.lo, eb.lo), hi = min(ea.hi, eb.hi)
                    // Bytes of `ea` that `b` cannot take leave `b` for good.
                    if !intersect && Int(lo) > uncovered { edges.append(ByteEdge(lo: UInt8(uncovered), hi: lo - 1, to: try p.intern(ea.to, -1))) }
                    edges.append(ByteEdge(lo: lo, hi: hi, to: try p.intern(ea.to, eb.to)))
                    uncovered = Int(hi) + 1
                    if eb.hi > ea.hi { break }
                    k += 1
                }
                if !intersect && uncovered <= Int(ea.hi) { edges.append(ByteEdge(lo: UInt8(uncovered), hi: ea.hi, to: try p.intern(ea.to, -1))) }
                j = k
            }
            p.out.trans[from] = edges
        }
        return p.out
    }

    /// The states of a product: pairs interned through a dense table when it is small (a length
    /// counter times a pattern is thousands of pairs, each looked up several times), else a
    /// dictionary. `b` = -1 (left `b` for good) is column `b.count`. The table comes from a pool
    /// and goes back with only its used slots reset: filling a fresh one cost more than the
    /// product where few of its pairs are reachable.
    struct ProductStates {
        let a: DFA, b: DFA
        let intersect: Bool
        let budget: Int
        let width: Int
        let dense: Bool
        var table: [Int32]
        var index: [Int64: Int32] = [:]
        var work: [(Int32, Int32)] = []
        var out = DFA()

        init(_ a: DFA, _ b: DFA, intersect: Bool, budget: Int) {
            self.a = a
            self.b = b
            self.intersect = intersect
            self.budget = budget
            width = b.count + 1
            dense = a.count * width <= 1 << 20
            table = dense ? ProductStates.tables.take(a.count * width) : []
        }

        /// Gives the table back with its used slots reset.
        mutating func release() {
            guard dense else { return }
            for (x, y) in work { table[Int(x) * width + Int(y < 0 ? Int32(b.count) : y)] = -1 }
            ProductStates.tables.giveBack(table)
            table = []
        }

        /// Tables to reuse (one per compiling thread is the need).
        static let tables = ArrayPool<Int32>(clean: -1, limit: 4)

        mutating func intern(_ x: Int32, _ y: Int32) throws(GrammarError) -> Int32 {
            let slot = Int(x) * width + Int(y < 0 ? Int32(b.count) : y)
            let key = Int64(x) << 32 | Int64(UInt32(bitPattern: y))
            if dense { if table[slot] >= 0 { return table[slot] } } else if let i = index[key] { return i }
            if out.count >= budget { throw .budgetExceeded("an automaton product needs more than \(budget) states") }
            let accA = a.accepting[Int(x)]
            let accB = y >= 0 && b.accepting[Int(y)]
            let i = out.add(accepting: intersect ? (accA && accB) : (accA && !accB))
            if dense { table[slot] = i } else { index[key] = i }
            work.append((x, y))
            return i
        }
    }

    /// The byte edges of every state in compressed rows, each row sorted by `lo`.
    func flatEdges() -> (start: [Int32], edges: [ByteEdge]) {
        var start = [Int32](repeating: 0, count: count + 1)
        var edges: [ByteEdge] = []
        for (s, row) in trans.enumerated() {
            let first = edges.count
            edges.append(contentsOf: row)
            if !edges[first...].isSorted(by: { $0.lo < $1.lo }) { edges[first...].sort { $0.lo < $1.lo } }
            start[s + 1] = Int32(edges.count)
        }
        return (start, edges)
    }

    /// Removes states that cannot reach an accepting state (the start is kept, possibly dead).
    /// Call edges count as possible moves.
    func trimmed() -> DFA {
        // Liveness to a fixpoint, sweeping from the last state: states are numbered as they
        // were found, so most edges point forward and one sweep settles nearly everything (the
        // common case, where every state is live, costs one read of the edges). Automata that
        // need more sweeps go through reverse edges instead.
        let n = count
        var live = accepting
        var sweeps = 0, changed = true
        while changed && sweeps < 4 {
            changed = false
            sweeps += 1
            for s in stride(from: n - 1, through: 0, by: -1) where !live[s] {
                if trans[s].contains(where: { live[Int($0.to)] }) || calls[s].contains(where: { live[Int($0.to)] }) {
                    live[s] = true
                    changed = true
                }
            }
        }
        if changed { live = liveStates() }
        if live.allSatisfy({ $0 }) { return self }
        // Renumber reachable live states from the start.
        var newIndex = [Int32](repeating: -1, count: count)
        var order: [Int32] = [0]
        newIndex[0] = 0
        var i = 0
        while i < order.count {
            let s = Int(order[i]); i += 1
            for e in trans[s] where live[Int(e.to)] && newIndex[Int(e.to)] < 0 { newIndex[Int(e.to)] = Int32(order.count); order.append(e.to) }
            for c in calls[s] where live[Int(c.to)] && newIndex[Int(c.to)] < 0 { newIndex[Int(c.to)] = Int32(order.count); order.append(c.to) }
        }
        var out = DFA()
        out.trans.reserveCapacity(order.count)
        out.calls.reserveCapacity(order.count)
        out.accepting.reserveCapacity(order.count)
        for s in order {
            let row = trans[Int(s)]
            var kept: [ByteEdge] = []
            kept.reserveCapacity(row.count)
            for e in row where newIndex[Int(e.to)] >= 0 { kept.append(ByteEdge(lo: e.lo, hi: e.hi, to: newIndex[Int(e.to)])) }
            out.trans.append(kept)
            let callRow = calls[Int(s)]
            var keptCalls: [CallEdge] = []
            if !callRow.isEmpty {
                for c in callRow where newIndex[Int(c.to)] >= 0 { keptCalls.append(CallEdge(rule: c.rule, to: newIndex[Int(c.to)])) }
            }
            out.calls.append(keptCalls)
            out.accepting.append(accepting[Int(s)])
        }
        return out
    }

    /// The states that can reach an accepting state, over reverse edges in compressed rows.
    func liveStates() -> [Bool] {
        let n = count
        var revStart = [Int32](repeating: 0, count: n + 1)
        for s in 0..<n {
            for e in trans[s] { revStart[Int(e.to) + 1] += 1 }
            for c in calls[s] { revStart[Int(c.to) + 1] += 1 }
        }
        for s in 0..<n { revStart[s + 1] += revStart[s] }
        var fill = revStart
        var rev = [Int32](repeating: 0, count: Int(revStart[n]))
        for s in 0..<n {
            for e in trans[s] { rev[Int(fill[Int(e.to)])] = Int32(s); fill[Int(e.to)] += 1 }
            for c in calls[s] { rev[Int(fill[Int(c.to)])] = Int32(s); fill[Int(c.to)] += 1 }
        }
        var live = accepting
        var stack: [Int32] = []
        for s in 0..<n where live[s] { stack.append(Int32(s)) }
        while let s = stack.popLast() {
            for k in Int(revStart[Int(s)])..<Int(revStart[Int(s) + 1]) {
                let p = rev[k]
                if !live[Int(p)] { live[Int(p)] = true; stack.append(p) }
            }
        }
        return live
    }

    /// Whether no byte string is accepted (call-free automata).
    var isEmptyLanguage: Bool {
        var seen = [Bool](repeating: false, count: count)
        var stack: [Int32] = [0]
        seen[0] = true
        while let s = stack.popLast() {
            if accepting[Int(s)] { return false }
            for e in trans[Int(s)] where !seen[Int(e.to)] { seen[Int(e.to)] = true; stack.append(e.to) }
        }
        return true
    }
}

extension Collection {
    func isSorted(by less: (Element, Element) -> Bool) -> Bool {
        var prev: Element? = nil
        for x in self { if let p = prev, less(x, p) { return false }; prev = x }
        return true
    }
}
