import Foundation
import PlinthJSON
import PlinthKernels

/// A matrix of a llama or qwen2 model that an adapter can change.
public enum AdapterTarget: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The matrices of one transformer block, by their GGUF names.
    public enum Matrix: String, Sendable, CaseIterable, Comparable {
        case attnQ = "attn_q", attnK = "attn_k", attnV = "attn_v", attnOutput = "attn_output"
        case ffnGate = "ffn_gate", ffnUp = "ffn_up", ffnDown = "ffn_down"

        /// The matrix's place in ``allCases``.
        public var index: Int { Self.allCases.firstIndex(of: self)! }

        public static func < (a: Matrix, b: Matrix) -> Bool { a.index < b.index }
    }

    case tokenEmbedding
    case layer(Int, Matrix)
    case output

    /// The tensor's name in a GGUF model.
    public var tensorName: String {
        switch self {
        case .tokenEmbedding: "token_embd.weight"
        case .layer(let i, let m): "blk.\(i).\(m.rawValue).weight"
        case .output: "output.weight"
        }
    }

    public var description: String { tensorName }

    /// The target a GGUF tensor name means, if any.
    init?(tensorName name: String) {
        switch name {
        case "token_embd.weight": self = .tokenEmbedding
        case "output.weight": self = .output
        default:
            let parts = name.split(separator: ".")
            // The layer as GGUF writes it: decimal digits, no sign, no leading zero.
            guard parts.count == 4, parts[0] == "blk", parts[3] == "weight", let i = Int(parts[1]), i >= 0, String(i) == parts[1],
                  let m = Matrix(rawValue: String(parts[2])) else { return nil }
            self = .layer(i, m)
        }
    }

    /// Rows (outputs) and row length (inputs) of the target's matrix in `config`'s model.
    func shape(in c: ModelConfig) -> (rows: Int, columns: Int) {
        let q = c.headCount * c.headDim, kv = c.kvHeadCount * c.headDim, e = c.embeddingLength
        switch self {
        case .tokenEmbedding, .output: return (c.vocabularySize, e)
        case .layer(_, let m):
            switch m {
            case .attnQ: return (q, e)
            case .attnK, .attnV: return (kv, e)
            case .attnOutput: return (e, q)
            case .ffnGate, .ffnUp: return (c.feedForwardLength, e)
            case .ffnDown: return (e, c.feedForwardLength)
            }
        }
    }

    private var order: (Int, Int, Int) {
        switch self {
        case .tokenEmbedding: (0, 0, 0)
        case .layer(let i, let m): (1, i, Matrix.allCases.firstIndex(of: m)!)
        case .output: (2, 0, 0)
        }
    }

    public static func < (a: AdapterTarget, b: AdapterTarget) -> Bool { a.order < b.order }
}

/// One low-rank update of one matrix: `ΔW = scale · B · A`, with `W` the base matrix as GGUF
/// stores it (`rows` rows of `columns` weights; for a linear layer, rows are outputs).
public struct LoRAPair: Sendable {
    public let rank: Int
    public let rows: Int
    public let columns: Int
    public let scale: Float
    /// A, `rank` × `columns`, row-major.
    public let a: [Float]
    /// B transposed, `rank` × `rows`, row-major: the layout the kernels read.
    public let bt: [Float]

    /// Row `row` of `ΔW` added to `out` (`columns` floats).
    public func addDelta(row: Int, to out: UnsafeMutablePointer<Float>) {
        a.withUnsafeBufferPointer { a in
            for r in 0..<rank {
                let s = scale * bt[r * rows + row]
                let ar = a.baseAddress! + r * columns
                for j in 0..<columns { out[j] += s * ar[j] }
            }
        }
    }
}

/// A LoRA adapter read from a PEFT folder (`adapter_config.json` and
/// `adapter_model.safetensors`) or a llama.cpp GGUF LoRA file, checked against the model it
/// adapts and laid out in that model's terms (GGUF tensor names and row order).
///
/// Load one with ``init(contentsOf:for:)``, then run it unmerged (an ``InferenceContext``
/// applies it to the rows of the sequences that ask for it) or merged into the weights
/// (``LoRAMerge``).
public final class LoRAAdapter: Sendable {
    public enum Format: String, Sendable { case peft, gguf }

    /// The adapter's name: its folder's or file's name without extension.
    public let name: String
    public let url: URL
    public let format: Format
    /// The update of each matrix the adapter changes.
    public let pairs: [AdapterTarget: LoRAPair]
    /// The base model the adapter names, when it names one.
    public let baseModelName: String?
    /// Set when that name is plainly not the model's (neither name's letters and digits hold
    /// the other's): the adapter runs, as its shapes fit (llama.cpp and vLLM check shapes
    /// only: a sibling's adapter is a choice, and names vary), and this says so.
    public let baseModelNote: String?
    /// SHA-256 of the adapter's bytes (hex): what caches made from it are keyed by.
    public let fingerprint: String
    /// The factor on every pair's own scale (`alpha / r`) that ``scaled(by:)`` set: 1 as read.
    public let userScale: Float

    /// The largest rank read.
    public static let maximumRank = Int(PK_LORA_MAX_RANK)

    /// Reads the adapter at `url` (a PEFT folder, its `adapter_model.safetensors`, or a GGUF
    /// LoRA file) for `model`.
    ///
    /// - Throws: ``AdapterError`` naming the file, tensor or setting that is wrong: a malformed
    ///   file, a target the model lacks, a shape that differs from the model's, an adapter made
    ///   for another architecture, or a PEFT feature Plinth does not apply. (One naming another
    ///   base model whose shapes fit runs: see ``baseModelNote``.)
    public init(contentsOf url: URL, for model: Transformer) throws(AdapterError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { throw .notFound(url.path) }
        let loaded: Loaded
        if isDirectory.boolValue {
            loaded = try Self.loadPEFT(folder: url, config: model.config)
        } else if url.pathExtension.lowercased() == "safetensors" {
            loaded = try Self.loadPEFT(folder: url.deletingLastPathComponent(), config: model.config, weights: url)
        } else {
            loaded = try Self.loadGGUF(url, config: model.config)
        }
        name = Self.name(of: url)
        self.url = url
        format = loaded.format
        baseModelName = loaded.baseModelName
        fingerprint = loaded.fingerprint
        pairs = loaded.pairs
        userScale = 1
        baseModelNote = Self.identityNote(loaded.baseModelName, model: model.file)
        try checkShapes(in: model.config)
    }

    private init(scaling other: LoRAAdapter, by factor: Float) {
        name = other.name
        url = other.url
        format = other.format
        baseModelName = other.baseModelName
        baseModelNote = other.baseModelNote
        fingerprint = other.fingerprint
        userScale = other.userScale * factor
        pairs = other.pairs.mapValues { p in
            LoRAPair(rank: p.rank, rows: p.rows, columns: p.columns, scale: p.scale * factor, a: p.a, bt: p.bt)
        }
    }

    /// The adapter with its update multiplied by `factor` (llama.cpp's `--lora-scaled`): 0 is
    /// the base model, 1 the adapter as trained, 0.5 half its effect. A new adapter (attached
    /// and cached apart); the same one for 1.
    public func scaled(by factor: Float) -> LoRAAdapter {
        factor == 1 ? self : LoRAAdapter(scaling: self, by: factor)
    }

    /// Reads the adapter `nameOrPath` names (a path, or a name in ``AdapterStore/default``) for `model`.
    public convenience init(named nameOrPath: String, for model: Transformer) throws(AdapterError) {
        try self.init(contentsOf: AdapterStore.default.resolve(nameOrPath), for: model)
    }

    /// Fails unless every matrix the adapter changes exists in `config`'s model with the pair's
    /// shape: checked on reading, and again wherever an adapter meets a model (attaching,
    /// merging), since it may have been read for another.
    func checkShapes(in config: ModelConfig) throws(AdapterError) {
        for (target, pair) in pairs {
            if case .layer(let i, _) = target, i < 0 || i >= config.layerCount {
                throw .unknownTarget(tensor: target.tensorName, why: "the model has \(config.layerCount) layers")
            }
            let shape = target.shape(in: config)
            guard pair.rows == shape.rows, pair.columns == shape.columns else {
                throw .shapeMismatch(tensor: target.tensorName, adapter: [pair.rows, pair.columns], model: [shape.rows, shape.columns])
            }
        }
    }

    /// The name people know the adapter at `url` by: a PEFT folder's name (a `peft/` folder is
    /// named for the folder holding it, and `adapter_model.safetensors` for its folder), or a
    /// GGUF file's name without `.gguf`.
    public static func name(of url: URL) -> String {
        var u = url.standardizedFileURL
        if u.pathExtension.lowercased() == "safetensors" { u = u.deletingLastPathComponent() }
        if u.lastPathComponent == "peft" { u = u.deletingLastPathComponent() }
        return u.pathExtension.lowercased() == "gguf" ? u.deletingPathExtension().lastPathComponent : u.lastPathComponent
    }

    struct Loaded {
        var format: Format
        var pairs: [AdapterTarget: LoRAPair]
        var baseModelName: String?
        var fingerprint: String
    }

    /// One side of a pair before the two are joined: a row-major matrix.
    struct Half {
        var values: [Float]
        var rows: Int, columns: Int
        var source: String
    }

    /// The A and B halves read so far, by target.
    struct HalfTable {
        private var entries: [AdapterTarget: (a: Half?, b: Half?)] = [:]

        var isEmpty: Bool { entries.isEmpty }

        mutating func add(_ half: Half, isA: Bool, to target: AdapterTarget) throws(AdapterError) {
            var e = entries[target] ?? (nil, nil)
            if (isA ? e.a : e.b) != nil {
                throw .badTensor(tensor: half.source, why: "a second \(isA ? "A" : "B") half for \(target.tensorName)")
            }
            if isA { e.a = half } else { e.b = half }
            entries[target] = e
        }

        /// Each target's two halves; a target with only one is an error naming it.
        func complete() throws(AdapterError) -> [(target: AdapterTarget, a: Half, b: Half)] {
            var out: [(target: AdapterTarget, a: Half, b: Half)] = []
            for (target, e) in entries {
                guard let a = e.a, let b = e.b else {
                    throw .badTensor(tensor: (e.a ?? e.b)!.source, why: "its \(e.a == nil ? "A" : "B") half is missing")
                }
                out.append((target, a, b))
            }
            return out
        }
    }

    /// `A` (rank × inputs) and `B` (outputs × rank) joined into a pair, after checking they agree.
    static func pair(_ target: AdapterTarget, a: Half, b: Half, scale: (Int) throws(AdapterError) -> Float) throws(AdapterError) -> LoRAPair {
        guard a.rows == b.columns else {
            throw .rankMismatch(tensor: target.tensorName, a: a.rows, b: b.columns)
        }
        guard a.rows > 0, a.rows <= maximumRank else { throw .badTensor(tensor: a.source, why: "rank \(a.rows) is outside 1...\(maximumRank)") }
        for half in [a, b] {
            if let i = half.values.firstIndex(where: { !$0.isFinite }) {
                throw .badTensor(tensor: half.source, why: "weight \(i) is \(half.values[i]), not a finite number")
            }
        }
        let rank = a.rows
        var bt = [Float](repeating: 0, count: rank * b.rows)
        for o in 0..<b.rows { for r in 0..<rank { bt[r * b.rows + o] = b.values[o * rank + r] } }
        let s = try scale(rank)
        guard s.isFinite else { throw .badConfig("the scale of \(target.tensorName) is not finite") }
        return LoRAPair(rank: rank, rows: b.rows, columns: a.columns, scale: s, a: a.values, bt: bt)
    }

    // MARK: Identity

    /// What to say when the adapter names a base model that is plainly not this one (neither
    /// name's letters and digits contain the other's); nil when they agree or either is unnamed.
    static func identityNote(_ adapterBase: String?, model: GGUFFile) -> String? {
        guard let adapterBase, let modelName = (try? model.string("general.basename")) ?? (try? model.string("general.name")) else { return nil }
        func key(_ s: String) -> String { String(s.lowercased().unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) }.map(Character.init)) }
        let a = key(adapterBase), m = key(modelName)
        guard !a.isEmpty, !m.isEmpty, !a.contains(m), !m.contains(a) else { return nil }
        return "trained on '\(adapterBase)', and this model is '\(modelName)'; its shapes fit, so it runs (expect poor output if it was made for another model)"
    }

    /// The last component of a hub id (`HuggingFaceTB/SmolLM2-135M-Instruct`); nil for a local path,
    /// which says nothing about the model.
    static func baseName(fromPEFT value: String?) -> String? {
        guard let v = value?.trimmingCharacters(in: .whitespaces), !v.isEmpty,
              !v.hasPrefix("/"), !v.hasPrefix("."), !v.hasPrefix("~") else { return nil }
        return v.split(separator: "/").last.map(String.init)
    }

    // MARK: Row order

    /// llama GGUF files store Q and K rows of each head interleaved (pair i of a head at rows 2i
    /// and 2i + 1) where Hugging Face checkpoints store halves (i and i + d/2): PEFT's B rows for
    /// those matrices are reordered the same way. A GGUF LoRA is already in the GGUF order.
    static func ggufRowOrder(_ b: Half, heads: Int) -> Half {
        guard heads > 0, b.rows % heads == 0, (b.rows / heads) % 2 == 0 else { return b }
        let d = b.rows / heads, half = d / 2, r = b.columns
        var out = b
        for h in 0..<heads {
            for i in 0..<half {
                for t in 0..<2 {
                    let from = h * d + t * half + i, to = h * d + 2 * i + t
                    for c in 0..<r { out.values[to * r + c] = b.values[from * r + c] }
                }
            }
        }
        return out
    }

    static func transposed(_ h: Half) -> Half {
        var v = [Float](repeating: 0, count: h.values.count)
        for i in 0..<h.rows { for j in 0..<h.columns { v[j * h.rows + i] = h.values[i * h.columns + j] } }
        return Half(values: v, rows: h.columns, columns: h.rows, source: h.source)
    }

    static func fingerprint(of files: [URL]) throws(AdapterError) -> String {
        var hasher = SHA256()
        for f in files {
            guard let data = try? Data(contentsOf: f, options: .alwaysMapped) else { throw .cannotRead(f.path, "unreadable") }
            hasher.update(data)
        }
        return hasher.finalize()
    }
}
