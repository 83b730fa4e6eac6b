/// The namespace of the Jinja template engine's internals: lexer, parser, syntax tree,
/// runtime values and interpreter.
enum Jinja {}
