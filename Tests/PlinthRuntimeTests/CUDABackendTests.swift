import Foundation
import PlinthRuntime
import Testing

/// The CUDA backend against the CPU backend and against llama.cpp. Where no GPU can be used (CI)
/// the GPU tests are reported as skipped with the reason, and the fallback test runs instead;
/// `Benchmarks/cuda/ci_check.sh` then runs SmolLM2's on the CPU emulator of a CUDA device
/// (`Benchmarks/cuda/emu`). The kernels' own tests against the CPU kernels are
/// `Benchmarks/cuda/test_cuda.c`.
@Suite(.serialized)
struct CUDABackendTests {
    static let unavailable = Backend.cudaUnavailableReason
    static let smolLM2 = TestModels.path(TestModels.smolLM2)
    static var noGPU: Comment { Comment(rawValue: "no usable CUDA GPU: \(unavailable ?? "")") }

    /// The largest difference between two logit rows, as a share of the first row's range.
    static func relativeDifference(_ a: UnsafeBufferPointer<Float>, _ b: UnsafeBufferPointer<Float>) -> Float {
        var d: Float = 0
        for i in 0..<a.count { d = max(d, abs(a[i] - b[i])) }
        return d / (a.max()! - a.min()!)
    }

    @Test("Without a GPU, the cuda backend is a typed error and auto runs on the CPU",
          .enabled(if: unavailable != nil, "a CUDA GPU is present"),
          .enabled(if: smolLM2 != nil, "SmolLM2 not fetched"))
    func fallback() throws {
        let transformer = try Transformer(url: try #require(Self.smolLM2))
        let error = #expect(throws: BackendError.self) {
            _ = try InferenceContext(transformer: transformer, contextLength: 64, backend: .cuda)
        }
        guard case .cudaUnavailable(let why)? = error else {
            Issue.record("expected cudaUnavailable, got \(String(describing: error))")
            return
        }
        #expect(why == Self.unavailable)
        let auto = try InferenceContext(transformer: transformer, contextLength: 64, backend: .auto)
        #expect(auto.backend == .cpu)
        #expect(auto.deviceName == nil)
        #expect(!auto.choosesTokens)
    }

    @Test("On a GPU, auto picks CUDA", .enabled(if: unavailable == nil, noGPU), .enabled(if: smolLM2 != nil, "SmolLM2 not fetched"))
    func autoPicksCUDA() throws {
        let transformer = try Transformer(url: try #require(Self.smolLM2))
        let ctx = try InferenceContext(transformer: transformer, contextLength: 64, backend: .auto)
        #expect(ctx.backend == .cuda)
        #expect(ctx.deviceName != nil)
    }

    @Test("SmolLM2 on CUDA matches llama.cpp as the CPU does", .enabled(if: unavailable == nil, noGPU),
          .enabled(if: smolLM2 != nil, "SmolLM2 not fetched"))
    func smolLM2Reference() throws { try ReferenceGenerationTests.check(TestModels.smolLM2, "smollm2", backend: .cuda) }

    @Test("Qwen2.5-Coder on CUDA matches llama.cpp as the CPU does", .enabled(if: unavailable == nil, noGPU),
          .enabled(if: TestModels.path(TestModels.qwen25Coder) != nil, "Qwen2.5-Coder not fetched"))
    func qwen25Reference() throws { try ReferenceGenerationTests.check(TestModels.qwen25Coder, "qwen25", backend: .cuda) }

    /// Prefill logits of every fixture prompt on both backends, and the device's masked argmax
    /// against the CPU's choice over the same allowed tokens.
    @Test("CUDA and CPU logits agree; masked argmax on the device picks the CPU's token",
          .enabled(if: unavailable == nil, noGPU), .enabled(if: smolLM2 != nil, "SmolLM2 not fetched"))
    func cpuAgreement() throws {
        let fx = try GenerationFixture.load("smollm2")
        let transformer = try Transformer(url: try #require(Self.smolLM2))
        let n = fx.cases.count
        let prefill = fx.promptBatch()
        let cpu = try InferenceContext(transformer: transformer, contextLength: 256, slots: n, backend: .cpu)
        let gpu = try InferenceContext(transformer: transformer, contextLength: 256, slots: n, backend: .cuda)
        try cpu.forward(prefill)
        try gpu.forward(prefill)
        let selfWorst = fx.cases.map(\.llama_self.logit_error).max() ?? 0
        var worst: Float = 0
        var cpuLogits: [[Float]] = []
        for s in 0..<n {
            worst = max(worst, Self.relativeDifference(cpu.logits(s), gpu.logits(s)))
            cpuLogits.append(Array(cpu.logits(s)))
        }
        print("[cuda] worst CPU-CUDA prefill logit difference: \(worst) of the range (llama.cpp's own noise: \(selfWorst))")
        #expect(worst <= max(1e-2, 2 * selfWorst))

        // One decode step per sequence with the device choosing: every other token allowed.
        let vocab = transformer.config.vocabularySize
        let allowed = [UInt32](repeating: 0x5555_5555, count: (vocab + 31) / 32)  // even token ids
        var step = Batch()
        for (s, c) in fx.cases.enumerated() {
            let next = cpuLogits[s].withUnsafeBufferPointer { Sampler.argmax($0) }
            step.add(next, position: c.prompt_ids.count, slot: s, logits: true, use: .argmax(allowed: allowed))
        }
        try cpu.forward(step)
        try gpu.forward(step)
        var agree = 0
        for s in 0..<n {
            let row = Array(cpu.logits(s))
            var best = -1, second = -1
            for i in stride(from: 0, to: vocab, by: 2) {
                if best < 0 || row[i] > row[best] { second = best; best = i } else if second < 0 || row[i] > row[second] { second = i }
            }
            let chosen = try #require(gpu.chosenToken(s))
            #expect(chosen % 2 == 0, "the device chose token \(chosen), which the mask forbids")
            let range = row.max()! - row.min()!
            if Int(chosen) == best {
                agree += 1
            } else {
                #expect(row[best] - row[Int(chosen)] <= 2 * max(1e-2, selfWorst) * range,
                        "sequence \(s): the device chose \(chosen) where the CPU's best allowed token is \(best) by a wide margin")
            }
        }
        print("[cuda] masked argmax: \(agree) of \(n) rows chose the CPU's token")
    }
    /// Sampled rows reduced on the device: the same decode step run twice on one context, once
    /// returning whole rows and once each row's k best tokens (`LogitsUse.top`), with and without
    /// a mask. The candidates must be the whole row's best k, best first (ties: lower id first),
    /// bit for bit, since both runs compute the same logits.
    @Test("On the device, a sampled row's k best tokens are those of its whole row",
          .enabled(if: unavailable == nil, noGPU), .enabled(if: smolLM2 != nil, "SmolLM2 not fetched"))
    func topCandidates() throws {
        let fx = try GenerationFixture.load("smollm2")
        let transformer = try Transformer(url: try #require(Self.smolLM2))
        let cases = Array(fx.cases.prefix(6))
        let n = cases.count
        let gpu = try InferenceContext(transformer: transformer, contextLength: 256, slots: n, backend: .cuda)
        try gpu.forward(fx.promptBatch(first: n))
        let next = (0..<n).map { Sampler.argmax(gpu.logits($0)) }
        func step(_ use: (Int) -> LogitsUse) throws {
            var b = Batch()
            for (s, c) in cases.enumerated() { b.add(next[s], position: c.prompt_ids.count, slot: s, logits: true, use: use(s)) }
            try gpu.forward(b)
        }
        try step { _ in .full }
        let rows = (0..<n).map { Array(gpu.logits($0)) }
        let vocab = transformer.config.vocabularySize
        let odd = [UInt32](repeating: 0xAAAA_AAAA, count: (vocab + 31) / 32)  // odd token ids
        let ks = [1, 40, LogitsUse.maxTopK, 7, 64, 2]
        for masked in [false, true] {
            try step { s in .top(k: ks[s], allowed: masked ? odd : nil) }
            for s in 0..<n {
                let got = try #require(gpu.topCandidates(s), "row \(s) came back whole, not reduced")
                let want = rows[s].enumerated()
                    .filter { !masked || $0.offset % 2 == 1 }
                    .sorted { $0.element != $1.element ? $0.element > $1.element : $0.offset < $1.offset }
                    .prefix(ks[s])
                #expect(got.count == ks[s], "row \(s): \(got.count) candidates for k = \(ks[s])")
                for (g, w) in zip(got, want) {
                    #expect(Int(g.id) == w.offset && g.logit.bitPattern == w.element.bitPattern,
                            "row \(s)\(masked ? " (odd ids)" : ""): candidate (\(g.id), \(g.logit)), the row's (\(w.offset), \(w.element))")
                }
            }
        }
    }
    /// Decoding one and two sequences, the steps a chat or `plinth bench` takes (the products'
    /// fused norm tails and the fused gate|up work only at one or two rows; the other tests decode
    /// many rows at once): every step's logits on the device against the CPU's, both fed the
    /// CPU's greedy tokens so they stay on one path.
    @Test("Decoding one or two sequences, CUDA's logits at every step agree with the CPU's",
          .enabled(if: unavailable == nil, noGPU), .enabled(if: smolLM2 != nil, "SmolLM2 not fetched"))
    func decodeAgreement() throws {
        let fx = try GenerationFixture.load("smollm2")
        let transformer = try Transformer(url: try #require(Self.smolLM2))
        let tolerance = max(1e-2, 2 * (fx.cases.map(\.llama_self.logit_error).max() ?? 0))
        for rows in [1, 2] {
            let cases = Array(fx.cases.prefix(rows))
            let cpu = try InferenceContext(transformer: transformer, contextLength: 256, slots: rows, backend: .cpu)
            let gpu = try InferenceContext(transformer: transformer, contextLength: 256, slots: rows, backend: .cuda)
            var batch = fx.promptBatch(first: rows)
            var positions = cases.map(\.prompt_ids.count)
            var worst: Float = 0
            for step in 0..<17 {
                try cpu.forward(batch)
                try gpu.forward(batch)
                var next = Batch()
                for s in 0..<rows {
                    let d = Self.relativeDifference(cpu.logits(s), gpu.logits(s))
                    worst = max(worst, d)
                    #expect(d <= tolerance, "\(rows) rows, step \(step), sequence \(s): logits differ by \(d) of the range")
                    next.add(Sampler.argmax(cpu.logits(s)), position: positions[s], slot: s, logits: true)
                    positions[s] += 1
                }
                batch = next
            }
            print("[cuda] decoding \(rows) sequence(s), 16 steps: worst CPU-CUDA logit difference \(worst) of the range (tolerance \(tolerance))")
        }
    }
}
