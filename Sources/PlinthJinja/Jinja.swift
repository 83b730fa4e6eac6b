/// The namespace of the Jinja template engine's internals: lexer, parser, syntax tree,
/// runtime values and interpreter.
enum Jinja {
    /// The longest string or list one operation may make (`'x' * n`, a width): a template is
    /// read from a model file, and one asking for gigabytes gets an error rather than ending
    /// the process when memory runs out (Python raises MemoryError).
    static let maxLength = 1 << 26

    /// Refuses a result of `count` characters or items past ``maxLength``.
    static func checkLength(_ count: Int, _ loc: TemplateSourceLocation) throws(ChatTemplateError) {
        guard count <= maxLength else {
            throw .invalidOperation("the result would hold \(count) characters or items, more than the \(maxLength) a template may make", at: loc)
        }
    }
}
