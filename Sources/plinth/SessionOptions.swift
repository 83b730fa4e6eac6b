import ArgumentParser
import Foundation
import Plinth
import PlinthRuntime

/// Options of the commands that talk to a model through `LanguageModelSession`.
struct SessionOptions: ParsableArguments {
    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var backendOptions: BackendOptions

    @Option(help: "Instructions for the model (its system message).")
    var instructions: String?

    @Flag(help: "Greedy decoding: always take the most likely token.")
    var greedy = false

    @Option(help: "Sampling temperature (default 0.8; 0 means greedy).")
    var temperature: Double?

    @Option(help: "Sample from the K most likely tokens. Without --top-k, --top-p or --seed: top-k 40, top-p 0.95 and min-p 0.05, as llama.cpp.")
    var topK: Int?

    @Option(help: "Sample from the smallest set of tokens whose probability reaches P (instead of --top-k).")
    var topP: Double?

    @Option(help: "Random seed; the same seed gives the same text. A seed rides on a sampling mode, so alone it samples as --top-k 40 (no top-p or min-p cut). Random when omitted.")
    var seed: UInt64?

    @Option(name: [.customShort("n"), .customLong("max-tokens")], help: "The most tokens one response may take (respond --schema: 512 unless given; a value always closes within it).")
    var maxTokens: Int?

    @Option(name: [.customShort("c"), .customLong("context")], help: "Tokens the model attends to, prompt and responses together (default: the model's, at most 4096; never more than the model's).")
    var context: Int?

    func validate() throws {
        if let context { guard context >= 16 else { throw ValidationError("--context must be at least 16, not \(context)") } }
        if greedy && (temperature != nil || topK != nil || topP != nil || seed != nil) {
            throw ValidationError("--greedy can't be combined with --temperature, --top-k, --top-p or --seed")
        }
        if let temperature { guard temperature >= 0, temperature.isFinite else { throw ValidationError("--temperature must be a number, 0 or more, not \(temperature)") } }
        if topK != nil && topP != nil { throw ValidationError("give at most one of --top-k and --top-p") }
        if let topK { guard topK >= 1 else { throw ValidationError("--top-k must be at least 1") } }
        if let topP { guard topP > 0, topP <= 1 else { throw ValidationError("--top-p must be in (0, 1]") } }
        if let maxTokens { guard maxTokens >= 1 else { throw ValidationError("--max-tokens must be at least 1") } }
    }

    /// The generation options these flags ask for.
    var generationOptions: GenerationOptions {
        let mode: GenerationOptions.SamplingMode?
        if greedy || temperature == 0 {
            mode = .greedy
        } else if let topP {
            mode = .random(probabilityThreshold: topP, seed: seed)
        } else if topK != nil || seed != nil {
            mode = .random(top: topK ?? 40, seed: seed)
        } else {
            mode = nil
        }
        return GenerationOptions(sampling: mode, temperature: temperature, maximumResponseTokens: maxTokens)
    }

    /// The model for one conversation: one sequence decoding at once, so that on a GPU its KV
    /// cache is a few slots (the conversation's and prefixes kept warm), not a server's 80.
    func localModel() throws -> LocalLanguageModel {
        LocalLanguageModel(name: try modelOptions.url().path, adapter: try adapterOptions.url(), adapterScale: adapterOptions.adapterScale,
                           backend: try backendOptions.localValue(),
                           parallel: 1, contextLength: context)
    }

    func session(_ model: LocalLanguageModel) -> LanguageModelSession {
        LanguageModelSession(model: model, instructions: instructions)
    }
}

/// The model's speed for the last response, from the metadata the local model reports.
func speedNote(_ transcript: Transcript, usage: LanguageModelSession.Usage) -> String {
    var rate: Double?
    var ttft: Double?
    if case .response(let response)? = transcript.last {
        rate = response.metadata["tokensPerSecond"] as? Double
        ttft = response.metadata["timeToFirstTokenSeconds"] as? Double
    }
    var parts = ["prompt: \(usage.input.totalTokenCount) tokens (\(usage.input.cachedTokenCount) cached)",
                 "generated: \(usage.output.totalTokenCount) tokens"]
    if let rate { parts.append(String(format: "%.1f tok/s", rate)) }
    if let ttft { parts.append(String(format: "first token after %.0f ms", ttft * 1000)) }
    return parts.joined(separator: ", ")
}
