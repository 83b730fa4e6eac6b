import Foundation
import FoundationModels
import Observation
import Synchronization
import Testing

/// A model turn's wait that only the test ends.
final class HeldTurn: Sendable {
    let continuation = Mutex<CheckedContinuation<Void, Never>?>(nil)
}

/// Waits until the condition holds, for at most a few seconds.
func eventually(_ condition: () -> Bool) async throws {
    for _ in 0..<500 {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("condition not met in time")
}

/// A turn that streams text slowly for 100 s, unless it is cancelled.
let slowTurn = ScriptedTurn.custom { _, channel in
    for _ in 0..<10_000 {
        try await Task.sleep(for: .milliseconds(10))
        await channel.send(.response(action: .appendText("…", tokenCount: 1)))
    }
}

@Suite struct SessionTests {
    @Test func multiTurnConversationWithInstructions() async throws {
        let model = ScriptedModel([.text("Hello! How can I help?"), .text("Paris is the capital of France.")])
        let session = LanguageModelSession(model: model) {
            "You are a helpful assistant."
            "Answer in one sentence."
        }
        let first = try await session.respond(to: "Hi")
        #expect(first.content == "Hello! How can I help?")
        let second = try await session.respond(to: Prompt("What is the capital of France?"))
        #expect(second.content == "Paris is the capital of France.")

        let transcript = session.transcript
        #expect(transcript.count == 5)
        guard case .instructions(let instructions) = transcript[0] else {
            Issue.record("the first entry holds the instructions")
            return
        }
        #expect(instructions.description == "You are a helpful assistant.\nAnswer in one sentence.")
        guard case .prompt(let prompt) = transcript[3], case .response(let response) = transcript[4] else {
            Issue.record("prompt then response")
            return
        }
        #expect(prompt.description == "What is the capital of France?")
        #expect(response.description == "Paris is the capital of France.")
        // Each turn sees the conversation so far, ending with its prompt.
        let requests = model.script.requests
        #expect(requests.map(\.transcript.count) == [2, 4])
        #expect(second.transcriptEntries.count == 2)
        #expect(second.rawContent.kind == .string("Paris is the capital of France."))
        #expect(second.usage.output.totalTokenCount > 0)
        #expect(second.usage.input.cachedTokenCount == 2)
        #expect(session.usage.totalTokenCount == first.usage.totalTokenCount + second.usage.totalTokenCount)
        #expect(!session.isResponding)
    }

    @Test func everyInitializerAndRespondForm() async throws {
        let turns = Array(repeating: ScriptedTurn.text(#"{"searchTerms": ["a", "b", "c", "d"]}"#), count: 36)
        let model = ScriptedModel(turns)
        let sessions = [
            LanguageModelSession(model: model, instructions: "x"),
            LanguageModelSession(model: model, instructions: Instructions("x")),
            LanguageModelSession(model: model, tools: [], transcript: Transcript()),
            try LanguageModelSession(model: model) { "x" },
        ]
        #expect(sessions[0].transcript.count == 1)
        #expect(sessions[2].transcript.isEmpty)
        let session = sessions[0]
        let schema = SearchSuggestions.generationSchema
        let prompt = Prompt("p")

        _ = try await session.respond(to: prompt)
        _ = try await session.respond(to: "p")
        _ = try await session.respond { "p" }
        _ = try await session.respond(to: prompt, schema: schema)
        _ = try await session.respond(to: "p", schema: schema, includeSchemaInPrompt: false)
        _ = try await session.respond(schema: schema) { "p" }
        _ = try await session.respond(to: prompt, generating: SearchSuggestions.self)
        let typed = try await session.respond(to: "p", generating: SearchSuggestions.self, options: GenerationOptions(sampling: .greedy))
        #expect(typed.content.searchTerms.count == 4)
        _ = try await session.respond(generating: SearchSuggestions.self) { "p" }

        _ = try await session.respond(to: prompt, options: GenerationOptions(), contextOptions: ContextOptions(), metadata: ["k": "v"])
        _ = try await session.respond(to: "p", contextOptions: ContextOptions(reasoningLevel: .light))
        _ = try await session.respond(contextOptions: ContextOptions()) { "p" }
        _ = try await session.respond(to: prompt, schema: schema, contextOptions: ContextOptions(includeSchemaInPrompt: false))
        _ = try await session.respond(to: "p", schema: schema, metadata: ["n": 1])
        _ = try await session.respond(schema: schema, contextOptions: ContextOptions()) { "p" }
        _ = try await session.respond(to: prompt, generating: SearchSuggestions.self, contextOptions: ContextOptions())
        _ = try await session.respond(to: "p", generating: SearchSuggestions.self, metadata: [:])
        _ = try await session.respond(generating: SearchSuggestions.self, contextOptions: ContextOptions()) { "p" }

        _ = try await session.streamResponse(to: prompt).collect()
        _ = try await session.streamResponse(to: "p").collect()
        _ = try await session.streamResponse { "p" }.collect()
        _ = try await session.streamResponse(to: prompt, schema: schema).collect()
        _ = try await session.streamResponse(to: "p", schema: schema, includeSchemaInPrompt: false).collect()
        _ = try await session.streamResponse(schema: schema) { "p" }.collect()
        _ = try await session.streamResponse(to: prompt, generating: SearchSuggestions.self).collect()
        _ = try await session.streamResponse(to: "p", generating: SearchSuggestions.self).collect()
        _ = try await session.streamResponse(generating: SearchSuggestions.self) { "p" }.collect()

        _ = try await session.streamResponse(to: prompt, contextOptions: ContextOptions(), metadata: [:]).collect()
        _ = try await session.streamResponse(to: "p", contextOptions: ContextOptions()).collect()
        _ = try await session.streamResponse(contextOptions: ContextOptions()) { "p" }.collect()
        _ = try await session.streamResponse(to: prompt, schema: schema, contextOptions: ContextOptions()).collect()
        _ = try await session.streamResponse(to: "p", schema: schema, metadata: ["a": true]).collect()
        _ = try await session.streamResponse(schema: schema, contextOptions: ContextOptions()) { "p" }.collect()
        _ = try await session.streamResponse(to: prompt, generating: SearchSuggestions.self, contextOptions: ContextOptions()).collect()
        _ = try await session.streamResponse(to: "p", generating: SearchSuggestions.self, metadata: [:]).collect()
        _ = try await session.streamResponse(generating: SearchSuggestions.self, contextOptions: ContextOptions()) { "p" }.collect()

        let requests = model.script.requests
        #expect(requests.count == 36)
        #expect(model.script.remaining == 0)
        // The schema, includeSchemaInPrompt, options and metadata reach the executor.
        #expect(requests[0].schema == nil)
        #expect(requests[3].schema == schema)
        #expect(requests[3].contextOptions.includeSchemaInPrompt == true)
        #expect(requests[4].contextOptions.includeSchemaInPrompt == false)
        #expect(requests[7].generationOptions.sampling == .greedy)
        #expect(requests[9].metadata["k"] as? String == "v")
        #expect(requests[10].contextOptions.reasoningLevel == .light)
        #expect(requests[12].contextOptions.includeSchemaInPrompt == false)
        #expect(requests[16].contextOptions.includeSchemaInPrompt == true)
        #expect(requests[22].contextOptions.includeSchemaInPrompt == false)
        // The prompt entry records the response format and the options.
        guard case .prompt(let entry) = requests[7].transcript.last else {
            Issue.record("the request ends with its prompt")
            return
        }
        #expect(entry.responseFormat?.name == "SearchSuggestions")
        #expect(entry.options.sampling == .greedy)
    }

    @Test func greedyOptions() async throws {
        let model = ScriptedModel([.text("Blue.")])
        let session = LanguageModelSession(model: model)
        let options = GenerationOptions(sampling: .greedy, temperature: 0.5, maximumResponseTokens: 20)
        let response = try await session.respond(to: "Name a color.", options: options)
        #expect(response.content == "Blue.")
        let request = try #require(model.script.requests.first)
        #expect(request.generationOptions.sampling?.kind == .greedy)
        #expect(request.generationOptions.temperature == 0.5)
        #expect(request.generationOptions.maximumResponseTokens == 20)
        #expect(GenerationOptions.SamplingMode.random(top: 40, seed: 7).kind == .randomTopK(40, seed: 7))
        #expect(GenerationOptions.SamplingMode.random(probabilityThreshold: 0.9).kind == .randomProbabilityThreshold(0.9, seed: nil))
        // Provider code switches over the Xcode 27 beta 3 names.
        func providerTopK(_ mode: GenerationOptions.SamplingMode) -> Int? {
            switch mode.kind {
            case .greedy: return 1
            case .randomTopK(let k, _): return k
            case .randomProbabilityThreshold: return nil
            }
        }
        #expect(providerTopK(.random(top: 40)) == 40 && providerTopK(.greedy) == 1 && providerTopK(.random(probabilityThreshold: 0.5)) == nil)
        #expect(DocumentedRecipe.oldKinds == [.randomTopK(3, seed: 1), .randomProbabilityThreshold(0.5, seed: nil)])
        var o = GenerationOptions(samplingMode: .greedy, toolCallingMode: .required)
        o.sampling = .random(top: 2)
        #expect(o.samplingMode == .random(top: 2))
        #expect(o.toolCallingMode?.kind == .required)
    }

    @Test func secondRequestWhileRespondingThrowsConcurrentRequests() async throws {
        let model = ScriptedModel([slowTurn])
        let session = LanguageModelSession(model: model)
        let first = Task { try await session.respond(to: "long") }
        try await eventually { session.isResponding }
        let error = await #expect(throws: LanguageModelSession.GenerationError.self) {
            try await session.respond(to: "again")
        }
        if case .concurrentRequests? = error {} else { Issue.record("expected concurrentRequests, got \(String(describing: error))") }
        first.cancel()
        _ = await first.result
        #expect(!session.isResponding)
    }

    /// A request made while a cancelled one is still ending waits for it; it doesn't fail.
    @Test func aRequestRightAfterACancelledOneWaitsForIt() async throws {
        let model = ScriptedModel([slowTurn, .text("Next.")])
        let session = LanguageModelSession(model: model)
        let first = Task { try await session.respond(to: "long") }
        try await eventually { session.isResponding }
        first.cancel()
        let next = try await session.respond(to: "next")
        #expect(next.content == "Next.")
        await #expect(throws: CancellationError.self) { try await first.value }
        #expect(session.transcript.count == 2)
    }

    /// A request waiting for a cancelled one that is slow to end (a tool or model that doesn't
    /// heed cancellation) can itself be cancelled: it doesn't wait that request out.
    @Test func aWaitingRequestCanBeCancelled() async throws {
        // A wait that cancellation doesn't cut short: it ends when the test releases it.
        let held = HeldTurn()
        let stubborn = ScriptedTurn.custom { _, channel in
            await channel.send(.response(action: .appendText("Once", tokenCount: 1)))
            await withCheckedContinuation { c in held.continuation.withLock { $0 = c } }
        }
        let session = LanguageModelSession(model: ScriptedModel([stubborn, .text("Next.")]))
        let first = Task { try await session.respond(to: "long") }
        try await eventually { session.isResponding }
        first.cancel()
        let second = Task { try await session.respond(to: "next") }
        try await Task.sleep(for: .milliseconds(100))
        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        // It returned while the first request still runs: it didn't wait it out.
        #expect(session.isResponding)
        // A task already cancelled doesn't wait either.
        let third = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await session.respond(to: "again")
        }
        await #expect(throws: CancellationError.self) { try await third.value }
        #expect(session.isResponding)
        // Released, the first request ends (cancelled).
        try await eventually { held.continuation.withLock { $0 != nil } }
        held.continuation.withLock { $0?.resume(); $0 = nil }
        _ = await first.result
        #expect(!session.isResponding)
    }

    @Test func cancellationStopsPromptlyAndRevertsTheTranscript() async throws {
        let model = ScriptedModel([.text("First answer."), slowTurn, .text("After cancel.")])
        let session = LanguageModelSession(model: model, instructions: "Be brief.")
        try await session.respond(to: "one")
        let before = session.transcript
        let clock = ContinuousClock()
        let task = Task { try await session.respond(to: "two") }
        try await eventually { session.isResponding }
        let start = clock.now
        task.cancel()
        let result = await task.result
        // Long before the turn's own end (100 s), with room for a loaded machine.
        #expect(clock.now - start < .seconds(50))
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(session.transcript == before)
        #expect(!session.isResponding)
        // The session keeps working.
        let after = try await session.respond(to: "three")
        #expect(after.content == "After cancel.")
        #expect(session.transcript.count == before.count + 2)
    }

    @Test func cancellingAStreamStopsGeneration() async throws {
        let model = ScriptedModel([slowTurn])
        let session = LanguageModelSession(model: model)
        let task = Task {
            var count = 0
            for try await _ in session.streamResponse(to: "go") { count += 1 }
            return count
        }
        try await eventually { session.isResponding }
        task.cancel()
        _ = await task.result
        try await eventually { !session.isResponding }
        #expect(session.transcript.isEmpty)
    }

    /// Entry ids come from the model and may repeat across requests; a response's entries are
    /// its own.
    @Test func repeatedEntryIDsDontMixRequests() async throws {
        let turn = ScriptedTurn.custom { _, channel in
            await channel.send(.response(entryID: "r1", action: .appendText("Same id.", tokenCount: 1)))
        }
        let calls = ScriptedTurn.custom { _, channel in
            await channel.send(.toolCalls(entryID: "t1", action: .toolCall(id: "c1", name: "getWeather",
                                                                              action: .appendArguments(#"{"city": "Oslo"}"#, tokenCount: 1))))
        }
        let model = ScriptedModel([turn, calls, turn, calls, turn])
        let session = LanguageModelSession(model: model, tools: [GetWeatherTool()])
        #expect(try await session.respond(to: "a").transcriptEntries.count == 2)
        #expect(try await session.respond(to: "b").transcriptEntries.count == 4)
        #expect(try await session.respond(to: "c").transcriptEntries.count == 4)
    }

    @Test func aCapabilityErrorLeavesNoPromptEvenWhenPreserving() async throws {
        let model = ScriptedModel([.text("{}")], capabilities: LanguageModelCapabilities([]))
        let session = LanguageModelSession(model: model)
        session.transcriptErrorHandlingPolicy = .preserveTranscript
        await #expect(throws: LanguageModelError.self) {
            try await session.respond(to: "x", schema: GenerationSchema(root: DynamicGenerationSchema(type: String.self), dependencies: []))
        }
        #expect(session.transcript.isEmpty)
    }

    @Test func preserveTranscriptPolicyKeepsThePrompt() async throws {
        let model = ScriptedModel([.failure(LanguageModelError.guardrailViolation(.init(debugDescription: "unsafe")))])
        let session = LanguageModelSession(model: model)
        session.transcriptErrorHandlingPolicy = .preserveTranscript
        await #expect(throws: LanguageModelError.self) { try await session.respond(to: "x") }
        #expect(session.transcript.count == 1)
        if case .prompt = session.transcript[0] {} else { Issue.record("the prompt is kept") }
    }

    @Test func isRespondingIsObservable() async throws {
        let model = ScriptedModel([.text("ok")])
        let session = LanguageModelSession(model: model)
        let changes = Mutex(0)
        withObservationTracking {
            _ = session.isResponding
        } onChange: {
            changes.withLock { $0 += 1 }
        }
        let transcriptChanges = Mutex(0)
        withObservationTracking {
            _ = session.transcript
        } onChange: {
            transcriptChanges.withLock { $0 += 1 }
        }
        try await session.respond(to: "hi")
        #expect(changes.withLock { $0 } == 1)
        #expect(transcriptChanges.withLock { $0 } == 1)
    }

    @Test func prewarmReachesTheExecutor() {
        let model = ScriptedModel([])
        let session = LanguageModelSession(model: model, instructions: "x")
        session.prewarm()
        session.prewarm(promptPrefix: Prompt("Summarize:"))
        #expect(model.script.prewarmCount == 2)
    }

    @Test func recoveringFromContextOverflowWithACondensedTranscript() async throws {
        let overflow = LanguageModelError.contextSizeExceeded(.init(contextSize: 4096, tokenCount: 5000, debugDescription: "too long"))
        let model = ScriptedModel([.text("Answer one."), .text("Answer two."), .failure(overflow), .text("Fresh answer.")])
        var session = LanguageModelSession(model: model, instructions: "You answer questions.")
        try await session.respond(to: "q1")
        try await session.respond(to: "q2")
        do {
            try await session.respond(to: "q3")
            Issue.record("expected exceededContextWindowSize")
        } catch LanguageModelError.contextSizeExceeded(let context) {
            #expect(context.tokenCount == 5000)
            // Apple's recipe: keep the first entry (the instructions) and the last (the latest response).
            let allEntries = session.transcript
            var condensed = [allEntries.first!]
            if allEntries.count > 1 { condensed.append(allEntries.last!) }
            session = LanguageModelSession(model: model, transcript: Transcript(entries: condensed))
        }
        let response = try await session.respond(to: "q3")
        #expect(response.content == "Fresh answer.")
        let last = try #require(model.script.requests.last)
        #expect(last.transcript.count == 3)
        if case .response(let kept) = last.transcript[1] {
            #expect(kept.description == "Answer two.")
        } else {
            Issue.record("the condensed transcript keeps the last response")
        }
    }

    /// Apple's documentation writes the recipe with `transcript.entries`, which its current
    /// interface no longer lists; the spelling compiles here (deprecated) and means the same.
    @Test func theDocumentedEntriesSpellingCondensesTheSame() {
        let transcript = Transcript(entries: [.instructions(.init(segments: [.text(.init(content: "Be brief."))], toolDefinitions: [])),
                                              .prompt(.init(segments: [.text(.init(content: "q"))])),
                                              .response(.init(assetIDs: [], segments: [.text(.init(content: "a"))]))])
        let condensed = DocumentedRecipe.condense(transcript)
        #expect(condensed == Transcript(entries: [transcript.first!, transcript.last!]))
        var edited = transcript
        DocumentedRecipe.dropLast(&edited)
        #expect(edited == Transcript(entries: transcript.dropLast()))
    }

    @Test func capabilitiesAreChecked() async throws {
        let model = ScriptedModel([.text("{}")], capabilities: LanguageModelCapabilities([]))
        #expect(!model.capabilities.contains(.guidedGeneration))
        let session = LanguageModelSession(model: model)
        let error = await #expect(throws: LanguageModelError.self) {
            try await session.respond(to: "x", generating: SearchSuggestions.self)
        }
        if case .unsupportedCapability(let c)? = error {
            #expect(c.capability == .guidedGeneration)
        } else {
            Issue.record("expected unsupportedCapability")
        }
        let capabilities = LanguageModelCapabilities(capabilities: [.vision, .reasoning, .toolCalling])
        #expect(capabilities.contains(.vision) && capabilities.contains(.reasoning) && !capabilities.contains(.guidedGeneration))
    }

    @Test func malformedOutputIsADecodingFailure() async throws {
        let model = ScriptedModel([.text(#"{"searchTerms": ["a""#), .text(#"{"searchTerms": 5}"#), .text("not json")])
        let session = LanguageModelSession(model: model)
        for _ in 0..<3 {
            let error = await #expect(throws: LanguageModelSession.GenerationError.self) {
                try await session.respond(to: "x", generating: SearchSuggestions.self)
            }
            if case .decodingFailure? = error {} else { Issue.record("expected decodingFailure, got \(String(describing: error))") }
        }
        #expect(session.transcript.isEmpty)
    }

    /// A session on a model of your own throws the model's errors as they are (Xcode 27);
    /// SystemLanguageModelTests checks Xcode 26's mapping for the system model.
    @Test func executorErrorsPassThrough() async throws {
        let model = ScriptedModel([
            .failure(LanguageModelError.rateLimited(.init(resetDate: nil, debugDescription: "slow down"))),
            .failure(LanguageModelError.guardrailViolation(.init(debugDescription: "no"))),
            .failure(LanguageModelError.refusal(.init(explanation: "I can't help with that.", debugDescription: "refused"))),
            .failure(LanguageModelError.timeout(.init(debugDescription: "slow"))),
        ])
        let session = LanguageModelSession(model: model)
        func error() async -> LanguageModelError? {
            do { try await session.respond(to: "x"); return nil } catch { return error as? LanguageModelError }
        }
        if case .rateLimited? = await error() {} else { Issue.record("rateLimited") }
        if case .guardrailViolation? = await error() {} else { Issue.record("guardrail") }
        if case .refusal(let refusal)? = await error() {
            #expect(try await refusal.explanation.content == "I can't help with that.")
        } else {
            Issue.record("refusal")
        }
        if case .timeout? = await error() {} else { Issue.record("timeout") }
        #expect(session.transcript.isEmpty)
    }

    @Test func transcriptCanBeReplacedWhenIdle() async throws {
        let model = ScriptedModel([.text("ok")])
        let session = LanguageModelSession(model: model)
        session.transcript = Transcript(entries: [.instructions(.init(segments: [.text(.init(content: "Be kind."))], toolDefinitions: []))])
        try await session.respond(to: "hi")
        #expect(model.script.requests[0].transcript.count == 2)
    }

    @Test func replacingTheTranscriptWhileRespondingStopsTheRequest() async throws {
        let box = Mutex<LanguageModelSession?>(nil)
        let replacement = Transcript(entries: [.instructions(.init(segments: [.text(.init(content: "Be kind."))], toolDefinitions: []))])
        let turn = ScriptedTurn.custom { _, channel in
            await channel.send(.response(action: .appendText("One ", tokenCount: 1)))
            box.withLock { $0 }?.transcript = replacement
            await channel.send(.response(action: .appendText("two.", tokenCount: 1)))
        }
        let model = ScriptedModel([])
        for policy in [TranscriptErrorHandlingPolicy.revertTranscript, .preserveTranscript] {
            let session = LanguageModelSession(model: model)
            session.transcriptErrorHandlingPolicy = policy
            box.withLock { $0 = session }
            model.script.append([turn])
            let stream = session.streamResponse(to: "Count.")
            await #expect(throws: LanguageModelSession.Error.transcriptMutationWhileResponding) {
                for try await _ in stream {}
            }
            // Neither the policy nor the request touched what was written.
            #expect(session.transcript == replacement)
            #expect(!session.isResponding)
        }
    }
}

/// Code written against the documented spelling, as an app would have it.
@available(*, deprecated, message: "uses Transcript.entries on purpose")
private enum DocumentedRecipe {
    static func condense(_ transcript: Transcript) -> Transcript {
        let allEntries = transcript.entries
        var condensedEntries = [allEntries.first!]
        if allEntries.count > 1 { condensedEntries.append(allEntries.last!) }
        return Transcript(entries: condensedEntries)
    }

    static func dropLast(_ transcript: inout Transcript) { transcript.entries.removeLast() }

    /// The sampling kinds' names before Xcode 27 beta 3.
    static var oldKinds: [GenerationOptions.SamplingMode.Kind] { [.top(k: 3, seed: 1), .nucleus(threshold: 0.5, seed: nil)] }
}
