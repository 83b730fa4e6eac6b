import Foundation
import FoundationModels
@testable import Plinth
import PlinthJSON
import PlinthRuntime
import Synchronization
import Testing

// Types for guided generation with the small default model: bounded by guides so that short
// random generations always finish.

@Generable
struct LocalWeather: Equatable {
    @Guide(.anyOf(["sunny", "rainy", "cloudy"]))
    var sky: String
    @Guide(.range(-20...40))
    var celsius: Int
    var windy: Bool
}

@Generable
enum LocalMood: Equatable {
    case happy, sad, calm
}

@Generable
struct LocalPlaylist: Equatable {
    @Guide(.count(3), .element(.range(1...10)))
    var ratings: [Int]
    var mood: LocalMood
    @Guide(.minimum(0.0), .maximum(1.0))
    var volume: Double
}

@Generable
enum LocalShipping: Equatable {
    case standard
    case express(days: Int)
}

@Generable
struct LocalItem: Equatable {
    @Guide(.pattern(/[A-Z]{3}-[0-9]{2}/))
    var sku: String
    @Guide(.range(1...5))
    var quantity: Int
}

@Generable
struct LocalOrder: Equatable {
    var item: LocalItem
    @Guide(.count(1...2))
    var extras: [LocalMood]
    var shipping: LocalShipping
}

@Suite(.serialized, .enabled(if: LocalTestModels.hasSmolLM2, LocalTestModels.smolLM2Missing))
struct LocalLanguageModelTests {
    let model = LocalLanguageModel(name: LocalTestModels.smolLM2)
    let greedy = GenerationOptions(sampling: .greedy, maximumResponseTokens: 16)

    @Test func textGeneration() async throws {
        #expect(model.isAvailable)
        #expect(model.availabilityDescription == nil)
        let session = LanguageModelSession(model: model, instructions: "You answer in one short sentence.")
        let response = try await session.respond(to: "What is the capital of France?", options: greedy)
        #expect(!response.content.isEmpty)
        #expect(response.content.contains("Paris"))
        #expect(response.usage.input.totalTokenCount > 10)
        #expect((1...16).contains(response.usage.output.totalTokenCount))
        #expect(session.transcript.count == 3)
        guard case .response(let entry)? = session.transcript.last else {
            Issue.record("the transcript doesn't end with the response")
            return
        }
        #expect(entry.segments.count == 1)
    }

    @Test func greedyIsDeterministicAndStreamsTheSameText() async throws {
        let first = try await LanguageModelSession(model: model).respond(to: "Name a colour.", options: greedy)
        let second = try await LanguageModelSession(model: model).respond(to: "Name a colour.", options: greedy)
        #expect(first.content == second.content)

        let streamed = LanguageModelSession(model: model).streamResponse(to: "Name a colour.", options: greedy)
        var snapshots: [String] = []
        for try await snapshot in streamed { snapshots.append(snapshot.content) }
        #expect(snapshots.count > 1)
        #expect(snapshots.last == first.content)
        // Each snapshot extends the one before it.
        for (a, b) in zip(snapshots, snapshots.dropFirst()) { #expect(b.hasPrefix(a)) }
    }

    @Test func seededRandomSamplingRepeats() async throws {
        let options = GenerationOptions(sampling: .random(top: 20, seed: 7), temperature: 1.0, maximumResponseTokens: 12)
        let a = try await LanguageModelSession(model: model).respond(to: "Tell me about cats.", options: options)
        let b = try await LanguageModelSession(model: model).respond(to: "Tell me about cats.", options: options)
        #expect(a.content == b.content)
        let nucleus = GenerationOptions(sampling: .random(probabilityThreshold: 0.9, seed: 3), maximumResponseTokens: 8)
        let c = try await LanguageModelSession(model: model).respond(to: "Tell me about cats.", options: nucleus)
        #expect(!c.content.isEmpty)
    }

    @Test func invalidOptionsAreTypedErrors() async throws {
        let session = LanguageModelSession(model: model)
        await #expect(throws: LocalLanguageModelError.self) {
            try await session.respond(to: "Hi", options: GenerationOptions(sampling: .random(top: 0), maximumResponseTokens: 4))
        }
        await #expect(throws: LocalLanguageModelError.self) {
            try await session.respond(to: "Hi", options: GenerationOptions(temperature: -1, maximumResponseTokens: 4))
        }
        #expect(session.transcript.isEmpty)
    }

    /// Random sampling under the grammar: every response decodes and satisfies its guides.
    @Test func guidedGenerationAlwaysDecodes() async throws {
        for seed in UInt64(1)...2 {
            let options = GenerationOptions(sampling: .random(top: 40, seed: seed), temperature: 1.0, maximumResponseTokens: 96)

            let weather = try await LanguageModelSession(model: model)
                .respond(to: "Describe the weather in Oslo.", generating: LocalWeather.self, options: options).content
            #expect(["sunny", "rainy", "cloudy"].contains(weather.sky))
            #expect((-20...40).contains(weather.celsius))

            let playlist = try await LanguageModelSession(model: model)
                .respond(to: "Rate three songs.", generating: LocalPlaylist.self, options: options).content
            #expect(playlist.ratings.count == 3)
            #expect(playlist.ratings.allSatisfy { (1...10).contains($0) })
            #expect((0...1).contains(playlist.volume))

            let order = try await LanguageModelSession(model: model)
                .respond(to: "Order two boxes of tea.", generating: LocalOrder.self, options: options).content
            #expect(order.item.sku.wholeMatch(of: /[A-Z]{3}-[0-9]{2}/) != nil)
            #expect((1...5).contains(order.item.quantity))
            #expect((1...2).contains(order.extras.count))

            let mood = try await LanguageModelSession(model: model)
                .respond(to: "How do you feel?", generating: LocalMood.self, options: options).content
            #expect([LocalMood.happy, .sad, .calm].contains(mood))
        }
    }

    @Test func guidedGenerationWithAndWithoutTheSchemaInThePrompt() async throws {
        let session = LanguageModelSession(model: model)
        let greedy = GenerationOptions(sampling: .greedy, maximumResponseTokens: 48)
        let with = try await session.respond(to: "Weather in Rome?", generating: LocalWeather.self, options: greedy)
        let withTokens = with.usage.input.totalTokenCount
        let without = try await LanguageModelSession(model: model)
            .respond(to: "Weather in Rome?", generating: LocalWeather.self, includeSchemaInPrompt: false, options: greedy)
        #expect(without.usage.input.totalTokenCount < withTokens)
        #expect((-20...40).contains(without.content.celsius))
        // The response is structured content in the transcript.
        guard case .response(let entry)? = session.transcript.last, case .structure(let s)? = entry.segments.first else {
            Issue.record("expected a structured response entry")
            return
        }
        #expect(try LocalWeather(s.content) == with.content)
    }

    @Test func contextOverflowIsReportedBeforePrefill() async throws {
        let session = LanguageModelSession(model: model)
        let error = await #expect(throws: LanguageModelError.self) {
            try await session.respond(to: String(repeating: "dragon ", count: 5000), options: greedy)
        }
        guard case .contextSizeExceeded(let context)? = error else {
            Issue.record("expected contextSizeExceeded, got \(String(describing: error))")
            return
        }
        #expect(context.contextSize == 4096)
        #expect(session.transcript.isEmpty)
        // Text that can't fit whatever its tokens is refused without tokenizing it (8 MB here).
        let huge = await #expect(throws: LanguageModelError.self) {
            try await session.respond(to: String(repeating: "dragon ", count: 1_200_000), options: greedy)
        }
        guard case .contextSizeExceeded(let past)? = huge else {
            Issue.record("expected contextSizeExceeded, got \(String(describing: huge))")
            return
        }
        #expect(past.debugDescription.contains("bytes as the chat template writes it") && past.tokenCount >= 4096, "\(past.debugDescription)")
        // The bound is on what the template writes: reasoning it leaves out doesn't count.
        let reasoned = LanguageModelSession(model: model, transcript: Transcript(entries: [
            .reasoning(.init(segments: [.text(.init(content: String(repeating: "dragon ", count: 1_200_000)))])),
        ]))
        let short = try await reasoned.respond(to: "Hello", options: GenerationOptions(sampling: .greedy, maximumResponseTokens: 4))
        #expect(!short.content.isEmpty)
        // The session is still usable.
        let response = try await session.respond(to: "Hello", options: greedy)
        #expect(!response.content.isEmpty)
        // A response limit past the context is a cap, not a reservation the context must hold.
        let capped = try await session.respond(to: "Hello", options: GenerationOptions(sampling: .greedy, maximumResponseTokens: 100_000))
        #expect(!capped.content.isEmpty)
    }

    @Test func concurrentRequestIsRefused() async throws {
        let session = LanguageModelSession(model: model)
        let long = GenerationOptions(sampling: .greedy, maximumResponseTokens: 32)
        let first = Task { try await session.respond(to: "Write a long story about a dragon.", options: long) }
        while !session.isResponding { await Task.yield() }
        let error = await #expect(throws: LanguageModelSession.GenerationError.self) {
            try await session.respond(to: "Hi", options: greedy)
        }
        guard case .concurrentRequests? = error else {
            Issue.record("expected concurrentRequests, got \(String(describing: error))")
            return
        }
        _ = try await first.value
        #expect(session.transcript.count == 2)
    }

    /// Sessions on one model run together in the scheduler's shared steps, and each gets what
    /// it gets alone: the same greedy text and the same guided value.
    @Test func concurrentSessionsShareStepsAndMatchSequentialRuns() async throws {
        let prompts = ["Name a city in France.", "Describe rain.", "What is a cat?", "Say hello.",
                       "Name a colour.", "What is bread?", "Describe the moon.", "Name a river."]
        let options = GenerationOptions(sampling: .greedy, maximumResponseTokens: 24)
        @Sendable func run(_ i: Int) async throws -> String {
            let session = LanguageModelSession(model: model, instructions: "Answer in one sentence.")
            if i % 2 == 0 {
                return try await session.respond(to: prompts[i], generating: LocalWeather.self, options: options).rawContent.jsonString
            }
            return try await session.respond(to: prompts[i], options: options).content
        }
        var sequential: [String] = []
        for i in prompts.indices { sequential.append(try await run(i)) }
        let before = try model.instance().scheduler.statistics.largestBatch
        let concurrent = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for i in prompts.indices { group.addTask { (i, try await run(i)) } }
            var out = [String](repeating: "", count: prompts.count)
            for try await (i, text) in group { out[i] = text }
            return out
        }
        #expect(concurrent == sequential)
        #expect(try model.instance().scheduler.statistics.largestBatch >= max(before, 2))
    }

    @Test func cancellationStopsGenerationAndLeavesTheSessionUsable() async throws {
        let session = LanguageModelSession(model: model)
        let options = GenerationOptions(sampling: .greedy, maximumResponseTokens: 400)
        let task = Task { try await session.respond(to: "Write a long story about a dragon.", options: options) }
        while !session.isResponding { await Task.yield() }
        try await Task.sleep(for: .milliseconds(200))
        let clock = ContinuousClock()
        let start = clock.now
        task.cancel()
        let outcome = await task.result
        // Stopped between tokens, not after 400 of them.
        #expect(clock.now - start < .seconds(2))
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(!session.isResponding)
        #expect(session.transcript.isEmpty)

        // Cancelling a stream after a few snapshots stops it too.
        let stream = Task {
            var seen = 0
            for try await _ in session.streamResponse(to: "Write a long story about a dragon.", options: options) {
                seen += 1
                if seen == 3 { withUnsafeCurrentTask { $0?.cancel() } }
            }
            return seen
        }
        _ = await stream.result
        while session.isResponding { try await Task.sleep(for: .milliseconds(10)) }
        #expect(session.transcript.isEmpty)
        let response = try await session.respond(to: "Say hi.", options: greedy)
        #expect(!response.content.isEmpty)
    }

    @Test func secondTurnReusesTheKVCache() async throws {
        let session = LanguageModelSession(model: model, instructions: "You are terse.")
        let first = try await session.respond(to: "Name a fruit.", options: greedy)
        let second = try await session.respond(to: "Name another one.", options: greedy)
        #expect(second.usage.input.cachedTokenCount > first.usage.input.totalTokenCount / 2)
        #expect(second.usage.input.totalTokenCount > first.usage.input.totalTokenCount)
    }

    /// Two conversations take turns: each keeps its KV slot, though their prompts share the
    /// chat template's opening.
    @Test func interleavedConversationsKeepTheirCaches() async throws {
        let a = LanguageModelSession(model: model, instructions: "You are terse.")
        let b = LanguageModelSession(model: model, instructions: "You answer in French.")
        let first = try await a.respond(to: "Name a fruit.", options: greedy)
        _ = try await b.respond(to: "Name a city.", options: greedy)
        let second = try await a.respond(to: "Name another one.", options: greedy)
        #expect(second.usage.input.cachedTokenCount >= first.usage.input.totalTokenCount)
    }

    /// The session adds nothing to what the runtime generates: same prompt, same greedy tokens.
    @Test func sessionTextMatchesTheRawRuntime() async throws {
        let url = try #require(LocalTestModels.path(LocalTestModels.smolLM2))
        let runtime = try PlinthRuntime.Model(url: url)
        let prompt = runtime.tokenizer.encodeRendered(try runtime.renderChat([.system("Be brief."), .user("Describe a dragon.")]))
        let scheduler = try Scheduler(model: runtime, configuration: .init(contextLength: 256, slots: 1))
        let text = Mutex("")
        let raw = try scheduler.run(GenerationRequest(prompt: prompt, maxTokens: 12)) { event in
            if case .text(let piece, _) = event { text.withLock { $0 += piece } }
        }
        let session = LanguageModelSession(model: model, instructions: "Be brief.")
        let response = try await session.respond(to: "Describe a dragon.",
                                                 options: GenerationOptions(sampling: .greedy, maximumResponseTokens: 12))
        #expect(response.content == text.withLock { $0 })
        #expect(response.usage.input.totalTokenCount == prompt.count)
        #expect(response.usage.output.totalTokenCount == raw.generatedTokens)
    }

    /// A warm second turn gives exactly the text of a cold session that replays the transcript.
    @Test func warmSecondTurnMatchesAColdReplay() async throws {
        let options = GenerationOptions(sampling: .greedy, maximumResponseTokens: 10)
        let warm = LanguageModelSession(model: model, instructions: "You are terse.")
        _ = try await warm.respond(to: "Name a fruit.", options: options)
        let history = warm.transcript
        let second = try await warm.respond(to: "Name a vegetable.", options: options)
        #expect(second.usage.input.cachedTokenCount > 0)
        let cold = LanguageModelSession(model: model, transcript: history)
        try model.instance().scheduler.forgetCachedPrefixes()
        let replay = try await cold.respond(to: "Name a vegetable.", options: options)
        // Other suites share the model's scheduler, so at most a chat opening can be cached.
        #expect(replay.usage.input.cachedTokenCount < second.usage.input.cachedTokenCount)
        #expect(replay.content == second.content)
    }

    @Test func tokenCountsComeFromTheTokenizer() throws {
        let entries = [Transcript.Entry.prompt(Transcript.Prompt(segments: [.text(.init(content: "Hello there"))]))]
        let counted = try model.tokenCount(for: entries)
        let url = try #require(LocalTestModels.path(LocalTestModels.smolLM2))
        let runtime = try PlinthRuntime.Model(url: url)
        let text = try runtime.renderChat([.user("Hello there")], addGenerationPrompt: false)
        #expect(counted == runtime.tokenizer.encode(text, addSpecial: true, parseSpecial: true).count)
        #expect(model.contextSize == 4096)
    }

    @Test func weightsLoadOncePerProcess() throws {
        let a = try LocalLanguageModel(name: "smollm2").instance()
        let b = try LocalLanguageModel(name: LocalTestModels.smolLM2).instance()
        let url = try #require(LocalTestModels.path(LocalTestModels.smolLM2))
        let c = try LocalLanguageModel(url: url).instance()
        #expect(a === b && b === c)
    }

    /// A model runs where it is told, decoding as many sequences at once as the value that
    /// loaded it asked for; each backend has its own instance of the file, later values (and
    /// auto, where it would pick that backend) share it.
    @Test func backendAndParallelChooseTheInstance() throws {
        // Files of its own (hard links, else copies), so that this test loads them first.
        let url = try #require(LocalTestModels.path(LocalTestModels.smolLM2))
        var files: [URL] = []
        defer { for f in files { try? FileManager.default.removeItem(at: f) } }
        func ownFile() throws -> URL {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-backend-\(UUID().uuidString).gguf")
            do { try FileManager.default.linkItem(at: url, to: file) } catch { try FileManager.default.copyItem(at: url, to: file) }
            files.append(file)
            return file
        }
        let file = try ownFile()
        let cpu = LocalLanguageModel(name: file.path, adapter: nil, backend: .cpu, parallel: 5)
        let sizing = try cpu.loadedSizing()
        #expect(sizing.backend == .cpu && sizing.parallel == 5)
        #expect(try cpu.instance().scheduler.configuration.slots == 13)
        #expect(try LocalLanguageModel(name: file.path, backend: .cpu).instance() === cpu.instance())
        #expect(cpu.executorConfiguration != LocalLanguageModel(name: file.path, adapter: nil, backend: .auto, parallel: 5).executorConfiguration)
        // Loaded with auto first, a file's instance answers for the backend auto picked.
        let second = try ownFile()
        let auto = LocalLanguageModel(name: second.path, adapter: nil, backend: .auto, parallel: 3)
        let picked = try auto.loadedSizing()
        #expect(picked.parallel == 3)
        #expect(try LocalLanguageModel(name: second.path, backend: picked.backend).instance() === auto.instance())
        guard Backend.cudaUnavailableReason != nil else { return }
        // Without a GPU, auto picks the CPU: the instance loaded there; cuda fails to load.
        #expect(try LocalLanguageModel(name: file.path, backend: .auto).instance() === cpu.instance())
        let error = #expect(throws: LocalLanguageModelError.self) { try LocalLanguageModel(name: file.path, backend: .cuda).instance() }
        guard case .loadFailed(_, let reason)? = error else {
            Issue.record("expected loadFailed, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("the CUDA backend is unavailable"))
    }
}

/// How many sequences a loaded model decodes at once, its KV slots and its step's tokens.
struct LocalModelSizingTests {
    typealias Sizing = Scheduler.Configuration.Sizing

    static func fields(_ s: Sizing) -> [Int] { [s.slots, s.maxRunning, s.stepTokens] }

    @Test func defaultsWithoutParallel() {
        let s = LocalModelInstance.sizing(parallel: nil)
        #expect(Self.fields(s.cpu) == [24, 16, 256])
        #expect(Self.fields(s.gpu) == [80, 64, 1024])
    }

    @Test(arguments: [(1, [9, 1, 256], [17, 1, 1024]), (4, [12, 4, 256], [20, 4, 1024]), (256, [264, 256, 512], [272, 256, 1024]),
                      (700, [708, 700, 1400], [716, 700, 1400])])
    func parallelIsWhatRuns(parallel: Int, cpu: [Int], gpu: [Int]) {
        let s = LocalModelInstance.sizing(parallel: parallel)
        #expect(Self.fields(s.cpu) == cpu)
        #expect(Self.fields(s.gpu) == gpu)
    }
}

/// Tests that need no model file.
struct LocalLanguageModelAvailabilityTests {
    @Test func missingModelSaysHowToFetchIt() async throws {
        let empty = ModelStore(home: FileManager.default.temporaryDirectory.appendingPathComponent("plinth-none-\(UUID().uuidString)"))
        let model = LocalLanguageModel(name: "smollm2", store: empty)
        #expect(model.availability == .unavailable(.modelNotReady))
        #expect(model.availabilityDescription?.contains("plinth models fetch") == true)
        let session = LanguageModelSession(model: model)
        await #expect(throws: LocalLanguageModelError.self) { try await session.respond(to: "Hi") }
        #expect(session.transcript.isEmpty)
        #expect(!session.isResponding)

        let file = LocalLanguageModel(url: URL(fileURLWithPath: "/nonexistent/model.gguf"))
        #expect(!file.isAvailable)
        #expect(model.capabilities.contains(.guidedGeneration))
    }

    @Test func aFileThatIsNotAModelFailsToLoad() async throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-bad-\(UUID().uuidString).gguf")
        try Data("not a gguf file".utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let session = LanguageModelSession(model: LocalLanguageModel(url: url))
        let error = await #expect(throws: LocalLanguageModelError.self) { try await session.respond(to: "Hi") }
        guard case .loadFailed? = error else {
            Issue.record("expected loadFailed, got \(String(describing: error))")
            return
        }
    }
}

/// A schema read from a JSON Schema document reaches the decoder as written.
struct JSONSchemaDocumentTests {
    @Test func theDocumentIsKeptWithJSONSchemaMeaning() throws {
        let text = #"{"type":"object","properties":{"code":{"type":"string","pattern":"[0-9]{3}","format":"uuid"},"n":{"type":"integer","multipleOf":3}},"required":["code"]}"#
        let schema = try GenerationSchema(jsonSchema: text)
        // Keywords the node tree doesn't model (format, multipleOf) are still there, and the
        // pattern isn't anchored: in JSON Schema it may match anywhere.
        #expect(try DecodingSchema.jsonSchema(for: schema) == JSONValue(parsing: text))
        #expect(schema.jsonSchema == (try JSONValue(parsing: text)))
        // A Swift-built schema's pattern must match the whole string, so the decoder gets it anchored.
        let swift = DecodingSchema.jsonSchema(for: LocalItem.generationSchema)
        let pattern = try #require(swift["properties"]?["sku"]?["pattern"]?.stringValue)
        #expect(pattern.hasPrefix("^(?:") && pattern.hasSuffix(")$"), "\(pattern)")
    }

    @Test func badDocumentsAreParsingErrors() {
        #expect(throws: GeneratedContent.ParsingError.self) { try GenerationSchema(jsonSchema: #"{"type": "#) }
        #expect(throws: GeneratedContent.ParsingError.self) { try GenerationSchema(jsonSchema: #"[1, 2]"#) }
        // A document the node tree can't read still becomes a schema for the decoder to judge.
        let odd = try? GenerationSchema(jsonSchema: ##"{"$ref": "#/definitions/x", "definitions": {"x": {"type": "string"}}}"##)
        #expect(odd != nil)
    }
}
