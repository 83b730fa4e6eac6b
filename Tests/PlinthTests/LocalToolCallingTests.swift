import Foundation
import FoundationModels
@testable import Plinth
import Synchronization
import Testing

/// A deterministic tool: the answer carries a value the model can't guess.
final class LocalTemperatureTool: Tool {
    let name = "getTemperature"
    let description = "Returns the current temperature in a city, in degrees Celsius."
    let calls = Mutex<[String]>([])

    @Generable
    struct Arguments {
        @Guide(description: "The name of the city")
        var city: String
    }

    func call(arguments: Arguments) async throws -> String {
        calls.withLock { $0.append(arguments.city) }
        return "The temperature in \(arguments.city) is 37 degrees Celsius."
    }
}

@Suite(.serialized)
struct LocalToolCallingTests {
    @Test(.enabled(if: LocalTestModels.hasQwen, LocalTestModels.qwenMissing))
    func qwenCallsTheToolAndAnswersWithItsOutput() async throws {
        let tool = LocalTemperatureTool()
        let session = LanguageModelSession(model: LocalLanguageModel(name: LocalTestModels.qwen), tools: [tool],
                                           instructions: "You are a helpful assistant. After a tool responds, answer the user in one sentence with the value it gave.")
        let response = try await session.respond(to: "What is the temperature in Paris right now?",
                                                 options: GenerationOptions(sampling: .greedy, maximumResponseTokens: 48))
        // Called once with valid arguments: the second round's repeat of the same call is taken back.
        #expect(tool.calls.withLock { $0 } == ["Paris"])
        withKnownIssue("Qwen2.5-Coder-0.5B restates the call instead of reading the tool's output") {
            #expect(response.content.contains("37"))
        }
        let kinds = session.transcript.map { entry -> String in
            switch entry {
            case .toolCalls: "calls"
            case .toolOutput: "output"
            case .response: "response"
            default: "other"
            }
        }
        #expect(kinds.suffix(3) == ["calls", "output", "response"])
    }

    @Test func callSchemaAdmitsOnlyDeclaredTools() throws {
        let tools = [Transcript.ToolDefinition(tool: LocalTemperatureTool()), Transcript.ToolDefinition(tool: GetWeatherTool())]
        let schema = ToolCallFormat.callSchema(for: tools)
        guard case .array(let alternatives)? = schema["anyOf"] else { Issue.record("anyOf over the tools"); return }
        #expect(alternatives.compactMap { $0["properties"]?["name"]?["const"] } == [.string("getTemperature"), .string("getWeather")])
        #expect(try ToolCallFormat.parseCall(#"{"name": "getWeather", "arguments": {"city": "Rome"}}"#) == ("getWeather", #"{"city":"Rome"}"#))
    }

    @Test func plinthFormatRendersDefinitionsCallsAndOutputs() throws {
        let tool = Transcript.ToolDefinition(tool: LocalTemperatureTool())
        let transcript = Transcript(entries: [
            .instructions(.init(segments: [.text(.init(content: "Be brief."))], toolDefinitions: [tool])),
            .prompt(.init(segments: [.text(.init(content: "Oslo?"))])),
            .toolCalls(.init([Transcript.ToolCall(id: "1", toolName: "getTemperature",
                                                  arguments: GeneratedContent(properties: ["city": "Oslo"]))])),
            .toolOutput(.init(id: "1", toolName: "getTemperature", segments: [.text(.init(content: "5 degrees"))])),
        ])
        let messages = TranscriptRenderer.messages(for: transcript, plinthTools: [tool])
        #expect(messages.map(\.role) == ["system", "user", "assistant", "user"])
        #expect(messages[0].content.hasPrefix("Be brief.\n\n# Tools"))
        #expect(messages[0].content.contains(#""name":"getTemperature""#))
        #expect(messages[2].content == "<tool_call>\n{\"name\": \"getTemperature\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>")
        #expect(messages[3].content == "<tool_response>\n5 degrees\n</tool_response>")
    }
}
