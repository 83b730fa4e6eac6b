import Foundation
import Synchronization

/// Turns JSON Schemas and regular expressions into ``CompiledGrammar``s for one vocabulary,
/// and caches them.
///
/// Compiling is deterministic, so the compiler keeps every grammar it has built, keyed by the
/// schema's content and the options; a second request for the same schema (from any session or
/// thread) returns the same grammar, with the token masks it has already computed.
///
/// ```swift
/// let compiler = GrammarCompiler(vocabulary: vocabulary)
/// let grammar = try compiler.compile(jsonSchema: #"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#)
/// let matcher = grammar.makeMatcher()
/// ```
public final class GrammarCompiler: Sendable {
    /// The vocabulary grammars are compiled for.
    public let vocabulary: TokenVocabulary
    /// The most grammars kept; the oldest are dropped beyond it.
    public let cacheCapacity: Int

    struct Key: Hashable, Sendable {
        var kind: UInt8
        var text: ExactString
        var options: GrammarOptions
    }
    let cache = Mutex<(entries: [Key: CompiledGrammar], order: [Key])>(([:], []))

    public init(vocabulary: TokenVocabulary, cacheCapacity: Int = 512) {
        self.vocabulary = vocabulary
        self.cacheCapacity = cacheCapacity
    }

    /// Compiles a JSON Schema given as JSON text.
    public func compile(jsonSchema text: String, options: GrammarOptions = GrammarOptions()) throws(GrammarError) -> CompiledGrammar {
        try compile(schema: try parse(text.utf8), options: options)
    }

    /// Compiles a JSON Schema given as a JSON document (for example the encoding of a
    /// `GenerationSchema`).
    public func compile(jsonSchema data: Data, options: GrammarOptions = GrammarOptions()) throws(GrammarError) -> CompiledGrammar {
        try compile(schema: try parse(data), options: options)
    }

    private func parse(_ bytes: some Sequence<UInt8>) throws(GrammarError) -> JSONValue {
        do { return try JSONValue(parsing: bytes) } catch { throw .invalidJSON(error.description) }
    }

    /// Compiles a JSON Schema.
    public func compile(schema: JSONValue, options: GrammarOptions = GrammarOptions()) throws(GrammarError) -> CompiledGrammar {
        let key = Key(kind: 0, text: ExactString(schema.compactText), options: options)
        if let g = lookup(key) { return g }
        let sc = SchemaCompiler(schema, options: options)
        let grammar = try sc.compile()
        return store(key, CompiledGrammar(grammar: grammar, vocabulary: vocabulary, ignoredKeywords: sc.ignored))
    }

    /// Compiles a regular expression that the whole output must match (ECMAScript syntax, the
    /// subset JSON Schema's `pattern` uses; `^`/`$` are implied). The output is raw text, not a
    /// JSON string.
    public func compile(regex pattern: String, options: GrammarOptions = GrammarOptions()) throws(GrammarError) -> CompiledGrammar {
        let key = Key(kind: 1, text: ExactString(pattern), options: options)
        if let g = lookup(key) { return g }
        let b = GrammarBuilder(stateBudget: options.stateBudget, timeLimit: options.timeLimit)
        var nfa = NFA()
        let s = nfa.add()
        let e = try RegexBuilder.contentNFA(pattern, fullMatch: true, json: false, nfa: &nfa, from: s)
        let dfa = try DFA.determinize(nfa, start: s, accepting: [e], budget: options.stateBudget).trimmed()
        if dfa.accepting[0] { throw .invalidRegex(pattern: pattern, reason: "it matches the empty string, so generation could produce nothing") }
        let r = b.reserve(pointer: "#")
        try b.define(r, dfa)
        let grammar = try Grammar(builder: b, root: r, pointer: "#")
        return store(key, CompiledGrammar(grammar: grammar, vocabulary: vocabulary))
    }

    /// Number of grammars in the cache.
    public var cachedGrammarCount: Int { cache.withLock { $0.entries.count } }

    /// Empties the cache.
    public func removeAllCachedGrammars() { cache.withLock { $0 = ([:], []) } }

    /// Empties the process-wide leaf automata (formats, patterns, strings) that every compiler
    /// shares, so that the next compilation builds them again: for cold-start measurements.
    public static func removeAllSharedLeaves() { GrammarBuilder.sharedLeaves.withLock { $0.removeAll() } }

    func lookup(_ key: Key) -> CompiledGrammar? { cache.withLock { $0.entries[key] } }

    func store(_ key: Key, _ g: CompiledGrammar) -> CompiledGrammar {
        cache.withLock { c in
            if let existing = c.entries[key] { return existing }
            c.entries[key] = g
            c.order.append(key)
            while c.order.count > cacheCapacity { c.entries[c.order.removeFirst()] = nil }
            return g
        }
    }
}
