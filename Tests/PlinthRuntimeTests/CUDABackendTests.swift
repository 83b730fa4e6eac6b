import Foundation
import PlinthKernels
@testable import PlinthRuntime
import Synchronization
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
    /// Whether the device is the CPU emulator (Benchmarks/cuda/emu), whose memory
    /// `PKC_EMU_MEMORY_GIB` sets.
    static let emulated: Bool = {
        guard unavailable == nil, let t = try? tinyModel(.f32), let c = try? InferenceContext(transformer: t, contextLength: 16, backend: .cuda)
        else { return false }
        return c.deviceName?.contains("CPU emulator") == true
    }()

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

    @Test("Gemma 3 on CUDA matches llama.cpp as the CPU does", .enabled(if: unavailable == nil, noGPU),
          .enabled(if: TestModels.path(TestModels.gemma3) != nil, "Gemma 3 not fetched"))
    func gemma3Reference() throws { try ReferenceGenerationTests.check(TestModels.gemma3, "gemma3", backend: .cuda) }

    /// Gemma 3's layers run as recorded (QK norms, post-norms, GeGLU, a sliding window, two RoPE
    /// bases, the embedding scale, a final softcap) against the naive pass in Double: two
    /// sequences in one step (the GEMM path), then one token at a time past the window (the
    /// GEMV path, graph-replayed).
    @Test("A tiny Gemma 3 on CUDA matches the naive forward pass", .enabled(if: unavailable == nil, noGPU))
    func tinyGemma() throws {
        let tiny = TinyGemma(headDim: 32) // the attention kernel's head sizes are powers of two
        let t = try ArchitectureTests.load(tiny.bytes())
        let ctx = try InferenceContext(transformer: t, contextLength: 16, slots: 2, backend: .cuda)
        #expect(ctx.backend == .cuda)
        let (worst, decoding) = try tiny.largestDifferences(ctx)
        #expect(worst < 2e-3, "two sequences in one step: largest logit difference \(worst)")
        #expect(decoding < 2e-3, "one token at a time: largest logit difference \(decoding)")
        print("[cuda] tiny Gemma 3 against the naive pass: \(worst) (one step), \(decoding) (decoding)")
    }

    /// Linear RoPE scaling and Llama 3.1's per-pair frequency factors, in the fused Llama step
    /// and the recorded one, against the naive pass (the CPU's bound, ArchitectureTests).
    @Test("Scaled RoPE on CUDA matches the naive forward pass", .enabled(if: unavailable == nil, noGPU), arguments: [false, true])
    func scaledRoPE(recorded: Bool) throws {
        var tiny = TinyLlama()
        tiny.ropeScalingFactor = 4
        tiny.ropeFactors = (0..<tiny.headDim / 2).map { Float(1 + $0 % 5) }
        let t = try withTemporaryFile(tiny.bytes()) { try Transformer(url: $0) }
        let tokens: [Int32] = [7, 30, 2, 11, 4, 19]
        let ctx = try InferenceContext(transformer: t, contextLength: 16, backend: .cuda, recordedLayers: recorded)
        #expect(ctx.backend == .cuda)
        let worst = try worstLogitError(ctx, tokens, against: tiny.referenceLogits(tokens))
        #expect(worst < 1e-2, "largest logit difference \(worst)")
    }

    /// Qwen3's layers (QK norms, heads wider than the embedding over their count) run as
    /// recorded, against llama.cpp's logits on the same tiny file, within the CPU's bound.
    @Test("A tiny Qwen3 on CUDA matches llama.cpp", .enabled(if: unavailable == nil, noGPU))
    func tinyQwen3() throws {
        let (t, fixture) = try ArchitectureFixture.load("qwen3")
        let ctx = try InferenceContext(transformer: t, contextLength: 64, slots: 2, backend: .cuda)
        #expect(ctx.backend == .cuda)
        let (worst, decoding) = try fixture.largestDifferences(ctx)
        #expect(worst < 2e-3 * fixture.spread, "two sequences in one step: largest logit difference \(worst) of \(fixture.spread)")
        #expect(decoding < 2e-3 * fixture.spread, "one token at a time: largest logit difference \(decoding) of \(fixture.spread)")
        print("[cuda] tiny Qwen3 against llama.cpp: \(worst) (one step), \(decoding) (decoding), spread \(fixture.spread)")
    }

    /// Gemma 2's soft-capped attention has no CUDA kernel: `cuda` says so, `auto` runs it on the CPU.
    @Test("Gemma 2 is refused by CUDA with its reason, and auto runs it on the CPU", .enabled(if: unavailable == nil, noGPU))
    func gemma2OnTheCPU() throws {
        let (t, _) = try ArchitectureFixture.load("gemma2")
        let e = caughtError(BackendError.self) { _ = try InferenceContext(transformer: t, contextLength: 64, backend: .cuda) }
        #expect(e == .cudaUnavailable("soft-capped attention (gemma2) has no CUDA kernel yet"))
        let auto = try InferenceContext(transformer: t, contextLength: 64, backend: .auto)
        #expect(auto.backend == .cpu)
    }

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

    /// A GGUF LoRA (rank 4, scale 2) on one kind of matrix: the token embedding, the output, or
    /// one matrix of every layer; A's values uniform in ±1/√inputs, B's in ±`b`.
    static func siteAdapter(_ c: ModelConfig, _ site: String, b: Double) -> [UInt8] {
        var t = RandomTensors(seed: UInt64(site.utf8.reduce(25) { $0 &* 31 &+ UInt64($1) }))
        let r = 4, e = c.embeddingLength, vocab = c.vocabularySize, ff = c.feedForwardLength
        let q = c.headCount * c.headDim, kv = c.kvHeadCount * c.headDim
        // ggml dimensions, innermost first: A is [inputs, r], B [r, outputs]; the embedding's
        // pair is stored flipped.
        switch site {
        case "token_embd":
            t.add("token_embd.weight.lora_a", [r, vocab], scale: b)
            t.add("token_embd.weight.lora_b", [r, e], scale: 1 / Double(r).squareRoot())
        case "output":
            t.add("output.weight.lora_a", [e, r], scale: 1 / Double(e).squareRoot())
            t.add("output.weight.lora_b", [r, vocab], scale: b)
        default:
            let (inputs, outputs) = ["attn_q": (e, q), "attn_k": (e, kv), "attn_v": (e, kv), "attn_output": (q, e),
                                     "ffn_gate": (e, ff), "ffn_up": (e, ff), "ffn_down": (ff, e)][site]!
            for l in 0..<c.layerCount {
                t.add("blk.\(l).\(site).weight.lora_a", [inputs, r], scale: 1 / Double(inputs).squareRoot())
                t.add("blk.\(l).\(site).weight.lora_b", [r, outputs], scale: b)
            }
        }
        var builder = GGUFBuilder()
        builder.add("general.architecture", .string(c.architecture.rawValue))
        builder.add("general.type", .string("adapter"))
        builder.add("adapter.type", .string("lora"))
        builder.add("adapter.lora.alpha", .float32(8))
        for name in t.order {
            let (dims, values) = t.tensors[name]!
            builder.addTensor(.init(name, dims: dims.map(UInt64.init), type: .f32, data: values.withUnsafeBytes { Array($0) }))
        }
        return builder.bytes()
    }

    /// The kernels `gpu` launches running `batch` (a shape's first step runs directly, its second
    /// is captured: each launches the step's kernels; a replay launches none).
    static func launches(_ gpu: InferenceContext, _ batch: Batch) throws -> UInt64 {
        let before = try #require(gpu.kernelLaunches)
        try gpu.forward(batch)
        return try #require(gpu.kernelLaunches) - before
    }

    /// The tiny models' prompt (token ids of their 32-token vocabulary).
    static let tinyPrompt: [Int32] = [30, 7, 4, 11, 11, 14, 26, 22, 14, 17, 11, 3, 2]

    /// ``tinyPrompt`` on slots 0..<slots in one batch, each slot's last position wanting logits.
    static func prompts(slots: Int) -> Batch {
        var b = Batch()
        for slot in 0..<slots {
            for (p, t) in tinyPrompt.enumerated() { b.add(t, position: p, slot: slot, logits: p == tinyPrompt.count - 1) }
        }
        return b
    }

    /// A tiny model of `family` ("llama": a two-layer ``TinyLlama``, or "gemma3" with F32 weights)
    /// with its matrices in `type`, or in `types[role]` for each layer's matrix of that role ("attn_v").
    static func tinyModel(_ type: GGMLType, family: String = "llama", types: [String: GGMLType] = [:]) throws -> Transformer {
        if family == "gemma3" {
            guard type == .f32 else { throw ModelError.invalidMetadata(key: "general.file_type", reason: "the tiny Gemma is F32 only") }
            return try withTemporaryFile(TinyGemma(headDim: 32).bytes()) { try Transformer(url: $0) }
        }
        return try withTemporaryFile(tinyLlama(type, types: types)) { try Transformer(url: $0) }
    }

    /// The file of ``tinyModel(_:family:types:)``'s two-layer Llama.
    static func tinyLlama(_ type: GGMLType, types: [String: GGMLType] = [:]) -> [UInt8] {
        var tiny = TinyLlama(layers: 2)
        tiny.context = 64
        var replace: [String: GGUFBuilder.Tensor] = [:]
        if type != .f32 || !types.isEmpty {
            for name in tiny.order {
                let (dims, values) = tiny.weights[name]!
                let type = types.first { name.hasSuffix(".\($0.key).weight") }?.value ?? type
                guard dims.count == 2, type != .f32 else { continue }
                var bytes = [UInt8](repeating: 0, count: type.rowBytes(dims[0])! * dims[1])
                bytes.withUnsafeMutableBytes { out in
                    values.withUnsafeBufferPointer { _ = pk_quantize(Int32(type.rawValue), $0.baseAddress!, out.baseAddress!, Int64(values.count)) }
                }
                replace[name] = .init(name, dims: dims.map(UInt64.init), type: type, data: bytes)
            }
        }
        return tiny.bytes(replace: replace)
    }

    /// Allows, at a sequence's n-th generated token, the tokens t < 30 (not BOS or EOS) with
    /// (t + offset + n) % 3 == 0: a third of the vocabulary, another one for each sequence and
    /// token. Notes the threads that ask for its masks; ends the output after `length` tokens.
    final class ThirdsConstraint: Constraint {
        let offset: Int, length: Int
        let threads: ThreadLog
        var taken = 0
        init(offset: Int, length: Int, threads: ThreadLog) {
            self.offset = offset
            self.length = length
            self.threads = threads
        }
        static func allows(_ token: Int32, offset: Int, at n: Int) -> Bool { token < 30 && (Int(token) + offset + n) % 3 == 0 }
        func begin(_ out: inout ConstraintOutput) throws {}
        func fillAllowed(_ mask: UnsafeMutableBufferPointer<UInt32>) -> Bool {
            threads.note()
            for w in mask.indices { mask[w] = 0 }
            for t in Int32(0)..<30 where Self.allows(t, offset: offset, at: taken) { mask[Int(t) / 32] |= 1 << (UInt32(t) % 32) }
            return true
        }
        func accept(_ token: Int32, _ out: inout ConstraintOutput) throws {
            out.append(token)
            taken += 1
            if taken == length { out.finish() }
        }
        func end(_ reason: FinishReason, _ out: inout ConstraintOutput) throws {}
    }

    /// The threads that have called ``note()``.
    final class ThreadLog: Sendable {
        private let seen = Mutex(Set<UInt>())
        func note() { _ = seen.withLock { $0.insert(UInt(pthread_self())) } }
        var count: Int { seen.withLock { $0.count } }
    }

    /// Many constrained sequences at once: a backend that chooses tokens gets each decoding row's
    /// allowed tokens with the step, computed (from 16 rows on) on several threads where the
    /// dispatch gives them (the count is printed). Each sequence
    /// allows another third of the vocabulary at each token, so a mask on the wrong row, or one
    /// left from an earlier step, gives a token outside its own third. The tokens are the CPU's,
    /// but for near-ties (the device's products round differently).
    @Test("20 masked sequences at once on CUDA: each row under its own mask, the CPU's tokens",
          .enabled(if: unavailable == nil, noGPU))
    func manyMaskedRows() throws {
        let model = try withTemporaryFile(Self.tinyLlama(.f32)) { try Model(url: $0) }
        let count = 20, length = 10
        func run(_ backend: Backend) throws -> (tokens: [[Int32]], threads: Int) {
            let threads = ThreadLog()
            let scheduler = try Scheduler(model: model, configuration: .init(contextLength: 64, slots: count, maxRunning: count,
                                                                             stepTokens: 512, backend: backend))
            #expect(scheduler.backend == backend)
            let collectors = (0..<count).map { i in
                let c = SchedulerTests.Collector()
                let prompt = Self.tinyPrompt.map { ($0 + Int32(i)) % 30 }
                _ = scheduler.submit(GenerationRequest(prompt: prompt, maxTokens: length + 4, constraint: {
                    ThirdsConstraint(offset: i, length: length, threads: threads)
                })) { c.handle($0) }
                return c
            }
            var tokens: [[Int32]] = []
            for (i, c) in collectors.enumerated() {
                c.wait()
                let summary = try #require(c.summary, "\(backend) request \(i): \(String(describing: c.state.withLock { $0.error }))")
                tokens.append(summary.tokens)
            }
            #expect(scheduler.statistics.largestBatch == count, "\(backend): at most \(scheduler.statistics.largestBatch) at once")
            return (tokens, threads.count)
        }
        let gpu = try run(.cuda), cpu = try run(.cpu)
        for (i, tokens) in gpu.tokens.enumerated() {
            #expect(tokens.count == length, "request \(i): \(tokens)")
            let outside = tokens.indices.filter { !ThirdsConstraint.allows(tokens[$0], offset: i, at: $0) }
            #expect(outside.isEmpty, "request \(i): tokens \(outside) outside their masks: \(tokens)")
        }
        // Not asserted: the dispatch may run both halves of a 2-core machine's rows on one thread.
        let same = zip(gpu.tokens, cpu.tokens).count { $0 == $1 }
        print("[cuda] \(count) masked sequences at once: \(same) with the CPU's tokens, masks built on \(gpu.threads) threads")
        #expect(same * 4 >= count * 3, "only \(same) of \(count) sequences got the CPU's tokens")
    }

    /// Unmerged adapters on the device against the CPU, on a tiny model whose products the two
    /// backends compute alike (F32 weights; Q8_0 weights, whose decode products take the same int8
    /// rows of their inputs on both), so that their logits differ by little beside an adapter's
    /// effect. One adapter per place a pair can sit (the embedding, each of a layer's seven
    /// matrices, the output), each on a sequence of one prompt beside a sequence without: each
    /// adapter's effect (its row's logits less the base row's) on the device must be the CPU's,
    /// within a few percent of it (a pair the device skipped, or added in the wrong place, is off
    /// by about all of it). With F32 weights the backends' logits differ by ~1e-3 of an effect;
    /// with Q8_0, by a few percent (the int8 rounding of each product's input turns their tiny
    /// differences, in attention's and the norms' sums, into whole steps of a byte): the bounds
    /// are 2 % and 25 %. First the prompt in one step (the GEMM path), then a token at two rows,
    /// the base's and one adapter's, where the device fuses norms and the gated product into the
    /// products (which adapted layers must not); the last steps replay a captured graph. After a
    /// detach, a row naming the adapter is refused. The tiny Gemma 3 (F32) runs its planned
    /// launches (``PlannedLaunch``), a group with an adapted matrix as its recorded operations.
    @Test("Adapters run unmerged on CUDA as on the CPU", .enabled(if: unavailable == nil, noGPU),
          arguments: zip([GGMLType.f32, .q8_0, .f32], ["llama", "llama", "gemma3"]))
    func adapters(weights: GGMLType, family: String) throws {
        let transformer = try Self.tinyModel(weights, family: family)
        let c = transformer.config
        let sites = ["token_embd", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "output"]
        // Gemma's post-norms shrink an adapter's effect on the logits: a stronger B keeps it measurable.
        let strength = family == "gemma3" ? 1.0 : 0.5
        let adapters = try sites.map { site in
            try withTemporaryFile(Self.siteAdapter(c, site, b: strength)) { try LoRAAdapter(contentsOf: $0, for: transformer) }
        }
        // Slot 0: the base; slot 1 + i: adapter i; the last slot: scratch for the base's copies.
        let slots = adapters.count + 2, scratch = slots - 1
        let cpu = try InferenceContext(transformer: transformer, contextLength: 64, slots: slots, backend: .cpu)
        let gpu = try InferenceContext(transformer: transformer, contextLength: 64, slots: slots, backend: .cuda)
        let ids = try adapters.map { a in
            let id = try cpu.attach(a)
            #expect(try gpu.attach(a) == id)
            return id
        }
        let prompt = Self.tinyPrompt
        let bound: Float = weights == .f32 ? 0.02 : 0.25
        /// Adapter `i`'s effect (row `r` less row `base`) on both backends: the device's error
        /// as a share of the CPU's effect, and the CPU's effect as a share of its logits' range.
        func effect(_ i: Int, row r: Int, base: Int) -> (error: Float, size: Float) {
            let ca = cpu.logits(r), ga = gpu.logits(r), cb = cpu.logits(base), gb = gpu.logits(base)
            var err: Float = 0, size: Float = 0
            for j in 0..<ca.count {
                let dc = ca[j] - cb[j], dg = ga[j] - gb[j]
                err = max(err, abs(dg - dc))
                size = max(size, abs(dc))
            }
            return (err / size, size / (cb.max()! - cb.min()!))
        }
        var report: [String] = []
        func check(_ i: Int, row r: Int, base: Int, within bound: Float, _ what: String) {
            let (error, size) = effect(i, row: r, base: base)
            report.append("\(sites[i]) \(String(format: "%.2f/%.4f", size, error))")
            #expect(size > 0.05, "\(what): adapter \(sites[i]) moves the logits by \(size) of their range: too little to check")
            #expect(error < bound, "\(what): adapter \(sites[i])'s effect on the device is off by \(error) of the CPU's")
        }

        // 1. The prompt on every slot but the scratch one, in one step.
        var batch = Batch()
        for slot in 0..<(slots - 1) {
            for (p, t) in prompt.enumerated() {
                batch.add(t, position: p, slot: slot, logits: p == prompt.count - 1, adapter: slot == 0 ? 0 : ids[slot - 1])
            }
        }
        try cpu.forward(batch)
        try gpu.forward(batch)
        for i in adapters.indices { check(i, row: 1 + i, base: 0, within: bound, "the prompt in one step") }
        print("[cuda] adapters, \(family) \(weights.name), the prompt in one step (effect/error): \(report.joined(separator: ", "))")
        let token = Sampler.argmax(cpu.logits(0))

        // 2. One token at two rows: a copy of the base's cache, and adapter i's sequence.
        func twoRows(_ i: Int, _ what: String) throws {
            for ctx in [cpu, gpu] { try ctx.copyPrefix(from: 0, to: scratch, count: prompt.count) }
            var b = Batch()
            b.add(token, position: prompt.count, slot: scratch, logits: true)
            b.add(token, position: prompt.count, slot: 1 + i, logits: true, adapter: ids[i])
            try cpu.forward(b)
            try gpu.forward(b)
            check(i, row: 1, base: 0, within: bound, what)
            for ctx in [cpu, gpu] { ctx.reset(slot: 1 + i, keeping: prompt.count) }
        }
        report = []
        for i in adapters.indices { try twoRows(i, "a token at two rows") }
        // The same step twice more with the last adapter: the second run is captured, the third replays it.
        for _ in 0..<2 { try twoRows(adapters.count - 1, "a token at two rows, again") }
        print("[cuda] adapters, \(family) \(weights.name), a token at two rows (effect/error): \(report.joined(separator: ", "))")

        // Detached, an adapter is gone: a row naming it is refused.
        gpu.detach(ids[0])
        #expect(throws: ModelError.self) { try gpu.forward(.sequence([token], slot: scratch, adapter: ids[0])) }
    }

    /// Llama's block run through the recorded path (its layers grouped by ``PlannedLaunch`` as
    /// Gemma's are) gives the fused step's logits bit for bit: the same kernels with the same
    /// arithmetic, grouped the same way (attention's launch without norms, the products adding
    /// straight into the residual with the next norm in their last block). The prompt on two
    /// sequences in one step (the GEMM path), five rows (the GEMV path, no tails), then decoding
    /// at two rows and at one (the tails; graphs captured and replayed).
    @Test("Llama's layers run as recorded on CUDA give the fused step's logits", .enabled(if: unavailable == nil, noGPU),
          arguments: [GGMLType.f32, .q8_0])
    func recordedMatchesFused(weights: GGMLType) throws {
        let transformer = try Self.tinyModel(weights)
        let fused = try InferenceContext(transformer: transformer, contextLength: 64, slots: 2, backend: .cuda)
        let recorded = try InferenceContext(transformer: transformer, contextLength: 64, slots: 2, backend: .cuda, recordedLayers: true)
        var differing = 0, compared = 0
        func step(_ b: Batch) throws {
            try fused.forward(b)
            try recorded.forward(b)
            for r in 0..<b.wantsLogits.filter({ $0 }).count {
                compared += 1
                if !zip(fused.logits(r), recorded.logits(r)).allSatisfy({ $0.bitPattern == $1.bitPattern }) { differing += 1 }
            }
        }
        var b = Self.prompts(slots: 2)
        try step(b)
        var length = [Self.tinyPrompt.count, Self.tinyPrompt.count]
        b = Batch()
        for (slot, count) in [(0, 3), (1, 2)] {
            for i in 0..<count { b.add(Int32(5 + i), position: length[slot] + i, slot: slot, logits: true) }
            length[slot] += count
        }
        try step(b)
        for rows in [2, 2, 2, 1, 1, 1] {
            b = Batch()
            for slot in 0..<rows {
                b.add(Sampler.argmax(fused.logits(slot)), position: length[slot], slot: slot, logits: true)
                length[slot] += 1
            }
            try step(b)
        }
        #expect(compared == 2 + 5 + 9)
        #expect(differing == 0, "\(differing) of \(compared) logit rows differ between the recorded and the fused step")
    }

    /// A layer whose q and k are Q5_0 and v Q8_0 (as in half of Qwen2.5-Coder-0.5B's), gate Q5_0
    /// and up Q4_0: rewritten as Q8_0 (``CUDAForward/unifiedRuns(_:enabled:)``), q|k|v and gate|up
    /// are a launch each and a decode step five a layer + 2 as with one type; kept apart, eight (v's
    /// and up's own, on the side stream, and swiglu, since the gated product needs one run). Both
    /// agree with the CPU on the mixed file: the prompts in one step (the GEMM path, f16 copies of
    /// either form being the same weights), then decoding at two rows and one, captured and
    /// replayed. Unified, q|k read the int8 rows of x, as the CPU's products do. The unified
    /// layers run as recorded (``PlannedLaunch``) give the fused step's logits bit for bit.
    @Test("Side-by-side products of two types run as one launch, with the CPU's results", .enabled(if: unavailable == nil, noGPU))
    func unifiedRuns() throws {
        let transformer = try Self.tinyModel(.q5_0, types: ["attn_v": .q8_0, "ffn_up": .q4_0])
        let layers = transformer.config.layerCount
        let cpu = try InferenceContext(transformer: transformer, contextLength: 64, slots: 2, backend: .cpu)
        let unified = try InferenceContext(transformer: transformer, contextLength: 64, slots: 2, backend: .cuda, recordedLayers: false,
                                           unifyRuns: true)
        let apart = try InferenceContext(transformer: transformer, contextLength: 64, slots: 2, backend: .cuda, recordedLayers: false,
                                         unifyRuns: false)
        let recorded = try InferenceContext(transformer: transformer, contextLength: 64, slots: 2, backend: .cuda, recordedLayers: true,
                                            unifyRuns: true)
        var worst: [Float] = [0, 0], recordedDiffer = 0
        var launches: [[UInt64]] = [[], []]
        func step(_ b: Batch) throws {
            try cpu.forward(b)
            for (i, gpu) in [unified, apart].enumerated() {
                launches[i].append(try Self.launches(gpu, b))
                for r in 0..<b.wantsLogits.filter({ $0 }).count {
                    worst[i] = max(worst[i], Self.relativeDifference(cpu.logits(r), gpu.logits(r)))
                }
            }
            try recorded.forward(b)
            for r in 0..<b.wantsLogits.filter({ $0 }).count
            where !zip(unified.logits(r), recorded.logits(r)).allSatisfy({ $0.bitPattern == $1.bitPattern }) {
                recordedDiffer += 1
            }
        }
        try step(Self.prompts(slots: 2))
        var length = [Self.tinyPrompt.count, Self.tinyPrompt.count]
        for rows in [2, 2, 2, 1, 1, 1] {
            var b = Batch()
            for slot in 0..<rows {
                b.add(Sampler.argmax(cpu.logits(slot)), position: length[slot], slot: slot, logits: true)
                length[slot] += 1
            }
            try step(b)
        }
        print("[cuda] q|k Q5_0, v Q8_0, gate Q5_0, up Q4_0: worst CPU-CUDA logit difference \(worst[0]) unified, \(worst[1]) apart; launches \(launches)")
        // The first step at each row count runs directly (a replay launches none); whole logit
        // rows come back, so no argmax launch.
        #expect(launches[0][1] == UInt64(5 * layers + 2) && launches[0][4] == UInt64(5 * layers + 2), "unified: \(launches[0])")
        #expect(launches[1][1] == UInt64(8 * layers + 2) && launches[1][4] == UInt64(8 * layers + 2), "apart: \(launches[1])")
        // Measured on the emulator: 0.0216 unified, 0.0311 apart (the int8 rounding of a 64-wide
        // model's rows; weights read wrongly would be off by about the whole range).
        #expect(worst[0] < 0.05 && worst[1] < 0.05, "worst logit difference \(worst) of the range")
        #expect(recordedDiffer == 0, "\(recordedDiffer) logit rows differ between the recorded and the fused unified step")
    }

    /// What a decode step launches, counted, so that a fused launch that stops fusing (its
    /// results are the same bits) shows here. The tiny Llama's step, at one row and at two: one
    /// launch for the embedding, the first norm and the RoPE table; five a layer (q|k|v with RoPE
    /// and the cache store in its last block, attention, the output product with the residual add
    /// and the feed-forward norm, the gated product, the down product with the add and the next
    /// norm); the output product and the argmax. The tiny Gemma 3's planned step: five a layer
    /// (q|k|v with the head norms, RoPE and the store in its last block, attention, the output
    /// product with its post-norm, add and next norm, the gated GEGLU product, the down product likewise) and
    /// four more (the embedding with its scale, two RoPE tables and the first norm in one; the
    /// output product, the softcap, the argmax). With Q8_0 weights, every product the GEMM path takes has an f16
    /// copy (none for F32), and the norms, swiglu and attention write the f16 rows the next product
    /// reads, so the two prompts in one step launch five a layer (the rope-and-store, attention,
    /// two norms, swiglu; cuBLAS's own not counted), but for the last layer's second norm, and
    /// three more (the first launch; the logit
    /// rows gathered, normed, multiplied). The counts are the default switches' and
    /// crossover's, on a device with more than a GiB free.
    @Test("A step launches what the fused launches and the f16 weights promise", .enabled(if: unavailable == nil, noGPU),
          arguments: zip([GGMLType.f32, .q8_0, .f32], ["llama", "llama", "gemma3"]))
    func launchesPerStep(weights: GGMLType, family: String) throws {
        let transformer = try Self.tinyModel(weights, family: family)
        let gpu = try InferenceContext(transformer: transformer, contextLength: 64, slots: 2, backend: .cuda)
        let c = transformer.config, layers = c.layerCount
        let expected = family == "gemma3" ? 5 * layers + 4 : 5 * layers + 3
        // Q8_0: each layer's q|k|v, output, gate|up and down, and the output matrix.
        let layerWeights = c.embeddingLength * (c.headCount + 2 * c.kvHeadCount) * c.headDim + c.headCount * c.headDim * c.embeddingLength
            + 3 * c.embeddingLength * c.feedForwardLength
        let copies = weights == .q8_0 ? 2 * (layers * layerWeights + c.vocabularySize * c.embeddingLength) : 0
        #expect(gpu.f16WeightBytes == copies)
        var b = Self.prompts(slots: 2)
        let prompts = try Self.launches(gpu, b)
        if weights == .q8_0 {
            #expect(prompts == UInt64(5 * layers + 3), "the prompts' step: \(prompts) kernels, not \(5 * layers + 3)")
        }
        var length = [Self.tinyPrompt.count, Self.tinyPrompt.count]
        for rows in [1, 2] {
            b = Batch()
            for slot in 0..<rows {
                b.add(Int32(3 + slot), position: length[slot], slot: slot, logits: true, use: .argmax(allowed: nil))
                length[slot] += 1
            }
            // The shape's first step runs directly: every launch counts once.
            let launched = try Self.launches(gpu, b)
            #expect(launched == UInt64(expected), "\(family) \(weights.name), \(rows) rows: \(launched) kernels a step, not \(expected)")
        }
    }

    /// The PEFT fixture's adapter (rank 2 on every layer matrix of SmolLM2) beside rows without
    /// it: the prompts in one step, then decoding at two rows; every row's logits within
    /// `decodeAgreement`'s tolerance of the CPU's, the adapter's effect larger than that.
    @Test("A PEFT adapter on SmolLM2 runs on CUDA as on the CPU", .enabled(if: unavailable == nil, noGPU),
          .enabled(if: smolLM2 != nil, "SmolLM2 not fetched"))
    func peftAdapter() throws {
        let fx = try GenerationFixture.load("smollm2")
        let tolerance = max(1e-2, 2 * (fx.cases.map(\.llama_self.logit_error).max() ?? 0))
        let transformer = try Transformer(url: try #require(Self.smolLM2))
        let peft = try LoRAAdapter(contentsOf: LoRAFixture.peft, for: transformer)
        let cpu = try InferenceContext(transformer: transformer, contextLength: 128, slots: 3, backend: .cpu)
        let gpu = try InferenceContext(transformer: transformer, contextLength: 128, slots: 3, backend: .cuda)
        let id = try cpu.attach(peft)
        #expect(try gpu.attach(peft) == id)
        let prompts = try LoRAFixture.prompts()
        let plan: [(prompt: Int, adapter: Int)] = [(0, id), (0, 0), (1, id)]
        var batch = Batch()
        var positions: [Int] = []
        for (slot, p) in plan.enumerated() {
            let tokens = prompts[p.prompt].ids
            for (i, t) in tokens.enumerated() { batch.add(t, position: i, slot: slot, logits: i == tokens.count - 1, adapter: p.adapter) }
            positions.append(tokens.count)
        }
        var worst: Float = 0
        func compare(_ what: String, _ rows: Int) -> [Int32] {
            (0..<rows).map { r in
                let d = Self.relativeDifference(cpu.logits(r), gpu.logits(r))
                worst = max(worst, d)
                #expect(d <= tolerance, "\(what), row \(r): logits differ by \(d) of the range")
                return Sampler.argmax(cpu.logits(r))
            }
        }
        try cpu.forward(batch)
        try gpu.forward(batch)
        var next = compare("prompts", plan.count)
        let effect = Self.relativeDifference(cpu.logits(0), cpu.logits(1))
        #expect(effect > tolerance, "the adapter moves the logits by \(effect) of the range: too little to check")
        for step in 0..<4 {
            var b = Batch()
            for s in [0, 2] {
                b.add(next[s], position: positions[s], slot: s, logits: true, adapter: id)
                positions[s] += 1
            }
            try cpu.forward(b)
            try gpu.forward(b)
            let chosen = compare("two rows, step \(step)", 2)
            (next[0], next[2]) = (chosen[0], chosen[1])
        }
        print("[cuda] PEFT adapter on SmolLM2: effect \(effect) of the range; worst CPU-CUDA logit difference \(worst) (tolerance \(tolerance))")
    }

    /// The eval workload end to end through `plinth eval`: the chat template, the scheduler's
    /// batched steps at an explicit --parallel, and decoding under the schema, on CUDA and on the
    /// CPU. Every CUDA value must be valid; values may differ only where a 135M model's choice is
    /// a near-tie that last-bit differences in the logits tip (the device rounds: 570 of 600
    /// identical), so at most a quarter may.
    @Test("plinth eval on CUDA: every value valid, as the CPU's but for near-ties", .enabled(if: unavailable == nil, noGPU),
          .enabled(if: CLITests.hasModel, CLITests.noModelReason))
    func evalAgainstCPU() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-cuda-eval-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let workload = EvalCLITests.workload
        let clauses = try String(contentsOf: workload.appendingPathComponent("policy_clauses.jsonl"), encoding: .utf8)
        let count = 8
        let input = dir.appendingPathComponent("in.jsonl")
        try (clauses.split(separator: "\n").prefix(count).joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        var values: [String: [String: String]] = [:]
        for backend in ["cpu", "cuda"] {
            let output = dir.appendingPathComponent("\(backend).jsonl")
            let r = try CLITests.runWithModel([
                "eval", "--schema", workload.appendingPathComponent("policy_clauses.schema.json").path,
                "--instructions-file", workload.appendingPathComponent("policy_instructions.txt").path,
                "--input", input.path, "--output", output.path, "--max-tokens", "48", "--parallel", "4", "--backend", backend,
            ])
            #expect(r.status == 0, "stderr: \(r.stderr)")
            #expect(r.stderr.contains("on \(backend), 4 records decoding at once"), "stderr: \(r.stderr)")
            #expect(r.stderr.contains("valid: \(count) of \(count) values (100.0%)"), "\(backend): \(r.stderr)")
            for line in try String(contentsOf: output, encoding: .utf8).split(separator: "\n") {
                let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let id = try #require(record["id"] as? String)
                let value = try #require(record["value"] as? [String: Any], "\(backend) \(id): no value: \(line)")
                let text = String(decoding: try JSONSerialization.data(withJSONObject: value, options: .sortedKeys), as: UTF8.self)
                values[id, default: [:]][backend] = text
            }
        }
        #expect(values.count == count && values.values.allSatisfy { $0.count == 2 })
        let same = values.values.filter { $0["cpu"] == $0["cuda"] }.count
        print("[cuda] plinth eval: \(same) of \(count) values identical to the CPU's")
        for (id, v) in values.sorted(by: { $0.key < $1.key }) where v["cpu"] != v["cuda"] {
            print("  \(id): cpu \(v["cpu"] ?? "-")\n        cuda \(v["cuda"] ?? "-")")
        }
        #expect(same * 4 >= count * 3, "only \(same) of \(count) values match the CPU's")
    }

    /// A prefix shared by pages (copyPrefix: its whole pages by reference, the last one's rows
    /// copied) and a shared page copied before a slot writes into it give the logits of computing
    /// the same tokens in the slot itself, bit for bit. The same steps in each (4 rows from a
    /// multiple of 4: steps of 1 or 2 rows run fused launches, which may round differently), one
    /// sequence at a time.
    @Test("Paged KV cache: shared prefixes and copied-on-write pages give the logits of computing them",
          .enabled(if: unavailable == nil, noGPU), .enabled(if: smolLM2 != nil, "SmolLM2 not fetched"))
    func pagedSharingIsExact() throws {
        let model = try Model(url: try #require(Self.smolLM2))
        let system = String(repeating: "You are a careful assistant who answers questions about the world in one short, plain sentence. ", count: 3)
        let prompt = try SchedulerTests.prompt(model, "Why is the sky blue?", system: system)
        #expect(prompt.count > 72 && prompt.count < 200, "\(prompt.count) tokens")
        let ctx = try InferenceContext(transformer: model.transformer, contextLength: 256, slots: 3, maxBatch: 8, backend: .cuda)
        /// Feeds `tokens` from `start` into `slot` in steps of 4, then decodes 4 greedy tokens one a
        /// step; the logits of the last prompt step and of every decode step.
        func run(_ slot: Int, from start: Int) throws -> [[Float]] {
            var position = start, rows: [[Float]] = []
            while position < prompt.count {
                let end = min(position + 4, prompt.count)
                var b = Batch()
                for p in position..<end { b.add(prompt[p], position: p, slot: slot, logits: p == prompt.count - 1) }
                try ctx.forward(b)
                position = end
            }
            rows.append(Array(ctx.logits(0)))
            for _ in 0..<4 {
                var b = Batch()
                b.add(rows.last!.withUnsafeBufferPointer { Sampler.argmax($0) }, position: position, slot: slot, logits: true)
                try ctx.forward(b)
                position += 1
                rows.append(Array(ctx.logits(0)))
            }
            return rows
        }
        let computed = try run(0, from: 0)
        // 68 positions: the first page shared, 4 rows of the second copied.
        try ctx.copyPrefix(from: 0, to: 1, count: 68)
        let shared = try run(1, from: 68)
        // Slot 2 shares slot 1's pages, then rewinds into the shared first page: it gets a copy of
        // that page's first 32 rows before writing from position 32.
        try ctx.copyPrefix(from: 1, to: 2, count: prompt.count)
        ctx.reset(slot: 2, keeping: 32)
        let rewritten = try run(2, from: 32)
        // Slot 0 again from 64: its first page still shared (with slot 1), its second new.
        ctx.reset(slot: 0, keeping: 64)
        let again = try run(0, from: 64)
        for (name, rows) in [("shared", shared), ("copied on write", rewritten), ("slot 0 again", again)] {
            let differ = zip(rows, computed).filter { $0.0 != $0.1 }.count
            #expect(differ == 0, "\(name): \(differ) of \(rows.count) steps' logits differ from computing the prefix")
        }
    }

    /// A KV cache with fewer pages than every slot's context (a GPU short of memory): sequences
    /// start as their pages allow (never more at once than their pages fit, a shared page
    /// counted once), cached prefixes are dropped to make room, a long prefix's pages are shared,
    /// and every request ends with its tokens. Against the same requests run one at a time: mostly the same tokens (a step's rows
    /// differ, and steps of 1–2 rows run fused launches that may round a near-tie the other way;
    /// the pages themselves are exact: ``pagedSharingIsExact()``).
    @Test("A paged KV cache smaller than the slots' contexts: sequences start as their pages allow",
          .enabled(if: unavailable == nil, noGPU), .enabled(if: smolLM2 != nil, "SmolLM2 not fetched"))
    func pagedAdmission() throws {
        let model = try Model(url: try #require(Self.smolLM2))
        let system = String(repeating: "You are a careful assistant who answers questions about the world in one short, plain sentence. ", count: 4)
        let prompts = try SchedulerTests.questions.prefix(4).map { try SchedulerTests.prompt(model, $0, system: system) }
        // Each may hold its prompt and 12 tokens, 2 pages of 64, the first of them the shared
        // system prompt's; the cache's 5 pages leave 4 for sequences (one is the padding rows'):
        // three at once, with the shared page counted once (two, counted for each).
        let common = prompts.dropFirst().map { PrefixCache.sharedLength(prompts[0], $0[...]) }.min() ?? 0
        #expect(common >= 64 && prompts.allSatisfy { $0.count + 12 <= 128 }, "\(prompts.map(\.count)), \(common) in common")
        var configuration = Scheduler.Configuration(contextLength: 256, slots: 8, maxRunning: 6, stepTokens: 4, backend: .cuda)
        configuration.maxKVPages = 5
        let scheduler = try Scheduler(model: model, configuration: configuration)
        #expect(scheduler.backend == .cuda)
        func submit(_ prompt: [Int32]) -> SchedulerTests.Collector {
            let c = SchedulerTests.Collector()
            _ = scheduler.submit(GenerationRequest(prompt: prompt, maxTokens: 12)) { c.handle($0) }
            return c
        }
        var alone: [[Int32]] = []
        for p in prompts {
            let c = submit(p)
            c.wait()
            alone.append(try #require(c.summary, "\(String(describing: c.state.withLock { $0.error }))").tokens)
        }
        #expect(alone.allSatisfy { !$0.isEmpty })
        // Each prompt's next-token logits on the CPU, for the first token's check below.
        let cpu = try InferenceContext(transformer: model.transformer, contextLength: 256, slots: 1, backend: .cpu)
        let firstLogits = try prompts.map { p in
            cpu.reset(slot: 0)
            try cpu.forward(.sequence(p))
            return Array(cpu.logits(0))  // the buffer is the next step's
        }
        let cachedBefore = scheduler.statistics.cachedTokens
        let together = prompts.map(submit)
        var same = 0
        for (i, c) in together.enumerated() {
            c.wait()
            #expect(c.state.withLock { $0.error } == nil, "request \(i): \(String(describing: c.state.withLock { $0.error }))")
            let summary = try #require(c.summary, "request \(i) did not finish")
            let tokens = summary.tokens
            #expect(summary.finishReason == .maxTokens || summary.finishReason == .endOfGeneration, "request \(i): \(summary.finishReason)")
            // The first token is the best or a near-tie on the CPU too: the GPU's int8 and f16
            // arithmetic moves these logits by up to ~0.5 (one prompt's best two are 0.3 apart
            // on the CPU, and 0.01 the other way computed whole on the GPU).
            let first = firstLogits[i]
            #expect(!tokens.isEmpty && first[Int(tokens[0])] >= first.max()! - 1,
                    "request \(i): first token \(tokens.first ?? -1) at \(tokens.first.map { first[Int($0)] } ?? 0), the CPU's best \(first.max()!)")
            if tokens == alone[i] { same += 1 }
        }
        #expect(same * 2 >= prompts.count, "only \(same) of \(prompts.count) requests got their tokens alone")
        let statistics = scheduler.statistics
        #expect(statistics.largestBatch == 3, "\(statistics.largestBatch) sequences in one step, with pages for 3")
        #expect(statistics.cachedTokens > cachedBefore, "no prefix was shared")
        print("[cuda] paged admission: \(prompts.count) requests, at most \(statistics.largestBatch) at once, \(same) with their tokens alone, \(statistics.cachedTokens - cachedBefore) prompt tokens from shared pages")
    }

    /// A device error while a request's cached prefix is copied ends that request with the error
    /// (its pages were counted with the prefix shared; computing it instead could take pages the
    /// running sequences were promised), and the rest of the run goes on: `plinth eval`, whose
    /// records copy the instructions' pages, with the emulator refusing every `pkc_copy_kv` launch.
    @Test("A prefix copy the device fails ends its request with the device's error; the run goes on",
          .enabled(if: emulated, "needs the CPU emulator of a CUDA device, which a test can make fail a launch"),
          .enabled(if: CLITests.hasModel, CLITests.noModelReason))
    func failedPrefixCopy() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-cuda-copy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let workload = EvalCLITests.workload, count = 4
        let clauses = try String(contentsOf: workload.appendingPathComponent("policy_clauses.jsonl"), encoding: .utf8)
        let input = dir.appendingPathComponent("in.jsonl"), output = dir.appendingPathComponent("out.jsonl")
        try (clauses.split(separator: "\n").prefix(count).joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        let r = try CLITests.runWithModel([
            "eval", "--schema", workload.appendingPathComponent("policy_clauses.schema.json").path,
            "--instructions-file", workload.appendingPathComponent("policy_instructions.txt").path,
            "--input", input.path, "--output", output.path, "--max-tokens", "48", "--parallel", "2", "--backend", "cuda",
        ], environment: ["PKC_EMU_FAIL_KERNEL": "pkc_copy_kv"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        let records = try String(contentsOf: output, encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(records.count == count, "every record is written: \(records.count) of \(count)")
        let errors = records.compactMap { ($0["error"] as? [String: Any])?["message"] as? String }
        #expect(!errors.isEmpty, "no record copied a prefix: \(r.stderr)")
        for message in errors {
            #expect(message.contains("copying a cached prefix") && message.contains("launch of copy_kv failed"), "\(message)")
        }
        #expect(records.allSatisfy { ($0["error"] == nil) == ($0["value"] != nil) })
        print("[cuda] failed prefix copies: \(errors.count) of \(count) records ended with the device's error, \(count - errors.count) with values")
    }

    /// A model that does not fit the device's memory: `auto` runs it on the CPU saying why, `cuda`
    /// is an error saying why, and a scheduler whose slots' whole contexts do not fit has a KV
    /// cache of the pages that do, saying so. Device memory is the emulator's `PKC_EMU_MEMORY_GIB`.
    @Test("Out of device memory: auto runs on the CPU, cuda says why, a scheduler's cache is the pages that fit",
          .enabled(if: emulated, "needs the CPU emulator of a CUDA device, whose memory a test can set"),
          .enabled(if: CLITests.hasModel, CLITests.noModelReason))
    func outOfDeviceMemory() throws {
        let tiny = ["PKC_EMU_MEMORY_GIB": "0.05"]  // SmolLM2's weights alone are 93 MiB
        let generate = ["generate", "--greedy", "-p", "Name a color.", "-n", "6"]
        let cpu = try CLITests.runWithModel(generate + ["--backend", "cpu"])
        #expect(cpu.status == 0, "stderr: \(cpu.stderr)")
        let auto = try CLITests.runWithModel(generate + ["--backend", "auto"], environment: tiny)
        #expect(auto.status == 0, "stderr: \(auto.stderr)")
        #expect(auto.stderr.contains("running on the CPU: the model does not fit the GPU's memory (the weights (93 MiB)"),
                "stderr: \(auto.stderr)")
        #expect(!auto.stdout.isEmpty && auto.stdout == cpu.stdout)
        let cuda = try CLITests.runWithModel(generate + ["--backend", "cuda"], environment: tiny)
        #expect(cuda.status != 0)
        #expect(cuda.stderr.contains("the CUDA backend is unavailable: out of device memory"), "stderr: \(cuda.stderr)")
        #expect(cuda.stdout.isEmpty)

        // 3 GiB: not the GPU sizing's 80 slots of 4096 positions (7.5 GB of cache) but the pages
        // that fit, and still 64 at once.
        let eval = try CLITests.evalOneRecord("Tenants may keep one pet.", ["--backend", "cuda", "--max-tokens", "8"],
                                              environment: ["PKC_EMU_MEMORY_GIB": "3"]).outcome
        #expect(eval.status == 0, "stderr: \(eval.stderr)")
        let note = try #require(eval.stderr.firstMatch(of: /the GPU's memory holds a KV cache of (\d+) positions \((\d+) pages of 64\), not 80 slots × 4096; up to 64 sequences/),
                                "stderr: \(eval.stderr)")
        let pages = try #require(Int(note.2))
        #expect(Int(note.1) == pages * 64 && pages > 64 && pages < 80 * 64, "stderr: \(eval.stderr)")
        #expect(eval.stderr.contains("on cuda, 64 records decoding at once"), "stderr: \(eval.stderr)")
        #expect(eval.stderr.contains("valid: 1 of 1 values"), "stderr: \(eval.stderr)")
    }
}
