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
    let classOf: [UInt8]
    let numClasses: Int
    /// `next[state * numClasses + class]`: the target state, or -1.
    let next: [Int32]
    let accepting: [Bool]
    let hasBytes: [Bool]
    let callStart: [Int32]
    let callRule: [Int32]
    let callReturn: [Int32]
    let ruleOf: [Int32]
    let ruleStart: [Int32]
    /// For counted string rules: the state where a character starts or the closing quote comes.
    let isBoundary: [Bool]
    let ruleMinCount: [Int32]
    /// -1: unbounded; otherwise the maximum number of characters.
    let ruleMaxCount: [Int32]
    let ruleIsCounted: [Bool]
    /// Whether a rule has no call edges (its frames only ever pop).
    let ruleIsLeaf: [Bool]
    let returnLabel: [Int32]
    /// Whether a state can leave its rule (accepting, or with calls).
    let isExit: [Bool]
    /// The automaton of each leaf rule (nil for rules with calls): the key under which its
    /// token masks are shared by every grammar compiled for a vocabulary.
    let leafDFA: [DFA?]
    let labels: [JSONPathComponent]
    let root: Int32
    let stateCount: Int

    init(builder b: GrammarBuilder, root: Int32, pointer: String) throws(GrammarError) {
        let n = b.rules.count
        // 1. Productivity fixpoint.
        var productive = [Bool](repeating: false, count: n)
        var changed = true
        while changed {
            changed = false
            for r in 0..<n where !productive[r] {
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
            var d = b.rules[r].dfa!
            var labelsByState: [Int32: Int32] = [:]
            for s in 0..<d.count {
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
        // 4. Lay out all states globally with shared byte classes.
        var cuts = Set<Int>([0, 256])
        var total = 0
        var offset = [Int32](repeating: 0, count: n)
        for r in order {
            offset[Int(r)] = Int32(total)
            let d = dfas[Int(r)]!
            total += d.count
            for s in 0..<d.count { for e in d.trans[s] { cuts.insert(Int(e.lo)); cuts.insert(Int(e.hi) + 1) } }
        }
        let points = cuts.sorted()
        var classOf = [UInt8](repeating: 0, count: 256)
        var representative: [Int] = []
        for k in 0..<(points.count - 1) {
            for byte in points[k]..<points[k + 1] { classOf[byte] = UInt8(k) }
            representative.append(points[k])
        }
        let nc = points.count - 1
        var next = [Int32](repeating: -1, count: total * nc)
        var accepting = [Bool](repeating: false, count: total)
        var hasBytes = [Bool](repeating: false, count: total)
        var ruleOf = [Int32](repeating: 0, count: total)
        var isBoundary = [Bool](repeating: false, count: total)
        var returnLabel = [Int32](repeating: -1, count: total)
        var callStart = [Int32](repeating: 0, count: total + 1)
        var callRule: [Int32] = [], callReturn: [Int32] = []
        var ruleStart: [Int32] = [], minC: [Int32] = [], maxC: [Int32] = [], counted: [Bool] = [], leaf: [Bool] = []
        var leafDFAs: [DFA?] = []
        for (nr, r) in order.enumerated() {
            let d = dfas[Int(r)]!
            let base = Int(offset[Int(r)])
            ruleStart.append(Int32(base))
            let c = b.rules[Int(r)].counted
            counted.append(c != nil)
            minC.append(Int32(c?.min ?? 0))
            maxC.append(Int32(c?.max ?? -1))
            var isLeaf = true
            for s in 0..<d.count {
                let g = base + s
                ruleOf[g] = Int32(nr)
                accepting[g] = d.accepting[s]
                hasBytes[g] = !d.trans[s].isEmpty
                for e in d.trans[s] {
                    var k = Int(classOf[Int(e.lo)])
                    while k < nc && representative[k] <= Int(e.hi) {
                        next[g * nc + k] = Int32(base) + e.to
                        k += 1
                    }
                }
                callStart[g] = Int32(callRule.count)
                for cl in d.calls[s] {
                    isLeaf = false
                    callRule.append(newId[Int(cl.rule)])
                    callReturn.append(Int32(base) + cl.to)
                }
            }
            leaf.append(isLeaf)
            leafDFAs.append(isLeaf ? d : nil)
            if c != nil { isBoundary[base + 1] = true }
            for (s, l) in b.rules[Int(r)].returnLabels where Int(s) < d.count { returnLabel[base + Int(s)] = l }
        }
        callStart[total] = Int32(callRule.count)
        self.classOf = classOf
        self.numClasses = nc
        self.next = next
        self.accepting = accepting
        self.hasBytes = hasBytes
        self.callStart = callStart
        self.callRule = callRule
        self.callReturn = callReturn
        self.ruleOf = ruleOf
        self.ruleStart = ruleStart
        self.isBoundary = isBoundary
        self.ruleMinCount = minC
        self.ruleMaxCount = maxC
        self.ruleIsCounted = counted
        self.ruleIsLeaf = leaf
        self.returnLabel = returnLabel
        self.leafDFA = leafDFAs
        self.isExit = (0..<total).map { accepting[$0] || callStart[$0] != callStart[$0 + 1] }
        self.labels = b.labels
        self.root = 0
        self.stateCount = total
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

    @inline(__always) func step(_ s: Int32, _ byte: UInt8) -> Int32 {
        next[Int(s) &* numClasses &+ Int(classOf[Int(byte)])]
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
    }
    var rules: [Rule] = []
    var labels: [JSONPathComponent] = []
    var labelIndex: [JSONPathComponent: Int32] = [:]
    var leafCache: [String: Int32] = [:]
    var totalStates = 0
    let stateBudget: Int
    let deadline: ContinuousClock.Instant?
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

    func define(_ rule: Int32, _ dfa: DFA, counted: (min: Int, max: Int)? = nil, returnLabels: [Int32: Int32] = [:]) throws(GrammarError) {
        rules[Int(rule)].dfa = dfa
        rules[Int(rule)].counted = counted
        rules[Int(rule)].returnLabels = returnLabels
        totalStates += dfa.count
        try checkLimits()
    }

    /// A rule for a call-free automaton, shared by every use with the same `key`.
    func leaf(_ key: String, pointer: String, counted: (min: Int, max: Int)? = nil, _ make: () throws(GrammarError) -> DFA) throws(GrammarError) -> Int32 {
        if let r = leafCache[key] { return r }
        let r = reserve(pointer: pointer)
        let dfa: DFA
        if let d = GrammarBuilder.sharedLeaves.withLock({ $0[key] }) {
            dfa = d
        } else {
            dfa = try make()
            GrammarBuilder.sharedLeaves.withLock { c in
                if c.count >= GrammarBuilder.sharedLeafCapacity { c.removeAll(keepingCapacity: true) }
                c[key] = dfa
            }
        }
        try define(r, dfa, counted: counted)
        leafCache[key] = r
        return r
    }

    /// Leaf automata by key, shared by every compilation in the process: a leaf is a pure
    /// function of its key (strings, numbers, literals, formats), and the same ones recur
    /// across schemas. Bounded; emptied when full.
    static let sharedLeaves = Mutex<[String: DFA]>([:])
    static let sharedLeafCapacity = 4096

    /// Builds a rule from an NFA with calls; `labels` maps NFA call targets to path labels.
    func rule(_ nfa: NFA, start: Int32, accept: Int32, pointer: String, into reserved: Int32? = nil,
              callLabels: [Int32: Int32] = [:]) throws(GrammarError) -> Int32 {
        let r = reserved ?? reserve(pointer: pointer)
        let (dfa, sets) = try DFA.determinizeWithSets(nfa, start: start, accepting: [accept], budget: max(stateBudget - totalStates, 16))
        var returnLabels: [Int32: Int32] = [:]
        if !callLabels.isEmpty {
            for s in 0..<dfa.count {
                for c in dfa.calls[s] {
                    for m in sets[Int(c.to)] { if let l = callLabels[m] { returnLabels[c.to] = l; break } }
                }
            }
        }
        try define(r, dfa, returnLabels: returnLabels)
        return r
    }
}
