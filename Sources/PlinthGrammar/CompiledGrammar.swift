import Synchronization

/// The token mask of one automaton state that does not depend on the stack: tokens whose bytes
/// all stay inside the state's rule, plus the trie nodes where a token leaves the rule (there the
/// matcher continues against the live stack).
final class MaskEntry: Sendable {
    /// A dense mask: every word. Empty for a sparse mask (under a quarter of its words set, as
    /// in most states of a key or literal), which keeps only its non-zero words: a state's mask
    /// is a vocabulary's worth of bits (19 KB for Qwen2.5) and a grammar caches thousands.
    let words: [UInt32]
    let sparseIndex: [Int32]
    let sparseWords: [UInt32]
    /// Trie nodes (with children) where the rule can pop or call, and the state reached there.
    let frontierNodes: [Int32]
    let frontierStates: [Int32]
    let frontierCounts: [Int32]
    /// Whether the frontier nodes are in the vocabulary's `rest` trie (else the full trie).
    let inRest: Bool

    init(words: [UInt32], frontierNodes: [Int32], frontierStates: [Int32], frontierCounts: [Int32], inRest: Bool) {
        self.inRest = inRest
        self.frontierNodes = frontierNodes
        self.frontierStates = frontierStates
        self.frontierCounts = frontierCounts
        var index: [Int32] = [], set: [UInt32] = []
        for (i, w) in words.enumerated() where w != 0 { index.append(Int32(i)); set.append(w) }
        if index.count * 4 < words.count {
            self.words = []
            sparseIndex = index
            sparseWords = set
        } else {
            self.words = words
            sparseIndex = []
            sparseWords = []
        }
    }

    /// The non-zero words `nonZero` of `words`, as a mask without a frontier.
    init(_ words: UnsafeBufferPointer<UInt32>, nonZero: [Int32]) {
        inRest = false
        frontierNodes = []
        frontierStates = []
        frontierCounts = []
        if nonZero.count * 4 < words.count {
            self.words = []
            sparseIndex = nonZero
            sparseWords = nonZero.map { words[Int($0)] }
        } else {
            self.words = Array(words)
            sparseIndex = []
            sparseWords = []
        }
    }

    /// ORs the mask into `out`.
    @inline(__always) func add(into out: UnsafeMutableBufferPointer<UInt32>) {
        if words.isEmpty {
            sparseIndex.withUnsafeBufferPointer { index in
                sparseWords.withUnsafeBufferPointer { set in for k in 0..<index.count { out[Int(index[k])] |= set[k] } }
            }
        } else {
            words.withUnsafeBufferPointer { src in for i in 0..<src.count { out[i] |= src[i] } }
        }
    }
}

/// A grammar compiled for one token vocabulary: the automaton plus its token masks, which are
/// computed on first use and shared by every matcher (and thread) that uses the grammar.
///
/// Create matchers with ``makeMatcher()``. Compiled grammars are immutable apart from their mask
/// cache, which is protected by a lock; share them freely.
public final class CompiledGrammar: Sendable {
    let grammar: Grammar
    /// The vocabulary the masks are computed for.
    public let vocabulary: TokenVocabulary
    /// How a string schema was compiled (for diagnostics): the JSON pointer of every keyword the
    /// compiler ignored in lenient mode.
    public let ignoredKeywords: [String]
    let entries = Mutex<[UInt64: MaskEntry]>([:])
    /// The tokens that leave a state's rule, by the stack they were walked against (its frames'
    /// mask keys, top first): the same stacks recur, at every token inside a string value and
    /// in every record of an evaluation. Bounded by the words held (2 MB); emptied when full.
    let frontierMasks = Mutex<(entries: [StackKey: MaskEntry], words: Int)>(([:], 0))
    static let frontierCapacityWords = 1 << 19

    /// A stack's frames as mask keys, hashed once (a dictionary hashes its keys again on every
    /// growth).
    struct StackKey: Hashable {
        let frames: [UInt64]
        let hash: UInt64
        init(_ frames: [UInt64]) {
            self.frames = frames
            var h: UInt64 = 0xcbf2_9ce4_8422_2325
            for f in frames { h = (h ^ f) &* 0x100_0000_01b3 }
            hash = h
        }
        static func == (a: StackKey, b: StackKey) -> Bool { a.hash == b.hash && a.frames == b.frames }
        func hash(into hasher: inout Hasher) { hasher.combine(hash) }
    }
    let countClamp: Int32
    let returnIsElement: [Bool]
    /// Per rule: the shared mask cache of a leaf rule, or nil.
    let leafCaches: [LeafMaskCache?]
    private let distances = Mutex<CompletionDistance?>(nil)

    /// Each state's distance to the end of its rule, computed at the first budget-aware call
    /// (compilation does not pay for it).
    var completionDistance: CompletionDistance {
        distances.withLock { d in
            if let d { return d }
            let made = CompletionDistance(grammar)
            d = made
            return made
        }
    }

    init(grammar: Grammar, vocabulary: TokenVocabulary, ignoredKeywords: [String] = []) {
        self.grammar = grammar
        self.vocabulary = vocabulary
        self.ignoredKeywords = ignoredKeywords
        self.countClamp = Int32(vocabulary.maxTokenLength + 2)
        var el = [Bool](repeating: false, count: grammar.stateCount)
        for s in 0..<grammar.stateCount {
            let l = grammar.returnLabel[s]
            if l >= 0, case .element = grammar.labels[Int(l)] { el[s] = true }
        }
        returnIsElement = el
        // A counted pattern's masks depend on its bounds too: shared by its key alone.
        leafCaches = grammar.leafDFA.indices.map { r in
            grammar.leafDFA[r].map { vocabulary.leafCache(for: $0, key: grammar.leafKeys[r], byKeyOnly: grammar.ruleCountBase[r] >= 0) }
        }
    }

    /// Number of automaton states (a measure of grammar size).
    public var stateCount: Int { grammar.stateCount }

    /// A fresh matcher positioned at the start of the output.
    public func makeMatcher() -> GrammarMatcher { GrammarMatcher(self) }

    /// The cache key of a state with a character count (counts matter only in counted rules,
    /// and only up to the longest token).
    @inline(__always) func key(state: Int32, count: Int32) -> (UInt64, need: Int32, remaining: Int32) {
        let r = Int(grammar.ruleOf[Int(state)])
        guard grammar.ruleIsCounted[r] else { return (UInt64(UInt32(state)) | UInt64(countClamp + 1) << 48, 0, -1) }
        if grammar.ruleCountBase[r] >= 0 {
            // A counted pattern: whether a state can still finish depends on the exact count
            // (up to its table's last column).
            let c = min(count, grammar.ruleCountWidth[r] - 1)
            let maxC = grammar.ruleMaxCount[r]
            return (UInt64(UInt32(state)) | UInt64(c) << 32 | 1 << 63, max(grammar.ruleMinCount[r] - c, 0), maxC < 0 ? -1 : max(maxC - c, 0))
        }
        let need = min(max(grammar.ruleMinCount[r] - count, 0), countClamp)
        let maxC = grammar.ruleMaxCount[r]
        let rem: Int32 = maxC < 0 ? countClamp + 1 : min(max(maxC - count, 0), countClamp)
        return (UInt64(UInt32(state)) | UInt64(need) << 32 | UInt64(rem) << 48, need, rem > countClamp ? -1 : rem)
    }

    func frontierMask(_ stack: StackKey) -> MaskEntry? { frontierMasks.withLock { $0.entries[stack] } }

    func storeFrontierMask(_ stack: StackKey, _ m: MaskEntry) {
        frontierMasks.withLock { c in
            let size = m.words.count + m.sparseIndex.count + m.sparseWords.count + stack.frames.count
            if c.words + size > Self.frontierCapacityWords { c = ([:], 0) }
            c.entries[stack] = m
            c.words += size
        }
    }

    /// The stack-independent mask of a state; for leaf rules its frontier states are local to
    /// the rule (add ``Grammar/ruleStart`` of the rule).
    func entry(state: Int32, count: Int32) -> MaskEntry {
        let r = Int(grammar.ruleOf[Int(state)])
        if let shared = leafCaches[r] {
            let base = grammar.ruleStart[r]
            let (k0, need, rem) = key(state: state, count: count)
            let k = (k0 & ~0xFFFF_FFFF) | UInt64(UInt32(state - base))
            if let e = shared.entries.withLock({ $0[k] }) { return e }
            let e = computeEntry(state: state, count: count, minCount: need, maxCount: rem, base: base)
            shared.entries.withLock { $0[k] = e }
            return e
        }
        let (k, need, rem) = key(state: state, count: count)
        if let e = entries.withLock({ $0[k] }) { return e }
        let e = computeEntry(state: state, count: count, minCount: need, maxCount: rem, base: 0)
        entries.withLock { $0[k] = e }
        return e
    }

    /// Walks the trie inside the rule of `state` (counts relative: start at 0 with the given
    /// bounds; `count`, the frame's, for a counted pattern's table). For leaf states closed
    /// under the string slice, the slice is added whole and only the other tokens are walked.
    func computeEntry(state: Int32, count: Int32, minCount: Int32, maxCount: Int32, base: Int32) -> MaskEntry {
        let g = grammar, v = vocabulary
        let r = Int(g.ruleOf[Int(state)])
        var words: [UInt32]
        let trie: TokenTrie
        var inRest = false
        // A counted pattern's table is checked on every step (not once an unbounded one has
        // its minimum: every state can finish then). With a maximum, the table can end a slice
        // token's run early, so those states walk every token; without one, a state closed
        // under the slice can always read more characters and still finish.
        let table = g.ruleCountBase[r] >= 0 && !(maxCount < 0 && minCount == 0)
        let count0 = table ? min(count, g.ruleCountWidth[r] - 1) : 0
        // The rule's table, located once here rather than per trie node.
        let counts = table ? g.countTable(rule: r) : nil
        if g.ruleCountBase[r] < 0 || maxCount < 0, let leaf = leafCaches[r], leaf.sliceClosed[Int(state - base)] {
            if maxCount < 0 { words = v.sliceAll } else { words = v.sliceUpTo[min(Int(maxCount), v.sliceUpTo.count - 1)] }
            trie = v.rest
            inRest = true
        } else {
            words = [UInt32](repeating: 0, count: v.maskWordCount)
            trie = v.all
        }
        var fNodes: [Int32] = [], fStates: [Int32] = [], fCounts: [Int32] = []
        let counted = g.ruleIsCounted[r]
        let depthCap = v.maxTokenLength + 2
        var st = [Int32](repeating: 0, count: depthCap)
        var cn = [Int32](repeating: 0, count: depthCap)
        st[0] = state
        let n = trie.count
        let hasDup = trie.hasDuplicates
        g.countNeed.withUnsafeBufferPointer { needTable in
        g.countFlags.withUnsafeBufferPointer { countFlags in
        g.isExit.withUnsafeBufferPointer { isExit in
        trie.nodeByte.withUnsafeBufferPointer { nodeByte in
        trie.nodeDepth.withUnsafeBufferPointer { nodeDepth in
        trie.nodeEnd.withUnsafeBufferPointer { nodeEnd in
        trie.nodeToken.withUnsafeBufferPointer { nodeToken in
        g.next.withUnsafeBufferPointer { next in
        g.rowOf.withUnsafeBufferPointer { rowOf in
        g.single.withUnsafeBufferPointer { single in
        g.classMaps.withUnsafeBufferPointer { classMaps in
        words.withUnsafeMutableBufferPointer { w in
            // Every state of the walk is in the rule of `state`: one class map.
            let classOf = UnsafeBufferPointer(rebasing: classMaps[Int(g.classMapOf[Int(state)])...])
            var i = 1
            while i < n {
                let d = Int(nodeDepth[i])
                let ps = st[d - 1]
                let b = nodeByte[i]
                let row = rowOf[Int(ps)]
                var t: Int32
                if row >= 0 {
                    t = next[Int(row) &+ Int(classOf[Int(b)])]
                } else {
                    let e = single[Int(ps)]
                    t = b >= e.lo && b <= e.hi ? e.to : -1
                }
                var c = cn[d - 1]
                if t >= 0 && counted && countFlags[Int(ps)] & Grammar.boundary != 0 {
                    if b == 0x22 {
                        if c < minCount { t = -1 }
                    } else if maxCount >= 0 && c >= maxCount {
                        t = -1
                    } else {
                        c += 1
                    }
                }
                if t >= 0, let counts, counts.need(needTable, state: t, count: count0 &+ c) >= CountTable.unreachable { t = -1 }
                if t < 0 { i = Int(nodeEnd[i]); continue }
                st[d] = t
                cn[d] = c
                let tok = nodeToken[i]
                if tok >= 0 {
                    w[Int(tok) >> 5] |= 1 << (UInt32(tok) & 31)
                    if hasDup, let more = trie.duplicateTokens[Int32(i)] { for m in more { w[Int(m) >> 5] |= 1 << (UInt32(m) & 31) } }
                }
                if isExit[Int(t)] && Int(nodeEnd[i]) > i + 1 {
                    fNodes.append(Int32(i)); fStates.append(t - base); fCounts.append(c)
                }
                i += 1
            }
        }}}}}}}}}}}}
        return MaskEntry(words: words, frontierNodes: fNodes, frontierStates: fStates, frontierCounts: fCounts, inRest: inRest)
    }
}
