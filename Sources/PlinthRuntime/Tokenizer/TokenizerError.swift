import Foundation

/// The reasons a tokenizer cannot be built or cannot encode its input.
public enum TokenizerError: Error, LocalizedError, Equatable, Sendable {
    /// The bytes given to ``Tokenizer/encode(bytes:addSpecial:parseSpecial:)`` are not valid UTF-8;
    /// `offset` is the index of the first byte of the first ill-formed sequence.
    case invalidUTF8(offset: Int)
    /// `tokenizer.ggml.model` names a tokenizer this version does not implement.
    case unsupportedModel(String)
    /// `tokenizer.ggml.pre` names a pre-tokenizer this version does not implement.
    case unsupportedPreTokenizer(String)
    /// A metadata key the tokenizer needs is absent.
    case missingMetadata(String)
    /// A metadata value is present but unusable.
    case invalidMetadata(key: String, reason: String)
    /// Reading the GGUF metadata failed.
    case metadata(GGUFError)

    public var errorDescription: String? {
        switch self {
        case .invalidUTF8(let offset):
            return "The text is not valid UTF-8: the sequence starting at byte \(offset) is ill-formed."
        case .unsupportedModel(let name):
            return "The tokenizer type '\(name)' (tokenizer.ggml.model) is not supported; Plinth supports byte-level BPE ('gpt2') and SentencePiece BPE ('llama')."
        case .unsupportedPreTokenizer(let name):
            return "The pre-tokenizer '\(name)' (tokenizer.ggml.pre) is not supported. Supported: the gpt-2, starcoder/smollm, llama3, qwen2 and qwen35 families."
        case .missingMetadata(let key):
            return "The model file has no '\(key)' metadata, which the tokenizer needs."
        case .invalidMetadata(let key, let reason):
            return "The metadata '\(key)' is unusable: \(reason)."
        case .metadata(let error):
            return "Reading the tokenizer metadata failed: \(error.localizedDescription)"
        }
    }
}
