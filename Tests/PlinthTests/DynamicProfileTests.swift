import Foundation
import FoundationModels
import Synchronization
import Testing

/// App state the dynamic instructions and profiles below read: a class, so a change shows in
/// the next evaluation of a body that holds it.
final class AppState: Sendable {
    private let values = Mutex<(editing: Bool, mode: Int)>((false, 0))
    var isEditing: Bool {
        get { values.withLock { $0.editing } }
        set { values.withLock { $0.editing = newValue } }
    }
    var mode: Int {
        get { values.withLock { $0.mode } }
        set { values.withLock { $0.mode = newValue } }
    }
}

extension SessionPropertyValues {
    @SessionPropertyEntry
    var toolCallCount: Int = 0

    @SessionPropertyEntry
    var activatedSkills: [String: Bool] = [:]
}

/// A tool that records a skill as active in a session property, as in Apple's article.
struct PlannerTool: Tool {
    let description = "Update the state of the activated skills"

    @SessionProperty(\.activatedSkills)
    var activatedSkills

    @SessionProperty(\.history)
    var history

    @Generable
    struct Arguments {
        @Guide(description: "The skills to activate")
        var skills: [String]
    }

    func call(arguments: Arguments) async throws -> String {
        for skill in arguments.skills { activatedSkills[skill] = true }
        // The history is read-only in a tool: this write is ignored.
        history = []
        return "Activated: \(arguments.skills.joined(separator: ", "))"
    }
}

struct EditingInstructions: DynamicInstructions {
    let state: AppState

    var body: some DynamicInstructions {
        Instructions("Help people improve their presentation.")
        if state.isEditing {
            Instructions("The person is editing an image.")
            GetWeatherTool()
        }
    }
}

struct SkillList: DynamicInstructions {
    let skills: [String]

    var body: some DynamicInstructions {
        DynamicInstructions.ForEach(skills, id: \.self) { skill in
            Instructions("Skill: \(skill)")
        }
        [PlannerTool()] as [any Tool]
    }
}

/// Apple's example: a profile that requires a tool call until one has been made.
struct RecipeDynamicProfile: LanguageModelSession.DynamicProfile {
    @SessionProperty(\.toolCallCount)
    var toolCallCount

    var body: some LanguageModelSession.DynamicProfile {
        Profile {
            PlannerTool()
        }
        .toolCallingMode(toolCallCount < 1 ? .required : .allowed)
        .onToolCall {
            toolCallCount += 1
        }
    }
}

struct WritingContent: LanguageModelSession.DynamicProfile {
    let state: AppState

    var body: some LanguageModelSession.DynamicProfile {
        if state.mode == 0 {
            Profile { Instructions("Write creatively.") }
                .temperature(1.0)
        } else {
            Profile { Instructions("Write technically.") }
        }
    }
}

struct WritingProfile: LanguageModelSession.DynamicProfile {
    let state: AppState

    var body: some LanguageModelSession.DynamicProfile {
        WritingContent(state: state)
            .temperature(0.5)
            .maximumResponseTokens(64)
    }
}

/// Keeps the last `entries` history entries once a prompt arrives: a stateful change.
struct RollingWindow: LanguageModelSession.DynamicProfileModifier {
    @SessionProperty(\.history)
    var history
    let entries: Int

    func body(content: Content) -> some LanguageModelSession.DynamicProfile {
        content.onPrompt {
            history = history.suffix(entries)
        }
    }
}

extension LanguageModelSession.DynamicProfile {
    func rollingWindow(_ entries: Int) -> some LanguageModelSession.DynamicProfile {
        modifier(RollingWindow(entries: entries))
    }
}

/// Records the order of events, for the callback tests.
final class EventLog: Sendable {
    private let events = Mutex<[String]>([])
    func add(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }
}

struct LifecycleProfile: LanguageModelSession.DynamicProfile {
    let state: AppState
    let log: EventLog

    var body: some LanguageModelSession.DynamicProfile {
        if state.isEditing {
            Profile { Instructions("Edit.") }
                .onActivate { log.add("edit on") }
                .onDeactivate { log.add("edit off") }
        } else {
            Profile { Instructions("Browse.") }
                .onActivate { log.add("browse on") }
                .onDeactivate { log.add("browse off") }
        }
    }
}

enum PolicyError: Error { case denied(String) }

private func instructionsText(_ transcript: Transcript) -> String? {
    guard case .instructions(let i)? = transcript.first else { return nil }
    return i.segments.map(\.description).joined(separator: "\n")
}

@Suite struct DynamicProfileTests {
    @Test func dynamicInstructionsAreEvaluatedBeforeEveryRequest() async throws {
        let state = AppState()
        let model = ScriptedModel([.text("One."), .text("Two.")])
        let session = LanguageModelSession(model: model, dynamicInstructions: EditingInstructions(state: state))
        #expect(instructionsText(session.transcript) == "Help people improve their presentation.")

        try await session.respond(to: "Hello")
        state.isEditing = true
        try await session.respond(to: "Now?")

        let requests = model.script.requests
        #expect(requests[0].enabledToolDefinitions.isEmpty)
        #expect(requests[1].enabledToolDefinitions.map(\.name) == ["getWeather"])
        #expect(instructionsText(requests[1].transcript)
                == "Help people improve their presentation.\nThe person is editing an image.")
        // The session's transcript keeps one instructions entry, the latest.
        #expect(instructionsText(session.transcript) == "Help people improve their presentation.\nThe person is editing an image.")
        #expect(session.transcript.filter { if case .instructions = $0 { true } else { false } }.count == 1)
        #expect(session.transcript.count == 5)
    }

    @Test func forEachToolsAndSessionPropertiesInATool() async throws {
        let model = ScriptedModel([
            .toolCalls([("c1", "PlannerTool", #"{"skills": ["baking", "grilling"]}"#)]),
            .text("Done."),
        ])
        let session = LanguageModelSession(model: model, dynamicInstructions: SkillList(skills: ["baking", "grilling"]))
        let response = try await session.respond(to: "Plan dinner")
        #expect(response.content == "Done.")
        #expect(instructionsText(session.transcript) == "Skill: baking\nSkill: grilling")
        #expect(session.properties.activatedSkills == ["baking": true, "grilling": true])
        // The tool's write to the history was ignored: prompt, calls, output, response remain.
        #expect(session.properties.history.count == 4)
        #expect(session.transcript.history.count == 4)
    }

    @Test func toolCallingModeFollowsASessionProperty() async throws {
        let model = ScriptedModel([
            .toolCalls([("c1", "PlannerTool", #"{"skills": ["soup"]}"#)]),
            .text("Soup it is."),
        ])
        let session = LanguageModelSession(profile: RecipeDynamicProfile().model(model))
        try await session.respond(to: "What should I cook?")
        let requests = model.script.requests
        #expect(requests[0].generationOptions.toolCallingMode == .required)
        #expect(requests[1].generationOptions.toolCallingMode == .allowed)
        #expect(session.properties.toolCallCount == 1)
        // Another session starts from the default value.
        #expect(LanguageModelSession(profile: RecipeDynamicProfile().model(model)).properties.toolCallCount == 0)
    }

    @Test func innermostValueWinsAndCallOptionsWinOverBoth() async throws {
        let state = AppState()
        let model = ScriptedModel([.text("A."), .text("B."), .text("C.")])
        let session = LanguageModelSession(profile: WritingProfile(state: state).model(model))
        try await session.respond(to: "Write")
        state.mode = 1
        try await session.respond(to: "Write")
        try await session.respond(to: "Write", options: GenerationOptions(temperature: 0.1, maximumResponseTokens: 8))
        let options = model.script.requests.map(\.generationOptions)
        #expect(options.map(\.temperature) == [1.0, 0.5, 0.1])
        #expect(options.map(\.maximumResponseTokens) == [64, 64, 8])
        #expect(instructionsText(session.transcript) == "Write technically.")
        // The prompt keeps the options of the call.
        guard case .prompt(let first)? = session.transcript.history.first else { Issue.record("no prompt"); return }
        #expect(first.options.temperature == nil)
    }

    @Test func profileModelIsUsed() async throws {
        let unused = ScriptedModel([.text("Not me.")])
        let chosen = ScriptedModel([.text("Me.")])
        let session = LanguageModelSession(profile: LanguageModelSession.Profile { Instructions("Hi.") }.model(chosen), history: [])
        _ = unused
        let response = try await session.respond(to: "Who?")
        #expect(response.content == "Me.")
        #expect(chosen.script.requests.count == 1)
        #expect(unused.script.requests.isEmpty)
    }

    @Test func historyTransformChangesOnlyTheRequest() async throws {
        let model = ScriptedModel([.text("1."), .text("2."), .text("3.")])
        let profile = LanguageModelSession.Profile { Instructions("Be brief.") }
            .historyTransform { Array($0.suffix(1)) }
            .model(model)
        let session = LanguageModelSession(profile: profile)
        for prompt in ["a", "b", "c"] { try await session.respond(to: prompt) }
        let last = model.script.requests[2].transcript
        #expect(last.count == 2)  // instructions and the latest prompt
        #expect(instructionsText(last) == "Be brief.")
        #expect(session.transcript.count == 7)
    }

    @Test func onPromptWritesTheHistory() async throws {
        let model = ScriptedModel([.text("1."), .text("2."), .text("3.")])
        let session = LanguageModelSession(profile: LanguageModelSession.Profile { Instructions("Be brief.") }.rollingWindow(3).model(model))
        for prompt in ["a", "b", "c"] { try await session.respond(to: prompt) }
        let texts = session.transcript.map { entry -> String in
            switch entry {
            case .instructions: "i"
            case .prompt(let p): p.segments.map(\.description).joined()
            case .response(let r): r.segments.map(\.description).joined()
            default: "?"
            }
        }
        #expect(texts == ["i", "b", "2.", "c", "3."])
        // The response's entries are its prompt and what followed.
        let model2 = ScriptedModel([.text("x.")])
        let session2 = LanguageModelSession(profile: LanguageModelSession.Profile {}.rollingWindow(0).model(model2),
                                            history: [.prompt(.init(segments: [.text(.init(content: "old"))]))])
        let response = try await session2.respond(to: "new")
        // The window of 0 dropped everything, the prompt too; then the response came.
        #expect(session2.transcript.count == 1)
        #expect(response.transcriptEntries.count == 1)
    }

    @Test func lifecycleCallbacksRunOnChange() async throws {
        let state = AppState(), log = EventLog()
        let model = ScriptedModel([.text("1."), .text("2."), .text("3.")])
        let session = LanguageModelSession(profile: LifecycleProfile(state: state, log: log).model(model))
        try await session.respond(to: "a")
        try await session.respond(to: "b")
        state.isEditing = true
        try await session.respond(to: "c")
        #expect(log.all == ["browse on", "browse off", "edit on"])
    }

    @Test func callbacksRunInOrderAndAnErrorRevertsTheRequest() async throws {
        let log = EventLog()
        let model = ScriptedModel([
            .toolCalls([("c1", "getWeather", #"{"city": "Oslo"}"#)]),
            .text("Sunny."),
            .toolCalls([("c2", "getWeather", #"{"city": "Nowhere"}"#)]),
        ])
        let profile = LanguageModelSession.Profile {
            Instructions("Weather.")
            GetWeatherTool()
        }
        .onToolCall { call in
            log.add("call \(call.id)")
            if call.id == "c2" { throw PolicyError.denied(call.toolName) }
        }
        .onToolOutput { call, output in log.add("output \(call.id) \(output.toolName)") }
        .onResponse { response in log.add("response \(response.segments.map(\.description).joined())") }
        .onPrompt { log.add("prompt outer") }
        let session = LanguageModelSession(profile: profile.onPrompt { log.add("prompt outermost") }.model(model))
        try await session.respond(to: "Oslo?")
        #expect(log.all == ["prompt outermost", "prompt outer", "call c1", "output c1 getWeather", "response Sunny."])
        let before = session.transcript
        await #expect(throws: PolicyError.self) { try await session.respond(to: "Nowhere?") }
        #expect(session.transcript == before)
    }

    @Test func onReasoningSeesTheReasoningEntry() async throws {
        let log = EventLog()
        let model = ScriptedModel([.custom { _, channel in
            await channel.send(.reasoning(action: .appendText("Think.", tokenCount: 1)))
            await channel.send(.response(action: .appendText("Done.", tokenCount: 1)))
        }])
        let profile = LanguageModelSession.Profile {}
            .onReasoning { reasoning in log.add("reasoning \(reasoning.segments.map(\.description).joined())") }
            .model(model)
        let session = LanguageModelSession(profile: profile)
        try await session.respond(to: "Go")
        #expect(log.all == ["reasoning Think."])
    }

    @Test func lifecycleCallbacksSeeTheSessionAndRunOutermostFirst() async throws {
        let log = EventLog()
        let model = ScriptedModel([.text("1.")])
        struct Counting: LanguageModelSession.DynamicProfile {
            @SessionProperty(\.history) var history
            let log: EventLog
            let model: ScriptedModel
            var body: some LanguageModelSession.DynamicProfile {
                Profile { Instructions("Hi.") }
                    .onActivate { log.add("inner \(history.count)") }
                    .onActivate { log.add("outer \(history.count)") }
                    .model(model)
            }
        }
        let old = Transcript.Entry.prompt(.init(segments: [.text(.init(content: "old"))]))
        let session = LanguageModelSession(profile: Counting(log: log, model: model), history: [old])
        try await session.respond(to: "new")
        // Activated before the prompt is added: the history holds the old prompt.
        #expect(log.all == ["outer 1", "inner 1"])
    }

    @Test func aHistoryWriteFromOutsideStopsTheRequest() async throws {
        let box = Mutex<LanguageModelSession?>(nil)
        let model = ScriptedModel([.custom { _, channel in
            box.withLock { $0 }?.properties.history = []
            await channel.send(.response(action: .appendText("Lost.", tokenCount: 1)))
        }, .text("Kept.")])
        let session = LanguageModelSession(profile: LanguageModelSession.Profile { Instructions("Hi.") }.model(model))
        box.withLock { $0 = session }
        await #expect(throws: LanguageModelSession.Error.transcriptMutationWhileResponding) {
            try await session.respond(to: "Hello")
        }
        // The write is kept (the instructions and no history), and the session answers again.
        #expect(session.transcript.count == 1)
        #expect(!session.isResponding)
        let response = try await session.respond(to: "Again")
        #expect(response.content == "Kept.")
        #expect(session.transcript.count == 3)
    }

    /// A write from outside during the response's callbacks fails the request too, and the
    /// request's own callbacks can't write over it afterwards.
    @Test func anOutsideWriteDuringTheCallbacksIsKept() async throws {
        let box = Mutex<LanguageModelSession?>(nil)
        let outside = Transcript(entries: [])
        let model = ScriptedModel([.text("One.")])
        let profile = LanguageModelSession.Profile { Instructions("Hi.") }
            .onResponse {
                box.withLock { $0 }?.transcript = outside
                box.withLock { $0 }?.properties.history = [.prompt(.init(segments: [.text(.init(content: "callback"))]))]
            }
            .model(model)
        let session = LanguageModelSession(profile: profile)
        box.withLock { $0 = session }
        await #expect(throws: LanguageModelSession.Error.transcriptMutationWhileResponding) {
            try await session.respond(to: "Hello")
        }
        #expect(session.transcript == outside)
    }

    @Test func sessionPropertyOutsideASession() {
        let property = LanguageModelSession.SessionProperty(\SessionPropertyValues.toolCallCount)
        #expect(property.wrappedValue == 0)
        property.wrappedValue = 3
        #expect(property.wrappedValue == 3)
        let history = LanguageModelSession.SessionProperty(\SessionPropertyValues.history)
        history.wrappedValue = [.prompt(.init(segments: []))]
        #expect(history.wrappedValue.count == 1)
    }

    @Test func transcriptHistoryKeepsTheLeadingInstructions() {
        let instructions = Transcript.Entry.instructions(.init(segments: [.text(.init(content: "Hi"))], toolDefinitions: []))
        let prompt = Transcript.Entry.prompt(.init(segments: [.text(.init(content: "Q"))]))
        var transcript = Transcript(entries: [instructions, prompt, instructions])
        #expect(Array(transcript.history) == [prompt, instructions])
        transcript.history = [prompt]
        #expect(Array(transcript) == [instructions, prompt])
        var plain = Transcript(entries: [prompt])
        #expect(plain.history.count == 1)
        plain.history = []
        #expect(plain.isEmpty)
    }

    @Test func emptyProfileHasNoInstructionsEntry() async throws {
        let model = ScriptedModel([.text("Hi.")])
        let session = LanguageModelSession(profile: LanguageModelSession.Profile {}.model(model))
        #expect(session.transcript.isEmpty)
        try await session.respond(to: "Hello")
        #expect(session.transcript.count == 2)
    }

    @Test func undeclaredCapabilityOfTheProfileModel() async throws {
        let model = ScriptedModel([.text("Hi.")], capabilities: LanguageModelCapabilities([]))
        let session = LanguageModelSession(profile: LanguageModelSession.Profile { GetWeatherTool() }.model(model))
        await #expect(throws: LanguageModelError.self) { try await session.respond(to: "Weather?") }
        #expect(session.transcript.count == 1)  // the instructions entry only
    }
}

@Suite struct AttachmentTests {
    @Test func anImageInAPromptIsAnAttachmentSegment() async throws {
        let url = URL(fileURLWithPath: "/tmp/photo.jpg")
        let model = ScriptedModel([.text("A cat.")])
        let session = LanguageModelSession(model: model)
        try await session.respond {
            "Describe this image:"
            Attachment(imageURL: url, orientation: .right).label("image-0")
        }
        let entry = session.transcript[0]
        #expect(model.script.requests[0].transcript[0] == entry)
        guard case .prompt(let prompt) = entry, case .attachment(let segment) = prompt.segments.last else {
            Issue.record("no attachment"); return
        }
        #expect(segment.label == "image-0")
        guard case .image(let image) = segment.content else { return }
        #expect(image.url == url)
        #expect(image.orientation == .right)

        // Found by its label, and coded with the transcript.
        let reference = try ImageReference(GeneratedContent(properties: ["attachmentLabel": "image-0"]))
        #expect(reference.resolve(in: Transcript(entries: [entry])) == image)
        #expect(reference.resolve(in: [entry][...]) == image)
        let other = try ImageReference(GeneratedContent(properties: ["attachmentLabel": "image-1"]))
        #expect(other.resolve(in: Transcript(entries: [entry])) == nil)
        let transcript = Transcript(entries: [entry])
        let decoded = try JSONDecoder().decode(Transcript.self, from: JSONEncoder().encode(transcript))
        #expect(decoded == transcript)
    }

    @Test func aBadOrientationIsADecodingError() throws {
        let json = #"{"version": 1, "entries": [{"type": "prompt", "id": "p", "segments": [{"type": "attachment", "id": "a", "image": {"url": "file:///x.jpg", "orientation": -1}}]}]}"#
        let transcript = try JSONDecoder().decode(Transcript.self, from: Data(json.utf8))
        guard case .prompt(let p) = transcript[0], case .attachment(let a) = p.segments[0], case .image(let image) = a.content else {
            Issue.record("no attachment"); return
        }
        #expect(image.orientation == .up)  // an orientation that isn't one is left out
    }

    @Test func imageReferenceIsGenerable() throws {
        let reference = try ImageReference(GeneratedContent(json: #"{"attachmentLabel": "image-3"}"#))
        #expect(reference.attachmentLabel == "image-3")
        #expect(try ImageReference(reference.generatedContent) == reference)
        let schema = try String(decoding: JSONEncoder().encode(ImageReference.generationSchema), as: UTF8.self)
        #expect(schema.contains("attachmentLabel"))
    }
}
