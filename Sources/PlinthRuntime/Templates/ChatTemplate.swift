import Foundation

/// A model's chat template: turns a conversation into the exact prompt text the model was
/// trained on.
///
/// GGUF files carry the template as Jinja source in the metadata key
/// `tokenizer.chat_template`. Create a `ChatTemplate` from it and the model's BOS and EOS token
/// strings, then render conversations. Rendering matches HuggingFace transformers'
/// `apply_chat_template(..., tokenize=False)` character for character.
///
/// ```swift
/// let template = try ChatTemplate(source: jinjaSource, bosToken: "<|im_start|>", eosToken: "<|im_end|>")
/// let prompt = try template.render(messages: [.user("Hello!")], addGenerationPrompt: true)
/// ```
public struct ChatTemplate: Sendable {
    /// The Jinja source of the template.
    public var source: String { template.source }
    /// The text of the beginning-of-sequence token, visible to the template as `bos_token`.
    public let bosToken: String
    /// The text of the end-of-sequence token, visible to the template as `eos_token`.
    public let eosToken: String
    let template: JinjaTemplate

    /// The variables Plinth renders its conversations with (``Model/renderChat(_:addGenerationPrompt:)``,
    /// sessions, `plinth eval`, the server): Plinth does not yet keep a model's reasoning apart
    /// from its answer, so hybrid reasoning models answer without thinking first
    /// (`enable_thinking` false: Qwen3's template opens the answer with an empty think block).
    public static let plinthContext: [String: JinjaValue] = ["enable_thinking": .bool(false)]

    /// Parses a chat template.
    ///
    /// - Throws: ``ChatTemplateError`` when the source is not a valid template.
    public init(source: String, bosToken: String = "", eosToken: String = "") throws(ChatTemplateError) {
        self.template = try JinjaTemplate(source)
        self.bosToken = bosToken
        self.eosToken = eosToken
    }

    /// Renders a conversation into prompt text.
    ///
    /// - Parameters:
    ///   - messages: The conversation so far.
    ///   - addGenerationPrompt: Whether to end with the header of an assistant turn, so that the
    ///     model continues as the assistant. Use `true` to generate a reply.
    ///   - tools: Tool definitions in the OpenAI format
    ///     (`{"type": "function", "function": {"name", "description", "parameters"}}`), or nil.
    ///     Key order is kept: the model sees them as written.
    ///   - extraContext: Further variables some templates read (for example `enable_thinking`).
    ///   - now: The time the template's `strftime_now` formats (Llama 3's "Today Date").
    /// - Throws: ``ChatTemplateError`` when the template fails, including
    ///   ``ChatTemplateError/raisedException(_:at:)`` when it rejects the conversation.
    public func render(messages: [ChatMessage], addGenerationPrompt: Bool, tools: [JinjaValue]? = nil,
                       extraContext: [String: JinjaValue] = [:], now: Date = Date()) throws(ChatTemplateError) -> String {
        var context = extraContext
        context["messages"] = .array(messages.map(\.templateValue))
        context["tools"] = tools.map { .array($0) } ?? .null
        context["documents"] = .null
        context["add_generation_prompt"] = .bool(addGenerationPrompt)
        context["bos_token"] = .string(bosToken)
        context["eos_token"] = .string(eosToken)
        return try template.render(context, now: now)
    }
}
