import Foundation

/// A token sequence cut into chunks of `context` tokens and scored the way llama-perplexity
/// scores it: each chunk starts from an empty cache with its first token replaced by BOS (when
/// the model adds one), and the logits of positions `context/2 ..< context-1` predict the tokens
/// after them. Positions are scored in order, chunk by chunk.
public struct ChunkedEvaluation: Sendable {
    public let context: Int
    public let chunkCount: Int
    /// The chunks' tokens, chunk after chunk (context × chunkCount).
    public let tokens: [Int32]
    let bos: Int32?

    /// The chunks of a tokenized text: as many whole chunks as it holds, at most `chunkLimit`.
    /// Like llama-perplexity, the text must hold two chunks at least.
    public init(text tokens: [Int32], context: Int, chunkLimit: Int? = nil, bos: Int32?) throws(PerplexityError) {
        guard tokens.count >= 2 * context else { throw .textTooShort(tokens: tokens.count, needed: 2 * context, context: context) }
        let chunks = min(chunkLimit ?? Int.max, tokens.count / context)
        self.init(chunks: Array(tokens.prefix(chunks * context)), context: context, bos: bos)
    }

    /// The chunks of a UTF-8 text file, tokenized as llama-perplexity tokenizes it (BOS first when
    /// the model adds one, special-token text taken as text).
    public init(file url: URL, tokenizer: Tokenizer, context: Int, chunkLimit: Int? = nil) throws {
        guard let data = FileManager.default.contents(atPath: url.path) else { throw PerplexityError.cannotRead(path: url.path) }
        let tokens = try tokenizer.encode(bytes: [UInt8](data), addSpecial: true, parseSpecial: false)
        try self.init(text: tokens, context: context, chunkLimit: chunkLimit, bos: Self.bos(of: tokenizer))
    }

    /// The token that replaces each chunk's first: the model's BOS, when its tokenizer adds one.
    public static func bos(of tokenizer: Tokenizer) -> Int32? { tokenizer.addsBOS ? tokenizer.bosID : nil }

    /// Chunks given whole (a log-probability file's): `tokens.count` is a multiple of `context`.
    public init(chunks tokens: [Int32], context: Int, bos: Int32?) {
        precondition(context >= 4 && tokens.count % context == 0, "chunks must be whole")
        self.context = context
        self.chunkCount = tokens.count / context
        self.tokens = tokens
        self.bos = bos
    }

    /// The first scored position of a chunk.
    public var first: Int { context / 2 }
    /// Positions scored per chunk.
    public var scoredPerChunk: Int { LogProbabilityFile.scoredPositions(context: context) }

    /// The token after scored position `position` of chunk `chunk`.
    public func next(chunk: Int, position: Int) -> Int32 { tokens[chunk * context + position + 1] }

    /// Runs chunks `range` on `inference`, up to its slot count at a time in one step each, and
    /// hands every scored position's logits to `score(chunk, position, logits)` in order. Rows
    /// run with the attached adapter `adapter` (0: the base model).
    public func run(_ range: Range<Int>? = nil, on inference: InferenceContext, adapter: Int = 0,
                    score: (Int, Int, UnsafeBufferPointer<Float>) throws -> Void) throws {
        let range = range ?? 0..<chunkCount
        precondition(inference.contextLength >= context, "the context holds fewer positions than a chunk")
        var start = range.lowerBound
        while start < range.upperBound {
            let chunks = start..<min(start + inference.slotCount, range.upperBound)
            var batch = Batch()
            for (slot, c) in chunks.enumerated() {
                inference.reset(slot: slot)
                for p in 0..<context {
                    let token = p == 0 ? (bos ?? tokens[c * context]) : tokens[c * context + p]
                    batch.add(token, position: p, slot: slot, logits: p >= first && p < context - 1, adapter: adapter)
                }
            }
            try inference.forward(batch)
            var row = 0
            for c in chunks {
                for p in first..<(context - 1) {
                    try score(c, p, inference.logits(row))
                    row += 1
                }
            }
            start = chunks.upperBound
        }
    }
}
