import Foundation
import PlinthGrammar

/// An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}` with its HTTP status.
/// Every refused or failed request ends in one of these; nothing a client sends crashes the server.
struct APIError: Error, Sendable {
    var status: Int
    var type: String
    var code: String?
    var param: String?
    var message: String

    init(_ status: Int, _ type: String, code: String? = nil, param: String? = nil, _ message: String) {
        self.status = status
        self.type = type
        self.code = code
        self.param = param
        self.message = message
    }

    var json: JSONValue {
        .object([("error", .object([
            ("message", .string(message)),
            ("type", .string(type)),
            ("param", param.map(JSONValue.string) ?? .null),
            ("code", code.map(JSONValue.string) ?? .null),
        ]))])
    }

    /// A field of the request that is missing, of the wrong type or out of range.
    static func invalid(_ param: String, _ message: String, code: String = "invalid_value") -> APIError {
        APIError(400, "invalid_request_error", code: code, param: param, message)
    }

    static func unauthorized() -> APIError {
        APIError(401, "invalid_request_error", code: "invalid_api_key",
                 "Missing or incorrect API key: send it as `Authorization: Bearer KEY`.")
    }

    static func notFound(path: String) -> APIError {
        APIError(404, "invalid_request_error", code: "not_found", "There is no endpoint \(path).")
    }

    static func modelNotFound(_ name: String, served: [String]) -> APIError {
        APIError(404, "invalid_request_error", code: "model_not_found", param: "model",
                 "The model `\(name)` does not exist on this server; it serves: \(served.joined(separator: ", ")).")
    }

    static func tooLarge(limit: Int) -> APIError {
        APIError(413, "invalid_request_error", code: "request_too_large", "The request body is larger than \(limit) bytes.")
    }

    static func queueFull(capacity: Int) -> APIError {
        APIError(429, "rate_limit_exceeded", code: "queue_full",
                 "The server is busy: \(capacity) requests are already waiting. Retry after a moment.")
    }

    static func loading(_ model: String) -> APIError {
        APIError(503, "server_error", code: "model_loading", "The model `\(model)` is still loading. Retry after a moment.")
    }

    static func shuttingDown() -> APIError {
        APIError(503, "server_error", code: "shutting_down", "The server is shutting down and takes no new requests.")
    }

    static func timeout(seconds: Double) -> APIError {
        APIError(408, "timeout_error", code: "request_timeout", "The request took longer than the server's \(Int(seconds))-second limit and was cancelled.")
    }

    static func server(_ message: String) -> APIError {
        APIError(500, "server_error", code: "internal_error", message)
    }

    static func contextLength(prompt: Int, limit: Int, context: Int, param: String) -> APIError {
        APIError(400, "invalid_request_error", code: "context_length_exceeded", param: param,
                 "This model's maximum context length is \(context) tokens. However, your request has \(prompt) prompt tokens"
                 + (limit > 0 ? " and asks for \(limit) more." : " and leaves no room for a reply."))
    }
}
