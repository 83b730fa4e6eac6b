import Foundation

/// A position in a template's source text: a 1-based line and a 1-based column counted in
/// Unicode scalars.
public struct TemplateSourceLocation: Sendable, Hashable, CustomStringConvertible {
    /// The 1-based line number.
    public let line: Int
    /// The 1-based column, counted in Unicode scalars from the start of the line.
    public let column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    public var description: String { "line \(line), column \(column)" }
}

/// An error raised while parsing or rendering a chat template.
///
/// Every case that comes from the template names the place in the template source where the
/// problem is, so that a template author can find it.
public enum ChatTemplateError: Error, LocalizedError, Equatable, Sendable {
    /// The template source is not valid Jinja: an unclosed tag, an unknown statement, a stray
    /// end tag, a malformed expression.
    case syntax(String, at: TemplateSourceLocation)
    /// The template applies a filter that this engine does not know.
    case unknownFilter(String, at: TemplateSourceLocation)
    /// The template applies a test (`x is name`) that this engine does not know.
    case unknownTest(String, at: TemplateSourceLocation)
    /// The template used an undefined value where Jinja requires a defined one (an attribute of
    /// an undefined value, arithmetic on an undefined value, calling it).
    case undefinedValue(String, at: TemplateSourceLocation)
    /// An operation got values of the wrong type, or an invalid argument: adding a number to
    /// a string, iterating over `none`, dividing by zero, calling a filter with bad arguments.
    case invalidOperation(String, at: TemplateSourceLocation)
    /// The template called `raise_exception(message)`, usually because the conversation does
    /// not have the shape the model expects (for example roles that do not alternate).
    case raisedException(String, at: TemplateSourceLocation)
    /// Text given as JSON (tool definitions, tool-call arguments) could not be parsed.
    case invalidJSON(String, offset: Int)

    /// Where in the template the problem is, when the error comes from the template.
    public var location: TemplateSourceLocation? {
        switch self {
        case .syntax(_, let at), .unknownFilter(_, let at), .unknownTest(_, let at),
             .undefinedValue(_, let at), .invalidOperation(_, let at), .raisedException(_, let at):
            return at
        case .invalidJSON:
            return nil
        }
    }

    /// The problem, without its position.
    public var message: String {
        switch self {
        case .syntax(let m, _): return m
        case .unknownFilter(let name, _): return "No filter named '\(name)'."
        case .unknownTest(let name, _): return "No test named '\(name)'."
        case .undefinedValue(let m, _), .invalidOperation(let m, _), .raisedException(let m, _): return m
        case .invalidJSON(let m, _): return m
        }
    }

    public var errorDescription: String? {
        switch self {
        case .syntax(let m, let at):
            return "Chat template syntax error at \(at): \(m)"
        case .unknownFilter(let name, let at):
            return "Chat template error at \(at): no filter named '\(name)'."
        case .unknownTest(let name, let at):
            return "Chat template error at \(at): no test named '\(name)'."
        case .undefinedValue(let m, let at):
            return "Chat template error at \(at): \(m)"
        case .invalidOperation(let m, let at):
            return "Chat template error at \(at): \(m)"
        case .raisedException(let m, let at):
            return "The chat template rejected the conversation (\(at)): \(m)"
        case .invalidJSON(let m, let offset):
            return "Invalid JSON at offset \(offset): \(m)"
        }
    }
}
