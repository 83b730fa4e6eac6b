import Foundation
internal import PlinthJSON

/// The JSON Schema the local decoder compiles for a generation schema: the schema, narrowed so
/// that everything the grammar admits decodes into the Swift value.
///
/// - A `@Guide(.pattern(...))` constrains the whole string, as in Apple's framework, but JSON
///   Schema's `pattern` matches anywhere in the string; so string patterns are anchored
///   (`^(?:…)$`).
/// - Generated numbers reach Swift as `Double`, so an integer decodes exactly into `Int` only
///   within ±(2^53 − 1). Integers get those bounds where the schema leaves them open: without
///   them a random sample can write a 30-digit integer, which doesn't decode.
enum DecodingSchema {
    /// The largest integer a `Double` holds exactly, with every integer below it.
    static let largestExactInteger = (1 << 53) - 1

    static func jsonSchema(for schema: GenerationSchema) -> JSONValue {
        // A schema read from a JSON Schema document is enforced as written (JSON Schema's
        // meaning of `pattern`, its own integer bounds).
        schema.source ?? narrowed(schema.jsonSchema)
    }

    static func narrowed(_ value: JSONValue) -> JSONValue {
        switch value {
        case .array(let items):
            return .array(items.map(narrowed))
        case .object(let pairs):
            let type = pairs.first { $0.0 == "type" }?.1
            var out: [(String, JSONValue)] = pairs.map { key, member in
                if type == .string("string"), key == "pattern", case .string(let pattern) = member {
                    return (key, .string(anchored(pattern)))
                }
                return (key, narrowed(member))
            }
            if type == .string("integer") {
                let keys = Set(pairs.map(\.0))
                if keys.isDisjoint(with: ["minimum", "exclusiveMinimum"]) { out.append(("minimum", .integer(-largestExactInteger))) }
                if keys.isDisjoint(with: ["maximum", "exclusiveMaximum"]) { out.append(("maximum", .integer(largestExactInteger))) }
            }
            return .object(out)
        default:
            return value
        }
    }

    /// A guide's pattern as a whole match. One already anchored at both ends stays as it is,
    /// unless an alternation at its top level leaves a branch unanchored (`^ab|cd$`).
    static func anchored(_ pattern: String) -> String {
        let branches = topLevelBranches(pattern)
        /// A final `$` that is an anchor: not escaped by an odd run of backslashes.
        func endsWithAnchor(_ p: Substring) -> Bool {
            p.hasSuffix("$") && p.dropLast().reversed().prefix { $0 == "\\" }.count % 2 == 0
        }
        if branches.count == 1 && branches[0].hasPrefix("^") && endsWithAnchor(branches[0]) { return pattern }
        // Each branch's own anchors go (the decoder's expressions take them only at the ends).
        let bare = branches.map { b -> Substring in
            var b = b
            if b.hasPrefix("^") { b = b.dropFirst() }
            if endsWithAnchor(b) { b = b.dropLast() }
            return b
        }
        return "^(?:" + bare.joined(separator: "|") + ")$"
    }

    /// The pattern split at each `|` outside every group and character class.
    static func topLevelBranches(_ pattern: String) -> [Substring] {
        var depth = 0, inClass = false, escaped = false
        var branches: [Substring] = [], start = pattern.startIndex
        for i in pattern.indices {
            let c = pattern[i]
            if escaped { escaped = false; continue }
            switch c {
            case "\\": escaped = true
            case "[": inClass = true
            case "]": inClass = false
            case "(" where !inClass: depth += 1
            case ")" where !inClass: depth -= 1
            case "|" where !inClass && depth == 0:
                branches.append(pattern[start..<i])
                start = pattern.index(after: i)
            default: break
            }
        }
        return branches + [pattern[start...]]
    }
}
