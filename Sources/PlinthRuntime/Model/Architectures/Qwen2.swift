/// Qwen2 and Qwen2.5: Llama's block with biases on the query, key and value products and RoPE
/// on (i, i + d/2) pairs.
public struct Qwen2: ModelArchitecture {
    public static let architecture = Architecture(rawValue: "qwen2")
    public static let neoxRoPE = true
    let llama: Llama
    public var ropes: [RoPE] { llama.ropes }

    public init(gguf: GGUFFile, config c: ModelConfig) throws {
        llama = try Llama(gguf: gguf, config: c)
    }

    public func tensors(layer index: Int, config c: ModelConfig) -> [LayerTensorSpec] {
        llama.tensors(layer: index, config: c) + LayerTensorSpec.qkvBiases(c)
    }

    public func layer(_ index: Int, _ step: some LayerStep) {
        llama.layer(index, step)
    }
}
