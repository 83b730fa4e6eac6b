/// A weight matrix read in place from the memory-mapped file: `rowCount` rows of `rowLength`.
///
/// The pointer stays valid while the owning ``GGUFFile`` lives; ``ModelWeights`` holds it.
public struct WeightTensor: @unchecked Sendable {
    public let name: String
    public let type: GGMLType
    public let rowLength: Int
    public let rowCount: Int
    public let data: UnsafeRawPointer
    /// The same weights in the kernels' packed layout (`pk_pack`), when the model has them.
    public internal(set) var packed: UnsafeRawPointer? = nil

    public var rowBytes: Int { rowLength / type.blockElements * type.blockBytes }

    public func row(_ i: Int) -> UnsafeRawPointer { data + i * rowBytes }
}

/// The tensors of one transformer layer, by role: those its architecture declared and the file has.
public struct LayerWeights: Sendable {
    private var tensors: [WeightTensor?]

    init(_ tensors: [LayerTensor: WeightTensor]) {
        self.tensors = LayerTensor.allCases.map { tensors[$0] }
    }

    public subscript(_ role: LayerTensor) -> WeightTensor? { tensors[role.rawValue] }

    // Every architecture declares these (``LayerTensorSpec/standardBlock(_:)``).
    public var attnNorm: WeightTensor { self[.attnNorm]! }
    public var wq: WeightTensor { self[.attnQ]! }
    public var wk: WeightTensor { self[.attnK]! }
    public var wv: WeightTensor { self[.attnV]! }
    public var wo: WeightTensor { self[.attnOutput]! }
    public var ffnNorm: WeightTensor { self[.ffnNorm]! }
    public var wGate: WeightTensor { self[.ffnGate]! }
    public var wUp: WeightTensor { self[.ffnUp]! }
    public var wDown: WeightTensor { self[.ffnDown]! }
    public var bq: WeightTensor? { self[.attnQBias] }
    public var bk: WeightTensor? { self[.attnKBias] }
    public var bv: WeightTensor? { self[.attnVBias] }

    /// The matrices the kernels multiply.
    var matrices: [WeightTensor] { LayerTensor.allCases.filter(\.isMatrix).compactMap { self[$0] } }

    /// The same layer with `change` applied to each matrix.
    func mapMatrices(_ change: (WeightTensor) -> WeightTensor) -> LayerWeights {
        var l = self
        for r in LayerTensor.allCases where r.isMatrix { l.tensors[r.rawValue] = l.tensors[r.rawValue].map(change) }
        return l
    }
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
    /// Whether the kernels read packed copies of the matrices, and from where.
    public let packing: WeightPacking
    /// Keeps the packed copies mapped.
    public let packedFile: MappedFile?
    /// Owns the norm weights and biases.
    let vectors: VectorCopies

    public init(file: GGUFFile, config c: ModelConfig, architecture: any ModelArchitecture,
                packing options: WeightPackingOptions = .default) throws {
        self.file = file
        let vectors = VectorCopies()
        self.vectors = vectors
        func t(_ name: String, _ shape: [Int], matrix: Bool = true) throws -> WeightTensor {
            guard let info = file.tensor(named: name) else { throw ModelError.missingTensor(name) }
            guard info.dimensions == shape else { throw ModelError.tensorShape(tensor: name, expected: shape, found: info.dimensions) }
            guard info.type.isSupported else { throw ModelError.unsupportedTensorType(tensor: name, type: info.type.name) }
            if !matrix && info.type != .f32 { throw ModelError.unsupportedTensorType(tensor: name, type: info.type.name) }
            let data = file.data(of: info)
            return WeightTensor(name: name, type: info.type, rowLength: shape[0], rowCount: shape.count > 1 ? shape[1] : 1,
                                data: matrix ? data : vectors.copy(data, bytes: shape[0] * MemoryLayout<Float>.stride))
        }
        let e = c.embeddingLength
        let tokenEmbedding = try t("token_embd.weight", [e, c.vocabularySize])
        outputNorm = try t("output_norm.weight", [e], matrix: false)
        let output = file.tensor(named: "output.weight") != nil ? try t("output.weight", [e, c.vocabularySize]) : tokenEmbedding
        var layers: [LayerWeights] = []
        for i in 0..<c.layerCount {
            var tensors: [LayerTensor: WeightTensor] = [:]
            for spec in architecture.tensors(layer: i, config: c) {
                let name = "blk.\(i).\(spec.name)"
                if spec.optional && file.tensor(named: name) == nil { continue }
                tensors[spec.role] = try t(name, spec.shape, matrix: spec.role.isMatrix)
            }
            layers.append(LayerWeights(tensors))
        }
        // The matrices the kernels multiply, packed (see WeightPacking). A tied embedding has the
        // output's bytes, so its token rows are read from the output's packed copy.
        let packed = WeightPacker.pack([output] + layers.flatMap(\.matrices), source: file.mapping, options: options)
        (packing, packedFile) = (packed.packing, packed.file)
        self.tokenEmbedding = packed.applied(to: tokenEmbedding)
        self.output = packed.applied(to: output)
        layers = layers.map { $0.mapMatrices(packed.applied) }
        if packedFile != nil {
            // Loading read the vectors (and packing, the matrices) from the file; from here on
            // only rows past a matrix's last whole tile and untied embedding rows are read there.
            file.mapping.release(offset: file.dataOffset, length: file.mapping.count - file.dataOffset)
        }
        self.layers = layers
    }
}

/// Norm weights and biases copied out of the mapping. They are read at every step, and each
/// read would otherwise keep the file's pages around it resident (the page cache maps whole
/// large folios), which for a model whose matrices come from packed copies is most of the file.
final class VectorCopies: @unchecked Sendable {
    private var blocks: [UnsafeMutableRawPointer] = []

    func copy(_ source: UnsafeRawPointer, bytes: Int) -> UnsafeRawPointer {
        let p = UnsafeMutableRawPointer.allocate(byteCount: max(bytes, 1), alignment: 64)
        p.copyMemory(from: source, byteCount: bytes)
        blocks.append(p)
        return UnsafeRawPointer(p)
    }

    deinit { blocks.forEach { $0.deallocate() } }
}
