import PlinthKernels

/// The step operations of one layer on the CPU (``LayerStep``), over the rows of one chunk of a
/// batch: the context's buffers, its KV cache for the layer, its thread pool.
struct CPULayerStep: LayerStep {
    let context: InferenceContext
    let layer: Int
    let weights: LayerWeights
    /// Rows of the chunk: n of them, row r being the batch's token `rows.lowerBound + r`.
    let batch: Batch
    let rows: Range<Int>
    let lora: AdapterRows

    private var n: Int { rows.count }
    private var c: ModelConfig { context.transformer.config }

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

    /// Products of `x` (rows of `width`) with the layer's matrices into their outputs (rows of
    /// the given widths), then each row's adapter, then the matrix's bias where it has one.
    private func products(_ x: UnsafeMutablePointer<Float>, width: Int,
                          _ targets: [(role: LayerTensor, y: UnsafeMutablePointer<Float>, width: Int)]) {
        context.matmul(x, n, targets.map { (tensor($0.role), $0.y) })
        if !lora.isEmpty {
            let l = layer
            lora.apply(targets.compactMap { t in
                t.role.adapterMatrix.map { m in ({ $0.layers[l][m.index] }, t.y, t.width) }
            }, input: x, width: width, pool: context.pool)
        }
        for t in targets {
            guard let b = t.role.bias.flatMap({ weights[$0] }) else { continue }
            let bias = b.data.assumingMemoryBound(to: Float.self)
            pk_add_rows(context.pool, t.y, bias, Int64(n), Int64(t.width), 0)
        }
    }

    func norm(_ source: StepBuffer, _ weight: LayerTensor, into target: StepBuffer) {
        let (x, width) = buffer(source), (y, _) = buffer(target)
        pk_rms_norm(context.pool, x, vector(weight), y, Int64(n), Int64(width), c.rmsEpsilon)
    }

    func headNorm(_ b: StepBuffer, _ weight: LayerTensor) {
        let (x, width) = buffer(b)
        pk_rms_norm(context.pool, x, vector(weight), x, Int64(n * (width / c.headDim)), Int64(c.headDim), c.rmsEpsilon)
    }

    func project(_ input: StepBuffer, _ products: [(LayerTensor, StepBuffer)]) {
        let (x, width) = buffer(input)
        self.products(x, width: width, products.map { role, out in
            let (y, w) = buffer(out)
            return (role, y, w)
        })
    }

    func rope(_ b: StepBuffer, table: Int) {
        let (x, width) = buffer(b)
        pk_rope(context.pool, x, Int64(n), Int64(width), Int32(width / c.headDim), Int32(c.headDim), Int32(c.ropeDims),
                context.ropeTables[table], context.neoxRoPE)
    }

    func attend(window: Int?, scale: Float) {
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
        pk_attention_window(ctx.pool, ctx.q, Int64(n), Int32(c.headCount), Int32(c.kvHeadCount), Int32(c.headDim),
                            ctx.kRows, ctx.vRows, window == nil ? nil : UnsafePointer(ctx.kvStart), ctx.kvLen, Int64(ctx.kvDim),
                            scale, ctx.attn, ctx.attnScratch)
    }

    func feedForward(_ input: StepBuffer, _ activation: Activation, into target: StepBuffer) {
        let ctx = context, ff = c.feedForwardLength
        let (x, width) = buffer(input), (y, yWidth) = buffer(target)
        products(x, width: width, [(.ffnGate, ctx.gate, ff), (.ffnUp, ctx.up, ff)])
        switch activation {
        case .silu: pk_swiglu(ctx.pool, ctx.gate, ctx.up, Int64(n), Int64(ff))
        case .geluTanh: pk_geglu(ctx.pool, ctx.gate, ctx.up, Int64(n), Int64(ff))
        }
        products(ctx.gate, width: ff, [(.ffnDown, y, yWidth)])
    }

    func addToResidual(_ b: StepBuffer) {
        let (y, width) = buffer(b)
        pk_add_rows(context.pool, context.x, y, Int64(n), Int64(width), Int64(width))
    }
}
