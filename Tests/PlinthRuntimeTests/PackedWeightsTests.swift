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

    /// Making a packed file clears what no load can use again: the packed files of model files
    /// deleted or changed since, one of an earlier format, a partial file of a process that has
    /// ended. A live model file's packed file, a later format's, a running process's partial file
    /// and other files stay.
    @Test func makingOneClearsStaleOnes() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let options = WeightPackingOptions(directory: dir)
        func copy(_ name: String) throws -> URL {
            let file = dir.appendingPathComponent("models/\(name).gguf")
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: model, to: file)
            return file
        }
        func packed(_ file: URL) throws -> String {
            guard case .created(let url) = try Transformer(url: file, packing: options).weights.packing else {
                Issue.record("no packed file made for \(file.lastPathComponent)")
                return ""
            }
            return url.lastPathComponent
        }
        let live = try packed(copy("live")), gone = try packed(copy("gone"))
        let changedFile = try copy("changed")
        let changed = try packed(changedFile)
        try FileManager.default.removeItem(at: dir.appendingPathComponent("models/gone.gguf"))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: changedFile.path)
        func header(format: UInt32) -> Data {
            Data("PLNTPACK".utf8) + withUnsafeBytes(of: format.littleEndian) { Data($0) } + Data(count: 4096)
        }
        #expect(FileManager.default.createFile(atPath: dir.appendingPathComponent("older-1.pack").path, contents: header(format: 1)))
        #expect(FileManager.default.createFile(atPath: dir.appendingPathComponent("later-0.pack").path, contents: header(format: 99)))
        let ended = Process()
        ended.executableURL = URL(fileURLWithPath: "/bin/true")
        try ended.run()
        ended.waitUntilExit()
        let partials = [".x.pack.\(ended.processIdentifier).7.tmp", ".y.pack.\(getpid()).7.tmp"]
        let others = ["notes.txt", ".other.\(ended.processIdentifier).7.tmp"]  // not a packed file's
        for name in partials + others {
            #expect(FileManager.default.createFile(atPath: dir.appendingPathComponent(name).path, contents: Data("x".utf8)))
        }
        let before = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        #expect(before.isSuperset(of: [live, gone, changed]))
        let fresh = try packed(copy("fresh"))
        let after = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        #expect(after == Set([live, fresh, "later-0.pack", partials[1], "models"] + others), "\(after.sorted())")
        // The changed model file is packed anew when it loads.
        #expect(try Transformer(url: changedFile, packing: options).weights.packing == .created(dir.appendingPathComponent(changed)))
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
