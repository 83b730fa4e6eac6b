/// The KV slots of a context and what each holds, for reuse of shared prompt prefixes.
///
/// Design: every sequence runs in a slot of its own (slots × context bounds the cache's
/// memory); when it finishes, its slot keeps the tokens it computed, as a cache entry, until
/// the least recently used entry is evicted for a new sequence (or, on a GPU whose paged cache
/// is short of pages, to make room: ``SchedulerCore``). A new request looks for the
/// longest prefix it shares with any slot, idle or running. A returning conversation (it
/// continues at least half of an idle slot's tokens) takes that slot over and prefills only
/// what is new. Otherwise the prefix is copied into another slot (copy-on-admit): copying
/// 2 × layers × prefix × kv_dim halves costs far less than recomputing them, it leaves the entry
/// for later requests (the same instructions for a thousand records), and on the CPU a slot
/// stays one contiguous sequence, which is what its attention kernel reads. When the source is still
/// prefilling the shared tokens (many requests with the same instructions arriving together),
/// the newcomer waits until they are computed and copies them then, so a shared prefix is
/// prefilled once. On a GPU the cache is paged (``KVPages``) and the "copy" shares the prefix's
/// whole pages; on a CPU, with a few dozen slots, a copy is cheaper than an indirection in every
/// attention read.
struct PrefixCache {
    struct Slot {
        /// The tokens whose keys and values the slot holds (for an idle slot).
        var tokens: [Int32] = []
        /// The sequence running in the slot.
        var owner: UInt64?
        /// The adapter (a context's id, 0: none) that computed the slot's keys and values.
        var adapter = 0
        var lastUse: UInt64 = 0
    }

    private(set) var slots: [Slot]
    private var clock: UInt64 = 0

    init(count: Int) { slots = Array(repeating: Slot(), count: count) }

    /// Where a new sequence should get its prefix from.
    struct Match {
        var slot: Int
        var shared: Int
        /// The sequence running in `slot`, when the prefix is still being computed there.
        var owner: UInt64?
    }

    /// The slot sharing the longest prefix with `tokens` (running sequences' planned tokens
    /// from `planned`), preferring prefixes already computed, then the most recently used.
    /// Only slots computed with the same `adapter` qualify: another adapter's keys and values differ.
    func bestMatch(for tokens: [Int32], adapter: Int = 0, planned: (UInt64) -> (tokens: ArraySlice<Int32>, computed: Int)?) -> Match? {
        var best: (match: Match, ready: Bool, use: UInt64)?
        for (i, slot) in slots.enumerated() where slot.adapter == adapter {
            let candidate: ArraySlice<Int32>
            var ready = true
            if let owner = slot.owner {
                guard let p = planned(owner) else { continue }
                candidate = p.tokens
                let n = Self.sharedLength(tokens, candidate)
                ready = p.computed >= n
                guard n > 0 else { continue }
                let better = best.map { n > $0.match.shared || (n == $0.match.shared && ready && !$0.ready) } ?? true
                if better { best = (Match(slot: i, shared: n, owner: owner), ready, slot.lastUse) }
                continue
            }
            candidate = slot.tokens[...]
            let n = Self.sharedLength(tokens, candidate)
            guard n > 0 else { continue }
            let better = best.map {
                n > $0.match.shared || (n == $0.match.shared && (!$0.ready || slot.lastUse > $0.use))
            } ?? true
            if better { best = (Match(slot: i, shared: n, owner: nil), ready, slot.lastUse) }
        }
        return best?.match
    }

    /// An idle slot to put a new sequence in (never `excluding`): an empty one, else the least
    /// recently used.
    func freeSlot(excluding: Int? = nil) -> Int? {
        var pick: Int?
        for (i, slot) in slots.enumerated() where slot.owner == nil && i != excluding {
            if slot.tokens.isEmpty { return i }
            if pick.map({ slot.lastUse < slots[$0].lastUse }) ?? true { pick = i }
        }
        return pick
    }

    mutating func claim(_ slot: Int, for owner: UInt64, adapter: Int = 0) {
        slots[slot].owner = owner
        slots[slot].adapter = adapter
        slots[slot].tokens = []
        clock += 1
        slots[slot].lastUse = clock
    }

    /// The slot's sequence ended; its first `tokens` stay as a cache entry.
    mutating func release(_ slot: Int, holding tokens: ArraySlice<Int32>) {
        slots[slot].owner = nil
        slots[slot].tokens = Array(tokens)
        clock += 1
        slots[slot].lastUse = clock
    }

    /// An idle slot's entry is dropped (its cache emptied to make room).
    mutating func forget(_ slot: Int) {
        if slots[slot].owner == nil { slots[slot].tokens = [] }
    }

    mutating func forgetAll() {
        for i in slots.indices where slots[i].owner == nil { slots[i].tokens = [] }
    }

    var idleCount: Int { slots.reduce(0) { $0 + ($1.owner == nil ? 1 : 0) } }
    var cachedTokens: Int { slots.reduce(0) { $0 + ($1.owner == nil ? $1.tokens.count : 0) } }

    static func sharedLength(_ a: [Int32], _ b: ArraySlice<Int32>) -> Int {
        var n = 0
        let limit = min(a.count, b.count)
        var j = b.startIndex
        while n < limit && a[n] == b[j] { n += 1; j += 1 }
        return n
    }
}
