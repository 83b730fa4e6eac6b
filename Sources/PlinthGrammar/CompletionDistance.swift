/// How far each automaton state is from the end of its rule: the fewest bytes that complete the
/// rule from there, with every call taken at its rule's shortest length. The distance of a whole
/// configuration is the sum over its stack (each parent frame sits at its return state), plus the
/// characters a counted string still lacks.
///
/// This is what makes decoding budget-aware: a sequence whose remaining token budget is at least
/// the distance of its configuration can always finish, because every byte is also a token of a
/// byte-level vocabulary; the decoder keeps that true by refusing any token after which the
/// distance would exceed what is left (``GrammarMatcher/fits(_:remaining:)``).
struct CompletionDistance: Sendable {
    /// Per state: bytes to the end of its rule (without a counted rule's missing characters).
    let state: [Int32]

    static let unreachable = Int32.max / 4

    /// Relaxes `d[s] = min(1 + d[byte successor], minLength(callee) + d[return state])` over
    /// the grammar until nothing changes. States are swept from the last to the first: a rule's
    /// states are numbered from its start and callees come after their callers, so most
    /// distances settle in the first sweep and cycles (strings, arrays) in a few more.
    init(_ g: Grammar) {
        let n = g.stateCount
        let inf = Self.unreachable
        var d = [Int32](repeating: inf, count: n)
        for s in 0..<n where g.accepting[s] { d[s] = 0 }
        let rules = g.ruleStart.count
        var classCount = [Int](repeating: 0, count: rules)
        for r in 0..<rules {
            let map = Int(g.classMapOf[Int(g.ruleStart[r])])
            var top = 0
            for b in 0..<256 { top = max(top, Int(g.classMaps[map + b])) }
            classCount[r] = top + 1
        }
        var changed = true
        while changed {
            changed = false
            for s in stride(from: n - 1, through: 0, by: -1) {
                var best = d[s]
                let row = Int(g.rowOf[s])
                if row >= 0 {
                    for k in 0..<classCount[Int(g.ruleOf[s])] {
                        let t = g.next[row + k]
                        if t >= 0, d[Int(t)] + 1 < best { best = d[Int(t)] + 1 }
                    }
                } else {
                    let e = g.single[s]
                    if e.to >= 0, e.lo <= e.hi, d[Int(e.to)] + 1 < best { best = d[Int(e.to)] + 1 }
                }
                for k in Int(g.callStart[s])..<Int(g.callStart[s + 1]) {
                    let r = Int(g.callRule[k])
                    let start = Self.toRuleEnd(g, rule: r, state: g.ruleStart[r], count: 0, d)
                    let after = d[Int(g.callReturn[k])]
                    guard start < inf, after < inf else { continue }
                    let via = start + after
                    if via < best { best = via }
                }
                if best < d[s] {
                    d[s] = best
                    changed = true
                }
            }
        }
        state = d
    }

    /// Bytes from `state` of rule `r`, with `count` characters of its counted pattern so far, to
    /// the rule's end: the rule's count table where it has one (which includes the characters the
    /// count still lacks), else the state's distance in `d` plus those characters.
    static func toRuleEnd(_ g: Grammar, rule r: Int, state: Int32, count: Int32, _ d: [Int32]) -> Int32 {
        if let need = g.countNeed(rule: r, state: state, count: count) { return need }
        let base = d[Int(state)]
        guard base < unreachable else { return unreachable }
        return base + (g.ruleIsCounted[r] ? max(0, g.ruleMinCount[r] - count) : 0)
    }
}

extension MatcherCore {
    /// The fewest bytes that complete the output from configuration `top` (a frame and the
    /// frames below it).
    func completionDistance(of top: Int32, _ distance: CompletionDistance) -> Int {
        var total = 0
        var f = top
        while f >= 0 {
            let frame = frames[Int(f)]
            let s = Int(frame.state)
            total += Int(CompletionDistance.toRuleEnd(g, rule: Int(g.ruleOf[s]), state: frame.state, count: frame.count, distance.state))
            f = frame.parent
        }
        return total
    }

    /// The fewest bytes that complete the output from the current configurations (0 when the
    /// output is complete).
    func completionDistance() -> Int {
        if terminated { return 0 }
        let distance = grammar.completionDistance
        var best = Int.max
        for top in tops { best = min(best, completionDistance(of: top, distance)) }
        return best
    }

    /// Whether `token` is allowed and leaves a configuration that completes within
    /// `remaining - 1` bytes. An end-of-sequence token fits whenever it is allowed.
    ///
    /// The distance counts bytes, and a token may carry several, so a budget can be shorter than
    /// the distance and still hold the value in tokens (a schema whose shortest value is 1,500
    /// bytes of keys, in a 512-token budget). While that is so, a token fits when it brings the
    /// end closer: nothing that only lengthens a string or an array, so every token spent goes
    /// toward the end. Some byte always does, so some token fits.
    mutating func fits(_ token: Int32, remaining: Int) -> Bool {
        if vocabulary.endOfSequence.contains(token) { return isComplete() }
        let before = completionDistance()
        guard accept(token) else { return false }
        defer { rollback(1) }
        let after = completionDistance()
        return before > remaining ? after < before : after <= remaining - 1
    }
}
