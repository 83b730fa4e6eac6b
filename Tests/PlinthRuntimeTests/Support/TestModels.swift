import Foundation

/// Locates the real models that integration tests run against (fetched by `plinth models fetch`).
enum TestModels {
    static var home: URL {
        if let h = ProcessInfo.processInfo.environment["PLINTH_HOME"], !h.isEmpty {
            return URL(fileURLWithPath: h)
        }
        return FileManager.default.homeDirectoryForCurrentUser
            .appendingPathComponent(".cache/plinth")
    }

    static let smolLM2 = "SmolLM2-135M-Instruct"
    static let qwen25Coder = "Qwen2.5-Coder-0.5B-Instruct"

    /// The cached GGUF file of a manifest model, or nil when it has not been fetched.
    static func path(_ name: String) -> URL? {
        let dir = home.appendingPathComponent("models/\(name)")
        guard let files = try? FileManager.default.contentsOfDirectory(atPath: dir.path) else { return nil }
        guard let f = files.sorted().first(where: { $0.hasSuffix(".gguf") }) else { return nil }
        return dir.appendingPathComponent(f)
    }

    static var fixtures: URL {
        Bundle.module.url(forResource: "Fixtures", withExtension: nil)!
    }
}
