import Foundation
import FoundationModels
@testable import Plinth
import Synchronization
import Testing

/// A deterministic tool: temperatures from a fixed table, values the model can't guess.
final class LocalTemperatureTool: Tool {
    let name = "getTemperature"
    let description = "Returns the current temperature in a city, in degrees Celsius."
    let calls = Mutex<[String]>([])
    static let temperatures = ["Paris": 37, "Oslo": -4, "Rome": 20, "Quito": 15]

    @Generable
    struct Arguments {
        @Guide(description: "The name of the city")
        var city: String
    }

    func call(arguments: Arguments) async throws -> String {
        calls.withLock { $0.append(arguments.city) }
        return Self.report(city: arguments.city)
    }

    static func report(city: String) -> String {
        guard let celsius = temperatures[city] else { return "No temperature is known for \(city)." }
        return "The temperature in \(city) is \(celsius) degrees Celsius."
    }
}

/// Tool calling with Qwen2.5-Coder-0.5B, greedy, so each test is one deterministic run.
///
/// Left to itself, this model answers a tool's output by restating its call (under llama.cpp
/// too, from the same prompt tokens, which are those of its chat template); after one earlier
/// exchange in the conversation it answers from the tool's output instead, but then it also
/// tends to answer a new question without calling the tool. So the session starts with such an
/// exchange (other cities, other values) and the request requires a call: the model still
/// chooses the arguments, how many calls to make, and what to answer.
@Suite(.serialized, .enabled(if: LocalTestModels.hasQwen, LocalTestModels.qwenMissing))
struct QwenToolCallingTests {
    let model = LocalLanguageModel(name: LocalTestModels.qwen)
    let options = GenerationOptions(samplingMode: .greedy, maximumResponseTokens: 64, toolCallingMode: .required)

    /// A session whose history is one exchange: two calls, their outputs, an answer.
    func session(with tool: LocalTemperatureTool) -> LanguageModelSession {
        let cities = ["Rome", "Quito"]
        let calls = cities.enumerated().map { i, city in
            Transcript.ToolCall(id: "call_\(i)", toolName: tool.name, arguments: GeneratedContent(properties: ["city": city]))
        }
        let outputs = zip(calls, cities).map { call, city in
            Transcript.Entry.toolOutput(.init(id: call.id, toolName: tool.name,
                                              segments: [.text(.init(content: LocalTemperatureTool.report(city: city)))]))
        }
        let history: [Transcript.Entry] = [
            .prompt(.init(segments: [.text(.init(content: "What are the temperatures in Rome and Quito right now?"))])),
            .toolCalls(.init(calls)),
        ] + outputs + [
            .response(.init(segments: [.text(.init(content: "It is 20 degrees Celsius in Rome and 15 degrees Celsius in Quito."))])),
        ]
        return LanguageModelSession(model: model, tools: [tool], transcript: Transcript(entries: history))
    }

    /// The kinds of the entries this request added to the transcript, in order.
    static func newKinds(_ transcript: Transcript, after count: Int) -> [String] {
        transcript.dropFirst(count).map { entry in
            switch entry {
            case .instructions: "instructions"
            case .prompt: "prompt"
            case .toolCalls(let calls): "calls(\(calls.count))"
            case .toolOutput: "output"
            case .response: "response"
            case .reasoning: "reasoning"
            }
        }
    }

    @Test func callsTheToolAndAnswersWithItsOutput() async throws {
        let tool = LocalTemperatureTool()
        let session = session(with: tool)
        let before = session.transcript.count
        let response = try await session.respond(to: "What is the temperature in Paris right now?", options: options)
        #expect(tool.calls.withLock { $0 } == ["Paris"])
        #expect(Self.newKinds(session.transcript, after: before) == ["prompt", "calls(1)", "output", "response"])
        #expect(response.content.contains("37"), "\(response.content)")
    }

    /// Without an earlier exchange the model's second round restates its call: the repeat is
    /// taken back (the tool runs once) and the model must answer in text.
    @Test func aRestatedCallIsTakenBack() async throws {
        let tool = LocalTemperatureTool()
        let session = LanguageModelSession(model: model, tools: [tool], instructions: "You are a helpful assistant.")
        _ = try await session.respond(to: "What is the temperature in Paris right now?",
                                      options: GenerationOptions(samplingMode: .greedy, maximumResponseTokens: 48))
        #expect(tool.calls.withLock { $0 } == ["Paris"])
        #expect(Self.newKinds(session.transcript, after: 1) == ["prompt", "calls(1)", "output", "response"])
    }

    /// A turn's opening text is a call only once it names a declared tool: a JSON answer,
    /// fenced or not, stays text; blanks inside the object are cut as the call grammar has them.
    @Test func onlyAnObjectNamingAToolOpensACall() throws {
        let tool = Transcript.ToolDefinition(tool: LocalTemperatureTool())
        let calling = try #require(try LocalGeneration.toolCalling([tool], required: false, instance: model.instance()))
        func opening(_ text: String) -> TurnConstraint.UntaggedCall {
            TurnConstraint.untaggedCall(in: Array(text.utf8), grammar: calling.grammar)
        }
        let call = Array(#"{"name": "getTemperature", "#.utf8)
        #expect(opening("```json\n{\n  \"name\": \"getTemperature\", ") == .call(Array("{\n\"name\": \"getTemperature\", ".utf8)))
        #expect(opening(#"  {"name": "getTemperature", "#) == .call(call))
        #expect(opening("```\n{\"name\":\"getTemperature\"") == .call(Array(#"{"name":"getTemperature""#.utf8)))
        for undecided in ["", " \n", "`", "```", "```js", "```json\n", "```json\n {", #"{"na"#, #"{ "name" :"#, #"{"name": "getTemp"#] {
            #expect(opening(undecided) == .undecided, "\(undecided)")
        }
        for text in ["Hello", "```python\n{", #"{"city": "Oslo"}"#, #"{"name": "Ada", "age": 36}"#, "```json\n{\"name\": \"getTemperatures\"",
                     #"{"name": "getTemperature\u0041"#, "[{"] {
            #expect(opening(text) == .none, "\(text)")
        }
    }

    @Test func callsTheToolTwiceInOneTurnAndAnswersWithBothOutputs() async throws {
        let tool = LocalTemperatureTool()
        let session = session(with: tool)
        let before = session.transcript.count
        // (Greedy decoding of a 0.5B model is fragile: "… in Paris and Oslo …" made two calls
        // while the k-quants' activations had llama.cpp's Q8_K rounding and one since they have a
        // scale per 32; this phrasing and three others tried make two.)
        let response = try await session.respond(to: "What are the temperatures in Paris and in Oslo right now?", options: options)
        #expect(tool.calls.withLock { $0 } == ["Paris", "Oslo"])
        // Both calls in one entry: the model made them in one turn.
        #expect(Self.newKinds(session.transcript, after: before) == ["prompt", "calls(2)", "output", "output", "response"])
        #expect(response.content.contains("37") && response.content.contains("-4"), "\(response.content)")
    }
}

/// Tests of the tool-call format that need no model file.
struct LocalToolCallingTests {
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
