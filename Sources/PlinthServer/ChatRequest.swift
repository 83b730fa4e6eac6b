import Foundation
import Plinth
import PlinthGrammar

/// A `POST /v1/chat/completions` body, read and checked.
struct ChatRequest: Sendable {
    enum ResponseFormat: Sendable {
        case text
        /// Any JSON object.
        case jsonObject
        /// A JSON Schema document, enforced while decoding.
        case jsonSchema(name: String, schema: JSONValue)

        /// The JSON Schema the decoder enforces, or nil for free text.
        var enforcedSchema: JSONValue? {
            switch self {
            case .text: nil
            case .jsonObject: ChatRequest.anyObjectSchema
            case .jsonSchema(_, let schema): schema
            }
        }
    }

    enum ToolChoice: Sendable, Equatable {
        case auto, none, required
        case named(String)
    }

    var model: String
    var transcript: Transcript
    var parameters: GenerationParameters
    var responseFormat: ResponseFormat
    var tools: [Transcript.ToolDefinition]
    var toolChoice: ToolChoice
    var parallelToolCalls: Bool

    /// The JSON Schema the decoder enforces, or nil for free text.
    var enforcedSchema: JSONValue? { responseFormat.enforcedSchema }

    /// A JSON object: the schema `json_object` enforces.
    static let anyObjectSchema = JSONValue.object([("type", .string("object"))])

    /// `defaultModel` is the model of a body without one (nil: `model` is required).
    init(body: Data, defaultModel: String? = nil) throws {
        let r = try RequestReader(body: body)
        model = try defaultModel.map { try r.string("model") ?? $0 } ?? r.requiredString("model")
        parameters = try GenerationParameters(r, maxTokenKeys: ["max_tokens", "max_completion_tokens"])
        if try r.bool("logprobs") == true {
            parameters.logprobs = try r.integer("top_logprobs", in: 0...20) ?? 0
        } else if r.raw("top_logprobs") != nil {
            throw APIError.invalid("top_logprobs", "`top_logprobs` needs `logprobs` set to true.")
        }
        responseFormat = try Self.responseFormat(r)
        tools = try Self.tools(r)
        toolChoice = try Self.toolChoice(r, tools: tools)
        parallelToolCalls = try r.bool("parallel_tool_calls") ?? true
        guard let messages = try r.array("messages"), !messages.isEmpty else {
            throw APIError.invalid("messages", "`messages` must be a non-empty array.", code: "missing_required_parameter")
        }
        transcript = try Self.transcript(messages, responseFormat: responseFormat)
    }

    /// The tools the model may call in this request, and whether it must call one.
    var callableTools: (tools: [Transcript.ToolDefinition], required: Bool) {
        switch toolChoice {
        case .none: ([], false)
        case .auto: (tools, false)
        case .required: (tools, true)
        case .named(let name): (tools.filter { $0.name == name }, true)
        }
    }

    static func responseFormat(_ r: RequestReader) throws -> ResponseFormat {
        guard let f = try r.object("response_format") else { return .text }
        switch try f.requiredString("type") {
        case "text": return .text
        case "json_object": return .jsonObject
        case "json_schema":
            guard let spec = try f.object("json_schema") else {
                throw APIError.invalid("response_format.json_schema", "`response_format.json_schema` is required for type `json_schema`.",
                                       code: "missing_required_parameter")
            }
            let name = try spec.string("name") ?? "response"
            guard let schema = spec.raw("schema") else {
                // OpenAI's default when no schema is given: any JSON object.
                return .jsonSchema(name: name, schema: anyObjectSchema)
            }
            guard case .object = schema else {
                throw APIError.invalid("response_format.json_schema.schema", "`response_format.json_schema.schema` must be a JSON Schema object.",
                                       code: "invalid_type")
            }
            return .jsonSchema(name: name, schema: schema)
        case let other:
            throw APIError.invalid("response_format.type", "`response_format.type` must be `text`, `json_object` or `json_schema`, not `\(other)`.")
        }
    }

    private static func tools(_ r: RequestReader) throws -> [Transcript.ToolDefinition] {
        guard let items = try r.array("tools") else { return [] }
        var seen = Set<String>()
        return try items.enumerated().map { i, item in
            let tool = try RequestReader(item, path: "tools[\(i)]")
            let type = try tool.string("type") ?? "function"
            guard type == "function" else { throw APIError.invalid(tool.name("type"), "Only `function` tools are supported, not `\(type)`.") }
            guard let f = try tool.object("function") else {
                throw APIError.invalid(tool.name("function"), "`\(tool.name("function"))` is required.", code: "missing_required_parameter")
            }
            let name = try f.requiredString("name")
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
                throw APIError.invalid(f.name("name"), "A function name may hold only letters, digits, `_` and `-`: `\(name)`.")
            }
            guard seen.insert(name).inserted else { throw APIError.invalid(f.name("name"), "Two tools are named `\(name)`.") }
            let parameters = f.raw("parameters") ?? .object([("type", .string("object")), ("properties", .object([]))])
            guard case .object = parameters else {
                throw APIError.invalid(f.name("parameters"), "`\(f.name("parameters"))` must be a JSON Schema object.", code: "invalid_type")
            }
            let schema: GenerationSchema
            do {
                schema = try GenerationSchema(jsonSchema: parameters)
            } catch {
                throw APIError.invalid(f.name("parameters"), "`\(f.name("parameters"))` is not a schema: \(error.localizedDescription)")
            }
            return Transcript.ToolDefinition(name: name, description: try f.string("description") ?? "", parameters: schema)
        }
    }

    private static func toolChoice(_ r: RequestReader, tools: [Transcript.ToolDefinition]) throws -> ToolChoice {
        guard let v = r.raw("tool_choice") else { return .auto }
        if let s = v.stringValue {
            switch s {
            case "auto": return .auto
            case "none": return .none
            case "required":
                guard !tools.isEmpty else { throw APIError.invalid("tool_choice", "`tool_choice` is `required` but no `tools` are given.") }
                return .required
            default: throw APIError.invalid("tool_choice", "`tool_choice` must be `auto`, `none`, `required` or a named function, not `\(s)`.")
            }
        }
        let choice = try RequestReader(v, path: "tool_choice")
        guard let f = try choice.object("function") else {
            throw APIError.invalid("tool_choice.function", "A named `tool_choice` needs `function.name`.", code: "missing_required_parameter")
        }
        let name = try f.requiredString("name")
        guard tools.contains(where: { $0.name == name }) else {
            throw APIError.invalid("tool_choice.function.name", "`tool_choice` names `\(name)`, which is not among the `tools`.")
        }
        return .named(name)
    }

    /// The conversation as a transcript: system and developer messages are instructions, user
    /// messages prompts, assistant messages responses and tool calls, tool messages tool outputs.
    /// With a response format, the last user message carries its schema (rendered before its text,
    /// as sessions render it).
    private static func transcript(_ messages: [JSONValue], responseFormat: ResponseFormat) throws -> Transcript {
        var entries: [Transcript.Entry] = []
        var callNames: [String: String] = [:]
        // The calls of the last assistant message that no tool message has answered yet: as
        // OpenAI's API, every call is answered before the conversation goes on.
        var unanswered: [String] = []
        func requireAnswers(before path: String) throws {
            guard !unanswered.isEmpty else { return }
            throw APIError.invalid(path, "An assistant message with `tool_calls` must be followed by `tool` messages answering each call; "
                                   + "these `tool_call_id`s have none: \(unanswered.joined(separator: ", ")).")
        }
        let lastUser = messages.lastIndex { $0["role"]?.stringValue == "user" }
        for (i, item) in messages.enumerated() {
            let m = try RequestReader(item, path: "messages[\(i)]")
            let role = try m.requiredString("role")
            let text = try content(m, role: role)
            if role != "tool" && role != "function" { try requireAnswers(before: m.path) }
            func segments(_ s: String) -> [Transcript.Segment] { [.text(.init(content: s))] }
            switch role {
            case "system", "developer":
                entries.append(.instructions(.init(segments: segments(text ?? ""), toolDefinitions: [])))
            case "user":
                var format: Transcript.ResponseFormat?
                if i == lastUser, case .jsonSchema(_, let schema) = responseFormat, schema != anyObjectSchema {
                    format = Transcript.ResponseFormat(schema: try GenerationSchema(jsonSchema: schema))
                }
                entries.append(.prompt(.init(segments: segments(text ?? ""), responseFormat: format)))
            case "assistant":
                if let text, !text.isEmpty { entries.append(.response(.init(assetIDs: [], segments: segments(text)))) }
                if let calls = try m.array("tool_calls"), !calls.isEmpty {
                    let parsed: [Transcript.ToolCall] = try calls.enumerated().map { j, call in
                        let c = try RequestReader(call, path: m.name("tool_calls[\(j)]"))
                        let id = try c.requiredString("id")
                        guard let f = try c.object("function") else {
                            throw APIError.invalid(c.name("function"), "`\(c.name("function"))` is required.", code: "missing_required_parameter")
                        }
                        let name = try f.requiredString("name")
                        let arguments = try f.string("arguments") ?? "{}"
                        let content: GeneratedContent
                        do {
                            content = try GeneratedContent(json: arguments.isEmpty ? "{}" : arguments)
                        } catch {
                            throw APIError.invalid(f.name("arguments"), "`\(f.name("arguments"))` must be JSON text: \(error.localizedDescription)")
                        }
                        callNames[id] = name
                        unanswered.append(id)
                        return Transcript.ToolCall(id: id, toolName: name, arguments: content)
                    }
                    entries.append(.toolCalls(.init(parsed)))
                } else if text == nil || text?.isEmpty == true {
                    entries.append(.response(.init(assetIDs: [], segments: segments(""))))
                }
            case "tool":
                let id = try m.requiredString("tool_call_id")
                guard let at = unanswered.firstIndex(of: id) else {
                    throw APIError.invalid(m.name("tool_call_id"), callNames[id] == nil
                        ? "A `tool` message must answer a call of the assistant message before it; no call has the id `\(id)`."
                        : "The call `\(id)` is answered twice, or not by the messages right after it.")
                }
                unanswered.remove(at: at)
                entries.append(.toolOutput(.init(id: id, toolName: try m.string("name") ?? callNames[id] ?? "", segments: segments(text ?? ""))))
            case "function":
                // The deprecated form: the function's result, named by `name`.
                let name = try m.requiredString("name")
                entries.append(.toolOutput(.init(id: try m.string("tool_call_id") ?? "", toolName: name, segments: segments(text ?? ""))))
            default:
                throw APIError.invalid(m.name("role"), "`\(m.name("role"))` must be `system`, `developer`, `user`, `assistant` or `tool`, not `\(role)`.")
            }
        }
        try requireAnswers(before: "messages")
        return Transcript(entries: entries)
    }

    /// A message's text: a string, or the `text` parts of an array of content parts.
    private static func content(_ m: RequestReader, role: String) throws -> String? {
        guard let v = m.raw("content") else {
            if role == "assistant" { return nil }
            throw APIError.invalid(m.name("content"), "`\(m.name("content"))` is required.", code: "missing_required_parameter")
        }
        if let s = v.stringValue { return s }
        guard let parts = v.arrayValue else {
            throw APIError.invalid(m.name("content"), "`\(m.name("content"))` must be a string or an array of content parts.", code: "invalid_type")
        }
        guard !parts.isEmpty else {
            throw APIError.invalid(m.name("content"), "`\(m.name("content"))` is an empty array: give at least one content part, or a string.")
        }
        return try parts.enumerated().map { j, part in
            let p = try RequestReader(part, path: m.name("content[\(j)]"))
            let type = try p.requiredString("type")
            // An assistant's refusal (OpenAI's `refusal` part) is what it said.
            if type == "refusal" && role == "assistant" { return try p.requiredString("refusal") }
            guard type == "text" else {
                throw APIError.invalid(p.name("type"), "Only text content parts are supported, not `\(type)`.")
            }
            return try p.requiredString("text")
        }.joined(separator: "\n")
    }
}
