/// A string automaton with its characters counted in the matcher's frame instead of in its
/// states: for a pattern or format under `minLength`/`maxLength`. The product of a pattern with
/// a character counter has a state per (pattern state, count), 13,000 of them for
/// `[a-zA-Z0-9_.-]+` of 3...255 characters, each built, trimmed and laid out at every cold
/// compilation; this keeps the pattern's 53 states and one integer per pair instead.
///
/// `need[s * width + c]` is the fewest bytes that finish the string from state `s` with `c`
/// characters read, or ``unreachable`` when no continuation meets the bounds. A step is taken
/// only into a pair that can still finish, so that the decoder never enters a dead end (the
/// product's trimming did the same), and the table is the rule's exact completion distance.
struct CountTable: Sendable {
    let width: Int
    let minCount: Int
    /// -1: unbounded (counts from `minCount` on are all alike and stored at `minCount`).
    let maxCount: Int
    let need: [Int32]
    /// States where a character starts or the closing quote comes.
    let boundary: [Bool]

    static let unreachable = Int32.max / 4

    /// Whether any string meets the bounds (the start, with no characters read, can finish).
    /// The matcher reads the table through ``Grammar/countNeed(rule:state:count:)``.
    var admitsAny: Bool { need[0] < Self.unreachable }

    /// The table for `strings` (a trim automaton of JSON strings, quotes included), or nil when
    /// its states do not each sit at one position of the string's characters (then the product
    /// is the way) or the table would exceed `budget` entries.
    init?(_ strings: DFA, minCount: Int, maxCount: Int?, budget: Int) {
        let n = strings.count
        let cap = maxCount ?? minCount
        // (Bounds come from the schema: up to 18 digits. Divided, so that the test can't overflow.)
        guard cap < budget / max(n, 1), let boundary = CountTable.boundaries(strings),
              let order = CountTable.sameCountOrder(strings, boundary) else { return nil }
        width = cap + 1
        self.minCount = minCount
        self.maxCount = maxCount ?? -1
        self.boundary = boundary
        let inf = Self.unreachable
        var need = [Int32](repeating: inf, count: n * width)
        // Counts only grow, so columns are filled from the last; within one, the edges that
        // keep the count (inside a character, and the closing quote) form an acyclic graph,
        // swept in reverse topological order. An unbounded last column also keeps its count on
        // characters: it is relaxed until it settles.
        for c in stride(from: cap, through: 0, by: -1) {
            let next = maxCount == nil ? min(c + 1, cap) : c + 1
            let counting = maxCount.map { c < $0 } ?? true
            var changed = true
            while changed {
                changed = false
                for s in order {
                    var best = strings.accepting[s] ? 0 : inf
                    for e in strings.trans[s] {
                        let t = Int(e.to)
                        if boundary[s] {
                            if e.lo <= 0x22 && 0x22 <= e.hi && c >= minCount { best = min(best, need[t * width + c] &+ 1) }
                            if counting && (e.lo != 0x22 || e.hi != 0x22) { best = min(best, need[t * width + next] &+ 1) }
                        } else {
                            best = min(best, need[t * width + c] &+ 1)
                        }
                    }
                    best = min(best, inf)
                    if best < need[s * width + c] { need[s * width + c] = best; changed = next == c }
                }
            }
        }
        self.need = need
    }

    /// Each state's place in a character: true where one starts (or the closing quote comes),
    /// from walking the automaton beside the plain string automaton, whose state 1 is that
    /// place. Nil when some state is reached at two places of the plain automaton.
    static func boundaries(_ d: DFA) -> [Bool]? {
        let plain = StringAutomata.plainString
        var plainOf = [Int32](repeating: -1, count: d.count)
        plainOf[0] = 0
        var stack: [Int32] = [0]
        while let s = stack.popLast() {
            let p = plainOf[Int(s)]
            for e in d.trans[Int(s)] {
                for b in e.lo...e.hi {
                    let q = plain.next(p, b)
                    if q < 0 { return nil }
                    if plainOf[Int(e.to)] < 0 {
                        plainOf[Int(e.to)] = q
                        stack.append(e.to)
                    } else if plainOf[Int(e.to)] != q {
                        return nil
                    }
                }
            }
            if !d.calls[Int(s)].isEmpty { return nil }
        }
        return plainOf.map { $0 == 1 }
    }

    /// The states with every target of a count-keeping edge before its source, or nil when
    /// those edges have a cycle.
    static func sameCountOrder(_ d: DFA, _ boundary: [Bool]) -> [Int]? {
        let n = d.count
        var mark = [UInt8](repeating: 0, count: n) // 0 new, 1 on the path, 2 done
        var order: [Int] = []
        order.reserveCapacity(n)
        func targets(_ s: Int) -> [Int] {
            d.trans[s].compactMap { e in
                !boundary[s] || (e.lo <= 0x22 && 0x22 <= e.hi) ? Int(e.to) : nil
            }
        }
        for root in 0..<n where mark[root] == 0 {
            var stack: [(Int, [Int], Int)] = [(root, targets(root), 0)]
            mark[root] = 1
            while !stack.isEmpty {
                let (s, ts, k) = stack[stack.count - 1]
                if k == ts.count {
                    mark[s] = 2
                    order.append(s)
                    stack.removeLast()
                    continue
                }
                stack[stack.count - 1].2 = k + 1
                let t = ts[k]
                if mark[t] == 1 { return nil }
                if mark[t] == 0 {
                    mark[t] = 1
                    stack.append((t, targets(t), 0))
                }
            }
        }
        return order
    }
}
