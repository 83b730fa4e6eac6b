/// A transformer family's name as GGUF files write it (`general.architecture`). Each family's
/// file in this folder declares its own name and is listed in ``ModelArchitectures/all``.
public struct Architecture: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// Every architecture Plinth runs.
    public static var allCases: [Architecture] { ModelArchitectures.all.map { $0.architecture } }

    /// The type that runs this architecture, if Plinth has one.
    var definition: (any ModelArchitecture.Type)? { ModelArchitectures.all.first { $0.architecture == self } }
    /// Whether RoPE rotates (i, i + d/2) pairs (``ModelArchitecture/neoxRoPE``).
    var neoxRoPE: Bool { definition?.neoxRoPE ?? false }
}

/// One transformer family, in one file: its hyperparameters beyond ``ModelConfig``'s (read from
/// its GGUF keys), its tensors, and its layer, written against the step operations of
/// ``LayerStep``. The backend provides the operations with its buffers, KV cache and threads.
public protocol ModelArchitecture: Sendable {
    /// The name this type runs.
    static var architecture: Architecture { get }
    /// Reads the family's own hyperparameters; `config` holds the ones every family shares.
    init(gguf: GGUFFile, config: ModelConfig) throws

    /// The tensors of layer `index`, by the name after `blk.N.`.
    func tensors(layer index: Int, config: ModelConfig) -> [LayerTensorSpec]
    /// The rotary embeddings the layers use; ``LayerStep/rope(_:table:)`` names one by index.
    var ropes: [RoPE] { get }
    /// Whether RoPE rotates (i, i + d/2) pairs rather than adjacent (2i, 2i+1) ones.
    static var neoxRoPE: Bool { get }
    /// The factor token embeddings are multiplied by before the first layer (Gemma: √d).
    var embeddingScale: Float? { get }
    /// Logits become cap·tanh(logit/cap) when set (Gemma 2's final soft-cap).
    var logitSoftcap: Float? { get }
    /// Layer `index` of one step: reads and updates ``StepBuffer/residual``.
    func layer(_ index: Int, _ step: some LayerStep)
}

extension LayerStep {
    /// ``attend(window:scale:softcap:)`` without a soft cap.
    public func attend(window: Int?, scale: Float) { attend(window: window, scale: scale, softcap: nil) }
}

extension ModelArchitecture {
    public var embeddingScale: Float? { nil }
    public var logitSoftcap: Float? { nil }
}

/// The architectures Plinth runs. A new family is a file declaring a ``ModelArchitecture`` and a
/// line here.
public enum ModelArchitectures {
    public static let all: [any ModelArchitecture.Type] = [Llama.self, Qwen2.self, Qwen3.self, Gemma2.self, Gemma3.self]

    /// The family of `gguf`'s model, with its hyperparameters read.
    static func load(_ gguf: GGUFFile, config: ModelConfig) throws -> any ModelArchitecture {
        guard let type = config.architecture.definition else {
            throw ModelError.unsupportedArchitecture(config.architecture.rawValue)
        }
        return try type.init(gguf: gguf, config: config)
    }
}

/// The tensors a layer may hold. Every family has the attention and feed-forward matrices and
/// their two norms; the others are optional per family.
public enum LayerTensor: Int, CaseIterable, Sendable {
    case attnNorm, attnQ, attnK, attnV, attnOutput, attnQBias, attnKBias, attnVBias
    case attnQNorm, attnKNorm, postAttentionNorm
    case ffnNorm, ffnGate, ffnUp, ffnDown, postFFNNorm

    /// Whether the kernels multiply by it (the others are vectors of floats).
    var isMatrix: Bool {
        switch self {
        case .attnQ, .attnK, .attnV, .attnOutput, .ffnGate, .ffnUp, .ffnDown: true
        default: false
        }
    }

    /// The matrix an adapter's pair for this tensor adds to.
    var adapterMatrix: AdapterTarget.Matrix? {
        switch self {
        case .attnQ: .attnQ
        case .attnK: .attnK
        case .attnV: .attnV
        case .attnOutput: .attnOutput
        case .ffnGate: .ffnGate
        case .ffnUp: .ffnUp
        case .ffnDown: .ffnDown
        default: nil
        }
    }

    /// The bias added after this product, if the layer has one.
    var bias: LayerTensor? {
        switch self {
        case .attnQ: .attnQBias
        case .attnK: .attnKBias
        case .attnV: .attnVBias
        default: nil
        }
    }
}

/// One tensor an architecture declares for a layer: its role, its name after `blk.N.`, its shape
/// (GGUF order: row length first) and whether a file may lack it.
public struct LayerTensorSpec: Sendable {
    public var role: LayerTensor
    public var name: String
    public var shape: [Int]
    public var optional: Bool

    public init(_ role: LayerTensor, _ name: String, _ shape: [Int], optional: Bool = false) {
        self.role = role
        self.name = name
        self.shape = shape
        self.optional = optional
    }

    /// The biases of the query, key and value products (Qwen2's; optional in Qwen3 files).
    public static func qkvBiases(_ c: ModelConfig, optional: Bool = false) -> [LayerTensorSpec] {
        let q = c.headCount * c.headDim, kv = c.kvHeadCount * c.headDim
        return [.init(.attnQBias, "attn_q.bias", [q], optional: optional), .init(.attnKBias, "attn_k.bias", [kv], optional: optional),
                .init(.attnVBias, "attn_v.bias", [kv], optional: optional)]
    }

    /// The tensors of the block every family here shares: pre-norms, q/k/v/output and a gated
    /// feed-forward.
    public static func standardBlock(_ c: ModelConfig) -> [LayerTensorSpec] {
        let e = c.embeddingLength, q = c.headCount * c.headDim, kv = c.kvHeadCount * c.headDim, ff = c.feedForwardLength
        return [
            .init(.attnNorm, "attn_norm.weight", [e]),
            .init(.attnQ, "attn_q.weight", [e, q]), .init(.attnK, "attn_k.weight", [e, kv]), .init(.attnV, "attn_v.weight", [e, kv]),
            .init(.attnOutput, "attn_output.weight", [q, e]),
            .init(.ffnNorm, "ffn_norm.weight", [e]),
            .init(.ffnGate, "ffn_gate.weight", [e, ff]), .init(.ffnUp, "ffn_up.weight", [e, ff]), .init(.ffnDown, "ffn_down.weight", [ff, e]),
        ]
    }
}

/// One rotary position embedding: its frequency base and the scaling the file asks for.
public struct RoPE: Sendable, Equatable {
    public var base: Float
    /// 1/factor of linear scaling (1: none).
    public var scale: Float
    /// Per-pair frequency factors (Llama 3.1's `rope_freqs.weight`), or nil.
    public var factors: [Float]?

    public init(base: Float, scale: Float = 1, factors: [Float]? = nil) {
        self.base = base
        self.scale = scale
        self.factors = factors
    }
}

/// The activation of a gated feed-forward: act(gate) · up.
public enum Activation: Sendable {
    /// silu(g) = g / (1 + e^-g) (SwiGLU: Llama, Qwen).
    case silu
    /// gelu's tanh form (GeGLU: Gemma).
    case geluTanh
}

/// The activations a step's operations read and write, each one row per token of the batch.
public enum StepBuffer: Sendable {
    /// The residual stream (embedding width).
    case residual
    /// A normed copy of the residual stream, the input of products (embedding width).
    case normed
    /// Queries, keys and values (heads × head size each).
    case query, key, value
    /// The attention's output (query heads × head size).
    case attention
    /// A block's output before it joins the residual stream (embedding width).
    case output
}

/// The operations a layer is written with, over all rows of one step. A backend implements them
/// with its buffers, KV cache and threads; the layer's tensors are the ones its architecture
/// declared (``ModelArchitecture/tensors(layer:config:)``). A backend may run a layer's calls
/// later and several as one (the CPU fuses a norm into the products that read it, and a
/// product's output into a residual add that follows it), so buffers other than
/// ``StepBuffer/residual`` carry nothing from one layer to the next.
public protocol LayerStep {
    /// RMSNorm of each row of `source` times the layer's `weight` vector, into `target` (which may be `source`).
    func norm(_ source: StepBuffer, _ weight: LayerTensor, into target: StepBuffer)
    /// RMSNorm of each head of `buffer` by itself, with one head-sized `weight` (QK norm).
    func headNorm(_ buffer: StepBuffer, _ weight: LayerTensor)
    /// Products of `input` with the layer's matrices, each into its buffer, plus the matrix's
    /// bias where the layer has one and the rows' adapters.
    func project(_ input: StepBuffer, _ products: [(LayerTensor, StepBuffer)])
    /// Rotary position embedding of the query or key heads with ``ModelArchitecture/ropes``[table].
    func rope(_ buffer: StepBuffer, table: Int)
    /// Stores the step's keys and values in the layer's cache and attends with the queries:
    /// each row to its sequence's positions up to its own, the last `window` of them only when
    /// set, with scores scaled by `scale` (then capped at ±`softcap` by cap·tanh(score/cap) when
    /// set: Gemma 2); writes ``StepBuffer/attention``.
    func attend(window: Int?, scale: Float, softcap: Float?)
    /// act(gate · input) ⊙ (up · input), times down, into `target`.
    func feedForward(_ input: StepBuffer, _ activation: Activation, into target: StepBuffer)
    /// residual += `buffer`.
    func addToResidual(_ buffer: StepBuffer)
}
