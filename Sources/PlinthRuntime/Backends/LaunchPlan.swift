// The recorded layers (``LayerOp``) grouped into the launches the CUDA step makes of them: a
// decode step is launch-bound, so neighbours that one kernel can do together are planned as one
// (the fused families' step does the same by hand).

/// One launch (or a product and what its last block does) of a recorded step, and the
/// operations it stands for.
struct PlannedLaunch {
    enum Kind {
        /// One recorded operation, run as recorded.
        case op(LayerOp)
        /// The query and key heads normalized (either may have no norm), rotated by one RoPE
        /// table and stored with the values (pkc_qkv_norm_rope_store), then attention. With
        /// `product`, first the q | k | v product of that buffer, which does the rest in its
        /// last block (pkc_matmul_runs_rope_store).
        case attention(product: StepBuffer?, qNorm: LayerTensor?, kNorm: LayerTensor?, table: Int, window: Int?, scale: Float)
        /// A product of one matrix whose rows join the residual stream: through `through`, first
        /// normalized by `post` where given (pkc_matmul_post_norm), else added directly.
        case product(input: StepBuffer, matrix: LayerTensor, through: StepBuffer, post: LayerTensor?)
        /// The gated feed-forward (gate | up, the activation, down) joining the residual stream as
        /// ``product(input:matrix:through:post:)``'s rows do.
        case feedForward(input: StepBuffer, activation: Activation, through: StepBuffer, post: LayerTensor?)
    }

    /// The layer whose weights the launch reads.
    let layer: Int
    let kind: Kind
    /// A norm of the residual stream right after, made in the product's last block: the layer
    /// whose weights it reads (the next layer's first norm), its weights and its target.
    var next: (layer: Int, weight: LayerTensor, target: StepBuffer)?
    /// The recorded operations this launch stands for, each with its layer: where it cannot run
    /// fused (an adapter on one of its matrices), they run one by one.
    var ops: [(layer: Int, op: LayerOp)]

    /// The buffer its first product reads (the int8 rows of a norm just before serve it), if any.
    var input: StepBuffer? {
        switch kind {
        case .op(.project(let input, _)), .op(.feedForward(let input, _, _)): input
        case .product(let input, _, _, _), .feedForward(let input, _, _, _): input
        case .attention(let product?, _, _, _, _, _): product
        default: nil
        }
    }

    /// The launches of `layers` (each layer's recorded operations, in order). `hasVector(l, r)`:
    /// whether layer l has vector r (a product with a bias runs as recorded).
    static func plan(_ layers: [[LayerOp]], hasVector: (Int, LayerTensor) -> Bool) -> [PlannedLaunch] {
        let ops = layers.enumerated().flatMap { l, ops in ops.map { (layer: l, op: $0) } }
        var plan: [PlannedLaunch] = []
        var i = 0
        while i < ops.count {
            guard var launch = attention(ops, i, hasVector) ?? residualProduct(ops, i, hasVector) else {
                plan.append(PlannedLaunch(layer: ops[i].layer, kind: .op(ops[i].op), ops: [ops[i]]))
                i += 1
                continue
            }
            i += launch.ops.count
            // The residual's next norm, into a buffer other than the one the product went through.
            if launch.isResidualProduct, i < ops.count, case .norm(.residual, let weight, let target) = ops[i].op,
               target != .residual, target != launch.through {
                launch.next = (ops[i].layer, weight, target)
                launch.ops.append(ops[i])
                i += 1
            }
            plan.append(launch)
        }
        return plan
    }

    var isResidualProduct: Bool {
        switch kind {
        case .product, .feedForward: true
        default: false
        }
    }

    private var through: StepBuffer? {
        switch kind {
        case .product(_, _, let b, _), .feedForward(_, _, let b, _): b
        default: nil
        }
    }

    /// The q | k | v product (optional: one without biases), per-head norms and rotations of the
    /// queries and keys, then `attend`: each buffer's norm (if any) before its rotation, both
    /// rotated by one table.
    private static func attention(_ ops: [(layer: Int, op: LayerOp)], _ start: Int,
                                  _ hasVector: (Int, LayerTensor) -> Bool) -> PlannedLaunch? {
        let layer = ops[start].layer
        if case .project(let input, let ps) = ops[start].op, start + 1 < ops.count, ops[start + 1].layer == layer,
           ps.map(\.0) == [.attnQ, .attnK, .attnV], ps.map(\.1) == [.query, .key, .value],
           ![.query, .key, .value].contains(input), !ps.contains(where: { $0.0.bias.map { hasVector(layer, $0) } ?? false }),
           let launch = attention(ops, start + 1, hasVector), case .attention(nil, let q, let k, let t, let w, let s) = launch.kind {
            return PlannedLaunch(layer: layer, kind: .attention(product: input, qNorm: q, kNorm: k, table: t, window: w, scale: s),
                                 ops: [ops[start]] + launch.ops)
        }
        var norms: [StepBuffer: LayerTensor] = [:], tables: [StepBuffer: Int] = [:]
        var i = start
        while i < ops.count, ops[i].layer == layer {
            switch ops[i].op {
            case .headNorm(let b, let w) where (b == .query || b == .key) && norms[b] == nil && tables[b] == nil:
                norms[b] = w
            case .rope(let b, let t) where (b == .query || b == .key) && tables[b] == nil:
                tables[b] = t
            case .attend(let window, let scale, _):
                guard let t = tables[.query], tables[.key] == t else { return nil }
                return PlannedLaunch(layer: layer, kind: .attention(product: nil, qNorm: norms[.query], kNorm: norms[.key], table: t,
                                                                    window: window, scale: scale),
                                     ops: Array(ops[start...i]))
            default:
                return nil
            }
            i += 1
        }
        return nil
    }

    /// A product of one matrix (or the feed-forward) into a buffer, that buffer's rows normalized
    /// in place (optional), then added to the residual stream. Without the norm the sum goes
    /// straight into the residual, so the buffer must not be read again before it is written.
    private static func residualProduct(_ ops: [(layer: Int, op: LayerOp)], _ start: Int,
                                        _ hasVector: (Int, LayerTensor) -> Bool) -> PlannedLaunch? {
        let layer = ops[start].layer
        let b: StepBuffer
        switch ops[start].op {
        case .project(let input, let ps) where ps.count == 1 && input != .residual && input != ps[0].1:
            guard ps[0].0.bias.map({ !hasVector(layer, $0) }) ?? true else { return nil }
            b = ps[0].1
        case .feedForward(let input, _, let out) where input != .residual && input != out:
            b = out
        default:
            return nil
        }
        guard b == .normed || b == .output else { return nil }
        func op(_ k: Int) -> LayerOp? { start + k < ops.count && ops[start + k].layer == layer ? ops[start + k].op : nil }
        var post: LayerTensor?
        let used: Int
        if case .norm(b, let w, into: b)? = op(1), case .addToResidual(b)? = op(2) {
            post = w
            used = 3
        } else if case .addToResidual(b)? = op(1), isDead(b, after: start + 1, ops) {
            used = 2
        } else {
            return nil
        }
        let kind: Kind
        switch ops[start].op {
        case .project(let input, let ps): kind = .product(input: input, matrix: ps[0].0, through: b, post: post)
        case .feedForward(let input, let activation, _): kind = .feedForward(input: input, activation: activation, through: b, post: post)
        default: return nil
        }
        return PlannedLaunch(layer: layer, kind: kind, ops: Array(ops[start..<start + used]))
    }

    /// Whether `b` is written before anything after `index` reads it (or nothing does).
    private static func isDead(_ b: StepBuffer, after index: Int, _ ops: [(layer: Int, op: LayerOp)]) -> Bool {
        for (_, op) in ops[(index + 1)...] {
            if op.reads(b) { return false }
            if op.writes(b) { return true }
        }
        return true
    }
}
