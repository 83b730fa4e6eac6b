/// Llama and the models that share its block (SmolLM2, Llama 2 and 3.x with linear RoPE scaling or
/// Llama 3.1's frequency factors, Mistral without a sliding window): RMSNorm before attention and feed-forward, RoPE on adjacent pairs,
/// grouped-query attention, SwiGLU.
public struct Llama: ModelArchitecture {
    public static let architecture = Architecture(rawValue: "llama")
    public let ropes: [RoPE]
    public static let neoxRoPE = false
    let attentionScale: Float

    public init(gguf: GGUFFile, config c: ModelConfig) throws {
        let (scale, factors) = try c.ropeScaling(gguf)
        ropes = [RoPE(base: c.ropeFreqBase, scale: scale, factors: factors)]
        attentionScale = 1 / Float(c.headDim).squareRoot()
    }

    public func tensors(layer index: Int, config c: ModelConfig) -> [LayerTensorSpec] {
        LayerTensorSpec.standardBlock(c)
    }

    public func layer(_ index: Int, _ step: some LayerStep) {
        Llama.block(step, attentionScale: attentionScale)
    }

    /// The pre-norm block: x += attention(norm(x)); x += swiglu(norm(x)). `headNorms`: each
    /// query and key head is normed by itself before RoPE (Qwen3).
    static func block(_ s: some LayerStep, attentionScale: Float, headNorms: Bool = false) {
        s.norm(.residual, .attnNorm, into: .normed)
        s.project(.normed, [(.attnQ, .query), (.attnK, .key), (.attnV, .value)])
        if headNorms {
            s.headNorm(.query, .attnQNorm)
            s.headNorm(.key, .attnKNorm)
        }
        s.rope(.query, table: 0)
        s.rope(.key, table: 0)
        s.attend(window: nil, scale: attentionScale)
        s.project(.attention, [(.attnOutput, .output)])
        s.addToResidual(.output)
        s.norm(.residual, .ffnNorm, into: .normed)
        s.feedForward(.normed, .silu, into: .output)
        s.addToResidual(.output)
    }
}
