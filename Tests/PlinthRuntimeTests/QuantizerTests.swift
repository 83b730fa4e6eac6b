import Foundation
import PlinthKernels
@testable import PlinthRuntime
import Testing

/// The quantizers, the GGUF writer and the quantization plan.
struct QuantizerTests {
    struct Reference: Decodable {
        struct Weighted: Decodable {
            var importance: [Float]
            /// Each type's bytes, by ggml's type name.
            var types: [String: String]
        }
        var rows: Int
        var columns: Int
        var input: [Float]
        var types: [String: String]
        /// Rows quantized with an importance per weight (llama-quantize --imatrix).
        var weighted: Weighted?
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func quantize(_ x: [Float], _ type: GGMLType) -> [UInt8]? {
        guard let bytes = type.rowBytes(x.count) else { return nil }
        var out = [UInt8](repeating: 0, count: bytes)
        let rc = x.withUnsafeBufferPointer { xs in out.withUnsafeMutableBytes { pk_quantize(Int32(type.rawValue), xs.baseAddress, $0.baseAddress, Int64(x.count)) } }
        return rc == 0 ? out : nil
    }

    /// The bytes gguf-py's quantizers (ggml's reference ones in numpy) write for the same floats:
    /// Fixtures/quantize/make_reference.py.
    @Test func quantizersWriteTheReferenceBytes() throws {
        let ref: Reference = try TestModels.fixture("quantize/reference.json")
        #expect(ref.types.count == 7)
        for (name, expected) in ref.types.sorted(by: { $0.key < $1.key }) {
            let type = try #require(GGMLType(name: name))
            #expect(Quantizer.canWrite(type), "\(name)")
            let got = try #require(Self.quantize(ref.input, type), "\(name)")
            #expect(Self.hex(got) == expected, "\(name)")
        }
    }

    /// The k-quants (Q2_K to Q6_K) write what llama-quantize wrote for rows of SmolLM2's weights,
    /// without and with --imatrix (Fixtures/quantize/make_kquant_reference.py).
    @Test func kQuantizersWriteLlamaQuantizesBytes() throws {
        let ref: Reference = try TestModels.fixture("quantize/kquant_reference.json")
        let w = try #require(ref.weighted)
        let names = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
        #expect(ref.types.keys.sorted() == names && w.types.keys.sorted() == names)
        #expect(ref.input.count == ref.rows * ref.columns && ref.columns % 256 == 0)
        #expect(w.importance.count == ref.input.count)
        for name in names {
            let type = try #require(GGMLType(name: name))
            #expect(Quantizer.canWrite(type), "\(name)")
            #expect(try #require(Quantizer.info(type)).can_weight != 0, "\(name) rounds to nearest with an importance")
            let rowBytes = try #require(type.rowBytes(ref.columns))
            var plain = [UInt8](repeating: 0, count: rowBytes * ref.rows), weighted = plain
            for r in 0..<ref.rows {
                let span = (r * ref.columns)..<((r + 1) * ref.columns)
                let x = Array(ref.input[span]), importance = Array(w.importance[span])
                let rcs = (plain.withUnsafeMutableBytes { pk_quantize(Int32(type.rawValue), x, $0.baseAddress! + r * rowBytes, Int64(ref.columns)) },
                           weighted.withUnsafeMutableBytes {
                               pk_quantize_weighted(Int32(type.rawValue), x, $0.baseAddress! + r * rowBytes, Int64(ref.columns), importance)
                           })
                #expect(rcs == (0, 0), "\(name)")
            }
            Self.expectSameBlocks(plain, ref.types[name]!, blockBytes: type.blockBytes, "\(name)")
            Self.expectSameBlocks(weighted, w.types[name]!, blockBytes: type.blockBytes, "\(name) with --imatrix")
        }
    }

    /// Names the first block that differs from llama-quantize's hex, rather than printing two
    /// 7 KB strings.
    static func expectSameBlocks(_ got: [UInt8], _ expected: String, blockBytes: Int, _ what: String) {
        let have = Array(hex(got).utf8), want = Array(expected.utf8)
        #expect(have.count == want.count, "\(what)")
        let first = have.indices.first { $0 < want.count && have[$0] != want[$0] }.map { $0 / (2 * blockBytes) }
        #expect(first == nil, "\(what): block \(first ?? -1) differs from llama-quantize's")
    }

    /// Dequantizing what was quantized lands within half a quantization step of every input (a
    /// whole step for the symmetric formats' clamped top code), plus the scales' f16 rounding.
    @Test(arguments: ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "F16", "BF16", "F32"])
    func roundTripIsWithinAStep(name: String) throws {
        let type = try #require(GGMLType(name: name))
        var rng = SplitMix64(seed: 11)
        let x = (0..<(32 * 40)).map { _ in Float(rng.below(20001) - 10000) / 7000 + (name == "Q4_1" ? 0.8 : 0) }
        let q = try #require(Self.quantize(x, type))
        var back = [Float](repeating: 0, count: x.count)
        try q.withUnsafeBytes { try type.dequantize($0.baseAddress!, count: x.count, into: &back) }
        for b in 0..<(x.count / 32) {
            let block = x[(32 * b)..<(32 * b + 32)]
            let amax = block.map(abs).max()!, span = block.max()! - block.min()!
            for i in block.indices {
                let bound: Float = switch name {
                case "Q4_0": amax / 8
                case "Q5_0": amax / 16
                case "Q8_0": amax / 127
                case "Q4_1": span / 15 / 2
                case "Q5_1": span / 31 / 2
                case "F16": abs(x[i]) / 2048
                case "BF16": abs(x[i]) / 256
                default: 0
                }
                #expect(abs(back[i] - x[i]) <= bound * 1.07 + amax / 1000 * (name.hasPrefix("Q") ? 1 : 0),
                        "\(name) weight \(i): \(x[i]) -> \(back[i])")
            }
        }
    }

    /// The weighted k-quants on degenerate input: an all-zero super-block comes back as zeros, and
    /// columns of zero importance (never activated in calibration) leave every value finite and
    /// within the super-block's range, with or without the importance.
    @Test(arguments: ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"])
    func weightedKQuantsHandleZeros(name: String) throws {
        let type = try #require(GGMLType(name: name))
        var rng = SplitMix64(seed: 5)
        var x = (0..<768).map { _ in Float(rng.below(20001) - 10000) / 5000 }
        for i in 0..<256 { x[i] = 0 }                                    // super-block 0: all zero
        var importance = (0..<768).map { _ in Float(rng.below(1000)) / 100 }
        for i in stride(from: 256, to: 768, by: 3) { importance[i] = 0 } // a third of the columns unseen
        for i in 512..<768 { importance[i] = 0 }                        // super-block 2: none seen
        let rowBytes = try #require(type.rowBytes(x.count))
        var q = [UInt8](repeating: 0xAA, count: rowBytes)
        let rc = q.withUnsafeMutableBytes { pk_quantize_weighted(Int32(type.rawValue), x, $0.baseAddress, Int64(x.count), importance) }
        #expect(rc == 0)
        var back = [Float](repeating: .nan, count: x.count)
        try q.withUnsafeBytes { try type.dequantize($0.baseAddress!, count: x.count, into: &back) }
        #expect(back[0..<256].allSatisfy { $0 == 0 }, "\(name): a zero super-block must come back as zeros")
        for b in 1..<3 {
            let block = x[(256 * b)..<(256 * b + 256)], amax = block.map(abs).max()!
            for i in block.indices {
                #expect(back[i].isFinite && abs(back[i]) <= 2 * amax, "\(name) weight \(i): \(x[i]) -> \(back[i])")
            }
        }
    }

    /// With an importance per weight, no block's importance-weighted error is above rounding to
    /// nearest's (the search starts there), and over many blocks it is well below.
    @Test(arguments: ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"])
    func weightedQuantizationLowersTheWeightedError(name: String) throws {
        let type = try #require(GGMLType(name: name))
        var rng = SplitMix64(seed: 5)
        let n = 32 * 64
        let x = (0..<n).map { _ in Float(rng.below(20001) - 10000) / 9000 }
        let importance = (0..<n).map { _ in Float(rng.below(1000) + 1) / 100 * (rng.below(8) == 0 ? 50 : 1) }
        let plain = try #require(Self.quantize(x, type))
        var weighted = [UInt8](repeating: 0, count: plain.count)
        #expect(x.withUnsafeBufferPointer { xs in importance.withUnsafeBufferPointer { w in
            weighted.withUnsafeMutableBytes { pk_quantize_weighted(Int32(type.rawValue), xs.baseAddress, $0.baseAddress, Int64(n), w.baseAddress) }
        } } == 0)
        func errors(_ q: [UInt8]) throws -> [Double] {
            var back = [Float](repeating: 0, count: n)
            try q.withUnsafeBytes { try type.dequantize($0.baseAddress!, count: n, into: &back) }
            var out = [Double](repeating: 0, count: n / 32)
            for i in 0..<n {
                let r = Double(x[i] - back[i])
                out[i / 32] += Double(importance[i]) * r * r
            }
            return out
        }
        let (e0, e1) = (try errors(plain), try errors(weighted))
        for b in 0..<e0.count { #expect(e1[b] <= e0[b] * (1 + 1e-6), "\(name) block \(b): \(e1[b]) > \(e0[b])") }
        #expect(e1.reduce(0, +) < 0.9 * e0.reduce(0, +), "\(name): \(e1.reduce(0, +)) vs \(e0.reduce(0, +))")
    }

    /// PQ2 searches its scale: on every block its squared error is within 1% of the best over a
    /// fine sweep of scales with nearest codes (computed here independently), and well under the
    /// error of the scale that puts the outer level on the largest value. Weighted by importance,
    /// the weighted error drops.
    @Test func pq2FindsNearlyTheBestScale() throws {
        var rng = SplitMix64(seed: 9)
        // Roughly normal weights: the sum of four uniforms.
        let n = 32 * 64
        let x = (0..<n).map { _ in (0..<4).map { _ in Float(rng.below(20001) - 10000) / 10000 }.reduce(0, +) * 0.02 }
        let q = try #require(Self.quantize(x, .pq2))
        var back = [Float](repeating: 0, count: n)
        try q.withUnsafeBytes { try GGMLType.pq2.dequantize($0.baseAddress!, count: n, into: &back) }
        func error(_ block: ArraySlice<Float>, _ d: Float, _ w: ArraySlice<Float>? = nil) -> Double {
            let d = Float(Float16(d))
            var sum = 0.0
            for i in block.indices {
                // The nearest of the four levels d * (2c - 3).
                let level: Float = d == 0 ? 0 : ((block[i] / d + 3) / 2).rounded(.toNearestOrAwayFromZero)
                let c = Int(min(3, max(0, level)))
                let r = Double(block[i] - d * Float(2 * c - 3))
                sum += Double(w?[i] ?? 1) * r * r
            }
            return sum
        }
        var total = 0.0, naive = 0.0
        for b in 0..<(n / 32) {
            let range = (32 * b)..<(32 * b + 32)
            let block = x[range]
            let got = range.reduce(0.0) { $0 + Double(x[$1] - back[$1]) * Double(x[$1] - back[$1]) }
            let amax = block.map(abs).max()!
            let best = stride(from: Float(0.10), through: 0.45, by: 0.0025).map { error(block, amax * $0) }.min()!
            #expect(got <= best * 1.01 + 1e-12, "block \(b): \(got) vs the sweep's \(best)")
            total += got
            naive += error(block, amax / 3)
        }
        #expect(total < 0.8 * naive, "\(total) vs \(naive) with the outer level on the largest value")

        let importance = (0..<n).map { _ in Float(rng.below(1000) + 1) / 100 * (rng.below(8) == 0 ? 50 : 1) }
        var weighted = [UInt8](repeating: 0, count: q.count)
        #expect(x.withUnsafeBufferPointer { xs in importance.withUnsafeBufferPointer { w in
            weighted.withUnsafeMutableBytes { pk_quantize_weighted(Int32(GGMLType.pq2.rawValue), xs.baseAddress, $0.baseAddress, Int64(n), w.baseAddress) }
        } } == 0)
        var wback = [Float](repeating: 0, count: n)
        try weighted.withUnsafeBytes { try GGMLType.pq2.dequantize($0.baseAddress!, count: n, into: &wback) }
        func weightedError(_ y: [Float]) -> Double {
            var sum = 0.0
            for i in 0..<n {
                let r = Double(x[i] - y[i])
                sum += Double(importance[i]) * r * r
            }
            return sum
        }
        #expect(weightedError(wback) < 0.9 * weightedError(back), "\(weightedError(wback)) vs \(weightedError(back))")
    }

    /// The IQ4 formats search their scale: every IQ4_NL block's squared error is within 2% of the
    /// best over a fine sweep of scales with nearest levels (computed here independently), and
    /// the total is well under that of the scale putting the largest value on the -127 level.
    /// IQ4_XS, whose sub-block scales are six bits on the super-block's d, stays close to IQ4_NL.
    /// With importance, the weighted error drops; a block whose importance is all zero is fitted
    /// as without; zeros stay zeros.
    @Test func iq4FindsNearlyTheBestScale() throws {
        let levels: [Float] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]
        var rng = SplitMix64(seed: 11)
        let n = 256 * 8
        let x = (0..<n).map { _ in (0..<4).map { _ in Float(rng.below(20001) - 10000) / 10000 }.reduce(0, +) * 0.02 }
        func dequantized(_ q: [UInt8], _ type: GGMLType) throws -> [Float] {
            var back = [Float](repeating: .nan, count: n)
            try q.withUnsafeBytes { try type.dequantize($0.baseAddress!, count: n, into: &back) }
            return back
        }
        func nearest(_ v: Float, _ d: Float) -> Float { d * levels.min { abs(d * $0 - v) < abs(d * $1 - v) }! }
        func error(_ block: ArraySlice<Float>, _ d: Float, _ w: ArraySlice<Float>? = nil) -> Double {
            let d = Float(Float16(d))
            var sum = 0.0
            for i in block.indices {
                let r = Double(block[i] - nearest(block[i], d))
                sum += Double(w?[i] ?? 1) * r * r
            }
            return sum
        }
        func sumError(_ y: [Float], _ w: [Float]? = nil) -> Double {
            var sum = 0.0
            for i in 0..<n {
                let r = Double(x[i] - y[i])
                sum += Double(w?[i] ?? 1) * r * r
            }
            return sum
        }
        let nl = try dequantized(try #require(Self.quantize(x, .iq4_NL)), .iq4_NL)
        var total = 0.0, naive = 0.0
        for b in 0..<(n / 32) {
            let range = (32 * b)..<(32 * b + 32)
            let block = x[range]
            var got = 0.0
            for i in range { got += Double(x[i] - nl[i]) * Double(x[i] - nl[i]) }
            let m = block.max { abs($0) < abs($1) }!
            var best = Double.infinity
            for f in stride(from: Float(0.6), through: 1.4, by: 0.005) {
                best = min(best, error(block, m / (-127 * f)), error(block, m / (113 * f)))
            }
            #expect(got <= best * 1.02 + 1e-12, "block \(b): \(got) vs the sweep's \(best)")
            total += got
            naive += error(block, m / -127)
        }
        #expect(total < 0.9 * naive, "\(total) vs \(naive) with the largest value on -127")
        let xs = try dequantized(try #require(Self.quantize(x, .iq4_XS)), .iq4_XS)
        #expect(sumError(xs) < 1.15 * sumError(nl), "IQ4_XS \(sumError(xs)) vs IQ4_NL \(sumError(nl))")

        var importance = (0..<n).map { _ in Float(rng.below(1000) + 1) / 100 * (rng.below(8) == 0 ? 50 : 1) }
        for i in 64..<96 { importance[i] = 0 }
        for (type, plain) in [(GGMLType.iq4_NL, nl), (.iq4_XS, xs)] {
            var q = [UInt8](repeating: 0, count: try #require(type.rowBytes(n)))
            #expect(x.withUnsafeBufferPointer { xp in importance.withUnsafeBufferPointer { w in
                q.withUnsafeMutableBytes { pk_quantize_weighted(Int32(type.rawValue), xp.baseAddress, $0.baseAddress, Int64(n), w.baseAddress) }
            } } == 0)
            let weighted = try dequantized(q, type)
            #expect(sumError(weighted, importance) < 0.9 * sumError(plain, importance), "\(type.name): \(sumError(weighted, importance)) vs \(sumError(plain, importance))")
            if type == .iq4_NL { #expect(weighted[64..<96] == plain[64..<96], "a block of zero importance is fitted as without") }
        }
        let zeros = try dequantized(try #require(Self.quantize([Float](repeating: 0, count: n), .iq4_XS)), .iq4_XS)
        #expect(zeros.allSatisfy { $0 == 0 })
    }

    /// GPTQ on activations that span few directions: its error on them is a fraction of rounding
    /// to nearest's (the errors go where the activations are not). The same construction and
    /// result as GPTQ's reference algorithm in numpy (10x on these shapes).
    @Test(arguments: ["Q4_0", "Q4_1", "Q5_0", "Q8_0", "PQ2"])
    func gptqPutsTheErrorWhereTheActivationsAreNot(name: String) throws {
        let type = try #require(GGMLType(name: name))
        let (m, k, n, rank) = (32, 128, 600, 6)
        var rng = SplitMix64(seed: 3)
        func uniform() -> Float { Float(rng.below(20001) - 10000) / 10000 }
        let basis = (0..<(rank * k)).map { _ in uniform() }
        var x = [Float](repeating: 0, count: n * k)
        for t in 0..<n {
            let c = (0..<rank).map { _ in uniform() }
            for j in 0..<k { x[t * k + j] = (0..<rank).reduce(0) { $0 + c[$1] * basis[$1 * k + j] } + 0.02 * uniform() }
        }
        let w = (0..<(m * k)).map { _ in uniform() * 0.1 }
        var h = [Float](repeating: 0, count: k * k)
        for t in 0..<n { for i in 0..<k { for j in 0...i { h[i * k + j] += x[t * k + i] * x[t * k + j] } } }
        let rtn = try #require(Self.quantize(w, type))
        var gptq = [UInt8](repeating: 0, count: rtn.count)
        var scratch = w
        #expect(pk_gptq(Int32(type.rawValue), &scratch, Int64(m), Int64(k), h, 0.01, &gptq) == 0)
        func outputError(_ q: [UInt8]) throws -> Double {
            var back = [Float](repeating: 0, count: m * k)
            try q.withUnsafeBytes { try type.dequantize($0.baseAddress!, count: m * k, into: &back) }
            var total = 0.0
            for t in stride(from: 0, to: n, by: 3) {
                for r in 0..<m {
                    var e = 0.0
                    for j in 0..<k { e += Double(w[r * k + j] - back[r * k + j]) * Double(x[t * k + j]) }
                    total += e * e
                }
            }
            return total
        }
        let (plain, spread) = (try outputError(rtn), try outputError(gptq))
        #expect(spread < 0.5 * plain, "\(name): GPTQ output error \(spread), rounding to nearest \(plain)")
        #expect(pk_gptq(Int32(GGMLType.q2_K.rawValue), &scratch, Int64(m), Int64(k), h, 0.01, &gptq) == -1)
    }

    /// An importance matrix reads back as written; a file of another kind and a matrix of the
    /// wrong width are refused with what is wrong.
    @Test func importanceMatricesRoundTrip() throws {
        var m = ImportanceMatrix()
        m.datasets = ["calibration.txt"]
        m.chunkCount = 3
        m.chunkSize = 64
        let rows: [Float] = (0..<(3 * 32)).map { Float($0 % 7) - 3 }
        rows.withUnsafeBufferPointer { m.accumulate(["blk.0.attn_q.weight", "blk.0.attn_k.weight", "output.weight"], $0.baseAddress!, rows: 3, width: 32) }
        #expect(m.entries.count == 2 && m.entries["output.weight"] == nil)
        let expected = (0..<32).map { j in (0..<3).map { r in Double(rows[32 * r + j] * rows[32 * r + j]) }.reduce(0, +) }
        #expect(m.entries["blk.0.attn_q.weight"] == .init(sums: expected, count: 3))
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-imatrix-\(UUID().uuidString).gguf")
        defer { try? FileManager.default.removeItem(at: url) }
        try m.write(to: url)
        let back = try ImportanceMatrix(url: url)
        #expect(back.entries == m.entries && back.datasets == m.datasets && back.chunkCount == 3 && back.chunkSize == 64)
        #expect(back.importance(of: "blk.0.attn_k.weight") == expected.map { Float($0 / 3) })
        // An entry that saw nothing weighs every column 1, as llama-quantize reads it; no entry is nil.
        var unseen = ImportanceMatrix()
        rows.withUnsafeBufferPointer { unseen.accumulate(["blk.0.ffn_down.weight"], $0.baseAddress!, rows: 0, width: 3) }
        #expect(unseen.entries["blk.0.ffn_down.weight"] == .init(sums: [0, 0, 0], count: 0))
        #expect(unseen.importance(of: "blk.0.ffn_down.weight") == [1, 1, 1] && unseen.importance(of: "output.weight") == nil)

        let model = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-not-imatrix-\(UUID().uuidString).gguf")
        defer { try? FileManager.default.removeItem(at: model) }
        try GGUFWriter(metadata: Self.metadata, tensors: []).write(to: model)
        #expect(throws: ImportanceMatrixError.self) { try ImportanceMatrix(url: model) }

        let file = try Self.tinyModel()   // blk.1.attn_q.weight has rows of 64
        var wrong = ImportanceMatrix()
        rows.withUnsafeBufferPointer { wrong.accumulate(["blk.1.attn_q.weight"], $0.baseAddress!, rows: 3, width: 32) }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-wrong-\(UUID().uuidString).gguf")
        #expect(throws: ImportanceMatrixError.wrongWidth(matrix: "blk.1.attn_q.weight", expected: 64, found: 32)) {
            try Quantizer.write(file, plan: try Quantizer.plan(file, target: .q4_0), target: .q4_0, to: out, importance: wrong)
        }
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }

    /// A matrix already in the wanted type is copied, importance or not (as llama-quantize):
    /// requantizing its values could only lose.
    @Test func aMatrixAlreadyInItsTypeIsCopiedWithImportance() throws {
        let x: [Float] = (0..<512).map { sin(Float($0) * 0.37) * Float($0 % 13) }
        var q = [UInt8](repeating: 0, count: 2 * 144)  // two Q4_K blocks
        #expect(x.withUnsafeBufferPointer { xs in q.withUnsafeMutableBytes { pk_quantize(Int32(GGMLType.q4_K.rawValue), xs.baseAddress, $0.baseAddress, 512) } } >= 0)
        let info = GGUFTensorInfo(name: "blk.0.attn_q.weight", dimensions: [256, 2], type: .q4_K, fileOffset: 0, byteCount: q.count)
        var out = [UInt8](repeating: 0, count: q.count)
        let importance = (0..<256).map { Float(1 + $0 % 5) * ($0 < 128 ? 10 : 0.1) }
        try q.withUnsafeBytes { src in
            try out.withUnsafeMutableBytes { try Quantizer.convert(src.baseAddress!, from: info, to: .q4_K, into: $0, importance: importance) }
        }
        #expect(out == q)
    }

    /// An importance matrix whose count or chunk count no integer holds is refused, not a trap.
    @Test func malformedImportanceMatricesAreRefused() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-imatrix-\(UUID().uuidString).gguf")
        defer { try? FileManager.default.removeItem(at: url) }
        let sums: [Float] = [1, 2]
        func write(chunks: GGUFValue, count: Float) throws {
            try GGUFWriter(metadata: [("general.type", .string("imatrix")), ("imatrix.chunk_count", chunks)], tensors: [
                GGUFWriter.Tensor(name: "blk.0.attn_q.weight.in_sum2", dimensions: [2], type: .f32) { out in sums.withUnsafeBytes { out.copyMemory(from: $0) } },
                GGUFWriter.Tensor(name: "blk.0.attn_q.weight.counts", dimensions: [1], type: .f32) { out in [count].withUnsafeBytes { out.copyMemory(from: $0) } },
            ]).write(to: url)
        }
        try write(chunks: .uint32(2), count: 3)
        #expect(try ImportanceMatrix(url: url).chunkCount == 2)
        try write(chunks: .uint32(2), count: 1e20)
        #expect(throws: ImportanceMatrixError.malformed(path: url.path, entry: "blk.0.attn_q.weight")) { try ImportanceMatrix(url: url) }
        for chunks in [GGUFValue.int32(-1), .uint64(1 << 40)] {
            try write(chunks: chunks, count: 3)
            #expect(throws: ImportanceMatrixError.self) { try ImportanceMatrix(url: url) }
        }
    }

    /// llama-imatrix's legacy `.dat` and its GGUF of the same run (Fixtures/quantize,
    /// make_imatrix_fixtures.sh) give the same importance; a damaged `.dat` is refused, naming
    /// the entry or what is missing.
    @Test func legacyImportanceMatricesReadAsTheirGGUF() throws {
        let dir = TestModels.fixtures.appendingPathComponent("quantize")
        let gguf = try ImportanceMatrix(url: dir.appendingPathComponent("qwen3-tiny.imatrix.gguf"))
        let dat = try ImportanceMatrix(url: dir.appendingPathComponent("qwen3-tiny.imatrix.dat"))
        #expect(dat.entries.count == 14 && Set(dat.entries.keys) == Set(gguf.entries.keys))
        #expect(dat.chunkCount == gguf.chunkCount && dat.chunkCount > 1 && dat.datasets == ["calibration.txt"])
        var worst: Float = 0
        for name in gguf.entries.keys {
            let a = try #require(gguf.importance(of: name)), b = try #require(dat.importance(of: name))
            #expect(a.count == b.count, "\(name)")
            for (x, y) in zip(a, b) { worst = max(worst, abs(x - y) / max(x, 1e-30)) }
        }
        #expect(worst < 1e-5, "largest relative difference \(worst)")

        // Hand-made files: one entry of ncall 4 (and one of 0, read as it is), with and without the trailer.
        func int32(_ v: Int32) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
        func entry(_ name: String, ncall: Int32, _ values: [Float]) -> [UInt8] {
            int32(Int32(name.utf8.count)) + Array(name.utf8) + int32(ncall) + int32(Int32(values.count))
                + values.flatMap { v in withUnsafeBytes(of: v.bitPattern.littleEndian) { Array($0) } }
        }
        let body = int32(2) + entry("blk.0.attn_q.weight", ncall: 4, [8, 2]) + entry("blk.0.ffn_down.weight", ncall: 0, [3])
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-imatrix-\(UUID().uuidString).dat")
        defer { try? FileManager.default.removeItem(at: url) }
        func read(_ bytes: [UInt8]) throws -> ImportanceMatrix {
            try Data(bytes).write(to: url)
            return try ImportanceMatrix(url: url)
        }
        let plain = try read(body)
        #expect(plain.importance(of: "blk.0.attn_q.weight") == [2, 0.5] && plain.importance(of: "blk.0.ffn_down.weight") == [3])
        #expect(plain.chunkCount == 0 && plain.datasets.isEmpty)
        let trailed = try read(body + int32(7) + int32(4) + Array("a.txt".utf8.prefix(4)))
        #expect(trailed.chunkCount == 7 && trailed.datasets == ["a.tx"])
        for (damaged, name) in [(Array(body.dropLast(2)), "blk.0.ffn_down.weight"),
                                (int32(2) + entry("blk.0.attn_q.weight", ncall: 4, [.nan, 1]), "blk.0.attn_q.weight"),
                                (int32(2) + entry("blk.0.attn_q.weight", ncall: 1, [1]) + entry("blk.0.attn_q.weight", ncall: 1, [1]), "blk.0.attn_q.weight")] {
            #expect(throws: ImportanceMatrixError.malformed(path: url.path, entry: name)) { try read(damaged) }
        }
        for notOne in [[UInt8](), int32(0), int32(1) + int32(-5), body + [1, 2, 3], Array("GGUX not a matrix at all".utf8)] {
            let e = caughtError(ImportanceMatrixError.self) { _ = try read(notOne) }
            guard case .notAnImportanceMatrix? = e else {
                Issue.record("\(notOne.count) bytes: \(String(describing: e))")
                continue
            }
        }
    }

    /// The partial files a writer of `url` left beside it.
    static func partials(beside url: URL) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)) ?? []
        return names.filter { $0.hasPrefix(url.lastPathComponent + ".") && $0.hasSuffix(".partial") }
    }

    /// A file named as the writer's partial file once was (`OUT.partial`; here the input) is
    /// never written over: the partial name is new each time. A partial file a killed writer
    /// left (no lock held) is removed by the next; one a writer still holds stays.
    @Test func theWriterLeavesAFileNamedAsItsPartialFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-out-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("model.gguf")
        try Data("input".utf8).write(to: dir.appendingPathComponent("model.gguf.partial"))
        // A user's file shaped like a partial name (an input, say) is not the writer's.
        try Data("user".utf8).write(to: dir.appendingPathComponent("model.gguf.backup.partial"))
        try Data("abandoned".utf8).write(to: dir.appendingPathComponent("model.gguf.plinth-Ab12cD.partial"))
        try Data("in use".utf8).write(to: dir.appendingPathComponent("model.gguf.plinth-Zz99zZ.partial"))
        let held = open(dir.appendingPathComponent("model.gguf.plinth-Zz99zZ.partial").path, O_RDONLY)
        defer { close(held) }
        #expect(flock(held, LOCK_EX) == 0)
        try GGUFWriter(metadata: Self.metadata, tensors: []).write(to: out)
        #expect(try String(contentsOf: dir.appendingPathComponent("model.gguf.partial"), encoding: .utf8) == "input")
        #expect(try String(contentsOf: dir.appendingPathComponent("model.gguf.backup.partial"), encoding: .utf8) == "user")
        #expect(try GGUFFile(url: out).tensors.isEmpty)
        #expect(Self.partials(beside: out).sorted() == ["model.gguf.backup.partial", "model.gguf.partial", "model.gguf.plinth-Zz99zZ.partial"])
    }

    /// `general.alignment` is written as the format has it, a uint32, whatever integer it was read as.
    @Test func theAlignmentIsWrittenAsAUInt32() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-align-\(UUID().uuidString).gguf")
        defer { try? FileManager.default.removeItem(at: url) }
        try GGUFWriter(metadata: Self.metadata.filter { $0.key != "general.alignment" } + [("general.alignment", .uint64(64))], tensors: []).write(to: url)
        #expect(try GGUFFile(url: url).metadata["general.alignment"] == .uint32(64))
    }

    /// A GGUF file written over a directory's name is refused before anything is written: the
    /// directory and what it holds stay. Over a file, the new file replaces it whole.
    @Test func theWriterNeverReplacesADirectory() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-out-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("keep".utf8).write(to: dir.appendingPathComponent("keep.txt"))
        #expect(throws: GGUFWriteError.self) { try GGUFWriter(metadata: Self.metadata, tensors: []).write(to: dir) }
        #expect(try String(contentsOf: dir.appendingPathComponent("keep.txt"), encoding: .utf8) == "keep")
        #expect(Self.partials(beside: dir).isEmpty)
        let file = dir.appendingPathComponent("model.gguf")
        try Data("old".utf8).write(to: file)
        try GGUFWriter(metadata: Self.metadata, tensors: []).write(to: file)
        #expect(try GGUFFile(url: file).tensors.isEmpty)
        // A pipe (as a device would be) is refused, not replaced by a file.
        let fifo = dir.appendingPathComponent("pipe.gguf")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        #expect(throws: GGUFWriteError.self) { try GGUFWriter(metadata: Self.metadata, tensors: []).write(to: fifo) }
        func kind(_ url: URL) -> mode_t { var st = stat(); return lstat(url.path, &st) == 0 ? st.st_mode & S_IFMT : 0 }
        #expect(kind(fifo) == S_IFIFO)
        // A link is written through: the target gets the file, the link stays a link.
        let link = dir.appendingPathComponent("link.gguf")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: file)
        try GGUFWriter(metadata: Self.metadata, tensors: []).write(to: link)
        #expect(kind(link) == S_IFLNK)
        #expect(try GGUFFile(url: file).tensors.isEmpty)
    }

    @Test func unwritableTypesAndBadPatternsAreRefused() throws {
        var x = [Float](repeating: 1, count: 256), out = [UInt8](repeating: 0, count: 256)
        #expect(pk_quantize(Int32(GGMLType.iq2_XXS.rawValue), &x, &out, 256) == -1)
        #expect(pk_quantize(Int32(GGMLType.q8_0.rawValue), &x, &out, 33) == -1)
        #expect(pk_quantize(Int32(GGMLType.q4_K.rawValue), &x, &out, 128) == -1)
        #expect(!Quantizer.canWrite(.iq2_XXS) && Quantizer.canWrite(.q8_0) && Quantizer.canWrite(.q2_K) && Quantizer.canWrite(.iq4_XS))
        #expect(Quantizer.gptqTypes == [.q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .pq2])
        let file = try Self.tinyModel()
        #expect(throws: QuantizeError.unsupportedType("IQ2_XXS")) { try Quantizer.plan(file, target: .iq2_XXS) }
        #expect(throws: QuantizeError.badPattern("ffn_(")) { try Quantizer.plan(file, target: .q8_0, overrides: [("ffn_(", .q4_0)]) }
        #expect(QuantizeError.unsupportedType("IQ2_XXS").localizedDescription.contains("Q6_K"))
    }

    /// Matrices take the target or a matching override; rows that are not whole blocks fall back
    /// to F16 with a note; vectors stay; the order is llama-quantize's.
    @Test func planFollowsTheRules() throws {
        let file = try Self.tinyModel()
        let plan = try Quantizer.plan(file, target: .q4_0, overrides: [("ffn_up", .q8_0)], pure: true)
        #expect(plan.map(\.tensor.name) == ["output_norm.weight", "token_embd.weight", "blk.0.attn_norm.weight",
                                            "blk.0.ffn_up.weight", "blk.0.odd.weight", "blk.1.attn_q.weight"])
        let types = Dictionary(uniqueKeysWithValues: plan.map { ($0.tensor.name, $0.type) })
        #expect(types["token_embd.weight"] == .q4_0 && types["blk.1.attn_q.weight"] == .q4_0)
        #expect(types["blk.0.ffn_up.weight"] == .q8_0)
        #expect(types["blk.0.attn_norm.weight"] == .f32 && types["output_norm.weight"] == .f32)
        #expect(types["blk.0.odd.weight"] == .f16)
        #expect(plan.first { $0.tensor.name == "blk.0.odd.weight" }?.note?.contains("48") == true)
        #expect(try Quantizer.plan(file, target: .f32).allSatisfy { $0.type == .f32 })
        // llama-quantize's mix: the tied output projection is Q6_K, Q8_0 where its rows are not
        // whole 256-blocks (these are 64 wide).
        let mixed = try Quantizer.plan(file, target: .q4_0)
        #expect(mixed.first { $0.tensor.name == "token_embd.weight" }?.type == .q8_0)
        #expect(mixed.first { $0.tensor.name == "blk.1.attn_q.weight" }?.type == .q4_0)
        // A type given for a matrix is taken as given, even the target's (llama-quantize's
        // --token-embedding-type q4_0 with Q4_0): the mix's rules are for the others.
        let kept = try Quantizer.plan(file, target: .q4_0, overrides: [("token_embd", .q4_0)])
        #expect(kept.first { $0.tensor.name == "token_embd.weight" }?.type == .q4_0)
        // k-quants need whole 256-blocks: llama-quantize's fallbacks, each said in its note.
        for (target, fallback) in [(GGMLType.q2_K, GGMLType.q4_0), (.q3_K, .q4_0), (.q4_K, .q5_0), (.q5_K, .q5_1), (.q6_K, .q8_0)] {
            let k = try Quantizer.plan(file, target: target, pure: true)
            let q = try #require(k.first { $0.tensor.name == "blk.1.attn_q.weight" })
            #expect(q.type == fallback && q.note?.contains("256") == true, "\(target.name)")
        }
        #expect(Quantizer.fallback(.q4_0) == .f16)
        // Rows of 48 fit no fallback's 32-blocks either: F16, as llama-quantize.
        for target in [GGMLType.q2_K, .q4_K, .q6_K] {
            #expect(try Quantizer.plan(file, target: target, pure: true).first { $0.tensor.name == "blk.0.odd.weight" }?.type == .f16)
        }
    }

    /// llama-quantize's mix rules by layer: Q4_K_M raises attn_v and ffn_down to Q6_K in the first
    /// and last eighth and every third layer between; Q2_K raises attn_v by the grouped-query
    /// ratio; names resolve as llama-quantize resolves them.
    @Test func mixesRaiseTheRightMatrices() throws {
        #expect(QuantizationMix(name: "q4_k") == .q4_K_M && QuantizationMix(name: "Q3_K_L") == .q3_K_L)
        #expect(QuantizationMix(name: "Q4_0") == nil && QuantizationMix.q5_K_S.base == .q5_K)
        func types(_ mix: QuantizationMix, _ kind: String, ratio: Int = 1) -> [GGMLType?] {
            (0..<16).map { mix.type(for: kind, layer: $0, layers: 16, groupedQueryRatio: ratio) }
        }
        // 16 layers: the first two, the last two, and layers 4, 7, 10, 13.
        let raised = Set([0, 1, 4, 7, 10, 13, 14, 15])
        #expect(types(.q4_K_M, "ffn_down") == (0..<16).map { raised.contains($0) ? .q6_K : nil })
        #expect(types(.q4_K_M, "attn_v") == types(.q5_K_M, "attn_v"))
        #expect(types(.q4_K_M, "attn_q").allSatisfy { $0 == nil })
        #expect(types(.q4_K_S, "attn_v") == (0..<16).map { $0 < 4 ? .q5_K : nil })
        #expect(types(.q2_K, "attn_v", ratio: 7).allSatisfy { $0 == .q4_K } && types(.q2_K, "attn_v", ratio: 3).allSatisfy { $0 == .q3_K })
        #expect(types(.q3_K_M, "ffn_down") == (0..<16).map { $0 < 1 ? .q5_K : .q4_K })
        #expect(Quantizer.kind(of: "blk.12.attn_v.weight") == "attn_v" && Quantizer.kind(of: "output.weight") == nil)
        // The IQ4 types: attn_v Q5_K at 4 or more query heads per kv head; ffn_down of the first
        // eighth Q5_K without an importance matrix only; IQ4_XS falls back to IQ4_NL.
        func iq4(_ target: GGMLType, _ kind: String, ratio: Int = 1, importance: Bool = false) -> [GGMLType?] {
            (0..<16).map { Quantizer.iq4Rule(target, kind: kind, layer: $0, layers: 16, groupedQueryRatio: ratio, withImportance: importance) }
        }
        #expect(iq4(.iq4_XS, "attn_v", ratio: 4).allSatisfy { $0 == .q5_K } && iq4(.iq4_NL, "attn_v", ratio: 3).allSatisfy { $0 == nil })
        #expect(iq4(.iq4_NL, "ffn_down") == (0..<16).map { $0 < 2 ? .q5_K : nil } && iq4(.iq4_XS, "ffn_down", importance: true).allSatisfy { $0 == nil })
        #expect(iq4(.q4_0, "attn_v", ratio: 7).allSatisfy { $0 == nil } && iq4(.iq4_XS, "attn_q", ratio: 7).allSatisfy { $0 == nil })
        #expect(Quantizer.fallback(.iq4_XS) == .iq4_NL && Quantizer.fileType(.iq4_XS) == 30 && Quantizer.fileType(.iq4_NL) == 25)
        let plan = try Quantizer.plan(try Self.tinyModel(), target: .iq4_XS, pure: true)
        #expect(plan.first { $0.tensor.name == "blk.0.ffn_up.weight" }?.type == .iq4_NL, "rows of 32: IQ4_NL")
    }

    /// The writer's file reads back with the same metadata, in order, and the same tensors; the
    /// quantized copy's tensors are the quantizer's bytes.
    @Test func writtenFilesReadBack() throws {
        let file = try Self.tinyModel()
        #expect(file.keys == Self.metadata.map(\.key))
        for (key, value) in Self.metadata { #expect(file.metadata[key] == value, "\(key)") }
        let embedding = try #require(file.tensor(named: "token_embd.weight"))
        #expect(embedding.dimensions == [64, 3] && embedding.type == .f32)
        #expect(embedding.fileOffset % 64 == 0)
        let floats = UnsafeBufferPointer(start: file.data(of: embedding).assumingMemoryBound(to: Float.self), count: 192)
        #expect(Array(floats) == Self.values(192))

        let out = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-quantized-\(UUID().uuidString).gguf")
        defer { try? FileManager.default.removeItem(at: out) }
        let plan = try Quantizer.plan(file, target: .q8_0)
        try Quantizer.write(file, plan: plan, target: .q8_0, to: out)
        let q = try GGUFFile(url: out)
        #expect(q.metadata["general.file_type"] == .uint32(7))
        #expect(q.keys.suffix(2) == ["general.quantization_version", "general.file_type"])
        let qe = try #require(q.tensor(named: "token_embd.weight"))
        #expect(qe.type == .q8_0)
        let expected = try #require(Self.quantize(Self.values(192), .q8_0))
        #expect(Array(UnsafeRawBufferPointer(start: q.data(of: qe), count: qe.byteCount)) == expected)
        #expect(Self.partials(beside: out).isEmpty)
        #expect(q.metadata[Quantizer.plinthTypesKey] == nil)

        // A file in Plinth's own format names it, and reads back in it.
        let plinthPlan = try Quantizer.plan(file, target: .pq2, pure: true)
        try Quantizer.write(file, plan: plinthPlan, target: .pq2, to: out)
        let p = try GGUFFile(url: out)
        #expect(p.metadata[Quantizer.plinthTypesKey] == .array([.string("PQ2")]))
        #expect(p.metadata["general.file_type"] == nil)
        let pe = try #require(p.tensor(named: "token_embd.weight"))
        #expect(pe.type == .pq2)
        #expect(Array(UnsafeRawBufferPointer(start: p.data(of: pe), count: pe.byteCount)) == Self.quantize(Self.values(192), .pq2))
    }

    static let metadata: [(key: String, value: GGUFValue)] = [
        ("general.architecture", .string("llama")),
        ("general.alignment", .uint32(64)),
        ("test.u8", .uint8(200)), ("test.i8", .int8(-3)), ("test.u16", .uint16(65000)), ("test.i16", .int16(-300)),
        ("test.i32", .int32(-70000)), ("test.u64", .uint64(1 << 40)), ("test.i64", .int64(-(1 << 40))),
        ("test.f32", .float32(0.25)), ("test.f64", .float64(-1.5)), ("test.bool", .bool(true)),
        ("test.strings", .array([.string("a"), .string("βγ")])), ("test.nested", .array([.array([.int32(1), .int32(2)])])),
        ("general.file_type", .uint32(0)),
    ]

    static func values(_ n: Int) -> [Float] { (0..<n).map { Float(($0 * 37) % 101 - 50) / 40 } }

    /// A small file of every metadata type and tensors of several shapes, in scrambled order.
    static func tinyModel() throws -> GGUFFile {
        func tensor(_ name: String, _ dims: [Int]) -> GGUFWriter.Tensor {
            let n = dims.reduce(1, *)
            return GGUFWriter.Tensor(name: name, dimensions: dims, type: .f32) { out in
                Self.values(n).withUnsafeBytes { out.copyMemory(from: $0) }
            }
        }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-tiny-\(UUID().uuidString).gguf")
        defer { try? FileManager.default.removeItem(at: url) }
        try GGUFWriter(metadata: metadata, tensors: [
            tensor("blk.1.attn_q.weight", [64, 2]), tensor("token_embd.weight", [64, 3]), tensor("blk.0.odd.weight", [48, 2]),
            tensor("blk.0.ffn_up.weight", [32, 4]), tensor("blk.0.attn_norm.weight", [64]), tensor("output_norm.weight", [64]),
        ]).write(to: url)
        // The mapping stays valid after the name is gone.
        return try GGUFFile(url: url)
    }
}
