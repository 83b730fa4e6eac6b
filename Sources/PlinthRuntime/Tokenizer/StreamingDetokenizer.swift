/// Turns generated tokens into text one token at a time, emitting only complete UTF-8 characters.
///
/// Byte-level tokens can split a character: an emoji is often two or three tokens. Feed each
/// token to ``append(_:)`` and show what it returns; bytes that begin a character are held back
/// until the rest arrives. Call ``finish()`` at the end to flush what is left (an unfinished
/// character becomes U+FFFD). Bytes that can never form a character are replaced by U+FFFD as
/// soon as that is certain.
///
/// ```swift
/// var stream = StreamingDetokenizer(tokenizer: tokenizer)
/// for id in generated { print(stream.append(id), terminator: "") }
/// print(stream.finish())
/// ```
///
/// Unlike ``Tokenizer/decode(_:renderSpecial:)`` this does not apply llama.cpp's space clean-up,
/// so that what has been shown is never revised.
public struct StreamingDetokenizer: Sendable {
    public let tokenizer: Tokenizer
    /// Whether control tokens are written as their text (e.g. `<|im_end|>`).
    public var renderSpecial: Bool
    private var pending: [UInt8] = []

    public init(tokenizer: Tokenizer, renderSpecial: Bool = false) {
        self.tokenizer = tokenizer
        self.renderSpecial = renderSpecial
    }

    /// Whether bytes of an unfinished character are waiting for the next token.
    public var hasPendingBytes: Bool { !pending.isEmpty }

    /// Adds one token and returns the text it completes (possibly empty).
    public mutating func append(_ id: Int32) -> String {
        appendBytes(tokenizer.tokenPiece(id, renderSpecial: renderSpecial))
    }

    /// Adds several tokens and returns the text they complete.
    public mutating func append<S: Sequence>(contentsOf ids: S) -> String where S.Element == Int32 {
        var s = ""
        for id in ids { s += append(id) }
        return s
    }

    /// Adds raw bytes (e.g. a piece obtained elsewhere) and returns the text they complete.
    public mutating func appendBytes(_ bytes: [UInt8]) -> String {
        guard !bytes.isEmpty else { return "" }
        pending.append(contentsOf: bytes)
        let hold = pending.withUnsafeBufferPointer { UTF8Scan.incompleteSuffixLength($0) }
        let ready = pending.count - hold
        guard ready > 0 else { return "" }
        let text = String(decoding: pending[0..<ready], as: UTF8.self)
        pending.removeFirst(ready)
        return text
    }

    /// Returns whatever is still held back, an unfinished character as U+FFFD, and resets.
    public mutating func finish() -> String {
        defer { pending.removeAll() }
        return pending.isEmpty ? "" : String(decoding: pending, as: UTF8.self)
    }
}
