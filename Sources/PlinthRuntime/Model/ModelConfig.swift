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
        guard headDim > 0, headDim <= 256, headDim % 2 == 0, ropeDims > 0, ropeDims <= headDim, ropeDims % 2 == 0 else {
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

    /// The file's RoPE scaling as llama.cpp applies it without YaRN: linear scaling's 1/factor (1
    /// when there is none) and Llama 3.1's per-pair frequency factors (`rope_freqs.weight`).
    /// Throws for the kinds not implemented here (YaRN, LongRoPE), which would rotate wrongly.
    func ropeScaling(_ gguf: GGUFFile) throws -> (scale: Float, factors: [Float]?) {
        let a = architecture.rawValue
        let type = try gguf.string("\(a).rope.scaling.type") ?? "linear"
        let factor = try gguf.double("\(a).rope.scaling.factor") ?? gguf.double("\(a).rope.scale_linear") ?? 0
        guard factor >= 0, factor.isFinite else {
            throw ModelError.invalidMetadata(key: "\(a).rope.scaling.factor", reason: "\(factor) is not a scaling factor")
        }
        var scale: Float = 1
        if type != "none" && factor != 0 && factor != 1 {
            guard type == "linear" else {
                throw ModelError.invalidMetadata(key: "\(a).rope.scaling.type", reason: "RoPE scaling '\(type)' is not supported yet (linear is)")
            }
            scale = Float(1 / factor)
        }
        guard let info = gguf.tensor(named: "rope_freqs.weight") else { return (scale, nil) }
        guard info.type == .f32 else { throw ModelError.unsupportedTensorType(tensor: "rope_freqs.weight", type: info.type.name) }
        guard info.dimensions == [ropeDims / 2] else {
            throw ModelError.tensorShape(tensor: "rope_freqs.weight", expected: [ropeDims / 2], found: info.dimensions)
        }
        let p = gguf.data(of: info).assumingMemoryBound(to: Float.self)
        let factors = Array(UnsafeBufferPointer(start: p, count: ropeDims / 2))
        guard factors.allSatisfy({ $0.isFinite && $0 > 0 }) else {
            throw ModelError.invalidMetadata(key: "rope_freqs.weight", reason: "frequency factors must be positive")
        }
        return (scale, factors)
    }
}
