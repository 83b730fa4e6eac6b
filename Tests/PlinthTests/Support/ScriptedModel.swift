import Foundation
import FoundationModels
import Synchronization

/// One turn a scripted model plays back.
enum ScriptedTurn: Sendable {
    /// Text, sent in pieces of `chunk` characters.
    case text(String, chunk: Int = 4)
    /// Tool calls: (id, tool name, arguments JSON).
    case toolCalls([(String, String, String)])
    /// An error thrown before any text.
    case failure(any Error & Sendable)
    /// Anything else, written by the test.
    case custom(@Sendable (LanguageModelExecutorGenerationRequest, LanguageModelExecutorGenerationChannel) async throws -> Void)
}

/// The turns a scripted model plays, and the requests it received.
final class Script: Sendable {
    private let state: Mutex<(turns: [ScriptedTurn], requests: [LanguageModelExecutorGenerationRequest], prewarmed: Int)>

    init(_ turns: [ScriptedTurn]) {
        state = Mutex((turns, [], 0))
    }

    func next(for request: LanguageModelExecutorGenerationRequest) -> ScriptedTurn? {
        state.withLock { s in
            s.requests.append(request)
            return s.turns.isEmpty ? nil : s.turns.removeFirst()
        }
    }

    func append(_ turns: [ScriptedTurn]) {
        state.withLock { $0.turns += turns }
    }

    var requests: [LanguageModelExecutorGenerationRequest] { state.withLock { $0.requests } }
    var remaining: Int { state.withLock { $0.turns.count } }
    var prewarmCount: Int { state.withLock { $0.prewarmed } }
    func notePrewarm() { state.withLock { $0.prewarmed += 1 } }
}

/// A language model that plays back a script: the executor the tests drive the session with.
struct ScriptedModel: LanguageModel {
    typealias Executor = ScriptedExecutor

    let script: Script
    var capabilities = LanguageModelCapabilities([.guidedGeneration, .toolCalling])

    init(_ turns: [ScriptedTurn], capabilities: LanguageModelCapabilities = LanguageModelCapabilities([.guidedGeneration, .toolCalling])) {
        script = Script(turns)
        self.capabilities = capabilities
    }

    var executorConfiguration: ScriptedExecutor.Configuration { .init() }
}

struct ScriptedExecutor: LanguageModelExecutor {
    struct Configuration: Hashable, Sendable {}
    typealias Model = ScriptedModel

    init(configuration: Configuration) {}

    func prewarm(model: ScriptedModel, transcript: Transcript) {
        model.script.notePrewarm()
    }

    nonisolated(nonsending) func respond(to request: LanguageModelExecutorGenerationRequest, model: ScriptedModel,
                                         streamingInto channel: LanguageModelExecutorGenerationChannel) async throws {
        guard let turn = model.script.next(for: request) else {
            throw LanguageModelError.timeout(.init(debugDescription: "The script has no more turns."))
        }
        switch turn {
        case .text(let text, let chunk):
            var rest = Substring(text)
            var sent = 0
            while !rest.isEmpty {
                try Task.checkCancellation()
                let piece = rest.prefix(chunk)
                rest = rest.dropFirst(piece.count)
                sent += 1
                await channel.send(.response(action: .appendText(String(piece), tokenCount: 1)))
            }
            await channel.send(.response(action: .updateUsage(
                input: .init(totalTokenCount: 10 * request.transcript.count, cachedTokenCount: 2),
                output: .init(totalTokenCount: sent, reasoningTokenCount: 0))))
        case .toolCalls(let calls):
            for (id, name, arguments) in calls {
                await channel.send(.toolCalls(action: .toolCall(id: id, name: name, action: .appendArguments(arguments, tokenCount: 3))))
            }
            await channel.send(.toolCalls(action: .updateUsage(
                input: .init(totalTokenCount: 5, cachedTokenCount: 0), output: .init(totalTokenCount: 3 * calls.count, reasoningTokenCount: 0))))
        case .failure(let error):
            throw error
        case .custom(let body):
            try await body(request, channel)
        }
    }
}
