/// How a schema becomes a grammar.
public struct GrammarOptions: Sendable, Hashable {
    /// Where whitespace may appear between JSON tokens.
    public enum Whitespace: Sendable, Hashable {
        /// No whitespace at all: `{"a":1,"b":[2,3]}` (the default; fewest tokens).
        case compact
        /// Up to `maxRun` spaces, tabs or newlines between tokens.
        case flexible(maxRun: Int)
    }

    /// Whitespace between JSON tokens. Compact by default.
    public var whitespace: Whitespace
    /// When true, schema keywords the decoder cannot enforce are ignored (and listed in
    /// ``CompiledGrammar/ignoredKeywords``) instead of failing compilation.
    public var lenient: Bool
    /// Whether objects may carry properties beyond those declared when the schema does not say
    /// (`additionalProperties` absent). JSON Schema's own default is `true`; for generation the
    /// default here is `false`, so that the model produces exactly the declared properties.
    public var additionalPropertiesByDefault: Bool
    /// The most automaton states a grammar may have before compilation fails.
    public var stateBudget: Int
    /// The most seconds compilation may take before it fails with ``GrammarError/timeout(seconds:)``.
    public var timeLimit: Double?
    /// Whether numbers are spelled as a generator should write them, rather than in every form
    /// JSON allows: integers without a fraction, at most 16 integer digits, at most 15 fraction
    /// digits and a 1–2 digit exponent. Every number a `Double` tells apart keeps a spelling, and
    /// a sampler can't run into an endless `1.0000…` or `2.9999…`. Off by default, so that
    /// validating existing JSON accepts every valid instance.
    public var generatedNumbers: Bool
    /// Length-bounded patterns and formats as products with a character counter, instead of
    /// counted in the frame against a ``CountTable``: the tests' referee for the tables.
    var countsInStates = false

    public init(whitespace: Whitespace = .compact, lenient: Bool = false, additionalPropertiesByDefault: Bool = false,
                stateBudget: Int = 250_000, timeLimit: Double? = 10, generatedNumbers: Bool = false) {
        self.whitespace = whitespace
        self.lenient = lenient
        self.additionalPropertiesByDefault = additionalPropertiesByDefault
        self.stateBudget = stateBudget
        self.timeLimit = timeLimit
        self.generatedNumbers = generatedNumbers
    }
}
