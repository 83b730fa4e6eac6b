/// A candidate merge of two neighbouring symbols, ordered by how soon it should be applied.
protocol MergeCandidate {
    /// Whether this candidate is applied before `other`.
    func before(_ other: Self) -> Bool
}

/// The candidate merges of one word or fragment, best on top: BPE's by rank, SentencePiece's by
/// score. Stale candidates stay in and are skipped by the caller when popped.
struct MergeHeap<Candidate: MergeCandidate> {
    private var items: [Candidate] = []

    var isEmpty: Bool { items.isEmpty }

    mutating func removeAll() { items.removeAll(keepingCapacity: true) }

    mutating func push(_ c: Candidate) {
        items.append(c)
        var i = items.count - 1
        while i > 0 {
            let p = (i - 1) >> 1
            guard c.before(items[p]) else { break }
            items[i] = items[p]
            i = p
        }
        items[i] = c
    }

    mutating func popBest() -> Candidate? {
        guard let top = items.first else { return nil }
        let last = items.removeLast()
        let count = items.count
        if count > 0 {
            var i = 0
            while true {
                let l = 2 * i + 1
                if l >= count { break }
                var m = l
                if l + 1 < count && items[l + 1].before(items[l]) { m = l + 1 }
                guard items[m].before(last) else { break }
                items[i] = items[m]
                i = m
            }
            items[i] = last
        }
        return top
    }
}
