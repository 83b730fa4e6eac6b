import ArgumentParser
import Foundation
import PlinthRuntime
import PlinthServer

/// `plinth serve`: the OpenAI-compatible HTTP API.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve models over OpenAI's HTTP API (chat and text completions, structured outputs, tools).",
        discussion: """
            Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, GET /metrics \
            (Prometheus). Every request on a model joins its shared batched steps. A client selects a model by its \
            catalog name, alias or file name in `model`, and one of the --adapter LoRA adapters as `MODEL:ADAPTER` \
            (run unmerged: requests with different adapters share the model's steps). SIGTERM or SIGINT finishes the \
            requests in flight, then exits.
            """)

    @Option(name: [.short, .customLong("model")], help: "A catalog model or GGUF path to serve (repeat for several; the first is the default).")
    var models: [String] = []

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port; the chosen one is printed).")
    var port = 8080

    @Option(help: "Require `Authorization: Bearer KEY` on every endpoint but /health.")
    var apiKey: String?

    @Option(help: "Read the API key from this file (its first line).")
    var apiKeyFile: String?

    @Option(help: "Sequences decoding at once per model (default: 16 on the CPU, 64 on a GPU).")
    var parallel: Int?

    @Option(help: "Requests waiting for a slot per model before new ones get 429.")
    var maxQueue = 256

    @Option(help: "Tokens per sequence, prompt and output (default: the model's, at most 4096).")
    var ctx: Int?

    @Option(help: "The largest request body accepted, in bytes.")
    var maxBody = 8 << 20

    @Option(help: "Seconds a request may run before it is cancelled (0: no limit).")
    var timeout = 600.0

    @Option(help: "Seconds a response schema or a tool set may take to compile.")
    var schemaTimeLimit = 10.0

    @Option(name: .customLong("adapter"),
            help: "A LoRA adapter (a name in the adapter directories, or a path) clients may name as MODEL:ADAPTER (repeat for several).")
    var adapters: [String] = []

    @Option(name: .customLong("allow-origin"),
            help: "A web origin whose pages may call the API from a browser, as https://app.example, or * for any (repeat for several); pages from localhost always may.")
    var allowedOrigins: [String] = []

    @OptionGroup var backendOptions: BackendOptions

    func validate() throws {
        if apiKey != nil && apiKeyFile != nil { throw ValidationError("give --api-key or --api-key-file, not both") }
        if let apiKey, apiKey.isEmpty || apiKey != apiKey.trimmingCharacters(in: .whitespacesAndNewlines) {
            throw ValidationError("--api-key must be a key without spaces around it (an empty key would lock every client out)")
        }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be in 0...65535") }
        if let parallel { guard parallel >= 1 && parallel <= 256 else { throw ValidationError("--parallel must be in 1...256") } }
        guard maxQueue >= 1 else { throw ValidationError("--max-queue must be at least 1") }
        if let ctx { guard ctx >= 16 else { throw ValidationError("--ctx must be at least 16") } }
        guard maxBody >= 1024 else { throw ValidationError("--max-body must be at least 1024") }
        guard timeout >= 0 && schemaTimeLimit > 0 else { throw ValidationError("--timeout and --schema-time-limit must be positive") }
    }

    func run() async throws {
        var key = apiKey
        if let apiKeyFile {
            do {
                key = try String(contentsOfFile: apiKeyFile, encoding: .utf8).split(whereSeparator: \.isNewline).first
                    .map { $0.trimmingCharacters(in: .whitespaces) }
            } catch {
                throw ValidationError("can't read --api-key-file \(apiKeyFile): \(error.localizedDescription)")
            }
            guard key?.isEmpty == false else { throw ValidationError("--api-key-file \(apiKeyFile) holds no key") }
        }
        let models = models.isEmpty ? [ModelCatalog.defaultModelName] : models
        for name in models where ModelCatalog.entry(named: name) == nil && !FileManager.default.fileExists(atPath: name) {
            throw ValidationError("no such model: \(name) (a catalog name, see `plinth models list`, or a GGUF path)")
        }
        for adapter in adapters {
            do { _ = try AdapterStore.default.resolve(adapter) } catch { throw ValidationError("--adapter \(adapter): \(error.localizedDescription)") }
        }
        let settings = ServerSettings(models: models, host: host, port: port, apiKey: key, parallel: parallel, maxQueue: maxQueue,
                                      contextLength: ctx, maxBodyBytes: maxBody, requestTimeout: timeout > 0 ? timeout : nil,
                                      schemaTimeLimit: schemaTimeLimit, adapters: adapters, allowedOrigins: allowedOrigins,
                                      backend: try backendOptions.localValue())
        let host = host
        try await HTTPServer(settings: settings).run { port in
            // Tests and scripts read this line to find the port. The server runs on without a
            // standard output.
            try? Output.write("plinth serve: listening on http://\(host):\(port)\n")
        }
    }
}
