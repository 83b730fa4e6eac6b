import Foundation
#if canImport(ImageIO)
import ImageIO
#endif
internal import PlinthJSON

// The JSON form of a transcript:
//
//   {"version": 1, "entries": [
//     {"type": "instructions", "id": …, "segments": […], "toolDefinitions": [{"name", "description", "parameters"}]},
//     {"type": "prompt", "id": …, "segments": […], "options": {…}, "contextOptions": {…},
//      "responseFormat": {"name", "schema"}, "metadata": {…}},
//     {"type": "toolCalls", "id": …, "calls": [{"id", "toolName", "arguments", "metadata"}]},
//     {"type": "toolOutput", "id": …, "toolName": …, "segments": […]},
//     {"type": "response", "id": …, "assetIDs": […], "segments": […], "metadata": {…}},
//     {"type": "reasoning", "id": …, "segments": […], "signature": base64, "metadata": {…}}]}
//
// Segments: {"type": "text", "id", "content": String}, {"type": "structure", "id", "source",
// "content": JSON text}, {"type": "custom", "id", "customType", "description", "content": JSON}.
// Schemas are JSON Schema; generated content (a structure's, a call's arguments) is JSON text
// in a string, so that its members keep their order. Keys are written in this order.

extension Transcript: Codable {
    /// Decodes a transcript from its JSON form.
    public init(from decoder: any Decoder) throws {
        let json = try JSONValue(from: decoder)
        do {
            self = try TranscriptCoding.transcript(json)
        } catch let error as TranscriptCoding.Failure {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                    debugDescription: "Not a transcript: \(error.message)"))
        }
    }

    /// Encodes the transcript in its stable JSON form.
    public func encode(to encoder: any Encoder) throws {
        try TranscriptCoding.json(self).encode(to: encoder)
    }
}

enum TranscriptCoding {
    struct Failure: Error {
        var message: String
    }

    /// 2: generated content (structured segments, tool-call arguments) as JSON text, whose
    /// member order survives a decoder (1 wrote it as JSON, and Foundation's decoder reports an
    /// object's members in an order of its own).
    static let version = 2

    static func contentText(_ content: GeneratedContent) -> JSONValue { .string(content.jsonString) }

    static func content(_ json: JSONValue?, version: Int) throws -> GeneratedContent {
        guard version >= 2 else { return (json ?? .null).generatedContent }
        guard let text = json?.stringValue, let content = try? GeneratedContent(json: text), content.isComplete else {
            throw Failure(message: "generated content must be complete JSON text")
        }
        return content
    }

    // MARK: Encoding

    static func json(_ transcript: Transcript) throws -> JSONValue {
        .object([("version", .integer(version)), ("entries", .array(try transcript.map(json)))])
    }

    static func json(_ entry: Transcript.Entry) throws -> JSONValue {
        switch entry {
        case .instructions(let e):
            return .object([
                ("type", .string("instructions")), ("id", .string(e.id)), ("segments", try segments(e.segments)),
                ("toolDefinitions", .array(e.toolDefinitions.map { d in
                    .object([("name", .string(d.name)), ("description", .string(d.description)),
                             ("parameters", d.parameters.jsonSchema)])
                })),
            ])
        case .prompt(let e):
            var pairs: [(String, JSONValue)] = [
                ("type", .string("prompt")), ("id", .string(e.id)), ("segments", try segments(e.segments)),
                ("options", options(e.options)), ("contextOptions", contextOptions(e.contextOptions)),
            ]
            if let format = e.responseFormat {
                var f: [(String, JSONValue)] = [("name", .string(format.name))]
                if let schema = format.schema { f.append(("schema", schema.jsonSchema)) }
                pairs.append(("responseFormat", .object(f)))
            }
            pairs.append(("metadata", try metadata(e.metadata)))
            return .object(pairs)
        case .toolCalls(let e):
            return .object([
                ("type", .string("toolCalls")), ("id", .string(e.id)),
                ("calls", .array(try e.map { call in
                    .object([("id", .string(call.id)), ("toolName", .string(call.toolName)),
                             ("arguments", contentText(call.arguments)), ("metadata", try metadata(call.metadata))])
                })),
            ])
        case .toolOutput(let e):
            return .object([("type", .string("toolOutput")), ("id", .string(e.id)), ("toolName", .string(e.toolName)),
                            ("segments", try segments(e.segments))])
        case .response(let e):
            return .object([("type", .string("response")), ("id", .string(e.id)),
                            ("assetIDs", .array(e.assetIDs.map { .string($0) })),
                            ("segments", try segments(e.segments)), ("metadata", try metadata(e.metadata))])
        case .reasoning(let e):
            var pairs: [(String, JSONValue)] = [("type", .string("reasoning")), ("id", .string(e.id)),
                                                ("segments", try segments(e.segments))]
            if let signature = e.signature { pairs.append(("signature", .string(signature.base64EncodedString()))) }
            pairs.append(("metadata", try metadata(e.metadata)))
            return .object(pairs)
        }
    }

    static func segments(_ segments: [Transcript.Segment]) throws -> JSONValue {
        .array(try segments.map { segment in
            switch segment {
            case .text(let s):
                return .object([("type", .string("text")), ("id", .string(s.id)), ("content", .string(s.content))])
            case .structure(let s):
                return .object([("type", .string("structure")), ("id", .string(s.id)), ("source", .string(s.source)),
                                ("content", contentText(s.content))])
            case .custom(let s):
                return .object([("type", .string("custom")), ("id", .string(s.id)),
                                ("customType", .string(customTypeName(s))), ("description", .string(s.description)),
                                ("content", try encodeValue(s.content))])
            case .attachment(let s):
                var pairs: [(String, JSONValue)] = [("type", .string("attachment")), ("id", .string(s.id))]
                if let label = s.label { pairs.append(("label", .string(label))) }
                switch s.content {
                case .image(let image):
                    var imagePairs: [(String, JSONValue)] = []
                    if let url = image.url { imagePairs.append(("url", .string(url.absoluteString))) }
                    if let o = image.imageOrientation { imagePairs.append(("orientation", .integer(Int(o.rawValue)))) }
                    pairs.append(("image", .object(imagePairs)))
                }
                return .object(pairs)
            }
        })
    }

    static func customTypeName(_ segment: any Transcript.CustomSegment) -> String {
        if let decoded = segment as? DecodedCustomSegment { return decoded.typeName }
        return String(reflecting: type(of: segment))
    }

    static func options(_ o: GenerationOptions) -> JSONValue {
        var pairs: [(String, JSONValue)] = []
        if let mode = o.samplingMode {
            switch mode.kind {
            case .greedy: pairs.append(("sampling", .object([("mode", .string("greedy"))])))
            case .randomTopK(let k, let seed):
                var s: [(String, JSONValue)] = [("mode", .string("top")), ("k", .integer(k))]
                if let seed { s.append(("seed", .string(String(seed)))) }
                pairs.append(("sampling", .object(s)))
            case .randomProbabilityThreshold(let threshold, let seed):
                var s: [(String, JSONValue)] = [("mode", .string("nucleus")), ("threshold", .double(threshold))]
                if let seed { s.append(("seed", .string(String(seed)))) }
                pairs.append(("sampling", .object(s)))
            }
        }
        if let t = o.temperature { pairs.append(("temperature", .double(t))) }
        if let m = o.maximumResponseTokens { pairs.append(("maximumResponseTokens", .integer(m))) }
        if let mode = o.toolCallingMode {
            let name = switch mode.kind { case .allowed: "allowed"; case .required: "required"; case .disallowed: "disallowed" }
            pairs.append(("toolCallingMode", .string(name)))
        }
        return .object(pairs)
    }

    static func contextOptions(_ o: ContextOptions) -> JSONValue {
        var pairs: [(String, JSONValue)] = []
        if let i = o.includeSchemaInPrompt { pairs.append(("includeSchemaInPrompt", .bool(i))) }
        if let level = o.reasoningLevel {
            let name = switch level {
            case .light: "light"
            case .moderate: "moderate"
            case .deep: "deep"
            case .custom(let s): "custom:" + s
            }
            pairs.append(("reasoningLevel", .string(name)))
        }
        return .object(pairs)
    }

    static func metadata(_ values: Metadata.Values) throws -> JSONValue {
        .object(try values.keys.sorted().map { ($0, try encodeValue(values[$0]!)) })
    }

    static func encodeValue(_ value: any Encodable) throws -> JSONValue {
        if let json = value as? JSONValue { return json }
        let data = try JSONEncoder().encode(value)
        return try JSONValue(parsing: String(decoding: data, as: UTF8.self))
    }

    // MARK: Decoding

    static func transcript(_ json: JSONValue) throws -> Transcript {
        guard let entries = json["entries"]?.arrayValue else { throw Failure(message: "missing 'entries'") }
        let read = try integer(json, "version") ?? 1
        if read > version { throw Failure(message: "version \(read) is newer than this version of Plinth reads (\(version))") }
        return Transcript(entries: try entries.map { try entry($0, version: read) })
    }

    /// An integer member, exactly (a double's conversion trapped past Int's range); nil when absent.
    static func integer(_ json: JSONValue, _ key: String) throws -> Int? {
        guard let v = json[key] else { return nil }
        guard let n = v.integerValue else { throw Failure(message: "'\(key)' must be an integer") }
        return n
    }

    static func string(_ json: JSONValue, _ key: String) throws -> String {
        guard let s = json[key]?.stringValue else { throw Failure(message: "missing string '\(key)'") }
        return s
    }

    static func entry(_ json: JSONValue, version: Int) throws -> Transcript.Entry {
        let type = try string(json, "type")
        let id = try string(json, "id")
        switch type {
        case "instructions":
            let definitions = try (json["toolDefinitions"]?.arrayValue ?? []).map { d in
                Transcript.ToolDefinition(name: try string(d, "name"), description: try string(d, "description"),
                                          parameters: try GenerationSchema(json: d["parameters"] ?? .object([])))
            }
            return .instructions(.init(id: id, segments: try segments(json["segments"], version: version), toolDefinitions: definitions))
        case "prompt":
            var format: Transcript.ResponseFormat?
            if let f = json["responseFormat"] {
                format = .init(name: try string(f, "name"), schema: try f["schema"].map { try GenerationSchema(json: $0) })
            }
            return .prompt(.init(id: id, metadata: metadata(json["metadata"]), segments: try segments(json["segments"], version: version),
                                 options: try options(json["options"]), responseFormat: format,
                                 contextOptions: contextOptions(json["contextOptions"])))
        case "toolCalls":
            let calls = try (json["calls"]?.arrayValue ?? []).map { c in
                Transcript.ToolCall(id: try string(c, "id"), metadata: metadata(c["metadata"]),
                                    toolName: try string(c, "toolName"),
                                    arguments: try content(c["arguments"], version: version))
            }
            return .toolCalls(.init(id: id, calls))
        case "toolOutput":
            return .toolOutput(.init(id: id, toolName: try string(json, "toolName"), segments: try segments(json["segments"], version: version)))
        case "response":
            var response = Transcript.Response(id: id, assetIDs: (json["assetIDs"]?.arrayValue ?? []).compactMap(\.stringValue),
                                               segments: try segments(json["segments"], version: version))
            response.metadata = metadata(json["metadata"])
            return .response(response)
        case "reasoning":
            let signature = json["signature"]?.stringValue.flatMap { Data(base64Encoded: $0) }
            return .reasoning(.init(id: id, metadata: metadata(json["metadata"]), segments: try segments(json["segments"], version: version),
                                    signature: signature))
        default:
            throw Failure(message: "unknown entry type '\(type)'")
        }
    }

    static func segments(_ json: JSONValue?, version: Int) throws -> [Transcript.Segment] {
        try (json?.arrayValue ?? []).map { s in
            let id = try string(s, "id")
            switch try string(s, "type") {
            case "text": return .text(.init(id: id, content: try string(s, "content")))
            case "structure":
                return .structure(.init(id: id, source: try string(s, "source"),
                                        content: try content(s["content"], version: version)))
            case "custom":
                return .custom(DecodedCustomSegment(id: id, typeName: try string(s, "customType"),
                                                    text: s["description"]?.stringValue ?? "",
                                                    content: s["content"] ?? .null))
            case "attachment":
                guard let image = s["image"], let url = image["url"]?.stringValue.flatMap(URL.init(string:)) else {
                    throw Failure(message: "an attachment segment needs an image with a URL")
                }
                let orientation = image["orientation"]?.doubleValue.flatMap(UInt32.init(exactly:)).flatMap(CGImagePropertyOrientation.init(rawValue:))
                return .attachment(.init(id: id, content: .image(.init(imageURL: url, orientation: orientation)),
                                         label: s["label"]?.stringValue))
            case let other: throw Failure(message: "unknown segment type '\(other)'")
            }
        }
    }

    static func options(_ json: JSONValue?) throws -> GenerationOptions {
        var o = GenerationOptions()
        guard let json else { return o }
        if let s = json["sampling"] {
            let seed = s["seed"]?.stringValue.flatMap { UInt64($0) }
            switch s["mode"]?.stringValue {
            case "greedy": o.samplingMode = .greedy
            case "top":
                // Any integer the encoder wrote (a k below 1 is the request's to refuse).
                o.samplingMode = .random(top: try integer(s, "k") ?? 1, seed: seed)
            case "nucleus": o.samplingMode = .random(probabilityThreshold: s["threshold"]?.doubleValue ?? 1, seed: seed)
            default: throw Failure(message: "unknown sampling mode")
            }
        }
        o.temperature = json["temperature"]?.doubleValue
        o.maximumResponseTokens = try integer(json, "maximumResponseTokens")
        switch json["toolCallingMode"]?.stringValue {
        case "allowed": o.toolCallingMode = .allowed
        case "required": o.toolCallingMode = .required
        case "disallowed": o.toolCallingMode = .disallowed
        default: break
        }
        return o
    }

    static func contextOptions(_ json: JSONValue?) -> ContextOptions {
        var o = ContextOptions()
        guard let json else { return o }
        if case .bool(let b)? = json["includeSchemaInPrompt"] { o.includeSchemaInPrompt = b }
        switch json["reasoningLevel"]?.stringValue {
        case "light": o.reasoningLevel = .light
        case "moderate": o.reasoningLevel = .moderate
        case "deep": o.reasoningLevel = .deep
        case let s? where s.hasPrefix("custom:"): o.reasoningLevel = .custom(String(s.dropFirst(7)))
        default: break
        }
        return o
    }

    /// Metadata reads back as `String`, `Bool`, `Int`, `Double`, or, for arrays and objects,
    /// as a JSON value.
    static func metadata(_ json: JSONValue?) -> Metadata.Values {
        guard case .object(let pairs)? = json else { return [:] }
        var values: Metadata.Values = [:]
        for (key, value) in pairs {
            switch value {
            case .null: continue
            case .bool(let b): values[key] = b
            case .string(let s): values[key] = s
            case .number: values[key] = value.integerValue.map { $0 as any Codable & Sendable & Equatable } ?? value.doubleValue
            case .array, .object: values[key] = value
            }
        }
        return values
    }
}

/// A custom segment read from a transcript's JSON form: its content stays as JSON.
struct DecodedCustomSegment: Transcript.CustomSegment {
    var id: String
    var typeName: String
    var text: String
    var content: JSONValue

    var description: String { text }
}
