import PlinthKernels

/// The step operations of one layer on the CPU (``LayerStep``), over the rows of one chunk of a
/// batch: the context's buffers, its KV cache for the layer, its thread pool.
///
/// The architecture's calls are recorded and run by ``run()`` once the layer is written, so that
/// neighbouring operations run as one kernel call where the results are the same bits:
/// an RMSNorm as the prologue of the products that read it, a bias, the gated activation and an
/// add to the residual stream as epilogues of the products that make their input.
struct CPULayerStep: RecordingLayerStep {
    let context: InferenceContext
    let layer: Int
    let weights: LayerWeights
    /// Rows of the chunk: n of them, row r being the batch's token `rows.lowerBound + r`.
    let batch: Batch
    let rows: Range<Int>
    let lora: AdapterRows

    private var n: Int { rows.count }
    private var c: ModelConfig { context.transformer.config }
    var program: LayerProgram { context.layerProgram }

    /// Runs the recorded operations, fusing where the bits allow, and clears the record.
    func run() {
        let ops = program.ops
        defer { program.ops.removeAll(keepingCapacity: true) }
        // An observer of the products' inputs must see them made, one call at a time.
        let fuse = context.inputObserver == nil
        var i = 0
        while i < ops.count {
            var prologue: (source: StepBuffer, weight: LayerTensor)?
            if fuse, case .norm(let source, let weight, let target) = ops[i], i + 1 < ops.count, productInput(ops[i + 1]) == target {
                prologue = (source, weight)
                i += 1
            }
            var toResidual = false
            if fuse, i + 1 < ops.count, case .addToResidual(let b) = ops[i + 1],
               let out = singleOutput(ops[i]), out == b, !readBeforeWritten(b, from: i + 2, in: ops) {
                toResidual = true
            }
            execute(ops[i], prologue: prologue, toResidual: toResidual)
            i += toResidual ? 2 : 1
        }
    }

    /// The buffer an operation's products read.
    private func productInput(_ op: LayerOp) -> StepBuffer? {
        switch op {
        case .project(let input, _), .feedForward(let input, _, _): input
        default: nil
        }
    }

    /// The one buffer an operation's last product writes, when that product can add it to the
    /// residual stream instead (its epilogue).
    private func singleOutput(_ op: LayerOp) -> StepBuffer? {
        switch op {
        case .project(_, let products) where products.count == 1 && hasEpilogues([products[0].0]): products[0].1
        case .feedForward(_, _, let target) where hasEpilogues([.ffnDown]): target
        default: nil
        }
    }

    /// Whether products of these matrices take their bias, residual add or gating as epilogues:
    /// quantized weights (float ones go through BLAS), and no row with an adapter (whose delta
    /// comes before the bias).
    private func hasEpilogues(_ roles: [LayerTensor]) -> Bool {
        lora.isEmpty && roles.allSatisfy { tensor($0).type.isQuantized }
    }

    /// Whether an operation from `start` on reads `b` before one writes it (then `b` must hold
    /// its value, and cannot go straight into the residual stream). Buffers other than the
    /// residual stream carry nothing into the next layer.
    private func readBeforeWritten(_ b: StepBuffer, from start: Int, in ops: [LayerOp]) -> Bool {
        for op in ops[start...] {
            if op.reads(b) { return true }
            if op.writes(b) { return false }
        }
        return false
    }

    private func execute(_ op: LayerOp, prologue: (source: StepBuffer, weight: LayerTensor)?, toResidual: Bool) {
        switch op {
        case .norm(let source, let weight, let target):
            let (x, width) = buffer(source), (y, _) = buffer(target)
            pk_rms_norm(context.pool, x, vector(weight), y, Int64(n), Int64(width), c.rmsEpsilon)
        case .headNorm(let b, let weight):
            let (x, width) = buffer(b)
            pk_rms_norm(context.pool, x, vector(weight), x, Int64(n * (width / c.headDim)), Int64(c.headDim), c.rmsEpsilon)
        case .project(let input, let products):
            let (x, width) = buffer(input)
            self.products(x, width: width, products.map { role, out in
                let (y, w) = toResidual ? (context.x, c.embeddingLength) : buffer(out)
                return (role, y, w)
            }, prologue: prologue, accumulate: toResidual)
        case .rope(let b, let table):
            let (x, width) = buffer(b)
            pk_rope(context.pool, x, Int64(n), Int64(width), Int32(width / c.headDim), Int32(c.headDim), Int32(c.ropeDims),
                    context.ropeTables[table], context.neoxRoPE)
        case .attend(let window, let scale, let softcap):
            storeAndAttend(window: window, scale: scale, softcap: softcap)
        case .feedForward(let input, let activation, let target):
            feedForward(input, activation, into: target, prologue: prologue, toResidual: toResidual)
        case .addToResidual(let b):
            let (y, width) = buffer(b)
            pk_add_rows(context.pool, context.x, y, Int64(n), Int64(width), Int64(width))
        }
    }

    private func buffer(_ b: StepBuffer) -> (UnsafeMutablePointer<Float>, width: Int) {
        let ctx = context
        switch b {
        case .residual: return (ctx.x, c.embeddingLength)
        case .normed: return (ctx.h, c.embeddingLength)
        case .query: return (ctx.q, ctx.qDim)
        case .key: return (ctx.k, ctx.kvDim)
        case .value: return (ctx.v, ctx.kvDim)
        case .attention: return (ctx.attn, ctx.qDim)
        case .output: return (ctx.tmp, c.embeddingLength)
        }
    }

    private func tensor(_ role: LayerTensor) -> WeightTensor {
        guard let t = weights[role] else { preconditionFailure("layer \(layer) has no \(role) tensor; its architecture must declare it") }
        return t
    }

    private func vector(_ role: LayerTensor) -> UnsafePointer<Float> { tensor(role).data.assumingMemoryBound(to: Float.self) }

    private func normFusion(_ prologue: (source: StepBuffer, weight: LayerTensor)?) -> NormFusion? {
        prologue.map { NormFusion(source: buffer($0.source).0, weight: vector($0.weight), eps: c.rmsEpsilon) }
    }

    /// Products of `x` (rows of `width`) with the layer's matrices into their outputs (rows of
    /// the given widths), then each row's adapter, then the matrix's bias where it has one; added
    /// to the outputs with `accumulate`. The bias and the add are the products' epilogues when
    /// no row has an adapter (an adapter's delta comes before the bias).
    private func products(_ x: UnsafeMutablePointer<Float>, width: Int,
                          _ targets: [(role: LayerTensor, y: UnsafeMutablePointer<Float>, width: Int)],
                          prologue: (source: StepBuffer, weight: LayerTensor)? = nil, accumulate: Bool = false) {
        let bias = targets.map { t in t.role.bias.flatMap { weights[$0] }?.data.assumingMemoryBound(to: Float.self) }
        let epilogues = hasEpilogues(targets.map(\.role))
        precondition(epilogues || !accumulate, "an add to the residual stream is fused only where the epilogues are")
        context.matmul(x, n, targets.enumerated().map { i, t in
            ProductTarget(weight: tensor(t.role), output: t.y, bias: epilogues ? bias[i] : nil, accumulate: accumulate)
        }, norm: normFusion(prologue))
        if epilogues { return }
        if !lora.isEmpty {
            let l = layer
            lora.apply(targets.compactMap { t in
                t.role.adapterMatrix.map { m in ({ $0.layers[l][m.index] }, t.y, t.width) }
            }, input: x, width: width, pool: context.pool)
        }
        for (t, b) in zip(targets, bias) {
            guard let b else { continue }
            pk_add_rows(context.pool, t.y, b, Int64(n), Int64(t.width), 0)
        }
    }

    private func storeAndAttend(window: Int?, scale: Float, softcap: Float?) {
        let ctx = context
        for (r, i) in rows.enumerated() {
            let keys = ctx.kCache[layer] + batch.slots[i] * ctx.keySlotStride
            let values = ctx.vCache[layer] + batch.slots[i] * ctx.valueSlotStride
            ctx.kStore[r] = keys
            ctx.vStore[r] = values
            ctx.kRows[r] = UnsafePointer(keys)
            ctx.vRows[r] = UnsafePointer(values)
        }
        pk_store_kv(ctx.pool, ctx.k, ctx.v, Int64(n), Int64(ctx.kvDim), ctx.rowPositions, ctx.kStore, ctx.vStore)
        // Without a window every row attends from position 0 (no start per row).
        if let window {
            for r in 0..<n { ctx.kvStart[r] = max(0, ctx.kvLen[r] - Int32(clamping: window)) }
        }
        pk_attention_capped(ctx.pool, ctx.q, Int64(n), Int32(c.headCount), Int32(c.kvHeadCount), Int32(c.headDim),
                            ctx.kRows, ctx.vRows, window == nil ? nil : UnsafePointer(ctx.kvStart), ctx.kvLen, Int64(ctx.kvDim),
                            scale, softcap ?? 0, ctx.attn, ctx.attnScratch)
    }

    /// act(gate · x) ⊙ (up · x) into the gate buffer, with the activation as the pair's
    /// epilogue when no row has an adapter; then down into `target` or the residual stream.
    private func feedForward(_ input: StepBuffer, _ activation: Activation, into target: StepBuffer,
                             prologue: (source: StepBuffer, weight: LayerTensor)?, toResidual: Bool) {
        let ctx = context, ff = c.feedForwardLength
        let (x, width) = buffer(input), (y, yWidth) = toResidual ? (ctx.x, c.embeddingLength) : buffer(target)
        if hasEpilogues([.ffnGate, .ffnUp]) {
            let glu = activation == .silu ? Int32(PK_GLU_SILU) : Int32(PK_GLU_GELU_TANH)
            ctx.matmul(x, n, [ProductTarget(weight: tensor(.ffnGate), output: ctx.gate), ProductTarget(weight: tensor(.ffnUp), output: ctx.up)],
                       glu: glu, norm: normFusion(prologue))
        } else {
            products(x, width: width, [(.ffnGate, ctx.gate, ff), (.ffnUp, ctx.up, ff)], prologue: prologue)
            switch activation {
            case .silu: pk_swiglu(ctx.pool, ctx.gate, ctx.up, Int64(n), Int64(ff))
            case .geluTanh: pk_geglu(ctx.pool, ctx.gate, ctx.up, Int64(n), Int64(ff))
            }
        }
        products(ctx.gate, width: ff, [(.ffnDown, y, yWidth)], accumulate: toResidual)
    }
}
