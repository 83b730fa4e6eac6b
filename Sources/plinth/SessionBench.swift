import ArgumentParser
import Foundation
import Plinth
import PlinthJSON
import PlinthRuntime
import Synchronization

/// `plinth bench-session`: what `LanguageModelSession` costs over the raw runtime, and what KV
/// reuse saves on a later turn.
struct SessionBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-session",
        abstract: "Measure the session API against the raw runtime, and the time to first token of a warm turn.",
        discussion: """
            Throughput: the same greedy generation (same prompt tokens, same output) through \
            a Scheduler (the runtime's engine, submitted to directly) and through a LanguageModelSession on a LocalLanguageModel, in alternating \
            rounds. Each side's decode rate is (tokens − 1) / (time from the first streamed text \
            to the end), timed from outside, so the session's streaming, transcript and snapshot \
            work counts.

            Time to first token: each round builds a conversation of about --history tokens \
            (instructions and earlier turns, made unique per round so no cache holds it), asks a \
            new question in a fresh session (cold: the whole history is prefilled) and then a \
            follow-up in the same session (warm: only the new tokens are). Both are timed from \
            the call to the first streamed text.

            The throughput figure is the median over rounds of each round's session/raw ratio: \
            the two runs of a round are adjacent, so a shared machine's drift between rounds \
            (often ±15% here) cancels out of the ratio. Times are medians over --rounds.
            """
    )

    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var backendOptions: BackendOptions

    @Option(name: [.customShort("n"), .customLong("gen")], help: "Tokens to generate in the throughput test.")
    var genTokens: Int = 128

    @Option(help: "Approximate tokens of conversation history before the timed turns.")
    var history: Int = 1000

    @Option(name: [.short, .long], help: "Measured rounds of each test.")
    var rounds: Int = 11

    @Flag(help: "Print the results as one JSON object.")
    var json = false

    func validate() throws {
        guard genTokens >= 2 else { throw ValidationError("--gen must be at least 2") }
        guard history >= 0 else { throw ValidationError("--history must not be negative") }
        guard rounds > 0 else { throw ValidationError("--rounds must be positive") }
    }

    func run() async throws {
        try await reportingErrors {
            let url = try modelOptions.url()
            let runtime = try loadingModelFile(url) { try PlinthRuntime.Model(url: url) }
            let model = LocalLanguageModel(name: url.path, backend: try backendOptions.localValue())
            let instructions = "You are a storyteller. Write long, detailed stories."
            let question = "Tell me a story about a lighthouse keeper and a storm."

            // Throughput, alternating which side goes first.
            let prompt = runtime.tokenizer.encodeRendered(try runtime.renderChat([.system(instructions), .user(question)]))
            let scheduler = try Scheduler(model: runtime, configuration: .init(contextLength: prompt.count + genTokens + 1, slots: 1,
                                                                                   backend: backendOptions.value()))
            let options = GenerationOptions(sampling: .greedy, maximumResponseTokens: genTokens)
            var raw: [Double] = [], viaSession: [Double] = []
            var rawText = "", sessionText = "", tokenCount = 0
            _ = try scheduler.run(GenerationRequest(prompt: prompt, maxTokens: 8))  // warm-up
            for round in 0...rounds {
                for side in (round % 2 == 0 ? [0, 1] : [1, 0]) {
                    if side == 0 {
                        let streamed = Mutex((first: UInt64(0), text: ""))
                        scheduler.forgetCachedPrefixes()
                        let result = try scheduler.run(GenerationRequest(prompt: prompt, maxTokens: genTokens)) { event in
                            guard case .text(let piece, _) = event else { return }
                            streamed.withLock { s in
                                if s.first == 0 { s.first = DispatchTime.now().uptimeNanoseconds }
                                s.text += piece
                            }
                        }
                        let end = DispatchTime.now().uptimeNanoseconds
                        let (first, text) = streamed.withLock { $0 }
                        if round > 0 { raw.append(Double(result.generatedTokens - 1) / (Double(end - first) / 1e9)) }
                        rawText = text
                        tokenCount = result.generatedTokens
                    } else {
                        let session = LanguageModelSession(model: model, instructions: instructions)
                        let turn = try await Self.timedTurn(session, question, options)
                        if round > 0 {
                            viaSession.append(Double(turn.usage.output.totalTokenCount - 1) / (Double(turn.end - turn.first) / 1e9))
                        }
                        sessionText = turn.text
                    }
                }
            }
            guard rawText == sessionText else {
                throw CLIError("the session and the runtime generated different text, so the rates aren't comparable")
            }

            // Time to first token with a long history: cold, then the warm follow-up.
            var cold: [Double] = [], warm: [Double] = [], historyTokens: [Int] = [], warmPrefill: [Int] = []
            let short = GenerationOptions(sampling: .greedy, maximumResponseTokens: 8)
            for round in 0...rounds {
                let transcript = Self.conversation(tag: "\(UUID().uuidString.prefix(8))", approximateTokens: history, runtime: runtime)
                let session = LanguageModelSession(model: model, transcript: transcript)
                let first = try await Self.timedTurn(session, "What did the keeper see first?", short)
                let second = try await Self.timedTurn(session, "And what happened next?", short)
                guard round > 0 else { continue }  // the first round warms up
                cold.append(Double(first.first - first.start) / 1e9)
                warm.append(Double(second.first - second.start) / 1e9)
                historyTokens.append(first.usage.input.totalTokenCount)
                warmPrefill.append(second.usage.input.totalTokenCount - second.usage.input.cachedTokenCount)
            }

            let rawRate = median(raw), sessionRate = median(viaSession)
            let pairedRatio = median(zip(raw, viaSession).map { $1 / $0 })
            let coldTTFT = median(cold), warmTTFT = median(warm)
            if json {
                let object: JSONValue = [
                    "model": .string(url.lastPathComponent), "generated_tokens": .integer(tokenCount),
                    "raw_tokens_per_second": .array(raw.map(JSONValue.double)),
                    "session_tokens_per_second": .array(viaSession.map(JSONValue.double)),
                    "throughput_ratio": .double(pairedRatio),
                    "history_tokens": .array(historyTokens.map(JSONValue.integer)),
                    "warm_prefilled_tokens": .array(warmPrefill.map(JSONValue.integer)),
                    "cold_ttft_seconds": .array(cold.map(JSONValue.double)), "warm_ttft_seconds": .array(warm.map(JSONValue.double)),
                    "ttft_ratio": .double(warmTTFT / coldTTFT),
                ]
                try Output.line(object.prettyText)
            } else {
                try Output.line("model: \(url.lastPathComponent), \(rounds) rounds, medians")
                try Output.line(String(format: "decode, %d tokens: raw runtime %.1f tok/s, session %.1f tok/s (medians); session/raw %.3f (median of paired rounds)",
                             tokenCount, rawRate, sessionRate, pairedRatio))
                try Output.line(String(format: "first token with a %d-token history: cold %.0f ms, warm %.1f ms (%d tokens prefilled): warm/cold %.3f",
                             historyTokens.sorted()[historyTokens.count / 2], coldTTFT * 1000, warmTTFT * 1000,
                             warmPrefill.sorted()[warmPrefill.count / 2], warmTTFT / coldTTFT))
            }
        }
    }

    struct TimedTurn {
        var text: String
        var usage: LanguageModelSession.Usage
        /// When the call was made, when the first text came, and when the response was complete.
        var start: UInt64, first: UInt64, end: UInt64
    }

    /// Streams one turn, timing it from outside the session.
    static func timedTurn(_ session: LanguageModelSession, _ prompt: String, _ options: GenerationOptions) async throws -> TimedTurn {
        let start = DispatchTime.now().uptimeNanoseconds
        var first: UInt64 = 0
        let stream = session.streamResponse(to: prompt, options: options)
        for try await snapshot in stream where first == 0 && !snapshot.content.isEmpty {
            first = DispatchTime.now().uptimeNanoseconds
        }
        let response = try await stream.collect()
        let end = DispatchTime.now().uptimeNanoseconds
        return TimedTurn(text: response.content, usage: response.usage, start: start, first: first == 0 ? end : first, end: end)
    }

    /// Instructions and earlier turns of about `approximateTokens` tokens, starting with `tag`
    /// so that no KV slot already holds them.
    static func conversation(tag: String, approximateTokens: Int, runtime: PlinthRuntime.Model) -> Transcript {
        var entries: [Transcript.Entry] = [.instructions(.init(segments: [.text(.init(content: "Conversation \(tag). You are a storyteller."))],
                                                               toolDefinitions: []))]
        let paragraph = "The lighthouse stood on the last rock before the open sea, and every night its keeper climbed the "
            + "spiral stairs to trim the wick, polish the great lens and watch the ships pass far out on the dark water. "
        var count = 0, turn = 0
        while count < approximateTokens {
            turn += 1
            entries.append(.prompt(.init(segments: [.text(.init(content: "Tell me part \(turn) of the story."))])))
            entries.append(.response(.init(assetIDs: [], segments: [.text(.init(content: String(repeating: paragraph, count: 3)))])))
            count = runtime.tokenizer.encode(entries.map { "\($0)" }.joined(separator: "\n"), addSpecial: false, parseSpecial: false).count
        }
        return Transcript(entries: entries)
    }
}

/// The median of a non-empty sample.
func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}
