import Foundation

/// Options that control how the model generates its response to a prompt.
///
/// Create a ``GenerationOptions`` structure when you want to adjust the way the model
/// generates its response. Use this structure to perform various adjustments on how the model
/// chooses output tokens, to specify the penalties for repeating tokens or generating longer
/// responses.
///
/// ```swift
/// let options = GenerationOptions(sampling: .greedy, temperature: nil, maximumResponseTokens: 200)
/// let response = try await session.respond(to: "Name a color.", options: options)
/// ```
public struct GenerationOptions: Sendable, Equatable {
    /// A sampling strategy for how the model picks tokens when generating a response.
    ///
    /// When you execute a prompt on a model, the model produces a probability for every token
    /// in its vocabulary. The sampling strategy controls how the model narrows down the list
    /// of tokens to consider during that process.
    public var samplingMode: GenerationOptions.SamplingMode?

    /// The sampling strategy, by its Xcode 26 name.
    public var sampling: GenerationOptions.SamplingMode? {
        get { samplingMode }
        set { samplingMode = newValue }
    }

    /// Temperature influences the confidence of the models response.
    ///
    /// Apple's framework documents a number between `0` and `1` inclusive. Temperature
    /// is an adjustment applied to the probability distribution prior to sampling. A value of
    /// `1` results in no adjustment. Values less than `1` will make the probability
    /// distribution sharper, with already likely tokens becoming even more likely. Plinth's
    /// local models also take values above `1` (a flatter distribution, as llama.cpp's and
    /// OpenAI's up to `2`); a negative or non-finite value is an error.
    public var temperature: Double?

    /// The maximum number of tokens the model is allowed to produce in its response.
    ///
    /// If the model produce `maximumResponseTokens` before it naturally completes its
    /// response, the response will be terminated early. No error will be thrown.
    public var maximumResponseTokens: Int?

    /// Whether the model may, must, or must not call tools.
    public var toolCallingMode: GenerationOptions.ToolCallingMode?

    /// Creates generation options that control token sampling behavior.
    ///
    /// - Parameters:
    ///   - samplingMode: A strategy to use for sampling from a distribution.
    ///   - temperature: Increasing temperature makes it possible for the model to produce
    ///     less likely responses. Between `0` and `1`, inclusive, in Apple's framework (above
    ///     `1` also works on Plinth's local models).
    ///   - maximumResponseTokens: The maximum number of tokens the model is allowed to
    ///     produce before being artificially halted. Must be positive.
    public init(samplingMode: GenerationOptions.SamplingMode? = nil, temperature: Double? = nil,
                maximumResponseTokens: Int? = nil) {
        self.samplingMode = samplingMode
        self.temperature = temperature
        self.maximumResponseTokens = maximumResponseTokens
    }

    /// Creates generation options that also say whether the model may call tools.
    public init(samplingMode: GenerationOptions.SamplingMode? = nil, temperature: Double? = nil,
                maximumResponseTokens: Int? = nil, toolCallingMode: GenerationOptions.ToolCallingMode?) {
        self.init(samplingMode: samplingMode, temperature: temperature, maximumResponseTokens: maximumResponseTokens)
        self.toolCallingMode = toolCallingMode
    }

    /// Creates generation options that control token sampling behavior, by their Xcode 26
    /// names.
    public init(sampling: GenerationOptions.SamplingMode?, temperature: Double? = nil,
                maximumResponseTokens: Int? = nil) {
        self.init(samplingMode: sampling, temperature: temperature, maximumResponseTokens: maximumResponseTokens)
    }
}

extension GenerationOptions {
    /// A type that defines how values are sampled from a probability distribution.
    ///
    /// A model builds its response to a prompt in a loop. At each iteration in the loop the
    /// model produces a probability distribution for all the tokens in its vocabulary. The
    /// sampling mode controls how a token is selected from that distribution.
    public struct SamplingMode: Sendable, Equatable {
        /// The strategy and its parameters.
        public let kind: GenerationOptions.SamplingMode.Kind

        /// The ways of sampling a token.
        public enum Kind: Sendable, Equatable {
            /// Always the most likely token.
            case greedy
            /// A random token among the `k` most likely ones.
            case randomTopK(Int, seed: UInt64?)
            /// A random token among the most likely ones whose probabilities add up to the
            /// threshold.
            case randomProbabilityThreshold(Double, seed: UInt64?)

            /// The name of ``randomTopK(_:seed:)`` before Xcode 27 beta 3 (construction only: a
            /// `switch` names the current cases, as with Apple's SDK).
            @available(*, deprecated, renamed: "randomTopK(_:seed:)")
            public static func top(k: Int, seed: UInt64?) -> Kind { .randomTopK(k, seed: seed) }

            /// The name of ``randomProbabilityThreshold(_:seed:)`` before Xcode 27 beta 3.
            @available(*, deprecated, renamed: "randomProbabilityThreshold(_:seed:)")
            public static func nucleus(threshold: Double, seed: UInt64?) -> Kind { .randomProbabilityThreshold(threshold, seed: seed) }
        }

        /// A sampling mode that always chooses the most likely token.
        ///
        /// Using this mode will always result in the same output for a given input. Responses
        /// produced with greedy sampling are statistically likely, but may lack the human-like
        /// quality and variety of other sampling strategies.
        public static var greedy: GenerationOptions.SamplingMode { .init(kind: .greedy) }

        /// A sampling mode that considers a fixed number of high-probability tokens.
        ///
        /// Also known as top-k. During the token-selection process, the vocabulary is sorted
        /// by probability and a token is selected from the top `k` candidates.
        ///
        /// - Parameters:
        ///   - k: The number of tokens to consider.
        ///   - seed: An optional random seed used to make output more deterministic.
        public static func random(top k: Int, seed: UInt64? = nil) -> GenerationOptions.SamplingMode {
            .init(kind: .randomTopK(k, seed: seed))
        }

        /// A mode that considers a variable number of high-probability tokens based on the
        /// specified threshold.
        ///
        /// Also known as top-p or nucleus sampling. With nucleus sampling, tokens are sorted
        /// by probability and added to a pool of candidates until the cumulative probability
        /// of the pool exceeds the specified threshold, and then a token is sampled from the
        /// pool.
        ///
        /// - Parameters:
        ///   - probabilityThreshold: A number from `0.0` to `1.0` that increases sampling pool
        ///     size.
        ///   - seed: An optional random seed used to make output more deterministic.
        public static func random(probabilityThreshold: Double, seed: UInt64? = nil) -> GenerationOptions.SamplingMode {
            .init(kind: .randomProbabilityThreshold(probabilityThreshold, seed: seed))
        }
    }

    /// Whether the model may, must, or must not call tools in a response.
    public struct ToolCallingMode: Sendable, Equatable {
        /// The mode.
        public var kind: GenerationOptions.ToolCallingMode.Kind

        /// The tool calling modes.
        public enum Kind: Sendable, Equatable, Hashable {
            /// The model decides whether to call tools.
            case allowed
            /// The model calls at least one tool.
            case required
            /// The model answers without calling tools.
            case disallowed
        }

        /// The model decides whether to call tools.
        public static let allowed = ToolCallingMode(kind: .allowed)
        /// The model calls at least one tool.
        public static let required = ToolCallingMode(kind: .required)
        /// The model answers without calling tools.
        public static let disallowed = ToolCallingMode(kind: .disallowed)
    }
}

/// Options that control what the model sees of the context of a request.
public struct ContextOptions: Sendable, Equatable {
    /// Whether to include the response schema in the prompt, so that the model knows the
    /// shape of the response it is constrained to.
    public var includeSchemaInPrompt: Bool?
    /// How much the model reasons before it responds, for models that reason.
    public var reasoningLevel: ContextOptions.ReasoningLevel?

    /// Creates context options.
    public init(includeSchemaInPrompt: Bool? = nil, reasoningLevel: ContextOptions.ReasoningLevel? = nil) {
        self.includeSchemaInPrompt = includeSchemaInPrompt
        self.reasoningLevel = reasoningLevel
    }

    /// How much a reasoning model reasons.
    public enum ReasoningLevel: Sendable, Equatable {
        /// Brief reasoning.
        case light
        /// Moderate reasoning.
        case moderate
        /// Thorough reasoning.
        case deep
        /// A level named by the model provider.
        case custom(String)
    }
}
