/// A rule's byte transitions laid out for the matcher (targets numbered within the rule, -1 for
/// none): a state with several byte edges gets a dense row over the rule's own byte classes; a
/// state with one edge or none keeps that edge inline. Most states of an object rule (the bytes
/// of its keys) and of a literal set have a single edge, so rows stay few and the table small:
/// a compilation allocates (and the kernel clears) less memory.
///
/// A grammar is assembled from these; the tables of leaf automata are built once with the leaf
/// and shared by every compilation that uses it, so a large leaf (a length-bounded email, say)
/// costs a copy, not a walk over its edges, each time it recurs.
struct RuleTable: Sendable {
    /// The class of each byte (cut at the edges of states with rows only).
    let classOf: [UInt8]
    let classCount: Int
    /// Per state: where its row starts in `next`, or -1 when it has at most one edge.
    let rowOf: [Int32]
    /// Per state without a row: its edge, or an empty range (`lo > hi`, `to` = -1).
    let single: [ByteEdge]
    /// Rows of `classCount` targets.
    let next: [Int32]
    let accepting: [Bool]
    let hasBytes: [Bool]
    let count: Int

    static let noEdge = ByteEdge(lo: 1, hi: 0, to: -1)

    init(_ d: DFA) {
        // Cut 0...255 at every range boundary of the edges of states with rows (a 257-bit set).
        var cuts = [UInt64](repeating: 0, count: 5)
        cuts[0] = 1
        cuts[4] = 1
        var rows = 0
        for row in d.trans where row.count > 1 {
            rows += 1
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
        var next = [Int32](repeating: -1, count: rows * nc)
        var rowOf = [Int32](repeating: -1, count: d.count)
        var single = [ByteEdge](repeating: RuleTable.noEdge, count: d.count)
        var hasBytes = [Bool](repeating: false, count: d.count)
        var at = 0
        for (s, row) in d.trans.enumerated() {
            hasBytes[s] = !row.isEmpty
            if row.count <= 1 {
                if let e = row.first { single[s] = e }
                continue
            }
            rowOf[s] = Int32(at)
            for e in row {
                var k = Int(classOf[Int(e.lo)])
                while k < nc && representative[k] <= Int(e.hi) {
                    next[at + k] = e.to
                    k += 1
                }
            }
            at += nc
        }
        self.classOf = classOf
        classCount = nc
        self.rowOf = rowOf
        self.single = single
        self.next = next
        accepting = d.accepting
        self.hasBytes = hasBytes
        count = d.count
    }
}

/// A leaf automaton shared by every compilation in the process, with its laid-out table, and
/// for strings counted in the frame, their count table.
final class SharedLeaf: Sendable {
    let dfa: DFA
    let table: RuleTable
    let counts: CountTable?

    init(_ dfa: DFA) {
        self.dfa = dfa
        table = RuleTable(dfa)
        counts = nil
    }

    /// `strings` again, its characters counted against `counts`.
    init(_ strings: SharedLeaf, counts: CountTable) {
        dfa = strings.dfa
        table = strings.table
        self.counts = counts
    }
}
