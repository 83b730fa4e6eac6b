import Foundation

/// Errors of ``LocalLanguageModel`` that have no counterpart in ``LanguageModelError``: a model
/// file that can't be found or read, and options the local sampler can't honour.
public enum LocalLanguageModelError: LocalizedError, Sendable, Equatable {
    /// The model isn't downloaded, or the path names no file.
    case modelNotFound(String)
    /// The file exists but isn't a model Plinth can run.
    case loadFailed(file: String, reason: String)
    /// The model's file has no chat template, so a transcript can't become a prompt.
    case missingChatTemplate(String)
    /// The chat template failed on the transcript.
    case templateFailed(String)
    /// A generation option is out of range.
    case invalidGenerationOptions(String)
    /// The response schema can't be enforced while decoding.
    case schemaNotEnforceable(schema: String, reason: String)
    /// The runtime failed during a forward step.
    case inferenceFailed(String)
    /// The adapter can't be read, or doesn't fit the model.
    case adapterFailed(adapter: String, reason: String)

    public var errorDescription: String? {
        switch self {
        case .modelNotFound(let why): "The model isn't available: \(why)"
        case .loadFailed(let file, let reason): "The model file \(file) can't be loaded: \(reason)"
        case .missingChatTemplate(let file): "The model file \(file) has no chat template (tokenizer.chat_template)."
        case .templateFailed(let why): "The model's chat template failed on the transcript: \(why)"
        case .invalidGenerationOptions(let why): "Invalid generation options: \(why)"
        case .schemaNotEnforceable(let schema, let reason): "The schema '\(schema)' can't be enforced while decoding: \(reason)"
        case .inferenceFailed(let why): "The model failed while generating: \(why)"
        case .adapterFailed(let adapter, let reason): "The adapter \(adapter) can't be used: \(reason)"
        }
    }
}
