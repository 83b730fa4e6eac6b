import Foundation
import PlinthKernels
import Testing

/// Random weights of one format: random codes, with every scale field set to a sane half float
/// so that products stay finite.
private func randomWeights(type: Int32, rows: Int, k: Int, rng: inout SplitMix64) -> [UInt8] {
    let be = blockElements(type), bb = Int(typeInfo(type).block_bytes)
    let count = rows * (k / be) * bb
    var w = (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    func half(_ v: Float, at i: Int) {
        let h = pk_f32_to_f16(v)
        w[i] = UInt8(h & 0xff)
        w[i + 1] = UInt8(h >> 8)
    }
    func scale() -> Float { 0.001 + Float(rng.below(1000)) / 100_000 }
    if be == 1 {
        for i in 0..<(rows * k) {
            let v = Float(rng.below(2001) - 1000) / 1000
            switch Int(type) {
            case Int(PK_F32.rawValue): withUnsafeBytes(of: v.bitPattern.littleEndian) { for b in 0..<4 { w[4 * i + b] = $0[b] } }
            case Int(PK_F16.rawValue): half(v, at: 2 * i)
            default: let u = UInt16(v.bitPattern >> 16); w[2 * i] = UInt8(u & 0xff); w[2 * i + 1] = UInt8(u >> 8)
            }
        }
        return w
    }
    // Offsets of the half-float scale fields in a block.
    let fields: [Int]
    switch Int(type) {
    case Int(PK_Q4_1.rawValue), Int(PK_Q5_1.rawValue), Int(PK_Q4_K.rawValue), Int(PK_Q5_K.rawValue): fields = [0, 2]
    case Int(PK_Q2_K.rawValue): fields = [80, 82]
    case Int(PK_Q3_K.rawValue): fields = [108]
    case Int(PK_Q6_K.rawValue): fields = [208]
    default: fields = [0]
    }
    for b in stride(from: 0, to: count, by: bb) { for f in fields { half(scale(), at: b + f) } }
    return w
}

private let quantTypes: [(String, pk_type)] = [
    ("Q4_0", PK_Q4_0), ("Q4_1", PK_Q4_1), ("Q5_0", PK_Q5_0), ("Q5_1", PK_Q5_1), ("Q8_0", PK_Q8_0),
    ("Q2_K", PK_Q2_K), ("Q3_K", PK_Q3_K), ("Q4_K", PK_Q4_K), ("Q5_K", PK_Q5_K), ("Q6_K", PK_Q6_K),
    ("IQ4_NL", PK_IQ4_NL), ("IQ4_XS", PK_IQ4_XS),
    ("PQ2", PK_PQ2), ("F16", PK_F16), ("BF16", PK_BF16), ("F32", PK_F32),
]

/// The product through pk_matmul_many; with `packed`, the weights' packed form rides along.
private func matmul(_ type: Int32, _ w: [UInt8], rows m: Int, k: Int, x: [Float], n: Int, threads: Int,
                    packed: UnsafeRawPointer? = nil) -> [Float] {
    var y = [Float](repeating: .nan, count: n * m)
    let pool = pk_pool_create(Int32(threads))
    defer { pk_pool_destroy(pool) }
    let scratch = UnsafeMutableRawPointer.allocate(byteCount: pk_matmul_scratch_bytes(Int64(n), Int64(k), Int32(threads)), alignment: 64)
    defer { scratch.deallocate() }
    let rc = w.withUnsafeBytes { wp in
        y.withUnsafeMutableBufferPointer { yp in
            var op = pk_matmul_op(type: type, w: wp.baseAddress, m: Int64(m), y: yp.baseAddress, ldy: Int64(m), packed: packed, bias: nil, accumulate: 0)
            return pk_matmul_many(pool, &op, 1, Int64(k), x, Int64(n), scratch)
        }
    }
    #expect(rc == 0)
    return y
}

/// The packed form of `w` (pk_pack), in a 64-byte aligned buffer the caller frees; nil for
/// types without one.
private func packed(_ type: Int32, _ w: [UInt8], rows m: Int, k: Int) -> UnsafeMutableRawPointer? {
    let bytes = pk_pack_bytes(type, Int64(m), Int64(k))
    guard bytes > 0 else { return nil }
    let p = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
    let rc = w.withUnsafeBytes { pk_pack(type, $0.baseAddress, Int64(m), Int64(k), p) }
    #expect(rc == 0)
    return p
}

/// The kernels' table row of type `t`.
private func typeInfo(_ t: Int32) -> pk_type_info {
    var info = pk_type_info()
    _ = pk_type_info_of(t, &info)
    return info
}

private func blockElements(_ t: Int32) -> Int { Int(typeInfo(t).block_elements) }

/// The instruction sets this CPU can run (the scalar reference always).
private func availableISAs() -> [Int32] {
    let best = pk_isa()
    return [Int32(PK_ISA_SCALAR), Int32(PK_ISA_AVX2), Int32(PK_ISA_AVX512)].filter { $0 <= best }
}

/// A gated activation kernel (`gate = act(gate) * up` over `rows` rows) run by the scalar
/// reference on one thread, checked to give the same bits on every other ISA with two threads;
/// returns the reference's result.
private func gatedActivationBits(_ kernel: (OpaquePointer?, UnsafeMutablePointer<Float>?, UnsafePointer<Float>?, Int64, Int64) -> Void,
                                 gate: [Float], up: [Float], rows: Int) -> [Float] {
    func run(threads: Int) -> [Float] {
        var g = gate
        let pool = pk_pool_create(Int32(threads))
        defer { pk_pool_destroy(pool) }
        kernel(pool, &g, up, Int64(rows), Int64(gate.count / rows))
        return g
    }
    let reference = withISA(Int32(PK_ISA_SCALAR)) { run(threads: 1) }
    for isa in availableISAs() where isa != Int32(PK_ISA_SCALAR) {
        let got = withISA(isa) { run(threads: 2) }
        #expect(got.map(\.bitPattern) == reference.map(\.bitPattern), "isa \(isa) differs from the scalar reference")
    }
    return reference
}

/// Switches the kernels' instruction set for the duration of `body`; serialized suites only.
private func withISA<T>(_ isa: Int32, _ body: () throws -> T) rethrows -> T {
    let previous = pk_isa()
    _ = pk_set_isa(isa)
    defer { _ = pk_set_isa(previous) }
    return try body()
}

@Suite(.serialized) struct KernelTests {
    /// Every SIMD path gives the scalar reference's bits, for every format, batch size and a
    /// partial last tile; a batch row equals the same row computed alone; results agree with the
    /// float dot product of the dequantized weights to the precision of int8 activations.
    @Test(arguments: quantTypes)
    func matmulIsExactAcrossISAsAndBatches(name: String, type: pk_type) throws {
        let t = Int32(type.rawValue)
        var rng = SplitMix64(seed: UInt64(t) &* 7919)
        // An odd number of 32-weight blocks where the format allows it (a kernel taking blocks in
        // pairs must handle the last one alone).
        let k = blockElements(t) == 32 ? 544 : 512, m = 37
        let w = randomWeights(type: t, rows: m, k: k, rng: &rng)
        let nMax = 19
        let x = (0..<(nMax * k)).map { _ in Float(rng.below(20001) - 10000) / 3000 }
        let isas = availableISAs()
        let pw = packed(t, w, rows: m, k: k)
        defer { pw?.deallocate() }
        #expect((pw != nil) == (blockElements(t) > 1), "\(name): every quantized format has a packed form, float formats none")
        for n in [1, 2, 9, nMax] {
            let xs = Array(x[0..<(n * k)])
            let reference = withISA(Int32(PK_ISA_SCALAR)) { matmul(t, w, rows: m, k: k, x: xs, n: n, threads: 1) }
            #expect(reference.allSatisfy { $0.isFinite }, "\(name) n=\(n): non-finite results")
            // Float weights with many rows go through cblas_sgemm, whose rounding depends on how
            // the rows are split: close, not equal. Everything else is exact.
            let viaBLAS = blockElements(t) == 1 && n >= 8
            for isa in isas where isa != Int32(PK_ISA_SCALAR) {
                for threads in [1, 3] {
                    let got = withISA(isa) { matmul(t, w, rows: m, k: k, x: xs, n: n, threads: threads) }
                    if viaBLAS {
                        let worst = zip(got, reference).map { abs($0.0 - $0.1) / max(1, abs($0.1)) }.max()!
                        #expect(worst < 1e-4, "\(name) n=\(n) isa=\(isa) threads=\(threads): \(worst) from the reference")
                    } else {
                        let diff = zip(got, reference).filter { $0.0.bitPattern != $0.1.bitPattern }.count
                        #expect(diff == 0, "\(name) n=\(n) isa=\(isa) threads=\(threads): \(diff) of \(got.count) results differ from the scalar reference")
                    }
                    // Packed weights (two whole tiles here, the last 5 rows read from w) give the same bits.
                    if let pw {
                        let fromPacked = withISA(isa) { matmul(t, w, rows: m, k: k, x: xs, n: n, threads: threads, packed: UnsafeRawPointer(pw)) }
                        let diff = zip(fromPacked, reference).filter { $0.0.bitPattern != $0.1.bitPattern }.count
                        #expect(diff == 0, "\(name) n=\(n) isa=\(isa) threads=\(threads): \(diff) of \(fromPacked.count) results from packed weights differ")
                    }
                }
            }
            // Batch invariance: each row alone gives the bits it got in the batch.
            for row in [0, n - 1] {
                let alone = matmul(t, w, rows: m, k: k, x: Array(x[(row * k)..<((row + 1) * k)]), n: 1, threads: 2)
                let batched = Array(reference[(row * m)..<((row + 1) * m)])
                if viaBLAS {
                    let worst = zip(alone, batched).map { abs($0.0 - $0.1) / max(1, abs($0.1)) }.max()!
                    #expect(worst < 1e-4, "\(name): row \(row) of \(n) is \(worst) from the row alone")
                } else {
                    #expect(alone == batched, "\(name): row \(row) of \(n) differs from the row alone")
                }
            }
        }
        // Accuracy against the dequantized weights.
        let y = matmul(t, w, rows: m, k: k, x: Array(x[0..<k]), n: 1, threads: 1)
        let rowBytes = w.count / m
        var worst = 0.0
        var row = [Float](repeating: 0, count: k)
        for r in 0..<m {
            w.withUnsafeBytes { _ = pk_dequantize(t, $0.baseAddress! + r * rowBytes, &row, Int64(k)) }
            var exact = 0.0, magnitude = 0.0
            for i in 0..<k { exact += Double(row[i]) * Double(x[i]); magnitude += abs(Double(row[i]) * Double(x[i])) }
            worst = max(worst, abs(exact - Double(y[r])) / magnitude)
        }
        // int8 activations carry ~0.4% error per value; summed errors largely cancel.
        #expect(worst < 5e-3, "\(name): worst error relative to sum|w*x| is \(worst)")
    }

    /// Rows read back out of packed weights are the file's rows; rows past the last whole tile
    /// and float types are refused.
    @Test(arguments: quantTypes)
    func packedRowsRoundTrip(name: String, type: pk_type) {
        let t = Int32(type.rawValue)
        var rng = SplitMix64(seed: UInt64(t) &* 31)
        let k = blockElements(t) == 32 ? 544 : 512, m = 37
        let w = randomWeights(type: t, rows: m, k: k, rng: &rng)
        guard let pw = packed(t, w, rows: m, k: k) else {
            #expect(blockElements(t) == 1, "\(name) has no packed form")
            return
        }
        defer { pw.deallocate() }
        let rowBytes = w.count / m
        var row = [UInt8](repeating: 0, count: rowBytes)
        for r in 0..<32 {
            #expect(pk_packed_row(t, pw, Int64(m), Int64(k), Int64(r), &row) == 0)
            #expect(row == Array(w[(r * rowBytes)..<((r + 1) * rowBytes)]), "\(name): row \(r) read back differs")
        }
        #expect(pk_packed_row(t, pw, Int64(m), Int64(k), 32, &row) == -1)
        #expect(pk_pack_bytes(t, 15, Int64(k)) == 0, "fewer rows than a tile have no packed form")
    }

    @Test func matmulRejectsBadShapes() {
        var y = [Float](repeating: 0, count: 16)
        let w = [UInt8](repeating: 0, count: 4096)
        let pool = pk_pool_create(1)
        defer { pk_pool_destroy(pool) }
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: pk_matmul_scratch_bytes(1, 512, 1), alignment: 64)
        defer { scratch.deallocate() }
        let x = [Float](repeating: 1, count: 512)
        w.withUnsafeBytes { wp in
            // k not a whole number of 256-weight super-blocks
            #expect(pk_matmul(pool, Int32(PK_Q4_K.rawValue), wp.baseAddress, 1, 288, x, 1, &y, 1, scratch) == -1)
            // an unsupported type (IQ2_XXS)
            #expect(pk_matmul(pool, 16, wp.baseAddress, 1, 256, x, 1, &y, 1, scratch) == -1)
            // a valid call for contrast
            #expect(pk_matmul(pool, Int32(PK_Q8_0.rawValue), wp.baseAddress, 1, 256, x, 1, &y, 1, scratch) == 0)
        }
    }

    /// Attention: every ISA gives the reference's bits, each row is independent of the batch, and
    /// the result matches a double-precision softmax attention.
    /// With `windowed`, each row attends from its own start (sliding-window layers), and the
    /// same holds; a window starting at 0 is the plain call, bit for bit. With `softcap`, the
    /// scores are capped (Gemma 2) and the same holds.
    @Test(arguments: [(4, 2, 64, false, 0), (9, 3, 64, false, 0), (14, 2, 64, false, 0), (2, 1, 32, false, 0), (4, 2, 80, false, 0),
                      (9, 3, 64, true, 0), (4, 2, 80, true, 0), (4, 1, 256, true, 0), (4, 1, 256, false, 0), (8, 4, 128, false, 0),
                      (9, 3, 64, true, 1.5), (4, 2, 80, false, 1.5), (4, 1, 256, false, 1.5)] as [(Int, Int, Int, Bool, Float)])
    func attentionIsExactAcrossISAsAndRows(heads: Int, kvHeads: Int, headDim: Int, windowed: Bool, softcap: Float) {
        var rng = SplitMix64(seed: UInt64(heads * 1000 + headDim))
        let kvDim = kvHeads * headDim, qDim = heads * headDim
        let ctx = 300
        let kCache = (0..<(ctx * kvDim)).map { _ in pk_f32_to_f16(Float(rng.below(2001) - 1000) / 500) }
        let vCache = (0..<(ctx * kvDim)).map { _ in pk_f32_to_f16(Float(rng.below(2001) - 1000) / 500) }
        // The keys as attention reads them: blocks of PK_KEY_BLOCK positions, transposed.
        let block = Int(PK_KEY_BLOCK)
        var kBlocks = [UInt16](repeating: 0, count: (ctx + block - 1) / block * block * kvDim)
        for p in 0..<ctx {
            for i in 0..<kvDim { kBlocks[p / block * block * kvDim + i * block + p % block] = kCache[p * kvDim + i] }
        }
        // pk_store_key writes that layout.
        var stored = [UInt16](repeating: 0, count: kBlocks.count)
        for p in 0..<ctx {
            let row = (0..<kvDim).map { pk_f16_to_f32(kCache[p * kvDim + $0]) }
            stored.withUnsafeMutableBufferPointer { pk_store_key(row, Int64(kvDim), Int64(p), $0.baseAddress!) }
        }
        #expect(stored == kBlocks)
        let lengths: [Int32] = [1, 17, 33, 70, 5, 150, 128, 64, 260]
        // Starts inside a 64-chunk, on one, and past whole chunks (windowed rows only).
        let starts: [Int32] = windowed ? [0, 3, 20, 64, 4, 130, 100, 63, 200] : [Int32](repeating: 0, count: lengths.count)
        let n = lengths.count
        let q = (0..<(n * qDim)).map { _ in Float(rng.below(2001) - 1000) / 400 }
        let scale = 1 / Float(headDim).squareRoot()

        func run(_ rows: Range<Int>, threads: Int, plain: Bool = false) -> [Float] {
            var out = [Float](repeating: .nan, count: rows.count * qDim)
            let pool = pk_pool_create(Int32(threads))
            defer { pk_pool_destroy(pool) }
            let scratch = [Float](repeating: 0, count: pk_attention_scratch_floats(Int64(ctx), Int32(heads / kvHeads), Int32(threads)))
            kBlocks.withUnsafeBufferPointer { kp in
                vCache.withUnsafeBufferPointer { vp in
                    let kRows = [UnsafePointer<UInt16>?](repeating: kp.baseAddress, count: rows.count)
                    let vRows = [UnsafePointer<UInt16>?](repeating: vp.baseAddress, count: rows.count)
                    let lens = Array(lengths[rows])
                    let qs = Array(q[(rows.lowerBound * qDim)..<(rows.upperBound * qDim)])
                    let from = Array(starts[rows])
                    scratch.withUnsafeBufferPointer { sp in
                        if plain {
                            pk_attention(pool, qs, Int64(rows.count), Int32(heads), Int32(kvHeads), Int32(headDim), kRows, vRows, lens,
                                         Int64(kvDim), scale, &out, UnsafeMutablePointer(mutating: sp.baseAddress!))
                        } else if softcap > 0 {
                            pk_attention_capped(pool, qs, Int64(rows.count), Int32(heads), Int32(kvHeads), Int32(headDim), kRows, vRows,
                                                windowed ? from : nil, lens, Int64(kvDim), scale, softcap, &out,
                                                UnsafeMutablePointer(mutating: sp.baseAddress!))
                        } else {
                            pk_attention_window(pool, qs, Int64(rows.count), Int32(heads), Int32(kvHeads), Int32(headDim), kRows, vRows,
                                                from, lens, Int64(kvDim), scale, &out, UnsafeMutablePointer(mutating: sp.baseAddress!))
                        }
                    }
                }
            }
            return out
        }
        let reference = withISA(Int32(PK_ISA_SCALAR)) { run(0..<n, threads: 1) }
        if !windowed && softcap == 0 {
            #expect(run(0..<n, threads: 2, plain: true).map(\.bitPattern) == run(0..<n, threads: 2).map(\.bitPattern))
        }
        for isa in availableISAs() where isa != Int32(PK_ISA_SCALAR) {
            let got = withISA(isa) { run(0..<n, threads: 2) }
            #expect(got.map(\.bitPattern) == reference.map(\.bitPattern), "isa \(isa) differs from the scalar reference")
        }
        for row in 0..<n {
            #expect(run(row..<(row + 1), threads: 1) == Array(reference[(row * qDim)..<((row + 1) * qDim)]), "row \(row) alone differs")
        }
        // Against double precision (the kernel rounds the query and the weights to half, as llama.cpp does).
        var worst = 0.0
        for t in 0..<n {
            for h in 0..<heads {
                let kvh = h / (heads / kvHeads), len = Int(lengths[t]), first = Int(starts[t])
                var s = [Double](repeating: -Double.infinity, count: len)
                for p in first..<len {
                    s[p] = 0
                    for i in 0..<headDim {
                        s[p] += Double(q[t * qDim + h * headDim + i]) * Double(pk_f16_to_f32(kCache[p * kvDim + kvh * headDim + i]))
                    }
                    s[p] *= Double(scale)
                    if softcap > 0 { s[p] = Double(softcap) * Foundation.tanh(s[p] / Double(softcap)) }
                }
                let mx = s.max()!
                let e = s.map { Foundation.exp($0 - mx) }
                let sum = e.reduce(0, +)
                for i in 0..<headDim {
                    var o = 0.0
                    for p in 0..<len { o += e[p] / sum * Double(pk_f16_to_f32(vCache[p * kvDim + kvh * headDim + i])) }
                    worst = max(worst, abs(o - Double(reference[t * qDim + h * headDim + i])))
                }
            }
        }
        #expect(worst < 5e-3, "largest difference from double-precision attention: \(worst)")
    }
    /// Fused products (pk_matmul_fused: the RMSNorm prologue, bias and residual-add epilogues,
    /// the gated pair) give the bits of the unfused kernels run one after another, on every ISA,
    /// with 1 and 2 threads, for single rows (the fused decode kernel) and batches small and
    /// large, with a partial last tile; float weights refuse epilogues.
    @Test(arguments: [("Q4_1", PK_Q4_1), ("Q8_0", PK_Q8_0), ("Q5_0", PK_Q5_0), ("Q4_K", PK_Q4_K), ("Q6_K", PK_Q6_K)])
    func fusedProductsGiveTheUnfusedBits(name: String, type: pk_type) {
        let t = Int32(type.rawValue)
        var rng = SplitMix64(seed: UInt64(t) &* 104_729)
        // n = 1 (the decode kernel), 2 (a tile), 40 (a gated pair as one job of paired tiles)
        let k = blockElements(t) == 32 ? 544 : 512, m = 37, nMax = 40
        let w0 = randomWeights(type: t, rows: m, k: k, rng: &rng), w1 = randomWeights(type: t, rows: m, k: k, rng: &rng)
        let p0 = packed(t, w0, rows: m, k: k), p1 = packed(t, w1, rows: m, k: k)
        // Buffers the ops point into stay put for the whole test.
        var owned: [UnsafeMutablePointer<Float>] = []
        defer { owned.forEach { $0.deallocate() }; p0?.deallocate(); p1?.deallocate() }
        func buffer(_ v: [Float]) -> UnsafeMutablePointer<Float> {
            let b = UnsafeMutablePointer<Float>.allocate(capacity: v.count)
            b.initialize(from: v, count: v.count)
            owned.append(b)
            return b
        }
        func values(_ count: Int, _ scale: Float) -> [Float] { (0..<count).map { _ in Float(rng.below(20001) - 10000) / scale } }
        // How many of the first `count` values differ in their bits.
        func differ(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ count: Int) -> Int { (0..<count).filter { a[$0].bitPattern != b[$0].bitPattern }.count }
        let source = buffer(values(nMax * k, 3000)), normWeight = buffer(values(k, 30000).map { 1 + $0 })
        let bias0 = buffer(values(m, 3000)), bias1 = buffer(values(m, 3000)), residual = values(nMax * m, 3000)
        let x = buffer([Float](repeating: 0, count: nMax * k)), xf = buffer([Float](repeating: 0, count: nMax * k))
        let y0 = buffer([Float](repeating: 0, count: nMax * m)), y1 = buffer([Float](repeating: 0, count: nMax * m))
        let f0 = buffer([Float](repeating: 0, count: nMax * m)), f1 = buffer([Float](repeating: 0, count: nMax * m))
        let gated = buffer([Float](repeating: 0, count: nMax * m)), summed = buffer(residual), into = buffer(residual)
        w0.withUnsafeBytes { w0p in
            w1.withUnsafeBytes { w1p in
                func op(_ second: Bool, _ y: UnsafeMutablePointer<Float>, bias: UnsafeMutablePointer<Float>? = nil, accumulate: Bool = false) -> pk_matmul_op {
                    pk_matmul_op(type: t, w: (second ? w1p : w0p).baseAddress, m: Int64(m), y: y, ldy: Int64(m), packed: UnsafeRawPointer(second ? p1 : p0),
                                 bias: bias.map { UnsafePointer($0) }, accumulate: accumulate ? 1 : 0)
                }
                for isa in availableISAs() {
                    for threads in [1, 2] {
                        let pool = pk_pool_create(Int32(threads))
                        defer { pk_pool_destroy(pool) }
                        for n in [1, 2, nMax] {
                            let scratch = UnsafeMutableRawPointer.allocate(byteCount: pk_matmul_scratch_bytes(Int64(n), Int64(k), Int32(threads)), alignment: 64)
                            defer { scratch.deallocate() }
                            let at = "\(name) isa=\(isa) threads=\(threads) n=\(n)", nk = Int64(n), mk = Int64(m)
                            withISA(isa) {
                                // Unfused: the norm, two products, their biases, the first added to the residual.
                                pk_rms_norm(pool, source, normWeight, x, nk, Int64(k), 1e-5)
                                var ops = [op(false, y0), op(true, y1)]
                                #expect(pk_matmul_many(pool, &ops, 2, Int64(k), x, nk, scratch) == 0)
                                pk_add_rows(pool, y0, bias0, nk, mk, 0)
                                pk_add_rows(pool, y1, bias1, nk, mk, 0)
                                summed.update(from: residual, count: n * m)
                                pk_add_rows(pool, summed, y0, nk, mk, mk)
                                // Fused: the norm as the prologue, the biases as epilogues.
                                var fops = [op(false, f0, bias: bias0), op(true, f1, bias: bias1)]
                                var fuse = pk_matmul_fuse(glu: 0, norm_source: source, norm_weight: normWeight, norm_eps: 1e-5)
                                #expect(pk_matmul_fused(pool, &fops, 2, Int64(k), xf, nk, &fuse, scratch) == 0)
                                #expect(differ(xf, x, n * k) == 0, "\(at): the prologue's rows")
                                #expect(differ(f0, y0, n * m) + differ(f1, y1, n * m) == 0, "\(at): biases")
                                into.update(from: residual, count: n * m)
                                var acc = [op(false, into, bias: bias0, accumulate: true)]
                                #expect(pk_matmul_fused(pool, &acc, 1, Int64(k), x, nk, nil, scratch) == 0)
                                #expect(differ(into, summed, n * m) == 0, "\(at): added to the residual")
                                // The gated pair, both activations, against the products gated apart.
                                for glu in [Int32(PK_GLU_SILU), Int32(PK_GLU_GELU_TANH)] {
                                    var plain = [op(false, y0), op(true, y1)]
                                    #expect(pk_matmul_many(pool, &plain, 2, Int64(k), x, nk, scratch) == 0)
                                    gated.update(from: y0, count: n * m)
                                    if glu == Int32(PK_GLU_SILU) { pk_swiglu(pool, gated, y1, nk, mk) } else { pk_geglu(pool, gated, y1, nk, mk) }
                                    var pair = [op(false, f0), op(true, f1)]
                                    var f = pk_matmul_fuse(glu: glu, norm_source: nil, norm_weight: nil, norm_eps: 0)
                                    #expect(pk_matmul_fused(pool, &pair, 2, Int64(k), x, nk, &f, scratch) == 0)
                                    #expect(differ(f0, gated, n * m) == 0, "\(at): gated pair \(glu)")
                                }
                            }
                        }
                    }
                }
            }
        }
        // Float weights take no epilogue, and the pair needs two products of one height.
        let fw = randomWeights(type: Int32(PK_F32.rawValue), rows: 4, k: 32, rng: &rng), fx = values(32, 3000)
        let y = buffer([Float](repeating: 0, count: 4)), fb = buffer(values(4, 3000))
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: pk_matmul_scratch_bytes(1, 32, 1), alignment: 64)
        defer { scratch.deallocate() }
        fw.withUnsafeBytes { wp in
            var fop = pk_matmul_op(type: Int32(PK_F32.rawValue), w: wp.baseAddress, m: 4, y: y, ldy: 4, packed: nil, bias: UnsafePointer(fb), accumulate: 0)
            #expect(pk_matmul_fused(nil, &fop, 1, 32, fx, 1, nil, scratch) == -1, "float weights with a bias epilogue")
            fop.bias = nil
            var f = pk_matmul_fuse(glu: Int32(PK_GLU_SILU), norm_source: nil, norm_weight: nil, norm_eps: 0)
            #expect(pk_matmul_fused(nil, &fop, 1, 32, fx, 1, &f, scratch) == -1, "a pair of one product")
        }
    }

    /// SwiGLU: every ISA and thread count gives the scalar bits, and the result is within a few
    /// ulps of silu computed in double, over the whole range where exp over- and underflows.
    @Test func swigluIsExactAcrossISAsAndAccurate() {
        var rng = SplitMix64(seed: 77)
        let n = 40, k = 1000 // enough values that two threads split the rows
        let gate = (0..<(n * k)).map { i in i % 97 == 0 ? Float(rng.below(400) - 200) : Float(rng.below(40001) - 20000) / 1000 }
        let up = (0..<(n * k)).map { _ in Float(rng.below(2001) - 1000) / 500 }
        let reference = gatedActivationBits(pk_swiglu, gate: gate, up: up, rows: n)
        var worst = 0.0
        for i in 0..<(n * k) {
            let g = Double(gate[i]), exact = g / (1 + Foundation.exp(-g)) * Double(up[i])
            let tolerance = 4 * Double(Float(exact).ulp) + 1e-30
            worst = max(worst, abs(Double(reference[i]) - exact) / tolerance)
        }
        #expect(worst <= 1, "worst error in units of four ulps: \(worst)")
    }

    /// RMSNorm: every ISA and thread count gives the scalar bits, in place too, for row lengths
    /// that are and are not whole vectors; and the result is within a few ulps of the norm in
    /// double (the float square, the mean's and the scale's roundings, the two products).
    @Test(arguments: [576, 1536, 100, 7, 1])
    func rmsNormIsExactAcrossISAsAndAccurate(k: Int) {
        var rng = SplitMix64(seed: UInt64(90 + k))
        let n = 9000 / k + 3 // enough values that two threads split the rows
        let x = (0..<(n * k)).map { i in i % 89 == 0 ? Float(rng.below(4001) - 2000) / 10 : Float(rng.below(20001) - 10000) / 1000 }
        let w = (0..<k).map { _ in Float(rng.below(2001)) / 1000 }
        func run(threads: Int, inPlace: Bool = false) -> [Float] {
            let pool = pk_pool_create(Int32(threads))
            defer { pk_pool_destroy(pool) }
            var y = inPlace ? x : [Float](repeating: .nan, count: n * k)
            if inPlace {
                y.withUnsafeMutableBufferPointer { pk_rms_norm(pool, $0.baseAddress, w, $0.baseAddress, Int64(n), Int64(k), 1e-5) }
            } else {
                pk_rms_norm(pool, x, w, &y, Int64(n), Int64(k), 1e-5)
            }
            return y
        }
        let reference = withISA(Int32(PK_ISA_SCALAR)) { run(threads: 1) }
        for isa in availableISAs() where isa != Int32(PK_ISA_SCALAR) {
            #expect(withISA(isa) { run(threads: 2) }.map(\.bitPattern) == reference.map(\.bitPattern), "isa \(isa)")
            #expect(withISA(isa) { run(threads: 2, inPlace: true) }.map(\.bitPattern) == reference.map(\.bitPattern), "isa \(isa), in place")
        }
        var worst = 0.0
        for t in 0..<n {
            let row = x[(t * k)..<((t + 1) * k)].map(Double.init)
            let scale = 1 / (row.reduce(0) { $0 + $1 * $1 } / Double(k) + 1e-5).squareRoot()
            for i in 0..<k {
                let exact = row[i] * scale * Double(w[i])
                worst = max(worst, abs(Double(reference[t * k + i]) - exact) / (4 * Double(Float(exact).ulp) + 1e-30))
            }
        }
        #expect(worst <= 1, "worst error in units of four ulps: \(worst)")
    }

    /// GEGLU (Gemma's FFN): every ISA and thread count gives the scalar bits, and the result is
    /// close to gelu's tanh form in double. Where gelu is tiny (g below about -5) its value is
    /// e^(2u) scaled, and float's rounding of u (five operations, up to 2.5 ulps) moves it by
    /// |2u| times that: the bound is six ulps plus that term.
    @Test func gegluIsExactAcrossISAsAndAccurate() {
        var rng = SplitMix64(seed: 78)
        let n = 40, k = 1000
        let gate = (0..<(n * k)).map { i in i % 97 == 0 ? Float(rng.below(400) - 200) : Float(rng.below(20001) - 10000) / 1000 }
        let up = (0..<(n * k)).map { _ in Float(rng.below(2001) - 1000) / 500 }
        let reference = gatedActivationBits(pk_geglu, gate: gate, up: up, rows: n)
        var worst = 0.0
        for i in 0..<(n * k) {
            let g = Double(gate[i])
            let u = (2.0 / Double.pi).squareRoot() * (g + 0.044715 * g * g * g)
            // 0.5 g (1 + tanh u) as g / (1 + e^-2u): the same value without 1 + tanh's cancellation
            let exact = g / (1 + Foundation.exp(-2 * u)) * Double(up[i])
            // (Past the exponent's clamp at 88, the kernel's e^-2u stops growing: its value is g/(1 + e^88),
            // below 1e-38 of g.)
            let tolerance = 6 * Double(Float(exact).ulp) + abs(exact) * min(2 * abs(u), 200) * 2.5e-7 + abs(g * Double(up[i])) * 1e-38
                + 1e-44
            worst = max(worst, abs(Double(reference[i]) - exact) / tolerance)
        }
        #expect(worst <= 1, "worst error in units of the bound: \(worst)")
    }

    /// Argmax: every ISA gives the index a plain scan gives (the first of equal maxima, NaNs
    /// never win, 0 when nothing is above -infinity), at lengths around the vector width.
    @Test func argmaxAgreesWithAScanOnEveryISA() {
        func scan(_ x: [Float]) -> Int64 {
            var best = 0, value = -Float.infinity
            for i in x.indices where x[i] > value { (best, value) = (i, x[i]) }
            return Int64(best)
        }
        var rng = SplitMix64(seed: 5)
        var cases: [[Float]] = [[], [.nan], [-.infinity, -.infinity], [.nan, -.infinity, .nan], [.infinity, 3, .infinity]]
        for n in [1, 2, 15, 16, 17, 31, 33, 100, 49152] {
            for variant in 0..<4 {
                // Few distinct values, so that the maximum repeats; some NaNs and infinities.
                var x = (0..<n).map { _ in Float(rng.below(variant == 0 ? 5 : 1000)) - 500 }
                if variant == 2 { for _ in 0..<max(1, n / 7) { x[rng.below(n)] = .nan } }
                if variant == 3 { x = x.map { $0 > 0 ? -.infinity : $0 }; x[n - 1] = 499 }
                cases.append(x)
            }
        }
        for isa in availableISAs() {
            for x in cases {
                let got = withISA(isa) { x.withUnsafeBufferPointer { pk_argmax($0.baseAddress, Int64(x.count)) } }
                #expect(got == scan(x), "isa \(isa), n \(x.count)")
            }
        }
    }

    /// RoPE through the step's table: each pair is rotated by its angle (position times
    /// base^(-2i/dims)) to within float rounding of the rotation computed in double, in both
    /// pairings, and the table is the same whatever the thread count.
    @Test(arguments: [0, 1]) func ropeRotatesByTheTablesAngles(neox: Int32) {
        let heads = 3, headDim = 64, dims = 64, n = 5
        let positions: [Int32] = [0, 1, 7, 300, 4095]
        var table = [Float](repeating: .nan, count: n * dims)
        pk_rope_table(positions, Int64(n), Int32(dims), 10000, 1, nil, &table)
        var rng = SplitMix64(seed: 9)
        let x = (0..<(n * heads * headDim)).map { _ in Float(rng.below(2001) - 1000) / 500 }
        for threads in [1, 2] {
            var y = x
            let pool = pk_pool_create(Int32(threads))
            pk_rope(pool, &y, Int64(n), Int64(heads * headDim), Int32(heads), Int32(headDim), Int32(dims), table, neox)
            pk_pool_destroy(pool)
            var worst = 0.0
            for t in 0..<n {
                for h in 0..<heads {
                    for i in 0..<(dims / 2) {
                        let a = t * heads * headDim + h * headDim + (neox == 1 ? i : 2 * i)
                        let b = a + (neox == 1 ? dims / 2 : 1)
                        let theta = Double(positions[t]) * pow(10000.0, -2 * Double(i) / Double(dims))
                        let ya = Double(x[a]) * cos(theta) - Double(x[b]) * sin(theta)
                        let yb = Double(x[a]) * sin(theta) + Double(x[b]) * cos(theta)
                        // Angles are accumulated in float, as llama.cpp does: error grows with the position.
                        let tolerance = 1e-6 * (1 + Double(positions[t])) * 4
                        worst = max(worst, abs(Double(y[a]) - ya) / tolerance, abs(Double(y[b]) - yb) / tolerance)
                    }
                }
            }
            #expect(worst <= 1, "threads \(threads): worst error in units of the tolerance \(worst)")
        }
    }

    /// pk_store_kv puts each row's keys and values where pk_store_key and a half row would,
    /// whichever thread stores it; positions of other rows stay as they were.
    @Test func storeKVWritesEachRowToItsSequence() {
        let kvDim = 96, ctx = 48, block = Int(PK_KEY_BLOCK), n = 5
        let keysPerSlot = (ctx + block - 1) / block * block * kvDim
        var rng = SplitMix64(seed: 21)
        let k = (0..<(n * kvDim)).map { _ in Float(rng.below(2001) - 1000) / 300 }
        let v = (0..<(n * kvDim)).map { _ in Float(rng.below(2001) - 1000) / 300 }
        let slots = [0, 2, 2, 1, 0], positions: [Int32] = [3, 17, 18, 40, 4]
        var expectedK = [UInt16](repeating: 7, count: 3 * keysPerSlot), expectedV = [UInt16](repeating: 7, count: 3 * ctx * kvDim)
        for r in 0..<n {
            expectedK.withUnsafeMutableBufferPointer {
                pk_store_key(Array(k[(r * kvDim)..<((r + 1) * kvDim)]), Int64(kvDim), Int64(positions[r]), $0.baseAddress! + slots[r] * keysPerSlot)
            }
            for i in 0..<kvDim { expectedV[slots[r] * ctx * kvDim + Int(positions[r]) * kvDim + i] = pk_f32_to_f16(v[r * kvDim + i]) }
        }
        for threads in [1, 2] {
            var keys = [UInt16](repeating: 7, count: 3 * keysPerSlot), values = [UInt16](repeating: 7, count: 3 * ctx * kvDim)
            let pool = pk_pool_create(Int32(threads))
            keys.withUnsafeMutableBufferPointer { kp in
                values.withUnsafeMutableBufferPointer { vp in
                    let kRows = slots.map { Optional(kp.baseAddress! + $0 * keysPerSlot) }
                    let vRows = slots.map { Optional(vp.baseAddress! + $0 * ctx * kvDim) }
                    pk_store_kv(pool, k, v, Int64(n), Int64(kvDim), positions, kRows, vRows)
                }
            }
            pk_pool_destroy(pool)
            #expect(keys == expectedK, "threads \(threads)")
            #expect(values == expectedV, "threads \(threads)")
        }
    }

    /// LoRA products: every instruction set and thread count gives the scalar path's bits, on
    /// widths that leave partial vectors and rank pairs (k 17 and 100, outputs 33 and 100, odd
    /// ranks) and row blocks of 1, 3 and 4 + 1; a row computed alone equals the same row in a
    /// block; and the result is the float product of the dequantized int8 weights.
    @Test func loraProductsAreExactAcrossISAsAndBlocks() throws {
        var rng = SplitMix64(seed: 4242)
        func random(_ n: Int) -> [Float] { (0..<n).map { _ in Float(Int(rng.next() % 2001) - 1000) / 1000 } }
        let n = 6
        for k in [17, 100, 576] {
            let x = random(n * k)
            // (rank, outputs, rows): distinct outputs per op, so no two ops write the same element.
            let shapes: [(rank: Int, m: Int, rows: [Int32])] = [(5, 33, [0, 2, 4, 5, 1]), (3, 100, [3]), (16, 64, [1, 2, 3])]
            /// An op's weights in memory the kernel may hold pointers into for the whole test.
            struct Op {
                var a: UnsafeMutableBufferPointer<Int8>, sa: UnsafeMutableBufferPointer<Float>
                var bt: UnsafeMutableBufferPointer<Int8>, sb: UnsafeMutableBufferPointer<Float>
                var rank: Int, m: Int, rows: [Int32], y0: [Float]
            }
            var ops: [Op] = []
            defer { for op in ops { op.a.deallocate(); op.sa.deallocate(); op.bt.deallocate(); op.sb.deallocate() } }
            for s in shapes {
                let af = random(s.rank * k), bf = random(s.rank * s.m)
                let op = Op(a: .allocate(capacity: af.count), sa: .allocate(capacity: s.rank), bt: .allocate(capacity: bf.count),
                            sb: .allocate(capacity: s.rank), rank: s.rank, m: s.m, rows: s.rows, y0: random(n * s.m))
                pk_lora_quantize_rows(af, Int64(s.rank), Int64(k), op.a.baseAddress, op.sa.baseAddress)
                pk_lora_quantize_rows(bf, Int64(s.rank), Int64(s.m), op.bt.baseAddress, op.sb.baseAddress)
                ops.append(op)
            }
            /// Each op's y after one call over `selected` (op, rows) pairs.
            func run(_ selected: [(op: Int, rows: [Int32])], threads: Int) -> [[Float]] {
                let ys = ops.map { op in UnsafeMutableBufferPointer<Float>.allocate(capacity: op.y0.count) }
                let rowLists = selected.map { UnsafeMutableBufferPointer<Int32>.allocate(capacity: $0.rows.count) }
                defer { ys.forEach { $0.deallocate() }; rowLists.forEach { $0.deallocate() } }
                for (y, op) in zip(ys, ops) { _ = y.initialize(from: op.y0) }
                let pool = threads > 1 ? pk_pool_create(Int32(threads)) : nil
                defer { if let pool { pk_pool_destroy(pool) } }
                var list: [pk_lora_op] = []
                for ((o, rows), r) in zip(selected, rowLists) {
                    _ = r.initialize(from: rows)
                    let op = ops[o]
                    list.append(pk_lora_op(a: op.a.baseAddress, bt: op.bt.baseAddress, a_scale: op.sa.baseAddress, bt_scale: op.sb.baseAddress,
                                           rank: Int64(op.rank), m: Int64(op.m), scale: 0.75, y: ys[o].baseAddress, ldy: Int64(op.m),
                                           rows: r.baseAddress, n: Int64(rows.count)))
                }
                #expect(pk_lora_apply(pool, list, Int32(list.count), x, Int64(k)) == 0)
                return ys.map { Array($0) }
            }
            let all = ops.indices.map { ($0, ops[$0].rows) }
            let reference = withISA(Int32(PK_ISA_SCALAR)) { run(all, threads: 1) }
            for isa in availableISAs() {
                for threads in [1, 2, 3] {
                    #expect(withISA(isa) { run(all, threads: threads) } == reference, "k \(k) isa \(isa) threads \(threads)")
                }
                // Row 2 of op 0 alone, against the same row in its block of four.
                let alone = withISA(isa) { run([(0, [2])], threads: 1) }[0]
                #expect(Array(alone[2 * ops[0].m..<3 * ops[0].m]) == Array(reference[0][2 * ops[0].m..<3 * ops[0].m]), "k \(k) isa \(isa)")
            }
            // The float product of the dequantized weights, to float rounding.
            for (o, op) in ops.enumerated() {
                for row in op.rows.map(Int.init) {
                    for c in 0..<op.m {
                        var sum = 0.0
                        for r in 0..<op.rank {
                            var t = 0.0
                            for j in 0..<k { t += Double(x[row * k + j]) * Double(op.a[r * k + j]) * Double(op.sa[r]) }
                            sum += t * Double(op.sb[r]) * Double(op.bt[r * op.m + c])
                        }
                        let expected = Double(op.y0[row * op.m + c]) + 0.75 * sum
                        #expect(abs(Double(reference[o][row * op.m + c]) - expected) <= 1e-4 * max(1, abs(expected)), "k \(k) op \(o) row \(row) col \(c)")
                    }
                }
            }
        }
    }
}
