/// A rule's byte transitions laid out for the matcher: the rule's own byte classes and one dense
/// row of targets per state (numbered within the rule, -1 for none).
///
/// A grammar is assembled from these; the tables of leaf automata are built once with the leaf
/// and shared by every compilation that uses it, so a large leaf (a length-bounded email, say)
/// costs a copy, not a walk over its edges, each time it recurs.
struct RuleTable: Sendable {
    /// The class of each byte.
    let classOf: [UInt8]
    let classCount: Int
    /// `next[state * classCount + class]`.
    let next: [Int32]
    let accepting: [Bool]
    let hasBytes: [Bool]
    let count: Int

    init(_ d: DFA) {
        // Cut 0...255 at every range boundary of the rule's edges (a 257-bit set).
        var cuts = [UInt64](repeating: 0, count: 5)
        cuts[0] = 1
        cuts[4] = 1
        for row in d.trans {
            for e in row {
                cuts[Int(e.lo) >> 6] |= 1 << (UInt64(e.lo) & 63)
                let h = Int(e.hi) + 1
                cuts[h >> 6] |= 1 << (UInt64(h) & 63)
            }
        }
        // Classes run from one cut to the next; `representative[k]` is class k's first byte.
        var representative: [Int] = []
        for w in 0..<4 {
            var bits = cuts[w]
            while bits != 0 { representative.append(w * 64 + bits.trailingZeroBitCount); bits &= bits - 1 }
        }
        let nc = representative.count
        var classOf = [UInt8](repeating: 0, count: 256)
        for k in 1..<max(nc, 1) {
            for byte in representative[k]..<(k + 1 < nc ? representative[k + 1] : 256) { classOf[byte] = UInt8(k) }
        }
        var next = [Int32](repeating: -1, count: d.count * nc)
        var hasBytes = [Bool](repeating: false, count: d.count)
        for (s, row) in d.trans.enumerated() {
            hasBytes[s] = !row.isEmpty
            for e in row {
                var k = Int(classOf[Int(e.lo)])
                while k < nc && representative[k] <= Int(e.hi) {
                    next[s * nc + k] = e.to
                    k += 1
                }
            }
        }
        self.classOf = classOf
        classCount = nc
        self.next = next
        accepting = d.accepting
        self.hasBytes = hasBytes
        count = d.count
    }
}

/// A leaf automaton shared by every compilation in the process, with its laid-out table.
final class SharedLeaf: Sendable {
    let dfa: DFA
    let table: RuleTable

    init(_ dfa: DFA) {
        self.dfa = dfa
        table = RuleTable(dfa)
    }
}
