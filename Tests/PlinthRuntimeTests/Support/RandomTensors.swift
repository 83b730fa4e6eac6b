@testable import PlinthRuntime

/// Named F32 tensors of seeded uniform values, in the order added: the weights of the tiny
/// models that tests write as GGUF files.
struct RandomTensors {
    private var rng: RandomSource
    private(set) var tensors: [String: (dims: [Int], values: [Float])] = [:]
    private(set) var order: [String] = []

    init(seed: UInt64) { rng = RandomSource(seed: seed) }

    /// A tensor of `dims` (GGUF order) with values uniform in offset ± scale.
    mutating func add(_ name: String, _ dims: [Int], scale: Double, offset: Double = 0) {
        let n = dims.reduce(1, *)
        tensors[name] = (dims, (0..<n).map { _ in Float(offset + (rng.nextUnit() * 2 - 1) * scale) })
        order.append(name)
    }

    /// A layer's attention norm and q, k, v matrices, at the scales the tiny models use.
    mutating func addAttentionInputs(_ prefix: String, embedding e: Int, qDim: Int, kvDim: Int) {
        add(prefix + "attn_norm.weight", [e], scale: 0.2, offset: 1)
        add(prefix + "attn_q.weight", [e, qDim], scale: 2.5 / Double(e).squareRoot())
        add(prefix + "attn_k.weight", [e, kvDim], scale: 2.5 / Double(e).squareRoot())
        add(prefix + "attn_v.weight", [e, kvDim], scale: 1.7 / Double(e).squareRoot())
    }

    /// A layer's feed-forward norm and gate, up and down matrices, at the scales the tiny models use.
    mutating func addFeedForward(_ prefix: String, embedding e: Int, feedForward ff: Int) {
        add(prefix + "ffn_norm.weight", [e], scale: 0.2, offset: 1)
        add(prefix + "ffn_gate.weight", [e, ff], scale: 1.7 / Double(e).squareRoot())
        add(prefix + "ffn_up.weight", [e, ff], scale: 1.7 / Double(e).squareRoot())
        add(prefix + "ffn_down.weight", [ff, e], scale: 1.7 / Double(ff).squareRoot())
    }
}
