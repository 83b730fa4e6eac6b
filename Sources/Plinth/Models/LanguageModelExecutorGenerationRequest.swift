import Foundation

/// What a session asks an executor to generate: the next turn of a transcript.
public struct LanguageModelExecutorGenerationRequest: Sendable {
    /// The identifier of this turn.
    public var id: UUID
    /// The conversation so far, ending with the prompt or with the outputs of the tools the
    /// model called.
    public var transcript: Transcript
    /// The tools the model may call in this turn; empty when it must answer without tools.
    public var enabledToolDefinitions: [Transcript.ToolDefinition]
    /// The schema the response must follow, or `nil` for text.
    public var schema: GenerationSchema?
    /// How to sample the response.
    public var generationOptions: GenerationOptions
    /// What the model sees of the context, such as whether the schema is in the prompt.
    public var contextOptions: ContextOptions
    /// Values the caller attached to the request.
    public var metadata: [String: any Sendable & Codable & Equatable]

    /// Creates a request.
    public init(id: UUID, transcript: Transcript, enabledTools: [Transcript.ToolDefinition], schema: GenerationSchema? = nil,
                generationOptions: GenerationOptions, contextOptions: ContextOptions,
                metadata: [String: any Sendable & Codable & Equatable]) {
        self.id = id
        self.transcript = transcript
        self.enabledToolDefinitions = enabledTools
        self.schema = schema
        self.generationOptions = generationOptions
        self.contextOptions = contextOptions
        self.metadata = metadata
    }
}
