/// The subset construction (NFA → DFA), written so that a DFA state costs no allocation beyond
/// its own edges: the NFA-state sets live in one pool and are interned through an open-addressing
/// table, and the closure, edge and sweep buffers are reused from state to state. Schema
/// compilation spends most of its time here (an object with many optional properties makes
/// thousands of small sets), so the constant factor matters.
struct SubsetConstruction {
    let nfa: NFA
    let budget: Int
    var dfa = DFA()
    /// The sorted NFA states of DFA state `i`: `pool[starts[i]..<starts[i + 1]]`.
    var pool: [Int32] = []
    var starts: [Int] = [0]
    var hashes: [UInt64] = []
    /// Open addressing over `hashes`: a DFA state id, or -1.
    var table = [Int32](repeating: -1, count: 256)
    let isAccepting: [Bool]
    let isAbsorbing: [Bool]
    let hasAbsorbing: Bool
    // Scratch.
    var mark: [Int32]
    var stamp: Int32 = 0
    var members: [Int32] = []
    var stack: [Int32] = []
    var edges: [ByteEdge] = []
    var active: [Int] = []
    var out: [ByteEdge] = []
    var callPairs: [CallEdge] = []

    init(_ nfa: NFA, accepting: Set<Int32>, budget: Int) {
        self.nfa = nfa
        self.budget = budget
        var acc = [Bool](repeating: false, count: nfa.count)
        for a in accepting where Int(a) < nfa.count { acc[Int(a)] = true }
        isAccepting = acc
        var abs = [Bool](repeating: false, count: nfa.count)
        for a in nfa.absorbing where Int(a) < nfa.count { abs[Int(a)] = true }
        isAbsorbing = abs
        hasAbsorbing = !nfa.absorbing.isEmpty
        mark = [Int32](repeating: 0, count: nfa.count)
    }

    /// The ε-closure of the states on `stack` into `members`, sorted. A set holding an absorbing
    /// state stands for its absorbing members only (see ``NFA/absorbing``).
    mutating func close() {
        closeRaw()
        if hasAbsorbing, members.contains(where: { isAbsorbing[Int($0)] }) {
            for m in members where isAbsorbing[Int(m)] { stack.append(m) }
            closeRaw()
        }
        SubsetConstruction.sortSmall(&members)
    }

    mutating func closeRaw() {
        stamp &+= 1
        members.removeAll(keepingCapacity: true)
        while let s = stack.popLast() {
            if mark[Int(s)] == stamp { continue }
            mark[Int(s)] = stamp
            members.append(s)
            stack.append(contentsOf: nfa.eps[Int(s)])
        }
    }

    static func sortSmall(_ a: inout [Int32]) {
        if a.count > 24 { a.sort(); return }
        a.withUnsafeMutableBufferPointer { p in
            for i in 1..<max(p.count, 1) {
                let x = p[i]
                var j = i
                while j > 0 && p[j - 1] > x { p[j] = p[j - 1]; j -= 1 }
                p[j] = x
            }
        }
    }

    /// The DFA state for the set in `members`, added (and queued) when new.
    mutating func intern() throws(GrammarError) -> Int32 {
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 &* UInt64(members.count &+ 1)
        for m in members { h = (h ^ UInt64(UInt32(bitPattern: m))) &* 0x100_0000_01B3; h ^= h >> 29 }
        let mask = table.count - 1
        var slot = Int(truncatingIfNeeded: h) & mask
        while true {
            let id = Int(table[slot])
            if id < 0 { break }
            if hashes[id] == h && equalsMembers(id) { return Int32(id) }
            slot = (slot + 1) & mask
        }
        if dfa.count >= budget { throw .budgetExceeded("an automaton needs more than \(budget) states") }
        let id = dfa.add(accepting: members.contains { isAccepting[Int($0)] })
        pool.append(contentsOf: members)
        starts.append(pool.count)
        hashes.append(h)
        table[slot] = id
        if hashes.count * 2 > table.count { grow() }
        return id
    }

    func equalsMembers(_ id: Int) -> Bool {
        let lo = starts[id], hi = starts[id + 1]
        guard hi - lo == members.count else { return false }
        var k = 0
        for i in lo..<hi { if pool[i] != members[k] { return false }; k += 1 }
        return true
    }

    mutating func grow() {
        table = [Int32](repeating: -1, count: table.count * 2)
        let mask = table.count - 1
        for (id, h) in hashes.enumerated() {
            var slot = Int(truncatingIfNeeded: h) & mask
            while table[slot] >= 0 { slot = (slot + 1) & mask }
            table[slot] = Int32(id)
        }
    }

    mutating func run(start: Int32) throws(GrammarError) {
        stack.append(start)
        close()
        _ = try intern()
        var cursor = 0
        while cursor < dfa.count {
            try expand(cursor)
            cursor += 1
        }
    }

    /// The byte and call moves of DFA state `from`.
    mutating func expand(_ from: Int) throws(GrammarError) {
        let lo0 = starts[from], hi0 = starts[from + 1]
        edges.removeAll(keepingCapacity: true)
        var anyCalls = false
        for i in lo0..<hi0 {
            let s = Int(pool[i])
            edges.append(contentsOf: nfa.edges[s])
            if !nfa.calls[s].isEmpty { anyCalls = true }
        }
        if !edges.isEmpty { try byteMoves(from) }
        guard anyCalls else { return }
        callPairs.removeAll(keepingCapacity: true)
        for i in lo0..<hi0 { callPairs.append(contentsOf: nfa.calls[Int(pool[i])]) }
        // One edge per rule, in order of first appearance, to the closure of all its returns.
        var callOut: [CallEdge] = []
        for (k, c) in callPairs.enumerated() where !callPairs[..<k].contains(where: { $0.rule == c.rule }) {
            for d in callPairs[k...] where d.rule == c.rule { stack.append(d.to) }
            close()
            callOut.append(CallEdge(rule: c.rule, to: try intern()))
        }
        dfa.calls[from] = callOut
    }

    /// Splits 0...255 at every range boundary of the gathered edges and sweeps the pieces.
    mutating func byteMoves(_ from: Int) throws(GrammarError) {
        // Cut points as a 257-bit set (bit 256: past the last byte).
        var cuts: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &cuts) { raw in
            let w = raw.bindMemory(to: UInt64.self)
            for e in edges {
                w[Int(e.lo) >> 6] |= 1 << (UInt64(e.lo) & 63)
                let h = Int(e.hi) + 1
                w[h >> 6] |= 1 << (UInt64(h) & 63)
            }
        }
        SubsetConstruction.sortByLow(&edges)
        out.removeAll(keepingCapacity: true)
        active.removeAll(keepingCapacity: true)
        var nextEdge = 0
        var lo = -1
        var word = 0
        var bits = cuts.0
        while true {
            // The next cut point after `lo`.
            while bits == 0 && word < 4 {
                word += 1
                bits = word == 1 ? cuts.1 : word == 2 ? cuts.2 : word == 3 ? cuts.3 : cuts.4
            }
            if bits == 0 { break }
            let p = word * 64 + bits.trailingZeroBitCount
            bits &= bits - 1
            if lo >= 0 { try piece(lo, p - 1) }
            if p > 255 { break }
            lo = p
            // Ranges that ended before `lo` leave; those starting at or before it enter.
            var k = 0
            while k < active.count {
                if Int(edges[active[k]].hi) < lo { active[k] = active[active.count - 1]; active.removeLast() } else { k += 1 }
            }
            while nextEdge < edges.count && Int(edges[nextEdge].lo) <= lo { active.append(nextEdge); nextEdge += 1 }
        }
        dfa.trans[from] = out
    }

    /// The move on bytes `lo...hi`, which every active edge covers whole.
    mutating func piece(_ lo: Int, _ hi: Int) throws(GrammarError) {
        if active.isEmpty { return }
        for k in active { stack.append(edges[k].to) }
        close()
        let t = try intern()
        if let last = out.last, last.to == t, Int(last.hi) + 1 == lo {
            out[out.count - 1].hi = UInt8(hi)
        } else {
            out.append(ByteEdge(lo: UInt8(lo), hi: UInt8(hi), to: t))
        }
    }

    static func sortByLow(_ a: inout [ByteEdge]) {
        if a.count > 24 { a.sort { $0.lo < $1.lo }; return }
        a.withUnsafeMutableBufferPointer { p in
            for i in 1..<max(p.count, 1) {
                let x = p[i]
                var j = i
                while j > 0 && p[j - 1].lo > x.lo { p[j] = p[j - 1]; j -= 1 }
                p[j] = x
            }
        }
    }

    /// The NFA states DFA state `i` stands for.
    func members(of i: Int32) -> ArraySlice<Int32> { pool[starts[Int(i)]..<starts[Int(i) + 1]] }
}
