import Foundation
internal import PlinthRuntime

/// Turns a transcript into the prompt a local model was trained on: chat messages rendered by
/// the model's own template, then tokens.
///
/// Each entry renders from its own content only (a prompt carries its own response format and
/// context options), so the tokens of earlier turns don't change from one request to the next
/// and their KV cache can be reused.
enum TranscriptRenderer {
    /// The chat messages of a transcript.
    ///
    /// - Parameter plinthTools: Tools to describe in the Plinth tool format (see
    ///   ``ToolCallFormat``), for templates that don't render tools; nil when the template
    ///   renders them itself. With it, calls and outputs are written as text too.
    static func messages(for transcript: Transcript, plinthTools: [Transcript.ToolDefinition]? = nil) -> [ChatMessage] {
        var messages: [ChatMessage] = []
        let plinthFormat = plinthTools != nil
        for entry in transcript {
            switch entry {
            case .instructions(let instructions):
                // Empty instructions (a session with tools only) leave the template's default system prompt.
                let content = text(of: instructions.segments)
                if !content.isEmpty { messages.append(.system(content)) }
            case .prompt(let prompt):
                var content = text(of: prompt.segments)
                // The schema goes before the prompt's text: many prompts with one schema (a batch
                // of records) then share the schema's tokens as a cached prefix.
                if let schema = prompt.responseFormat?.schema, prompt.contextOptions.includeSchemaInPrompt ?? true {
                    content = schemaDescription(schema) + (content.isEmpty ? "" : "\n\n" + content)
                }
                messages.append(.user(content))
            case .response(let response):
                messages.append(.assistant(text(of: response.segments)))
            case .toolCalls(let calls) where plinthFormat:
                let text = calls.map { ToolCallFormat.callText(name: $0.toolName, arguments: $0.arguments.jsonString) }
                messages.append(.assistant(text.joined(separator: "\n")))
            case .toolOutput(let output) where plinthFormat:
                messages.append(.user(ToolCallFormat.outputText(text(of: output.segments))))
            case .toolCalls(let calls):
                let toolCalls = calls.map { ChatMessage.ToolCall(id: $0.id, name: $0.toolName, arguments: $0.arguments.jsonString) }
                messages.append(.assistant("", toolCalls: toolCalls))
            case .toolOutput(let output):
                messages.append(.tool(text(of: output.segments), name: output.toolName, toolCallID: output.id))
            case .reasoning:
                // Reasoning isn't shown to the model again (local models here don't produce it).
                continue
            }
        }
        if let plinthTools, !plinthTools.isEmpty {
            let section = ToolCallFormat.systemSection(for: plinthTools)
            if messages.first?.role == "system" {
                messages[0].content += (messages[0].content.isEmpty ? "" : "\n\n") + section
            } else {
                messages.insert(.system(section), at: 0)
            }
        }
        return messages
    }

    /// A compact description of the response format: the model reads it, the grammar enforces it.
    static func schemaDescription(_ schema: GenerationSchema) -> String {
        "Respond with JSON that matches this schema: \(schema.jsonSchema.compactText)"
    }

    /// The plain text of segments: structured content as JSON, custom segments as their description.
    static func text(of segments: [Transcript.Segment]) -> String {
        segments.map { segment in
            switch segment {
            case .text(let t): t.content
            case .structure(let s): s.content.jsonString
            case .custom(let c): c.description
            case .attachment(let a): a.description
            }
        }.joined(separator: "\n")
    }

    /// The prompt tokens of a transcript, ending with the header of the assistant's turn.
    ///
    /// - Parameter tools: The tools the model may call, rendered by the template when it handles
    ///   tools and in the Plinth format otherwise.
    static func tokens(for transcript: Transcript, model: PlinthRuntime.Model, tools: [Transcript.ToolDefinition] = [],
                       addGenerationPrompt: Bool = true) throws -> [Int32] {
        // The template writes control tokens (<|im_start|>) as text; they are parsed back into ids.
        model.tokenizer.encodeRendered(try text(for: transcript, model: model, tools: tools, addGenerationPrompt: addGenerationPrompt))
    }

    /// The transcript as the model's chat template writes it, before tokenizing.
    static func text(for transcript: Transcript, model: PlinthRuntime.Model, tools: [Transcript.ToolDefinition] = [],
                     addGenerationPrompt: Bool = true) throws -> String {
        guard let template = model.chatTemplate else { throw LocalLanguageModelError.missingChatTemplate(model.url.path) }
        let text: String
        do {
            let native = ToolCallFormat.templateHandlesTools(template)
            var definitions: [JinjaValue]?
            if native && !tools.isEmpty {
                definitions = tools.map { JinjaValue(ToolCallFormat.definitionJSON($0)) }
            }
            text = try template.render(messages: messages(for: transcript, plinthTools: native ? nil : tools),
                                       addGenerationPrompt: addGenerationPrompt, tools: definitions,
                                       extraContext: ChatTemplate.plinthContext)
        } catch {
            throw LocalLanguageModelError.templateFailed(error.localizedDescription)
        }
        return text
    }
}
