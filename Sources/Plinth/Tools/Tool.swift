import Foundation

/// A tool that a model can call to gather information at runtime or perform side effects.
///
/// Tool calling gives the model the ability to call your code to incorporate up-to-date
/// information like recent events and data from your app. A tool includes a name and a
/// description that the framework puts in the prompt to let the model decide when and how
/// often to call your tool.
///
/// ```swift
/// struct FindContacts: Tool {
///     let name = "findContacts"
///     let description = "Finds a specific number of contacts"
///
///     @Generable
///     struct Arguments {
///         @Guide(description: "The number of contacts to get", .range(1...10))
///         let count: Int
///     }
///
///     func call(arguments: Arguments) async throws -> [String] {
///         // Fetch the contacts.
///     }
/// }
/// ```
///
/// The session calls the tools the model asks for, several at once when the model asks for
/// several in one turn, puts their output in the transcript, and lets the model continue. A
/// tool may be a class that keeps state between calls, as long as it is `Sendable`.
public protocol Tool<Arguments, Output>: Sendable {
    /// The output that this tool produces for the language model to reason about in
    /// subsequent interactions.
    associatedtype Output: PromptRepresentable

    /// The arguments that this tool should accept.
    ///
    /// Typically arguments are either a ``Generable`` type or ``GeneratedContent``.
    associatedtype Arguments: ConvertibleFromGeneratedContent

    /// A unique name for the tool, such as "get_weather", "toggleDarkMode", or "search
    /// contacts".
    var name: String { get }

    /// A natural language description of when and how to use the tool.
    var description: String { get }

    /// A schema for the parameters this tool accepts.
    var parameters: GenerationSchema { get }

    /// If true, the model's name, description, and parameters schema will be injected into
    /// the instructions of sessions that leverage this tool.
    ///
    /// The default implementation is `true`.
    var includesSchemaInInstructions: Bool { get }

    /// A language model will call this method when it wants to leverage this tool.
    ///
    /// If errors are throw in the body of this method, they will be wrapped in a
    /// ``LanguageModelSession/ToolCallError`` and rethrown at the call site of
    /// ``LanguageModelSession/respond(to:options:)-(Prompt,_)``.
    ///
    /// - Note: This method may be invoked concurrently with itself or with other tools.
    @concurrent func call(arguments: Self.Arguments) async throws -> Self.Output
}

extension Tool {
    /// The name of the tool's type.
    public var name: String { String(describing: Self.self) }

    /// `true`: the tool's definition is part of the instructions.
    public var includesSchemaInInstructions: Bool { true }
}

extension Tool where Self.Arguments: Generable {
    /// The schema of the tool's arguments type.
    public var parameters: GenerationSchema { Arguments.generationSchema }
}
