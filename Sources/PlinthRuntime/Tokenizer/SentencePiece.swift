import Foundation

/// SentencePiece's BPE (`tokenizer.ggml.model = llama`: Gemma, Llama 2, Mistral …) as llama.cpp
/// runs it: the text's spaces become `▁`, every character starts as a symbol, and the adjacent
/// pair whose concatenation is the highest-scoring token is merged (ties: the leftmost) until no
/// pair is a token. A symbol that is not a token falls back to its bytes' `<0xXX>` tokens.
///
/// Every merged symbol is a token by construction, so llama.cpp's re-segmentation of non-token
/// symbols only ever meets single characters; those go straight to bytes here.
///
/// A merge can cross from a character into a following `▁` only if some token holds that pair.
/// Where none does, the text splits there into segments that never interact (no candidate pair
/// spans two of them, and the leftmost-first tie rule keeps its order inside each), so each
/// segment, a word with its leading `▁`, encodes alone and its tokens can be cached.
struct SentencePiece: Sendable {
    let scores: [Float]
    /// The tokens' texts as the vocabulary spells them (`▁the`), one after another.
    private let textBytes: [UInt8]
    private let textStarts: [Int32]
    /// Open addressing over the texts' hashes: a token id, or -1.
    private let table: [Int32]
    /// The `<0xXX>` token of each byte (else the byte's own one-byte token, else unknown; -1 for none).
    let byteTokens: [Int32]
    /// The longest token text in bytes: no longer pair can be a token.
    let maxTokenBytes: Int
    /// The last bytes of characters that some token has right before a `▁`.
    private let crossable: [Bool]

    /// `▁`, which stands for a space in the vocabulary.
    static let space: [UInt8] = [0xE2, 0x96, 0x81]

    /// Whether `bytes` hold a `▁` at `i`.
    @inline(__always) static func isSpace<C: RandomAccessCollection>(_ bytes: C, at i: Int) -> Bool where C.Element == UInt8, C.Index == Int {
        i + 3 <= bytes.endIndex && bytes[i] == 0xE2 && bytes[i + 1] == 0x96 && bytes[i + 2] == 0x81
    }

    init(texts: [String], scores: [Float], unknownID: Int32?) {
        self.scores = scores
        var bytes: [UInt8] = [], starts: [Int32] = [0]
        for t in texts {
            bytes.append(contentsOf: t.utf8)
            starts.append(Int32(bytes.count))
        }
        var longest = 0
        var crossable = [Bool](repeating: false, count: 256)
        for k in texts.indices {
            let s = Int(starts[k]), e = Int(starts[k + 1])
            longest = max(longest, e - s)
            let text = bytes[..<e]
            for j in (s + 1)..<max(e, s + 1) where SentencePiece.isSpace(text, at: j) { crossable[Int(bytes[j - 1])] = true }
        }
        var size = 1
        while size < 2 * texts.count { size <<= 1 }
        var table = [Int32](repeating: -1, count: size)
        // A later duplicate text takes its slot, as in llama.cpp's map.
        for id in texts.indices {
            let s = Int(starts[id]), e = Int(starts[id + 1])
            let slot = bytes.withUnsafeBufferPointer { b in
                Lookup.with(b, starts, table) { $0.slot(b.baseAddress! + s, e - s) }
            }
            table[slot] = Int32(id)
        }
        var byteTokens = [Int32](repeating: unknownID ?? -1, count: 256)
        bytes.withUnsafeBufferPointer { b in
            Lookup.with(b, starts, table) { v in
                for c in 0..<256 {
                    let spelled = ByteToken.spelling(UInt8(c)).withUnsafeBufferPointer { v.token($0.baseAddress!, 6) }
                    let single = [UInt8(c)].withUnsafeBufferPointer { v.token($0.baseAddress!, 1) }
                    if spelled >= 0 { byteTokens[c] = spelled } else if single >= 0 { byteTokens[c] = single }
                }
            }
        }
        textBytes = bytes
        textStarts = starts
        self.table = table
        self.byteTokens = byteTokens
        maxTokenBytes = longest
        self.crossable = crossable
    }

    @inline(__always) static func hash(_ p: UnsafePointer<UInt8>, _ n: Int) -> UInt64 {
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(n)
        var i = 0
        let raw = UnsafeRawPointer(p)
        while i + 8 <= n {
            h = (h ^ raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 32
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < n { tail |= UInt64(p[i]) << shift; shift += 8; i += 1 }
        h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        return h ^ (h >> 29)
    }

    /// The vocabulary's lookup over raw pointers, for the length of one encoding (or of the
    /// table's construction).
    struct Lookup {
        let bytes: UnsafePointer<UInt8>, starts: UnsafePointer<Int32>, table: UnsafePointer<Int32>
        let mask: Int

        static func with<R>(_ bytes: UnsafeBufferPointer<UInt8>, _ starts: [Int32], _ table: [Int32], _ body: (Lookup) -> R) -> R {
            starts.withUnsafeBufferPointer { st in
                table.withUnsafeBufferPointer { t in
                    // (An empty vocabulary has no bytes: any address will do, nothing is read.)
                    body(Lookup(bytes: bytes.baseAddress ?? UnsafePointer(bitPattern: 1)!, starts: st.baseAddress!, table: t.baseAddress!, mask: t.count - 1))
                }
            }
        }

        /// The slot of the text `p[0..<n]`: the one holding its token, or the empty one where it
        /// would go.
        @inline(__always) func slot(_ p: UnsafePointer<UInt8>, _ n: Int) -> Int {
            var slot = Int(truncatingIfNeeded: SentencePiece.hash(p, n)) & mask
            while true {
                let id = table[slot]
                if id < 0 { return slot }
                let s = Int(starts[Int(id)])
                if Int(starts[Int(id) + 1]) - s == n && memcmp(bytes + s, p, n) == 0 { return slot }
                slot = (slot + 1) & mask
            }
        }

        /// The token spelled exactly `p[0..<n]`, or -1.
        @inline(__always) func token(_ p: UnsafePointer<UInt8>, _ n: Int) -> Int32 { table[slot(p, n)] }
    }

    func withLookup<R>(_ body: (Lookup) -> R) -> R {
        textBytes.withUnsafeBufferPointer { b in Lookup.with(b, textStarts, table, body) }
    }

    /// Calls `body` with each segment of `text` (see the type's notes) in order.
    func forEachSegment(_ text: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        var start = 0, p = 1
        let n = text.count
        while p + 3 <= n {
            if SentencePiece.isSpace(text, at: p) && !crossable[Int(text[p - 1])] {
                body(UnsafeBufferPointer(rebasing: text[start..<p]))
                start = p
                p += 3
            } else {
                p += 1
            }
        }
        if start < n { body(UnsafeBufferPointer(rebasing: text[start..<n])) }
    }

    /// Appends the tokens of `text` (spaces already written as `▁`).
    func encode(_ text: UnsafeBufferPointer<UInt8>, into out: inout [Int32], workspace w: inout SentencePieceWorkspace) {
        guard let base = text.baseAddress, text.count > 0 else { return }
        w.reset()
        var i = 0
        while i < text.count {
            let b = text[i]
            let len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4
            let n = min(len, text.count - i)
            w.start.append(Int32(i)); w.length.append(Int32(n))
            w.prev.append(Int32(w.start.count - 2)); w.next.append(Int32(w.start.count))
            i += n
        }
        w.next[w.next.count - 1] = -1
        let maxBytes = maxTokenBytes
        scores.withUnsafeBufferPointer { sc in
            withLookup { v in
                @inline(__always) func addPair(_ left: Int32, _ right: Int32) {
                    guard left >= 0, right >= 0 else { return }
                    let n = Int(w.length[Int(left)] + w.length[Int(right)])
                    guard n <= maxBytes else { return }
                    let id = v.token(base + Int(w.start[Int(left)]), n)
                    guard id >= 0 else { return }
                    w.heap.push(SentencePieceWorkspace.Pair(score: sc[Int(id)], left: left, right: right, size: Int32(n)))
                }
                for k in 1..<w.start.count { addPair(Int32(k - 1), Int32(k)) }
                while let top = w.heap.popBest() {
                    let l = Int(top.left), r = Int(top.right)
                    // Stale: one side was merged since, or grew.
                    if w.length[l] == 0 || w.length[r] == 0 || w.length[l] + w.length[r] != top.size { continue }
                    w.length[l] += w.length[r]
                    w.length[r] = 0
                    w.next[l] = w.next[r]
                    if w.next[r] >= 0 { w.prev[Int(w.next[r])] = top.left }
                    addPair(w.prev[l], top.left)
                    addPair(top.left, w.next[l])
                }
                var k: Int32 = 0
                while k >= 0 {
                    let s = Int(w.start[Int(k)]), n = Int(w.length[Int(k)])
                    let id = n <= maxBytes ? v.token(base + s, n) : -1
                    if id >= 0 {
                        out.append(id)
                    } else {
                        for j in s..<(s + n) where byteTokens[Int(text[j])] >= 0 { out.append(byteTokens[Int(text[j])]) }
                    }
                    k = w.next[Int(k)]
                }
            }
        }
    }
}

/// Buffers of one encoding, reused across fragments: the symbols as a linked list over the text
/// (start, length 0 once merged into the left neighbour) and the candidate pairs.
struct SentencePieceWorkspace {
    struct Pair: MergeCandidate {
        var score: Float
        var left: Int32, right: Int32
        var size: Int32
        /// Higher score first; of equal scores, the leftmost.
        @inline(__always) func before(_ o: Pair) -> Bool { score > o.score || (score == o.score && left < o.left) }
    }
    var start: [Int32] = [], length: [Int32] = [], prev: [Int32] = [], next: [Int32] = []
    var heap = MergeHeap<Pair>()

    mutating func reset() {
        start.removeAll(keepingCapacity: true); length.removeAll(keepingCapacity: true)
        prev.removeAll(keepingCapacity: true); next.removeAll(keepingCapacity: true)
        heap.removeAll()
    }
}
