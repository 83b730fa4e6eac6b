import Foundation
import PlinthRuntime
import Testing

/// The packed-weights file: made once, reused, remade when stale, and never needed for
/// correctness (the same logits with it, without it, and when it cannot be written).
@Suite(.serialized, .enabled(if: TestModels.path(TestModels.smolLM2) != nil, "SmolLM2 not fetched"))
struct PackedWeightsTests {
    let model = TestModels.path(TestModels.smolLM2)!

    func lastLogits(_ t: Transformer) throws -> [Float] {
        let ctx = try InferenceContext(transformer: t, contextLength: 64, slots: 1)
        try ctx.forward(.sequence([1, 9690, 198, 2683, 359, 253, 5356, 5646]))
        var one = Batch()
        one.add(11173, position: 8, logits: true)
        try ctx.forward(one)
        return Array(ctx.logits(0))
    }

    func temporaryDirectory() throws -> URL {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-pack-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: d, withIntermediateDirectories: true)
        return d
    }

    @Test func madeOnceThenReusedWithTheSameResults() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let plain = try Transformer(url: model, packing: WeightPackingOptions(enabled: false, directory: dir))
        #expect(plain.weights.packing == .disabled)
        let expected = try lastLogits(plain)

        let first = try Transformer(url: model, packing: WeightPackingOptions(directory: dir))
        guard case .created(let url) = first.weights.packing else {
            Issue.record("first load: \(first.weights.packing)")
            return
        }
        #expect(try lastLogits(first).map(\.bitPattern) == expected.map(\.bitPattern))
        // Nothing but the finished file is left in the directory.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == [url.lastPathComponent])

        let second = try Transformer(url: model, packing: WeightPackingOptions(directory: dir))
        #expect(second.weights.packing == .reused(url))
        #expect(try lastLogits(second).map(\.bitPattern) == expected.map(\.bitPattern))
    }

    @Test func aDamagedOrStaleFileIsRemade() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let options = WeightPackingOptions(directory: dir)
        let expected = try lastLogits(Transformer(url: model, packing: WeightPackingOptions(enabled: false, directory: dir)))
        guard case .created(let url) = try Transformer(url: model, packing: options).weights.packing else {
            Issue.record("no packed file made")
            return
        }
        // A header that names another version of the model file (its recorded size differs).
        let h = try FileHandle(forUpdating: url)
        try h.seek(toOffset: 16)
        h.write(Data([0xff]))
        try h.close()
        let afterStale = try Transformer(url: model, packing: options)
        #expect(afterStale.weights.packing == .created(url))
        #expect(try lastLogits(afterStale).map(\.bitPattern) == expected.map(\.bitPattern))
        // A truncated file.
        let size = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as! Int
        truncate(url.path, off_t(size / 2))
        let afterTruncation = try Transformer(url: model, packing: options)
        #expect(afterTruncation.weights.packing == .created(url))
        #expect(try lastLogits(afterTruncation).map(\.bitPattern) == expected.map(\.bitPattern))
    }

    @Test func anUnwritableDirectoryFallsBackToTheModelFile() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // A regular file where the directory should be: nothing can be created under it.
        let blocked = dir.appendingPathComponent("not-a-directory")
        #expect(FileManager.default.createFile(atPath: blocked.path, contents: Data("x".utf8)))
        let t = try Transformer(url: model, packing: WeightPackingOptions(directory: blocked.appendingPathComponent("packed")))
        guard case .unavailable(let why) = t.weights.packing else {
            Issue.record("expected .unavailable, got \(t.weights.packing)")
            return
        }
        #expect(why.contains("cannot create"), "\(why)")
        let expected = try lastLogits(Transformer(url: model, packing: WeightPackingOptions(enabled: false, directory: dir)))
        #expect(try lastLogits(t).map(\.bitPattern) == expected.map(\.bitPattern))
    }
}
