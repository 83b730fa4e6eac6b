import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PlinthGrammar
import PlinthRuntime
@testable import PlinthServer

/// A server running in this process on a free loopback port, and a small HTTP client for it.
final class TestServer: Sendable {
    let port: Int
    private let task: Task<Void, any Error>

    static let smolLM2 = "SmolLM2-135M-Instruct"
    static let qwen = "Qwen2.5-Coder-0.5B-Instruct"

    /// Whether the catalog models are fetched (the README's test command fetches them).
    static func has(_ name: String) -> Bool {
        guard let entry = ModelCatalog.entry(named: name) else { return false }
        return ModelStore().isFetched(entry)
    }

    static let hasModel = has(smolLM2)

    /// Starts a server and waits until its models are loaded.
    /// Starts a server and waits until it is healthy, or (`healthy: false`) until it has
    /// loaded what it could.
    init(_ settings: ServerSettings, healthy: Bool = true) async throws {
        var settings = settings
        settings.host = "127.0.0.1"
        settings.port = 0
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let server = HTTPServer(settings: settings)
        task = Task { try await server.run(handlesSignals: false) { continuation.yield($0) } }
        var bound = 0
        for await p in ports {
            bound = p
            break
        }
        port = bound
        for _ in 0..<600 {
            let health = try await get("/health")
            if health.status == 200 || (!healthy && health.json.at("status")?.stringValue != "loading") { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw URLError(.timedOut)
    }

    func stop() { task.cancel() }

    deinit { task.cancel() }

    struct Reply {
        var status: Int
        var body: Data
        var headers: [String: String]
        var json: JSONValue { (try? JSONValue(parsing: body)) ?? .null }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    func request(_ method: String, _ path: String, body: Data? = nil, key: String? = nil, timeout: Double = 300,
                 headers extra: [String: String] = [:]) async throws -> Reply {
        var r = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        r.httpMethod = method
        r.httpBody = body
        r.timeoutInterval = timeout
        for (name, value) in extra { r.setValue(value, forHTTPHeaderField: name) }
        if body != nil { r.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        if let key { r.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: r)
        let http = response as! HTTPURLResponse
        var headers: [String: String] = [:]
        for (k, v) in http.allHeaderFields { headers[String(describing: k).lowercased()] = String(describing: v) }
        return Reply(status: http.statusCode, body: data, headers: headers)
    }

    func get(_ path: String, key: String? = nil) async throws -> Reply { try await request("GET", path, key: key) }

    func post(_ path: String, _ json: String, key: String? = nil) async throws -> Reply {
        try await request("POST", path, body: Data(json.utf8), key: key)
    }

    /// The JSON objects of a server-sent event stream, and whether it ended with `[DONE]`.
    static func events(_ text: String) -> (events: [JSONValue], done: Bool) {
        var events: [JSONValue] = []
        var done = false
        for block in text.components(separatedBy: "\n\n") where block.hasPrefix("data: ") {
            let payload = String(block.dropFirst(6))
            if payload == "[DONE]" { done = true } else if let v = try? JSONValue(parsing: payload) { events.append(v) }
        }
        return (events, done)
    }
}

extension JSONValue {
    /// The member at a path of keys and array indices (`"choices", 0, "message"`).
    func at(_ path: Any...) -> JSONValue? {
        var v: JSONValue? = self
        for key in path {
            if let k = key as? String { v = v?[k] } else if let i = key as? Int, let a = v?.arrayValue, i < a.count { v = a[i] } else { return nil }
        }
        return v
    }
}
