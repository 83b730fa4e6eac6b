import Foundation

/// A parsed Jinja template, rendered the way HuggingFace transformers renders chat templates:
/// Jinja 2 syntax in an immutable sandbox, with `trim_blocks` and `lstrip_blocks` on, the
/// `loopcontrols` extension (`break`, `continue`), a `tojson` filter that writes what
/// Python's `json.dumps` writes, and the globals `raise_exception` and `strftime_now`.
///
/// Parse once, render many times; a template is a value and can be shared across tasks.
///
/// ```swift
/// let template = try JinjaTemplate("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
/// let text = try template.render(["messages": [["role": "user", "content": "Hi"]]])
/// ```
public struct JinjaTemplate: Sendable {
    /// The template source, as given.
    public let source: String
    let nodes: [Jinja.Node]

    /// Parses `source`.
    ///
    /// - Throws: ``ChatTemplateError/syntax(_:at:)`` for malformed templates, or
    ///   ``ChatTemplateError/unknownFilter(_:at:)`` and ``ChatTemplateError/unknownTest(_:at:)``
    ///   for filters and tests this engine does not know (outside `if` blocks; inside them,
    ///   those are reported when used, as Jinja does).
    public init(_ source: String) throws(ChatTemplateError) {
        self.source = source
        self.nodes = try Jinja.Parser.parse(source)
    }

    /// Renders the template with the given variables; `strftime_now` formats `now` (in the
    /// local time zone, as Python's `datetime.now()`).
    ///
    /// - Throws: ``ChatTemplateError`` naming the line and column of the failing expression.
    public func render(_ context: [String: JinjaValue], now: Date = Date()) throws(ChatTemplateError) -> String {
        let interpreter = Jinja.Interpreter(context: context.mapValues(Jinja.Value.init), now: now)
        return try interpreter.render(nodes)
    }
}
