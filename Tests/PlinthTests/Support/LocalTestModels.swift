import Foundation
import PlinthRuntime
import Testing

/// The real models the local-executor tests run (fetched by `plinth models fetch`); tests that
/// need one are disabled, with this reason, when its file is missing.
enum LocalTestModels {
    static let smolLM2 = "SmolLM2-135M-Instruct"

    /// The cached, verified file of a catalog model, or nil when it isn't fetched.
    static func path(_ name: String) -> URL? {
        guard let entry = ModelCatalog.entry(named: name) else { return nil }
        let store = ModelStore()
        return store.isFetched(entry) ? store.path(for: entry) : nil
    }

    static var hasSmolLM2: Bool { path(smolLM2) != nil }

    static let smolLM2Missing: Comment = "SmolLM2-135M-Instruct isn't downloaded: run `plinth models fetch`"

    static let qwen = "Qwen2.5-Coder-0.5B-Instruct"
    static var hasQwen: Bool { path(qwen) != nil }
    static let qwenMissing: Comment = "Qwen2.5-Coder-0.5B-Instruct isn't downloaded: run `plinth models fetch qwen2.5-coder`"
    static let gemma = "Gemma-3-270M"
    static var hasGemma: Bool { path(gemma) != nil }
    static let gemmaMissing: Comment = "Gemma-3-270M isn't downloaded: run `plinth models fetch gemma3`"
}
