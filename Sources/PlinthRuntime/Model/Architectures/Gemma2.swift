/// Gemma 2: Gemma 3's block without QK norms, one RoPE for every layer (the file's base and
/// linear scaling; `rope.freq_base_swa` for the local layers where a file gives it); attention
/// scores soft-capped (`attn_logit_softcapping`) and the final logits too
/// (`final_logit_softcapping`), 50 and 30 where a file does not say, as llama.cpp reads them;
/// every other layer from the first attends to a sliding window (4096 where not said).
public struct Gemma2: ModelArchitecture {
    public static let architecture = Architecture(rawValue: "gemma2")
    /// [global, local]
    public let ropes: [RoPE]
    public static let neoxRoPE = true
    public let embeddingScale: Float?
    public let logitSoftcap: Float?
    let attentionSoftcap: Float?
    let slidingWindow: Int
    let local: [Bool]
    let attentionScale: Float

    public init(gguf: GGUFFile, config c: ModelConfig) throws {
        let a = c.architecture.rawValue
        let (scale, _) = try c.ropeScaling(gguf)
        let localBase = try gguf.double("\(a).rope.freq_base_swa").map(Float.init) ?? c.ropeFreqBase
        ropes = [RoPE(base: c.ropeFreqBase, scale: scale), RoPE(base: localBase, scale: scale)]
        slidingWindow = try Gemma3.checkedWindow(try gguf.int("\(a).attention.sliding_window") ?? 4096, c)
        local = try Gemma3.localLayers(gguf, c, period: 2)
        func cap(_ key: String, _ fallback: Double) throws -> Float? {
            let v = try gguf.double("\(a).\(key)") ?? fallback
            guard v.isFinite, v >= 0 else { throw ModelError.invalidMetadata(key: "\(a).\(key)", reason: "\(v) is not a soft cap") }
            return v > 0 ? Float(v) : nil
        }
        attentionSoftcap = try cap("attn_logit_softcapping", 50)
        logitSoftcap = try cap("final_logit_softcapping", 30)
        embeddingScale = Float(c.embeddingLength).squareRoot()
        // Queries are scaled by 1/√(query_pre_attn_scalar): the head size, except for the 27B
        // model (46 layers), whose scalar is the embedding width per head.
        let scalar = c.layerCount == 46 ? c.embeddingLength / c.headCount : c.headDim
        attentionScale = 1 / Float(scalar).squareRoot()
    }

    public func tensors(layer index: Int, config c: ModelConfig) -> [LayerTensorSpec] {
        LayerTensorSpec.standardBlock(c) + Gemma3.postNorms(c)
    }

    public func layer(_ index: Int, _ s: some LayerStep) {
        let local = self.local[index]
        Gemma3.block(s, headNorms: false, table: local ? 1 : 0, window: local ? slidingWindow : nil, scale: attentionScale,
                     softcap: attentionSoftcap)
    }
}
