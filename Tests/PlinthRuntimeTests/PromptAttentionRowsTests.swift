import Testing

@testable import PlinthRuntime

/// Which of a CUDA step's rows take attention on tensor cores (``CUDAForward/promptFrom(slots:positions:rowsRun:)``):
/// from the first run of 16 or more of one slot's consecutive positions, rounded up to a tile of 16, where 32 or
/// more rows go; otherwise none (`rowsRun`).
struct PromptAttentionRowsTests {
    /// Rows as (slot, first position, count) runs, one after another.
    static func from(_ runs: [(slot: Int, start: Int32, count: Int)], rowsRun: Int) -> Int {
        var slots: [Int] = [], positions: [Int32] = []
        for r in runs {
            for i in 0..<r.count { slots.append(r.slot); positions.append(r.start + Int32(i)) }
        }
        return CUDAForward.promptFrom(slots: slots[...], positions: positions[...], rowsRun: rowsRun)
    }

    @Test func decodeRowsStayOffTheTensorCores() {
        let decode = (0..<64).map { (slot: $0, start: Int32(100 + $0), count: 1) }
        #expect(Self.from(decode, rowsRun: 64) == 64)
        // forced tokens: short runs of one slot are decode rows too
        #expect(Self.from([(0, 10, 3), (1, 4, 15), (2, 7, 1)] + decode.suffix(20), rowsRun: 40) == 40)
    }

    @Test func aWholePromptStartsAtRowZero() {
        #expect(Self.from([(3, 0, 512)], rowsRun: 512) == 0)
        #expect(Self.from([(3, 700, 37)], rowsRun: 40) == 0)
    }

    @Test func promptsAfterDecodeRowsStartAtTheNextTile() {
        let decode = (0..<8).map { (slot: 10 + $0, start: Int32(50), count: 1) }
        #expect(Self.from(decode + [(5, 200, 100), (6, 0, 70), (7, 45, 5)], rowsRun: 192) == 16)
        // exactly on a tile's start
        let sixteen = (0..<16).map { (slot: 20 + $0, start: Int32(9), count: 1) }
        #expect(Self.from(sixteen + [(1, 0, 64)], rowsRun: 96) == 16)
    }

    @Test func fewPromptRowsStayOffTheTensorCores() {
        // a chunk of 20 padded to 24 rows: under 32 would go
        #expect(Self.from([(0, 0, 20)], rowsRun: 24) == 24)
        // 8 decode rows and a chunk of 30: from row 16, 16 rows of 32 would go
        let decode = (0..<8).map { (slot: 10 + $0, start: Int32(50), count: 1) }
        #expect(Self.from(decode + [(0, 0, 30)], rowsRun: 40) == 40)
        // two chunks of 15: no run of 16
        #expect(Self.from([(0, 0, 15), (1, 0, 15)], rowsRun: 32) == 32)
    }

    @Test func aGapInPositionsEndsARun() {
        // slot 2: positions 0..<10, then 20..<60: the run of 40 starts at row 10, rounded up to 16
        #expect(Self.from([(2, 0, 10), (2, 20, 40)], rowsRun: 56) == 16)
    }
}
