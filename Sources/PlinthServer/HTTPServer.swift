import Foundation
import Hummingbird
import Plinth
import PlinthGrammar

/// `plinth serve`: OpenAI's HTTP API over the models' schedulers. Every request joins its
/// model's shared batched steps; nothing here runs the model itself.
public final class HTTPServer: Sendable {
    public let settings: ServerSettings
    let host: ModelHost
    let metrics = Metrics()
    /// Endpoints counted by name in `/metrics` (others count as `other`).
    static let endpoints: Set<String> = ["/health", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/completions",
                                         "/tokenize", "/detokenize", "/apply-template"]

    /// Seconds a connection may sit idle (see ``run(handlesSignals:onListening:)``).
    static let idleSeconds: Int64 = 60

    /// The methods an endpoint answers, or nil for no endpoint (as ``router()`` routes them).
    static func methods(_ path: String) -> [String]? {
        switch path {
        case "/health", "/metrics", "/v1/models": ["GET"]
        case "/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize", "/apply-template": ["POST"]
        case _ where path.hasPrefix("/v1/models/") && path.dropFirst("/v1/models/".count).contains("/") == false: ["GET"]
        default: nil
        }
    }

    public init(settings: ServerSettings) {
        self.settings = settings
        host = ModelHost(models: settings.models)
    }

    /// Listens, loads the models in the background, and serves until SIGTERM or SIGINT arrives
    /// (with `handlesSignals`; it then finishes the requests in flight and closes the listener)
    /// or the task is cancelled. `onListening` gets the bound port.
    public func run(handlesSignals: Bool = true, onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        // A connection idle for a minute, between requests or in the middle of sending one (a
        // client that stalls with its body half sent), is closed; one waiting for its answer is not.
        let app = Application(
            router: router(),
            server: .http1(configuration: .init(idleTimeout: .seconds(Self.idleSeconds))),
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "plinth"),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? 0) })
        let host = host, settings = settings
        let loader = Thread { host.load(settings) { Self.log(["event": "model", "message": $0]) } }
        loader.name = "plinth-model-loader"
        loader.start()
        if handlesSignals { try await app.runService() } else { try await app.runService(gracefulShutdownSignals: []) }
    }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.middlewares.add(Gate(server: self))
        router.get("/health") { _, _ in self.health() }
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                     body: .init(byteBuffer: ByteBuffer(string: self.metrics.text(models: self.host.loaded.map { ($0.id, $0.model) }))))
        }
        router.get("/v1/models") { _, _ in Self.json(self.modelList()) }
        router.get("/v1/models/{id}") { _, context in
            let id = context.parameters.get("id") ?? ""
            // An alias names the model as it does in requests.
            let served = self.host.entries.first { $0.names.contains(id.lowercased()) }?.id ?? id
            guard let found = self.modelEntries().first(where: { $0["id"]?.stringValue?.lowercased() == served.lowercased() }) else {
                return Self.error(APIError.modelNotFound(id, served: self.host.entries.map(\.id)))
            }
            return Self.json(found)
        }
        router.post("/v1/chat/completions") { request, _ in
            await self.generate(request) { body in
                let c = try await ChatCompletion(body: body, host: self.host, settings: self.settings, metrics: self.metrics)
                return (c.request.parameters.stream, c.response, c.stream)
            }
        }
        router.post("/v1/completions") { request, _ in
            await self.generate(request) { body in
                let c = try await TextCompletion(body: body, host: self.host, settings: self.settings, metrics: self.metrics)
                return (c.parameters.stream, c.response, c.stream)
            }
        }
        router.post("/tokenize") { request, _ in await self.answer(request) { try await self.tokenize($0) } }
        router.post("/detokenize") { request, _ in await self.answer(request) { try self.detokenize($0) } }
        router.post("/apply-template") { request, _ in await self.answer(request) { try self.applyTemplate($0) } }
        return router
    }

    /// A request body, refused past `limit` bytes (counted part by part: a chunked body has no
    /// length to check first).
    static func collect(_ body: RequestBody, limit: Int) async throws -> Data {
        var data = Data()
        for try await part in body {
            guard data.count + part.readableBytes <= limit else { throw APIError.tooLarge(limit: limit) }
            data.append(contentsOf: part.readableBytesView)
        }
        return data
    }

    /// The answer to a request whose declared length is past the body limit, or nil.
    private func refusedByLength(_ request: Request) -> Response? {
        guard let length = request.headers[.contentLength].flatMap(Int.init), length > settings.maxBodyBytes else { return nil }
        return Self.error(.tooLarge(limit: settings.maxBodyBytes))
    }

    /// Answers a request that generates nothing with the JSON `work` makes of its body.
    private func answer(_ request: Request, _ work: (Data) async throws -> JSONValue) async -> Response {
        if let refused = refusedByLength(request) { return refused }
        let limit = settings.maxBodyBytes
        do {
            return Self.json(try await work(try await Self.collect(request.body, limit: limit)))
        } catch let error as APIError {
            return Self.error(error)
        } catch {
            return Self.error(APIError.server(error.localizedDescription))
        }
    }

    typealias ChunkWriter = @Sendable (_ send: (String) async throws -> Void) async throws -> Void
    typealias Generation = (stream: Bool, whole: @Sendable () async throws -> JSONValue, chunks: ChunkWriter)

    /// Reads the body (within the size limit), starts the generation, and answers with its JSON
    /// or its event stream. A client that disconnects cancels the generation: while waiting for
    /// a whole answer through the closed connection, while streaming at the next failed write
    /// (one goes out at least every second, ``EventStream``).
    private func generate(_ request: Request, start: @escaping @Sendable (Data) async throws -> Generation) async -> Response {
        if let refused = refusedByLength(request) { return refused }
        let limit = settings.maxBodyBytes
        do {
            // Watching the connection for a close ends it after the response, so the response
            // says so: a client must not send its next request on it.
            var response = try await request.body.consumeWithCancellationOnInboundClose { body in
                let generation = try await start(try await Self.collect(body, limit: limit))
                guard generation.stream else { return Self.json(try await generation.whole()) }
                let chunks = generation.chunks
                return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
                                body: ResponseBody { writer in
                                    // Throws when the client is gone: the connection closes.
                                    try await EventStream.write(chunks, to: &writer, stall: .seconds(Self.idleSeconds))
                                    try await writer.finish(nil)
                                })
            }
            response.headers[.connection] = "close"
            return response
        } catch let error as APIError {
            var response = Self.error(error)
            response.headers[.connection] = "close"
            return response
        } catch is CancellationError {
            // The client went away; nobody reads this.
            return Self.error(APIError(499, "invalid_request_error", code: "client_closed_request", "The client closed the connection."))
        } catch {
            return Self.error(APIError.server(error.localizedDescription))
        }
    }

    private func health() -> Response {
        let status = host.status
        let unserved = host.unservedAdapters.withLock { $0 }
        let ready = status.allSatisfy { $0.state == "ok" } && unserved.isEmpty
        var pairs: [(String, JSONValue)] = [
            ("status", .string(ready ? "ok" : status.contains { $0.state == "loading" } ? "loading" : "error")),
            ("models", .object(status.map { ($0.id, .string($0.state)) })),
        ]
        if !unserved.isEmpty { pairs.append(("unserved_adapters", .object(unserved.map { ($0.spec, .string($0.why)) }))) }
        let body: JSONValue = .object(pairs)
        return Self.json(body, status: ready ? .ok : .serviceUnavailable)
    }

    private func modelList() -> JSONValue {
        .object([("object", .string("list")), ("data", .array(modelEntries()))])
    }

    /// Every model as `/v1/models` lists it: each served model (a loaded one also gives its file
    /// and context length), then each of its adapters as `MODEL:ADAPTER`, with `parent` naming
    /// the model.
    private func modelEntries() -> [JSONValue] {
        let loaded = Dictionary(host.loaded.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var list: [JSONValue] = []
        for entry in host.entries {
            func base(_ id: String) -> [(String, JSONValue)] {
                [("id", .string(id)), ("object", .string("model")), ("created", OpenAIWire.int(entry.created)), ("owned_by", .string("plinth"))]
            }
            var pairs = base(entry.id)
            let model = loaded[entry.id]
            if let model {
                pairs.append(("file", .string(model.model.url.path)))
                pairs.append(("context_length", OpenAIWire.int(model.model.contextLength)))
            }
            pairs.append(("ready", .bool(model != nil)))
            list.append(.object(pairs))
            for served in model?.adapters ?? [] {
                list.append(.object(base("\(entry.id):\(served.name)") + [("parent", .string(entry.id)),
                                     ("adapter", .string(served.adapter.url.path)), ("ready", .bool(true))]))
            }
        }
        return list
    }

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: value.compactText)))
    }

    static func error(_ error: APIError) -> Response {
        var response = json(error.json, status: HTTPResponse.Status(code: error.status))
        if error.status == 429 || error.status == 503 { response.headers[.retryAfter] = "1" }
        if error.status == 401 { response.headers[.wwwAuthenticate] = "Bearer" }
        // The request limit is the server's own: the same request would time out again. OpenAI's
        // clients retry a 408 unless told not to.
        if error.status == 408 { response.headers[.init("x-should-retry")!] = "false" }
        return response
    }

    /// One structured line on standard error.
    static func log(_ fields: [String: String], numbers: [String: Double] = [:]) {
        var pairs: [(String, JSONValue)] = [("time", .string(Date().ISO8601Format()))]
        pairs += fields.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }
        pairs += numbers.sorted { $0.key < $1.key }.map { ($0.key, .number(String(format: "%.3f", $0.value))) }
        FileHandle.standardError.write(Data((JSONValue.object(pairs).compactText + "\n").utf8))
    }
}

/// Before every route: the API key, and after it the access log and the request counters. Errors
/// the router raises (no such route) answer in OpenAI's shape.
struct Gate: RouterMiddleware {
    typealias Context = BasicRequestContext
    let server: HTTPServer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = DispatchTime.now().uptimeNanoseconds
        let path = request.uri.path
        var response: Response
        let origin = request.headers[.origin].flatMap { Self.allows(origin: $0, server.settings.allowedOrigins) ? $0 : nil }
        if request.method == .options, let origin, request.headers[.accessControlRequestMethod] != nil {
            // A browser's preflight: it carries no key, and says what the request will send.
            response = Response(status: .noContent)
            response.headers[.accessControlAllowMethods] = "GET, POST, OPTIONS"
            response.headers[.accessControlAllowHeaders] = request.headers[.accessControlRequestHeaders] ?? "Authorization, Content-Type"
            response.headers[.accessControlMaxAge] = "600"
        } else if let key = server.settings.apiKey, path != "/health", !Self.authorized(request, key: key) {
            response = HTTPServer.error(.unauthorized())
        } else {
            do {
                response = try await next(request, context)
            } catch let error as HTTPError {
                if error.status == .notFound, let allowed = HTTPServer.methods(path) {
                    // The endpoint exists, for other methods.
                    response = HTTPServer.error(APIError(405, "invalid_request_error", code: "method_not_allowed",
                                                         "\(path) takes \(allowed.joined(separator: " or ")), not \(request.method.rawValue)."))
                    response.headers[.allow] = allowed.joined(separator: ", ")
                } else {
                    response = HTTPServer.error(error.status == .notFound ? .notFound(path: path)
                        : APIError(Int(error.status.code), "invalid_request_error", error.body ?? error.status.reasonPhrase))
                }
            } catch {
                response = HTTPServer.error(.server(error.localizedDescription))
            }
        }
        if let origin {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.vary] = "Origin"
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let endpoint = HTTPServer.endpoints.contains(path) ? path : path.hasPrefix("/v1/models/") ? "/v1/models/{id}" : "other"
        server.metrics.request(endpoint: endpoint, status: Int(response.status.code), seconds: seconds)
        HTTPServer.log(["event": "request", "method": request.method.rawValue, "path": path, "status": String(response.status.code)],
                       numbers: ["seconds": seconds])
        return response
    }

    /// Whether a page from `origin` may call the API: one of `allowed` (`*` for any), or a page
    /// served from this machine (http or https on localhost, 127.0.0.1 or [::1], any port).
    static func allows(origin: String, _ allowed: [String]) -> Bool {
        if allowed.contains("*") || allowed.contains(origin) { return true }
        guard let url = URL(string: origin), url.scheme == "http" || url.scheme == "https", let host = url.host else { return false }
        return ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host.lowercased())
    }

    /// `Authorization: Bearer KEY` (the scheme in any case, as RFC 7235 has it), the key compared
    /// in time that does not depend on where it differs.
    static func authorized(_ request: Request, key: String) -> Bool {
        guard let header = request.headers[.authorization], header.prefix(7).lowercased() == "bearer " else { return false }
        let given = Array(header.utf8.dropFirst(7)), expected = Array(key.utf8)
        var difference = given.count ^ expected.count
        for i in 0..<expected.count { difference |= Int(expected[i] ^ (i < given.count ? given[i] : 0)) }
        return difference == 0
    }
}
