/// One message of a conversation, in the shape chat templates expect (the OpenAI and
/// HuggingFace message format).
///
/// When encoded as JSON it uses the OpenAI field names: `role`, `content`, `name`,
/// `tool_calls` and `tool_call_id`.
public struct ChatMessage: Sendable, Codable, Equatable {
    /// A function call the assistant asked for.
    public struct ToolCall: Sendable, Codable, Equatable {
        /// An identifier that the tool's response can refer to, when the model gives one.
        public var id: String?
        /// The name of the function to call.
        public var name: String
        /// The arguments as JSON text, normally an object such as `{"city": "Paris"}`.
        ///
        /// Templates see the parsed value (keys in the order written), so that
        /// `arguments | tojson` prints them the way Python's `json.dumps` would. Text that is
        /// not valid JSON reaches the template as a string.
        public var arguments: String

        /// Creates a tool call; `arguments` is JSON text.
        public init(id: String? = nil, name: String, arguments: String) {
            self.id = id
            self.name = name
            self.arguments = arguments
        }

        private enum CodingKeys: String, CodingKey { case id, type, function }
        private enum FunctionKeys: String, CodingKey { case name, arguments }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decodeIfPresent(String.self, forKey: .id)
            let f = try c.nestedContainer(keyedBy: FunctionKeys.self, forKey: .function)
            name = try f.decode(String.self, forKey: .name)
            arguments = try f.decodeIfPresent(String.self, forKey: .arguments) ?? "{}"
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(id, forKey: .id)
            try c.encode("function", forKey: .type)
            var f = c.nestedContainer(keyedBy: FunctionKeys.self, forKey: .function)
            try f.encode(name, forKey: .name)
            try f.encode(arguments, forKey: .arguments)
        }
    }

    /// `system`, `user`, `assistant` or `tool`.
    public var role: String
    /// The text of the message; empty for an assistant turn that only calls tools.
    public var content: String
    /// The function calls of an assistant turn.
    public var toolCalls: [ToolCall]?
    /// The name of the participant or, for a `tool` message, of the tool that answered.
    public var name: String?
    /// For a `tool` message, the identifier of the call it answers.
    public var toolCallID: String?

    /// Creates a message.
    public init(role: String, content: String, toolCalls: [ToolCall]? = nil, name: String? = nil, toolCallID: String? = nil) {
        self.role = role
        self.content = content
        self.toolCalls = toolCalls
        self.name = name
        self.toolCallID = toolCallID
    }

    /// Instructions that set the assistant's behaviour, usually the first message.
    public static func system(_ content: String) -> ChatMessage { ChatMessage(role: "system", content: content) }
    /// What the user said.
    public static func user(_ content: String) -> ChatMessage { ChatMessage(role: "user", content: content) }
    /// What the assistant replied, and the tools it called.
    public static func assistant(_ content: String, toolCalls: [ToolCall]? = nil) -> ChatMessage {
        ChatMessage(role: "assistant", content: content, toolCalls: toolCalls)
    }
    /// The output of a tool the assistant called.
    public static func tool(_ content: String, name: String? = nil, toolCallID: String? = nil) -> ChatMessage {
        ChatMessage(role: "tool", content: content, name: name, toolCallID: toolCallID)
    }

    private enum CodingKeys: String, CodingKey {
        case role, content, name
        case toolCalls = "tool_calls"
        case toolCallID = "tool_call_id"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        role = try c.decode(String.self, forKey: .role)
        content = try c.decodeIfPresent(String.self, forKey: .content) ?? ""
        toolCalls = try c.decodeIfPresent([ToolCall].self, forKey: .toolCalls)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        toolCallID = try c.decodeIfPresent(String.self, forKey: .toolCallID)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(role, forKey: .role)
        try c.encode(content, forKey: .content)
        try c.encodeIfPresent(toolCalls, forKey: .toolCalls)
        try c.encodeIfPresent(name, forKey: .name)
        try c.encodeIfPresent(toolCallID, forKey: .toolCallID)
    }

    /// The message as a template sees it: `role`, `content`, then `name`, `tool_calls`
    /// (`[{"id"?, "type": "function", "function": {"name", "arguments"}}]`) and
    /// `tool_call_id` when present.
    public var templateValue: JinjaValue {
        var o = JinjaObject()
        o["role"] = .string(role)
        o["content"] = .string(content)
        if let name { o["name"] = .string(name) }
        if let toolCalls {
            o["tool_calls"] = .array(toolCalls.map { call in
                var c = JinjaObject()
                if let id = call.id { c["id"] = .string(id) }
                c["type"] = "function"
                let arguments = (try? JinjaValue(json: call.arguments)) ?? .string(call.arguments)
                c["function"] = .object(["name": .string(call.name), "arguments": arguments])
                return .object(c)
            })
        }
        if let toolCallID { o["tool_call_id"] = .string(toolCallID) }
        return .object(o)
    }
}
