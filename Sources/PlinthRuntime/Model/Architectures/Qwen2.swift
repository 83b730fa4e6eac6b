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
        let q = c.headCount * c.headDim, kv = c.kvHeadCount * c.headDim
        return llama.tensors(layer: index, config: c) + [
            .init(.attnQBias, "attn_q.bias", [q]), .init(.attnKBias, "attn_k.bias", [kv]), .init(.attnVBias, "attn_v.bias", [kv]),
        ]
    }

    public func layer(_ index: Int, _ step: some LayerStep) {
        llama.layer(index, step)
    }
}
