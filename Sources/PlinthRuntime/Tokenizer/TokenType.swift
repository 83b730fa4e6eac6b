/// The kind of a vocabulary entry, as stored in `tokenizer.ggml.token_type`.
public enum TokenType: Int32, Sendable, CaseIterable {
    case undefined = 0
    /// Ordinary text.
    case normal = 1
    /// The unknown-token marker.
    case unknown = 2
    /// A control token such as `<|im_start|>`: not text, rendered only on request.
    case control = 3
    /// A token added by the model's authors that is matched in text before BPE, such as `<tool_call>`.
    case userDefined = 4
    /// A reserved, unused slot.
    case unused = 5
    /// A single raw byte written as `<0xAB>`.
    case byte = 6
}

/// How the tokenizer treats a token: the GGUF type, refined by llama.cpp's rules (a token whose
/// text marks the end of a turn, like `<|im_end|>`, is treated as control even when the file says
/// otherwise).
public struct TokenAttributes: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let undefined = TokenAttributes(rawValue: 1 << 0)
    public static let unknown = TokenAttributes(rawValue: 1 << 1)
    public static let unused = TokenAttributes(rawValue: 1 << 2)
    public static let normal = TokenAttributes(rawValue: 1 << 3)
    public static let control = TokenAttributes(rawValue: 1 << 4)
    public static let userDefined = TokenAttributes(rawValue: 1 << 5)
    public static let byte = TokenAttributes(rawValue: 1 << 6)
    public static let normalized = TokenAttributes(rawValue: 1 << 7)
    /// Whitespace before the token is removed when it is split out of text.
    public static let lstrip = TokenAttributes(rawValue: 1 << 8)
    /// Whitespace after the token is removed when it is split out of text.
    public static let rstrip = TokenAttributes(rawValue: 1 << 9)
    public static let singleWord = TokenAttributes(rawValue: 1 << 10)

    init(type: TokenType) {
        switch type {
        case .undefined: self = .undefined
        case .normal: self = .normal
        case .unknown: self = .unknown
        case .control: self = .control
        case .userDefined: self = .userDefined
        case .unused: self = .unused
        case .byte: self = .byte
        }
    }
}
