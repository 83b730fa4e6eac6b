/// The state and algorithms of a ``GrammarMatcher`` as a value: the matcher holds one and
/// calls into it, so that the hot loops (closures over the stack, trie walks) reach the frame
/// arena and scratch arrays as a struct's, without the dynamic exclusivity check that every
/// access to a class's stored property costs.
struct MatcherCore {
    let grammar: CompiledGrammar
    let g: Grammar
    let vocabulary: TokenVocabulary
    var frames: [Frame] = []
    /// Configurations after the last consumed byte (top frames, before closure).
    var tops: [Int32] = []
    var history: [(arena: Int, tops: [Int32], terminated: Bool)] = []
    var terminated = false
    // Scratch buffers.
    var work: [Int32] = []
    var levelItems: [Int32] = []
    var levelStart: [Int] = []
    var levelEnd: [Int] = []
    var scratchTops: [Int32] = []
    var scratchClosed: [Int32] = []
    var scratchExits: [Int32] = []

    init(_ compiled: CompiledGrammar) {
        grammar = compiled
        g = compiled.grammar
        vocabulary = compiled.vocabulary
        frames.reserveCapacity(1024)
        frames.append(Frame(state: g.ruleStart[Int(g.root)], count: 0, parent: -1))
        tops = [0]
        levelStart = [Int](repeating: 0, count: vocabulary.maxTokenLength + 2)
        levelEnd = levelStart
    }

    // MARK: State

    mutating func isComplete() -> Bool {
        if terminated { return true }
        var lex: [Int32] = []
        let mark = frames.count
        defer { truncateFrames(to: mark) }
        return closure(tops, into: &lex)
    }

    // MARK: Masks

    mutating func fillAllowedTokens(_ words: UnsafeMutableBufferPointer<UInt32>) {
        precondition(words.count >= vocabulary.maskWordCount, "mask buffer too small")
        let wc = vocabulary.maskWordCount
        for i in 0..<wc { words[i] = 0 }
        if terminated { return }
        var lex: [Int32] = []
        let mark0 = frames.count
        let canEnd = closure(tops, into: &lex)
        let mark = frames.count
        for x in lex { addMask(of: x, into: words) }
        truncateFrames(to: mark)
        if canEnd { for e in vocabulary.endOfSequence { words[Int(e) >> 5] |= 1 << (UInt32(e) & 31) } }
        truncateFrames(to: mark0)
    }

    /// ORs into `words` the tokens allowed from lexical configuration `x`: the state's own
    /// mask, and the tokens that leave its rule, which depend on the stack below. Those come
    /// from walks of the trie against the stack, cached in the grammar by the stack's frames
    /// (as mask keys, which is all the walks read).
    mutating func addMask(of x: Int32, into words: UnsafeMutableBufferPointer<UInt32>) {
        let f = frames[Int(x)]
        let e = grammar.entry(state: f.state, count: f.count)
        e.add(into: words)
        if e.frontierNodes.isEmpty { return }
        var scratchKey: [UInt64] = []
        var y = x
        while y >= 0 {
            let fy = frames[Int(y)]
            scratchKey.append(grammar.key(state: fy.state, count: fy.count).0)
            y = fy.parent
        }
        let key = CompiledGrammar.StackKey(scratchKey)
        if let cached = grammar.frontierMask(key) { cached.add(into: words); return }
        let r = Int(g.ruleOf[Int(f.state)])
        let base = grammar.leafCaches[r] != nil ? g.ruleStart[r] : 0
        let wordCount = vocabulary.maskWordCount
        var set = scratchExits, walked = MatcherCore.zeroedMasks.take(wordCount), touched: [Int32] = []
        scratchExits = []
        defer { scratchExits = set; MatcherCore.zeroedMasks.giveBack(walked) }
        let trie = e.inRest ? vocabulary.rest : vocabulary.all
        let result = walked.withUnsafeMutableBufferPointer { out in
            for k in 0..<e.frontierNodes.count {
                set.removeAll(keepingCapacity: true)
                let mark = frames.count
                exits(state: e.frontierStates[k] + base, count: f.count, parent: f.parent, into: &set)
                if !set.isEmpty { walk(from: e.frontierNodes[k], set: set, into: out, touched: &touched, trie: trie) }
                truncateFrames(to: mark)
            }
            defer { for i in touched { out[Int(i)] = 0 } }
            return MaskEntry(UnsafeBufferPointer(rebasing: out[..<wordCount]), nonZero: touched)
        }
        grammar.storeFrontierMask(key, result)
        result.add(into: words)
    }

    /// Zeroed masks for the frontier walks, shared by all matchers (a mask is 19 KB for
    /// Qwen2.5; allocating one per walk showed in the slowest masks). Not a stored field: with
    /// more stored arrays in this struct, destroying a matcher crashed in release builds
    /// (`BatchEvaluatorTests`, swift 6.3.1), though no code path used them.
    static let zeroedMasks = ArrayPool<UInt32>(clean: 0, limit: 8)

    // MARK: Accepting

    @discardableResult
    mutating func accept(_ token: Int32) -> Bool {
        if terminated { return false }
        if vocabulary.endOfSequence.contains(token) {
            guard isComplete() else { return false }
            history.append((frames.count, tops, terminated))
            terminated = true
            return true
        }
        guard token >= 0, Int(token) < vocabulary.size, vocabulary.tokenNode[Int(token)] >= 0 else { return false }
        return consume(vocabulary.tokenBytes[Int(token)])
    }

    @discardableResult
    mutating func accept(bytes: [UInt8]) -> Bool {
        if terminated || bytes.isEmpty { return false }
        return consume(bytes)
    }

    mutating func consume(_ bytes: [UInt8]) -> Bool {
        let mark = frames.count
        let old = tops
        var lex: [Int32] = []
        for b in bytes {
            lex.removeAll(keepingCapacity: true)
            _ = closure(tops, into: &lex)
            var next: [Int32] = []
            for x in lex { let y = stepFrame(x, b); if y >= 0 { insertUnique(y, into: &next) } }
            if next.isEmpty {
                truncateFrames(to: mark)
                tops = old
                return false
            }
            tops = next
        }
        history.append((mark, old, terminated))
        return true
    }

    @discardableResult
    mutating func rollback(_ count: Int) -> Bool {
        guard count <= history.count else { return false }
        for _ in 0..<count {
            let h = history.removeLast()
            truncateFrames(to: h.arena)
            tops = h.tops
            terminated = h.terminated
        }
        return true
    }

    mutating func reset() { _ = rollback(history.count) }

    // MARK: Jump-forward

    mutating func forcedBytes(limit: Int = 4096) -> [UInt8] {
        if terminated { return [] }
        var out: [UInt8] = []
        let mark = frames.count
        defer { truncateFrames(to: mark) }
        var cur = tops
        var lex: [Int32] = []
        while out.count < limit {
            lex.removeAll(keepingCapacity: true)
            if closure(cur, into: &lex) { break }
            var only: Int = -1
            var many = false
            outer: for x in lex {
                for b in 0..<256 {
                    let m = frames.count
                    let y = stepFrame(x, UInt8(b))
                    truncateFrames(to: m)
                    if y >= 0 {
                        if only < 0 { only = b } else if only != b { many = true; break outer }
                    }
                }
            }
            if many || only < 0 { break }
            var next: [Int32] = []
            for x in lex { let y = stepFrame(x, UInt8(only)); if y >= 0 { insertUnique(y, into: &next) } }
            out.append(UInt8(only))
            cur = next
        }
        return out
    }

    mutating func forcedTokens(tokenize: (([UInt8]) -> [Int32])? = nil) -> [Int32] {
        let bytes = forcedBytes()
        if bytes.isEmpty { return [] }
        if let tokenize {
            let toks = tokenize(bytes)
            // Drop the last token: it may merge with what follows.
            return Array(toks.dropLast())
        }
        var (toks, extensible) = vocabulary.greedyTokens(bytes)
        if extensible, !toks.isEmpty { toks.removeLast() }
        return toks
    }

    // MARK: Streaming position

    var currentPath: [JSONPathComponent] {
        guard let top = tops.first else { return [] }
        var out: [JSONPathComponent] = []
        var f = frames[Int(top)].parent
        while f >= 0 {
            let fr = frames[Int(f)]
            let l = g.returnLabel[Int(fr.state)]
            if l >= 0 {
                switch g.labels[Int(l)] {
                case .element: out.append(.element(Int(fr.count) - 1))
                case let other: out.append(other)
                }
            }
            f = fr.parent
        }
        return out.reversed()
    }

    // MARK: Core

    /// Adds frame `y` to `set` unless an identical stack is already there.
    @inline(__always) func insertUnique(_ y: Int32, into set: inout [Int32]) {
        for z in set where sameStack(z, y) { return }
        set.append(y)
    }

    @inline(__always) func sameStack(_ a: Int32, _ b: Int32) -> Bool {
        var x = a, y = b
        while x != y {
            if x < 0 || y < 0 { return false }
            let fx = frames[Int(x)], fy = frames[Int(y)]
            if fx.state != fy.state || fx.count != fy.count { return false }
            x = fx.parent; y = fy.parent
        }
        return true
    }

    /// Drops the frames pushed since the arena held `mark` of them.
    @inline(__always) mutating func truncateFrames(to mark: Int) { frames.removeLast(frames.count - mark) }

    @inline(__always) mutating func push(_ f: Frame) -> Int32 {
        frames.append(f)
        return Int32(frames.count - 1)
    }

    /// Steps frame `x` over `byte`; returns the new top frame or -1.
    @inline(__always) mutating func stepFrame(_ x: Int32, _ b: UInt8) -> Int32 {
        let f = frames[Int(x)]
        let t = g.step(f.state, b)
        if t < 0 { return -1 }
        var c = f.count
        let flags = g.countFlags[Int(f.state)]
        if flags == 0 { return push(Frame(state: t, count: c, parent: f.parent)) }
        if flags & Grammar.boundary != 0 {
            let r = Int(g.ruleOf[Int(f.state)])
            if b == 0x22 {
                if c < g.ruleMinCount[r] { return -1 }
            } else {
                let m = g.ruleMaxCount[r]
                if m >= 0 && c >= m { return -1 }
                c += 1
            }
        }
        // A counted pattern: only into a state that can still finish within the bounds.
        if flags & Grammar.tabled != 0, let need = g.countNeed(rule: Int(g.ruleOf[Int(t)]), state: t, count: c), need >= CountTable.unreachable {
            return -1
        }
        return push(Frame(state: t, count: c, parent: f.parent))
    }

    /// Expands configurations through pops and calls; collects those that can read a byte.
    /// Returns whether the whole output can end here.
    @discardableResult
    mutating func closure(_ seeds: [Int32], into out: inout [Int32]) -> Bool {
        var canEnd = false
        for s in seeds { if closeFrom(s, into: &out) { canEnd = true } }
        return canEnd
    }

    mutating func closeFrom(_ seed: Int32, into out: inout [Int32]) -> Bool {
        var canEnd = false
        work.removeAll(keepingCapacity: true)
        work.append(seed)
        while let x = work.popLast() {
            let f = frames[Int(x)]
            let s = Int(f.state)
            if g.hasBytes[s] { insertUnique(x, into: &out) }
            if g.accepting[s] {
                if f.parent >= 0 { work.append(f.parent) } else { canEnd = true }
            }
            let cs = Int(g.callStart[s]), ce = Int(g.callStart[s + 1])
            if cs < ce {
                for k in cs..<ce {
                    let ret = g.callReturn[k]
                    let pf = push(Frame(state: ret, count: f.count + (grammar.returnIsElement[Int(ret)] ? 1 : 0), parent: f.parent))
                    work.append(push(Frame(state: g.ruleStart[Int(g.callRule[k])], count: 0, parent: pf)))
                }
            }
        }
        return canEnd
    }

    /// The configurations that leave a rule at `state` (pop or call), closed.
    mutating func exits(state: Int32, count: Int32, parent: Int32, into out: inout [Int32]) {
        let s = Int(state)
        if g.accepting[s], parent >= 0 { _ = closeFrom(parent, into: &out) }
        let cs = Int(g.callStart[s]), ce = Int(g.callStart[s + 1])
        if cs < ce {
            for k in cs..<ce {
                let ret = g.callReturn[k]
                let pf = push(Frame(state: ret, count: count + (grammar.returnIsElement[Int(ret)] ? 1 : 0), parent: parent))
                let cf = push(Frame(state: g.ruleStart[Int(g.callRule[k])], count: 0, parent: pf))
                _ = closeFrom(cf, into: &out)
            }
        }
    }

    /// Marks the tokens in the subtree below trie node `node` that configurations `set` accept,
    /// listing in `touched` each word of `words` it makes non-zero.
    mutating func walk(from node: Int32, set: [Int32], into words: UnsafeMutableBufferPointer<UInt32>, touched: inout [Int32], trie v: TokenTrie) {
        let base = Int(v.nodeDepth[Int(node)])
        @inline(__always) func mark(_ t: Int32) {
            if words[Int(t) >> 5] == 0 { touched.append(t >> 5) }
            words[Int(t) >> 5] |= 1 << (UInt32(t) & 31)
        }
        // The scratch sets are taken out of `self` for the walk: filling one through a method
        // that also reads `self` (the frames) would otherwise copy all of `self` per call.
        var next = scratchTops, closed = scratchClosed
        scratchTops = []
        scratchClosed = []
        defer { scratchTops = next; scratchClosed = closed }
        levelItems.removeAll(keepingCapacity: true)
        levelItems.append(contentsOf: set)
        levelStart[0] = 0
        levelEnd[0] = set.count
        var i = Int(node) + 1
        let end = Int(v.nodeEnd[Int(node)])
        while i < end {
            let d = Int(v.nodeDepth[i]) - base
            let b = v.nodeByte[i]
            next.removeAll(keepingCapacity: true)
            for k in levelStart[d - 1]..<levelEnd[d - 1] {
                let y = stepFrame(levelItems[k], b)
                if y >= 0 { insertUnique(y, into: &next) }
            }
            if next.isEmpty { i = Int(v.nodeEnd[i]); continue }
            let tok = v.nodeToken[i]
            if tok >= 0 {
                mark(tok)
                if v.hasDuplicates, let more = v.duplicateTokens[Int32(i)] { for m in more { mark(m) } }
            }
            if Int(v.nodeEnd[i]) > i + 1 {
                levelItems.removeLast(levelItems.count - levelEnd[d - 1])
                levelStart[d] = levelItems.count
                closed.removeAll(keepingCapacity: true)
                _ = closure(next, into: &closed)
                levelItems.append(contentsOf: closed)
                levelEnd[d] = levelItems.count
                if closed.isEmpty { i = Int(v.nodeEnd[i]); continue }
            }
            i += 1
        }
    }
}
