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
    private let _maxTokenBytes: Int
    /// The last bytes of characters that some token has right before a `▁`.
    private let crossable: [Bool]

    /// `▁`, which stands for a space in the vocabulary.
    static let space: [UInt8] = [0xE2, 0x96, 0x81]

    init(texts: [String], scores: [Float], unknownID: Int32?) {
        self.scores = scores
        var bytes: [UInt8] = [], starts: [Int32] = [0]
        for t in texts {
            bytes.append(contentsOf: t.utf8)
            starts.append(Int32(bytes.count))
        }
        textBytes = bytes
        textStarts = starts
        var longest = 0
        for k in texts.indices { longest = max(longest, Int(starts[k + 1] - starts[k])) }
        _maxTokenBytes = longest
        var crossable = [Bool](repeating: false, count: 256)
        for k in texts.indices {
            let s = Int(starts[k]), e = Int(starts[k + 1])
            var j = s + 1
            while j + 3 <= e {
                if bytes[j] == 0xE2 && bytes[j + 1] == 0x96 && bytes[j + 2] == 0x81 { crossable[Int(bytes[j - 1])] = true }
                j += 1
            }
        }
        self.crossable = crossable
        var size = 1
        while size < 2 * texts.count { size <<= 1 }
        var table = [Int32](repeating: -1, count: size)
        bytes.withUnsafeBufferPointer { b in
            for id in texts.indices {
                let s = Int(starts[id]), e = Int(starts[id + 1])
                var slot = Int(truncatingIfNeeded: SentencePiece.hash(b.baseAddress! + s, e - s)) & (size - 1)
                // A later duplicate text wins, as in llama.cpp's map.
                while table[slot] >= 0 && !SentencePiece.sameText(b, starts, table[slot], b.baseAddress! + s, e - s) {
                    slot = (slot + 1) & (size - 1)
                }
                table[slot] = Int32(id)
            }
        }
        self.table = table
        var byteTokens = [Int32](repeating: unknownID ?? -1, count: 256)
        let digits = Array("0123456789ABCDEF".utf8)
        for b in 0..<256 {
            let hex: [UInt8] = [0x3C, 0x30, 0x78, digits[b >> 4], digits[b & 15], 0x3E]
            let found = hex.withUnsafeBufferPointer { p in SentencePiece.find(table, bytes, starts, p.baseAddress!, 6) }
            if found >= 0 { byteTokens[b] = found; continue }
            let one = [UInt8(b)]
            let single = one.withUnsafeBufferPointer { p in SentencePiece.find(table, bytes, starts, p.baseAddress!, 1) }
            if single >= 0 { byteTokens[b] = single }
        }
        self.byteTokens = byteTokens
    }

    /// The longest token text in bytes: no longer pair can be a token.
    var maxTokenBytes: Int { _maxTokenBytes }

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

    /// The vocabulary's lookup over raw pointers, for the length of one encoding.
    struct Lookup {
        let bytes: UnsafePointer<UInt8>, starts: UnsafePointer<Int32>, table: UnsafePointer<Int32>
        let mask: Int

        /// The token spelled exactly `p[0..<n]`, or -1.
        @inline(__always) func token(_ p: UnsafePointer<UInt8>, _ n: Int) -> Int32 {
            var slot = Int(truncatingIfNeeded: SentencePiece.hash(p, n)) & mask
            while true {
                let id = table[slot]
                if id < 0 { return -1 }
                let s = Int(starts[Int(id)])
                if Int(starts[Int(id) + 1]) - s == n && memcmp(bytes + s, p, n) == 0 { return id }
                slot = (slot + 1) & mask
            }
        }
    }

    func withLookup<R>(_ body: (Lookup) -> R) -> R {
        textBytes.withUnsafeBufferPointer { b in
            textStarts.withUnsafeBufferPointer { st in
                table.withUnsafeBufferPointer { t in
                    // (An empty vocabulary has no bytes: any address will do, nothing is read.)
                    body(Lookup(bytes: b.baseAddress ?? UnsafePointer(bitPattern: 1)!, starts: st.baseAddress!, table: t.baseAddress!, mask: t.count - 1))
                }
            }
        }
    }

    @inline(__always) static func sameText(_ b: UnsafeBufferPointer<UInt8>, _ starts: [Int32], _ id: Int32,
                                           _ p: UnsafePointer<UInt8>, _ n: Int) -> Bool {
        let s = Int(starts[Int(id)]), e = Int(starts[Int(id) + 1])
        return e - s == n && memcmp(b.baseAddress! + s, p, n) == 0
    }

    static func find(_ table: [Int32], _ bytes: [UInt8], _ starts: [Int32], _ p: UnsafePointer<UInt8>, _ n: Int) -> Int32 {
        bytes.withUnsafeBufferPointer { b in
            starts.withUnsafeBufferPointer { st in
                table.withUnsafeBufferPointer { t in
                    Lookup(bytes: b.baseAddress ?? UnsafePointer(bitPattern: 1)!, starts: st.baseAddress!, table: t.baseAddress!, mask: t.count - 1).token(p, n)
                }
            }
        }
    }

    /// Calls `body` with each segment of `text` (see the type's notes) in order.
    func forEachSegment(_ text: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        var start = 0, p = 1
        let n = text.count
        while p + 3 <= n {
            if text[p] == 0xE2 && text[p + 1] == 0x96 && text[p + 2] == 0x81 && !crossable[Int(text[p - 1])] {
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
        let maxBytes = _maxTokenBytes
        scores.withUnsafeBufferPointer { sc in
            withLookup { v in
                @inline(__always) func addPair(_ left: Int32, _ right: Int32) {
                    guard left >= 0, right >= 0 else { return }
                    let n = Int(w.length[Int(left)] + w.length[Int(right)])
                    guard n <= maxBytes else { return }
                    let id = v.token(base + Int(w.start[Int(left)]), n)
                    guard id >= 0 else { return }
                    w.push(SentencePieceWorkspace.Pair(score: sc[Int(id)], left: left, right: right, size: Int32(n)))
                }
                for k in 1..<w.start.count { addPair(Int32(k - 1), Int32(k)) }
                while let top = w.popBest() {
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
/// (start, length 0 once merged into the left neighbour) and a heap of candidate pairs.
struct SentencePieceWorkspace {
    struct Pair {
        var score: Float
        var left: Int32, right: Int32
        var size: Int32
        /// Higher score first; of equal scores, the leftmost.
        @inline(__always) func before(_ o: Pair) -> Bool { score > o.score || (score == o.score && left < o.left) }
    }
    var start: [Int32] = [], length: [Int32] = [], prev: [Int32] = [], next: [Int32] = []
    var heap: [Pair] = []

    mutating func reset() {
        start.removeAll(keepingCapacity: true); length.removeAll(keepingCapacity: true)
        prev.removeAll(keepingCapacity: true); next.removeAll(keepingCapacity: true)
        heap.removeAll(keepingCapacity: true)
    }

    mutating func push(_ p: Pair) {
        heap.append(p)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].before(heap[parent]) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    mutating func popBest() -> Pair? {
        guard let top = heap.first else { return nil }
        let last = heap.removeLast()
        if heap.isEmpty { return top }
        heap[0] = last
        var i = 0
        let n = heap.count
        while true {
            let l = 2 * i + 1, r = l + 1
            var best = i
            if l < n && heap[l].before(heap[best]) { best = l }
            if r < n && heap[r].before(heap[best]) { best = r }
            if best == i { break }
            heap.swapAt(i, best)
            i = best
        }
        return top
    }
}
