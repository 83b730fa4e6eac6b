import ArgumentParser
import Foundation
import PlinthRuntime
import Synchronization

struct Generate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Generate text from a prompt, streaming it to standard output.",
        discussion: "Only the generated text goes to stdout, as it is produced; load messages and timings go to stderr. --temperature 0 and --greedy both mean greedy decoding. Filters apply in the order repetition penalty, top-k, top-p, min-p, temperature."
    )

    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var adapterOptions: AdapterOptions

    @Option(name: [.short, .long], help: "The prompt text.")
    var prompt: String?

    @Option(help: "Read the prompt from a file ('-' for standard input).")
    var promptFile: String?

    @Flag(help: "Wrap the prompt as a user message in the model's chat template.")
    var chat = false

    @Option(help: "A system message (implies --chat).")
    var system: String?

    @Option(name: [.customShort("n"), .customLong("max-tokens")], help: "The most tokens to generate.")
    var maxTokens: Int = 256

    @Option(help: "Sampling temperature; 0 means greedy.")
    var temperature: Float = 0.8

    @Option(help: "Keep only the K most likely tokens (0 disables).")
    var topK: Int = 40

    @Option(help: "Keep the smallest set of tokens whose probability reaches P (1 disables).")
    var topP: Float = 0.95

    @Option(help: "Drop tokens less likely than P times the most likely one (0 disables).")
    var minP: Float = 0.05

    @Option(help: "Penalty for tokens among the last 64 (1 disables).")
    var repeatPenalty: Float = 1.0

    @Option(help: "Stop when the text reaches this string (repeatable); it is not printed.")
    var stop: [String] = []

    @Option(help: "Random seed; the same seed gives the same text. Random when omitted.")
    var seed: UInt64?

    @Flag(help: "Greedy decoding: always take the most likely token.")
    var greedy = false

    @Option(name: [.short, .customLong("context")], help: "Context window in tokens (default: the model's, at most 4096).")
    var contextLength: Int?

    @Option(name: [.short, .long], help: "Kernel threads (default: PLINTH_THREADS or all cores).")
    var threads: Int?

    @OptionGroup var backendOptions: BackendOptions

    @Flag(help: "Do not print timings to stderr.")
    var quiet = false

    func validate() throws {
        guard (prompt == nil) != (promptFile == nil) else {
            throw ValidationError("give exactly one of --prompt and --prompt-file")
        }
        guard maxTokens >= 0 else { throw ValidationError("--max-tokens must not be negative") }
        guard temperature >= 0, temperature.isFinite else { throw ValidationError("--temperature must be a number, 0 or more, not \(temperature)") }
        guard topK >= 0 else { throw ValidationError("--top-k must not be negative") }
        guard topP > 0, topP <= 1 else { throw ValidationError("--top-p must be in (0, 1]") }
        guard minP >= 0, minP <= 1 else { throw ValidationError("--min-p must be in [0, 1]") }
        guard repeatPenalty > 0, repeatPenalty.isFinite else { throw ValidationError("--repeat-penalty must be a positive number, not \(repeatPenalty)") }
        if let contextLength { guard contextLength > 0 else { throw ValidationError("--context must be positive") } }
        if let threads { guard threads > 0 else { throw ValidationError("--threads must be positive") } }
    }

    func run() throws {
        try reportingErrors {
            let text = try promptText()
            let model = try modelOptions.load()
            let adapter = try adapterOptions.load(for: model)
            let useChat = chat || system != nil
            let tokens: [Int32]
            if useChat {
                var messages: [ChatMessage] = []
                if let system { messages.append(ChatMessage(role: "system", content: system)) }
                messages.append(ChatMessage(role: "user", content: text))
                tokens = try model.tokenizer.encodeRendered(model.renderChat(messages))
            } else {
                tokens = model.tokenizer.encode(text, addSpecial: true, parseSpecial: true)
            }
            let scheduler = try Scheduler(model: model, configuration: .init(contextLength: contextLength, slots: 1, threads: threads,
                                                                                    backend: backendOptions.value()))
            let seed = seed ?? UInt64.random(in: 0...UInt64(UInt32.max))
            var sampling = SamplingParameters(temperature: temperature, topK: topK, topP: topP, minP: minP,
                                              repetitionPenalty: repeatPenalty, seed: seed)
            if greedy || temperature == 0 {
                sampling = .greedy
                sampling.repetitionPenalty = repeatPenalty
            }
            if !quiet && seed != self.seed && !sampling.isGreedy { Diagnostics.note("seed: \(seed)") }
            guard maxTokens > 0 else { return }
            // A write that fails (standard output full or closed) stops the generation, and is
            // said after it.
            let failedWrite = Mutex<(any Error)?>(nil)
            let result = try scheduler.runWhile(GenerationRequest(prompt: tokens, sampling: sampling, maxTokens: maxTokens,
                                                                  stopSequences: stop, adapter: adapter)) { event in
                guard case .text(let piece, _) = event else { return true }
                do { try Output.write(piece) } catch {
                    failedWrite.withLock { $0 = error }
                    return false
                }
                return true
            }
            if let error = failedWrite.withLock({ $0 }) { throw error }
            try Output.write("\n")
            if !quiet {
                Diagnostics.note(String(format: "prompt: %d tokens, %.1f tok/s; generated: %d tokens, %.1f tok/s; stop: %@",
                                        result.promptTokens, result.prefillTokensPerSecond, result.generatedTokens,
                                        result.decodeTokensPerSecond, result.finishReason.rawValue))
            }
        }
    }

    private func promptText() throws -> String {
        try prompt ?? FileChecks.readText(promptFile!, what: "prompt file")
    }
}
