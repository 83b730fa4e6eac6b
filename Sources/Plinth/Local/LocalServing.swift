import Foundation
package import PlinthGrammar
package import PlinthRuntime

/// A model loaded for `plinth serve`: the parts of a local model an HTTP API needs beyond Apple's
/// API (raw prompts, JSON Schema documents, per-request sampling), with the scheduler sized by
/// the server's options. Requests render and constrain exactly as sessions do.
package final class ServedModel: Sendable {
    private let instance: LocalModelInstance

    package var url: URL { instance.url }
    package var scheduler: Scheduler { instance.scheduler }
    package var tokenizer: Tokenizer { instance.model.tokenizer }
    /// Most tokens one request may hold (prompt and output).
    package var contextLength: Int { instance.contextSize }

    /// Loads `url` on `backend` with room for `parallel` sequences decoding at once (the
    /// backend's default where nil: 16 on the CPU, 64 on a GPU) and `maxQueued` waiting.
    package init(url: URL, contextLength: Int?, parallel: Int?, maxQueued: Int, backend: LocalLanguageModel.Backend) throws {
        instance = try LocalModelInstance(url: url, contextLength: contextLength, parallel: parallel, maxQueued: maxQueued,
                                          backend: backend.runtime)
    }

    /// Sequences decoding at once.
    package var parallel: Int { instance.scheduler.configuration.maxRunning }

    /// The adapter at `url` at `scale`, read for this model once (later calls share it, and
    /// each scale's copy).
    package func adapter(at url: URL, scale: Float = 1) throws -> LoRAAdapter { try instance.adapter(at: url, scale: scale) }

    /// The prompt of a conversation, ending with the header of the assistant's turn; `tools` are
    /// described as the template (or the Plinth tool format) describes them.
    package func promptTokens(for transcript: Transcript, tools: [Transcript.ToolDefinition]) throws -> [Int32] {
        try TranscriptRenderer.tokens(for: transcript, model: instance.model, tools: tools)
    }

    /// The text of that prompt as the chat template writes it, control tokens as text.
    package func promptText(for transcript: Transcript, tools: [Transcript.ToolDefinition]) throws -> String {
        try TranscriptRenderer.text(for: transcript, model: instance.model, tools: tools)
    }

    /// The grammar of a JSON Schema document as the decoder enforces it, compiled within `timeLimit` seconds.
    package func grammar(jsonSchema: JSONValue, timeLimit: Double) throws -> CompiledGrammar {
        try instance.compiler().compile(schema: jsonSchema, options: GrammarOptions(timeLimit: timeLimit, generatedNumbers: true))
    }

    /// The constraint of the turn that follows `transcript`: the response grammar, the tool-call
    /// router (`tools`, with `required` forcing a call first), both, or none (nil). A call the
    /// transcript already answered since its last prompt is taken back and the model answers instead.
    /// A call the token limit cuts short is dropped: the turn ends at the limit, as OpenAI's
    /// "length", rather than failing.
    package func constraint(response: CompiledGrammar?, tools: [Transcript.ToolDefinition], required: Bool,
                            after transcript: Transcript, timeLimit: Double) throws -> (@Sendable () throws -> any Constraint)? {
        let calling = try LocalGeneration.toolCalling(tools, required: required, answered: LocalGeneration.answeredCalls(transcript),
                                                      instance: instance, timeLimit: timeLimit)
        guard response != nil || calling != nil else { return nil }
        let tokenizer = tokenizer
        return { @Sendable in TurnConstraint(tokenizer: tokenizer, grammar: response, tools: calling, failsOnCutCall: false) }
    }

    /// The name and the arguments (JSON text) of a call the tool grammar let through.
    package static func parseToolCall(_ json: String) throws -> (name: String, arguments: String) {
        try ToolCallFormat.parseCall(json)
    }
}
