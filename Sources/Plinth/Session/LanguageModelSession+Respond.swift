import Foundation

// The respond and streamResponse methods: for each of a `Prompt`, a `String` and a prompt
// builder, a text response, a response that follows a schema, and a response of a Generable
// type; in the Xcode 26 form (`includeSchemaInPrompt:`) and the form with context options
// and metadata.

extension LanguageModelSession {
    /// Produces a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A string composed of the tokens produced by sampling model output.
    @discardableResult
    nonisolated(nonsending) public func respond(to prompt: Prompt, options: GenerationOptions = GenerationOptions()) async throws -> Response<String> {
        try await run(prompt: prompt, schema: nil, options: options, contextOptions: ContextOptions(), metadata: [:])
    }
    /// Produces a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A string composed of the tokens produced by sampling model output.
    @discardableResult
    nonisolated(nonsending) public func respond(to prompt: String, options: GenerationOptions = GenerationOptions()) async throws -> Response<String> {
        try await run(prompt: Prompt(prompt), schema: nil, options: options, contextOptions: ContextOptions(), metadata: [:])
    }
    /// Produces a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A string composed of the tokens produced by sampling model output.
    @discardableResult
    nonisolated(nonsending) public func respond(options: GenerationOptions = GenerationOptions(), @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<String> {
        try await run(prompt: try prompt(), schema: nil, options: options, contextOptions: ContextOptions(), metadata: [:])
    }
    /// Produces a generated content type as a response to a prompt and schema.
    ///
    /// Consider using the default value of `true` for `includeSchemaInPrompt`. The exception
    /// to the rule is when the model has knowledge about the expected response format, either
    /// because it has been trained on it, or because it has seen exhaustive examples during
    /// this session.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    @discardableResult
    nonisolated(nonsending) public func respond(to prompt: Prompt, schema: GenerationSchema, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions()) async throws -> Response<GeneratedContent> {
        try await run(prompt: prompt, schema: schema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a generated content type as a response to a prompt and schema.
    ///
    /// Consider using the default value of `true` for `includeSchemaInPrompt`. The exception
    /// to the rule is when the model has knowledge about the expected response format, either
    /// because it has been trained on it, or because it has seen exhaustive examples during
    /// this session.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    @discardableResult
    nonisolated(nonsending) public func respond(to prompt: String, schema: GenerationSchema, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions()) async throws -> Response<GeneratedContent> {
        try await run(prompt: Prompt(prompt), schema: schema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a generated content type as a response to a prompt and schema.
    ///
    /// Consider using the default value of `true` for `includeSchemaInPrompt`. The exception
    /// to the rule is when the model has knowledge about the expected response format, either
    /// because it has been trained on it, or because it has seen exhaustive examples during
    /// this session.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    @discardableResult
    nonisolated(nonsending) public func respond(schema: GenerationSchema, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions(), @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<GeneratedContent> {
        try await run(prompt: try prompt(), schema: schema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a generable object as a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    @discardableResult
    nonisolated(nonsending) public func respond<Content>(to prompt: Prompt, generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions()) async throws -> Response<Content> where Content: Generable {
        try await run(prompt: prompt, schema: Content.generationSchema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a generable object as a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    @discardableResult
    nonisolated(nonsending) public func respond<Content>(to prompt: String, generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions()) async throws -> Response<Content> where Content: Generable {
        try await run(prompt: Prompt(prompt), schema: Content.generationSchema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a generable object as a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    @discardableResult
    nonisolated(nonsending) public func respond<Content>(generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions(), @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<Content> where Content: Generable {
        try await run(prompt: try prompt(), schema: Content.generationSchema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A string composed of the tokens produced by sampling model output.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    @discardableResult
    nonisolated(nonsending) public func respond(to prompt: Prompt, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(), metadata: [String: any Sendable & Codable & Equatable] = [:]) async throws -> Response<String> {
        try await run(prompt: prompt, schema: nil, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A string composed of the tokens produced by sampling model output.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    @discardableResult
    nonisolated(nonsending) public func respond(to prompt: String, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(), metadata: [String: any Sendable & Codable & Equatable] = [:]) async throws -> Response<String> {
        try await run(prompt: Prompt(prompt), schema: nil, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A string composed of the tokens produced by sampling model output.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    @discardableResult
    nonisolated(nonsending) public func respond(options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(), metadata: [String: any Sendable & Codable & Equatable] = [:], @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<String> {
        try await run(prompt: try prompt(), schema: nil, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a generated content type as a response to a prompt and schema.
    ///
    /// Consider using the default value of `true` for `includeSchemaInPrompt`. The exception
    /// to the rule is when the model has knowledge about the expected response format, either
    /// because it has been trained on it, or because it has seen exhaustive examples during
    /// this session.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    @discardableResult
    nonisolated(nonsending) public func respond(to prompt: Prompt, schema: GenerationSchema, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:]) async throws -> Response<GeneratedContent> {
        try await run(prompt: prompt, schema: schema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a generated content type as a response to a prompt and schema.
    ///
    /// Consider using the default value of `true` for `includeSchemaInPrompt`. The exception
    /// to the rule is when the model has knowledge about the expected response format, either
    /// because it has been trained on it, or because it has seen exhaustive examples during
    /// this session.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    @discardableResult
    nonisolated(nonsending) public func respond(to prompt: String, schema: GenerationSchema, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:]) async throws -> Response<GeneratedContent> {
        try await run(prompt: Prompt(prompt), schema: schema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a generated content type as a response to a prompt and schema.
    ///
    /// Consider using the default value of `true` for `includeSchemaInPrompt`. The exception
    /// to the rule is when the model has knowledge about the expected response format, either
    /// because it has been trained on it, or because it has seen exhaustive examples during
    /// this session.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    @discardableResult
    nonisolated(nonsending) public func respond(schema: GenerationSchema, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:], @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<GeneratedContent> {
        try await run(prompt: try prompt(), schema: schema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a generable object as a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    @discardableResult
    nonisolated(nonsending) public func respond<Content>(to prompt: Prompt, generating type: Content.Type = Content.self, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:]) async throws -> Response<Content> where Content: Generable {
        try await run(prompt: prompt, schema: Content.generationSchema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a generable object as a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    @discardableResult
    nonisolated(nonsending) public func respond<Content>(to prompt: String, generating type: Content.Type = Content.self, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:]) async throws -> Response<Content> where Content: Generable {
        try await run(prompt: Prompt(prompt), schema: Content.generationSchema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a generable object as a response to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: ``GeneratedContent`` containing the fields and values defined in the schema.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    @discardableResult
    nonisolated(nonsending) public func respond<Content>(generating type: Content.Type = Content.self, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:], @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<Content> where Content: Generable {
        try await run(prompt: try prompt(), schema: Content.generationSchema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response stream to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A specific prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces aggregated tokens.
    public func streamResponse(to prompt: Prompt, options: GenerationOptions = GenerationOptions()) -> sending ResponseStream<String> {
        stream(prompt: prompt, schema: nil, options: options, contextOptions: ContextOptions(), metadata: [:])
    }
    /// Produces a response stream to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A specific prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces aggregated tokens.
    public func streamResponse(to prompt: String, options: GenerationOptions = GenerationOptions()) -> sending ResponseStream<String> {
        stream(prompt: Prompt(prompt), schema: nil, options: options, contextOptions: ContextOptions(), metadata: [:])
    }
    /// Produces a response stream to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A specific prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces aggregated tokens.
    public func streamResponse(options: GenerationOptions = GenerationOptions(), @PromptBuilder prompt: () throws -> Prompt) rethrows -> sending ResponseStream<String> {
        stream(prompt: try prompt(), schema: nil, options: options, contextOptions: ContextOptions(), metadata: [:])
    }
    /// Produces a response stream to a prompt and schema.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces ``GeneratedContent`` containing the fields and values defined in the schema.
    public func streamResponse(to prompt: Prompt, schema: GenerationSchema, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions()) -> sending ResponseStream<GeneratedContent> {
        stream(prompt: prompt, schema: schema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a response stream to a prompt and schema.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces ``GeneratedContent`` containing the fields and values defined in the schema.
    public func streamResponse(to prompt: String, schema: GenerationSchema, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions()) -> sending ResponseStream<GeneratedContent> {
        stream(prompt: Prompt(prompt), schema: schema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a response stream to a prompt and schema.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces ``GeneratedContent`` containing the fields and values defined in the schema.
    public func streamResponse(schema: GenerationSchema, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions(), @PromptBuilder prompt: () throws -> Prompt) rethrows -> sending ResponseStream<GeneratedContent> {
        stream(prompt: try prompt(), schema: schema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a response stream for a type.
    ///
    /// Each snapshot holds a `Content.PartiallyGenerated` value with the properties generated
    /// so far.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream.
    public func streamResponse<Content>(to prompt: Prompt, generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions()) -> sending ResponseStream<Content> where Content: Generable {
        stream(prompt: prompt, schema: Content.generationSchema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a response stream for a type.
    ///
    /// Each snapshot holds a `Content.PartiallyGenerated` value with the properties generated
    /// so far.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream.
    public func streamResponse<Content>(to prompt: String, generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions()) -> sending ResponseStream<Content> where Content: Generable {
        stream(prompt: Prompt(prompt), schema: Content.generationSchema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a response stream for a type.
    ///
    /// Each snapshot holds a `Content.PartiallyGenerated` value with the properties generated
    /// so far.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream.
    public func streamResponse<Content>(generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions(), @PromptBuilder prompt: () throws -> Prompt) rethrows -> sending ResponseStream<Content> where Content: Generable {
        stream(prompt: try prompt(), schema: Content.generationSchema, options: options, contextOptions: ContextOptions(includeSchemaInPrompt: includeSchemaInPrompt), metadata: [:])
    }
    /// Produces a response stream to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A specific prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces aggregated tokens.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    public func streamResponse(to prompt: Prompt, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(), metadata: [String: any Sendable & Codable & Equatable] = [:]) -> sending ResponseStream<String> {
        stream(prompt: prompt, schema: nil, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response stream to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A specific prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces aggregated tokens.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    public func streamResponse(to prompt: String, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(), metadata: [String: any Sendable & Codable & Equatable] = [:]) -> sending ResponseStream<String> {
        stream(prompt: Prompt(prompt), schema: nil, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response stream to a prompt.
    ///
    /// - Parameters:
    ///   - prompt: A specific prompt for the model to respond to.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces aggregated tokens.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    public func streamResponse(options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(), metadata: [String: any Sendable & Codable & Equatable] = [:], @PromptBuilder prompt: () throws -> Prompt) rethrows -> sending ResponseStream<String> {
        stream(prompt: try prompt(), schema: nil, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response stream to a prompt and schema.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces ``GeneratedContent`` containing the fields and values defined in the schema.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    public func streamResponse(to prompt: Prompt, schema: GenerationSchema, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:]) -> sending ResponseStream<GeneratedContent> {
        stream(prompt: prompt, schema: schema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response stream to a prompt and schema.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces ``GeneratedContent`` containing the fields and values defined in the schema.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    public func streamResponse(to prompt: String, schema: GenerationSchema, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:]) -> sending ResponseStream<GeneratedContent> {
        stream(prompt: Prompt(prompt), schema: schema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response stream to a prompt and schema.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - schema: A schema to guide the output with.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream that produces ``GeneratedContent`` containing the fields and values defined in the schema.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    public func streamResponse(schema: GenerationSchema, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:], @PromptBuilder prompt: () throws -> Prompt) rethrows -> sending ResponseStream<GeneratedContent> {
        stream(prompt: try prompt(), schema: schema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response stream for a type.
    ///
    /// Each snapshot holds a `Content.PartiallyGenerated` value with the properties generated
    /// so far.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    public func streamResponse<Content>(to prompt: Prompt, generating type: Content.Type = Content.self, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:]) -> sending ResponseStream<Content> where Content: Generable {
        stream(prompt: prompt, schema: Content.generationSchema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response stream for a type.
    ///
    /// Each snapshot holds a `Content.PartiallyGenerated` value with the properties generated
    /// so far.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    public func streamResponse<Content>(to prompt: String, generating type: Content.Type = Content.self, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:]) -> sending ResponseStream<Content> where Content: Generable {
        stream(prompt: Prompt(prompt), schema: Content.generationSchema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    /// Produces a response stream for a type.
    ///
    /// Each snapshot holds a `Content.PartiallyGenerated` value with the properties generated
    /// so far.
    ///
    /// - Parameters:
    ///   - prompt: A prompt for the model to respond to.
    ///   - type: A type to produce as the response.
    ///   - options: Options that control how tokens are sampled from the distribution the model produces.
    /// - Returns: A response stream.
    ///   - contextOptions: What the model sees of the context, such as the schema.
    ///   - metadata: Values for the model provider, kept with the prompt in the transcript.
    @_disfavoredOverload
    public func streamResponse<Content>(generating type: Content.Type = Content.self, options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true), metadata: [String: any Sendable & Codable & Equatable] = [:], @PromptBuilder prompt: () throws -> Prompt) rethrows -> sending ResponseStream<Content> where Content: Generable {
        stream(prompt: try prompt(), schema: Content.generationSchema, options: options, contextOptions: contextOptions, metadata: metadata)
    }
    private func run<Content: Generable>(prompt: Prompt, schema: GenerationSchema?, options: GenerationOptions,
                                         contextOptions: ContextOptions,
                                         metadata: [String: any Sendable & Codable & Equatable]) async throws -> Response<Content> {
        let raw = try await generate(prompt: prompt, schema: schema, options: options, contextOptions: contextOptions,
                                     metadata: metadata, validate: Content.self)
        return try Self.typedResponse(raw, as: Content.self)
    }

    private func stream<Content: Generable>(prompt: Prompt, schema: GenerationSchema?, options: GenerationOptions,
                                            contextOptions: ContextOptions,
                                            metadata: [String: any Sendable & Codable & Equatable]) -> ResponseStream<Content> {
        ResponseStream { [self] yield in
            try await generate(prompt: prompt, schema: schema, options: options, contextOptions: contextOptions,
                               metadata: metadata, validate: Content.self, snapshot: yield)
        }
    }
}
