import Foundation
import PlinthKernels

/// llama-quantize's named k-quant mixes (its file types): a base k-quant for most matrices and
/// more bits where its rules put them (attn_v, ffn_down and attn_output by layer). `Q4_K` and the
/// other base names alone mean what llama-quantize makes them mean (Q4_K_M, Q3_K_M, Q5_K_M).
public enum QuantizationMix: String, Sendable, CaseIterable {
    case q2_K = "Q2_K", q3_K_S = "Q3_K_S", q3_K_M = "Q3_K_M", q3_K_L = "Q3_K_L", q4_K_S = "Q4_K_S", q4_K_M = "Q4_K_M"
    case q5_K_S = "Q5_K_S", q5_K_M = "Q5_K_M", q6_K = "Q6_K"

    /// The mix a name means: a mix's own name, or a k-quant type's (Q3_K, Q4_K and Q5_K are
    /// their _M mixes, as in llama-quantize).
    public init?(name: String) {
        let upper = name.uppercased()
        if let m = QuantizationMix.allCases.first(where: { $0.rawValue.uppercased() == upper }) {
            self = m
            return
        }
        switch upper {
        case "Q3_K": self = .q3_K_M
        case "Q4_K": self = .q4_K_M
        case "Q5_K": self = .q5_K_M
        default: return nil
        }
    }

    /// The type of the matrices no rule raises.
    public var base: GGMLType {
        switch self {
        case .q2_K: .q2_K
        case .q3_K_S, .q3_K_M, .q3_K_L: .q3_K
        case .q4_K_S, .q4_K_M: .q4_K
        case .q5_K_S, .q5_K_M: .q5_K
        case .q6_K: .q6_K
        }
    }

    /// llama.cpp's `general.file_type`.
    var fileType: UInt32 {
        switch self {
        case .q2_K: 10
        case .q3_K_S: 11
        case .q3_K_M: 12
        case .q3_K_L: 13
        case .q4_K_S: 14
        case .q4_K_M: 15
        case .q5_K_S: 16
        case .q5_K_M: 17
        case .q6_K: 18
        }
    }

    /// The type of one matrix by llama-quantize's rules for a dense model: `layer` of `layers`,
    /// `kind` the matrix's role; nil where the base type stays. `groupedQueryRatio` is the
    /// model's query heads per kv head.
    func type(for kind: String, layer: Int, layers: Int, groupedQueryRatio: Int) -> GGMLType? {
        // Layers of the first and last eighth, and every third between.
        let moreBits = layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2
        switch kind {
        case "attn_v":
            switch self {
            case .q2_K: return groupedQueryRatio >= 4 ? .q4_K : .q3_K
            case .q3_K_M: return layer < 2 ? .q5_K : .q4_K
            case .q3_K_L: return .q5_K
            case .q4_K_M, .q5_K_M: return moreBits ? .q6_K : nil
            case .q4_K_S: return layer < 4 ? .q5_K : nil
            default: return nil
            }
        case "ffn_down":
            switch self {
            case .q2_K: return .q3_K
            case .q3_K_M: return layer < layers / 16 ? .q5_K : .q4_K
            case .q3_K_L: return .q5_K
            case .q4_K_M, .q5_K_M: return moreBits ? .q6_K : nil
            case .q4_K_S: return layer < layers / 8 ? .q5_K : nil
            default: return nil
            }
        case "attn_output":
            switch self {
            case .q2_K: return .q3_K
            case .q3_K_M: return .q4_K
            case .q3_K_L: return .q5_K
            default: return nil
            }
        default:
            return nil
        }
    }
}

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
    /// name. A matrix whose rows are not whole blocks of that type gets llama-quantize's
    /// fallback (Q2_K and Q3_K → Q4_0, Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, IQ4_XS → IQ4_NL; F16 otherwise), said
    /// in its note.
    /// Vectors keep their type (F32 in every model), unless the target is F32.
    ///
    /// Unless `pure`, llama-quantize's rules apply too: the output projection (the token
    /// embedding when the model ties them) gets Q6_K (Q8_0 where rows are not whole 256-blocks,
    /// and for a Q8_0 target); a `mix` (whose base then is the target) raises attn_v, ffn_down
    /// and attn_output by its rules; for the IQ4 types ``iq4Rule(_:kind:layer:layers:groupedQueryRatio:withImportance:)``
    /// raises attn_v and ffn_down; and for the legacy types with an importance matrix the
    /// `ffn_down` of the first eighth of the blocks gets Q4_1 for Q4_0 and Q5_1 for Q5_0.
    /// The steps are in the order llama-quantize writes tensors.
    public static func plan(_ file: GGUFFile, target: GGMLType, mix: QuantizationMix? = nil,
                            overrides: [(pattern: String, type: GGMLType)] = [],
                            pure: Bool = false, withImportance: Bool = false) throws -> [Step] {
        let target = mix?.base ?? target
        let expressions = try overrides.map { o in
            do { return (try NSRegularExpression(pattern: o.pattern), o.type) } catch { throw QuantizeError.badPattern(o.pattern) }
        }
        for type in [target] + overrides.map(\.type) where !canWrite(type) { throw QuantizeError.unsupportedType(type.name) }
        let layer = { (name: String) -> Int in
            guard name.hasPrefix("blk.") else { return -1 }
            return Int(name.dropFirst(4).prefix { $0.isNumber }) ?? -1
        }
        let layers = (file.tensors.map { layer($0.name) }.max() ?? -1) + 1
        let output = file.tensor(named: "output.weight") != nil ? "output.weight" : "token_embd.weight"
        let mixed = !pure && target.isQuantized
        let ratio = Self.groupedQueryRatio(file)
        var steps = file.tensors.map { t in
            let matrix = t.dimensions.count >= 2 && t.name.hasSuffix("weight")
            guard matrix else { return Step(tensor: t, type: target == .f32 ? .f32 : t.type) }
            let range = NSRange(t.name.startIndex..., in: t.name)
            // A type the user gave (`--keep`) is taken as given, as llama-quantize takes its
            // --tensor-type: the mix's rules apply only to the others.
            let given = expressions.first { $0.0.firstMatch(in: t.name, range: range) != nil }?.1
            var wanted = given ?? target
            var note: String? = nil
            if mixed && given == nil {
                if t.name == output {
                    if target != .q8_0 { wanted = .q6_K }
                } else if let mix, let kind = Self.kind(of: t.name),
                          let raised = mix.type(for: kind, layer: layer(t.name), layers: layers, groupedQueryRatio: ratio) {
                    wanted = raised
                } else if let raised = Self.iq4Rule(target, kind: Self.kind(of: t.name), layer: layer(t.name), layers: layers,
                                                    groupedQueryRatio: ratio, withImportance: withImportance) {
                    wanted = raised
                } else if withImportance, t.name.hasSuffix(".ffn_down.weight"), layer(t.name) < layers / 8 {
                    if target == .q4_0 { wanted = .q4_1 } else if target == .q5_0 { wanted = .q5_1 }
                }
            }
            if t.rowLength % wanted.blockElements != 0 {
                // As llama-quantize: the next type down whose blocks fit, F16 at the end.
                var fallback = Self.fallback(wanted)
                while t.rowLength % fallback.blockElements != 0 { fallback = Self.fallback(fallback) }
                let why = "rows of \(t.rowLength) are not whole \(wanted.name) blocks of \(wanted.blockElements): \(fallback.name)"
                // Q8_0 for the output projection is llama-quantize's choice, not worth a note.
                return Step(tensor: t, type: fallback, note: mixed && t.name == output && wanted == .q6_K ? nil : why)
            }
            if withImportance, wanted.isQuantized, info(wanted)?.can_weight ?? 0 == 0 {
                note = "no importance-weighted \(wanted.name) quantizer yet: rounded to nearest"
            }
            return Step(tensor: t, type: wanted, note: note)
        }
        // llama-quantize's order: tensors outside the blocks first, then block by block, by name.
        steps.sort { (layer($0.tensor.name), $0.tensor.name) < (layer($1.tensor.name), $1.tensor.name) }
        if let unreadable = steps.first(where: { $0.type != $0.tensor.type && !$0.tensor.type.isSupported }) {
            throw QuantizeError.unreadableType(tensor: unreadable.tensor.name, type: unreadable.tensor.type.name)
        }
        return steps
    }

    /// llama-quantize's rules for the IQ4 types: attn_v gets Q5_K where 4 or more query heads
    /// share a kv head, and without an importance matrix the ffn_down of the first eighth of the
    /// blocks gets Q5_K; nil where the target stays.
    static func iq4Rule(_ target: GGMLType, kind: String?, layer: Int, layers: Int, groupedQueryRatio: Int,
                        withImportance: Bool) -> GGMLType? {
        guard target == .iq4_NL || target == .iq4_XS else { return nil }
        switch kind {
        case "attn_v": return groupedQueryRatio >= 4 ? .q5_K : nil
        case "ffn_down": return !withImportance && layer < layers / 8 ? .q5_K : nil
        default: return nil
        }
    }

    /// A block matrix's role ("attn_v" for "blk.3.attn_v.weight"), or nil outside the blocks.
    static func kind(of name: String) -> String? {
        let parts = name.split(separator: ".")
        guard parts.count == 4, parts[0] == "blk", parts[3] == "weight" else { return nil }
        return String(parts[2])
    }

    /// Query heads per kv head, from the metadata (`ARCH.attention.head_count` / `_kv`); 1 when absent.
    static func groupedQueryRatio(_ file: GGUFFile) -> Int {
        guard let arch = try? file.string("general.architecture"),
              let heads = try? file.int("\(arch).attention.head_count"),
              let kv = try? file.int("\(arch).attention.head_count_kv"), kv > 0 else { return 1 }
        return heads / kv
    }

    /// What llama-quantize writes for a matrix whose rows are not whole blocks of `type`.
    static func fallback(_ type: GGMLType) -> GGMLType {
        switch type {
        case .q2_K, .q3_K: .q4_0
        case .q4_K: .q5_0
        case .q5_K: .q5_1
        case .q6_K: .q8_0
        case .iq4_XS: .iq4_NL
        default: .f16
        }
    }

    /// Whether the quantizer writes `type`.
    public static func canWrite(_ type: GGMLType) -> Bool { info(type)?.can_quantize ?? 0 != 0 }

    static func info(_ type: GGMLType) -> pk_type_info? {
        var info = pk_type_info()
        return pk_type_info_of(Int32(bitPattern: type.rawValue), &info) == 0 ? info : nil
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
        // A k-quant alone is its first mix (Q2_K, Q3_K_S, Q4_K_S, Q5_K_S, Q6_K).
        case .q2_K, .q3_K, .q4_K, .q5_K, .q6_K: QuantizationMix.allCases.first { $0.base == type }?.fileType
        case .iq4_NL: 25
        case .iq4_XS: 30
        case .bf16: 32
        default: nil
        }
    }

    /// Writes `file` to `url` with the types of `plan` (from ``plan(_:target:overrides:)``). With
    /// an importance matrix, each matrix it has an entry for is quantized to minimize the error
    /// its activations would see (the others round to nearest), and the file names it as
    /// llama-quantize does (`quantize.imatrix.*`).
    ///
    /// With `hessians` (calibration activations' X^T X per matrix), the matrices they cover are
    /// quantized by GPTQ instead (``gptqTypes``), which spreads each column's rounding error over
    /// the columns after it.
    public static func write(_ file: GGUFFile, plan: [Step], target: GGMLType, mix: QuantizationMix? = nil, to url: URL,
                             importance: ImportanceMatrix? = nil, importanceFile: String? = nil,
                             hessians: Hessians? = nil) throws {
        for step in plan {
            if let columns = importance?.entries[step.tensor.name]?.sums.count, columns != step.tensor.rowLength {
                throw ImportanceMatrixError.wrongWidth(matrix: step.tensor.name, expected: step.tensor.rowLength, found: columns)
            }
        }
        // As llama-quantize: the input's metadata, then the quantization version and file type
        // (moved to the end when the input had them).
        var metadata = file.keys.compactMap { key in file.metadata[key].map { (key: key, value: $0) } }
        metadata.removeAll { $0.key == "general.quantization_version" || $0.key == "general.file_type" }
        metadata.append((key: "general.quantization_version", value: .uint32(2)))
        if let ftype = mix?.fileType ?? fileType(target) { metadata.append((key: "general.file_type", value: .uint32(ftype))) }
        // Plinth's own formats, named so that a reader can say which format it lacks.
        metadata.removeAll { $0.key == plinthTypesKey }
        let plinthTypes = Set(plan.map(\.type).filter(\.isPlinthFormat)).map(\.name).sorted()
        if !plinthTypes.isEmpty { metadata.append((key: plinthTypesKey, value: .array(plinthTypes.map(GGUFValue.string)))) }
        if let importance {
            metadata.removeAll { $0.key.hasPrefix("quantize.imatrix.") }
            if let importanceFile { metadata.append((key: "quantize.imatrix.file", value: .string(importanceFile))) }
            if let dataset = importance.datasets.first { metadata.append((key: "quantize.imatrix.dataset", value: .string(dataset))) }
            metadata.append((key: "quantize.imatrix.entries_count", value: .uint32(UInt32(importance.entries.count))))
            metadata.append((key: "quantize.imatrix.chunks_count", value: .uint32(UInt32(importance.chunkCount))))
        }
        let tensors = plan.map { step in
            GGUFWriter.Tensor(name: step.tensor.name, dimensions: step.tensor.dimensions, type: step.type) { out in
                if let h = hessians?.sum(for: step.tensor.name), gptqTypes.contains(step.type), step.tensor.type.isSupported,
                   h.width == step.tensor.rowLength {
                    try gptq(file.data(of: step.tensor), from: step.tensor, to: step.type, hessian: h.pointer, into: out)
                } else {
                    try convert(file.data(of: step.tensor), from: step.tensor, to: step.type, into: out,
                                importance: importance?.importance(of: step.tensor.name))
                }
            }
        }
        try GGUFWriter(metadata: metadata, tensors: tensors).write(to: url)
    }

    /// The metadata key listing the Plinth formats a file's tensors use.
    public static let plinthTypesKey = "plinth.quantization.types"

    /// The types GPTQ writes: those whose row in the kernels' type table has a block grid.
    public static let gptqTypes = Set(GGMLType.allCases.filter { info($0)?.can_gptq ?? 0 != 0 })

    /// One matrix by GPTQ: dequantized whole, then quantized column block by column block.
    static func gptq(_ source: UnsafeRawPointer, from t: GGUFTensorInfo, to type: GGMLType, hessian: UnsafePointer<Float>,
                     into out: UnsafeMutableRawBufferPointer) throws {
        let (m, k) = (t.rowCount, t.rowLength)
        let w = UnsafeMutablePointer<Float>.allocate(capacity: m * k)
        defer { w.deallocate() }
        try t.type.dequantize(source, count: m * k, into: w)
        guard pk_gptq(Int32(bitPattern: type.rawValue), w, Int64(m), Int64(k), hessian, 0.01, out.baseAddress) == 0 else {
            throw QuantizeError.gptqFailed(tensor: t.name)
        }
    }

    /// One tensor, row by row: copied when the type stays, else dequantized and quantized.
    static func convert(_ source: UnsafeRawPointer, from t: GGUFTensorInfo, to type: GGMLType,
                        into out: UnsafeMutableRawBufferPointer, importance: [Float]? = nil) throws {
        // As llama-quantize, with or without importance: requantizing to the same type could
        // only lose.
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
                    if let importance {
                        _ = importance.withUnsafeBufferPointer { pk_quantize_weighted(target, f.baseAddress!, base + r * outRow, Int64(n), $0.baseAddress) }
                    } else {
                        _ = pk_quantize(target, f.baseAddress!, base + r * outRow, Int64(n))
                    }
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
    case gptqFailed(tensor: String)

    public var errorDescription: String? {
        switch self {
        case .unsupportedType(let t):
            "cannot quantize to \(t) (types written: \(GGMLType.allCases.filter(Quantizer.canWrite).map(\.name).joined(separator: ", ")))"
        case .badPattern(let p): "'\(p)' is not a regular expression"
        case .partialBlocks(let t, let type): "tensor '\(t)': its rows are not whole \(type) blocks"
        case .unreadableType(let t, let type): "tensor '\(t)' is \(type), which Plinth cannot read to convert"
        case .gptqFailed(let t): "GPTQ failed on '\(t)': its calibration Hessian stays singular even damped"
        }
    }
}
