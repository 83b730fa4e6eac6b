/// Gemma 3: embeddings scaled by √d; RMSNorm before and after attention and feed-forward (GGUF
/// files store Gemma's (1 + w) norm weights with the one already added); RMSNorm of each query
/// and key head; GeGLU (gelu's tanh form); local layers attending to a sliding window with their
/// own RoPE base, every `pattern`-th layer global; tied embeddings; RoPE on (i, i + d/2) pairs.
public struct Gemma3: ModelArchitecture {
    public static let architecture = Architecture(rawValue: "gemma3")
    /// [global, local]
    public let ropes: [RoPE]
    public static let neoxRoPE = true
    public let embeddingScale: Float?
    public let logitSoftcap: Float?
    /// Positions a local layer attends to, its own included.
    let slidingWindow: Int
    /// Per layer: whether it attends to the sliding window only.
    let local: [Bool]
    let attentionScale: Float

    public init(gguf: GGUFFile, config c: ModelConfig) throws {
        let a = c.architecture.rawValue
        let (scale, factors) = try c.ropeScaling(gguf)
        guard let window = try gguf.int("\(a).attention.sliding_window") else {
            throw ModelError.missingMetadata("\(a).attention.sliding_window")
        }
        slidingWindow = try Self.checkedWindow(window, c)
        // Files that do not say use Gemma 3's pattern: five local layers, then a global one.
        local = try Self.localLayers(gguf, c, period: 6)
        // Gemma 3's local layers use base 10,000 unscaled; the file's base and scaling (4B and
        // larger: linear, factor 8) are the global layers'.
        ropes = [RoPE(base: c.ropeFreqBase, scale: scale, factors: factors), RoPE(base: 10_000)]
        embeddingScale = Float(c.embeddingLength).squareRoot()
        logitSoftcap = try gguf.double("\(a).final_logit_softcapping").map(Float.init).flatMap { $0 > 0 ? $0 : nil }
        // Queries are scaled by 1/√(query_pre_attn_scalar): the head size, except for the 27B
        // model (62 layers), whose scalar is the embedding width per head (Gemma's config).
        let scalar = c.layerCount == 62 ? c.embeddingLength / c.headCount : c.headDim
        attentionScale = 1 / Float(scalar).squareRoot()
    }

    /// A sliding window's size, checked.
    static func checkedWindow(_ window: Int, _ c: ModelConfig) throws -> Int {
        guard window > 0 else {
            throw ModelError.invalidMetadata(key: "\(c.architecture).attention.sliding_window", reason: "\(window) is not positive")
        }
        return window
    }

    /// Which layers attend to the sliding window: the file's pattern, a period (every period-th
    /// layer global) or a flag per layer, else every `period`-th.
    static func localLayers(_ gguf: GGUFFile, _ c: ModelConfig, period fallback: Int) throws -> [Bool] {
        let key = "\(c.architecture).attention.sliding_window_pattern"
        if let flags = try? gguf.array(key) {
            let local = flags.compactMap(\.boolValue)
            guard local.count == c.layerCount else {
                throw ModelError.invalidMetadata(key: key, reason: "\(flags.count) flags for \(c.layerCount) layers")
            }
            return local
        }
        let period = try gguf.int(key) ?? fallback
        guard period > 0 else { throw ModelError.invalidMetadata(key: key, reason: "\(period) is not positive") }
        return (0..<c.layerCount).map { $0 % period < period - 1 }
    }

    /// The post-norms Gemma 2 and 3 add to the standard block.
    static func postNorms(_ c: ModelConfig) -> [LayerTensorSpec] {
        let e = c.embeddingLength
        return [.init(.postAttentionNorm, "post_attention_norm.weight", [e]), .init(.postFFNNorm, "post_ffw_norm.weight", [e])]
    }

    public func tensors(layer index: Int, config c: ModelConfig) -> [LayerTensorSpec] {
        LayerTensorSpec.standardBlock(c) + [
            .init(.attnQNorm, "attn_q_norm.weight", [c.headDim]), .init(.attnKNorm, "attn_k_norm.weight", [c.headDim]),
        ] + Self.postNorms(c)
    }

    public func layer(_ index: Int, _ s: some LayerStep) {
        let local = self.local[index]
        Self.block(s, headNorms: true, table: local ? 1 : 0, window: local ? slidingWindow : nil, scale: attentionScale, softcap: nil)
    }

    /// Gemma's block: x += norm(attention(norm(x))); x += norm(geglu(norm(x))), with QK norms
    /// (Gemma 3) or without (Gemma 2).
    static func block(_ s: some LayerStep, headNorms: Bool, table: Int, window: Int?, scale: Float, softcap: Float?) {
        s.norm(.residual, .attnNorm, into: .normed)
        s.project(.normed, [(.attnQ, .query), (.attnK, .key), (.attnV, .value)])
        if headNorms {
            s.headNorm(.query, .attnQNorm)
            s.headNorm(.key, .attnKNorm)
        }
        s.rope(.query, table: table)
        s.rope(.key, table: table)
        s.attend(window: window, scale: scale, softcap: softcap)
        s.project(.attention, [(.attnOutput, .output)])
        s.norm(.output, .postAttentionNorm, into: .output)
        s.addToResidual(.output)
        s.norm(.residual, .ffnNorm, into: .normed)
        s.feedForward(.normed, .geluTanh, into: .output)
        s.norm(.output, .postFFNNorm, into: .output)
        s.addToResidual(.output)
    }
}
