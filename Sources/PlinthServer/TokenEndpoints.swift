import Foundation
import Hummingbird
import Plinth
import PlinthGrammar

/// llama-server's helper endpoints, which clients use to count tokens and see prompts:
/// `POST /tokenize`, `POST /detokenize` and `POST /apply-template`. Each takes an optional
/// `model` (a served name, as in completions; the first model when absent).
extension HTTPServer {
    /// `{"content": TEXT, "add_special": false, "parse_special": true, "with_pieces": false}` →
    /// `{"tokens": [ids]}`, or with pieces `{"tokens": [{"id": 15, "piece": "Hello"}]}`; a piece
    /// that isn't valid UTF-8 on its own (part of a character) is given as its bytes.
    func tokenize(_ body: Data) async throws -> JSONValue {
        let r = try RequestReader(body: body)
        let model = try host.model(named: try r.string("model") ?? host.entries[0].id).model
        let content = try r.requiredString("content")
        let addSpecial = try r.bool("add_special") ?? false, parseSpecial = try r.bool("parse_special") ?? true
        let withPieces = try r.bool("with_pieces") ?? false
        let tokenizer = model.tokenizer
        // Off the pool: the body may hold megabytes of text.
        let ids = try await offPool { tokenizer.encode(content, addSpecial: addSpecial, parseSpecial: parseSpecial) }
        guard withPieces else { return .object([("tokens", .array(ids.map { OpenAIWire.int(Int($0)) }))]) }
        return .object([("tokens", .array(ids.map { id in
            let bytes = tokenizer.tokenPiece(id, renderSpecial: true)
            let piece: JSONValue = String(validating: bytes, as: UTF8.self).map(JSONValue.string)
                ?? .array(bytes.map { OpenAIWire.int(Int($0)) })
            return .object([("id", OpenAIWire.int(Int(id))), ("piece", piece)])
        }))])
    }

    /// `{"tokens": [ids]}` → `{"content": TEXT}`, control tokens written as their text (as
    /// llama-server's); bytes that end mid-character become U+FFFD.
    func detokenize(_ body: Data) throws -> JSONValue {
        let r = try RequestReader(body: body)
        let model = try host.model(named: try r.string("model") ?? host.entries[0].id).model
        guard let items = try r.array("tokens") else {
            throw APIError.invalid("tokens", "`tokens` is required.", code: "missing_required_parameter")
        }
        let ids = try RequestReader.tokenIDs(items, param: "tokens", vocabularySize: model.tokenizer.vocabularySize)
        return .object([("content", .string(model.tokenizer.decode(ids, renderSpecial: true)))])
    }

    /// A chat completion's body (`messages`, `tools`, `tool_choice`, `response_format`) →
    /// `{"prompt": TEXT}`: the prompt that request would give the model, as its chat template
    /// writes it, before tokenizing.
    func applyTemplate(_ body: Data) throws -> JSONValue {
        let request = try ChatRequest(body: body, defaultModel: host.entries[0].id)
        let model = try host.model(named: request.model).model
        do {
            return .object([("prompt", .string(try model.promptText(for: request.transcript, tools: request.callableTools.tools)))])
        } catch {
            throw APIError.invalid("messages", "The model's chat template can't render these messages: \(error.localizedDescription)")
        }
    }
}
