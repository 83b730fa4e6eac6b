import Synchronization
/// Where in a JSON value the decoder is: one step of the path from the root value to the
/// value being generated.
public enum JSONPathComponent: Sendable, Hashable, CustomStringConvertible {
    /// The value of a declared property.
    case property(String)
    /// The value of a property not declared in the schema (allowed by `additionalProperties`).
    case additionalProperty
    /// An array element, by position.
    case element(Int)

    public var description: String {
        switch self {
        case .property(let name): return "." + name
        case .additionalProperty: return ".*"
        case .element(let i): return "[\(i)]"
        }
    }
}

/// A context-free grammar over bytes, in its executable form: a set of rules, each a
/// deterministic automaton whose states may call other rules (a recursive transition network).
///
/// Every state can reach completion (non-productive rules and dead states are removed when the
/// grammar is built), so a configuration that has consumed a prefix can always be completed: the
/// property that makes token masks exact rather than optimistic.
final class Grammar: Sendable {
    /// Byte classes, per rule: `classMaps[classMapOf[state] + byte]` is the byte's class in the
    /// state's rule. Each rule has its own classes, so that a large leaf automaton with few
    /// classes (a length-bounded email, say) keeps a small table however finely the other rules
    /// split the bytes.
    let classMaps: [UInt8]
    let classMapOf: [Int32]
    /// `next[rowOf[state] + class]`: the target state, or -1; states with at most one byte edge
    /// have no row (`rowOf` -1) and their edge in `single` (see ``RuleTable``).
    let next: [Int32]
    let rowOf: [Int32]
    let single: [ByteEdge]
    let accepting: [Bool]
    let hasBytes: [Bool]
    let callStart: [Int32]
    let callRule: [Int32]
    let callReturn: [Int32]
    let ruleOf: [Int32]
    let ruleStart: [Int32]
    /// Per state: ``boundary`` in counted string rules where a character starts or the closing
    /// quote comes, ``tabled`` in rules counted against a table (one load tells a step of any
    /// other rule that counts don't concern it).
    let countFlags: [UInt8]
    static let boundary: UInt8 = 1, tabled: UInt8 = 2
    let ruleMinCount: [Int32]
    /// -1: unbounded; otherwise the maximum number of characters.
    let ruleMaxCount: [Int32]
    let ruleIsCounted: [Bool]
    /// Counted patterns and formats (``CountTable``): each rule's table in `countNeed` from
    /// `ruleCountBase` (-1 for other rules), `ruleCountWidth` counts to a state.
    let countNeed: [Int32]
    let ruleCountBase: [Int32]
    let ruleCountWidth: [Int32]
    /// Whether a rule has no call edges (its frames only ever pop).
    let ruleIsLeaf: [Bool]
    let returnLabel: [Int32]
    /// Whether a state can leave its rule (accepting, or with calls).
    let isExit: [Bool]
    /// The automaton of each leaf rule (nil for rules with calls): the key under which its
    /// token masks are shared by every grammar compiled for a vocabulary.
    let leafDFA: [DFA?]
    /// The builder's name for each leaf automaton, when it has one (a cheaper key than the
    /// automaton itself; see ``GrammarBuilder/leaf(_:pointer:counted:_:)``).
    let leafKeys: [String?]
    let labels: [JSONPathComponent]
    let root: Int32
    let stateCount: Int

    init(builder b: GrammarBuilder, root: Int32, pointer: String) throws(GrammarError) {
        let n = b.rules.count
        // 1. Productivity fixpoint. A shared leaf is trimmed and has no calls: it is productive
        // when it accepts anything at all.
        var productive = [Bool](repeating: false, count: n)
        var settled = [Bool](repeating: false, count: n)
        for r in 0..<n {
            guard let shared = b.rules[r].shared else { continue }
            settled[r] = true
            if let c = b.rules[r].counted, c.min > c.max && c.max >= 0 { continue }
            if let t = shared.counts, !t.admitsAny { continue }
            productive[r] = shared.dfa.accepting.contains(true)
        }
        var changed = true
        while changed {
            changed = false
            for r in 0..<n where !productive[r] && !settled[r] {
                guard let dfa = b.rules[r].dfa else { continue }
                if let c = b.rules[r].counted, c.min > c.max && c.max >= 0 { continue }
                var seen = [Bool](repeating: false, count: dfa.count)
                var stack: [Int32] = [0]
                seen[0] = true
                var ok = false
                while let s = stack.popLast() {
                    if dfa.accepting[Int(s)] { ok = true; break }
                    for e in dfa.trans[Int(s)] where !seen[Int(e.to)] { seen[Int(e.to)] = true; stack.append(e.to) }
                    for c in dfa.calls[Int(s)] where productive[Int(c.rule)] && !seen[Int(c.to)] {
                        seen[Int(c.to)] = true; stack.append(c.to)
                    }
                }
                if ok { productive[r] = true; changed = true }
            }
        }
        guard productive[Int(root)] else { throw .emptyLanguage(pointer: pointer) }
        // 2. Drop calls to empty rules, trim, and keep the rules reachable from the root.
        var dfas = [DFA?](repeating: nil, count: n)
        var newId = [Int32](repeating: -1, count: n)
        var order: [Int32] = [root]
        newId[Int(root)] = 0
        var i = 0
        while i < order.count {
            let r = Int(order[i]); i += 1
            if let shared = b.rules[r].shared { dfas[r] = shared.dfa; continue }
            var d = b.rules[r].dfa!
            var labelsByState: [Int32: Int32] = [:]
            for s in 0..<d.count where d.calls[s].contains(where: { !productive[Int($0.rule)] }) {
                d.calls[s] = d.calls[s].filter { productive[Int($0.rule)] }
            }
            // Carry return labels through trimming by tagging states before renumbering.
            for (s, l) in b.rules[r].returnLabels { labelsByState[s] = l }
            let before = d
            d = d.trimmed()
            if d.count != before.count { labelsByState = Grammar.remapLabels(labelsByState, from: before, to: d) }
            dfas[r] = d
            b.rules[r].returnLabels = labelsByState
            for s in 0..<d.count {
                for c in d.calls[s] where newId[Int(c.rule)] < 0 {
                    newId[Int(c.rule)] = Int32(order.count); order.append(c.rule)
                }
            }
        }
        // 3. Left recursion: a rule that can call itself before consuming a byte.
        for r in order {
            var seen = Set<Int32>()
            var stack = dfas[Int(r)]!.calls[0].map(\.rule)
            while let s = stack.popLast() {
                if s == r { throw .leftRecursion(pointer: b.rules[Int(r)].pointer) }
                if !seen.insert(s).inserted { continue }
                stack += dfas[Int(s)]!.calls[0].map(\.rule)
                if dfas[Int(s)]!.accepting[0] { throw .leftRecursion(pointer: b.rules[Int(s)].pointer) }
            }
            if dfas[Int(r)]!.accepting[0] { throw .invalidSchema(reason: "a rule matches the empty string", pointer: b.rules[Int(r)].pointer) }
        }
        // 4. Lay out all states globally from the rules' tables (targets offset by the rule's
        // first state); byte classes stay per rule.
        var total = 0, entries = 0
        var offset = [Int32](repeating: 0, count: n)
        var tables: [RuleTable] = []
        for r in order {
            offset[Int(r)] = Int32(total)
            total += dfas[Int(r)]!.count
            let table = b.rules[Int(r)].shared?.table ?? RuleTable(dfas[Int(r)]!)
            entries += table.next.count
            tables.append(table)
        }
        var classMaps: [UInt8] = []
        var classMapOf = [Int32](repeating: 0, count: total)
        var rowOf = [Int32](repeating: -1, count: total)
        var single = [ByteEdge](repeating: RuleTable.noEdge, count: total)
        var next = [Int32](repeating: -1, count: entries)
        var rowBase = 0
        var accepting = [Bool](repeating: false, count: total)
        var hasBytes = [Bool](repeating: false, count: total)
        var ruleOf = [Int32](repeating: 0, count: total)
        var countFlags = [UInt8](repeating: 0, count: total)
        var returnLabel = [Int32](repeating: -1, count: total)
        var callStart = [Int32](repeating: 0, count: total + 1)
        var callRule: [Int32] = [], callReturn: [Int32] = []
        var ruleStart: [Int32] = [], minC: [Int32] = [], maxC: [Int32] = [], counted: [Bool] = [], leaf: [Bool] = []
        var countNeed: [Int32] = [], countBase: [Int32] = [], countWidth: [Int32] = []
        var leafDFAs: [DFA?] = [], leafKeys: [String?] = []
        for (nr, r) in order.enumerated() {
            let d = dfas[Int(r)]!
            let rule = b.rules[Int(r)]
            let table = tables[nr]
            let base = Int(offset[Int(r)])
            let map = Int32(classMaps.count)
            classMaps += table.classOf
            next.withUnsafeMutableBufferPointer { out in
                table.next.withUnsafeBufferPointer { src in
                    for k in 0..<src.count where src[k] >= 0 { out[rowBase + k] = src[k] &+ Int32(base) }
                }
            }
            ruleStart.append(Int32(base))
            counted.append(rule.counted != nil)
            minC.append(Int32(rule.counted?.min ?? 0))
            maxC.append(Int32(rule.counted?.max ?? -1))
            // The per-state fields in bulk: a grammar's states are mostly its leaves' (thousands
            // for a large key set or a length-bounded pattern), copied at every compilation.
            let count = d.count, states = base..<(base + count), rowBase32 = Int32(rowBase), base32 = Int32(base)
            Grammar.fill(&ruleOf, states, Int32(nr))
            Grammar.fill(&classMapOf, states, map)
            Grammar.copy(table.accepting, into: &accepting, at: base)
            Grammar.copy(table.hasBytes, into: &hasBytes, at: base)
            rowOf.withUnsafeMutableBufferPointer { rowOut in
                single.withUnsafeMutableBufferPointer { singleOut in
                    table.rowOf.withUnsafeBufferPointer { rows in
                        table.single.withUnsafeBufferPointer { edges in
                            for s in 0..<count {
                                if rows[s] >= 0 {
                                    rowOut[base + s] = rowBase32 + rows[s]
                                } else if edges[s].to >= 0 {
                                    singleOut[base + s] = ByteEdge(lo: edges[s].lo, hi: edges[s].hi, to: edges[s].to + base32)
                                }
                            }
                        }
                    }
                }
            }
            var isLeaf = true
            if rule.shared != nil {
                Grammar.fill(&callStart, states, Int32(callRule.count))
            } else {
                for s in 0..<count {
                    callStart[base + s] = Int32(callRule.count)
                    for cl in d.calls[s] {
                        isLeaf = false
                        callRule.append(newId[Int(cl.rule)])
                        callReturn.append(base32 + cl.to)
                    }
                }
            }
            rowBase += table.next.count
            leaf.append(isLeaf)
            leafDFAs.append(isLeaf ? d : nil)
            leafKeys.append(isLeaf ? rule.leafKey : nil)
            if let t = rule.shared?.counts {
                countBase.append(Int32(countNeed.count))
                countWidth.append(Int32(t.width))
                countNeed += t.need
                for (s, on) in t.boundary.enumerated() { countFlags[base + s] = Grammar.tabled | (on ? Grammar.boundary : 0) }
            } else {
                countBase.append(-1)
                countWidth.append(0)
                if rule.counted != nil { countFlags[base + 1] = Grammar.boundary }
            }
            for (s, l) in rule.returnLabels where Int(s) < d.count { returnLabel[base + Int(s)] = l }
        }
        callStart[total] = Int32(callRule.count)
        self.classMaps = classMaps
        self.classMapOf = classMapOf
        self.next = next
        self.rowOf = rowOf
        self.single = single
        self.accepting = accepting
        self.hasBytes = hasBytes
        self.callStart = callStart
        self.callRule = callRule
        self.callReturn = callReturn
        self.ruleOf = ruleOf
        self.ruleStart = ruleStart
        self.countFlags = countFlags
        self.ruleMinCount = minC
        self.ruleMaxCount = maxC
        self.ruleIsCounted = counted
        self.countNeed = countNeed
        self.ruleCountBase = countBase
        self.ruleCountWidth = countWidth
        self.ruleIsLeaf = leaf
        self.returnLabel = returnLabel
        self.leafDFA = leafDFAs
        self.leafKeys = leafKeys
        self.isExit = (0..<total).map { accepting[$0] || callStart[$0] != callStart[$0 + 1] }
        self.labels = b.labels
        self.root = 0
        self.stateCount = total
    }

    static func fill<T>(_ array: inout [T], _ range: Range<Int>, _ value: T) {
        array.withUnsafeMutableBufferPointer { UnsafeMutableBufferPointer(rebasing: $0[range]).update(repeating: value) }
    }

    static func copy<T>(_ source: [T], into array: inout [T], at start: Int) {
        array.withUnsafeMutableBufferPointer { out in
            source.withUnsafeBufferPointer { src in
                _ = UnsafeMutableBufferPointer(rebasing: out[start..<(start + src.count)]).update(fromContentsOf: src)
            }
        }
    }

    /// Maps state labels of `old` onto `new` (after trimming) by walking both from the start.
    static func remapLabels(_ labels: [Int32: Int32], from old: DFA, to new: DFA) -> [Int32: Int32] {
        var map = [Int32](repeating: -1, count: new.count)
        var stack: [(Int32, Int32)] = [(0, 0)]
        map[0] = 0
        while let (o, nw) = stack.popLast() {
            for e in new.trans[Int(nw)] {
                let ot = old.next(o, e.lo)
                if ot >= 0, map[Int(e.to)] < 0 { map[Int(e.to)] = ot; stack.append((ot, e.to)) }
            }
            for c in new.calls[Int(nw)] {
                if let oc = old.calls[Int(o)].first(where: { $0.rule == c.rule }), map[Int(c.to)] < 0 {
                    map[Int(c.to)] = oc.to; stack.append((oc.to, c.to))
                }
            }
        }
        var out: [Int32: Int32] = [:]
        for (s, o) in map.enumerated() where o >= 0 { if let l = labels[o] { out[Int32(s)] = l } }
        return out
    }

    /// For a rule counted against a ``CountTable``: the fewest bytes that finish it from
    /// `state` with `count` characters read (``CountTable/unreachable`` when none can); nil for
    /// other rules.
    @inline(__always) func countNeed(rule r: Int, state: Int32, count: Int32) -> Int32? {
        guard let table = countTable(rule: r) else { return nil }
        return countNeed.withUnsafeBufferPointer { table.need($0, state: state, count: count) }
    }

    /// Where rule `r`'s table lies in `countNeed` (nil: the rule has none), for a reader that
    /// looks up many (state, count) pairs of one rule, such as a mask's walk of the token trie.
    @inline(__always) func countTable(rule r: Int) -> RuleCountTable? {
        let base = Int(ruleCountBase[r])
        if base < 0 { return nil }
        return RuleCountTable(base: base, width: Int(ruleCountWidth[r]), start: ruleStart[r], maxCount: ruleMaxCount[r])
    }

    @inline(__always) func step(_ s: Int32, _ byte: UInt8) -> Int32 {
        let row = rowOf[Int(s)]
        if row >= 0 { return next[Int(row) &+ Int(classMaps[Int(classMapOf[Int(s)]) &+ Int(byte)])] }
        let e = single[Int(s)]
        return byte >= e.lo && byte <= e.hi ? e.to : -1
    }
}

/// Collects rules while a schema or regular expression is compiled.
final class GrammarBuilder {
    struct Rule {
        var dfa: DFA?
        var counted: (min: Int, max: Int)?
        var pointer: String
        /// DFA state → label index for states that are return points of labelled calls.
        var returnLabels: [Int32: Int32] = [:]
        /// The key of a shared leaf automaton (``leaf(_:pointer:counted:_:)``) and the leaf.
        var leafKey: String? = nil
        var shared: SharedLeaf? = nil
    }
    var rules: [Rule] = []
    var labels: [JSONPathComponent] = []
    var labelIndex: [JSONPathComponent: Int32] = [:]
    var leafCache: [ExactString: Int32] = [:]
    var totalStates = 0
    let stateBudget: Int
    let deadline: ContinuousClock.Instant?
    /// Scratch memory of the last subset construction, for the next rule's.
    var subsetScratch: SubsetConstruction.Scratch?
    let timeLimit: Double

    init(stateBudget: Int, timeLimit: Double?) {
        self.stateBudget = stateBudget
        self.timeLimit = timeLimit ?? 0
        self.deadline = timeLimit.map { ContinuousClock.now + .milliseconds(Int($0 * 1000)) }
    }

    func checkLimits() throws(GrammarError) {
        if totalStates > stateBudget { throw .budgetExceeded("more than \(stateBudget) automaton states") }
        if let d = deadline, ContinuousClock.now > d { throw .timeout(seconds: timeLimit) }
    }

    func label(_ l: JSONPathComponent) -> Int32 {
        if let i = labelIndex[l] { return i }
        labels.append(l)
        labelIndex[l] = Int32(labels.count - 1)
        return Int32(labels.count - 1)
    }

    func reserve(pointer: String) -> Int32 {
        rules.append(Rule(dfa: nil, counted: nil, pointer: pointer))
        return Int32(rules.count - 1)
    }

    func define(_ rule: Int32, _ dfa: DFA, counted: (min: Int, max: Int)? = nil, returnLabels: [Int32: Int32] = [:],
                leafKey: String? = nil, shared: SharedLeaf? = nil) throws(GrammarError) {
        rules[Int(rule)].dfa = dfa
        rules[Int(rule)].counted = counted
        rules[Int(rule)].returnLabels = returnLabels
        rules[Int(rule)].leafKey = leafKey
        rules[Int(rule)].shared = shared
        totalStates += dfa.count
        try checkLimits()
    }

    /// A rule for a call-free automaton, shared by every use with the same `key`. A `counted`
    /// rule is the plain string automaton with its characters counted.
    /// `alreadyTrim`: `make` returns an automaton without dead states (the trimming pass is skipped).
    func leaf(_ key: String, pointer: String, counted: (min: Int, max: Int)? = nil, alreadyTrim: Bool = false,
              _ make: () throws(GrammarError) -> DFA) throws(GrammarError) -> Int32 {
        if let r = leafCache[ExactString(key)] { return r }
        return try leaf(key, pointer: pointer, counted: counted, try GrammarBuilder.sharedLeaf(key, alreadyTrim: alreadyTrim, make))
    }

    /// A rule for the shared leaf `shared`, named `key`.
    func leaf(_ key: String, pointer: String, counted: (min: Int, max: Int)?, _ shared: SharedLeaf) throws(GrammarError) -> Int32 {
        if let r = leafCache[ExactString(key)] { return r }
        let r = reserve(pointer: pointer)
        try define(r, shared.dfa, counted: counted, leafKey: key, shared: shared)
        leafCache[ExactString(key)] = r
        return r
    }

    /// The shared leaf for `key`, made (and trimmed, so that grammars can take it as it is) on
    /// first use.
    static func sharedLeaf(_ key: String, alreadyTrim: Bool = false, _ make: () throws(GrammarError) -> DFA) throws(GrammarError) -> SharedLeaf {
        try sharedLeaf(key, leaf: { () throws(GrammarError) -> SharedLeaf in
            let made = try make()
            return SharedLeaf(alreadyTrim ? made : made.trimmed())
        })
    }

    /// The shared leaf for `key`, made on first use.
    static func sharedLeaf(_ key: String, leaf make: () throws(GrammarError) -> SharedLeaf) throws(GrammarError) -> SharedLeaf {
        if let l = sharedLeaves.withLock({ $0[ExactString(key)] }) { return l }
        let shared = try make()
        sharedLeaves.withLock { c in
            if c.count >= sharedLeafCapacity { c.removeAll(keepingCapacity: true) }
            c[ExactString(key)] = shared
        }
        return shared
    }

    /// Leaf automata by key, shared by every compilation in the process: a leaf is a pure
    /// function of its key (strings, numbers, literals, formats), and the same ones recur
    /// across schemas. Bounded; emptied when full.
    static let sharedLeaves = Mutex<[ExactString: SharedLeaf]>([:])
    static let sharedLeafCapacity = 4096

    /// Builds a rule from an NFA with calls; `labels` maps NFA call targets to path labels.
    func rule(_ nfa: NFA, start: Int32, accept: Int32, pointer: String, into reserved: Int32? = nil,
              callLabels: [Int32: Int32] = [:]) throws(GrammarError) -> Int32 {
        let r = reserved ?? reserve(pointer: pointer)
        let (dfa, sets) = try DFA.determinizeWithSets(nfa, start: start, accepting: [accept], budget: max(stateBudget - totalStates, 16),
                                                      reusing: subsetScratch)
        subsetScratch = sets.scratch
        var returnLabels: [Int32: Int32] = [:]
        if !callLabels.isEmpty {
            // A return state takes the label of its lowest labelled NFA state.
            var labelOf = [Int32](repeating: -1, count: nfa.count)
            for (m, l) in callLabels where Int(m) < nfa.count { labelOf[Int(m)] = l }
            for s in 0..<dfa.count {
                for c in dfa.calls[s] where returnLabels[c.to] == nil {
                    var best: Int32 = -1
                    for m in sets.members(of: c.to) where labelOf[Int(m)] >= 0 && (best < 0 || m < best) { best = m }
                    if best >= 0 { returnLabels[c.to] = labelOf[Int(best)] }
                }
            }
        }
        try define(r, dfa, returnLabels: returnLabels)
        return r
    }
}

/// One rule's slice of ``Grammar/countNeed``: the fewest bytes that finish the rule from a state
/// with a count of characters read (``CountTable``), counts past the width sharing the last column.
struct RuleCountTable {
    let base: Int, width: Int
    let start: Int32, maxCount: Int32

    @inline(__always) func need(_ table: UnsafeBufferPointer<Int32>, state: Int32, count: Int32) -> Int32 {
        if maxCount >= 0 && count > maxCount { return CountTable.unreachable }
        return table[base + Int(state - start) * width + min(Int(count), width - 1)]
    }
}
