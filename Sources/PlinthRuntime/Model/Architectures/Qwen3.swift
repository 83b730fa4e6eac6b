/// Qwen3 (dense): Llama's block without biases, with an RMSNorm of each query and key head
/// before RoPE (on (i, i + d/2) pairs); the head size is the file's `key_length`, which need not
/// be the embedding width over the heads (Qwen3-0.6B: 1024 wide, 16 heads of 128).
public struct Qwen3: ModelArchitecture {
    public static let architecture = Architecture(rawValue: "qwen3")
    public static let neoxRoPE = true
    let llama: Llama
    public var ropes: [RoPE] { llama.ropes }

    public init(gguf: GGUFFile, config c: ModelConfig) throws {
        llama = try Llama(gguf: gguf, config: c)
    }

    public func tensors(layer index: Int, config c: ModelConfig) -> [LayerTensorSpec] {
        // Biases are optional, as llama.cpp reads them (Qwen3 files have none).
        LayerTensorSpec.standardBlock(c) + [
            .init(.attnQNorm, "attn_q_norm.weight", [c.headDim]), .init(.attnKNorm, "attn_k_norm.weight", [c.headDim]),
        ] + LayerTensorSpec.qkvBiases(c, optional: true)
    }

    public func layer(_ index: Int, _ step: some LayerStep) {
        Llama.block(step, attentionScale: llama.attentionScale, headNorms: true)
    }
}
