import Foundation
import PlinthKernels
import Testing

@testable import PlinthRuntime

// The reference outputs come from gguf-py's numpy dequantizers; see
// Scripts/make_dequant_fixtures.py, which wrote everything under Fixtures/dequant.

/// Fixtures/dequant/manifest.json.
private struct DequantManifest: Decodable {
    struct TypeRow: Decodable {
        let name: String
        let id: UInt32
        let block_elements: Int
        let block_bytes: Int
    }

    struct Fixture: Decodable {
        let type: String
        let id: UInt32
        let `case`: String
        let elements: Int
        let reference: String
        let blocks: String
        let expected: String
    }

    let reference: String
    let types: [TypeRow]
    let fixtures: [Fixture]

    static var directory: URL { TestModels.fixtures.appendingPathComponent("dequant") }

    static func load() throws -> DequantManifest {
        try TestModels.fixture("dequant/manifest.json")
    }
}

/// Fixtures/dequant/real_tensors.json.
private struct RealTensorRecords: Decodable {
    struct Sample: Decodable {
        let index: Int
        let bits: String
    }

    struct Record: Decodable {
        let model: String
        let file: String
        let tensor: String
        let type: String
        let id: UInt32
        let offset: Int
        let bytes: Int
        let elements: Int
        let sha256: String
        let samples: [Sample]
    }

    let tensors: [Record]

    static func load() throws -> RealTensorRecords {
        try TestModels.fixture("dequant/real_tensors.json")
    }
}

private func readFloats(_ url: URL) throws -> [Float] {
    let data = try Data(contentsOf: url)
    return data.withUnsafeBytes { raw in
        (0..<data.count / 4).map { Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self))) }
    }
}

/// Runs `body` with zeroed scratch input bytes and output floats.
private func withScratch(bytes: Int, floats: Int, _ body: (UnsafeRawPointer, UnsafeMutablePointer<Float>) -> Void) {
    let src = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 16)
    src.initializeMemory(as: UInt8.self, repeating: 0, count: bytes)
    let dst = UnsafeMutablePointer<Float>.allocate(capacity: floats)
    dst.initialize(repeating: 0, count: floats)
    defer { src.deallocate(); dst.deallocate() }
    body(UnsafeRawPointer(src), dst)
}

private func hex(_ f: Float) -> String { "0x" + String(f.bitPattern, radix: 16) }

/// Compares bit patterns. NaN: the plain float types are pure bit conversions, so their NaNs
/// (sign and payload, signalling or quiet) must match exactly; the quantized types make NaN
/// by arithmetic (inf * 0, inf - inf), whose sign and payload the hardware picks (x86 gives
/// 0xffc00000, ARM 0x7fc00000), so there any NaN matches any NaN.
private func mismatches(_ got: [Float], _ want: [Float], exactNaN: Bool) -> [String] {
    var out: [String] = []
    for i in 0..<min(got.count, want.count) where got[i].bitPattern != want[i].bitPattern {
        if !exactNaN && got[i].isNaN && want[i].isNaN { continue }
        out.append("[\(i)] got \(got[i]) (\(hex(got[i]))), want \(want[i]) (\(hex(want[i])))")
    }
    if got.count != want.count { out.append("count \(got.count) vs \(want.count)") }
    return out
}

struct DequantizeTests {
    // MARK: Synthetic blocks vs gguf-py

    static let fixtureTypes: [GGMLType] = [
        .f32, .f16, .bf16, .q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .q8_1,
        .q2_K, .q3_K, .q4_K, .q5_K, .q6_K, .q8_K, .iq4_NL, .iq4_XS,
    ]

    @Test("Every supported type has fixtures, and only those types are supported")
    func coverage() throws {
        let manifest = try DequantManifest.load()
        // Plinth's own formats have no gguf-py reference: plinthFormatsDequantizeAsDefined checks them.
        #expect(GGMLType.supportedTypes.filter { !$0.isPlinthFormat }.map(\.name).sorted() == Self.fixtureTypes.map(\.name).sorted())
        for type in GGMLType.supportedTypes where !type.isPlinthFormat {
            let cases = Set(manifest.fixtures.filter { $0.type == type.name }.map(\.case))
            #expect(cases == ["random", "edge"], "\(type.name) fixtures: \(cases.sorted())")
        }
    }

    @Test("Bit-exact against the reference", arguments: fixtureTypes, ["random", "edge"])
    func synthetic(type: GGMLType, fixtureCase: String) throws {
        let manifest = try DequantManifest.load()
        let fixture = try #require(manifest.fixtures.first { $0.type == type.name && $0.case == fixtureCase })
        #expect(fixture.id == type.rawValue)
        let dir = DequantManifest.directory
        let blocks = try Data(contentsOf: dir.appendingPathComponent(fixture.blocks))
        let want = try readFloats(dir.appendingPathComponent(fixture.expected))
        #expect(want.count == fixture.elements)
        #expect(type.rowBytes(fixture.elements) == blocks.count)

        var got = [Float](repeating: .nan, count: fixture.elements)
        try blocks.withUnsafeBytes { raw in
            try got.withUnsafeMutableBufferPointer { out in
                try type.dequantize(raw.baseAddress!, count: fixture.elements, into: out.baseAddress!)
            }
        }
        let bad = mismatches(got, want, exactNaN: !type.isQuantized)
        #expect(bad.isEmpty, "\(type.name) \(fixtureCase) vs \(fixture.reference): \(bad.count) mismatches, first: \(bad.prefix(5))")
        if fixtureCase == "random" && type.isQuantized {
            let finite = got.allSatisfy { $0.isFinite }
            #expect(finite, "random \(type.name) blocks have finite scales")
        }
    }

    @Test("Dequantizing block by block equals dequantizing the whole run")
    func blockwise() throws {
        let manifest = try DequantManifest.load()
        for fixture in manifest.fixtures where fixture.case == "random" {
            let type = try #require(GGMLType(name: fixture.type))
            guard type.isQuantized else { continue }
            let blocks = try Data(contentsOf: DequantManifest.directory.appendingPathComponent(fixture.blocks))
            let want = try readFloats(DequantManifest.directory.appendingPathComponent(fixture.expected))
            var got = [Float](repeating: .nan, count: fixture.elements)
            try blocks.withUnsafeBytes { raw in
                try got.withUnsafeMutableBufferPointer { out in
                    for b in 0..<fixture.elements / type.blockElements {
                        try dequantize(type: type, from: raw.baseAddress! + b * type.blockBytes,
                                       count: type.blockElements, into: out.baseAddress! + b * type.blockElements)
                    }
                }
            }
            #expect(mismatches(got, want, exactNaN: false).isEmpty, "\(type.name)")
        }
    }

    /// The exact Q8_0 form (the CUDA backend's one type for side-by-side products): every fixture
    /// block of the types that have one (random and edge cases: zero, huge, subnormal, infinite and
    /// NaN scales), and random PQ2 blocks, rewritten as Q8_0 dequantize to the reference floats,
    /// each block's d its source's two bytes. The types with a minimum or with sub-block scales,
    /// and Q8_1 (an activation format), are refused, as is a partial block.
    @Test("Rewritten as Q8_0, weights dequantize to the same floats")
    func rewriteAsQ8_0() throws {
        #expect(GGMLType.allCases.filter(\.convertsExactlyToQ8_0) == [.q4_0, .q5_0, .q8_0, .iq4_NL, .pq2])
        func rewritten(_ type: GGMLType, _ blocks: [UInt8], _ count: Int) throws -> [Float] {
            var q8 = [UInt8](repeating: 0, count: try #require(GGMLType.q8_0.rowBytes(count)))
            try blocks.withUnsafeBytes { src in try q8.withUnsafeMutableBytes { try type.rewriteAsQ8_0(src.baseAddress!, count: count, into: $0.baseAddress!) } }
            for b in 0..<count / 32 {
                let d = Array(blocks[b * type.blockBytes..<b * type.blockBytes + 2]), got = Array(q8[b * 34..<b * 34 + 2])
                #expect(got == d, "\(type.name) block \(b): d bytes \(got), source's \(d)")
            }
            var got = [Float](repeating: .nan, count: count)
            try q8.withUnsafeBytes { try GGMLType.q8_0.dequantize($0.baseAddress!, count: count, into: &got) }
            return got
        }
        let manifest = try DequantManifest.load()
        var checked = 0
        for fixture in manifest.fixtures {
            let type = try #require(GGMLType(name: fixture.type))
            guard type.convertsExactlyToQ8_0 else { continue }
            let blocks = try [UInt8](Data(contentsOf: DequantManifest.directory.appendingPathComponent(fixture.blocks)))
            let want = try readFloats(DequantManifest.directory.appendingPathComponent(fixture.expected))
            let bad = mismatches(try rewritten(type, blocks, fixture.elements), want, exactNaN: false)
            #expect(bad.isEmpty, "\(type.name) \(fixture.case): \(bad.count) mismatches, first: \(bad.prefix(5))")
            checked += 1
        }
        #expect(checked == 8)
        var rng = SplitMix64(seed: 5)
        let pq2 = (0..<7 * 10).map { i in i % 10 == 1 ? UInt8((rng.below(2) == 0 ? 0x3c : 0xbc) - rng.below(8)) : UInt8(rng.below(256)) } // |d| about 0.3 to 1
        var want = [Float](repeating: .nan, count: 7 * 32)
        try pq2.withUnsafeBytes { try GGMLType.pq2.dequantize($0.baseAddress!, count: want.count, into: &want) }
        #expect(try rewritten(.pq2, pq2, want.count) == want)

        withScratch(bytes: 1024, floats: 0) { src, _ in
            let dst = UnsafeMutableRawPointer.allocate(byteCount: 1024, alignment: 16)
            defer { dst.deallocate() }
            for type in [GGMLType.q4_1, .q5_1, .q8_1, .q4_K, .q6_K, .f16, .f32] {
                #expect(throws: TensorFormatError.unsupportedType(type)) { try type.rewriteAsQ8_0(src, count: 256, into: dst) }
                #expect(pk_to_q8_0(Int32(type.rawValue), src, dst, 256) == -1)
            }
            #expect(throws: TensorFormatError.partialBlock(type: .q5_0, count: 48)) { try GGMLType.q5_0.rewriteAsQ8_0(src, count: 48, into: dst) }
        }
    }

    // MARK: Errors

    @Test("An unsupported type throws an error that names it")
    func unsupported() {
        withScratch(bytes: 66, floats: 256) { src, dst in
            #expect(throws: TensorFormatError.unsupportedType(.iq2_XXS)) {
                try GGMLType.iq2_XXS.dequantize(src, count: 256, into: dst)
            }
            do throws(TensorFormatError) {
                try dequantize(type: .iq2_XXS, from: src, count: 256, into: dst)
                Issue.record("IQ2_XXS dequantized without an error")
            } catch {
                #expect(error.localizedDescription.contains("IQ2_XXS"), "\(error.localizedDescription)")
                #expect(error.errorDescription?.contains("Q4_K") == true, "lists the supported types")
            }
        }
        for type in GGMLType.allCases where !type.isSupported {
            #expect(TensorFormatError.unsupportedType(type).localizedDescription.contains(type.name))
        }
    }

    @Test("A count that is not a whole number of blocks throws", arguments: [
        (GGMLType.q4_0, 33), (.q4_0, 16), (.q4_K, 255), (.q6_K, 300), (.q8_0, -32), (.f16, -1),
    ])
    func partialBlock(type: GGMLType, count: Int) {
        withScratch(bytes: 1024, floats: 1024) { src, dst in
            #expect(throws: TensorFormatError.partialBlock(type: type, count: count)) {
                try type.dequantize(src, count: count, into: dst)
            }
            #expect(pk_dequantize(Int32(type.rawValue), src, dst, Int64(count)) == -1)
        }
        let message = TensorFormatError.partialBlock(type: type, count: count).localizedDescription
        #expect(message.contains(type.name) && message.contains("\(count)"), "\(message)")
    }

    @Test("Zero weights is a valid, empty conversion")
    func empty() throws {
        var out: [Float] = [42]
        try [UInt8](repeating: 0, count: 4).withUnsafeBytes { raw in
            try GGMLType.q4_K.dequantize(raw.baseAddress!, count: 0, into: &out)
        }
        #expect(out == [42])
    }

    // MARK: The type table

    @Test("GGMLType agrees with gguf-py's type table and with the C kernels")
    func typeTable() throws {
        let manifest = try DequantManifest.load()
        for row in manifest.types {
            let type = try #require(GGMLType(rawValue: row.id), "gguf-py type \(row.name) = \(row.id)")
            #expect(type.name == row.name)
            #expect(GGMLType(name: row.name) == type)
            #expect(type.blockElements == row.block_elements, "\(row.name)")
            if type == .q8_1 {
                // gguf-py's table still says 40 bytes (f32 d and s); ggml's block_q8_1 holds
                // two f16 and static_asserts 36 bytes.
                #expect(type.blockBytes == 36)
            } else {
                #expect(type.blockBytes == row.block_bytes, "\(row.name)")
            }
        }
        #expect(Set(GGMLType.allCases.map(\.name)).count == GGMLType.allCases.count)
        for type in GGMLType.allCases { #expect(type.blockElements > 0 && type.blockBytes > 0) }
        // The kernels' table has a row for exactly the ids ggml defined (GGMLType's cases), and
        // reads exactly the types its dequantizers implement.
        var info = pk_type_info()
        let plinthIDs = Int32(PK_PLINTH_TYPES.rawValue)...Int32(PK_PLINTH_TYPE_END.rawValue)
        for id in Array(-1...Int32(PK_TYPE_COUNT.rawValue)) + Array(plinthIDs) + [Int32(PK_PLINTH_TYPES.rawValue) - 1] {
            let known = pk_type_info_of(id, &info) == 0
            #expect(known == (id >= 0 && GGMLType(rawValue: UInt32(id)) != nil), "type \(id)")
        }
        #expect(GGMLType.supportedTypes == [.f32, .f16, .q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .q8_1,
                                            .q2_K, .q3_K, .q4_K, .q5_K, .q6_K, .q8_K, .iq4_NL, .iq4_XS, .bf16, .pq2])
        #expect(GGMLType.allCases.filter(\.isPlinthFormat) == [.pq2])
        #expect(GGMLType(rawValue: 4) == nil)  // Q4_2, gone before GGUF
        #expect(throws: TensorFormatError.unknownType(4)) { try GGMLType(id: 4) }
        #expect(TensorFormatError.unknownType(99).localizedDescription.contains("99"))
        #expect(try GGMLType(id: 12) == .q4_K)
        #expect(GGMLType(name: "q4_k") == .q4_K)
        #expect(GGMLType(name: "Q9_9") == nil)
    }

    /// PQ2 (Plinth's 2-bit format): x = d * (2q - 3), weight j's code in bits 2(j/8) of byte j%8.
    @Test func plinthFormatsDequantizeAsDefined() throws {
        #expect(GGMLType.pq2.name == "PQ2" && GGMLType.pq2.blockElements == 32 && GGMLType.pq2.blockBytes == 10)
        var rng = SplitMix64(seed: 2)
        var blocks = [UInt8]()
        var expected = [Float]()
        for b in 0..<5 {
            let d: Float = b == 4 ? 0 : Float(rng.below(2000) + 1) / 1000 * (b % 2 == 0 ? 1 : -1)
            let codes = (0..<32).map { _ in UInt8(rng.below(4)) }
            let bits = Float16(d).bitPattern
            blocks += [UInt8(bits & 0xff), UInt8(bits >> 8)]
            blocks += (0..<8).map { i in codes[i] | codes[i + 8] << 2 | codes[i + 16] << 4 | codes[i + 24] << 6 }
            expected += codes.map { Float(Float16(d)) * Float(2 * Int($0) - 3) }
        }
        var got = [Float](repeating: .nan, count: expected.count)
        try blocks.withUnsafeBytes { try GGMLType.pq2.dequantize($0.baseAddress!, count: got.count, into: &got) }
        #expect(got == expected)
    }

    @Test("Row and tensor byte sizes")
    func sizes() {
        #expect(GGMLType.q4_K.rowBytes(896) == nil)  // not a multiple of 256
        #expect(GGMLType.q4_K.rowBytes(4864) == 19 * 144)
        #expect(GGMLType.q4_1.rowBytes(576) == 18 * 20)
        #expect(GGMLType.f32.rowBytes(7) == 28)
        #expect(GGMLType.q8_0.rowBytes(-32) == nil)
        #expect(GGMLType.f32.rowBytes(Int.max / 2) == nil)  // overflow
        #expect(GGMLType.q8_K.rowBytes(Int.max / 256 * 256) == nil)
        #expect(GGMLType.q5_0.tensorBytes(elements: 896 * 4864, rowLength: 896) == 4864 * 28 * 22)
        #expect(GGMLType.q4_K.tensorBytes(elements: 576 * 10, rowLength: 576) == nil)
        #expect(GGMLType.q4_0.isQuantized && !GGMLType.bf16.isQuantized)
    }

    // MARK: Scalar conversions

    @Test("f16 → f32 is exact for all 65,536 half-precision values")
    func f16Exhaustive() {
        for bits in 0...UInt16.max {
            let got = pk_f16_to_f32(bits)
            let half = Float16(bitPattern: bits)
            if half.isNaN {
                // Payload kept, nothing quieted (the fixtures check the same against numpy).
                let want = (UInt32(bits & 0x8000) << 16) | 0x7f80_0000 | (UInt32(bits & 0x3ff) << 13)
                #expect(got.bitPattern == want, "\(bits)")
            } else if got.bitPattern != Float(half).bitPattern {
                Issue.record("f16 0x\(String(bits, radix: 16)): got \(hex(got)), want \(hex(Float(half)))")
            }
        }
    }

    @Test("f32 → f16 rounds to nearest even, like Float16(Float)")
    func f32ToF16() {
        // Every half value, and the midpoints (ties) and near-midpoints between neighbours.
        for bits in 0...UInt16.max {
            let half = Float16(bitPattern: bits)
            guard half.isFinite else { continue }
            let x = Float(half)
            #expect(pk_f32_to_f16(x) == bits, "\(x)")
            let next = Float(half.nextUp)
            guard next.isFinite, half.nextUp.isFinite else { continue }
            let mid = (x + next) / 2  // exact in f32
            for probe in [mid, mid.nextDown, mid.nextUp] {
                let want = Float16(probe).bitPattern
                let got = pk_f32_to_f16(probe)
                if got != want { Issue.record("\(probe) (\(hex(probe))): got \(got), want \(want)") }
            }
        }
        // Random bit patterns across the whole float range (fixed seed).
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<200_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let f = Float(bitPattern: UInt32(truncatingIfNeeded: state >> 32))
            let got = pk_f32_to_f16(f)
            if f.isNaN {
                #expect(Float16(bitPattern: got).isNaN && (got & 0x8000 != 0) == (f.sign == .minus))
            } else if got != Float16(f).bitPattern {
                Issue.record("\(f) (\(hex(f))): got \(got), want \(Float16(f).bitPattern)")
            }
        }
        #expect(pk_f32_to_f16(65520) == 0x7c00)  // rounds up to infinity
        #expect(pk_f32_to_f16(65519.996) == 0x7bff)
        #expect(pk_f32_to_f16(0x1p-25) == 0)  // tie with zero goes to even
        #expect(pk_f32_to_f16(0x1.000002p-25) == 1)
        #expect(pk_f32_to_f16(-0.0) == 0x8000)
    }

    @Test("bf16 → f32 is the top half of the float")
    func bf16() {
        #expect(pk_bf16_to_f32(0x3f80) == 1)
        #expect(pk_bf16_to_f32(0xc049).bitPattern == 0xc049_0000)
        #expect(pk_bf16_to_f32(0x7f81).bitPattern == 0x7f81_0000)  // signalling NaN kept
    }

    // MARK: Real tensors

    @Test("SmolLM2 tensors dequantize to gguf-py's bytes",
          .enabled(if: TestModels.path(TestModels.smolLM2) != nil,
                   "SmolLM2-135M-Instruct not fetched; run `plinth models fetch`"))
    func realSmolLM2() throws {
        try checkRealTensors(model: TestModels.smolLM2)
    }

    @Test("Qwen2.5-Coder tensors dequantize to gguf-py's bytes",
          .enabled(if: TestModels.path(TestModels.qwen25Coder) != nil,
                   "Qwen2.5-Coder-0.5B-Instruct not fetched; run `plinth models fetch`"))
    func realQwen25Coder() throws {
        try checkRealTensors(model: TestModels.qwen25Coder)
    }

    /// Reads each recorded tensor straight from the file (at its recorded byte offset, so as
    /// not to depend on the GGUF reader), dequantizes it in chunks and hashes the float32
    /// little-endian bytes.
    private func checkRealTensors(model: String) throws {
        let url = try #require(TestModels.path(model), "\(model) not fetched; run `plinth models fetch`")
        let records = try RealTensorRecords.load().tensors.filter { $0.model == model }
        try #require(!records.isEmpty, "no fixture records for \(model)")
        guard url.lastPathComponent == records[0].file else {
            Issue.record("\(model): fixtures were made from \(records[0].file), found \(url.lastPathComponent)")
            return
        }
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        let fileSize = try handle.seekToEnd()

        for record in records {
            let type = try #require(GGMLType(rawValue: record.id))
            #expect(type.name == record.type)
            #expect(type.rowBytes(record.elements) == record.bytes, "\(record.tensor)")
            try #require(UInt64(record.offset + record.bytes) <= fileSize, "\(record.tensor) beyond end of file")
            try handle.seek(toOffset: UInt64(record.offset))
            let data = try #require(try handle.read(upToCount: record.bytes))
            try #require(data.count == record.bytes)

            var hasher = SHA256()
            var samples: [Int: UInt32] = [:]
            let wanted = Set(record.samples.map(\.index))
            let chunk = 1 << 20  // weights per step: a multiple of every block size
            var buffer = [Float](repeating: 0, count: min(chunk, record.elements))
            try data.withUnsafeBytes { raw in
                var done = 0
                while done < record.elements {
                    let n = min(chunk, record.elements - done)
                    try buffer.withUnsafeMutableBufferPointer { out in
                        try type.dequantize(raw.baseAddress! + done / type.blockElements * type.blockBytes,
                                            count: n, into: out.baseAddress!)
                        hasher.update(UnsafeRawBufferPointer(start: out.baseAddress!, count: n * 4))
                    }
                    for i in wanted where i >= done && i < done + n { samples[i] = buffer[i - done].bitPattern }
                    done += n
                }
            }
            #expect(hasher.finalize() == record.sha256, "\(model) \(record.tensor) (\(record.type))")
            for s in record.samples {
                #expect(samples[s.index].map { String($0, radix: 16) } == String(UInt32(s.bits, radix: 16)!, radix: 16),
                        "\(record.tensor)[\(s.index)]")
            }
        }
        let types = Set(records.map(\.type))
        #expect(types.count == records.count, "one tensor per type")
    }
}
