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
    /// Sequences decoding at once per model; nil: the backend's default (16 on the CPU, 64 on a GPU).
    public var parallel: Int?
    /// Where the models run.
    public var backend: LocalLanguageModel.Backend
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
    /// LoRA adapters (names in the adapter directories, or paths) that requests may name as
    /// `MODEL:ADAPTER`, each served unmerged with every model it fits. Clients name only these:
    /// never a path.
    public var adapters: [String]
    /// Web origins (`https://app.example`, or `*` for any) whose pages may call the API from a
    /// browser (CORS), besides pages served from this machine (localhost), which always may.
    public var allowedOrigins: [String]

    public init(models: [String], host: String = "127.0.0.1", port: Int = 8080, apiKey: String? = nil, parallel: Int? = nil,
                maxQueue: Int = 256, contextLength: Int? = nil, maxBodyBytes: Int = 8 << 20, requestTimeout: Double? = 600,
                schemaTimeLimit: Double = 10, adapters: [String] = [], allowedOrigins: [String] = [],
                backend: LocalLanguageModel.Backend = .default) {
        self.models = models
        self.allowedOrigins = allowedOrigins
        self.adapters = adapters
        self.host = host
        self.port = port
        self.apiKey = apiKey
        self.parallel = parallel
        self.backend = backend
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
        case ready(ServedModel, adapters: [ServedAdapter])
        case failed(String)
    }

    /// An adapter requests name as `MODEL:NAME`, and the scales requests asked for.
    struct ServedAdapter: Sendable {
        var name: String
        var adapter: LoRAAdapter
        let scales = ScalesInUse()
    }

    /// The scales other than 1 requests ran an adapter at. The model keeps a copy per scale for
    /// its life (and its context attaches each, prefixes cached apart): a bounded number, so
    /// that requests can't grow memory without end.
    final class ScalesInUse: Sendable {
        static let limit = 16
        private let scales = Mutex<[Float]>([])

        /// Admits `scale` for the adapter named `name`, or throws past the limit.
        func admit(_ scale: Float, adapter name: String) throws {
            guard scale != 1 else { return }
            try scales.withLock { scales in
                guard !scales.contains(scale) else { return }
                guard scales.count < Self.limit else {
                    throw APIError.invalid("adapter_scale", "This server runs at most \(Self.limit) scales of an adapter besides 1; "
                                           + "`\(name)` runs at \(scales.map { "\($0)" }.joined(separator: ", ")).")
                }
                scales.append(scale)
            }
        }
    }

    /// What a request's `model` selects.
    struct Selection {
        /// The name responses carry: the model's id, then `:ADAPTER` when one is named.
        var id: String
        var model: ServedModel
        var served: ServedAdapter?

        /// The adapter the request runs, at `scale` (nil: as trained); a scale other than 1
        /// needs an adapter.
        func adapter(scale: Float?) throws -> LoRAAdapter? {
            guard let served else {
                if let scale, scale != 1 {
                    throw APIError.invalid("adapter_scale", "`adapter_scale` scales an adapter: name one as `model:adapter` (`\(id)` has none).")
                }
                return nil
            }
            let scale = scale ?? 1
            try served.scales.admit(scale, adapter: served.adapter.name)
            do { return try model.adapter(at: served.adapter.url, scale: scale) } catch { throw APIError.server(error.localizedDescription) }
        }
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
    /// Each `--adapter` that no model could serve, with why (the server is then unhealthy, as
    /// llama-server refuses to start: its clients would only meet 404s).
    let unservedAdapters = Mutex<[(spec: String, why: String)]>([])

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
        var adapterErrors: [String: String] = [:], servedSpecs: Set<String> = []
        defer {
            let unserved = settings.adapters.filter { !servedSpecs.contains($0) }.map { ($0, adapterErrors[$0] ?? "no model loaded") }
            for (spec, why) in unserved { log("adapter \(spec) is served with no model: \(why)") }
            unservedAdapters.withLock { $0 = unserved }
        }
        for (i, given) in settings.models.enumerated() {
            let state: State
            do {
                let url = try ModelStore().resolve(given, fetchIfMissing: true)
                let model = try ServedModel(url: url, contextLength: settings.contextLength, parallel: settings.parallel,
                                            maxQueued: settings.maxQueue, backend: settings.backend)
                log("loaded \(entries[i].id) from \(url.path): context \(model.contextLength), \(model.parallel) sequences at once, backend \(model.scheduler.backend)")
                let adapters = Self.adapters(settings.adapters, for: model, id: entries[i].id, log: log)
                servedSpecs.formUnion(adapters.spec)
                adapterErrors.merge(adapters.errors) { a, _ in a }
                state = .ready(model, adapters: adapters.served)
            } catch {
                log("cannot load \(given): \(error.localizedDescription)")
                state = .failed(error.localizedDescription)
            }
            states.withLock { $0[i] = state }
        }
    }

    /// The adapters among `specs` that fit `model` (with the spec each came from), and why
    /// each other one does not; those are left out with a log line (a server may serve models
    /// an adapter was not trained for).
    private static func adapters(_ specs: [String], for model: ServedModel, id: String, log: (String) -> Void)
        -> (served: [ServedAdapter], spec: [String], errors: [String: String]) {
        var served: [ServedAdapter] = [], taken: [String] = [], errors: [String: String] = [:]
        for spec in specs {
            do {
                let adapter = try model.adapter(at: try AdapterStore.default.resolve(spec))
                // Served by its name (a folder's or file's: a name given is the one it resolves to).
                let name = adapter.name
                guard !served.contains(where: { $0.name.lowercased() == name.lowercased() }) else {
                    log("adapter \(spec) not served with \(id): another adapter is already named \(name)")
                    errors[spec] = "another adapter is already named \(name)"
                    continue
                }
                served.append(ServedAdapter(name: name, adapter: adapter))
                taken.append(spec)
                if let note = adapter.baseModelNote { log("adapter \(name): \(note)") }
                log("adapter \(name) served with \(id) as \(id):\(name) (rank \(adapter.pairs.values.map(\.rank).max() ?? 0), \(adapter.pairs.count) matrices)")
            } catch {
                log("adapter \(spec) not served with \(id): \(error.localizedDescription)")
                errors[spec] = error.localizedDescription
            }
        }
        return (served, taken, errors)
    }

    /// The model a request names: a served model, or `MODEL:ADAPTER` for one of the adapters it
    /// serves.
    func model(named name: String) throws -> Selection {
        let key = name.lowercased()
        if let i = entries.firstIndex(where: { $0.names.contains(key) }) {
            return Selection(id: entries[i].id, model: try ready(i).model, served: nil)
        }
        // The model's part is the longest prefix before a colon that names a model (a file name
        // may hold colons too).
        var split: (colon: String.Index, entry: Int)?
        for colon in name.indices.reversed() where name[colon] == ":" {
            if let i = entries.firstIndex(where: { $0.names.contains(name[..<colon].lowercased()) }) {
                split = (colon, i)
                break
            }
        }
        guard let (colon, i) = split else { throw APIError.modelNotFound(name, served: entries.map(\.id)) }
        let (model, adapters) = try ready(i)
        let wanted = name[name.index(after: colon)...].lowercased()
        guard let served = adapters.first(where: { $0.name.lowercased() == wanted }) else {
            throw APIError(404, "invalid_request_error", code: "model_not_found", param: "model",
                           "The model `\(name)` does not exist on this server: `\(entries[i].id)` is served "
                               + (adapters.isEmpty ? "with no adapters." : "with the adapters \(adapters.map(\.name).joined(separator: ", "))."))
        }
        return Selection(id: "\(entries[i].id):\(served.name)", model: model, served: served)
    }

    private func ready(_ i: Int) throws -> (model: ServedModel, adapters: [ServedAdapter]) {
        switch states.withLock({ $0[i] }) {
        case .loading: throw APIError.loading(entries[i].id)
        case .failed(let why): throw APIError(503, "server_error", code: "model_unavailable", "The model `\(entries[i].id)` failed to load: \(why)")
        case .ready(let model, let adapters): return (model, adapters)
        }
    }

    /// Every loaded model with its id and adapters.
    var loaded: [(id: String, model: ServedModel, adapters: [ServedAdapter])] {
        let s = states.withLock { $0 }
        return zip(entries, s).compactMap { entry, state in
            if case .ready(let m, let adapters) = state { return (entry.id, m, adapters) }
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
