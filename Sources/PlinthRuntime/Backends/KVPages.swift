/// Which pages of a paged KV cache each slot holds (the GPU's cache, ``CUDAForward``).
///
/// The cache is a pool of pages of `pageLength` positions (all layers alike: a page index names
/// the same rows in every layer's keys and values). A slot holds the pages of the positions it
/// has stored, so memory follows the tokens held rather than slots × context. A slot that copies
/// another's prefix shares its whole pages (counted references) and copies only the partly filled
/// last one; a shared page is copied before a slot writes into it. Page 0 is the scratch slot's
/// (the padding rows', index `slotCount`), never another slot's.
struct KVPages {
    /// A copy of a page's first `rows` positions into another page, in every layer, to run on the
    /// device before the step that needs it.
    struct Copy: Equatable {
        var from: Int32, to: Int32, rows: Int
    }

    let pageLength: Int
    /// Table entries per slot: the context in pages.
    let pagesPerSlot: Int
    let slotCount: Int
    let pageCount: Int
    /// `(slotCount + 1) × pagesPerSlot` page indices (the kernels' page table); entries past a
    /// slot's pages are 0, which no kernel reads.
    private(set) var table: [Int32]
    /// Slots whose rows of `table` changed since ``clean()``.
    private(set) var dirty: Range<Int>?
    private var held: [Int]
    private var references: [Int32]
    private var free: [Int32]

    var freeCount: Int { free.count }

    init(pageLength: Int, contextLength: Int, slots: Int, pageCount: Int) {
        precondition(pageLength > 0 && pageLength & (pageLength - 1) == 0, "a power of two")
        self.pageLength = pageLength
        pagesPerSlot = (contextLength + pageLength - 1) / pageLength
        slotCount = slots
        self.pageCount = pageCount
        precondition(pageCount >= pagesPerSlot + 1, "room for one slot's context and the scratch page")
        table = Array(repeating: 0, count: (slots + 1) * pagesPerSlot)
        held = Array(repeating: 0, count: slots + 1)
        held[slots] = 1
        references = Array(repeating: 0, count: pageCount)
        references[0] = 1
        // Popped from the end: low pages first.
        free = (1..<Int32(pageCount)).reversed()
    }

    /// Pages `slot` holds.
    func pagesHeld(_ slot: Int) -> Int { held[slot] }

    /// Pages `slot` takes to write positions `first...last` (none where `last < first`): one for
    /// each page past those it holds, and its own copy of each it shares.
    func pagesToWrite(slot: Int, from first: Int, through last: Int) -> Int {
        let last = min(last, pagesPerSlot * pageLength - 1)
        guard first <= last else { return 0 }
        let row = slot * pagesPerSlot
        return ((first / pageLength)...(last / pageLength)).count { $0 >= held[slot] || references[Int(table[row + $0])] > 1 }
    }

    /// Pages that emptying every slot of `slots` would free: those no other slot holds.
    func pagesFreed(emptying slots: Set<Int>) -> Int {
        var holds: [Int32: Int32] = [:]
        for s in slots {
            for j in 0..<held[s] { holds[table[s * pagesPerSlot + j], default: 0] += 1 }
        }
        return holds.count { references[Int($0.key)] == $0.value }
    }

    mutating func clean() { dirty = nil }

    private mutating func touch(_ slot: Int) {
        dirty = dirty.map { min($0.lowerBound, slot)..<max($0.upperBound, slot + 1) } ?? slot..<(slot + 1)
    }

    /// Throws unless `count` pages are free (or will be: `freeing` more about to be freed); called
    /// before any change, so that a failure changes nothing.
    private func reserve(_ count: Int, freeing: Int = 0) throws {
        guard free.count + freeing < count else { return }
        throw BackendError.cudaFailed("the KV cache's \(pageCount) pages of \(pageLength) positions are all in use (\(count) more needed, \(free.count) free)")
    }

    private mutating func take() -> Int32 {
        let p = free.removeLast()
        references[Int(p)] = 1
        return p
    }

    private mutating func release(_ page: Int32) {
        references[Int(page)] -= 1
        if references[Int(page)] == 0 { free.append(page) }
    }

    /// Makes `slot` hold pages for positions up to `last` and own those from `first` on, which a
    /// step is about to write: new pages where it has none, and a page of its own for one it shares
    /// (its positions before `first` copied). Returns the copies to run first. Throws
    /// ``BackendError/cudaFailed(_:)``, changing nothing, when the pool has too few free pages.
    mutating func prepare(slot: Int, writing first: Int, through last: Int) throws -> [Copy] {
        precondition(slot >= 0 && slot < slotCount && first >= 0 && first <= last && last < pagesPerSlot * pageLength)
        let row = slot * pagesPerSlot, pagesWritten = (first / pageLength)...(last / pageLength)
        // Pages are held from the first on: a write past them extends the run.
        precondition(first / pageLength <= held[slot], "slot \(slot) writes position \(first) past its pages")
        try reserve(pagesToWrite(slot: slot, from: first, through: last))
        var copies: [Copy] = []
        for j in pagesWritten {
            if j >= held[slot] {
                table[row + j] = take()
                held[slot] += 1
                touch(slot)
            } else if references[Int(table[row + j])] > 1 {
                let shared = table[row + j], own = take()
                let rows = min(pageLength, first - j * pageLength)
                if rows > 0 { copies.append(Copy(from: shared, to: own, rows: rows)) }
                release(shared)
                table[row + j] = own
                touch(slot)
            }
        }
        return copies
    }

    /// Keeps `slot`'s pages of its first `keeping` positions and frees the rest.
    mutating func truncate(slot: Int, keeping: Int) {
        let keep = min(held[slot], (max(0, keeping) + pageLength - 1) / pageLength)
        guard keep < held[slot] else { return }
        let row = slot * pagesPerSlot
        for j in keep..<held[slot] {
            release(table[row + j])
            table[row + j] = 0
        }
        held[slot] = keep
        touch(slot)
    }

    /// Makes `target` hold `source`'s first `count` positions: their whole pages shared, the
    /// partly filled last one copied (returned, to run on the device). Throws, changing
    /// nothing, when no page is free for that copy.
    mutating func share(from source: Int, to target: Int, count: Int) throws -> Copy? {
        precondition(source != target && count >= 0 && count <= held[source] * pageLength)
        if count % pageLength != 0 {
            // The target's pages held by no other slot are freed first.
            try reserve(1, freeing: pagesFreed(emptying: [target]))
        }
        truncate(slot: target, keeping: 0)
        let whole = count / pageLength, rest = count - whole * pageLength
        let from = source * pagesPerSlot, to = target * pagesPerSlot
        for j in 0..<whole {
            let p = table[from + j]
            references[Int(p)] += 1
            table[to + j] = p
        }
        held[target] = whole
        touch(target)
        guard rest > 0 else { return nil }
        let own = take()
        table[to + whole] = own
        held[target] += 1
        return Copy(from: table[from + whole], to: own, rows: rest)
    }
}
