import Foundation
import Plinth
import PlinthRuntime
import Synchronization

/// How `plinth serve` runs.
public struct ServerSettings: Sendable {
    /// The models to serve: catalog names or GGUF paths. The first is the default.
    public var models: [String]
    public var host: String
    /// 0 picks a free port (the server reports it once listening).
    public var port: Int
    /// Bearer token every endpoint but `/health` requires; nil leaves the API open.
    public var apiKey: String?
    /// Sequences decoding at once per model.
    public var parallel: Int
    /// Requests waiting for a slot, per model, before new ones get 429.
    public var maxQueue: Int
    /// Tokens per sequence (prompt and output); nil: the model's, at most 4096.
    public var contextLength: Int?
    /// Largest request body accepted, in bytes.
    public var maxBodyBytes: Int
    /// Seconds a request may run before it is cancelled; nil: no limit.
    public var requestTimeout: Double?
    /// Seconds a response schema or tool set may take to compile.
    public var schemaTimeLimit: Double

    public init(models: [String], host: String = "127.0.0.1", port: Int = 8080, apiKey: String? = nil, parallel: Int = 16,
                maxQueue: Int = 256, contextLength: Int? = nil, maxBodyBytes: Int = 8 << 20, requestTimeout: Double? = 600,
                schemaTimeLimit: Double = 10) {
        self.models = models
        self.host = host
        self.port = port
        self.apiKey = apiKey
        self.parallel = parallel
        self.maxQueue = maxQueue
        self.contextLength = contextLength
        self.maxBodyBytes = maxBodyBytes
        self.requestTimeout = requestTimeout
        self.schemaTimeLimit = schemaTimeLimit
    }
}

/// The models a server serves, loaded in the background after the server starts listening (it
/// answers 503 for a model until it is loaded), and looked up by the names clients use.
final class ModelHost: Sendable {
    enum State: Sendable {
        case loading
        case ready(ServedModel)
        case failed(String)
    }

    struct Entry: Sendable {
        /// The name `/v1/models` lists: the catalog name, or the file's name without `.gguf`.
        var id: String
        /// Names that select it: the id, the name given on the command line, catalog aliases.
        var names: Set<String>
        var created: Int
    }

    let entries: [Entry]
    private let states: Mutex<[State]>

    init(models: [String]) {
        let now = Int(Date().timeIntervalSince1970)
        entries = models.map { given in
            if let e = ModelCatalog.entry(named: given) {
                return Entry(id: e.name, names: Set(([e.name, given] + e.aliases).map { $0.lowercased() }), created: now)
            }
            let id = URL(fileURLWithPath: given).deletingPathExtension().lastPathComponent
            return Entry(id: id, names: [id.lowercased(), given.lowercased()], created: now)
        }
        states = Mutex(Array(repeating: .loading, count: models.count))
    }

    /// Loads every model, one after another (each failure is kept and reported per request).
    func load(_ settings: ServerSettings, log: @Sendable (String) -> Void) {
        for (i, given) in settings.models.enumerated() {
            let state: State
            do {
                let url = try ModelStore().resolve(given, fetchIfMissing: true)
                let model = try ServedModel(url: url, contextLength: settings.contextLength, parallel: settings.parallel,
                                            maxQueued: settings.maxQueue)
                log("loaded \(entries[i].id) from \(url.path): context \(model.contextLength), \(settings.parallel) sequences at once, backend \(model.scheduler.backend)")
                state = .ready(model)
            } catch {
                log("cannot load \(given): \(error.localizedDescription)")
                state = .failed(error.localizedDescription)
            }
            states.withLock { $0[i] = state }
        }
    }

    /// The model a request names. `ADAPTER` suffixes (`name:adapter`) are refused until adapters exist.
    func model(named name: String) throws -> (id: String, model: ServedModel) {
        let key = name.lowercased()
        guard let i = entries.firstIndex(where: { $0.names.contains(key) }) else {
            if let colon = key.firstIndex(of: ":"), entries.contains(where: { $0.names.contains(String(key[..<colon])) }) {
                throw APIError.invalid("model", "`\(name)` asks for an adapter; this server serves no adapters.", code: "model_not_found")
            }
            throw APIError.modelNotFound(name, served: entries.map(\.id))
        }
        switch states.withLock({ $0[i] }) {
        case .loading: throw APIError.loading(entries[i].id)
        case .failed(let why): throw APIError(503, "server_error", code: "model_unavailable", "The model `\(entries[i].id)` failed to load: \(why)")
        case .ready(let model): return (entries[i].id, model)
        }
    }

    /// Every loaded model with its id.
    var loaded: [(id: String, model: ServedModel)] {
        let s = states.withLock { $0 }
        return zip(entries, s).compactMap { entry, state in
            if case .ready(let m) = state { return (entry.id, m) }
            return nil
        }
    }

    /// Whether every model has loaded.
    var isReady: Bool { loaded.count == entries.count }

    /// The state of each model, for `/health`.
    var status: [(id: String, state: String)] {
        let s = states.withLock { $0 }
        return zip(entries, s).map { entry, state in
            switch state {
            case .loading: (entry.id, "loading")
            case .ready: (entry.id, "ok")
            case .failed: (entry.id, "error")
            }
        }
    }
}
