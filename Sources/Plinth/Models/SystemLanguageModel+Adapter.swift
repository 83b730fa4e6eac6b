import Foundation
internal import PlinthJSON
internal import PlinthRuntime

extension SystemLanguageModel {
    /// Specializes the system language model for custom use cases.
    ///
    /// On Apple platforms an adapter is an `.fmadapter` package trained with Apple's toolkit. In
    /// Plinth it is a LoRA adapter for the default model: a PEFT folder (`adapter_config.json`
    /// and `adapter_model.safetensors`) or a llama.cpp GGUF LoRA file, found by path or by name
    /// in Plinth's adapter directories (`$PLINTH_ADAPTERS`, `$PLINTH_HOME/adapters`, and the
    /// adapters Plinth ships). It runs unmerged, so sessions with different adapters share the
    /// model's steps.
    ///
    /// ```swift
    /// let adapter = try SystemLanguageModel.Adapter(name: "content-tagger")
    /// let model = SystemLanguageModel(adapter: adapter)
    /// let session = LanguageModelSession(model: model)
    /// ```
    public struct Adapter: Sendable, Hashable {
        /// The adapter's file or folder.
        let url: URL
        /// The adapter's name (its folder's or file's name).
        let name: String
        private let metadata: [String: String]

        /// Creates an adapter from the file or folder at `fileURL`.
        ///
        /// - Throws: ``AssetError/invalidAsset(_:)`` when there is no adapter there.
        public init(fileURL: URL) throws {
            let store = AdapterStore(directories: [])
            let url: URL
            do { url = try store.resolve(fileURL.path) } catch {
                throw AssetError.invalidAsset(.init(debugDescription: error.localizedDescription))
            }
            try self.init(resolved: url, name: LoRAAdapter.name(of: url))
        }

        /// Creates an adapter from the name of one in Plinth's adapter directories.
        ///
        /// - Throws: ``AssetError/invalidAdapterName(_:)`` for a name that can't name an adapter
        ///   (empty, or with a path separator), ``AssetError/compatibleAdapterNotFound(_:)``
        ///   when no adapter of that name is installed.
        public init(name: String) throws {
            guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
                throw AssetError.invalidAdapterName(.init(debugDescription: "'\(name)' is not an adapter name: use a file URL for paths"))
            }
            let url: URL
            do { url = try AdapterStore.default.resolve(name) } catch {
                throw AssetError.compatibleAdapterNotFound(.init(debugDescription: error.localizedDescription))
            }
            try self.init(resolved: url, name: name)
        }

        private init(resolved url: URL, name: String) throws {
            self.url = url
            self.name = name
            do {
                try Self.checkFormat(url)
            } catch {
                throw AssetError.invalidAsset(.init(debugDescription: "\(url.path): \(error.localizedDescription)"))
            }
            metadata = Self.readMetadata(near: url)
        }

        /// Values the adapter's creator attached to it: the `creatorDefined` object of a
        /// `metadata.json` beside the adapter (strings, numbers and booleans).
        public var creatorDefinedMetadata: [String: Any] {
            var out: [String: Any] = [:]
            for (k, v) in metadata {
                if let d = Double(v), v.first.map({ $0.isNumber || $0 == "-" }) == true { out[k] = d }
                else if v == "true" || v == "false" { out[k] = v == "true" }
                else { out[k] = v }
            }
            return out
        }

        /// Reads the adapter against the default model and prepares it, so the first response
        /// doesn't wait for it.
        ///
        /// - Throws: ``AssetError/invalidAsset(_:)`` when the adapter doesn't fit the model (an
        ///   adapter for another model, or a damaged file), `SystemLanguageModel.Error` when
        ///   the model isn't downloaded.
        public func compile() async throws {
            let local = LocalLanguageModel(name: ModelCatalog.defaultModelName, adapter: url)
            let instance: LocalModelInstance
            do { instance = try local.instance() } catch {
                throw SystemLanguageModel.Error.assetsUnavailable(.init(debugDescription: (error as? LocalizedError)?.errorDescription ?? "\(error)"))
            }
            let adapter: LoRAAdapter
            do { adapter = try instance.adapter(at: url) } catch {
                throw AssetError.invalidAsset(.init(debugDescription: (error as? LocalizedError)?.errorDescription ?? "\(error)"))
            }
            // A system model's adapter is made for that model (Apple's versioned adapters): one
            // naming another base model is not its, whatever its shapes.
            if let note = adapter.baseModelNote { throw AssetError.invalidAsset(.init(debugDescription: note)) }
        }

        /// The identifiers of the installed adapters named `name` that fit this model's format:
        /// `[name]` when there is one, else none.
        public static func compatibleAdapterIdentifiers(name: String) -> [String] {
            guard let url = try? AdapterStore.default.resolve(name), (try? checkFormat(url)) != nil else { return [] }
            return [name]
        }

        /// Whether the adapter at `fileURL` (a PEFT folder or a GGUF LoRA file) fits the default
        /// model: it reads, and its architecture, named base model and shapes are the model's.
        /// False when the model isn't downloaded. Apple's `isCompatible(_:)` asks this of a
        /// Background Assets pack, which Linux has no counterpart of; this asks it of the file.
        public static func isCompatible(_ fileURL: URL) -> Bool {
            guard let url = try? AdapterStore(directories: []).resolve(fileURL.path), (try? checkFormat(url)) != nil,
                  let instance = try? LocalLanguageModel.default.instance()
            else { return false }
            // Read apart from the model's adapter cache: a check should neither keep the adapter
            // in memory nor see an older file at the same path.
            guard let adapter = try? LoRAAdapter(contentsOf: url, for: instance.model.transformer) else { return false }
            return adapter.baseModelNote == nil
        }

        /// Removes the adapters in `$PLINTH_HOME/adapters` that no longer fit the default model
        /// (their shapes or base model differ). Adapters elsewhere are left alone.
        public static func removeObsoleteAdapters() throws {
            let dir = ModelStore.defaultHome.appendingPathComponent("adapters")
            let local = LocalLanguageModel.default
            guard let instance = try? local.instance() else { return }
            let store = AdapterStore(directories: [dir])
            for name in store.names() {
                guard let url = try? store.resolve(name) else { continue }
                let obsolete: Bool
                do {
                    obsolete = try LoRAAdapter(contentsOf: url, for: instance.model.transformer).baseModelNote != nil
                } catch {
                    switch error {
                    case .shapeMismatch, .architectureMismatch, .unknownTarget: obsolete = true
                    default: obsolete = false
                    }
                }
                guard obsolete else { continue }
                let entry = FileManager.default.fileExists(atPath: dir.appendingPathComponent(name).path)
                    ? dir.appendingPathComponent(name) : dir.appendingPathComponent(name + ".gguf")
                try FileManager.default.removeItem(at: entry)
            }
        }

        /// Errors of finding and reading adapters.
        public enum AssetError: Swift.Error, LocalizedError {
            /// The adapter's file is not a valid adapter.
            case invalidAsset(Context)
            /// The name can't name an adapter.
            case invalidAdapterName(Context)
            /// No adapter of the name fits the model.
            case compatibleAdapterNotFound(Context)

            /// The context of an asset error.
            public struct Context: Sendable {
                /// A description for developers.
                public let debugDescription: String

                public init(debugDescription: String) {
                    self.debugDescription = debugDescription
                }
            }

            public var errorDescription: String? {
                switch self {
                case .invalidAsset(let c): "The adapter is invalid: \(c.debugDescription)"
                case .invalidAdapterName(let c): "Invalid adapter name: \(c.debugDescription)"
                case .compatibleAdapterNotFound(let c): "No compatible adapter was found: \(c.debugDescription)"
                }
            }

            public var recoverySuggestion: String? {
                switch self {
                case .invalidAsset: "Give a PEFT adapter folder or a llama.cpp GGUF LoRA file made for the default model."
                case .invalidAdapterName: "Use the name of an adapter in $PLINTH_HOME/adapters, or a file URL."
                case .compatibleAdapterNotFound: "Install the adapter in $PLINTH_HOME/adapters (see `plinth adapters list`)."
                }
            }
        }

        // MARK: Reading

        /// Checks the files are an adapter (a PEFT config with its safetensors, or a GGUF whose
        /// `general.type` is adapter), without the model.
        static func checkFormat(_ url: URL) throws {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { throw AdapterError.notFound(url.path) }
            if isDirectory.boolValue {
                _ = try JSONValue(parsing: Array(Data(contentsOf: url.appendingPathComponent("adapter_config.json"))))
                _ = try SafetensorsFile(url: url.appendingPathComponent("adapter_model.safetensors"))
            } else {
                let file = try GGUFFile(url: url)
                guard try file.string("general.type") == "adapter" else {
                    throw AdapterError.notAnAdapter(url.path, "general.type is not 'adapter'")
                }
            }
        }

        /// The `creatorDefined` object of `metadata.json` in the adapter's folder (or the folder
        /// holding its `peft/` folder or GGUF file).
        private static func readMetadata(near url: URL) -> [String: String] {
            let folders = [url, url.deletingLastPathComponent()]
            for folder in folders {
                let file = folder.appendingPathComponent("metadata.json")
                guard let data = try? Data(contentsOf: file), let json = try? JSONValue(parsing: Array(data)),
                      let members = json["creatorDefined"]?.objectMembers else { continue }
                var out: [String: String] = [:]
                for (k, v) in members {
                    out[k] = v.stringValue ?? v.numberText ?? v.boolValue.map { $0 ? "true" : "false" } ?? v.compactText
                }
                return out
            }
            return [:]
        }
    }

    /// Creates the system language model specialized by `adapter`.
    ///
    /// ```swift
    /// let model = SystemLanguageModel(adapter: try .init(name: "content-tagger"))
    /// ```
    public convenience init(adapter: Adapter, guardrails: Guardrails = .default) {
        self.init(useCase: .general, guardrails: guardrails, store: ModelStore(), adapter: adapter)
    }

    /// The name of the adapter Plinth ships for ``UseCase/contentTagging``.
    static let contentTaggingAdapterName = "content-tagger"

    /// The adapter responses run with: the one given, or for ``UseCase/contentTagging`` the
    /// content-tagging adapter Plinth ships (none when it isn't installed).
    var adapterURL: URL? {
        if let adapter { return adapter.url }
        if useCase == .contentTagging { return try? AdapterStore.default.resolve(Self.contentTaggingAdapterName) }
        return nil
    }
}
