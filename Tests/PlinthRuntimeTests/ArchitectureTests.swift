import Foundation
import Testing

@testable import PlinthRuntime

/// A tiny Gemma 3 with F32 weights: two layers (a local one with a 3-position window, then a
/// global one), query heads wider than the embedding, QK norms, post-norms, GeGLU, tied
/// embeddings and a final soft-cap, against a naive forward pass in Double.
struct TinyGemma {
    let layers = 2, embedding = 32, heads = 2, kvHeads = 1, feedForward = 64, vocabulary = 32
    /// 24 by default (not a power of two, as no real model's); the CUDA tests take 32.
    let headDim: Int
    let window = 3
    let globalBase: Float = 100, localBase: Float = 10000
    let epsilon: Float = 1e-6
    let softcap: Float = 5
    var qDim: Int { heads * headDim }
    var kvDim: Int { kvHeads * headDim }

    private(set) var weights: [String: (dims: [Int], values: [Float])] = [:]
    private(set) var order: [String] = []

    init(seed: UInt64 = 31, headDim: Int = 24) {
        self.headDim = headDim
        var t = RandomTensors(seed: seed)
        let e = embedding, ff = feedForward
        t.add("token_embd.weight", [e, vocabulary], scale: 0.3)
        for l in 0..<layers {
            let p = "blk.\(l)."
            t.addAttentionInputs(p, embedding: e, qDim: qDim, kvDim: kvDim)
            t.add(p + "attn_q_norm.weight", [headDim], scale: 0.5, offset: 1.5)
            t.add(p + "attn_k_norm.weight", [headDim], scale: 0.5, offset: 1.5)
            t.add(p + "attn_output.weight", [qDim, e], scale: 1.7 / Double(qDim).squareRoot())
            t.add(p + "post_attention_norm.weight", [e], scale: 0.2, offset: 0.5)
            t.addFeedForward(p, embedding: e, feedForward: ff)
            t.add(p + "post_ffw_norm.weight", [e], scale: 0.2, offset: 0.5)
        }
        t.add("output_norm.weight", [e], scale: 0.2, offset: 1)
        (weights, order) = (t.tensors, t.order)
    }

    /// The GGUF file; `metadata` replaces or adds keys, `drop` leaves keys out.
    func bytes(metadata: [String: GGUFValue] = [:], drop: Set<String> = []) -> [UInt8] {
        var w = GGUFBuilder()
        var keys: [(String, GGUFValue)] = [
            ("general.architecture", .string("gemma3")),
            ("gemma3.block_count", .uint32(UInt32(layers))),
            ("gemma3.context_length", .uint32(64)),
            ("gemma3.embedding_length", .uint32(UInt32(embedding))),
            ("gemma3.feed_forward_length", .uint32(UInt32(feedForward))),
            ("gemma3.attention.head_count", .uint32(UInt32(heads))),
            ("gemma3.attention.head_count_kv", .uint32(UInt32(kvHeads))),
            ("gemma3.attention.key_length", .uint32(UInt32(headDim))),
            ("gemma3.attention.value_length", .uint32(UInt32(headDim))),
            ("gemma3.rope.freq_base", .float32(globalBase)),
            ("gemma3.attention.layer_norm_rms_epsilon", .float32(epsilon)),
            ("gemma3.attention.sliding_window", .uint32(UInt32(window))),
            ("gemma3.attention.sliding_window_pattern", .uint32(2)),
            ("gemma3.final_logit_softcapping", .float32(softcap)),
            ("tokenizer.ggml.tokens", .array((0..<vocabulary).map { .string("t\($0)") })),
        ]
        keys = keys.filter { !drop.contains($0.0) }.map { ($0.0, metadata[$0.0] ?? $0.1) }
        for (k, v) in metadata where !keys.contains(where: { $0.0 == k }) { keys.append((k, v)) }
        for (k, v) in keys { w.add(k, v) }
        for name in order {
            let t = weights[name]!
            w.addTensor(.init(name, dims: t.dims.map(UInt64.init), type: .f32, data: t.values.withUnsafeBytes { Array($0) }))
        }
        return w.bytes()
    }

    /// Logits for every position of `tokens` (one sequence from position 0), computed naively.
    func referenceLogits(_ tokens: [Int32]) -> [[Double]] {
        func w(_ name: String) -> [Double] { weights[name]!.values.map(Double.init) }
        func matvec(_ m: [Double], _ x: [Double], out: Int) -> [Double] {
            (0..<out).map { o in (0..<x.count).reduce(0.0) { $0 + m[o * x.count + $1] * x[$1] } }
        }
        func rmsNorm(_ x: ArraySlice<Double>, _ g: [Double]) -> [Double] {
            let ms = x.reduce(0) { $0 + $1 * $1 } / Double(x.count)
            let s = 1 / (ms + Double(epsilon)).squareRoot()
            return zip(x, g).map { $0 * s * $1 }
        }
        /// Each head normed by itself, then rotated on (i, i + d/2) pairs.
        func headsNormedAndRotated(_ v: [Double], heads: Int, norm: [Double], position: Int, base: Float) -> [Double] {
            var out: [Double] = []
            for h in 0..<heads {
                var x = rmsNorm(v[h * headDim..<(h + 1) * headDim], norm)
                for i in 0..<headDim / 2 {
                    let theta = Double(position) * pow(Double(base), -2 * Double(i) / Double(headDim))
                    let x0 = x[i], x1 = x[i + headDim / 2]
                    x[i] = x0 * cos(theta) - x1 * sin(theta)
                    x[i + headDim / 2] = x0 * sin(theta) + x1 * cos(theta)
                }
                out += x
            }
            return out
        }
        func gelu(_ g: Double) -> Double { 0.5 * g * (1 + tanh((2 / Double.pi).squareRoot() * (g + 0.044715 * g * g * g))) }
        let e = embedding
        let embd = w("token_embd.weight")
        var xs: [[Double]] = tokens.map { t in embd[Int(t) * e..<(Int(t) + 1) * e].map { $0 * Double(e).squareRoot() } }
        for l in 0..<layers {
            let p = "blk.\(l).", local = l % 2 == 0
            let base = local ? localBase : globalBase
            var queries: [[Double]] = [], keys: [[Double]] = [], values: [[Double]] = []
            for (pos, x) in xs.enumerated() {
                let h = rmsNorm(x[...], w(p + "attn_norm.weight"))
                queries.append(headsNormedAndRotated(matvec(w(p + "attn_q.weight"), h, out: qDim), heads: heads,
                                                     norm: w(p + "attn_q_norm.weight"), position: pos, base: base))
                keys.append(headsNormedAndRotated(matvec(w(p + "attn_k.weight"), h, out: kvDim), heads: kvHeads,
                                                  norm: w(p + "attn_k_norm.weight"), position: pos, base: base))
                values.append(matvec(w(p + "attn_v.weight"), h, out: kvDim))
            }
            for pos in xs.indices {
                let first = local ? max(0, pos - window + 1) : 0
                var attn = [Double](repeating: 0, count: qDim)
                for h in 0..<heads {
                    let kvh = h / (heads / kvHeads)
                    let q = queries[pos][h * headDim..<(h + 1) * headDim]
                    let scores = (first...pos).map { j in
                        zip(q, keys[j][kvh * headDim..<(kvh + 1) * headDim]).reduce(0) { $0 + $1.0 * $1.1 } / Double(headDim).squareRoot()
                    }
                    let m = scores.max()!
                    let ex = scores.map { exp($0 - m) }
                    let z = ex.reduce(0, +)
                    for (i, j) in (first...pos).enumerated() {
                        for d in 0..<headDim { attn[h * headDim + d] += ex[i] / z * values[j][kvh * headDim + d] }
                    }
                }
                let o = rmsNorm(matvec(w(p + "attn_output.weight"), attn, out: e)[...], w(p + "post_attention_norm.weight"))
                for i in 0..<e { xs[pos][i] += o[i] }
                let h = rmsNorm(xs[pos][...], w(p + "ffn_norm.weight"))
                let g = matvec(w(p + "ffn_gate.weight"), h, out: feedForward)
                let u = matvec(w(p + "ffn_up.weight"), h, out: feedForward)
                let d = matvec(w(p + "ffn_down.weight"), zip(g, u).map { gelu($0) * $1 }, out: e)
                let dn = rmsNorm(d[...], w(p + "post_ffw_norm.weight"))
                for i in 0..<e { xs[pos][i] += dn[i] }
            }
        }
        let cap = Double(softcap)
        return xs.map { x in
            matvec(embd, rmsNorm(x[...], w("output_norm.weight")), out: vocabulary).map { cap * tanh($0 / cap) }
        }
    }
}

/// Architectures as units: each family's hyperparameters, tensors and layer.
struct ArchitectureTests {
    static func load(_ bytes: [UInt8]) throws -> Transformer {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("arch-\(UUID().uuidString).gguf")
        try Data(bytes).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        return try Transformer(url: url, packing: WeightPackingOptions(enabled: false, directory: FileManager.default.temporaryDirectory))
    }

    @Test func everyArchitectureIsListedOnce() {
        let names = Architecture.allCases.map(\.rawValue)
        #expect(names == ["llama", "qwen2", "qwen3", "gemma2", "gemma3"])
        #expect(Architecture(rawValue: "gemma3").neoxRoPE && Architecture(rawValue: "qwen3").neoxRoPE && !Architecture(rawValue: "llama").neoxRoPE)
    }

    /// Qwen3 against llama.cpp on the same tiny file (Scripts/make_architecture_fixtures.py):
    /// QK norms, heads wider than the embedding over their count, tied embeddings; the
    /// tokenizer agrees too. Prefill, decoding one token at a time, and two sequences in one step.
    @Test(arguments: [1, 2])
    func tinyQwen3MatchesLlamaCpp(threads: Int) throws {
        let (t, fixture) = try ArchitectureFixture.load("qwen3")
        #expect(t.config.architecture == Qwen3.architecture)
        #expect(t.config.headDim == 16 && t.config.headCount * t.config.headDim == 64 && t.config.embeddingLength == 32)
        let tokenizer = try Tokenizer(gguf: GGUFFile(url: fixture.url))
        #expect(tokenizer.encode(fixture.text, addSpecial: false) == fixture.tokens)
        #expect(fixture.logits.count == fixture.tokens.count && fixture.logits.allSatisfy { $0.count == fixture.vocabulary })
        #expect(t.config.vocabularySize == fixture.vocabulary)
        let ctx = try InferenceContext(transformer: t, contextLength: 64, slots: 2, threads: threads, backend: .cpu)
        let worst = try fixture.largestDifferences(ctx)
        // llama.cpp and Plinth both keep keys and values as f16.
        #expect(fixture.spread > 5, "the comparison is meaningful: logits spread \(fixture.spread)")
        #expect(worst.oneStep < 2e-3 * fixture.spread, "largest logit difference \(worst.oneStep) of \(fixture.spread)")
        #expect(worst.decoding < 2e-3 * fixture.spread, "decoding: largest logit difference \(worst.decoding) of \(fixture.spread)")
    }

    /// Gemma 2 against llama.cpp on the same tiny file: the first layer local (a window of 6 of
    /// the 30 positions), attention scores capped at 4 and logits at 12, post-norms, GeGLU.
    @Test(arguments: [1, 2])
    func tinyGemma2MatchesLlamaCpp(threads: Int) throws {
        let (t, fixture) = try ArchitectureFixture.load("gemma2")
        let g = try #require(t.architecture as? Gemma2)
        #expect(g.attentionSoftcap == 4 && g.logitSoftcap == 12 && g.slidingWindow == 6 && g.local == [true, false])
        #expect(g.ropes == [RoPE(base: 10000), RoPE(base: 10000)] && g.embeddingScale == Float(32).squareRoot())
        let ctx = try InferenceContext(transformer: t, contextLength: 64, slots: 2, threads: threads, backend: .cpu)
        let worst = try fixture.largestDifferences(ctx)
        #expect(fixture.spread > 5, "the comparison is meaningful: logits spread \(fixture.spread)")
        #expect(worst.oneStep < 2e-3 * fixture.spread, "largest logit difference \(worst.oneStep) of \(fixture.spread)")
        #expect(worst.decoding < 2e-3 * fixture.spread, "decoding: largest logit difference \(worst.decoding) of \(fixture.spread)")
    }

    /// Each of Gemma 2's caps and its window moves the logits far beyond the bound above, and
    /// the defaults are llama.cpp's where a file does not say.
    @Test func gemma2sCapsAndWindowMatter() throws {
        let (_, fixture) = try ArchitectureFixture.load("gemma2")
        let variants: [(String, GGUFValue)] = [("gemma2.attn_logit_softcapping", .float32(0)), ("gemma2.final_logit_softcapping", .float32(0)),
                                               ("gemma2.attention.sliding_window", .uint32(64))]
        for (key, value) in variants {
            let t = try ArchitectureTests.load(fixture.bytes(metadata: [(key, value)]))
            let ctx = try InferenceContext(transformer: t, contextLength: 64, threads: 1, backend: .cpu)
            try ctx.forward(.sequence(fixture.tokens))
            let gap = zip(ctx.logits(0), fixture.logits.last!).map { abs(Double($0) - $1) }.max()!
            #expect(gap > 0.02 * fixture.spread, "\(key) = \(value) gives the file's logits (gap \(gap))")
        }
        let unsaid: Set = ["gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping", "gemma2.attention.sliding_window"]
        let defaults = try ArchitectureTests.load(fixture.bytes(dropping: unsaid))
        let g = try #require(defaults.architecture as? Gemma2)
        #expect(g.attentionSoftcap == 50 && g.logitSoftcap == 30 && g.slidingWindow == 4096)
        let negative = caughtError(ModelError.self) {
            _ = try ArchitectureTests.load(fixture.bytes(metadata: [("gemma2.final_logit_softcapping", .float32(-1))]))
        }
        #expect(negative == .invalidMetadata(key: "gemma2.final_logit_softcapping", reason: "-1.0 is not a soft cap"))
    }

    /// The QK norms' weights are read: with every weight one, the logits move far beyond the
    /// bound above; and a file without one is refused with its name.
    @Test func qwen3sHeadNormsMatter() throws {
        let (t, fixture) = try ArchitectureFixture.load("qwen3")
        let ctx = try InferenceContext(transformer: t, contextLength: 64, threads: 1, backend: .cpu)
        let ones = [Float](repeating: 1, count: 16).withUnsafeBytes { Array($0) }
        let plain = try ArchitectureTests.load(fixture.bytes(replacing: ["blk.0.attn_q_norm.weight": ones, "blk.1.attn_k_norm.weight": ones]))
        let other = try InferenceContext(transformer: plain, contextLength: 64, threads: 1, backend: .cpu)
        try ctx.forward(.sequence(fixture.tokens))
        try other.forward(.sequence(fixture.tokens))
        let gap = zip(ctx.logits(0), other.logits(0)).map { abs($0 - $1) }.max()!
        #expect(Double(gap) > 0.02 * fixture.spread, "unit QK norm weights give the file's logits (gap \(gap))")
        let e = caughtError(ModelError.self) { _ = try Self.load(fixture.bytes(without: "blk.1.attn_q_norm.weight")) }
        #expect(e == .missingTensor("blk.1.attn_q_norm.weight"))
    }

    /// Plinth renders its conversations with thinking off (ChatTemplate.plinthContext): Qwen3's
    /// own template (the corpus's) then opens the answer with an empty think block.
    @Test func qwen3AnswersWithoutThinking() throws {
        let (_, fixture) = try ArchitectureFixture.load("qwen3")
        let corpus = try #require(ChatTemplateTests.Corpus.shared)
        let source = try #require(corpus.templates.first { $0.name == "Qwen-Qwen3-0.6B" }?.template)
        let bytes = try fixture.bytes(metadata: [("tokenizer.chat_template", .string(source))])
        let model = try withTemporaryFile(bytes) { try Model(url: $0) }
        let prompt = try model.renderChat([.user("Hi")])
        #expect(prompt == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
        let plain = try #require(model.chatTemplate).render(messages: [.user("Hi")], addGenerationPrompt: true)
        #expect(plain == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    }

    /// Past the window, the local layer forgets the oldest positions; prefill, token-by-token
    /// decode and a batch of two sequences all match the naive pass.
    @Test(arguments: [1, 2])
    func tinyGemmaMatchesANaiveForwardPass(threads: Int) throws {
        let tiny = TinyGemma()
        let t = try Self.load(tiny.bytes())
        #expect(t.config.architecture == Gemma3.architecture)
        #expect(t.config.headDim == 24 && t.config.headCount * t.config.headDim == 48)
        let reference = tiny.referenceLogits(TinyGemma.tokens)
        let spread = reference.flatMap { $0 }.max()! - reference.flatMap { $0 }.min()!
        #expect(spread > 1, "the comparison is meaningful: logits spread \(spread)")
        let ctx = try InferenceContext(transformer: t, contextLength: 16, slots: 2, threads: threads, backend: .cpu)
        let worst = try tiny.largestDifferences(ctx)
        #expect(worst.oneStep < 2e-3, "largest logit difference \(worst.oneStep)")
        #expect(worst.decoding < 2e-3, "decoding one token at a time: largest logit difference \(worst.decoding)")
    }

    /// Without the window the last positions' logits differ: the test above can see the window.
    @Test func theWindowChangesTheResult() throws {
        let tiny = TinyGemma()
        let tokens = TinyGemma.tokens
        let wide = try Self.load(tiny.bytes(metadata: ["gemma3.attention.sliding_window": .uint32(64)]))
        let ctx = try InferenceContext(transformer: wide, contextLength: 16, threads: 1, backend: .cpu)
        try ctx.forward(.sequence(tokens))
        let reference = tiny.referenceLogits(tokens).last!
        let gap = zip(ctx.logits(0), reference).map { abs(Double($0) - $1) }.max()!
        #expect(gap > 1e-2, "a 64-position window gives the 3-position window's logits (gap \(gap))")
    }

    @Test func gemmaHyperparametersAreChecked() throws {
        let tiny = TinyGemma()
        let missing = caughtError(ModelError.self) { _ = try Self.load(tiny.bytes(drop: ["gemma3.attention.sliding_window"])) }
        #expect(missing == .missingMetadata("gemma3.attention.sliding_window"))
        let zero = caughtError(ModelError.self) { _ = try Self.load(tiny.bytes(metadata: ["gemma3.attention.sliding_window": .uint32(0)])) }
        #expect(zero == .invalidMetadata(key: "gemma3.attention.sliding_window", reason: "0 is not positive"))
        let flags = caughtError(ModelError.self) {
            _ = try Self.load(tiny.bytes(metadata: ["gemma3.attention.sliding_window_pattern": .array([.bool(true)])]))
        }
        #expect(flags == .invalidMetadata(key: "gemma3.attention.sliding_window_pattern", reason: "1 flags for 2 layers"))
        // Linear scaling (Gemma 3 4B and larger: factor 8) applies to the global layers only.
        let scaled = try Self.load(tiny.bytes(metadata: ["gemma3.rope.scaling.type": .string("linear"), "gemma3.rope.scaling.factor": .float32(8)]))
        #expect(scaled.architecture.ropes == [RoPE(base: tiny.globalBase, scale: 0.125), RoPE(base: 10000)])
        let yarn = caughtError(ModelError.self) {
            _ = try Self.load(tiny.bytes(metadata: ["gemma3.rope.scaling.type": .string("yarn"), "gemma3.rope.scaling.factor": .float32(8)]))
        }
        #expect(yarn == .invalidMetadata(key: "gemma3.rope.scaling.type", reason: "RoPE scaling 'yarn' is not supported yet (linear is)"))
    }

    /// Linear RoPE scaling and Llama 3.1's per-pair frequency factors rotate as llama.cpp
    /// rotates them (the naive pass divides each pair's angle by its factor and the scaling's).
    @Test func ropeScalingMatchesTheNaivePass() throws {
        var tiny = TinyLlama()
        tiny.ropeScalingFactor = 4
        tiny.ropeFactors = (0..<tiny.headDim / 2).map { Float(1 + $0 % 5) }
        let model = try ModelErrorTests.tinyModel(tiny)
        #expect(model.transformer.architecture.ropes == [RoPE(base: 10000, scale: 0.25, factors: tiny.ropeFactors)])
        let tokens: [Int32] = [7, 30, 2, 11, 4, 19]
        let reference = tiny.referenceLogits(tokens)
        let ctx = try InferenceContext(transformer: model.transformer, threads: 2, backend: .cpu)
        let worst = try worstLogitError(ctx, tokens, against: reference)
        #expect(worst < 1e-2, "largest logit difference \(worst)")
        // The scaling matters: the unscaled pass is far from it.
        let plain = TinyLlama().referenceLogits(tokens).last!
        #expect(zip(plain, reference.last!).map { abs($0 - $1) }.max()! > 1e-2)
    }

    @Test func unsupportedRoPEScalingIsRefused() throws {
        var w = TinyLlama().writer()
        w.add("llama.rope.scaling.type", .string("yarn"))
        w.add("llama.rope.scaling.factor", .float32(4))
        let e = caughtError(ModelError.self) { _ = try Self.load(w.bytes()) }
        #expect(e == .invalidMetadata(key: "llama.rope.scaling.type", reason: "RoPE scaling 'yarn' is not supported yet (linear is)"))
        var tiny = TinyLlama()
        tiny.ropeFactors = [1, 2]
        let shape = caughtError(ModelError.self) { _ = try Self.load(tiny.bytes()) }
        #expect(shape == .tensorShape(tensor: "rope_freqs.weight", expected: [16], found: [2]))
    }

    /// A flag per layer reads like the period: [local, global] is period 2.
    @Test func windowPatternAsFlags() throws {
        let tiny = TinyGemma()
        let tokens: [Int32] = [3, 17, 9, 30, 1, 22, 5, 11]
        let t = try Self.load(tiny.bytes(metadata: ["gemma3.attention.sliding_window_pattern": .array([.bool(true), .bool(false)])]))
        let ctx = try InferenceContext(transformer: t, contextLength: 16, threads: 1, backend: .cpu)
        try ctx.forward(.sequence(tokens))
        let reference = tiny.referenceLogits(tokens).last!
        let gap = zip(ctx.logits(0), reference).map { abs(Double($0) - $1) }.max()!
        #expect(gap < 2e-3, "largest logit difference \(gap)")
    }

    @Test func aMissingGemmaTensorIsNamed() throws {
        let e = caughtError(ModelError.self) { _ = try Self.load(TinyGemma().bytesWithout("blk.1.attn_k_norm.weight")) }
        #expect(e == .missingTensor("blk.1.attn_k_norm.weight"))
    }
}

extension TinyGemma {
    /// The tokens the tests run: 8, past the local layer's window of 3.
    static let tokens: [Int32] = [3, 17, 9, 30, 1, 22, 5, 11]

    /// The largest logit differences of `ctx` (a fresh context of this model, two slots) from
    /// the naive pass: the 8 tokens and the first 5 as two sequences in one step; then slot 0
    /// again, one token at a time.
    func largestDifferences(_ ctx: InferenceContext) throws -> (oneStep: Double, decoding: Double) {
        try largestLogitDifferences(ctx, Self.tokens, against: referenceLogits(Self.tokens), alongside: 5)
    }

    /// The file without one tensor.
    func bytesWithout(_ tensor: String) -> [UInt8] {
        var copy = self
        copy.order.removeAll { $0 == tensor }
        return copy.bytes()
    }
}

/// A tiny model of one family with llama.cpp's logits on it (Fixtures/architectures/, made by
/// Scripts/make_architecture_fixtures.py).
struct ArchitectureFixture: Decodable {
    var file: String
    var text: String
    var tokens: [Int32]
    var vocabulary: Int
    var logits: [[Double]]
    var url: URL { TestModels.fixtures.appendingPathComponent("architectures/\(file)") }
    var spread: Double { logits.flatMap { $0 }.max()! - logits.flatMap { $0 }.min()! }

    static func load(_ family: String) throws -> (Transformer, ArchitectureFixture) {
        let fixture = try TestModels.fixture("architectures/\(family).json", as: ArchitectureFixture.self)
        return (try Transformer(url: fixture.url, packing: WeightPackingOptions(enabled: false, directory: FileManager.default.temporaryDirectory)), fixture)
    }

    /// The file with some tensors' bytes replaced, or without one tensor, `metadata` set and the
    /// keys `dropping` left out.
    func bytes(replacing: [String: [UInt8]] = [:], without tensor: String? = nil, metadata: [(String, GGUFValue)] = [],
               dropping: Set<String> = []) throws -> [UInt8] {
        let gguf = try GGUFFile(url: url)
        var w = GGUFBuilder()
        for key in gguf.keys where !dropping.contains(key) { w.add(key, metadata.first { $0.0 == key }?.1 ?? gguf.metadata[key]!) }
        for (key, value) in metadata where gguf.metadata[key] == nil { w.add(key, value) }
        for t in gguf.tensors where t.name != tensor {
            let data = replacing[t.name] ?? Array(UnsafeRawBufferPointer(start: gguf.data(of: t), count: t.byteCount))
            w.addTensor(.init(t.name, dims: t.dimensions.map(UInt64.init), type: t.type, data: data))
        }
        return w.bytes()
    }

    /// The largest logit differences from llama.cpp's of `ctx` (a fresh context, two slots):
    /// the text and its first half as two sequences in one step; then slot 0 again, one token
    /// at a time.
    func largestDifferences(_ ctx: InferenceContext) throws -> (oneStep: Double, decoding: Double) {
        try largestLogitDifferences(ctx, tokens, against: logits, alongside: tokens.count / 2)
    }
}

/// The largest differences between `ctx`'s logits (a fresh context, two slots) and `reference`
/// (a row per position of `tokens`): `tokens` in slot 0 and its first `alongside` in slot 1 as
/// one step; then slot 0 again, one token at a time.
func largestLogitDifferences(_ ctx: InferenceContext, _ tokens: [Int32], against reference: [[Double]],
                             alongside: Int) throws -> (oneStep: Double, decoding: Double) {
    var b = Batch()
    for (i, tok) in tokens.enumerated() { b.add(tok, position: i, slot: 0, logits: true) }
    for (i, tok) in tokens.prefix(alongside).enumerated() { b.add(tok, position: i, slot: 1, logits: true) }
    try ctx.forward(b)
    var oneStep = 0.0
    for row in 0..<(tokens.count + alongside) {
        let pos = row < tokens.count ? row : row - tokens.count
        for (v, r) in reference[pos].enumerated() { oneStep = max(oneStep, abs(Double(ctx.logits(row)[v]) - r)) }
    }
    ctx.reset(slot: 0)
    var decoding = 0.0
    for (i, tok) in tokens.enumerated() {
        try ctx.forward(Batch.sequence([tok], startingAt: i))
        for (v, r) in reference[i].enumerated() { decoding = max(decoding, abs(Double(ctx.logits(0)[v]) - r)) }
    }
    return (oneStep, decoding)
}
