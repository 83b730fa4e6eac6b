/// The subset construction (NFA → DFA), written so that a DFA state costs no allocation beyond
/// its own edges: the NFA's arcs are grouped into compressed rows once, the NFA-state sets live
/// in one pool and are interned through an open-addressing table, and the closure, edge and
/// sweep buffers are raw scratch memory reused from state to state. Schema compilation spends
/// most of its time here (an object with a hundred optional properties makes thousands of sets,
/// some of a hundred states), so the constant factor matters.
struct SubsetConstruction {
    let budget: Int
    let nfaCount: Int
    /// The NFA's arcs grouped by state (compressed rows, in the order they were added).
    let epsStart: [Int32], epsTo: [Int32]
    let edgeStart: [Int32], edgeList: [ByteEdge]
    let callStart: [Int32], callList: [CallEdge]
    var dfa = DFA()
    /// The NFA states of DFA state `i` (in no particular order): `pool[starts[i]..<starts[i + 1]]`.
    var pool: [Int32] = []
    var starts: [Int] = [0]
    var hashes: [UInt64] = []
    /// Open addressing over `hashes`: a DFA state id, or -1.
    var table = [Int32](repeating: -1, count: 256)
    let isAccepting: [Bool]
    let isAbsorbing: [Bool]
    let hasAbsorbing: Bool
    var stamp: Int32 = 0
    let scratch: Scratch
    /// Sizes of the scratch arrays in use.
    var memberCount = 0, edgeCount = 0, outCount = 0

    /// Scratch memory sized for the worst case of one NFA: a closure holds each state once; its
    /// stack holds the seeds and each state's ε-targets once; a set's edges are at most all edges.
    /// A schema's rules are determinized one after another; the builder hands the scratch of one
    /// to the next (``fits(states:stack:edges:)``).
    final class Scratch {
        let mark: UnsafeMutablePointer<Int32>
        let members: UnsafeMutablePointer<Int32>
        let stack: UnsafeMutablePointer<Int32>
        let edges: UnsafeMutablePointer<ByteEdge>
        let sorted: UnsafeMutablePointer<ByteEdge>
        let active: UnsafeMutablePointer<Int32>
        let out: UnsafeMutablePointer<ByteEdge>
        let byteCount: UnsafeMutablePointer<Int32>
        let stateCapacity: Int, stackCapacity: Int, edgeCapacity: Int

        init(states: Int, stack stackSize: Int, edges e: Int) {
            stateCapacity = states
            stackCapacity = stackSize
            edgeCapacity = e
            mark = .allocate(capacity: max(states, 1))
            mark.initialize(repeating: 0, count: max(states, 1))
            members = .allocate(capacity: max(states, 1))
            stack = .allocate(capacity: stackSize)
            edges = .allocate(capacity: max(e, 1))
            sorted = .allocate(capacity: max(e, 1))
            active = .allocate(capacity: max(e, 1))
            // Pieces of one state's byte moves: at most 256 (merged when adjacent).
            out = .allocate(capacity: 512)
            byteCount = .allocate(capacity: 257)
        }

        func fits(states: Int, stack: Int, edges: Int) -> Bool {
            states <= stateCapacity && stack <= stackCapacity && edges <= edgeCapacity
        }

        deinit {
            mark.deallocate(); members.deallocate(); stack.deallocate(); edges.deallocate()
            sorted.deallocate(); active.deallocate(); out.deallocate(); byteCount.deallocate()
        }
    }

    init(_ nfa: NFA, accepting: Set<Int32>, budget: Int, reusing spare: Scratch? = nil) {
        self.budget = budget
        nfaCount = nfa.count
        (epsStart, epsTo) = SubsetConstruction.rows(nfa.count, nfa.epsFrom, nfa.epsTo, fill: 0)
        (edgeStart, edgeList) = SubsetConstruction.rows(nfa.count, nfa.edgeFrom, nfa.edgeList, fill: ByteEdge(lo: 0, hi: 0, to: 0))
        (callStart, callList) = SubsetConstruction.rows(nfa.count, nfa.callFrom, nfa.callList, fill: CallEdge(rule: 0, to: 0))
        var acc = [Bool](repeating: false, count: nfa.count)
        for a in accepting where Int(a) < nfa.count { acc[Int(a)] = true }
        isAccepting = acc
        hasAbsorbing = !nfa.absorbing.isEmpty
        var abs = [Bool](repeating: false, count: hasAbsorbing ? nfa.count : 0)
        for a in nfa.absorbing where Int(a) < nfa.count { abs[Int(a)] = true }
        isAbsorbing = abs
        let stackSize = nfa.count + nfa.epsTo.count + nfa.edgeList.count + nfa.callList.count + 1
        if let spare, spare.fits(states: nfa.count, stack: stackSize, edges: nfa.edgeList.count) {
            spare.mark.update(repeating: 0, count: nfa.count)
            scratch = spare
        } else {
            scratch = Scratch(states: nfa.count, stack: stackSize, edges: nfa.edgeList.count)
        }
    }

    /// Groups `items` by their state in `from` (a stable counting sort).
    static func rows<T>(_ n: Int, _ from: [Int32], _ items: [T], fill: T) -> ([Int32], [T]) {
        var start = [Int32](repeating: 0, count: n + 1)
        for f in from { start[Int(f) + 1] += 1 }
        for s in 0..<n { start[s + 1] += start[s] }
        var at = start
        var out = [T](repeating: fill, count: items.count)
        for (k, f) in from.enumerated() { out[Int(at[Int(f)])] = items[k]; at[Int(f)] += 1 }
        return (start, out)
    }

    /// The ε-closure of the `seeds` states on the stack into the members buffer, each marked
    /// with the current stamp. A set holding an absorbing state stands for its absorbing members
    /// only (see ``NFA/absorbing``). Sets are not sorted: they are interned by an order-free hash
    /// and compared through the marks.
    mutating func close(seeds: Int) {
        closeRaw(seeds: seeds)
        if hasAbsorbing {
            let m = scratch.members, st = scratch.stack
            var n = 0
            for i in 0..<memberCount where isAbsorbing[Int(m[i])] { st[n] = m[i]; n += 1 }
            if n > 0 { closeRaw(seeds: n) }
        }
    }

    mutating func closeRaw(seeds: Int) {
        stamp &+= 1
        let s = stamp
        let mark = scratch.mark, members = scratch.members, stack = scratch.stack
        var top = seeds, n = 0
        epsStart.withUnsafeBufferPointer { es in
            epsTo.withUnsafeBufferPointer { et in
                while top > 0 {
                    top -= 1
                    let q = Int(stack[top])
                    if mark[q] == s { continue }
                    mark[q] = s
                    members[n] = Int32(q)
                    n += 1
                    for k in Int(es[q])..<Int(es[q + 1]) { stack[top] = et[k]; top += 1 }
                }
            }
        }
        memberCount = n
    }

    /// The DFA state for the set in the members buffer, added (and queued) when new.
    mutating func intern() throws(GrammarError) -> Int32 {
        let members = scratch.members
        let n = memberCount
        // A sum of mixed members: the same for any order.
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 &* UInt64(n &+ 1)
        for i in 0..<n {
            var x = UInt64(UInt32(bitPattern: members[i])) &+ 0x9E37_79B9_7F4A_7C15
            x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
            x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
            h &+= x ^ (x >> 31)
        }
        let mask = table.count - 1
        var slot = Int(truncatingIfNeeded: h) & mask
        while true {
            let id = Int(table[slot])
            if id < 0 { break }
            if hashes[id] == h && equalsMembers(id) { return Int32(id) }
            slot = (slot + 1) & mask
        }
        if dfa.count >= budget { throw .budgetExceeded("an automaton needs more than \(budget) states") }
        var accepting = false
        for i in 0..<n where isAccepting[Int(members[i])] { accepting = true; break }
        let id = dfa.add(accepting: accepting)
        pool.append(contentsOf: UnsafeBufferPointer(start: members, count: n))
        starts.append(pool.count)
        hashes.append(h)
        table[slot] = id
        if hashes.count * 2 > table.count { grow() }
        return id
    }

    /// Whether DFA state `id` is the set just closed: as many members, each marked now.
    func equalsMembers(_ id: Int) -> Bool {
        let lo = starts[id], hi = starts[id + 1]
        guard hi - lo == memberCount else { return false }
        let mark = scratch.mark, s = stamp
        return pool.withUnsafeBufferPointer { p in
            for i in lo..<hi where mark[Int(p[i])] != s { return false }
            return true
        }
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
        scratch.stack[0] = start
        close(seeds: 1)
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
        let edges = scratch.edges
        var n = 0
        var anyCalls = false
        pool.withUnsafeBufferPointer { p in
            edgeStart.withUnsafeBufferPointer { es in
                edgeList.withUnsafeBufferPointer { el in
                    for i in lo0..<hi0 {
                        let s = Int(p[i])
                        for k in Int(es[s])..<Int(es[s + 1]) { edges[n] = el[k]; n += 1 }
                        if callStart[s] != callStart[s + 1] { anyCalls = true }
                    }
                }
            }
        }
        edgeCount = n
        if n > 0 { try byteMoves(from) }
        guard anyCalls else { return }
        // Calls in the order of their NFA states (so that the order of a state's call edges
        // doesn't depend on how its set was found).
        var callers: [Int32] = []
        for i in lo0..<hi0 where callStart[Int(pool[i])] != callStart[Int(pool[i]) + 1] { callers.append(pool[i]) }
        callers.sort()
        var callPairs: [CallEdge] = []
        for s in callers {
            for k in Int(callStart[Int(s)])..<Int(callStart[Int(s) + 1]) { callPairs.append(callList[k]) }
        }
        // One edge per rule, in order of first appearance, to the closure of all its returns.
        var callOut: [CallEdge] = []
        for (k, c) in callPairs.enumerated() where !callPairs[..<k].contains(where: { $0.rule == c.rule }) {
            var seeds = 0
            for d in callPairs[k...] where d.rule == c.rule { scratch.stack[seeds] = d.to; seeds += 1 }
            close(seeds: seeds)
            callOut.append(CallEdge(rule: c.rule, to: try intern()))
        }
        dfa.calls[from] = callOut
    }

    /// Splits 0...255 at every range boundary of the gathered edges and sweeps the pieces.
    mutating func byteMoves(_ from: Int) throws(GrammarError) {
        let n = edgeCount
        // Cut points as a 257-bit set (bit 256: past the last byte).
        var cuts: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        let edges = sortEdgesByLow()
        withUnsafeMutableBytes(of: &cuts) { raw in
            let w = raw.bindMemory(to: UInt64.self)
            for i in 0..<n {
                let e = edges[i]
                w[Int(e.lo) >> 6] |= 1 << (UInt64(e.lo) & 63)
                let h = Int(e.hi) + 1
                w[h >> 6] |= 1 << (UInt64(h) & 63)
            }
        }
        outCount = 0
        let active = scratch.active
        var activeCount = 0
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
            if lo >= 0 && activeCount > 0 {
                // The move on bytes lo...p-1, which every active edge covers whole.
                let stack = scratch.stack
                for k in 0..<activeCount { stack[k] = edges[Int(active[k])].to }
                close(seeds: activeCount)
                let t = try intern()
                let out = scratch.out
                if outCount > 0, out[outCount - 1].to == t, Int(out[outCount - 1].hi) + 1 == lo {
                    out[outCount - 1].hi = UInt8(p - 1)
                } else {
                    out[outCount] = ByteEdge(lo: UInt8(lo), hi: UInt8(p - 1), to: t)
                    outCount += 1
                }
            }
            if p > 255 { break }
            lo = p
            // Ranges that ended before `lo` leave; those starting at or before it enter.
            var k = 0
            while k < activeCount {
                if Int(edges[Int(active[k])].hi) < lo { activeCount -= 1; active[k] = active[activeCount] } else { k += 1 }
            }
            while nextEdge < n && Int(edges[nextEdge].lo) <= lo { active[activeCount] = Int32(nextEdge); activeCount += 1; nextEdge += 1 }
        }
        dfa.trans[from] = Array(UnsafeBufferPointer(start: scratch.out, count: outCount))
    }

    /// The gathered edges sorted by `lo`: insertion sort when few, else a counting sort on
    /// the byte (into the second edge buffer).
    func sortEdgesByLow() -> UnsafeMutablePointer<ByteEdge> {
        let n = edgeCount, e = scratch.edges
        if n <= 24 {
            for i in 1..<max(n, 1) {
                let x = e[i]
                var j = i
                while j > 0 && e[j - 1].lo > x.lo { e[j] = e[j - 1]; j -= 1 }
                e[j] = x
            }
            return e
        }
        let c = scratch.byteCount, out = scratch.sorted
        c.initialize(repeating: 0, count: 257)
        for i in 0..<n { c[Int(e[i].lo) + 1] += 1 }
        for i in 0..<256 { c[i + 1] += c[i] }
        for i in 0..<n { let b = Int(e[i].lo); out[Int(c[b])] = e[i]; c[b] += 1 }
        return out
    }

    /// The NFA states DFA state `i` stands for.
    func members(of i: Int32) -> ArraySlice<Int32> { pool[starts[Int(i)]..<starts[Int(i) + 1]] }
}
