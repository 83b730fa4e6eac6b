import Foundation

/// The capabilities a language model declares.
///
/// The session checks a request against the capabilities of the model before it runs it, and
/// throws ``LanguageModelError/unsupportedCapability(_:)`` when the request needs one the model
/// lacks: `.guidedGeneration` for a response with a schema, `.toolCalling` for a session with
/// tools. Declare `.guidedGeneration` only if your model strictly enforces JSON Schema.
public struct LanguageModelCapabilities: Sendable {
    let capabilities: Set<Capability>

    /// Creates a set of capabilities.
    public init(capabilities: [LanguageModelCapabilities.Capability]) {
        self.capabilities = Set(capabilities)
    }

    /// Creates a set of capabilities.
    public init(_ capabilities: [LanguageModelCapabilities.Capability]) {
        self.init(capabilities: capabilities)
    }

    /// Whether the set holds the capability.
    public func contains(_ capability: LanguageModelCapabilities.Capability) -> Bool {
        capabilities.contains(capability)
    }

    /// One capability of a language model.
    public struct Capability: Sendable, Hashable, CustomStringConvertible {
        let name: String

        /// Reading images in prompts.
        public static var vision: Capability { Capability(name: "vision") }
        /// Strictly enforcing a JSON Schema while generating.
        public static var guidedGeneration: Capability { Capability(name: "guided generation") }
        /// Reasoning before responding.
        public static var reasoning: Capability { Capability(name: "reasoning") }
        /// Calling tools.
        public static var toolCalling: Capability { Capability(name: "tool calling") }

        /// The capability's name.
        public var description: String { name }
    }
}
