import Foundation

/// Why a schema, regular expression or vocabulary could not become a grammar.
///
/// Every case names what went wrong and, for schemas, where: a JSON pointer into the document
/// (`#/properties/age/minimum`). A schema keyword the decoder cannot enforce is always an error
/// in strict mode, so a compiled grammar never silently promises more than it checks.
public enum GrammarError: Error, Sendable, Equatable, LocalizedError {
    /// The document is not valid JSON.
    case invalidJSON(String)
    /// The schema uses a keyword (or a keyword value) the decoder does not enforce.
    case unsupportedKeyword(keyword: String, pointer: String)
    /// The schema is malformed at `pointer`.
    case invalidSchema(reason: String, pointer: String)
    /// A `$ref` could not be resolved (only local references such as `#/$defs/Name` are supported).
    case unresolvedReference(String, pointer: String)
    /// The schema (or the part at `pointer`) admits no value at all.
    case emptyLanguage(pointer: String)
    /// The numbers a schema allows, none of them written the way the decoder writes numbers.
    case numbersOutOfReach(pointer: String)
    /// The regular expression could not be read or uses an unsupported feature.
    case invalidRegex(pattern: String, reason: String)
    /// References form a cycle that consumes no input (for example `{"$ref": "#"}` as its own first step).
    case leftRecursion(pointer: String)
    /// Compilation needed more states than the budget allows.
    case budgetExceeded(String)
    /// Compilation took longer than the time limit.
    case timeout(seconds: Double)
    /// The token vocabulary is unusable.
    case invalidVocabulary(String)

    public var errorDescription: String? {
        switch self {
        case .invalidJSON(let what): return "The schema is not valid JSON: \(what)."
        case let .unsupportedKeyword(keyword, pointer):
            return "The schema keyword '\(keyword)' at \(pointer) cannot be enforced by the constrained decoder. "
                + "Remove it, or compile in lenient mode to ignore it."
        case let .invalidSchema(reason, pointer): return "The schema is invalid at \(pointer): \(reason)."
        case let .unresolvedReference(ref, pointer):
            return "The reference '\(ref)' at \(pointer) cannot be resolved; only local references (#/$defs/…, #/definitions/…, #) are supported."
        case .emptyLanguage(let pointer): return "The schema at \(pointer) admits no value, so nothing can be generated."
        case .numbersOutOfReach(let pointer):
            return "The numbers the schema at \(pointer) allows cannot be generated: generated numbers have at most 16 integer "
                + "and 15 fraction digits, and no exponent where the schema bounds them."
        case let .invalidRegex(pattern, reason): return "The regular expression /\(pattern)/ cannot be used: \(reason)."
        case .leftRecursion(let pointer): return "The schema at \(pointer) refers to itself without consuming any input."
        case .budgetExceeded(let what): return "The grammar is too large to compile: \(what)."
        case .timeout(let s): return "Compiling the grammar took longer than its \(s)-second limit."
        case .invalidVocabulary(let what): return "The token vocabulary cannot be used: \(what)."
        }
    }
}
