import Foundation
import PlinthRuntime

/// Locates the real models that integration tests run against (fetched by `plinth models fetch`).
enum TestModels {
    /// The cache the store uses: `$PLINTH_HOME`, else `~/.cache/plinth`.
    static var home: URL { ModelStore.defaultHome }

    static let smolLM2 = "SmolLM2-135M-Instruct"
    static let qwen25Coder = "Qwen2.5-Coder-0.5B-Instruct"
    static let gemma3 = "Gemma-3-270M"

    /// The cached GGUF file of a catalog model, or nil when it has not been fetched.
    static func path(_ name: String) -> URL? {
        guard let entry = ModelCatalog.entry(named: name) else { return nil }
        let url = ModelStore(home: home).path(for: entry)
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }

    static var fixtures: URL {
        Bundle.module.url(forResource: "Fixtures", withExtension: nil)!
    }

    /// Decodes a JSON fixture at `path` under Fixtures/.
    static func fixture<T: Decodable>(_ path: String, as type: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(type, from: Data(contentsOf: fixtures.appendingPathComponent(path)))
    }
}
