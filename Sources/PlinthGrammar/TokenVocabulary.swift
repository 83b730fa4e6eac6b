import Synchronization

/// The token vocabulary of a model as the constrained decoder sees it: the bytes each token
/// stands for, organised as a trie so that a token mask is one walk over shared prefixes.
///
/// Build one per model and share it: grammars compiled for a vocabulary cache their token masks
/// with it. Special tokens (control tokens such as `<|im_start|>`) are never allowed inside
/// generated structure; pass them in `excluded`. End-of-sequence tokens are allowed exactly where
/// the value is complete.
///
/// ```swift
/// let vocabulary = try TokenVocabulary(tokens: (0..<n).map { tokenizer.tokenBytes(Int32($0)) },
///                                      endOfSequence: tokenizer.endOfGenerationIDs)
/// ```
public final class TokenVocabulary: Sendable {
    /// Number of token ids (the width of a mask in bits).
    public let size: Int
    /// The tokens that end generation.
    public let endOfSequence: [Int32]
    /// Number of 32-bit words in a mask.
    public let maskWordCount: Int
    /// Length in bytes of the longest token.
    public let maxTokenLength: Int

    let tokenBytes: [[UInt8]]
    /// Every usable token.
    let all: TokenTrie
    /// The tokens outside the string slice (see ``sliceAll``).
    let rest: TokenTrie
    /// The string slice: tokens made only of whole UTF-8 characters that JSON strings take
    /// unescaped (no `"`, `\`, control characters). A state that reads any such character and
    /// stays inside its rule allows all of them at once.
    let sliceAll: [UInt32]
    /// `sliceUpTo[k]`: slice tokens of at most `k` characters.
    let sliceUpTo: [[UInt32]]
    /// For each token in the full trie, its node (-1 when excluded).
    let tokenNode: [Int32]
    /// Token masks of leaf automata (strings, numbers, literals), shared by every grammar
    /// compiled for this vocabulary: the same automaton gives the same masks in any schema.
    let leafCaches = Mutex<[SampledAutomatonKey: LeafMaskCache]>([:])
    /// The same caches by the builder's leaf key, which is cheaper to hash than the automaton.
    let leafCachesByKey = Mutex<[ExactString: LeafMaskCache]>([:])

    /// Creates a vocabulary from the bytes of every token.
    ///
    /// - Parameters:
    ///   - tokens: the bytes of token `i` at index `i`.
    ///   - endOfSequence: the token ids that end generation; they are allowed only where the
    ///     output is complete.
    ///   - excluded: token ids that are never allowed (control and special tokens). The
    ///     end-of-sequence ids are excluded from the byte trie automatically.
    public init(tokens: [[UInt8]], endOfSequence: [Int32], excluded: Set<Int32> = []) throws(GrammarError) {
        guard !tokens.isEmpty else { throw .invalidVocabulary("it has no tokens") }
        guard !endOfSequence.isEmpty else { throw .invalidVocabulary("no end-of-sequence token was given") }
        for e in endOfSequence where e < 0 || Int(e) >= tokens.count {
            throw .invalidVocabulary("end-of-sequence id \(e) is outside the vocabulary of \(tokens.count)")
        }
        size = tokens.count
        self.endOfSequence = endOfSequence
        let wc = (tokens.count + 31) / 32
        maskWordCount = wc
        tokenBytes = tokens
        let eos = Set(endOfSequence)
        let ids = (0..<tokens.count).filter { !tokens[$0].isEmpty && !excluded.contains(Int32($0)) && !eos.contains(Int32($0)) }
        all = TokenTrie(ids: ids, tokens: tokens)
        var node = [Int32](repeating: -1, count: tokens.count)
        for (n, t) in all.nodeToken.enumerated() where t >= 0 { node[Int(t)] = Int32(n) }
        for (n, more) in all.duplicateTokens { for t in more { node[Int(t)] = n } }
        tokenNode = node
        // The string slice.
        var restIDs: [Int] = []
        var byChars: [Int: [Int]] = [:]
        for id in ids {
            if let n = TokenVocabulary.safeCharacterCount(tokens[id]) { byChars[n, default: []].append(id) } else { restIDs.append(id) }
        }
        rest = TokenTrie(ids: restIDs, tokens: tokens)
        let maxChars = byChars.keys.max() ?? 0
        var cumulative: [[UInt32]] = []
        var acc = [UInt32](repeating: 0, count: wc)
        for k in 0...maxChars {
            for id in byChars[k] ?? [] { acc[id >> 5] |= 1 << (UInt32(id) & 31) }
            cumulative.append(acc)
        }
        sliceAll = acc
        sliceUpTo = cumulative
        maxTokenLength = tokens.map(\.count).max() ?? 0
    }

    /// The number of characters of `bytes` if it is whole UTF-8 characters that a JSON string
    /// takes unescaped; otherwise nil.
    static func safeCharacterCount(_ bytes: [UInt8]) -> Int? {
        var i = 0, n = 0
        while i < bytes.count {
            let b = bytes[i]
            let len: Int
            if b < 0x80 {
                if b < 0x20 || b == 0x22 || b == 0x5C { return nil }
                len = 1
            } else if b >= 0xC2 && b <= 0xDF { len = 2 }
            else if b >= 0xE0 && b <= 0xEF { len = 3 }
            else if b >= 0xF0 && b <= 0xF4 { len = 4 }
            else { return nil }
            guard i + len <= bytes.count else { return nil }
            for k in 1..<len where bytes[i + k] & 0xC0 != 0x80 { return nil }
            if len == 3 {
                if b == 0xE0 && bytes[i + 1] < 0xA0 { return nil }
                if b == 0xED && bytes[i + 1] > 0x9F { return nil }
            }
            if len == 4 {
                if b == 0xF0 && bytes[i + 1] < 0x90 { return nil }
                if b == 0xF4 && bytes[i + 1] > 0x8F { return nil }
            }
            i += len
            n += 1
        }
        return n
    }

    /// The bytes of a token.
    public func bytes(of token: Int32) -> [UInt8] {
        guard token >= 0, Int(token) < size else { return [] }
        return tokenBytes[Int(token)]
    }

    /// Greedy longest-match tokenization of `bytes` through the trie (tokens in the trie only).
    func greedyTokens(_ bytes: [UInt8]) -> (tokens: [Int32], lastNodeHasChildren: Bool) {
        let t = all
        var out: [Int32] = []
        var i = 0
        var lastExtensible = false
        while i < bytes.count {
            var node: Int32 = 0
            var best: (tok: Int32, len: Int, node: Int32)? = nil
            var j = i
            while j < bytes.count {
                var c = node + 1
                let end = t.nodeEnd[Int(node)]
                var found: Int32 = -1
                while c < end {
                    if t.nodeByte[Int(c)] == bytes[j] { found = c; break }
                    c = t.nodeEnd[Int(c)]
                }
                if found < 0 { break }
                node = found
                j += 1
                if t.nodeToken[Int(node)] >= 0 { best = (t.nodeToken[Int(node)], j - i, node) }
            }
            guard let b = best else { return (out, false) }
            out.append(b.tok)
            lastExtensible = t.nodeEnd[Int(b.node)] > b.node + 1
            i += b.len
        }
        return (out, lastExtensible)
    }
}

/// A trie of token byte strings in preorder: node 0 is the root (the empty string); a node's
/// subtree is the range up to `nodeEnd`.
struct TokenTrie: Sendable {
    let nodeByte: [UInt8]
    let nodeDepth: [UInt16]
    let nodeEnd: [Int32]
    /// The token that ends at a node, or -1.
    let nodeToken: [Int32]
    /// Further tokens with the same bytes as `nodeToken` (rare), by node.
    let duplicateTokens: [Int32: [Int32]]
    let hasDuplicates: Bool
    var count: Int { nodeByte.count }

    init(ids unsorted: [Int], tokens: [[UInt8]]) {
        let ids = unsorted.sorted { a, b in
            let x = tokens[a], y = tokens[b]
            if x == y { return a < b }
            return x.lexicographicallyPrecedes(y)
        }
        var bytes: [UInt8] = [0], depth: [UInt16] = [0], tok: [Int32] = [-1]
        var end: [Int32] = [0]
        var dup: [Int32: [Int32]] = [:]
        var path: [Int32] = [0]
        var prev: [UInt8] = []
        for id in ids {
            let t = tokens[id]
            var common = 0
            while common < prev.count, common < t.count, prev[common] == t[common] { common += 1 }
            while path.count - 1 > common { end[Int(path.removeLast())] = Int32(bytes.count) }
            if common == t.count {
                let node = path[common]
                if tok[Int(node)] < 0 { tok[Int(node)] = Int32(id) } else { dup[node, default: []].append(Int32(id)) }
            } else {
                for k in common..<t.count {
                    bytes.append(t[k]); depth.append(UInt16(min(k + 1, Int(UInt16.max)))); tok.append(-1); end.append(0)
                    path.append(Int32(bytes.count - 1))
                }
                tok[Int(path.last!)] = Int32(id)
            }
            prev = t
        }
        while let closed = path.popLast() { end[Int(closed)] = Int32(bytes.count) }
        nodeByte = bytes
        nodeDepth = depth
        nodeEnd = end
        nodeToken = tok
        duplicateTokens = dup
        hasDuplicates = !dup.isEmpty
    }
}

/// The cached masks of one leaf automaton (states numbered locally, from 0).
final class LeafMaskCache: Sendable {
    let entries = Mutex<[UInt64: MaskEntry]>([:])
    let dfa: DFA
    let closed = Mutex<[Bool]?>(nil)

    init(_ dfa: DFA) { self.dfa = dfa }

    /// States from which every string-slice character keeps the automaton inside the rule (in
    /// non-exit states), so that every slice token is allowed there. Computed on first use.
    var sliceClosed: [Bool] {
        if let c = closed.withLock({ $0 }) { return c }
        let c = LeafMaskCache.closedStates(dfa)
        closed.withLock { $0 = c }
        return c
    }

    /// UTF-8 positions: 0 boundary, 1-3 continuation bytes still needed, 4 after E0, 5 after
    /// ED, 6 after F0, 7 after F4. For each: the byte ranges allowed next and where they lead.
    static let utf8Moves: [[(lo: UInt8, hi: UInt8, next: Int)]] = [
        [(0x20, 0x21, 0), (0x23, 0x5B, 0), (0x5D, 0x7F, 0), (0xC2, 0xDF, 1), (0xE0, 0xE0, 4), (0xE1, 0xEC, 2),
         (0xED, 0xED, 5), (0xEE, 0xEF, 2), (0xF0, 0xF0, 6), (0xF1, 0xF3, 3), (0xF4, 0xF4, 7)],
        [(0x80, 0xBF, 0)], [(0x80, 0xBF, 1)], [(0x80, 0xBF, 2)],
        [(0xA0, 0xBF, 1)], [(0x80, 0x9F, 1)], [(0x90, 0xBF, 2)], [(0x80, 0x8F, 2)],
    ]

    /// Greatest fixpoint over (state, UTF-8 position) pairs: a pair is good when every byte
    /// the UTF-8 automaton allows next leads to a good pair, and at character boundaries the
    /// state is not an exit.
    static func closedStates(_ dfa: DFA) -> [Bool] {
        let n = dfa.count
        var good = [Bool](repeating: true, count: n * 8)
        var rev = [[Int32]](repeating: [], count: n * 8) // (t, v) -> predecessors (s * 8 + u)
        var queue: [Int32] = []
        func bad(_ p: Int) { if good[p] { good[p] = false; queue.append(Int32(p)) } }
        for s in 0..<n {
            if dfa.accepting[s] || !dfa.calls[s].isEmpty { bad(s * 8) }
            let edges = dfa.trans[s] // sorted, disjoint
            for u in 0..<8 {
                for m in utf8Moves[u] {
                    var b = Int(m.lo)
                    for e in edges where Int(e.hi) >= b && Int(e.lo) <= Int(m.hi) {
                        if Int(e.lo) > b { break }
                        rev[Int(e.to) * 8 + m.next].append(Int32(s * 8 + u))
                        b = Int(e.hi) + 1
                        if b > Int(m.hi) { break }
                    }
                    if b <= Int(m.hi) { bad(s * 8 + u) } // some byte has no edge
                }
            }
        }
        while let p = queue.popLast() {
            for q in rev[Int(p)] { bad(Int(q)) }
        }
        return (0..<n).map { good[$0 * 8] }
    }
}

extension TokenVocabulary {
    /// The shared mask cache of a leaf automaton. `key`, when given, names the automaton (the
    /// same key always means the same automaton), so that it is hashed once per vocabulary;
    /// with `byKeyOnly` only rules of that key share the cache.
    func leafCache(for dfa: DFA, key: String? = nil, byKeyOnly: Bool = false) -> LeafMaskCache {
        // Counted leaves in their own namespace: the same leaf key names a product automaton
        // where the table did not fit a grammar's budget.
        let key = (byKeyOnly ? key.map { $0 + "\u{1}counted" } : key).map(ExactString.init)
        if let key, let x = leafCachesByKey.withLock({ $0[key] }) { return x }
        if byKeyOnly, let key {
            return leafCachesByKey.withLock { c in
                if let x = c[key] { return x }
                let x = LeafMaskCache(dfa)
                c[key] = x
                return x
            }
        }
        let x = leafCaches.withLock { c in
            let k = SampledAutomatonKey(dfa: dfa)
            if let x = c[k] { return x }
            let x = LeafMaskCache(dfa)
            c[k] = x
            return x
        }
        if let key { leafCachesByKey.withLock { $0[key] = x } }
        return x
    }

    /// Forgets the shared leaf masks (for cold-start measurements).
    public func removeCachedMasks() {
        leafCaches.withLock { $0.removeAll() }
        leafCachesByKey.withLock { $0.removeAll() }
    }
}

/// An automaton as a dictionary key, hashed on its size and first states only: hashing every
/// state of a large leaf (thousands of states) on each lookup, and again whenever the dictionary
/// grows, cost more than the rest of a compilation. Keys compare in full.
struct SampledAutomatonKey: Hashable {
    let dfa: DFA

    func hash(into h: inout Hasher) {
        h.combine(dfa.count)
        for s in 0..<min(dfa.count, 16) {
            h.combine(dfa.accepting[s])
            h.combine(dfa.trans[s].count)
            for e in dfa.trans[s].prefix(4) { h.combine(e) }
        }
    }

    static func == (a: Self, b: Self) -> Bool { a.dfa == b.dfa }
}
