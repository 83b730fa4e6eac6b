import ArgumentParser
import Foundation
import Plinth

struct Respond: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Answer one prompt through a language model session.",
        discussion: """
            Runs the prompt as one turn of a LanguageModelSession on a local model, the way an app \
            using the Foundation Models API would. With --schema, the response is decoded under \
            the JSON Schema in FILE.json, so it always matches it, and standard output holds \
            exactly that JSON value (with --stream, the JSON as it is written); scripts can pipe \
            it. Diagnostics and timings go to standard error.
            """
    )

    @OptionGroup var options: SessionOptions

    @Option(help: "A JSON Schema file (draft 2020-12 or draft-07) that the response must match.")
    var schema: String?

    @Flag(help: "Print the response as it is generated.")
    var stream = false

    @Flag(help: "Don't put the schema into the prompt (the decoder still enforces it).")
    var noSchemaInPrompt = false

    @Flag(help: "Do not print timings to stderr.")
    var quiet = false

    @Argument(help: "The prompt.")
    var prompt: String

    func run() async throws {
        try await reportingErrors {
            let generationSchema = try schema.map(Self.readSchema)
            let model = try options.localModel()
            let session = options.session(model)
            var generationOptions = options.generationOptions
            // A value always closes within its budget; without one it could run to the context's end.
            if generationSchema != nil && generationOptions.maximumResponseTokens == nil {
                generationOptions.maximumResponseTokens = Self.defaultSchemaBudget
            }
            let output = StandardOutput()
            let usage: LanguageModelSession.Usage
            if let generationSchema, let path = schema {
                do {
                    let responses = session.streamResponse(to: prompt, schema: generationSchema,
                                                           includeSchemaInPrompt: !noSchemaInPrompt,
                                                           options: generationOptions)
                    if stream {
                        for try await snapshot in responses { try output.extend(to: snapshot.rawContent.jsonPrefix) }
                    }
                    let response = try await responses.collect()
                    try output.extend(to: response.rawContent.jsonString)
                    usage = response.usage
                } catch LocalLanguageModelError.schemaNotEnforceable(_, let reason) {
                    // Named by its file: a schema read from JSON has no type name of its own.
                    throw CLIError("the schema in \(path) can't be enforced while decoding: \(reason)")
                } catch {
                    // A partial value is no value: the streamed prefix ends its line, nothing more.
                    if !output.isEmpty { try? output.write("\n") }
                    throw Self.explained(error)
                }
            } else {
                let responses = session.streamResponse(to: prompt, options: generationOptions)
                var written = ""
                do {
                    for try await snapshot in responses {
                        written = snapshot.content
                        if stream { try output.extend(to: written) }
                    }
                    let response = try await responses.collect()
                    try output.extend(to: response.content)
                    usage = response.usage
                } catch {
                    // What the model wrote before it failed (the context filled) is printed, then the error.
                    if !written.isEmpty {
                        try? output.extend(to: written)
                        try? output.write("\n")
                    }
                    throw Self.explained(error)
                }
            }
            try output.write("\n")
            if !quiet { Diagnostics.note(speedNote(session.transcript, usage: usage)) }
        }
    }

    /// The error, with the option that helps where one does.
    static func explained(_ error: any Error) -> any Error {
        guard Chat.isContextFull(error) else { return error }
        return CLIError("\((error as? LocalizedError)?.errorDescription ?? "\(error)") (-c sets a larger context, up to the model's)")
    }

    /// The response budget with --schema when --max-tokens is not given.
    static let defaultSchemaBudget = 512

    static func readSchema(_ path: String) throws -> GenerationSchema {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read the schema file \(path)")
        }
        do {
            return try GenerationSchema(jsonSchema: String(decoding: data, as: UTF8.self))
        } catch let error as GeneratedContent.ParsingError {
            throw CLIError("\(path) is not a JSON Schema: \(error.debugDescription)")
        }
    }
}

/// Standard output that only ever grows: each update writes what the new text adds to what is
/// already printed, so streamed text ends up exactly as the final text.
final class StandardOutput {
    /// How many bytes of the current text are printed.
    private var printed: [UInt8] = []

    func write(_ text: String) throws {
        try Output.write(text)
    }

    /// Compared as bytes: a combining mark that arrives later extends the bytes, not the characters.
    func extend(to text: String) throws {
        let bytes = Array(text.utf8)
        guard bytes.starts(with: printed) else {
            throw CLIError("the streamed text changed after it was printed")
        }
        guard bytes.count > printed.count else { return }
        try Output.write(Data(bytes[printed.count...]))
        printed = bytes
    }

    /// Starts over for a new response.
    func reset() { printed = [] }

    /// Whether nothing of the current text is printed yet.
    var isEmpty: Bool { printed.isEmpty }
}
