/// One stack frame of a configuration: the automaton state, a counter (characters in a counted
/// string, elements in an array) and the frame below.
struct Frame {
    var state: Int32
    var count: Int32
    var parent: Int32
}

/// The per-sequence state of constrained decoding: which tokens may come next, and what has
/// been generated so far.
///
/// A matcher starts at the beginning of the output. Each step, ask for ``fillAllowedTokens(_:)``
/// (or ``allowedTokens()``), sample a token that the mask allows, and ``accept(_:)`` it. The end-
/// of-sequence tokens are allowed exactly when the output is a complete value (``isComplete``).
/// ``rollback(_:)`` undoes accepted tokens (for speculative decoding or retries), and
/// ``forcedBytes()`` / ``forcedTokens(tokenize:)`` give the text that must come next when there is
/// only one way to continue (jump-forward decoding).
///
/// A matcher is not thread-safe; use one per sequence. Many matchers can share one
/// ``CompiledGrammar``.
public final class GrammarMatcher {
    /// The grammar this matcher follows.
    public let grammar: CompiledGrammar
    var core: MatcherCore

    init(_ compiled: CompiledGrammar) {
        grammar = compiled
        core = MatcherCore(compiled)
    }

    // MARK: Public state

    /// Whether the output so far is a complete value (end-of-sequence is allowed), or the
    /// end-of-sequence token has been accepted.
    public var isComplete: Bool { core.isComplete() }

    /// Whether an end-of-sequence token has been accepted; nothing more can follow.
    public var isTerminated: Bool { core.terminated }

    /// Number of tokens accepted (and not rolled back).
    public var acceptedTokenCount: Int { core.history.count }

    // MARK: Masks

    /// The tokens allowed next, one bit per token id (bit `i % 32` of word `i / 32`).
    public func allowedTokens() -> [UInt32] {
        var words = [UInt32](repeating: 0, count: grammar.vocabulary.maskWordCount)
        words.withUnsafeMutableBufferPointer { fillAllowedTokens($0) }
        return words
    }

    /// Writes the allowed-token bitmask into `words` (at least ``TokenVocabulary/maskWordCount``
    /// words; bit `i % 32` of word `i / 32` is token `i`).
    public func fillAllowedTokens(_ words: UnsafeMutableBufferPointer<UInt32>) { core.fillAllowedTokens(words) }

    // MARK: Accepting

    /// Consumes a token. Returns false (and changes nothing) when the token is not allowed.
    @discardableResult
    public func accept(_ token: Int32) -> Bool { core.accept(token) }

    /// Consumes raw bytes as one step (rolled back as one token). Returns false (and changes
    /// nothing) when they do not fit the grammar.
    @discardableResult
    public func accept(bytes: [UInt8]) -> Bool { core.accept(bytes: bytes) }

    /// Undoes the last `count` accepted tokens (or byte steps). Returns false when fewer were accepted.
    @discardableResult
    public func rollback(_ count: Int) -> Bool { core.rollback(count) }

    /// Returns to the start of the output.
    public func reset() { core.reset() }

    // MARK: Budget

    /// The fewest bytes that complete the output from here: 0 when it is complete. With a
    /// byte-level vocabulary (every byte is a token) it is also an upper bound on the tokens
    /// needed to finish.
    public var minimumCompletionBytes: Int { core.completionDistance() }

    /// Whether `token` is allowed and, after it, the output can still be completed within the
    /// tokens left: `remaining` counts the tokens the output may still add, this one included.
    /// A decoder that only takes tokens that fit, from a start whose
    /// ``minimumCompletionBytes`` is within its budget, always ends with a complete value.
    /// End-of-sequence tokens fit whenever the output is complete; while the shortest completion
    /// is longer in bytes than `remaining`, a token fits when it shortens the completion.
    public func fits(_ token: Int32, remaining: Int) -> Bool { core.fits(token, remaining: remaining) }

    /// Writes the allowed-token bitmask with only the tokens that ``fits(_:remaining:)``: the
    /// exact budget-aware mask. It checks every allowed token, so a decoder that samples first
    /// and checks only its choice (rejecting and sampling again) is cheaper and equivalent.
    public func fillAllowedTokens(_ words: UnsafeMutableBufferPointer<UInt32>, remaining: Int) {
        core.fillAllowedTokens(words)
        let wordCount = grammar.vocabulary.maskWordCount
        for w in 0..<wordCount where words[w] != 0 {
            var bits = words[w]
            while bits != 0 {
                let bit = bits.trailingZeroBitCount
                bits &= bits - 1
                if !core.fits(Int32(w * 32 + bit), remaining: remaining) { words[w] &= ~(1 << UInt32(bit)) }
            }
        }
    }

    // MARK: Jump-forward

    /// The bytes that must come next because the grammar allows exactly one continuation
    /// (for example the fixed keys of an object). Empty when there is a choice.
    public func forcedBytes(limit: Int = 4096) -> [UInt8] { core.forcedBytes(limit: limit) }

    /// The forced continuation as tokens that can be accepted without sampling.
    ///
    /// By default the bytes are split greedily into the longest vocabulary tokens, holding back
    /// a final token that a longer token could extend (so the model can still choose the
    /// natural tokenization at the boundary). Pass `tokenize` to use the model's own tokenizer
    /// for canonical tokens; the result is then cut to the tokens whose bytes lie entirely
    /// inside the forced text.
    public func forcedTokens(tokenize: (([UInt8]) -> [Int32])? = nil) -> [Int32] { core.forcedTokens(tokenize: tokenize) }

    // MARK: Streaming position

    /// The path from the root value to the value being generated now, for building partial
    /// snapshots while streaming: for `{"a":[1,{"b":"x` it is `.property("a"), .element(1),
    /// .property("b")`. When several readings are still possible, the first is reported.
    public var currentPath: [JSONPathComponent] { core.currentPath }
}
