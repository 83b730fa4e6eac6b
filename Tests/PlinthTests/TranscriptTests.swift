import Foundation
import FoundationModels
@testable import Plinth
import Testing

struct Citation: Transcript.CustomSegment {
    var id: String
    var content: Source

    struct Source: Codable, Equatable, Sendable {
        var url: String
        var title: String
    }
}

@Suite struct TranscriptTests {
    /// A session transcript with every kind of entry and segment.
    func richTranscript() async throws -> (LanguageModelSession, Transcript) {
        let model = ScriptedModel([
            .custom { _, channel in
                await channel.send(.reasoning(action: .appendText("The user wants weather.", tokenCount: 5)))
                await channel.send(.reasoning(action: .updateSignature(Data([1, 2, 3]), tokenCount: 1)))
                await channel.send(.toolCalls(action: .toolCall(id: "c1", name: "getWeather",
                                                                 action: .appendArguments(#"{"city": "Lima"}"#, tokenCount: 4))))
            },
            .custom { _, channel in
                await channel.send(.response(entryID: "r1", action: .appendText("Lima: sunny.", tokenCount: 4)))
                await channel.send(.response(action: .updateCustomSegment(
                    Citation(id: "cite", content: .init(url: "https://example.com", title: "Weather")))))
                await channel.send(.response(action: .updateMetadata(["model": "scripted", "latencyMs": 12])))
                await channel.send(.response(action: .updateUsage(input: .init(totalTokenCount: 40, cachedTokenCount: 30),
                                                                  output: .init(totalTokenCount: 4, reasoningTokenCount: 0))))
            },
            .text(#"{"searchTerms": ["a", "b", "c", "d"]}"#),
        ])
        let session = LanguageModelSession(model: model, tools: [GetWeatherTool()], instructions: "Be helpful.")
        let response = try await session.respond(to: "Weather in Lima?", options: GenerationOptions(sampling: .random(top: 5, seed: 42)),
                                                 contextOptions: ContextOptions(reasoningLevel: .custom("quick")),
                                                 metadata: ["user": "u1"])
        #expect(response.usage.input.cachedTokenCount == 30)
        try await session.respond(to: "Suggest searches.", generating: SearchSuggestions.self,
                                  options: GenerationOptions(sampling: .random(probabilityThreshold: 0.9), temperature: 0.7))
        return (session, session.transcript)
    }

    @Test func everyKindOfEntry() async throws {
        let (_, transcript) = try await richTranscript()
        let kinds = transcript.map { entry -> String in
            switch entry {
            case .instructions: "instructions"
            case .prompt: "prompt"
            case .reasoning: "reasoning"
            case .toolCalls: "toolCalls"
            case .toolOutput: "toolOutput"
            case .response: "response"
            }
        }
        #expect(kinds == ["instructions", "prompt", "reasoning", "toolCalls", "toolOutput", "response", "prompt", "response"])
        guard case .reasoning(let reasoning) = transcript[2], case .response(let response) = transcript[5] else {
            Issue.record("reasoning and response")
            return
        }
        #expect(reasoning.description == "The user wants weather.")
        #expect(reasoning.signature == Data([1, 2, 3]))
        #expect(response.id == "r1")
        #expect(response.segments.count == 2)
        #expect(response.metadata["model"] as? String == "scripted")
        if case .custom(let segment) = response.segments[1] {
            #expect((segment as? Citation)?.content.title == "Weather")
        } else {
            Issue.record("a custom segment")
        }
        #expect(transcript[1].description == "(Prompt) Weather in Lima?")
        #expect(transcript[3].description == #"(Tool calls) getWeather({"city":"Lima"})"#)
    }

    @Test func codableJSONIsStableAndRoundTrips() async throws {
        let (_, transcript) = try await richTranscript()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(transcript)
        let decoded = try JSONDecoder().decode(Transcript.self, from: data)
        #expect(try encoder.encode(decoded) == data)
        #expect(decoded.count == transcript.count)
        // Everything but the custom segment's type survives: it reads back as its JSON.
        for (a, b) in zip(transcript, decoded) where a.id != "r1" {
            #expect(a == b)
        }
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(#""type":"toolCalls""#))
        #expect(text.contains(#""version":2"#))
        #expect(text.contains(#""customType":"#))
        guard case .prompt(let prompt) = decoded[1], case .prompt(let typed) = decoded[6] else {
            Issue.record("prompts")
            return
        }
        #expect(prompt.options.sampling == .random(top: 5, seed: 42))
        #expect(prompt.contextOptions.reasoningLevel == .custom("quick"))
        #expect(prompt.metadata["user"] as? String == "u1")
        #expect(typed.responseFormat?.name == "SearchSuggestions")
        #expect(typed.options.temperature == 0.7)
        guard case .instructions(let instructions) = decoded[0] else { return }
        #expect(instructions.toolDefinitions.first?.parameters == GetWeatherTool.Arguments.generationSchema)
    }

    /// Generated content keeps its members' order through a round trip, however the encoder
    /// orders keys (it was random after decoding), and large numbers in the options decode.
    @Test func roundTripsKeepContentOrderAndLargeNumbers() throws {
        let content = GeneratedContent(properties: ["zeta": 1, "alpha": 2, "mid": 3])
        var options = GenerationOptions(sampling: .random(top: Int.max), maximumResponseTokens: Int.max)
        options.temperature = 0.5
        let transcript = Transcript(entries: [
            .prompt(.init(segments: [.text(.init(content: "hi"))], options: options)),
            .toolCalls(.init([Transcript.ToolCall(id: "c", toolName: "t", arguments: content)])),
            .response(.init(assetIDs: [], segments: [.structure(.init(source: "X", content: content))])),
        ])
        for formatting in [JSONEncoder.OutputFormatting(), .sortedKeys] {
            let encoder = JSONEncoder()
            encoder.outputFormatting = formatting
            for _ in 0..<5 {
                let back = try JSONDecoder().decode(Transcript.self, from: try encoder.encode(transcript))
                #expect(back == transcript)
                guard case .response(let r) = back[2], case .structure(let s) = r.segments.first else { Issue.record("response"); continue }
                #expect(s.content.jsonString == #"{"zeta":1,"alpha":2,"mid":3}"#)
            }
        }
        // Version 1 wrote the content as JSON; it still reads.
        let v1 = #"{"version":1,"entries":[{"type":"response","id":"r","assetIDs":[],"segments":[{"type":"structure","id":"s","source":"X","content":{"a":1}}]}]}"#
        let old = try JSONDecoder().decode(Transcript.self, from: Data(v1.utf8))
        guard case .response(let r) = old[0], case .structure(let s) = r.segments.first else { Issue.record("v1"); return }
        #expect(s.content.jsonString == #"{"a":1}"#)
        for bad in [#"{"entries":[],"version":1e300}"#, #"{"version":2,"entries":[{"type":"prompt","id":"p","segments":[],"options":{"maximumResponseTokens":1e300}}]}"#] {
            #expect(throws: DecodingError.self) { try JSONDecoder().decode(Transcript.self, from: Data(bad.utf8)) }
        }
    }

    @Test func aSessionRebuiltFromADecodedTranscriptContinues() async throws {
        let (_, transcript) = try await richTranscript()
        let data = try JSONEncoder().encode(transcript)
        let restored = try JSONDecoder().decode(Transcript.self, from: data)
        let model = ScriptedModel([.text("Welcome back.")])
        let session = LanguageModelSession(model: model, tools: [GetWeatherTool()], transcript: restored)
        let response = try await session.respond(to: "Where were we?")
        #expect(response.content == "Welcome back.")
        #expect(model.script.requests[0].transcript.count == restored.count + 1)
    }

    @Test func transcriptIsACollection() {
        var transcript = Transcript()
        transcript.append(.prompt(Transcript.Prompt(segments: [.text(.init(content: "a"))])))
        transcript.append(contentsOf: [.response(Transcript.Response(assetIDs: [], segments: [.text(.init(content: "b"))]))])
        transcript.insert(.instructions(Transcript.Instructions(segments: [], toolDefinitions: [])), at: 0)
        #expect(transcript.count == 3)
        transcript.removeLast()
        #expect(transcript.count == 2)
        transcript[1] = .prompt(Transcript.Prompt(id: "p", segments: [.text(.init(id: "t", content: "c"))]))
        #expect(transcript[1].id == "p")
        #expect(Transcript(entries: transcript) == transcript)
        let calls = Transcript.ToolCalls([Transcript.ToolCall(id: "1", toolName: "t", arguments: GeneratedContent(properties: [:]))])
        #expect(calls.count == 1 && calls[0].toolName == "t")
        #expect(Transcript.ToolOutput(id: "1", toolName: "t", segments: []).description.isEmpty)
        let format = Transcript.ResponseFormat(type: SearchSuggestions.self)
        #expect(format == Transcript.ResponseFormat(schema: SearchSuggestions.generationSchema))
        #expect(format.description == "SearchSuggestions")
        let segment = Transcript.StructuredSegment(id: "s", schemaName: "X", content: GeneratedContent(1))
        #expect(Transcript.Segment.structure(segment).description == "1")
        #expect(Transcript.Segment.structure(segment).id == "s")
    }

    @Test func promptAndInstructionsBuilders() {
        let include = true
        let items = ["one", "two"]
        let prompt = Prompt {
            "Write a story."
            if include { "Make it short." } else { "Make it long." }
            for item in items { item }
            Optional<String>.none.map { $0 } ?? "Done."
        }
        #expect(Transcript.Prompt(segments: prompt.segments).description == "Write a story.\nMake it short.\none\ntwo\nDone.")
        let instructions = Instructions {
            "You are a coach."
            if !include { "Never shown." }
            ["Be kind.", "Be brief."]
        }
        #expect(Transcript.Instructions(segments: instructions.segments, toolDefinitions: []).description
                == "You are a coach.\nBe kind.\nBe brief.")
    }
}

