import Foundation

/// A model ready to run: the transformer with its weights, the tokenizer and the chat template,
/// all read from one GGUF file. Immutable; load it once and share it.
public final class Model: Sendable {
    public let url: URL
    public let transformer: Transformer
    public let tokenizer: Tokenizer
    /// The template from `tokenizer.chat_template`, or where the file has none the built-in one
    /// of its architecture (``BuiltinChatTemplates``), or nil.
    public let chatTemplate: ChatTemplate?

    public var config: ModelConfig { transformer.config }
    public var name: String { (try? transformer.file.string("general.name")) ?? url.deletingPathExtension().lastPathComponent }

    public init(url: URL) throws {
        let file = try GGUFFile(url: url)
        self.url = url
        transformer = try Transformer(file: file)
        let tokenizer = try Tokenizer(gguf: file)
        self.tokenizer = tokenizer
        guard tokenizer.vocabularySize == transformer.config.vocabularySize else {
            throw ModelError.invalidMetadata(key: "tokenizer.ggml.tokens",
                                             reason: "\(tokenizer.vocabularySize) tokens but the model has \(transformer.config.vocabularySize) embeddings")
        }
        let source = try file.string("tokenizer.chat_template")
            ?? BuiltinChatTemplates.source(forArchitecture: transformer.config.architecture.rawValue)
        if let source {
            func text(_ id: Int32?) -> String { id.map { tokenizer.tokenText($0) } ?? "" }
            chatTemplate = try ChatTemplate(source: source, bosToken: text(tokenizer.bosID), eosToken: text(tokenizer.eosID))
        } else {
            chatTemplate = nil
        }
    }

    /// The prompt text for a conversation, rendered with the model's own chat template (and
    /// ``ChatTemplate/plinthContext``).
    public func renderChat(_ messages: [ChatMessage], addGenerationPrompt: Bool = true) throws -> String {
        guard let chatTemplate else { throw ModelError.missingMetadata("tokenizer.chat_template") }
        return try chatTemplate.render(messages: messages, addGenerationPrompt: addGenerationPrompt, extraContext: ChatTemplate.plinthContext)
    }
}
