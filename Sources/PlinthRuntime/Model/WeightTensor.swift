/// A weight matrix read in place from the memory-mapped file: `rowCount` rows of `rowLength`.
///
/// The pointer stays valid while the owning ``GGUFFile`` lives; ``ModelWeights`` holds it.
public struct WeightTensor: @unchecked Sendable {
    public let name: String
    public let type: GGMLType
    public let rowLength: Int
    public let rowCount: Int
    public let data: UnsafeRawPointer

    public var rowBytes: Int { rowLength / type.blockElements * type.blockBytes }

    public func row(_ i: Int) -> UnsafeRawPointer { data + i * rowBytes }
}

/// All the tensors of one transformer layer.
public struct LayerWeights: Sendable {
    public let attnNorm: WeightTensor
    public let wq: WeightTensor, wk: WeightTensor, wv: WeightTensor, wo: WeightTensor
    public let bq: WeightTensor?, bk: WeightTensor?, bv: WeightTensor?
    public let ffnNorm: WeightTensor
    public let wGate: WeightTensor, wUp: WeightTensor, wDown: WeightTensor
}

/// The weights of a model, resolved by name and checked for shape and type.
public struct ModelWeights: Sendable {
    public let tokenEmbedding: WeightTensor
    public let outputNorm: WeightTensor
    /// The output projection; the token embedding when the model ties them.
    public let output: WeightTensor
    public let layers: [LayerWeights]
    /// Keeps the mapping alive for as long as the weights are in use.
    public let file: GGUFFile

    public init(file: GGUFFile, config c: ModelConfig) throws {
        self.file = file
        func t(_ name: String, _ shape: [Int], matrix: Bool = true) throws -> WeightTensor {
            guard let info = file.tensor(named: name) else { throw ModelError.missingTensor(name) }
            guard info.dimensions == shape else { throw ModelError.tensorShape(tensor: name, expected: shape, found: info.dimensions) }
            guard info.type.isSupported else { throw ModelError.unsupportedTensorType(tensor: name, type: info.type.name) }
            if !matrix && info.type != .f32 { throw ModelError.unsupportedTensorType(tensor: name, type: info.type.name) }
            return WeightTensor(name: name, type: info.type, rowLength: shape[0], rowCount: shape.count > 1 ? shape[1] : 1,
                                data: file.data(of: info))
        }
        let e = c.embeddingLength, qDim = c.headCount * c.headDim, kvDim = c.kvHeadCount * c.headDim
        tokenEmbedding = try t("token_embd.weight", [e, c.vocabularySize])
        outputNorm = try t("output_norm.weight", [e], matrix: false)
        output = file.tensor(named: "output.weight") != nil ? try t("output.weight", [e, c.vocabularySize]) : tokenEmbedding
        var layers: [LayerWeights] = []
        for i in 0..<c.layerCount {
            let p = "blk.\(i)."
            let bias = c.architecture.hasQKVBias
            layers.append(LayerWeights(
                attnNorm: try t(p + "attn_norm.weight", [e], matrix: false),
                wq: try t(p + "attn_q.weight", [e, qDim]),
                wk: try t(p + "attn_k.weight", [e, kvDim]),
                wv: try t(p + "attn_v.weight", [e, kvDim]),
                wo: try t(p + "attn_output.weight", [qDim, e]),
                bq: bias ? try t(p + "attn_q.bias", [qDim], matrix: false) : nil,
                bk: bias ? try t(p + "attn_k.bias", [kvDim], matrix: false) : nil,
                bv: bias ? try t(p + "attn_v.bias", [kvDim], matrix: false) : nil,
                ffnNorm: try t(p + "ffn_norm.weight", [e], matrix: false),
                wGate: try t(p + "ffn_gate.weight", [e, c.feedForwardLength]),
                wUp: try t(p + "ffn_up.weight", [e, c.feedForwardLength]),
                wDown: try t(p + "ffn_down.weight", [c.feedForwardLength, e])))
        }
        self.layers = layers
    }
}
