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
    let nodeByte: [UInt8]
    let nodeDepth: [UInt16]
    /// One past the last node of a node's subtree (preorder).
    let nodeEnd: [Int32]
    /// The token that ends at a node, or -1.
    let nodeToken: [Int32]
    /// Further tokens with the same bytes as `nodeToken` (rare), by node.
    let duplicateTokens: [Int32: [Int32]]
    /// For each token in the trie, its node.
    let tokenNode: [Int32]

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
        maskWordCount = (tokens.count + 31) / 32
        tokenBytes = tokens
        let eos = Set(endOfSequence)
        var ids = (0..<tokens.count).filter { !tokens[$0].isEmpty && !excluded.contains(Int32($0)) && !eos.contains(Int32($0)) }
        ids.sort { a, b in
            let x = tokens[a], y = tokens[b]
            if x == y { return a < b }
            return x.lexicographicallyPrecedes(y)
        }
        var bytes: [UInt8] = [0], depth: [UInt16] = [0], tok: [Int32] = [-1]
        var end: [Int32] = [0]
        var dup: [Int32: [Int32]] = [:]
        var tokenNode = [Int32](repeating: -1, count: tokens.count)
        var path: [Int32] = [0] // node at each depth of the previous token
        var prev: [UInt8] = []
        var maxLen = 0
        for id in ids {
            let t = tokens[id]
            maxLen = max(maxLen, t.count)
            var common = 0
            while common < prev.count, common < t.count, prev[common] == t[common] { common += 1 }
            // Close nodes deeper than the shared prefix.
            while path.count - 1 > common {
                let closed = path.removeLast()
                end[Int(closed)] = Int32(bytes.count)
            }
            if common == t.count {
                // Same bytes as the previous token.
                let node = path[common]
                if tok[Int(node)] < 0 { tok[Int(node)] = Int32(id) } else { dup[node, default: []].append(Int32(id)) }
                tokenNode[id] = node
            } else {
                for k in common..<t.count {
                    bytes.append(t[k]); depth.append(UInt16(min(k + 1, Int(UInt16.max)))); tok.append(-1); end.append(0)
                    path.append(Int32(bytes.count - 1))
                }
                let node = path.last!
                tok[Int(node)] = Int32(id)
                tokenNode[id] = node
            }
            prev = t
        }
        while let closed = path.popLast() { end[Int(closed)] = Int32(bytes.count) }
        nodeByte = bytes
        nodeDepth = depth
        nodeEnd = end
        nodeToken = tok
        duplicateTokens = dup
        self.tokenNode = tokenNode
        maxTokenLength = maxLen
    }

    /// The bytes of a token.
    public func bytes(of token: Int32) -> [UInt8] {
        guard token >= 0, Int(token) < size else { return [] }
        return tokenBytes[Int(token)]
    }

    var nodeCount: Int { nodeByte.count }

    /// Greedy longest-match tokenization of `bytes` through the trie (tokens in the trie only).
    func greedyTokens(_ bytes: [UInt8]) -> (tokens: [Int32], lastNodeHasChildren: Bool) {
        var out: [Int32] = []
        var i = 0
        var lastExtensible = false
        while i < bytes.count {
            var node: Int32 = 0
            var best: (tok: Int32, len: Int, node: Int32)? = nil
            var j = i
            while j < bytes.count {
                // Find child of `node` with byte bytes[j].
                var c = node + 1
                let end = nodeEnd[Int(node)]
                var found: Int32 = -1
                while c < end {
                    if nodeByte[Int(c)] == bytes[j] { found = c; break }
                    c = nodeEnd[Int(c)]
                }
                if found < 0 { break }
                node = found
                j += 1
                if nodeToken[Int(node)] >= 0 { best = (nodeToken[Int(node)], j - i, node) }
            }
            guard let b = best else { return (out, false) }
            out.append(b.tok)
            lastExtensible = nodeEnd[Int(b.node)] > b.node + 1
            i += b.len
        }
        return (out, lastExtensible)
    }
}
