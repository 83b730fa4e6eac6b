/// The hyperparameters every architecture has, read from GGUF metadata (`ARCH.block_count` …);
/// an architecture's own are read by its ``ModelArchitecture``.
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
        architecture = Architecture(rawValue: archName)
        guard Architecture.allCases.contains(architecture) else { throw ModelError.unsupportedArchitecture(archName) }
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

    /// Throws for RoPE scaling, which no architecture here implements yet (its positions would be
    /// rotated wrongly, silently).
    func refuseRoPEScaling(_ gguf: GGUFFile) throws {
        let key = "\(architecture.rawValue).rope.scaling.type"
        if let type = try gguf.string(key), type != "none" {
            let factor = try gguf.double("\(architecture.rawValue).rope.scaling.factor") ?? 1
            if factor != 1 { throw ModelError.invalidMetadata(key: key, reason: "RoPE scaling '\(type)' (factor \(factor)) is not supported yet") }
        }
        if gguf.tensor(named: "rope_freqs.weight") != nil {
            throw ModelError.invalidMetadata(key: "rope_freqs.weight", reason: "per-dimension RoPE frequency factors (Llama 3.1 scaling) are not supported yet")
        }
    }
}
