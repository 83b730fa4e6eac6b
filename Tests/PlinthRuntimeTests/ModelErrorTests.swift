import Foundation
import Testing

@testable import PlinthRuntime

/// A tiny llama model with F32 weights, written as a GGUF file by ``GGUFBuilder``: valid as built,
/// and broken in one precise way on request.
struct TinyLlama {
    var layers = 1
    var embedding = 64
    var heads = 2
    var kvHeads = 1
    var feedForward = 128
    var vocabulary = 32
    var context = 16
    var ropeBase: Float = 10000
    var epsilon: Float = 1e-5
    var architecture = "llama"
    /// Linear RoPE scaling's factor (`rope.scaling.factor`), when set.
    var ropeScalingFactor: Float? = nil
    /// Per-pair frequency factors (`rope_freqs.weight`, headDim/2 of them), when set.
    var ropeFactors: [Float]? = nil

    var headDim: Int { embedding / heads }
    var qDim: Int { heads * headDim }
    var kvDim: Int { kvHeads * headDim }

    /// Single-byte tokens: a–z, then 0–5.
    static let tokenTexts: [String] = (UInt8(ascii: "a")...UInt8(ascii: "z")).map { String(UnicodeScalar($0)) }
        + (UInt8(ascii: "0")...UInt8(ascii: "5")).map { String(UnicodeScalar($0)) }

    /// Weights by name, row-major (row `r` of a `[rowLength, rowCount]` tensor at `r * rowLength`),
    /// with their GGUF dimensions (innermost first).
    private(set) var weights: [String: (dims: [Int], values: [Float])] = [:]
    /// Tensor names in file order.
    private(set) var order: [String] = []

    init(layers: Int = 1, heads: Int = 2, kvHeads: Int = 1, feedForward: Int = 128, seed: UInt64 = 2024) {
        self.layers = layers
        self.heads = heads
        self.kvHeads = kvHeads
        self.feedForward = feedForward
        var t = RandomTensors(seed: seed)
        let e = embedding, ff = feedForward
        t.add("token_embd.weight", [e, vocabulary], scale: 1)
        for l in 0..<layers {
            let p = "blk.\(l)."
            t.addAttentionInputs(p, embedding: e, qDim: qDim, kvDim: kvDim)
            t.add(p + "attn_output.weight", [qDim, e], scale: 1.7 / Double(qDim).squareRoot())
            t.addFeedForward(p, embedding: e, feedForward: ff)
        }
        t.add("output_norm.weight", [e], scale: 0.2, offset: 1)
        t.add("output.weight", [e, vocabulary], scale: 3 / Double(e).squareRoot())
        (weights, order) = (t.tensors, t.order)
    }

    /// The GGUF file. `drop` leaves tensors out; `replace` swaps a tensor's directory entry.
    func writer(drop: Set<String> = [], replace: [String: GGUFBuilder.Tensor] = [:]) -> GGUFBuilder {
        var w = GGUFBuilder()
        let a = architecture
        w.add("general.architecture", .string(a))
        w.add("general.name", .string("tiny-llama"))
        w.add("\(a).block_count", .uint32(UInt32(layers)))
        w.add("\(a).context_length", .uint32(UInt32(context)))
        w.add("\(a).embedding_length", .uint32(UInt32(embedding)))
        w.add("\(a).feed_forward_length", .uint32(UInt32(feedForward)))
        w.add("\(a).attention.head_count", .uint32(UInt32(heads)))
        w.add("\(a).attention.head_count_kv", .uint32(UInt32(kvHeads)))
        w.add("\(a).rope.freq_base", .float32(ropeBase))
        w.add("\(a).attention.layer_norm_rms_epsilon", .float32(epsilon))
        w.add("tokenizer.ggml.model", .string("gpt2"))
        w.add("tokenizer.ggml.pre", .string("gpt-2"))
        w.add("tokenizer.ggml.tokens", .array(Self.tokenTexts.map { .string($0) }))
        w.add("tokenizer.ggml.token_type", .array(Self.tokenTexts.map { _ in .int32(1) }))
        w.add("tokenizer.ggml.merges", .array([]))
        w.add("tokenizer.ggml.bos_token_id", .uint32(30))
        w.add("tokenizer.ggml.eos_token_id", .uint32(31))
        if let f = ropeScalingFactor {
            w.add("\(a).rope.scaling.type", .string("linear"))
            w.add("\(a).rope.scaling.factor", .float32(f))
        }
        if let f = ropeFactors {
            w.addTensor(.init("rope_freqs.weight", dims: [UInt64(f.count)], type: .f32, data: f.withUnsafeBytes { Array($0) }))
        }
        for name in order where !drop.contains(name) {
            if let r = replace[name] {
                w.addTensor(r)
                continue
            }
            let t = weights[name]!
            let bytes = t.values.withUnsafeBytes { Array($0) }
            w.addTensor(.init(name, dims: t.dims.map(UInt64.init), type: .f32, data: bytes))
        }
        return w
    }

    func bytes(drop: Set<String> = [], replace: [String: GGUFBuilder.Tensor] = [:]) -> [UInt8] {
        writer(drop: drop, replace: replace).bytes()
    }

    // MARK: Reference forward pass

    /// Logits for every position of `tokens` (one sequence from position 0), computed naively in
    /// Double: RMSNorm, Q/K/V, RoPE on adjacent pairs, causal GQA softmax attention, SwiGLU.
    func referenceLogits(_ tokens: [Int32]) -> [[Double]] {
        func w(_ name: String) -> [Double] { weights[name]!.values.map(Double.init) }
        /// y = W x for a [inDim, outDim] tensor (rows of length inDim).
        func matvec(_ m: [Double], _ x: [Double], out: Int) -> [Double] {
            let n = x.count
            return (0..<out).map { o in (0..<n).reduce(0.0) { $0 + m[o * n + $1] * x[$1] } }
        }
        func rmsNorm(_ x: [Double], _ g: [Double]) -> [Double] {
            let ms = x.reduce(0) { $0 + $1 * $1 } / Double(x.count)
            let s = 1 / (ms + Double(epsilon)).squareRoot()
            return zip(x, g).map { $0 * s * $1 }
        }
        func rope(_ v: inout [Double], heads: Int, position: Int) {
            for h in 0..<heads {
                for i in 0..<headDim / 2 {
                    let scale = 1 / Double(ropeScalingFactor ?? 1), factor = Double(ropeFactors?[i] ?? 1)
                    let theta = scale * Double(position) * pow(Double(ropeBase), -2 * Double(i) / Double(headDim)) / factor
                    let a = h * headDim + 2 * i, b = a + 1
                    let x0 = v[a], x1 = v[b]
                    v[a] = x0 * cos(theta) - x1 * sin(theta)
                    v[b] = x0 * sin(theta) + x1 * cos(theta)
                }
            }
        }
        let e = embedding
        let embd = w("token_embd.weight")
        var xs: [[Double]] = tokens.map { t in Array(embd[Int(t) * e..<(Int(t) + 1) * e]) }
        for l in 0..<layers {
            let p = "blk.\(l)."
            let wq = w(p + "attn_q.weight"), wk = w(p + "attn_k.weight"), wv = w(p + "attn_v.weight")
            let wo = w(p + "attn_output.weight")
            var keys: [[Double]] = [], values: [[Double]] = []
            var queries: [[Double]] = []
            for (pos, x) in xs.enumerated() {
                let h = rmsNorm(x, w(p + "attn_norm.weight"))
                var q = matvec(wq, h, out: qDim), k = matvec(wk, h, out: kvDim)
                rope(&q, heads: heads, position: pos)
                rope(&k, heads: kvHeads, position: pos)
                queries.append(q)
                keys.append(k)
                values.append(matvec(wv, h, out: kvDim))
            }
            for pos in xs.indices {
                var attn = [Double](repeating: 0, count: qDim)
                for h in 0..<heads {
                    let kvh = h / (heads / kvHeads)
                    let q = queries[pos][h * headDim..<(h + 1) * headDim]
                    let scores = (0...pos).map { j in
                        zip(q, keys[j][kvh * headDim..<(kvh + 1) * headDim]).reduce(0) { $0 + $1.0 * $1.1 }
                            / Double(headDim).squareRoot()
                    }
                    let m = scores.max()!
                    let ex = scores.map { exp($0 - m) }
                    let z = ex.reduce(0, +)
                    for j in 0...pos {
                        for d in 0..<headDim { attn[h * headDim + d] += ex[j] / z * values[j][kvh * headDim + d] }
                    }
                }
                let o = matvec(wo, attn, out: e)
                for i in 0..<e { xs[pos][i] += o[i] }
                let h = rmsNorm(xs[pos], w(p + "ffn_norm.weight"))
                let g = matvec(w(p + "ffn_gate.weight"), h, out: feedForward)
                let u = matvec(w(p + "ffn_up.weight"), h, out: feedForward)
                let act = zip(g, u).map { $0 / (1 + exp(-$0)) * $1 }
                let down = matvec(w(p + "ffn_down.weight"), act, out: e)
                for i in 0..<e { xs[pos][i] += down[i] }
            }
        }
        return xs.map { x in matvec(w("output.weight"), rmsNorm(x, w("output_norm.weight")), out: vocabulary) }
    }
}

/// Every kind of bad input to loading and running a model gives its own typed error, with a
/// message that names the problem; and the tiny synthetic model runs correctly.
struct ModelErrorTests {
    static var defaultModel: URL? { TestModels.path(TestModels.smolLM2) }

    // MARK: Files

    @Test func missingFileIsFileNotFound() {
        let path = "/nonexistent/dir/model-\(UUID().uuidString).gguf"
        let e = caughtError(GGUFError.self) { _ = try GGUFFile(url: URL(fileURLWithPath: path)) }
        #expect(e == .fileNotFound(path))
        #expect(e?.errorDescription?.contains("not found") == true)
        #expect(e?.errorDescription?.contains(path) == true)
        // Through the model loader too.
        let m = caughtError(GGUFError.self) { _ = try Model(url: URL(fileURLWithPath: path)) }
        #expect(m == .fileNotFound(path))
    }

    @Test(.enabled(if: defaultModel != nil, "the default model (SmolLM2-135M-Instruct) is not fetched: run `plinth models fetch`"))
    func truncatedRealModelIsRejected() throws {
        let handle = try FileHandle(forReadingFrom: Self.defaultModel!)
        let head = try handle.read(upToCount: 1 << 20) ?? Data()
        try handle.close()
        #expect(head.count == 1 << 20)
        try withTemporaryFile([UInt8](head)) { url in
            let e = caughtError(GGUFError.self) { _ = try GGUFFile(url: url) }
            switch e {
            case .truncated(let offset, let what)?:
                #expect(offset <= 1 << 20)
                #expect(e?.errorDescription?.contains("truncated") == true)
                #expect(e?.errorDescription?.contains(what) == true)
            case .countTooLarge(let count, let what)?:
                // The cut falls inside the vocabulary: an array claims more entries than remain.
                #expect(count > 0)
                #expect(e?.errorDescription?.contains(what) == true)
                #expect(e?.errorDescription?.contains("more than the file can hold") == true)
            case .tensorOutOfBounds(_, let end, let size)?:
                #expect(size == 1 << 20)
                #expect(end > UInt64(size))
                #expect(e?.errorDescription?.contains("past the end") == true)
            default:
                Issue.record("expected truncated, countTooLarge or tensorOutOfBounds, got \(String(describing: e))")
            }
        }
    }

    @Test func wrongMagicIsBadMagic() throws {
        var w = TinyLlama().writer()
        w.magic = Array("GGML".utf8)
        try withTemporaryFile(w.bytes()) { url in
            let e = caughtError(GGUFError.self) { _ = try GGUFFile(url: url) }
            #expect(e == .badMagic(found: "\"GGML\""))
            #expect(e?.errorDescription?.contains("GGML") == true)
            #expect(e?.errorDescription?.contains("not a GGUF file") == true)
        }
        // Bytes that are not text are shown in hex.
        try withTemporaryFile([0xff, 0x00, 0x13, 0x37] + [UInt8](repeating: 0, count: 60)) { url in
            let e = caughtError(GGUFError.self) { _ = try GGUFFile(url: url) }
            guard case .badMagic(let found)? = e else {
                Issue.record("expected badMagic, got \(String(describing: e))")
                return
            }
            #expect(found.contains("ff"))
            #expect(e?.errorDescription?.contains(found) == true)
        }
    }

    // MARK: Model structure

    @Test func unsupportedArchitectureIsNamed() throws {
        var tiny = TinyLlama()
        tiny.architecture = "mamba"
        try withTemporaryFile(tiny.bytes()) { url in
            let e = caughtError(ModelError.self) { _ = try Model(url: url) }
            #expect(e == .unsupportedArchitecture("mamba"))
            #expect(e?.errorDescription?.contains("'mamba'") == true)
            #expect(e?.errorDescription?.contains("llama") == true)
        }
    }

    @Test func unsupportedTensorTypeNamesTensorAndType() throws {
        // IQ2_XXS blocks hold 256 weights, so the feed-forward width is 256 here to give
        // ffn_down rows of a whole block.
        let tiny = TinyLlama(feedForward: 256)
        let name = "blk.0.ffn_down.weight"
        let bad = GGUFBuilder.Tensor(name, dims: [256, UInt64(tiny.embedding)], type: .iq2_XXS)
        try withTemporaryFile(tiny.bytes(replace: [name: bad])) { url in
            // The file itself is well-formed; only the model refuses it.
            let file = try GGUFFile(url: url)
            #expect(file.tensor(named: name)?.type == .iq2_XXS)
            let e = caughtError(ModelError.self) { _ = try Transformer(file: file) }
            #expect(e == .unsupportedTensorType(tensor: name, type: "IQ2_XXS"))
            #expect(e?.errorDescription?.contains(name) == true)
            #expect(e?.errorDescription?.contains("IQ2_XXS") == true)
        }
        // The same model with the F32 tensor loads.
        try withTemporaryFile(tiny.bytes()) { url in
            let t = try Transformer(url: url)
            #expect(t.config.feedForwardLength == 256)
        }
    }

    @Test func missingTensorIsNamed() throws {
        let name = "blk.0.ffn_up.weight"
        try withTemporaryFile(TinyLlama().bytes(drop: [name])) { url in
            let e = caughtError(ModelError.self) { _ = try Model(url: url) }
            #expect(e == .missingTensor(name))
            #expect(e?.errorDescription?.contains(name) == true)
        }
    }

    @Test func wrongTensorShapeIsNamed() throws {
        let tiny = TinyLlama()
        let name = "blk.0.attn_k.weight"
        // Shaped like attn_q ([64, 64]) instead of [64, kvDim = 32].
        let values = [Float](repeating: 0.01, count: 64 * 64)
        let bad = GGUFBuilder.Tensor(name, dims: [64, 64], type: .f32, data: values.withUnsafeBytes { Array($0) })
        try withTemporaryFile(tiny.bytes(replace: [name: bad])) { url in
            let e = caughtError(ModelError.self) { _ = try Model(url: url) }
            #expect(e == .tensorShape(tensor: name, expected: [64, 32], found: [64, 64]))
            #expect(e?.errorDescription?.contains(name) == true)
            #expect(e?.errorDescription?.contains("[64, 32]") == true)
        }
    }

    // MARK: Running

    /// Loads the tiny model from a temporary file.
    static func tinyModel(_ tiny: TinyLlama = TinyLlama()) throws -> Model {
        try withTemporaryFile(tiny.bytes()) { try Model(url: $0) }
    }

    @Test func promptFillingTheContextIsRefused() throws {
        let model = try Self.tinyModel()
        let scheduler = try Scheduler(model: model, configuration: .init(slots: 1, threads: 1))
        #expect(scheduler.contextLength == 16)
        let prompt = [Int32](repeating: 3, count: scheduler.contextLength)
        let e = caughtError(SchedulerError.self) {
            _ = try scheduler.run(GenerationRequest(prompt: prompt, maxTokens: 4))
        }
        #expect(e == .promptTooLong(tokens: 16, contextLength: 16))
        #expect(e?.errorDescription?.contains("16") == true)
        // One token shorter fits, and generation stops at the end of the window without an error.
        let result = try scheduler.run(GenerationRequest(prompt: Array(prompt.dropLast()), maxTokens: 10))
        #expect(result.generatedTokens <= 2)
        #expect(result.finishReason == .contextFull || result.finishReason == .endOfGeneration)
    }

    @Test func emptyPromptIsRefused() throws {
        let model = try Self.tinyModel()
        let scheduler = try Scheduler(model: model, configuration: .init(slots: 1, threads: 1))
        let e = caughtError(SchedulerError.self) {
            _ = try scheduler.run(GenerationRequest(prompt: [], maxTokens: 1))
        }
        #expect(e == .emptyPrompt)
    }

    /// A slot count no process could address is an error, not a trap in an array allocation.
    @Test func aCacheNoProcessCouldHoldIsRefused() throws {
        let model = try Self.tinyModel()
        let e = caughtError(ModelError.self) {
            _ = try InferenceContext(transformer: model.transformer, contextLength: 8, slots: 1 << 50, threads: 1, backend: .cpu)
        }
        guard case .outOfMemory(let what) = e else { Issue.record("expected outOfMemory, got \(String(describing: e))"); return }
        #expect(what.contains("\(1 << 50) sequences of 8 positions"), "\(what)")
    }

    @Test func badBatchesAreRejected() throws {
        let model = try Self.tinyModel()
        let ctx = try InferenceContext(transformer: model.transformer, contextLength: 8, slots: 2, threads: 1)

        var b = Batch()
        b.add(32, position: 0, logits: true)
        var e = caughtError(ModelError.self) { try ctx.forward(b) }
        #expect(e == .tokenOutOfRange(token: 32, vocabularySize: 32))
        #expect(e?.errorDescription?.contains("32") == true)

        b = Batch()
        b.add(-1, position: 0)
        #expect(caughtError(ModelError.self) { try ctx.forward(b) } == .tokenOutOfRange(token: -1, vocabularySize: 32))

        b = Batch()
        b.add(1, position: 0)
        b.add(2, position: 2)
        e = caughtError(ModelError.self) { try ctx.forward(b) }
        #expect(e == .nonContiguousPositions(slot: 0, expected: 1, found: 2))
        #expect(e?.errorDescription?.contains("consecutive") == true)

        // A sequence may not start past the end of its slot's cache.
        b = Batch()
        b.add(1, position: 3)
        #expect(caughtError(ModelError.self) { try ctx.forward(b) } == .nonContiguousPositions(slot: 0, expected: 0, found: 3))

        b = Batch()
        b.add(1, position: 0, slot: 2)
        e = caughtError(ModelError.self) { try ctx.forward(b) }
        #expect(e == .invalidSlot(2, slots: 2))
        #expect(e?.errorDescription?.contains("slot 2") == true)

        b = Batch()
        b.add(1, position: 0, slot: -1)
        #expect(caughtError(ModelError.self) { try ctx.forward(b) } == .invalidSlot(-1, slots: 2))

        e = caughtError(ModelError.self) { try ctx.forward(Batch()) }
        #expect(e == .emptyBatch)
        #expect(e?.errorDescription?.contains("no tokens") == true)

        // Positions past the context window.
        e = caughtError(ModelError.self) { try ctx.forward(.sequence([Int32](repeating: 1, count: 9))) }
        #expect(e == .contextOverflow(slot: 0, needed: 9, capacity: 8))

        // A rejected batch leaves the context usable: nothing was stored.
        #expect(ctx.slotLengths == [0, 0])
        try ctx.forward(.sequence([1, 2, 3], slot: 1))
        #expect(ctx.slotLengths == [0, 3])
        #expect(ctx.logitRowCount == 1)
    }

    @Test func invalidUTF8NamesTheOffset() {
        let e = caughtError(TokenizerError.self) { _ = try Tokenizer.validatedText([0xff, 0x41]) }
        #expect(e == .invalidUTF8(offset: 0))
        #expect(e?.errorDescription?.contains("UTF-8") == true)
        #expect(e?.errorDescription?.contains("byte 0") == true)
        let later = caughtError(TokenizerError.self) { _ = try Tokenizer.validatedText(Array("héllo".utf8) + [0xc3]) }
        #expect(later == .invalidUTF8(offset: 6))
        #expect((try? Tokenizer.validatedText(Array("héllo".utf8))) == "héllo")
    }

    // MARK: The tiny model runs, and runs correctly

    @Test func tinyModelLoadsAndGivesFiniteLogits() throws {
        let model = try Self.tinyModel()
        let c = model.config
        #expect(c.architecture == Llama.architecture)
        #expect(c.layerCount == 1 && c.embeddingLength == 64 && c.headCount == 2 && c.kvHeadCount == 1)
        #expect(c.feedForwardLength == 128 && c.vocabularySize == 32 && c.headDim == 32 && c.contextLength == 16)
        #expect(model.tokenizer.vocabularySize == 32)
        #expect(model.name == "tiny-llama")
        #expect(model.chatTemplate == nil)
        #expect(model.tokenizer.encode("abc", addSpecial: false) == [0, 1, 2])

        let ctx = try InferenceContext(transformer: model.transformer, threads: 1)
        try ctx.forward(.sequence([0, 1, 2]))
        let logits = Array(ctx.logits(0))
        #expect(logits.count == 32)
        #expect(logits.allSatisfy { $0.isFinite })
        #expect(Set(logits).count > 16, "logits are not all the same")
    }

    @Test(arguments: [1, 2])
    func tinyModelMatchesANaiveForwardPass(threads: Int) throws {
        let tiny = TinyLlama()
        let model = try Self.tinyModel(tiny)
        let tokens: [Int32] = [7, 30, 2]
        let reference = tiny.referenceLogits(tokens)

        let ctx = try InferenceContext(transformer: model.transformer, threads: threads)
        var b = Batch()
        for (i, t) in tokens.enumerated() { b.add(t, position: i, logits: true) }
        try ctx.forward(b)
        #expect(ctx.logitRowCount == 3)
        var worst = 0.0
        for row in 0..<3 {
            let ours = ctx.logits(row)
            for i in 0..<tiny.vocabulary { worst = max(worst, abs(Double(ours[i]) - reference[row][i])) }
        }
        #expect(worst < 1e-2, "largest logit difference \(worst)")
        // The comparison is meaningful: logits spread well beyond the tolerance.
        let spread = reference.flatMap { $0 }.max()! - reference.flatMap { $0 }.min()!
        #expect(spread > 1)

        // Decoding one token at a time through the KV cache gives the same logits.
        ctx.reset(slot: 0)
        for (i, t) in tokens.enumerated() {
            var step = Batch()
            step.add(t, position: i, logits: true)
            try ctx.forward(step)
            let ours = ctx.logits(0)
            for v in 0..<tiny.vocabulary {
                #expect(abs(Double(ours[v]) - reference[i][v]) < 1e-2, "position \(i), token \(v)")
            }
        }
        #expect(ctx.slotLengths == [3])
    }

    @Test func tinyModelGroupedQueryAttentionWithMoreHeads() throws {
        // Four query heads share two KV heads (two per group).
        let tiny = TinyLlama(heads: 4, kvHeads: 2, seed: 77)
        let model = try Self.tinyModel(tiny)
        #expect(model.config.headDim == 16 && model.config.kvHeadCount == 2)
        let tokens: [Int32] = [5, 6, 7, 8]
        let reference = tiny.referenceLogits(tokens)
        let ctx = try InferenceContext(transformer: model.transformer, threads: 2)
        let worst = try worstLogitError(ctx, tokens, against: reference)
        #expect(worst < 1e-2, "largest logit difference \(worst)")
    }
}
