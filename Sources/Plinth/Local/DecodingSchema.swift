import Foundation

/// The JSON Schema text the local decoder compiles for a generation schema.
///
/// A `@Guide(.pattern(...))` constrains the whole string, as in Apple's framework, but JSON
/// Schema's `pattern` matches anywhere in the string; so string patterns are anchored
/// (`^(?:…)$`) before the grammar sees them.
enum DecodingSchema {
    static func jsonText(for schema: GenerationSchema) -> String {
        // A schema read from JSON Schema keeps JSON Schema's meaning of `pattern`.
        if let source = schema.source { return source.text }
        return anchoringPatterns(schema.jsonSchema).text
    }

    static func anchoringPatterns(_ value: JSONValue) -> JSONValue {
        switch value {
        case .array(let items):
            return .array(items.map(anchoringPatterns))
        case .object(let pairs):
            let isString = pairs.contains { $0.0 == "type" && $0.1 == .string("string") }
            return .object(pairs.map { key, member in
                if isString, key == "pattern", case .string(let pattern) = member {
                    return (key, .string(anchored(pattern)))
                }
                return (key, anchoringPatterns(member))
            })
        default:
            return value
        }
    }

    static func anchored(_ pattern: String) -> String {
        pattern.hasPrefix("^") && pattern.hasSuffix("$") && !pattern.hasSuffix("\\$") ? pattern : "^(?:\(pattern))$"
    }
}
