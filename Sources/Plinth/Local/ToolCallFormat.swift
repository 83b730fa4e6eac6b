import Foundation
internal import PlinthGrammar
internal import PlinthRuntime

/// How local models see tools and write tool calls.
///
/// Every local model writes a call the way Qwen2.5 (and Hermes) models are trained to:
///
/// ```text
/// <tool_call>
/// {"name": "getWeather", "arguments": {"city": "Paris"}}
/// </tool_call>
/// ```
///
/// Several calls in one turn are several such blocks, separated by a newline. The decoder runs
/// free (or under the response schema) until the model writes `<tool_call>`; from there the JSON
/// object is decoded under a grammar that admits exactly the declared tools — `name` is one of
/// their names and `arguments` follows that tool's `Arguments` schema — so a call always parses
/// and always names an available tool. After the closing tag the model may open another call or
/// end its turn, nothing else.
///
/// Models whose chat template handles tools (it reads the `tools` variable, as Qwen2.5's does)
/// get the definitions, calls and outputs through that template: their native format. Other
/// models (SmolLM2) get the **Plinth tool format**, which is the same text rendered by Plinth
/// rather than by the template:
///
/// - the system message ends with a `# Tools` section that lists each tool as
///   `{"type": "function", "function": {"name", "description", "parameters"}}` inside
///   `<tools></tools>` and says how to write a call (the block above);
/// - an earlier call is an assistant message whose text is its `<tool_call>` blocks;
/// - a tool's output is a user message `<tool_response>\nOUTPUT\n</tool_response>`.
enum ToolCallFormat {
    static let opening = "<tool_call>"
    static let closing = "</tool_call>"

    /// Whether the model's chat template renders tool definitions and calls itself.
    static func templateHandlesTools(_ template: ChatTemplate) -> Bool {
        template.source.contains("tools") && template.source.contains(opening)
    }

    /// A tool definition in the OpenAI shape chat templates read.
    static func definitionJSON(_ tool: Transcript.ToolDefinition) -> JSONValue {
        .object([
            ("type", .string("function")),
            ("function", .object([
                ("name", .string(tool.name)),
                ("description", .string(tool.description)),
                ("parameters", tool.parameters.jsonSchema),
            ])),
        ])
    }

    /// The `# Tools` section the Plinth format appends to the system message (the wording of
    /// Qwen2.5's template, so both formats read alike).
    static func systemSection(for tools: [Transcript.ToolDefinition]) -> String {
        var text = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            + "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
        for tool in tools { text += "\n" + definitionJSON(tool).compactText }
        text += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
            + "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
        return text
    }

    /// The text of a call as the model writes it.
    static func callText(name: String, arguments: String) -> String {
        "\(opening)\n{\"name\": \(JSONWriter.quoted(name)), \"arguments\": \(arguments)}\n\(closing)"
    }

    /// The text of a tool's output in the Plinth format.
    static func outputText(_ output: String) -> String {
        "<tool_response>\n\(output)\n</tool_response>"
    }

    /// The JSON Schema of one call object: `{"name": NAME, "arguments": ARGS}` for any declared
    /// tool. Named types of the tools' schemas move to the root `$defs`, where their `$ref`s point.
    static func callSchema(for tools: [Transcript.ToolDefinition]) -> JSONValue {
        var defs: [(String, JSONValue)] = []
        let alternatives: [JSONValue] = tools.map { tool in
            var arguments = DecodingSchema.narrowed(tool.parameters.jsonSchema)
            if case .object(var pairs) = arguments {
                if let i = pairs.firstIndex(where: { $0.0 == "$defs" }) {
                    if case .object(let named) = pairs[i].1 {
                        for (name, schema) in named where !defs.contains(where: { $0.0 == name }) { defs.append((name, schema)) }
                    }
                    pairs.remove(at: i)
                }
                arguments = .object(pairs)
            }
            return .object([
                ("type", .string("object")),
                ("properties", .object([("name", .object([("const", .string(tool.name))])), ("arguments", arguments)])),
                ("required", .array([.string("name"), .string("arguments")])),
                ("additionalProperties", .bool(false)),
            ])
        }
        var root: [(String, JSONValue)] = alternatives.count == 1
            ? (alternatives[0].objectMembers ?? []) : [("anyOf", .array(alternatives))]
        if !defs.isEmpty { root.append(("$defs", .object(defs))) }
        return .object(root)
    }

    /// Reads a call object the grammar let through: the tool's name and its arguments as JSON text.
    static func parseCall(_ text: String) throws -> (name: String, arguments: String) {
        let value = try JSONValue(parsing: text)
        guard case .string(let name)? = value["name"], let arguments = value["arguments"] else {
            throw LanguageModelSession.GenerationError.decodingFailure(.init(debugDescription: "The tool call has no name or arguments: \(text)"))
        }
        return (name, arguments.compactText)
    }
}

/// What the engine needs to let the model call tools in a turn.
struct LocalToolCalling: Sendable {
    /// The grammar of one call object.
    var grammar: CompiledGrammar
    /// Tokens whose text begins `<tool_call>`: the ways a call can start.
    var openingTokens: Set<Int32>
    /// Tokens whose text begins `\n<tool_call>`: the ways a further call can start.
    var separatorTokens: Set<Int32>
    /// Whether the turn must start with a call.
    var required: Bool
    /// The calls (compact `{"name","arguments"}` JSON) already answered in this request: the
    /// model answers instead of repeating one.
    var answeredCalls: Set<String> = []

    static let openingBytes = Array(ToolCallFormat.opening.utf8)
    static let separatorBytes = Array(("\n" + ToolCallFormat.opening).utf8)

    /// The tokens whose bytes are a non-empty prefix of `text`.
    static func prefixTokens(of text: [UInt8], tokenizer: Tokenizer) -> Set<Int32> {
        var out = Set<Int32>()
        for id in 0..<Int32(tokenizer.vocabularySize) {
            let isPrefix = tokenizer.withTokenBytes(id) { bytes in
                !bytes.isEmpty && bytes.count <= text.count && zip(bytes, text).allSatisfy { $0 == $1 }
            }
            if isPrefix { out.insert(id) }
        }
        return out
    }
}
