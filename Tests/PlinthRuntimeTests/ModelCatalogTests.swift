import Foundation
import PlinthJSON
@testable import PlinthModels
import PlinthRuntime
import Synchronization
import Testing

/// The model catalog and the local model cache: the built-in list is the manifest file,
/// names resolve, and each way of not having a model gives its own error.
struct ModelCatalogTests {
    /// The package root, found from this file's path (Tests/PlinthRuntimeTests/ModelCatalogTests.swift).
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static var defaultModel: URL? { TestModels.path(TestModels.smolLM2) }

    struct Manifest: Decodable { var `default`: String; var models: [ModelEntry] }

    /// A fresh, empty directory for a store's home; removed after `body`.
    static func withTemporaryHome<R>(_ body: (URL) throws -> R) throws -> R {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-home-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        return try body(home)
    }

    // MARK: Catalog

    @Test func builtInCatalogIsTheManifestFile() throws {
        // The binary carries Models/models.json as it is in the tree, nothing else.
        let url = Self.packageRoot.appendingPathComponent("Models/models.json")
        let manifest = try JSONDecoder().decode(Manifest.self, from: Data(contentsOf: url))
        #expect(manifest.models == ModelCatalog.entries)
        #expect(manifest.default == ModelCatalog.defaultModelName)
        #expect(manifest.models.count >= 2)
    }

    @Test func aManifestMissingAFieldSaysWhich() throws {
        let good = try JSONValue(parsing: #"{"default": "a", "models": [{"name": "a", "aliases": [], "architecture": "llama", "description": "", "file": "a.gguf", "size": 1, "sha256": "00", "parts": [{"wheel": "w", "path": "p"}]}]}"#)
        #expect(try ModelCatalog.read(good).models.map(\.name) == ["a"])
        let noFile = try JSONValue(parsing: #"{"default": "a", "models": [{"name": "a", "aliases": [], "architecture": "llama", "description": "", "size": 1, "sha256": "00", "parts": []}]}"#)
        let e = #expect(throws: ModelCatalog.ManifestError.self) { try ModelCatalog.read(noFile) }
        #expect(e?.description == "a: file is not a string")
        #expect(throws: ModelCatalog.ManifestError.self) { try ModelCatalog.read(.object([("default", "a")])) }
    }

    @Test func catalogEntriesAreWellFormed() {
        let names = ModelCatalog.entries.map { $0.name.lowercased() }
        let aliases = ModelCatalog.entries.flatMap(\.aliases)
        #expect(Set(names).count == names.count)
        #expect(Set(aliases).count == aliases.count)
        #expect(Set(names).isDisjoint(with: aliases))
        for e in ModelCatalog.entries {
            #expect(e.sha256.count == 64 && e.sha256.allSatisfy { "0123456789abcdef".contains($0) }, "\(e.name)")
            #expect(e.size > 0 && !e.parts.isEmpty && e.file.hasSuffix(".gguf"), "\(e.name)")
            // Aliases are stored lowercased, since lookups lowercase the query.
            #expect(e.aliases.allSatisfy { $0 == $0.lowercased() }, "\(e.name)")
        }
    }

    @Test func defaultModelIsSmolLM2() {
        #expect(ModelCatalog.defaultModelName == "SmolLM2-135M-Instruct")
        #expect(ModelCatalog.defaultModel.name == "SmolLM2-135M-Instruct")
        #expect(ModelCatalog.defaultModel.architecture == "llama")
        #expect(ModelCatalog.defaultModel.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
    }

    @Test(arguments: [
        ("SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct"),
        ("smollm2-135m-instruct", "SmolLM2-135M-Instruct"),
        ("smollm2", "SmolLM2-135M-Instruct"),
        ("SMOLLM2", "SmolLM2-135M-Instruct"),
        ("SmolLM2-135M", "SmolLM2-135M-Instruct"),
        ("Qwen", "Qwen2.5-Coder-0.5B-Instruct"),
        ("QWEN2.5-Coder", "Qwen2.5-Coder-0.5B-Instruct"),
        ("qwen2.5-coder-0.5B", "Qwen2.5-Coder-0.5B-Instruct"),
    ])
    func namesAndAliasesResolveIgnoringCase(query: String, expected: String) {
        #expect(ModelCatalog.entry(named: query)?.name == expected)
    }

    @Test func unknownNamesHaveNoEntry() {
        #expect(ModelCatalog.entry(named: "no-such-model") == nil)
        #expect(ModelCatalog.entry(named: "") == nil)
        #expect(ModelCatalog.entry(named: "smollm") == nil)
    }

    // MARK: Store

    @Test func unknownModelIsNamedWithTheKnownOnes() throws {
        try Self.withTemporaryHome { home in
            let e = caughtError(ModelStoreError.self) { _ = try ModelStore(home: home).resolve("no-such-model") }
            #expect(e == .unknownModel("no-such-model", known: ModelCatalog.entries.map(\.name)))
            #expect(e?.errorDescription?.contains("no-such-model") == true)
            #expect(e?.errorDescription?.contains("SmolLM2-135M-Instruct") == true)
        }
    }

    @Test func missingPathIsFileNotFound() throws {
        try Self.withTemporaryHome { home in
            let store = ModelStore(home: home)
            let path = home.appendingPathComponent("absent/model.gguf").path
            let e = caughtError(ModelStoreError.self) { _ = try store.resolve(path) }
            #expect(e == .fileNotFound(path))
            #expect(e?.errorDescription?.contains(path) == true)
            // A bare name ending in .gguf is taken as a path too.
            #expect(caughtError(ModelStoreError.self) { _ = try store.resolve("missing.gguf") } == .fileNotFound("missing.gguf"))
        }
    }

    @Test func existingPathResolvesToItself() throws {
        try Self.withTemporaryHome { home in
            let file = home.appendingPathComponent("some.gguf")
            try Data([1, 2, 3]).write(to: file)
            #expect(try ModelStore(home: home).resolve(file.path).path == file.path)
        }
    }

    @Test func catalogModelNotFetchedIsNotFetched() throws {
        try Self.withTemporaryHome { home in
            let store = ModelStore(home: home)
            let e = caughtError(ModelStoreError.self) { _ = try store.resolve("smollm2", fetchIfMissing: false) }
            #expect(e == .notFetched("SmolLM2-135M-Instruct"))
            #expect(e?.errorDescription?.contains("plinth models fetch") == true)
            #expect(!store.isFetched(ModelCatalog.defaultModel))
            // Nothing was created for it.
            #expect(!FileManager.default.fileExists(atPath: store.directory(for: ModelCatalog.defaultModel).path))
        }
    }

    @Test func wrongSizeIsNotFetchedEvenWithAStamp() throws {
        try Self.withTemporaryHome { home in
            let store = ModelStore(home: home)
            let entry = ModelCatalog.defaultModel
            try FileManager.default.createDirectory(at: store.directory(for: entry), withIntermediateDirectories: true)
            try Data(repeating: 0, count: 1000).write(to: store.path(for: entry))
            try (entry.sha256 + "\n").write(to: store.path(for: entry).appendingPathExtension("sha256"),
                                            atomically: true, encoding: .utf8)
            #expect(!store.isFetched(entry))
            #expect(caughtError(ModelStoreError.self) { _ = try store.resolve(entry.name) } == .notFetched(entry.name))
        }
    }

    @Test func correctSizeWithoutAMatchingStampIsNotFetched() throws {
        try Self.withTemporaryHome { home in
            let store = ModelStore(home: home)
            let entry = ModelCatalog.defaultModel
            try FileManager.default.createDirectory(at: store.directory(for: entry), withIntermediateDirectories: true)
            // A sparse file of the right size: size alone does not count as fetched.
            let path = store.path(for: entry)
            _ = FileManager.default.createFile(atPath: path.path, contents: nil)
            let h = try FileHandle(forWritingTo: path)
            try h.truncate(atOffset: UInt64(entry.size))
            try h.close()
            #expect(!store.isFetched(entry))
            let stamp = path.appendingPathExtension("sha256")
            try (String(repeating: "0", count: 64) + "\n").write(to: stamp, atomically: true, encoding: .utf8)
            #expect(!store.isFetched(entry))
            // With the catalog's hash in the stamp the store trusts it (it was verified when written).
            try (entry.sha256 + "\n").write(to: stamp, atomically: true, encoding: .utf8)
            #expect(store.isFetched(entry))
            #expect(try store.resolve("SMOLLM2").path == path.path)
        }
    }

    @Test(.enabled(if: defaultModel != nil, "the default model (SmolLM2-135M-Instruct) is not fetched: run `plinth models fetch`"))
    func verifiedCopyResolvesWithoutFetching() throws {
        try Self.withTemporaryHome { home in
            let store = ModelStore(home: home)
            let entry = ModelCatalog.defaultModel
            try FileManager.default.createDirectory(at: store.directory(for: entry), withIntermediateDirectories: true)
            let path = store.path(for: entry)
            // A hard link shares the real file's bytes without copying them (a copy if the
            // temporary directory is on another file system).
            do { try FileManager.default.linkItem(at: Self.defaultModel!, to: path) } catch {
                try FileManager.default.copyItem(at: Self.defaultModel!, to: path)
            }
            try (entry.sha256 + "\n").write(to: path.appendingPathExtension("sha256"), atomically: true, encoding: .utf8)
            #expect(store.isFetched(entry))
            // fetchIfMissing: true would download if the store thought the file missing; it must not.
            let resolved = try store.resolve(entry.name, fetchIfMissing: true)
            #expect(resolved.path == path.path)
            #expect(try store.fetch(entry).path == path.path)
            #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent("tmp").path))
            // The resolved file is the real model.
            #expect(try GGUFFile(url: resolved).string("general.architecture") == "llama")
        }
    }

    /// The verified file's identity is noted beside the stamp: a file damaged in place (same size)
    /// is verified again and no longer "fetched"; restored, or copied elsewhere, it verifies and
    /// counts again (no download). Two fetches at once both return the verified file.
    @Test(.enabled(if: defaultModel != nil, "the default model (SmolLM2-135M-Instruct) is not fetched: run `plinth models fetch`"))
    func aFileDamagedInPlaceIsVerifiedAgain() throws {
        try Self.withTemporaryHome { home in
            let store = ModelStore(home: home)
            let entry = ModelCatalog.defaultModel
            try FileManager.default.createDirectory(at: store.directory(for: entry), withIntermediateDirectories: true)
            let path = store.path(for: entry)
            try FileManager.default.copyItem(at: Self.defaultModel!, to: path)  // a copy: it is written to below
            let results = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                let got = (try? store.fetch(entry).path) ?? "failed"
                results.withLock { $0.append(got) }
            }
            #expect(results.withLock { $0 } == [path.path, path.path])
            #expect(store.isFetched(entry))
            func overwrite(_ bytes: [UInt8]) throws {
                let h = try FileHandle(forWritingTo: path)
                try h.seek(toOffset: 5_000_000)
                try h.write(contentsOf: Data(bytes))
                try h.close()
            }
            let original = try FileHandle(forReadingFrom: path)
            try original.seek(toOffset: 5_000_000)
            let kept = [UInt8](try original.read(upToCount: 16) ?? Data())
            try original.close()
            try overwrite(kept.map { ~$0 })
            #expect(!store.isFetched(entry), "a damaged file still counts as fetched")
            #expect(throws: ModelStoreError.notFetched(entry.name)) { try store.resolve(entry.name) }
            try overwrite(kept)
            #expect(store.isFetched(entry), "the restored file verifies again")
            #expect(try store.fetch(entry).path == path.path)
            // A copy of the cache (another inode and time) verifies once, then counts.
            let copy = home.appendingPathComponent("copy")
            try FileManager.default.copyItem(at: home.appendingPathComponent("models"), to: copy.appendingPathComponent("models"))
            let copied = ModelStore(home: copy)
            #expect(copied.isFetched(entry))
            #expect(try copied.resolve(entry.name).path == copied.path(for: entry).path)
        }
    }

    @Test(.enabled(if: defaultModel != nil, "the default model (SmolLM2-135M-Instruct) is not fetched: run `plinth models fetch`"))
    func symlinkedCopyCountsAsFetched() throws {
        // A user may link a model into the cache instead of copying it.
        try Self.withTemporaryHome { home in
            let store = ModelStore(home: home)
            let entry = ModelCatalog.defaultModel
            try FileManager.default.createDirectory(at: store.directory(for: entry), withIntermediateDirectories: true)
            let path = store.path(for: entry)
            try FileManager.default.createSymbolicLink(at: path, withDestinationURL: Self.defaultModel!)
            try (entry.sha256 + "\n").write(to: path.appendingPathExtension("sha256"), atomically: true, encoding: .utf8)
            #expect(store.isFetched(entry))
            #expect(try store.resolve(entry.name).path == path.path)
        }
    }
}
