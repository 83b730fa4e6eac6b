/// Decides, token by token, what one sequence may generate: a grammar's token mask with
/// jump-forward, or a router that lets free text run until a tool call opens and then holds the
/// call to its grammar.
///
/// The scheduler calls a sequence's constraint one call at a time, so an implementation keeps
/// plain mutable state of its own; the calls may come from any thread, and constraints of
/// different sequences run at the same time (a step of many rows advances them on several
/// threads), so state that constraints share must be locked or immutable. Every token
/// joins the sequence only through ``ConstraintOutput/append(_:visible:)``: the sampled token,
/// forced tokens (jump-forward), or fixed markup. Tokens appended together go through the
/// model in one step, as a prefill chunk.
public protocol Constraint: AnyObject {
    /// Before the first token is sampled: append tokens the output must start with.
    func begin(_ output: inout ConstraintOutput) throws
    /// Writes the tokens allowed next as a bitmask (bit `i % 32` of word `i / 32` is token `i`).
    /// Returns false when every token is allowed (the mask is then not read).
    func fillAllowed(_ mask: UnsafeMutableBufferPointer<UInt32>) -> Bool
    /// Whether `token`, allowed by the mask, still lets the output end within `remaining` tokens
    /// (this one included). The decoder samples under the mask, then asks; only when the choice
    /// does not fit does it narrow the mask to the tokens that fit and choose again, so the
    /// check costs one call on almost every step. A constraint with no notion of completion, or
    /// one whose output can no longer end in time at all, says true.
    func fits(_ token: Int32, remaining: Int) -> Bool
    /// The token the sampler chose under the mask: append what follows, or finish.
    func accept(_ token: Int32, _ output: inout ConstraintOutput) throws
    /// Generation is ending (`reason`): emit what is held back, or throw when the output is
    /// incomplete in a way the caller must hear about.
    func end(_ reason: FinishReason, _ output: inout ConstraintOutput) throws
}

extension Constraint {
    public func fits(_ token: Int32, remaining: Int) -> Bool { true }
}

/// What a ``Constraint`` does to its sequence in one call, applied in order by the scheduler.
public struct ConstraintOutput {
    enum Item {
        case token(Int32, visible: Bool)
        case text(String, tokenCount: Int)
        case toolCall(String, tokenCount: Int)
    }

    var items: [Item] = []
    /// Set by ``finish()``: the output is complete.
    var finished = false
    /// Set by ``rewind(toGenerated:)``.
    var rewindTo: Int?
    /// Tokens the sequence may still add (its token limit); ``append(_:visible:)`` refuses past it.
    public private(set) var remaining: Int

    init(remaining: Int) { self.remaining = remaining }

    /// Adds a token to the sequence. A visible token's text is streamed as text; an invisible one
    /// (markup, a call's JSON) is not. Returns false, adding nothing, when the token limit is reached.
    @discardableResult
    public mutating func append(_ token: Int32, visible: Bool = true) -> Bool {
        guard remaining > 0 else { return false }
        remaining -= 1
        items.append(.token(token, visible: visible))
        return true
    }

    /// Reports text the constraint wrote itself (text it held back), produced by `tokenCount` tokens.
    public mutating func emitText(_ text: String, tokenCount: Int) {
        items.append(.text(text, tokenCount: tokenCount))
    }

    /// Reports a complete tool call's JSON object.
    public mutating func emitToolCall(_ json: String, tokenCount: Int) {
        items.append(.toolCall(json, tokenCount: tokenCount))
    }

    /// Ends the output: the model has finished.
    public mutating func finish() { finished = true }

    /// Takes back every generated token after the first `count` (applied after this call's
    /// items); the model is then asked again from that point.
    public mutating func rewind(toGenerated count: Int) { rewindTo = count }
}
