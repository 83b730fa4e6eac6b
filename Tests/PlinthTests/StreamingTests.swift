import Foundation
import FoundationModels
import Testing

@Suite struct StreamingTests {
    @Test func streamingANestedTypeSnapshotBySnapshot() async throws {
        let json = GenerableTypesTests.itineraryJSON
        let model = ScriptedModel([.text(json, chunk: 7)])
        let session = LanguageModelSession(model: model)
        let stream = session.streamResponse(to: "Plan a trip to Tokyo.", generating: Itinerary.self)
        var snapshots: [Itinerary.PartiallyGenerated] = []
        var raws: [GeneratedContent] = []
        for try await snapshot in stream {
            snapshots.append(snapshot.content)
            raws.append(snapshot.rawContent)
        }
        #expect(snapshots.count > 20)
        // Properties appear in order and stay once they have appeared.
        let firstTitle = try #require(snapshots.firstIndex { $0.title != nil })
        let firstDays = try #require(snapshots.firstIndex { $0.days != nil })
        #expect(firstTitle < firstDays)
        var dayCounts = snapshots.compactMap { $0.days?.count }
        #expect(dayCounts == dayCounts.sorted())
        dayCounts = Array(Set(dayCounts)).sorted()
        #expect(dayCounts.last == 3)
        // Partial strings grow character by character.
        let titles = snapshots.compactMap(\.title)
        #expect(titles.contains { $0.count < "Tokyo Lights".count })
        // Every snapshot is one generated value: the same identity throughout.
        #expect(Set(snapshots.map(\.id)).count == 1)
        #expect(raws.dropLast().allSatisfy { !$0.isComplete })
        #expect(raws.last?.isComplete == true)
        #expect(snapshots.last?.travelers == 2)
        // collect() gives the complete value.
        let response = try await stream.collect()
        #expect(response.content.title == "Tokyo Lights")
        #expect(response.content.days.count == 3)
        #expect(session.transcript.count == 2)
    }

    @Test func streamingText() async throws {
        let model = ScriptedModel([.text("Once upon a time, a fox.", chunk: 3)])
        let session = LanguageModelSession(model: model)
        var texts: [String] = []
        for try await snapshot in session.streamResponse(to: "Tell a story.") {
            texts.append(snapshot.content)
        }
        #expect(texts.first == "Onc")
        #expect(texts.last == "Once upon a time, a fox.")
        #expect(zip(texts, texts.dropFirst()).allSatisfy { $1.hasPrefix($0) })
    }

    @Test func collectWithoutIterating() async throws {
        let model = ScriptedModel([.text(#"{"searchTerms": ["a", "b", "c", "d"]}"#)])
        let session = LanguageModelSession(model: model)
        let response = try await session.streamResponse(generating: SearchSuggestions.self) { "Suggest." }.collect()
        #expect(response.content.searchTerms == ["a", "b", "c", "d"])
    }

    @Test func generationStartsOnFirstUse() async throws {
        let model = ScriptedModel([.text("x")])
        let session = LanguageModelSession(model: model)
        let stream = session.streamResponse(to: "later")
        try await Task.sleep(for: .milliseconds(50))
        #expect(model.script.requests.isEmpty)
        #expect(!session.isResponding)
        _ = try await stream.collect()
        #expect(model.script.requests.count == 1)
    }

    /// A stream whose task is cancelled throws, as `collect()` does, instead of ending as if the
    /// response were complete.
    @Test func aCancelledStreamThrowsInsteadOfEnding() async throws {
        let model = ScriptedModel([.custom { _, channel in
            await channel.send(.response(action: .appendText("Once", tokenCount: 1)))
            try await Task.sleep(for: .seconds(60))
            await channel.send(.response(action: .appendText(" upon a time", tokenCount: 3)))
        }])
        let session = LanguageModelSession(model: model)
        let consumer = Task {
            for try await _ in session.streamResponse(to: "x") {}
        }
        while !session.isResponding { await Task.yield() }
        try await Task.sleep(for: .milliseconds(100))
        consumer.cancel()
        await #expect(throws: CancellationError.self) { try await consumer.value }
        while session.isResponding { try await Task.sleep(for: .milliseconds(10)) }
        #expect(session.transcript.isEmpty)
    }

    /// A `break` out of a stream nobody keeps ends its request (reverted, as a cancelled one),
    /// and the session's next request waits for it to end instead of failing as concurrent.
    @Test func aStreamDroppedAfterBreakEndsItsRequest() async throws {
        let model = ScriptedModel([.custom { _, channel in
            await channel.send(.response(action: .appendText("Once", tokenCount: 1)))
            try await Task.sleep(for: .seconds(60))
            await channel.send(.response(action: .appendText(" upon a time", tokenCount: 3)))
        }, .text("Second answer.")])
        let session = LanguageModelSession(model: model)
        for try await snapshot in session.streamResponse(to: "first") {
            #expect(snapshot.content == "Once")
            break
        }
        let response = try await session.respond(to: "second")
        #expect(response.content == "Second answer.")
        // Only the second request's prompt and response: the first was cancelled (run to its
        // end, after its minute's sleep, it would have left its own two entries). No bound on
        // the time: suites blocking the few pool threads can delay its unwinding.
        #expect(session.transcript.count == 2)
        #expect(!session.isResponding)
    }

    /// A stream kept after a `break` runs on: `collect()` gives the whole response.
    @Test func aStreamKeptAfterBreakRunsOn() async throws {
        let model = ScriptedModel([.custom { _, channel in
            await channel.send(.response(action: .appendText("Once", tokenCount: 1)))
            try await Task.sleep(for: .milliseconds(200))
            await channel.send(.response(action: .appendText(" upon a time", tokenCount: 3)))
        }])
        let session = LanguageModelSession(model: model)
        let stream = session.streamResponse(to: "x")
        for try await _ in stream { break }
        let response = try await stream.collect()
        #expect(response.content == "Once upon a time")
        #expect(session.transcript.count == 2)
    }

    @Test func streamErrorsAreThrownFromIteration() async throws {
        let model = ScriptedModel([.failure(LanguageModelError.guardrailViolation(.init(debugDescription: "no")))])
        let session = LanguageModelSession(model: model)
        await #expect(throws: LanguageModelError.self) {
            for try await _ in session.streamResponse(to: "x") {}
        }
    }

    @Test func streamingDynamicContent() async throws {
        let schema = try GenerationSchema(root: DynamicGenerationSchema(name: "Pair", properties: [
            .init(name: "left", schema: .init(type: Int.self)), .init(name: "right", schema: .init(type: Int.self)),
        ]), dependencies: [])
        let model = ScriptedModel([.text(#"{"left": 12, "right": 34}"#, chunk: 2)])
        let session = LanguageModelSession(model: model)
        var lefts: [Int] = []
        let stream = session.streamResponse(to: "pair", schema: schema)
        for try await snapshot in stream {
            if let left = try? snapshot.content.value(Int.self, forProperty: "left") { lefts.append(left) }
        }
        #expect(lefts.first == 1)
        #expect(lefts.last == 12)
        #expect(try await stream.collect().content.value(Int.self, forProperty: "right") == 34)
    }
}
