import Foundation
import PlinthKernels

/// Rewrites a GGUF model with its matrices in another type, keeping the metadata and tensor
/// order llama.cpp expects: what `llama-quantize --allow-requantize` does without an importance
/// matrix (round to nearest, the same bytes for the same floats).
public enum Quantizer {
    /// One tensor's fate.
    public struct Step: Sendable, Equatable {
        public var tensor: GGUFTensorInfo
        public var type: GGMLType
        /// Why the tensor did not get the asked-for type, when it did not.
        public var note: String?
    }

    /// Which type each tensor gets. Matrices (tensors named `*weight` with two or more dimensions)
    /// get `target`, or the first override whose pattern (a regular expression) matches their
    /// name; a matrix whose rows are not whole blocks of that type gets F16, said in its note.
    /// Vectors keep their type (F32 in every model), unless the target is F32. The steps are in
    /// the order llama-quantize writes tensors.
    public static func plan(_ file: GGUFFile, target: GGMLType, overrides: [(pattern: String, type: GGMLType)] = []) throws -> [Step] {
        let expressions = try overrides.map { o in
            do { return (try NSRegularExpression(pattern: o.pattern), o.type) } catch { throw QuantizeError.badPattern(o.pattern) }
        }
        for type in [target] + overrides.map(\.type) where !canWrite(type) { throw QuantizeError.unsupportedType(type.name) }
        var steps = file.tensors.map { t in
            let matrix = t.dimensions.count >= 2 && t.name.hasSuffix("weight")
            guard matrix else { return Step(tensor: t, type: target == .f32 ? .f32 : t.type) }
            let range = NSRange(t.name.startIndex..., in: t.name)
            let wanted = expressions.first { $0.0.firstMatch(in: t.name, range: range) != nil }?.1 ?? target
            if t.rowLength % wanted.blockElements != 0 {
                return Step(tensor: t, type: .f16, note: "rows of \(t.rowLength) are not whole \(wanted.name) blocks of \(wanted.blockElements): F16")
            }
            return Step(tensor: t, type: wanted)
        }
        // llama-quantize's order: tensors outside the blocks first, then block by block, by name.
        let layer = { (name: String) -> Int in
            guard name.hasPrefix("blk.") else { return -1 }
            return Int(name.dropFirst(4).prefix { $0.isNumber }) ?? -1
        }
        steps.sort { (layer($0.tensor.name), $0.tensor.name) < (layer($1.tensor.name), $1.tensor.name) }
        if let unreadable = steps.first(where: { $0.type != $0.tensor.type && !$0.tensor.type.isSupported }) {
            throw QuantizeError.unreadableType(tensor: unreadable.tensor.name, type: unreadable.tensor.type.name)
        }
        return steps
    }

    /// Whether the quantizer writes `type`.
    public static func canWrite(_ type: GGMLType) -> Bool {
        var info = pk_type_info()
        return pk_type_info_of(Int32(bitPattern: type.rawValue), &info) == 0 && info.can_quantize != 0
    }

    /// llama.cpp's `general.file_type` for a model mostly of `type`.
    static func fileType(_ type: GGMLType) -> UInt32? {
        switch type {
        case .f32: 0
        case .f16: 1
        case .q4_0: 2
        case .q4_1: 3
        case .q8_0: 7
        case .q5_0: 8
        case .q5_1: 9
        case .bf16: 32
        default: nil
        }
    }

    /// Writes `file` to `url` with the types of `plan` (from ``plan(_:target:overrides:)``).
    public static func write(_ file: GGUFFile, plan: [Step], target: GGMLType, to url: URL) throws {
        // As llama-quantize: the input's metadata, then the quantization version and file type
        // (moved to the end when the input had them).
        var metadata = file.keys.compactMap { key in file.metadata[key].map { (key: key, value: $0) } }
        metadata.removeAll { $0.key == "general.quantization_version" || $0.key == "general.file_type" }
        metadata.append((key: "general.quantization_version", value: .uint32(2)))
        if let ftype = fileType(target) { metadata.append((key: "general.file_type", value: .uint32(ftype))) }
        let tensors = plan.map { step in
            GGUFWriter.Tensor(name: step.tensor.name, dimensions: step.tensor.dimensions, type: step.type) { out in
                try convert(file.data(of: step.tensor), from: step.tensor, to: step.type, into: out)
            }
        }
        try GGUFWriter(metadata: metadata, tensors: tensors).write(to: url)
    }

    /// One tensor, row by row: copied when the type stays, else dequantized and quantized.
    static func convert(_ source: UnsafeRawPointer, from t: GGUFTensorInfo, to type: GGMLType,
                        into out: UnsafeMutableRawBufferPointer) throws {
        if t.type == type {
            out.copyMemory(from: UnsafeRawBufferPointer(start: source, count: t.byteCount))
            return
        }
        let n = t.rowLength
        guard let inRow = t.type.rowBytes(n), let outRow = type.rowBytes(n) else {
            throw QuantizeError.partialBlocks(tensor: t.name, type: type.name)
        }
        let rows = t.rowCount
        let threads = max(1, min(ProcessInfo.processInfo.activeProcessorCount, rows / 64))
        let target = Int32(bitPattern: type.rawValue)
        // Each thread writes its own rows.
        nonisolated(unsafe) let base = out.baseAddress!, source = source
        DispatchQueue.concurrentPerform(iterations: threads) { part in
            var floats = [Float](repeating: 0, count: n)
            floats.withUnsafeMutableBufferPointer { f in
                for r in (rows * part / threads)..<(rows * (part + 1) / threads) {
                    try? t.type.dequantize(source + r * inRow, count: n, into: f.baseAddress!)
                    _ = pk_quantize(target, f.baseAddress!, base + r * outRow, Int64(n))
                }
            }
        }
    }
}

/// Why a model could not be quantized.
public enum QuantizeError: Error, LocalizedError, Equatable, Sendable {
    case unsupportedType(String)
    case badPattern(String)
    case partialBlocks(tensor: String, type: String)
    case unreadableType(tensor: String, type: String)

    public var errorDescription: String? {
        switch self {
        case .unsupportedType(let t):
            "cannot quantize to \(t) (types written: \(GGMLType.allCases.filter(Quantizer.canWrite).map(\.name).joined(separator: ", ")))"
        case .badPattern(let p): "'\(p)' is not a regular expression"
        case .partialBlocks(let t, let type): "tensor '\(t)': its rows are not whole \(type) blocks"
        case .unreadableType(let t, let type): "tensor '\(t)' is \(type), which Plinth cannot read to convert"
        }
    }
}
