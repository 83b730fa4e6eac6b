/// The tokens of one forward step, possibly from several sequences (a ragged batch).
///
/// Each token names its sequence's KV-cache slot and its position in that sequence. Positions of
/// one slot must be consecutive and start at or before the slot's current length (starting
/// earlier overwrites, which is how a sequence is rolled back).
public struct Batch: Sendable, Equatable {
    public var tokens: [Int32] = []
    public var positions: [Int32] = []
    public var slots: [Int] = []
    /// Rows whose logits the step returns.
    public var wantsLogits: [Bool] = []
    /// How each row that wants logits will use them (``LogitsUse/full`` for the others).
    public var uses: [LogitsUse] = []
    /// The adapter each row runs with: an id from ``InferenceContext/attach(_:)``, or 0 for the
    /// base model. A sequence keeps one adapter: its cache holds what that adapter computed.
    public var adapters: [Int] = []

    public init() {}

    public var count: Int { tokens.count }

    public mutating func add(_ token: Int32, position: Int, slot: Int = 0, logits: Bool = false, use: LogitsUse = .full,
                             adapter: Int = 0) {
        tokens.append(token)
        positions.append(Int32(position))
        slots.append(slot)
        wantsLogits.append(logits)
        uses.append(use)
        adapters.append(adapter)
    }

    /// A batch of one sequence's tokens from `start`, asking for the last token's logits.
    public static func sequence(_ tokens: [Int32], startingAt start: Int = 0, slot: Int = 0, adapter: Int = 0) -> Batch {
        var b = Batch()
        for (i, t) in tokens.enumerated() { b.add(t, position: start + i, slot: slot, logits: i == tokens.count - 1, adapter: adapter) }
        return b
    }
}

/// What the caller will do with a row's logits. A backend that computes them away from the host
/// (a GPU) returns a whole row only for ``full``; for ``argmax(allowed:)`` it picks the token
/// where the logits are and returns just that (``InferenceContext/chosenToken(_:)``), which
/// spares copying a vocabulary of floats per row and step.
public enum LogitsUse: Sendable, Equatable {
    /// The whole row: sampling at a temperature, penalties, or anything else.
    case full
    /// Only the greedy choice: ``Sampler/argmax(_:)``, or with `allowed` (bit `i % 32` of word
    /// `i / 32` allows token `i`) the sampler's greedy choice among the allowed tokens.
    case argmax(allowed: [UInt32]?)
    /// A draw among the row's k best tokens (``Sampler/sample(top:)``), at most ``maxTopK``,
    /// among the `allowed` ones when given; the backend returns those k (id, logit) pairs
    /// (``InferenceContext/topCandidates(_:)``), or the whole row when it does not reduce rows.
    case top(k: Int, allowed: [UInt32]?)

    /// The most tokens ``top(k:allowed:)`` asks for (the CUDA kernel's PKC_TOPK_MAX).
    public static let maxTopK = 64
}
