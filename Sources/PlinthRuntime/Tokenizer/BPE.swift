/// The merge rules of a byte-level BPE vocabulary, keyed by pairs of symbol ids.
///
/// Every string that occurs in a merge rule gets a symbol id: its token id when the vocabulary has
/// it, otherwise an id past the end of the vocabulary. A word starts as one symbol per byte and
/// merges pairs by rank, exactly like llama.cpp's `llm_tokenizer_bpe_session`, but without
/// building a single string in the loop.
struct BPEMerges: Sendable {
    /// Number of real tokens; symbol ids at or past it are merge intermediates that are not tokens.
    let vocabularySize: Int
    /// The symbol of each single byte (its byte-level character), or -1.
    let byteSymbol: [Int32]
    private let table: PairTable

    /// - Parameters:
    ///   - tokenIDs: token text (its UTF-8 bytes) → id.
    ///   - merges: `"left right"` rules, best first.
    init(tokenIDs: [WordKey: Int32], vocabularySize: Int, merges: [String]) {
        self.vocabularySize = vocabularySize
        var extra: [WordKey: Int32] = [:]
        var nextExtra = Int32(vocabularySize)
        func symbol(_ bytes: [UInt8]) -> Int32 {
            let key = WordKey(bytes)
            if let id = tokenIDs[key] ?? extra[key] { return id }
            let id = nextExtra
            nextExtra += 1
            extra[key] = id
            return id
        }
        var table = PairTable(capacity: merges.count)
        for (rank, rule) in merges.enumerated() {
            // split at the first space after the first character, as llama.cpp does
            let utf8 = rule.utf8
            guard !utf8.isEmpty else { continue }
            var split: String.Index? = nil
            var i = utf8.index(after: utf8.startIndex)
            while i < utf8.endIndex {
                if utf8[i] == 0x20 { split = i; break }
                i = utf8.index(after: i)
            }
            guard let sp = split else { continue }
            let left = Array(utf8[utf8.startIndex..<sp])
            let right = Array(utf8[utf8.index(after: sp)...])
            let l = symbol(left)
            let r = symbol(right)
            let m = symbol(left + right)
            table.insertIfAbsent(left: l, right: r, rank: Int32(rank), result: m)
        }
        self.table = table
        var bytes = [Int32](repeating: -1, count: 256)
        for b in 0..<256 {
            let key = WordKey(ByteLevel.utf8ForByte[b])
            if let id = tokenIDs[key] ?? extra[key] { bytes[b] = id }
        }
        self.byteSymbol = bytes
    }

    @inline(__always) func merge(_ left: Int32, _ right: Int32) -> (rank: Int32, result: Int32)? {
        table.find(left: left, right: right)
    }
}

/// An open-addressing hash table from a pair of symbol ids to (rank, merged symbol).
struct PairTable: Sendable {
    private var keys: [UInt64]
    private var values: [UInt64]
    private let mask: Int
    private static let empty = UInt64.max

    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        keys = [UInt64](repeating: PairTable.empty, count: size)
        values = [UInt64](repeating: 0, count: size)
        mask = size - 1
    }

    @inline(__always) private static func key(_ l: Int32, _ r: Int32) -> UInt64 {
        UInt64(UInt32(bitPattern: l)) << 32 | UInt64(UInt32(bitPattern: r))
    }

    @inline(__always) private func slot(_ k: UInt64) -> Int {
        Int(truncatingIfNeeded: (k &* 0x9E37_79B9_7F4A_7C15) >> 32) & mask
    }

    mutating func insertIfAbsent(left: Int32, right: Int32, rank: Int32, result: Int32) {
        let k = PairTable.key(left, right)
        var i = slot(k)
        while keys[i] != PairTable.empty {
            if keys[i] == k { return } // the first (best) rule wins
            i = (i + 1) & mask
        }
        keys[i] = k
        values[i] = UInt64(UInt32(bitPattern: rank)) << 32 | UInt64(UInt32(bitPattern: result))
    }

    @inline(__always) func find(left: Int32, right: Int32) -> (rank: Int32, result: Int32)? {
        let k = PairTable.key(left, right)
        return keys.withUnsafeBufferPointer { kp -> (Int32, Int32)? in
            var i = slot(k)
            while true {
                let stored = kp[i]
                if stored == k {
                    let v = values[i]
                    return (Int32(truncatingIfNeeded: v >> 32), Int32(truncatingIfNeeded: v))
                }
                if stored == PairTable.empty { return nil }
                i = (i + 1) & mask
            }
        }
    }
}

/// Reusable buffers for merging the bytes of one word at a time.
struct BPEWorkspace {
    private var id: [Int32] = []
    private var len: [Int32] = []
    private var prev: [Int32] = []
    private var next: [Int32] = []
    private var heap = MergeHeap<Candidate>()

    private struct Candidate: MergeCandidate {
        var rank: Int32
        var left: Int32
        var right: Int32
        var leftLength: Int32
        var rightLength: Int32
        var result: Int32

        @inline(__always) func before(_ o: Candidate) -> Bool {
            rank < o.rank || (rank == o.rank && left < o.left)
        }
    }

    /// Appends the tokens of one word (its raw bytes) to `output`.
    mutating func encode(_ word: UnsafeBufferPointer<UInt8>, merges: BPEMerges, into output: inout [Int32]) {
        let n = word.count
        guard n > 0 else { return }
        if n == 1 {
            emit(start: 0, length: 1, symbol: merges.byteSymbol[Int(word[0])], word: word, merges: merges, into: &output)
            return
        }
        id.removeAll(keepingCapacity: true)
        len.removeAll(keepingCapacity: true)
        prev.removeAll(keepingCapacity: true)
        next.removeAll(keepingCapacity: true)
        heap.removeAll()
        for i in 0..<n {
            id.append(merges.byteSymbol[Int(word[i])])
            len.append(1)
            prev.append(Int32(i - 1))
            next.append(i + 1 < n ? Int32(i + 1) : -1)
        }
        for i in 1..<n { propose(Int32(i - 1), Int32(i), merges) }

        while let c = heap.popBest() {
            let l = Int(c.left), r = Int(c.right)
            // stale: one side has been merged away or has grown since the pair was proposed
            if len[l] != c.leftLength || len[r] != c.rightLength { continue }
            len[l] += len[r]
            len[r] = 0
            id[l] = c.result
            next[l] = next[r]
            if next[r] >= 0 { prev[Int(next[r])] = c.left }
            propose(prev[l], c.left, merges)
            propose(c.left, next[l], merges)
        }

        var i = 0
        var start = 0
        while i >= 0 {
            let length = Int(len[i])
            emit(start: start, length: length, symbol: id[i], word: word, merges: merges, into: &output)
            start += length
            i = Int(next[i])
        }
    }

    /// A final symbol becomes its token; a symbol that is not a token falls back, byte by byte, to
    /// the single-character tokens of its printable ASCII bytes (others are dropped, as in llama.cpp).
    @inline(__always)
    private func emit(start: Int, length: Int, symbol: Int32, word: UnsafeBufferPointer<UInt8>,
                      merges: BPEMerges, into output: inout [Int32]) {
        if symbol >= 0 && Int(symbol) < merges.vocabularySize {
            output.append(symbol)
            return
        }
        for j in start..<(start + length) {
            let b = word[j]
            guard b >= 0x21 && b <= 0x7E else { continue }
            let t = merges.byteSymbol[Int(b)]
            if t >= 0 && Int(t) < merges.vocabularySize { output.append(t) }
        }
    }

    @inline(__always)
    private mutating func propose(_ left: Int32, _ right: Int32, _ merges: BPEMerges) {
        guard left >= 0, right >= 0 else { return }
        let a = id[Int(left)], b = id[Int(right)]
        guard a >= 0, b >= 0, let m = merges.merge(a, b) else { return }
        heap.push(Candidate(rank: m.rank, left: left, right: right,
                            leftLength: len[Int(left)], rightLength: len[Int(right)], result: m.result))
    }
}
