/// Transformer families Plinth runs.
public enum Architecture: String, Sendable, CaseIterable {
    /// Llama and its descendants (SmolLM2): RMSNorm, RoPE on adjacent pairs, GQA, SwiGLU.
    case llama
    /// Qwen2 / Qwen2.5: llama's block plus Q/K/V biases and NeoX-style RoPE.
    case qwen2

    /// Whether RoPE rotates (i, i + d/2) pairs rather than adjacent (2i, 2i+1) ones.
    var neoxRoPE: Bool { self == .qwen2 }
    var hasQKVBias: Bool { self == .qwen2 }
}

/// The hyperparameters of a model, read from GGUF metadata.
public struct ModelConfig: Sendable, Equatable {
    public var architecture: Architecture
    public var layerCount: Int
    public var embeddingLength: Int
    public var feedForwardLength: Int
    public var headCount: Int
    public var kvHeadCount: Int
    public var headDim: Int
    public var ropeDims: Int
    public var ropeFreqBase: Float
    public var rmsEpsilon: Float
    public var contextLength: Int
    public var vocabularySize: Int

    public init(gguf: GGUFFile) throws {
        guard let archName = try gguf.string("general.architecture") else { throw ModelError.missingMetadata("general.architecture") }
        guard let arch = Architecture(rawValue: archName) else { throw ModelError.unsupportedArchitecture(archName) }
        architecture = arch
        func req(_ key: String) throws -> Int {
            guard let v = try gguf.int("\(archName).\(key)") else { throw ModelError.missingMetadata("\(archName).\(key)") }
            guard v > 0, v < 1 << 24 else { throw ModelError.invalidMetadata(key: "\(archName).\(key)", reason: "value \(v) out of range") }
            return v
        }
        layerCount = try req("block_count")
        embeddingLength = try req("embedding_length")
        feedForwardLength = try req("feed_forward_length")
        headCount = try req("attention.head_count")
        kvHeadCount = (try? req("attention.head_count_kv")) ?? headCount
        contextLength = try req("context_length")
        guard embeddingLength % headCount == 0 else {
            throw ModelError.invalidMetadata(key: "\(archName).attention.head_count", reason: "\(headCount) does not divide embedding length \(embeddingLength)")
        }
        headDim = (try gguf.int("\(archName).attention.key_length")) ?? embeddingLength / headCount
        ropeDims = (try gguf.int("\(archName).rope.dimension_count")) ?? headDim
        guard headCount % kvHeadCount == 0 else {
            throw ModelError.invalidMetadata(key: "\(archName).attention.head_count_kv", reason: "\(kvHeadCount) does not divide head count \(headCount)")
        }
        guard headDim <= 256, headDim % 2 == 0, ropeDims <= headDim, ropeDims % 2 == 0 else {
            throw ModelError.invalidMetadata(key: "\(archName).rope.dimension_count", reason: "head size \(headDim) / rope dims \(ropeDims) unsupported")
        }
        ropeFreqBase = Float((try gguf.double("\(archName).rope.freq_base")) ?? 10000)
        guard let eps = try gguf.double("\(archName).attention.layer_norm_rms_epsilon") else {
            throw ModelError.missingMetadata("\(archName).attention.layer_norm_rms_epsilon")
        }
        rmsEpsilon = Float(eps)
        if let v = try gguf.int("\(archName).vocab_size") {
            vocabularySize = v
        } else if let tokens = try gguf.array("tokenizer.ggml.tokens") {
            vocabularySize = tokens.count
        } else {
            throw ModelError.missingMetadata("\(archName).vocab_size")
        }
    }
}
