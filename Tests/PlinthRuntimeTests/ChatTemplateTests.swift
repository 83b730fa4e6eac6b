import Foundation
import Testing
@testable import PlinthRuntime

/// The chat templates of our models, rendered against what HuggingFace transformers renders.
@Suite("ChatTemplate")
struct ChatTemplateTests {
    struct Case: Decodable, Sendable {
        let name: String
        let messages: [ChatMessage]
        let toolsJSON: String?
        let addGenerationPrompt: Bool
        let expected: String?
        /// What jinja2 raised instead of rendering (a conversation the template refuses).
        let error: RaisedError?

        struct RaisedError: Decodable, Sendable {
            let type: String
            let message: String
        }

        enum CodingKeys: String, CodingKey {
            case name, messages, expected, error
            case toolsJSON = "tools_json"
            case addGenerationPrompt = "add_generation_prompt"
        }

        func tools() throws -> [JinjaValue]? {
            guard let toolsJSON else { return nil }
            guard case .array(let tools) = try JinjaValue(json: toolsJSON) else {
                Issue.record("\(name): tools_json is not an array")
                return nil
            }
            return tools
        }
    }

    struct Fixture: Decodable, Sendable {
        let model: String
        let template: String
        let bosToken: String
        let eosToken: String
        let cases: [Case]

        enum CodingKeys: String, CodingKey {
            case model, template, cases
            case bosToken = "bos_token"
            case eosToken = "eos_token"
        }

        func chatTemplate() throws -> ChatTemplate {
            try ChatTemplate(source: template, bosToken: bosToken, eosToken: eosToken)
        }
    }

    static func fixture(_ name: String) throws -> Fixture {
        try TestModels.fixture("chat_templates/\(name).json")
    }

    /// Where two strings first differ, for readable failures.
    static func firstDifference(_ a: String, _ b: String) -> String {
        let x = Array(a.unicodeScalars), y = Array(b.unicodeScalars)
        let i = (0..<min(x.count, y.count)).first { x[$0] != y[$0] } ?? min(x.count, y.count)
        func around(_ s: [Unicode.Scalar]) -> String {
            var v = String.UnicodeScalarView()
            v.append(contentsOf: s[max(0, i - 20)..<min(s.count, i + 20)])
            return String(v).debugDescription
        }
        return "first difference at scalar \(i): got \(around(x)), expected \(around(y))"
    }

    @Test("renders exactly like transformers", arguments: ["smollm2", "qwen2.5-coder", "gemma3"])
    func modelTemplate(_ name: String) throws {
        let fixture = try Self.fixture(name)
        #expect(fixture.cases.count >= 25)
        let template = try fixture.chatTemplate()
        for c in fixture.cases {
            let render = { try template.render(messages: c.messages, addGenerationPrompt: c.addGenerationPrompt, tools: try c.tools()) }
            if let raised = c.error {
                do {
                    let output = try render()
                    Issue.record("\(fixture.model) / \(c.name): rendered \(output.debugDescription), jinja2 raised \(raised.message)")
                } catch let error as ChatTemplateError {
                    guard case .raisedException(let message, _) = error else {
                        Issue.record("\(fixture.model) / \(c.name): \(error), jinja2 raised \(raised.message)")
                        continue
                    }
                    #expect(message == raised.message, "\(fixture.model) / \(c.name)")
                }
                continue
            }
            let expected = try #require(c.expected, "\(c.name): neither output nor error")
            let output = try render()
            #expect(output == expected, "\(fixture.model) / \(c.name): \(Self.firstDifference(output, expected))")
        }
    }

    /// A Gemma 3 file carries no template: the model gets the built-in one of its architecture,
    /// the fixture's.
    @Test func gemmaGetsTheBuiltInTemplate() throws {
        let fixture = try Self.fixture("gemma3")
        #expect(BuiltinChatTemplates.source(forArchitecture: "gemma3") == fixture.template)
        #expect(BuiltinChatTemplates.source(forArchitecture: "llama") == nil)
    }

    @Test func smolLM2InsertsItsDefaultSystemPrompt() throws {
        let template = try Self.fixture("smollm2").chatTemplate()
        let prompt = try template.render(messages: [.user("Hi")], addGenerationPrompt: true)
        #expect(prompt == """
            <|im_start|>system
            You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
            <|im_start|>user
            Hi<|im_end|>
            <|im_start|>assistant

            """)
        let withSystem = try template.render(messages: [.system("Be brief."), .user("Hi")], addGenerationPrompt: false)
        #expect(withSystem == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n")
        #expect(template.bosToken == "<|im_start|>")
        #expect(template.eosToken == "<|im_end|>")
    }

    @Test func qwenPrintsToolsAndToolCallsAsPythonJSON() throws {
        let template = try Self.fixture("qwen2.5-coder").chatTemplate()
        let tool = try JinjaValue(json: #"{"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}"#)
        let messages: [ChatMessage] = [
            .user("Time?"),
            .assistant("", toolCalls: [.init(name: "now", arguments: #"{"tz":"UTC","precise":true}"#)]),
            .tool("12:00"),
            .tool("12:01"),
        ]
        let prompt = try template.render(messages: messages, addGenerationPrompt: true, tools: [tool])
        #expect(prompt.contains("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"now\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>"))
        #expect(prompt.contains("<|im_start|>assistant\n<tool_call>\n{\"name\": \"now\", \"arguments\": {\"tz\": \"UTC\", \"precise\": true}}\n</tool_call><|im_end|>"))
        #expect(prompt.contains("<|im_start|>user\n<tool_response>\n12:00\n</tool_response>\n<tool_response>\n12:01\n</tool_response><|im_end|>\n"))
        #expect(prompt.hasSuffix("<|im_start|>assistant\n"))
    }

    @Test func chatMessageUsesTheOpenAIShape() throws {
        let message = ChatMessage(role: "assistant", content: "",
                                  toolCalls: [.init(id: "call_1", name: "f", arguments: #"{"x": 1}"#)])
        let data = try JSONEncoder().encode(message)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let calls = try #require(object["tool_calls"] as? [[String: Any]])
        #expect(calls.first?["type"] as? String == "function")
        #expect((calls.first?["function"] as? [String: Any])?["arguments"] as? String == #"{"x": 1}"#)
        #expect(try JSONDecoder().decode(ChatMessage.self, from: data) == message)

        let decoded = try JSONDecoder().decode(ChatMessage.self, from: Data(#"{"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "g", "arguments": "{}"}}]}"#.utf8))
        #expect(decoded.content == "")
        #expect(decoded.toolCalls == [.init(name: "g", arguments: "{}")])
        #expect(decoded.toolCallID == nil)
    }

    @Test func templateSeesParsedArgumentsAndOptionalFields() throws {
        let message = ChatMessage(role: "tool", content: "ok", name: "f", toolCallID: "c1")
        #expect(message.templateValue.jsonString() == #"{"role": "tool", "content": "ok", "name": "f", "tool_call_id": "c1"}"#)
        let call = ChatMessage.assistant("", toolCalls: [.init(name: "f", arguments: "not json")])
        #expect(call.templateValue.jsonString() == #"{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "not json"}}]}"#)
    }

    @Test func toolsAreNoneWhenNotGiven() throws {
        let template = try ChatTemplate(source: "{{ tools is none }}|{{ tools is defined }}|{{ documents is none }}|{{ bos_token }}{{ eos_token }}|{{ extra }}",
                                        bosToken: "<s>", eosToken: "</s>")
        #expect(try template.render(messages: [], addGenerationPrompt: false) == "True|True|True|<s></s>|")
        #expect(try template.render(messages: [], addGenerationPrompt: false, tools: [], extraContext: ["extra": 1]) == "False|True|True|<s></s>|1")
    }

    @Test func rejectedConversationsRaiseTypedErrors() throws {
        let template = try ChatTemplate(source: """
            {% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}\
            {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\
            {% endif %}{{ m.content }}{% endfor %}
            """)
        #expect(try template.render(messages: [.user("a"), .assistant("b")], addGenerationPrompt: false) == "ab")
        do {
            _ = try template.render(messages: [.user("a"), .user("b")], addGenerationPrompt: false)
            Issue.record("expected raise_exception")
        } catch {
            guard case .raisedException(let message, let at) = error else {
                Issue.record("expected raisedException, got \(error)")
                return
            }
            #expect(message == "Conversation roles must alternate user/assistant/user/assistant/...")
            #expect(at.line == 1)
            #expect(error.errorDescription?.contains("alternate") == true)
        }
    }

    /// Real-world templates (llama.cpp's collection: Llama 3.x, Mistral, Phi, DeepSeek, Hermes,
    /// Granite, gpt-oss, …), each rendering the conversations `cases` names (those of
    /// qwen2.5-coder.json), against jinja2 configured as transformers configures it.
    struct Corpus: Decodable, Sendable {
        struct Output: Decodable, Sendable {
            let expected: String?
            let error: Case.RaisedError?
        }
        struct Entry: Decodable, Sendable {
            let name: String
            let template: String
            let outputs: [String: Output]
        }
        let source: String
        let now: String
        let bosToken: String
        let eosToken: String
        let cases: [String]
        let templates: [Entry]

        enum CodingKeys: String, CodingKey {
            case source, now, cases, templates
            case bosToken = "bos_token"
            case eosToken = "eos_token"
        }

        static let shared: Corpus? = try? TestModels.fixture("chat_templates/corpus.json")
        static var names: [String] { shared?.templates.map(\.name) ?? [] }

        /// `now` ("YYYY-MM-DDTHH:MM:SS"), read as the local wall-clock time, as Python's naive
        /// datetime is formatted.
        var date: Date {
            let parts = now.split(whereSeparator: { "-T:".contains($0) }).compactMap { Int($0) }
            var c = DateComponents()
            (c.year, c.month, c.day, c.hour, c.minute, c.second) = (parts[0], parts[1], parts[2], parts[3], parts[4], parts[5])
            return Calendar(identifier: .gregorian).date(from: c)!
        }
    }

    @Test func theCorpusIsThere() throws {
        let corpus = try #require(Corpus.shared)
        #expect(corpus.templates.count >= 60)
        #expect(corpus.cases.count >= 10)
        let conversations = Set(try Self.fixture("qwen2.5-coder").cases.map(\.name))
        #expect(corpus.cases.allSatisfy(conversations.contains))
        #expect(corpus.templates.allSatisfy { Set($0.outputs.keys) == Set(corpus.cases) })
    }

    @Test("renders real-world templates as transformers does", arguments: Corpus.names)
    func corpusTemplate(_ name: String) throws {
        let corpus = try #require(Corpus.shared)
        let entry = try #require(corpus.templates.first { $0.name == name })
        let conversations = try Self.fixture("qwen2.5-coder").cases
        let template = try ChatTemplate(source: entry.template, bosToken: corpus.bosToken, eosToken: corpus.eosToken)
        for caseName in corpus.cases {
            let c = try #require(conversations.first { $0.name == caseName })
            let output = try #require(entry.outputs[caseName])
            let render = {
                try template.render(messages: c.messages, addGenerationPrompt: c.addGenerationPrompt, tools: try c.tools(), now: corpus.date)
            }
            if let raised = output.error {
                do {
                    let text = try render()
                    Issue.record("\(name) / \(caseName): rendered \(text.debugDescription), jinja2 raised \(raised.type): \(raised.message)")
                } catch let error as ChatTemplateError {
                    #expect(JinjaTests.matches(error, pythonType: raised.type, message: raised.message),
                            "\(name) / \(caseName): jinja2 raised \(raised.type): \(raised.message); got \(error)")
                }
                continue
            }
            let expected = try #require(output.expected)
            do {
                let text = try render()
                #expect(text == expected, "\(name) / \(caseName): \(Self.firstDifference(text, expected))")
            } catch {
                Issue.record("\(name) / \(caseName): \(error)")
            }
        }
    }

    @Test func invalidTemplateSourceFailsAtInit() {
        #expect(throws: ChatTemplateError.self) { try ChatTemplate(source: "{% for m in messages %}{{ m.content }}") }
    }
}
