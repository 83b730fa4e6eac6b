import Foundation
import PlinthKernels

/// Merging an adapter into a model: `W' = W + scale · B · A` for each matrix it changes,
/// computed in f32 from the dequantized rows and stored again, in a GGUF file llama.cpp loads.
///
/// A merged model runs at the base model's speed with no per-row adapter work, at the cost of a
/// file of its own; unmerged adapters (``InferenceContext/attach(_:)``) cost nothing to switch.
public enum LoRAMerge {
    /// How the changed matrices are stored.
    public enum Precision: String, Sendable, CaseIterable {
        /// Each changed matrix requantized into its own type: the smallest file, but rounding
        /// again to a coarse grid buries much of a small update (see ``automatic``).
        case base
        /// Q8_0 for changed matrices of quantized types.
        case q8_0 = "Q8_0"
        /// F16 for every changed matrix.
        case f16 = "F16"
        /// The measured choice: changed matrices of types below 8 bits become Q8_0 (which keeps
        /// the update's effect within the unmerged adapter's own error; requantizing to the
        /// 4-bit base type loses much of it), others keep their type.
        case automatic
    }

    /// The type a changed matrix of type `base` is stored in.
    public static func type(for base: GGMLType, precision: Precision) -> GGMLType {
        switch precision {
        case .base: return Quantizer.canWrite(base) ? base : .f16
        case .f16: return .f16
        case .q8_0: return base.isQuantized ? .q8_0 : base
        case .automatic:
            switch base {
            case .f32, .f16, .bf16, .q8_0: return Quantizer.canWrite(base) ? base : .f16
            default: return .q8_0
            }
        }
    }

    /// Metadata keys naming the merged adapter.
    public static let adapterNameKey = "plinth.adapter.name"
    public static let adapterFingerprintKey = "plinth.adapter.sha256"
    /// Written when the adapter was merged scaled (``LoRAAdapter/scaled(by:)``).
    public static let adapterScaleKey = "plinth.adapter.scale"

    /// Writes `model` with `adapter` merged to `url`: the same metadata (plus the adapter's name
    /// and fingerprint) and tensors, the changed matrices as `precision` says. For a model whose
    /// output projection is its token embedding, an adapter of the output or of the embedding
    /// adds a separate `output.weight` (the embedding merged with the output's pair, or as it was).
    public static func write(model: Transformer, adapter: LoRAAdapter, to url: URL, precision: Precision = .automatic,
                             threads: Int? = nil) throws {
        let file = model.file
        try adapter.checkShapes(in: model.config)
        guard let pool = pk_pool_create(Int32(threads ?? defaultThreadCount())) else { throw ModelError.outOfMemory("the thread pool") }
        defer { pk_pool_destroy(pool) }
        nonisolated(unsafe) let shared = pool

        var metadata = file.keys.compactMap { key in file.metadata[key].map { (key: key, value: $0) } }
        metadata.removeAll { [adapterNameKey, adapterFingerprintKey, adapterScaleKey].contains($0.key) }
        metadata.append((key: adapterNameKey, value: .string(adapter.name)))
        metadata.append((key: adapterFingerprintKey, value: .string(adapter.fingerprint)))
        if adapter.userScale != 1 { metadata.append((key: adapterScaleKey, value: .float32(adapter.userScale))) }

        func merged(_ info: GGUFTensorInfo, name: String, pair: LoRAPair) throws -> GGUFWriter.Tensor {
            guard info.type.isSupported else { throw QuantizeError.unreadableType(tensor: info.name, type: info.type.name) }
            var type = Self.type(for: info.type, precision: precision)
            if info.rowLength % type.blockElements != 0 { type = .f16 }
            return GGUFWriter.Tensor(name: name, dimensions: info.dimensions, type: type) { out in
                let rc = pair.a.withUnsafeBufferPointer { a in
                    pair.bt.withUnsafeBufferPointer { bt in
                        pk_lora_merge(shared, Int32(bitPattern: info.type.rawValue), file.data(of: info), Int32(bitPattern: type.rawValue),
                                      out.baseAddress, Int64(info.rowCount), Int64(info.rowLength), a.baseAddress, bt.baseAddress,
                                      Int64(pair.rank), pair.scale)
                    }
                }
                guard rc == 0 else { throw AdapterError.badTensor(tensor: name, why: "could not be merged into \(info.type.name) → \(type.name)") }
            }
        }

        func copied(_ info: GGUFTensorInfo, name: String) -> GGUFWriter.Tensor {
            GGUFWriter.Tensor(name: name, dimensions: info.dimensions, type: info.type) { out in
                out.copyMemory(from: UnsafeRawBufferPointer(start: file.data(of: info), count: info.byteCount))
            }
        }

        var tensors: [GGUFWriter.Tensor] = []
        for info in file.tensors {
            if let target = AdapterTarget(tensorName: info.name), let pair = adapter.pairs[target] {
                tensors.append(try merged(info, name: info.name, pair: pair))
            } else {
                tensors.append(copied(info, name: info.name))
            }
        }
        // A tied output projection is the embedding as it was: an adapter changes it only
        // through an output pair (unmerged, an embedding pair changes the lookup alone).
        if file.tensor(named: "output.weight") == nil, let tied = file.tensor(named: "token_embd.weight") {
            if let pair = adapter.pairs[.output] {
                tensors.append(try merged(tied, name: "output.weight", pair: pair))
            } else if adapter.pairs[.tokenEmbedding] != nil {
                tensors.append(copied(tied, name: "output.weight"))
            }
        }
        try GGUFWriter(metadata: metadata, tensors: tensors).write(to: url)
    }
}
