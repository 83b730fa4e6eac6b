import Testing

@testable import PlinthRuntime

/// The GPU cache's page bookkeeping (``KVPages``), on the CPU: the pages a slot holds, prefixes
/// shared by reference, a shared page copied before it is written, and a full pool refused
/// without a change. The device side (the kernels reading through the page table) is tested
/// against a slotted cache in test_cuda, and end to end on the emulator (CUDABackendTests).
struct KVPagesTests {
    /// A pool's contents, page by page, as a device would hold them after the copies and writes.
    struct Pool {
        var pages: KVPages
        var rows: [[Int32]]

        init(pageLength: Int, contextLength: Int, slots: Int, pageCount: Int) {
            pages = KVPages(pageLength: pageLength, contextLength: contextLength, slots: slots, pageCount: pageCount)
            rows = Array(repeating: Array(repeating: -1, count: pageLength), count: pageCount)
        }

        func page(_ slot: Int, _ p: Int) -> Int { Int(pages.table[slot * pages.pagesPerSlot + p / pages.pageLength]) }
        func read(_ slot: Int, _ count: Int) -> [Int32] { (0..<count).map { rows[page(slot, $0)][$0 % pages.pageLength] } }

        mutating func run(_ copies: [KVPages.Copy]) {
            for c in copies { for r in 0..<c.rows { rows[Int(c.to)][r] = rows[Int(c.from)][r] } }
        }

        /// A step writing `values` at positions from `first` of `slot`, which then ends there
        /// (as InferenceContext's forward truncates).
        mutating func write(_ slot: Int, from first: Int, _ values: [Int32]) throws {
            run(try pages.prepare(slot: slot, writing: first, through: first + values.count - 1))
            for (i, v) in values.enumerated() { rows[page(slot, first + i)][(first + i) % pages.pageLength] = v }
            pages.truncate(slot: slot, keeping: first + values.count)
        }

        mutating func share(_ source: Int, _ target: Int, _ count: Int) throws {
            if let c = try pages.share(from: source, to: target, count: count) { run([c]) }
        }

        /// Every page is free, or held by the slots (the scratch slot's page 0 included) as
        /// often as it is referenced; returns the pages in use.
        func inUse() -> Int {
            var seen = Set<Int32>()
            for s in 0...pages.slotCount {
                for j in 0..<pages.pagesHeld(s) { seen.insert(pages.table[s * pages.pagesPerSlot + j]) }
            }
            return seen.count
        }
    }

    @Test func slotsHoldThePagesOfTheirPositions() throws {
        var pool = Pool(pageLength: 4, contextLength: 16, slots: 3, pageCount: 13)
        #expect(pool.pages.pagesPerSlot == 4)
        #expect(pool.pages.pagesHeld(3) == 1 && pool.pages.table[3 * 4] == 0)  // the scratch slot's page 0
        #expect(pool.pages.freeCount == 12)
        try pool.write(0, from: 0, [1, 2, 3, 4, 5])
        #expect(pool.pages.pagesHeld(0) == 2)
        #expect(pool.pages.dirty == 0..<1)
        #expect(!pool.pages.table[0..<2].contains(0))
        pool.pages.clean()
        try pool.write(0, from: 5, [6])  // within its second page: nothing changes in the table
        #expect(pool.pages.dirty == nil)
        #expect(pool.read(0, 6) == [1, 2, 3, 4, 5, 6])
        try pool.write(2, from: 0, Array(10..<26))  // a whole context
        #expect(pool.pages.pagesHeld(2) == 4 && pool.pages.freeCount == 6)
        #expect(pool.pages.dirty == 2..<3)
        pool.pages.truncate(slot: 2, keeping: 5)
        #expect(pool.pages.pagesHeld(2) == 2 && pool.pages.freeCount == 8)
        #expect(pool.read(2, 5) == Array(10..<15))
        // A step starting earlier than a slot's end overwrites, and the slot ends after it.
        try pool.write(0, from: 2, [7])
        #expect(pool.read(0, 3) == [1, 2, 7] && pool.pages.pagesHeld(0) == 1)
        #expect(pool.inUse() + pool.pages.freeCount == 13)
    }

    @Test func sharedPrefixPagesAreCopiedBeforeTheyAreWritten() throws {
        var pool = Pool(pageLength: 4, contextLength: 16, slots: 3, pageCount: 13)
        try pool.write(0, from: 0, Array(1...10))
        let free = pool.pages.freeCount
        // Ten positions: two whole pages shared, the third's two rows copied into a page of its own.
        try pool.share(0, 1, 10)
        #expect(pool.pages.freeCount == free - 1)
        #expect(pool.page(1, 0) == pool.page(0, 0) && pool.page(1, 4) == pool.page(0, 4))
        #expect(pool.page(1, 8) != pool.page(0, 8))
        #expect(pool.read(1, 10) == Array(1...10))
        // The sharer writes into a shared page (a rewind to position 6): that page is copied first,
        // its rows before the write kept, and the source's stays as it was.
        try pool.write(1, from: 6, [60, 70])
        #expect(pool.page(1, 4) != pool.page(0, 4))
        #expect(pool.read(1, 8) == [1, 2, 3, 4, 5, 6, 60, 70])
        #expect(pool.read(0, 10) == Array(1...10))
        // The source's end does not free what the sharer still holds.
        pool.pages.truncate(slot: 0, keeping: 0)
        #expect(pool.read(1, 8) == [1, 2, 3, 4, 5, 6, 60, 70])
        #expect(pool.pages.pagesHeld(0) == 0)
        pool.pages.truncate(slot: 1, keeping: 0)
        #expect(pool.pages.freeCount == 12)
        // A prefix of whole pages is shared without a copy.
        try pool.write(0, from: 0, Array(1...8))
        try pool.share(0, 2, 8)
        #expect(pool.pages.freeCount == 10)
        #expect(pool.read(2, 8) == Array(1...8))
    }

    @Test func aFullPoolIsRefusedWithoutAChange() throws {
        var pool = Pool(pageLength: 4, contextLength: 16, slots: 3, pageCount: 6)  // 5 pages for the slots
        try pool.write(0, from: 0, Array(1...16))
        let table = pool.pages.table
        #expect(throws: BackendError.self) { try pool.write(1, from: 0, Array(1...8)) }
        #expect(pool.pages.table == table && pool.pages.pagesHeld(1) == 0 && pool.pages.freeCount == 1)
        do {
            try pool.write(1, from: 0, Array(1...8))
            Issue.record("a write needing 2 pages with 1 free went through")
        } catch let BackendError.cudaFailed(why) {
            #expect(why.contains("all in use") && why.contains("2 more needed, 1 free"), "\(why)")
        }
        // A full pool: a share into a slot whose own pages it frees first still fits.
        var full = Pool(pageLength: 4, contextLength: 4, slots: 3, pageCount: 4)  // every slot's context
        for slot in 0..<3 { try full.write(slot, from: 0, [Int32(slot), 7, 8]) }
        #expect(full.pages.freeCount == 0)
        try full.share(0, 2, 2)
        #expect(full.read(2, 2) == [0, 7] && full.pages.freeCount == 0)
        // Sharing 14 positions needs one page for the last two rows: there is one.
        try pool.share(0, 1, 14)
        #expect(pool.read(1, 14) == Array(1...14) && pool.pages.freeCount == 0)
        #expect(throws: BackendError.self) { try pool.share(0, 2, 2) }
        // Writing into the shared pages needs pages of its own: refused, nothing changed.
        let shared = pool.pages.table
        #expect(throws: BackendError.self) { try pool.write(1, from: 3, [99]) }
        #expect(pool.pages.table == shared && pool.read(1, 14) == Array(1...14))
    }

    /// Random steps, truncations and shares against a model of each slot's positions: every
    /// slot reads what was written to it, and every page is held or free, never lost. The counts
    /// the scheduler admits by are what the operations then take and free.
    @Test func randomOperationsKeepEverySlotsPositions() throws {
        var rng = SplitMix64(seed: 25)
        let slots = 5, context = 40
        var pool = Pool(pageLength: 8, contextLength: context, slots: slots, pageCount: 5 * 5 + 1)
        var expected = Array(repeating: [Int32](), count: slots)
        var next: Int32 = 1
        for step in 0..<3000 {
            let s = Int(rng.next() % UInt64(slots))
            switch rng.next() % 4 {
            case 0, 1:
                let first = Int(rng.next() % UInt64(min(expected[s].count, context - 1) + 1))
                let n = 1 + Int(rng.next() % UInt64(min(12, context - first)))
                let values = (0..<n).map { _ in next += 1; return next }
                var probe = pool.pages
                _ = try probe.prepare(slot: s, writing: first, through: first + n - 1)
                #expect(pool.pages.freeCount - probe.freeCount == pool.pages.pagesToWrite(slot: s, from: first, through: first + n - 1))
                try pool.write(s, from: first, values)
                expected[s] = Array(expected[s].prefix(first)) + values
            case 2:
                let keep = Int(rng.next() % UInt64(expected[s].count + 1))
                pool.pages.truncate(slot: s, keeping: keep)
                expected[s] = Array(expected[s].prefix(keep))
            default:
                let t = (s + 1 + Int(rng.next() % UInt64(slots - 1))) % slots
                let count = Int(rng.next() % UInt64(expected[s].count + 1))
                try pool.share(s, t, count)
                expected[t] = Array(expected[s].prefix(count))
            }
            for i in 0..<slots {
                guard pool.read(i, expected[i].count) == expected[i] else {
                    Issue.record("step \(step): slot \(i) reads \(pool.read(i, expected[i].count)), wrote \(expected[i])")
                    return
                }
                #expect(pool.pages.pagesHeld(i) == (expected[i].count + 7) / 8)
            }
            #expect(pool.inUse() + pool.pages.freeCount == 26)
            let emptied = Set((0..<slots).filter { _ in rng.next() % 3 == 0 })
            var probe = pool.pages
            for i in emptied { probe.truncate(slot: i, keeping: 0) }
            #expect(probe.freeCount - pool.pages.freeCount == pool.pages.pagesFreed(emptying: emptied), "emptying \(emptied)")
        }
    }

    @Test func pagesToWriteAndFreedCountSharedPagesOnce() throws {
        var pool = Pool(pageLength: 4, contextLength: 16, slots: 3, pageCount: 13)
        try pool.write(0, from: 0, Array(1...10))  // 3 pages
        try pool.share(0, 1, 9)  // shares 2, copies the third's first row
        #expect(pool.pages.freeCount == 8)
        // Slot 1 writing on from 9 takes nothing for its own third page, one for the fourth.
        #expect(pool.pages.pagesToWrite(slot: 1, from: 9, through: 12) == 1)
        // Rewinding into a shared page takes a copy of it.
        #expect(pool.pages.pagesToWrite(slot: 1, from: 6, through: 8) == 1)
        #expect(pool.pages.pagesToWrite(slot: 2, from: 0, through: 15) == 4)
        #expect(pool.pages.pagesToWrite(slot: 2, from: 0, through: 99) == 4)  // no further than the context
        #expect(pool.pages.pagesToWrite(slot: 2, from: 5, through: 4) == 0)
        // The shared pages are freed only with both holders.
        #expect(pool.pages.pagesFreed(emptying: [0]) == 1)
        #expect(pool.pages.pagesFreed(emptying: [1]) == 1)
        #expect(pool.pages.pagesFreed(emptying: [0, 1]) == 4)
        #expect(pool.pages.pagesFreed(emptying: [2]) == 0)
    }
}
