import Foundation
import PlinthGrammar
import PlinthRuntime

/// The parts of OpenAI's response shapes that chat and text completions share.
enum OpenAIWire {
    static let fingerprint = "plinth"

    static func id(_ prefix: String) -> String {
        prefix + "-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(24).lowercased()
    }

    static func now() -> JSONValue { .number(String(Int(Date().timeIntervalSince1970))) }

    /// The members every response object and chunk starts with.
    static func envelope(id: String, object: String, created: JSONValue, model: String) -> [(String, JSONValue)] {
        [("id", .string(id)), ("object", .string(object)), ("created", created), ("model", .string(model)),
         ("system_fingerprint", .string(fingerprint))]
    }

    static func int(_ n: Int) -> JSONValue { .number(String(n)) }

    /// A float as JSON (finite: a masked token's log-probability is reported as -9999, as OpenAI does).
    static func float(_ x: Float) -> JSONValue {
        guard x.isFinite else { return .number("-9999.0") }
        return .number(String(Double(x)))
    }

    /// OpenAI's finish reason for a choice.
    static func finishReason(_ summary: GenerationSummary?, toolCalls: Bool) -> JSONValue {
        if toolCalls { return .string("tool_calls") }
        switch summary?.finishReason {
        case .maxTokens?, .contextFull?: return .string("length")
        default: return .string("stop")
        }
    }

    /// `usage`: prompt tokens counted once (choices share the prompt), completion tokens of every choice.
    static func usage(prompt: Int, cached: Int, completion: Int) -> JSONValue {
        .object([
            ("prompt_tokens", int(prompt)),
            ("completion_tokens", int(completion)),
            ("total_tokens", int(prompt + completion)),
            ("prompt_tokens_details", .object([("cached_tokens", int(cached))])),
            ("completion_tokens_details", .object([("reasoning_tokens", int(0))])),
        ])
    }

    /// One token's entry of chat `logprobs.content`: its text, bytes, log-probability and alternatives.
    static func chatLogprob(_ entry: TokenLogprob, tokenizer: Tokenizer) -> JSONValue {
        func token(_ id: Int32, _ logprob: Float) -> [(String, JSONValue)] {
            let bytes = tokenizer.tokenBytes(id)
            return [("token", .string(String(decoding: bytes, as: UTF8.self))), ("logprob", float(logprob)),
                    ("bytes", .array(bytes.map { int(Int($0)) }))]
        }
        return .object(token(entry.token, entry.logprob)
            + [("top_logprobs", .array(entry.alternatives.map { .object(token($0.token, $0.logprob)) }))])
    }

    /// A server-sent event carrying a JSON object.
    static func event(_ value: JSONValue) -> String { "data: \(value.compactText)\n\n" }
    static let done = "data: [DONE]\n\n"
}
