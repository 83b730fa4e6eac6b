import Foundation
import FoundationModels
import Synchronization
import Testing

/// A weather tool in the shape of Apple's documentation.
struct GetWeatherTool: Tool {
    let name = "getWeather"
    let description = "Retrieve the latest weather information for a city"

    @Generable
    struct Arguments {
        @Guide(description: "The city to get weather information for")
        var city: String
    }

    func call(arguments: Arguments) async throws -> String {
        "The temperature in \(arguments.city) is 21°C and it's sunny."
    }
}

/// A stateful contact finder: a class that remembers what it handed out.
final class FindContactsTool: Tool {
    let name = "findContacts"
    let description = "Finds a specific number of contacts"
    private let handedOut = Mutex<[String]>([])
    private let all = ["Ada", "Grace", "Linus", "Margaret", "Dennis"]

    @Generable
    struct Arguments {
        @Guide(description: "The number of contacts to get", .range(1...10))
        let count: Int
    }

    func call(arguments: Arguments) async throws -> GeneratedContent {
        let names = handedOut.withLock { handed in
            let fresh = all.filter { !handed.contains($0) }.prefix(arguments.count)
            handed += fresh
            return Array(fresh)
        }
        return GeneratedContent(properties: ["contacts": names])
    }

    var calls: [String] { handedOut.withLock { $0 } }
}

/// A tool whose calls wait for each other: they finish only when called concurrently.
final class Counter: Sendable {
    let value = Mutex(0)
}

struct RendezvousTool: Tool {
    let description = "Meets another call"
    let arrived = Counter()
    let expected: Int

    @Generable
    struct Arguments {
        var tag: String
    }

    func call(arguments: Arguments) async throws -> String {
        arrived.value.withLock { $0 += 1 }
        for _ in 0..<300 {
            if arrived.value.withLock({ $0 }) >= expected { return "met \(arguments.tag)" }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw CancellationError()
    }
}

struct FailingTool: Tool {
    let name = "fail"
    let description = "Always fails"
    struct Failure: Error, LocalizedError {
        var errorDescription: String? { "the service is down" }
    }

    func call(arguments: GeneratedContent) async throws -> String {
        throw Failure()
    }

    var parameters: GenerationSchema { GeneratedContent.generationSchema }
}

@Suite struct ToolTests {
    @Test func weatherToolIsCalledAndItsOutputReachesTheModel() async throws {
        let model = ScriptedModel([
            .toolCalls([("call-1", "getWeather", #"{"city": "Cupertino"}"#)]),
            .text("It's sunny and 21°C in Cupertino."),
        ])
        let session = LanguageModelSession(model: model, tools: [GetWeatherTool()],
                                           instructions: "Help the person with getting weather information")
        let response = try await session.respond(to: "What is the temperature in Cupertino?")
        #expect(response.content == "It's sunny and 21°C in Cupertino.")

        guard case .instructions(let instructions) = session.transcript[0] else {
            Issue.record("instructions first")
            return
        }
        #expect(instructions.toolDefinitions.map(\.name) == ["getWeather"])
        #expect(instructions.toolDefinitions[0].parameters == GetWeatherTool.Arguments.generationSchema)

        let entries = Array(response.transcriptEntries)
        #expect(entries.count == 4)
        guard case .toolCalls(let calls) = entries[1], case .toolOutput(let output) = entries[2] else {
            Issue.record("a tool call and its output")
            return
        }
        #expect(calls.first?.toolName == "getWeather")
        #expect(try calls.first?.arguments.value(String.self, forProperty: "city") == "Cupertino")
        #expect(output.id == "call-1")
        #expect(output.description == "The temperature in Cupertino is 21°C and it's sunny.")
        // The second turn sees the tool output; both turns may call the tool.
        let requests = model.script.requests
        #expect(requests.count == 2)
        #expect(requests[1].transcript.count == 4)
        #expect(requests.allSatisfy { $0.enabledToolDefinitions.map(\.name) == ["getWeather"] })
        #expect(response.usage.output.totalTokenCount > 3)
    }

    @Test func statefulClassToolKeepsStateAcrossCalls() async throws {
        let finder = FindContactsTool()
        let model = ScriptedModel([
            .toolCalls([("a", "findContacts", #"{"count": 2}"#)]),
            .toolCalls([("b", "findContacts", #"{"count": 2}"#)]),
            .text("Ada, Grace, Linus and Margaret."),
        ])
        let session = LanguageModelSession(model: model, tools: [finder])
        let response = try await session.respond(to: "Find four contacts, two at a time.")
        #expect(response.content == "Ada, Grace, Linus and Margaret.")
        #expect(finder.calls == ["Ada", "Grace", "Linus", "Margaret"])
        let outputs = response.transcriptEntries.compactMap { entry -> Transcript.ToolOutput? in
            if case .toolOutput(let o) = entry { return o }
            return nil
        }
        #expect(outputs.count == 2)
        guard case .structure(let segment)? = outputs.last?.segments.first else {
            Issue.record("generated content becomes a structured segment")
            return
        }
        #expect(try segment.content.value([String].self, forProperty: "contacts") == ["Linus", "Margaret"])
    }

    @Test func parallelCallsRunConcurrently() async throws {
        let tool = RendezvousTool(expected: 3)
        let model = ScriptedModel([
            .toolCalls([("1", "RendezvousTool", #"{"tag": "a"}"#), ("2", "RendezvousTool", #"{"tag": "b"}"#),
                        ("3", "RendezvousTool", #"{"tag": "c"}"#)]),
            .text("All met."),
        ])
        let session = LanguageModelSession(model: model, tools: [tool])
        let response = try await session.respond(to: "Meet.")
        #expect(response.content == "All met.")
        let outputs = response.transcriptEntries.compactMap { entry -> String? in
            if case .toolOutput(let o) = entry { return o.description }
            return nil
        }
        // Outputs are in the order of the calls.
        #expect(outputs == ["met a", "met b", "met c"])
        #expect(tool.name == "RendezvousTool")
        #expect(tool.includesSchemaInInstructions)
    }

    @Test func toolErrorsAreToolCallErrors() async throws {
        let model = ScriptedModel([.toolCalls([("x", "fail", "{}")])])
        let session = LanguageModelSession(model: model, tools: [FailingTool()])
        let error = await #expect(throws: LanguageModelSession.ToolCallError.self) {
            try await session.respond(to: "Try.")
        }
        #expect(error?.tool.name == "fail")
        #expect(error?.underlyingError is FailingTool.Failure)
        #expect(error?.errorDescription == "The tool 'fail' failed: the service is down")
        // Only the instructions entry (with the tool definitions) remains.
        #expect(session.transcript.count == 1)
    }

    @Test func badArgumentsAreToolCallErrors() async throws {
        let model = ScriptedModel([.toolCalls([("x", "getWeather", #"{"town": "Paris"}"#)])])
        let session = LanguageModelSession(model: model, tools: [GetWeatherTool()])
        let error = await #expect(throws: LanguageModelSession.ToolCallError.self) {
            try await session.respond(to: "Weather?")
        }
        #expect(error?.underlyingError is LanguageModelSession.GenerationError)
    }

    @Test func unknownToolsAreDecodingFailures() async throws {
        let model = ScriptedModel([.toolCalls([("x", "launchRockets", "{}")])])
        let session = LanguageModelSession(model: model, tools: [GetWeatherTool()])
        let error = await #expect(throws: LanguageModelSession.GenerationError.self) {
            try await session.respond(to: "Go.")
        }
        #expect(error?.errorDescription?.contains("launchRockets") == true)
    }

    @Test func theToolLoopIsCapped() async throws {
        let endless = (0..<10).map { ScriptedTurn.toolCalls([("c\($0)", "getWeather", #"{"city": "Oslo"}"#)]) }
        let model = ScriptedModel(endless + [.text("Done asking.")])
        let session = LanguageModelSession(model: model, tools: [GetWeatherTool()])
        let response = try await session.respond(to: "Weather, forever.")
        #expect(response.content == "Done asking.")
        let requests = model.script.requests
        #expect(requests.count == 11)
        #expect(requests[9].enabledToolDefinitions.count == 1)
        #expect(requests[10].enabledToolDefinitions.isEmpty)
        #expect(requests[10].generationOptions.toolCallingMode == .disallowed)
    }

    @Test func disallowedToolCallingSendsNoTools() async throws {
        let model = ScriptedModel([.text("No tools.")])
        let session = LanguageModelSession(model: model, tools: [GetWeatherTool()])
        try await session.respond(to: "x", options: GenerationOptions(toolCallingMode: .disallowed))
        #expect(model.script.requests[0].enabledToolDefinitions.isEmpty)
    }

    @Test func removedToolCallsAreNotCalled() async throws {
        let model = ScriptedModel([
            .custom { _, channel in
                await channel.send(.toolCalls(action: .toolCall(id: "1", name: "fail", action: .appendArguments("{}", tokenCount: 1))))
                await channel.send(.toolCalls(action: .toolCall(id: "2", name: "getWeather",
                                                                 action: .appendArguments(#"{"city":"#, tokenCount: 2))))
                await channel.send(.toolCalls(action: .toolCall(id: "2", name: "getWeather",
                                                                 action: .appendArguments(#""Rome"}"#, tokenCount: 2))))
                await channel.send(.toolCalls(action: .toolCall(id: "2", name: "getWeather",
                                                                 action: .updateMetadata(["source": "test"]))))
                await channel.send(.toolCalls(action: .removeToolCall(id: "1")))
            },
            .text("Rome is sunny."),
        ])
        let session = LanguageModelSession(model: model, tools: [GetWeatherTool(), FailingTool()])
        let response = try await session.respond(to: "Rome?")
        #expect(response.content == "Rome is sunny.")
        guard case .toolCalls(let calls) = response.transcriptEntries.dropFirst().first else {
            Issue.record("tool calls")
            return
        }
        #expect(calls.map(\.id) == ["2"])
        #expect(calls[0].metadata["source"] as? String == "test")
    }
}
