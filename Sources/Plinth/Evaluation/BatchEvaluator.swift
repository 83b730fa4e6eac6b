import Foundation

/// Runs one instruction and one output schema over many inputs, as fast as the model allows:
/// each input is a prompt to a fresh ``LanguageModelSession`` with the same instructions, many
/// run at once, and on a local model they share the scheduler's steps and the instructions'
/// cached prefix. Results come back in input order.
///
/// Use it for validation sets in tests and for classifying files of records:
///
/// ```swift
/// let evaluator = BatchEvaluator(model: LocalLanguageModel(name: "smollm2"),
///                                instructions: "Classify the policy clause.")
/// let results = try await evaluator.evaluate(clauses, generating: ClauseClassification.self)
/// ```
///
/// With greedy sampling (the default) a result depends only on its input: not on `parallel`,
/// on the other inputs, or on their order. With random sampling and a seed, each input gets a
/// seed of its own derived from the seed and the input's index, so a rerun gives the same text.
public struct BatchEvaluator: Sendable {
    /// One input's result, with what it cost.
    public struct Outcome: Sendable {
        /// The input's index, as given.
        public var index: Int
        /// The generated value, or why there is none.
        public var result: Result<GeneratedContent, Failure>
        /// Tokens of the rendered prompt (instructions and schema included), of them taken from
        /// the prompt cache, and generated.
        public var promptTokens = 0
        public var cachedTokens = 0
        public var generatedTokens = 0
        /// Wall time from submission to the last token.
        public var seconds = 0.0
        /// Whether the response budget steered the value to an early end (it is still valid).
        public var truncatedByBudget = false

        public init(index: Int, result: Result<GeneratedContent, Failure>) {
            self.index = index
            self.result = result
        }
    }

    /// Why an input has no value. A failed input never stops the others.
    public struct Failure: Error, Sendable, Equatable, LocalizedError {
        public enum Kind: String, Sendable, Codable, CaseIterable {
            /// The input is not a JSON object (a line of a JSONL file).
            case invalidJSON
            /// The input lacks the field the prompt is made from.
            case missingField
            /// The prompt and the response budget do not fit in the context window.
            case inputTooLong
            /// The decoder cannot enforce the schema (the same for every input).
            case unsupportedSchema
            /// The model could not produce a value (the message says why).
            case generationFailed
        }

        public var kind: Kind
        public var message: String

        public init(_ kind: Kind, _ message: String) {
            self.kind = kind
            self.message = message
        }

        public var errorDescription: String? { message }
    }

    /// An input: its index and its prompt, or a failure found before generation (a record that
    /// could not be read), which is reported in its place.
    public struct Input: Sendable {
        public var index: Int
        public var prompt: Result<String, Failure>

        public init(index: Int, prompt: Result<String, Failure>) {
            self.index = index
            self.prompt = prompt
        }
    }

    private let makeSession: @Sendable () -> LanguageModelSession
    /// Inputs in flight when `parallel` is nil.
    private let defaultParallel: @Sendable () -> Int
    public let schema: GenerationSchema
    public let options: GenerationOptions
    /// Inputs generating at once; nil: twice as many as a ``LocalLanguageModel`` decodes at once
    /// (16 on the CPU, 64 on a GPU, or its `--parallel`), so that a finished input's place in its
    /// steps is taken at once; 16 for other models.
    public let parallel: Int?
    public let includeSchemaInPrompt: Bool

    /// - Parameters:
    ///   - model: The model every input goes to.
    ///   - instructions: The instructions of each input's session.
    ///   - schema: The type of every value.
    ///   - options: Sampling and the response budget; greedy when `sampling` is not set.
    ///   - parallel: How many inputs generate at once (the scheduler batches them); nil: as many
    ///     as keep the model's steps full (see ``parallel``).
    public init(model: some LanguageModel, instructions: String?, schema: GenerationSchema,
                options: GenerationOptions = GenerationOptions(), parallel: Int? = nil, includeSchemaInPrompt: Bool = true) {
        makeSession = { LanguageModelSession(model: model, instructions: instructions) }
        if let local = model as? LocalLanguageModel {
            defaultParallel = { (try? local.loadedSizing().parallel).map { 2 * $0 } ?? 16 }
        } else {
            defaultParallel = { 16 }
        }
        self.schema = schema
        var options = options
        if options.sampling == nil { options.sampling = .greedy }
        self.options = options
        self.parallel = parallel.map { max(1, $0) }
        self.includeSchemaInPrompt = includeSchemaInPrompt
    }

    /// Evaluates on the default system model.
    public init(instructions: String?, schema: GenerationSchema, options: GenerationOptions = GenerationOptions(),
                parallel: Int? = nil) {
        self.init(model: SystemLanguageModel.default, instructions: instructions, schema: schema, options: options,
                  parallel: parallel)
    }

    // MARK: Typed results

    /// Generates a `Content` for each prompt; results are in the prompts' order.
    public func evaluate<Content: Generable>(_ prompts: [String], generating type: Content.Type = Content.self)
        async throws -> [Result<Content, any Error>]
    {
        let outcomes = try await evaluate(prompts)
        return outcomes.map { outcome in
            outcome.result.mapError { $0 as any Error }.flatMap { content in Result { try Content(content) } }
        }
    }

    /// Evaluates `prompts`; the outcomes are in the prompts' order.
    public func evaluate(_ prompts: [String]) async throws -> [Outcome] {
        var inputs = prompts.enumerated().makeIterator()
        var out: [Outcome] = []
        out.reserveCapacity(prompts.count)
        try await run(next: { inputs.next().map { Input(index: $0.offset, prompt: .success($0.element)) } }) { out.append($0) }
        return out
    }

    // MARK: Streaming

    /// Inputs generating at once: ``parallel``, or as many as keep the model's steps full.
    func inFlight() -> Int { parallel ?? defaultParallel() }

    /// Evaluates the inputs `next` returns (nil at the end) and hands each outcome to `emit` in
    /// input order. At most a few times `parallel` inputs are held at once, so a file of any
    /// size streams through in the same memory. Cancelling the task stops at once: outcomes
    /// already emitted stand, the rest are not emitted.
    public func run(next: () async throws -> Input?, emit: (Outcome) async throws -> Void) async throws {
        let parallel = inFlight()
        let window = max(4 * parallel, 64)
        try await withThrowingTaskGroup(of: (Int, Outcome).self) { group in
            var done: [Int: Outcome] = [:]
            var started = 0, emitted = 0, running = 0
            var exhausted = false
            while true {
                while !exhausted && running < parallel && started - emitted < window {
                    guard let input = try await next() else { exhausted = true; break }
                    let position = started
                    started += 1
                    switch input.prompt {
                    case .failure(let failure):
                        done[position] = Outcome(index: input.index, result: .failure(failure))
                    case .success(let prompt):
                        running += 1
                        group.addTask { (position, try await self.generate(input.index, prompt)) }
                    }
                }
                while let outcome = done.removeValue(forKey: emitted) {
                    try await emit(outcome)
                    emitted += 1
                }
                if running == 0 {
                    if exhausted { break }
                    continue
                }
                guard let (position, outcome) = try await group.next() else { break }
                running -= 1
                done[position] = outcome
                try Task.checkCancellation()
            }
        }
    }

    /// One input through its own session.
    func generate(_ index: Int, _ prompt: String) async throws -> Outcome {
        let session = makeSession()
        let started = DispatchTime.now().uptimeNanoseconds
        var outcome: Outcome
        do {
            let response = try await session.respond(to: prompt, schema: schema, includeSchemaInPrompt: includeSchemaInPrompt,
                                                     options: options(for: index))
            outcome = Outcome(index: index, result: .success(response.rawContent))
            outcome.promptTokens = response.usage.input.totalTokenCount
            outcome.cachedTokens = response.usage.input.cachedTokenCount
            outcome.generatedTokens = response.usage.output.totalTokenCount
            if case .response(let entry)? = response.transcriptEntries.last {
                outcome.truncatedByBudget = entry.metadata["truncatedByBudget"] as? Bool ?? false
            }
        } catch {
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            outcome = Outcome(index: index, result: .failure(Self.failure(error)))
        }
        outcome.seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        return outcome
    }

    /// The options of input `index`: a seeded random mode gets a seed of the input's own.
    func options(for index: Int) -> GenerationOptions {
        var o = options
        switch o.sampling?.kind {
        case .randomTopK(let k, let seed?)?: o.sampling = .random(top: k, seed: Self.mix(seed, index))
        case .randomProbabilityThreshold(let p, let seed?)?: o.sampling = .random(probabilityThreshold: p, seed: Self.mix(seed, index))
        default: break
        }
        return o
    }

    /// A seed per input (SplitMix64's finalizer over the seed and the index).
    static func mix(_ seed: UInt64, _ index: Int) -> UInt64 {
        var z = seed &+ UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    static func failure(_ error: any Error) -> Failure {
        switch error {
        case LanguageModelError.contextSizeExceeded(let c):
            return Failure(.inputTooLong, c.debugDescription)
        case LanguageModelSession.GenerationError.exceededContextWindowSize(let c):
            return Failure(.inputTooLong, c.debugDescription)
        case let error as LocalLanguageModelError:
            if case .schemaNotEnforceable = error { return Failure(.unsupportedSchema, error.localizedDescription) }
            return Failure(.generationFailed, error.localizedDescription)
        default:
            return Failure(.generationFailed, error.localizedDescription)
        }
    }
}
