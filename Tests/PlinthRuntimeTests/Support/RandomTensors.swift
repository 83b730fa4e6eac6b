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
}
