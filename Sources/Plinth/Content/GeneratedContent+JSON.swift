import Foundation
internal import PlinthJSON

/// Generated content is read and written through the shared JSON reader and writer, and converts
/// to and from `JSONValue` where a schema, transcript or tool call needs one.
extension GeneratedContent {
    /// Builds content from what the JSON reader reads, keeping which values are complete.
    struct Builder: JSONTreeBuilder {
        func scalar(_ scalar: JSONScalar, complete: Bool) -> GeneratedContent {
            switch scalar {
            case .null: GeneratedContent(storage: .null, complete: true)
            case .bool(let b): GeneratedContent(storage: .bool(b), complete: true)
            case .number(let text): GeneratedContent.number(text: text, complete: complete)
            case .string(let s): GeneratedContent(storage: .string(s), complete: complete)
            }
        }

        func array(_ elements: [GeneratedContent], complete: Bool) -> GeneratedContent {
            GeneratedContent(storage: .array(elements), complete: complete)
        }

        func object(_ members: [(key: String, value: GeneratedContent)], complete: Bool) -> GeneratedContent {
            var properties: [String: GeneratedContent] = [:]
            properties.reserveCapacity(members.count)
            for (key, value) in members { properties[key] = value }
            return GeneratedContent(storage: .structure(properties: properties, orderedKeys: members.map(\.key)), complete: complete)
        }
    }

    /// A reader of JSON text that is still arriving, whose snapshots are generated content.
    typealias StreamReader = JSONReader<Builder>

    /// Reads `text`, which may stop inside the value (the snapshot is then not complete).
    static func parse(_ text: String) throws(ParsingError) -> GeneratedContent {
        var reader = StreamReader(builder: Builder())
        do {
            try reader.append(text.utf8)
            try reader.end()
        } catch {
            throw ParsingError(rawContent: text, underlyingError: error, debugDescription: "\(error.description).")
        }
        guard let content = reader.snapshot else {
            let empty = text.allSatisfy(\.isWhitespace)
            throw ParsingError(rawContent: text, debugDescription: empty ? "The text is empty." : "The text holds no value yet.")
        }
        return content
    }

    /// Writes this content; with `prefix`, an incomplete value leaves out what would close it
    /// (a scalar not yet final, a string's closing quote, a container's bracket). Only the last
    /// member of a partial container can be incomplete.
    func write(to w: inout JSONWriter, prefix: Bool) {
        let open = prefix && !isComplete
        switch storage {
        case .null: if !open { w.null() }
        case .bool(let b): if !open { w.bool(b) }
        case .number: if !open, let number = numberJSON { w.write(number) }
        case .string(let s): w.string(s, closed: !open)
        case .array(let elements):
            w.beginArray()
            for e in elements { e.write(to: &w, prefix: open) }
            if !open { w.endArray() }
        case .structure(let properties, let keys):
            w.beginObject()
            for key in keys {
                guard let value = properties[key] else { continue }
                w.key(key)
                value.write(to: &w, prefix: open)
            }
            if !open { w.endObject() }
        }
    }

    func jsonText(prefix: Bool) -> String {
        var w = JSONWriter()
        write(to: &w, prefix: prefix)
        return w.text
    }

    /// A number as the JSON text Plinth writes for it.
    static func numberText(_ n: Double) -> String { JSONValue.double(n).compactText }

    /// A number read from JSON `text`, keeping the text where the double would write another value.
    static func number(text: String, complete: Bool = true) -> GeneratedContent {
        let value = Double(text) ?? .nan
        // Up to 15 digits without an exponent a double writes the same value back: no exact
        // comparison for the numbers of almost every snapshot.
        let short = text.utf8.count(where: { $0 >= 0x30 && $0 <= 0x39 }) <= 15 && !text.utf8.contains(where: { $0 == 0x65 || $0 == 0x45 })
        let exact = !short && (DecimalNumber(text).map { $0 != DecimalNumber(numberText(value)) } ?? false)
        return GeneratedContent(storage: .number(value), complete: complete, exactText: exact ? text : nil)
    }

    /// The JSON text of a number: its own text where it has one, else its double's.
    var numberJSON: JSONValue? {
        guard case .number(let n) = storage else { return nil }
        if let exactText, Double(exactText).map({ $0 == n || ($0.isNaN && n.isNaN) }) ?? false { return .number(exactText) }
        return .double(n)
    }
}

extension JSONValue {
    init(_ content: GeneratedContent) {
        switch content.kind {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .number: self = content.numberJSON ?? .null
        case .string(let s): self = .string(s)
        case .array(let elements): self = .array(elements.map(JSONValue.init))
        case .structure:
            self = .object((content.orderedProperties ?? []).map { ($0.0, JSONValue($0.1)) })
        }
    }

    var generatedContent: GeneratedContent {
        switch self {
        case .null: GeneratedContent(kind: .null)
        case .bool(let b): GeneratedContent(kind: .bool(b))
        case .number(let n): GeneratedContent.number(text: n)
        case .string(let s): GeneratedContent(kind: .string(s))
        case .array(let items): GeneratedContent(kind: .array(items.map(\.generatedContent)))
        case .object(let members):
            GeneratedContent(kind: .structure(
                properties: Dictionary(members.map { ($0.key, $0.value.generatedContent) }, uniquingKeysWith: { $1 }),
                orderedKeys: members.map(\.key)))
        }
    }
}
