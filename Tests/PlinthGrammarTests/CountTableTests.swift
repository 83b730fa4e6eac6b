import Foundation
import Testing
@testable import PlinthGrammar

/// Length-bounded patterns and formats count their characters in the matcher's frame against a
/// table (``CountTable``) instead of in a product automaton. The product is the referee: on
/// random walks both give the same masks, budget-aware masks and completion distances.
@Suite struct CountTableTests {
    static let schemas = [
        #"{"type":"string","pattern":"^[a-z]+@x$","maxLength":4}"#,
        #"{"type":"string","pattern":"^[a-z]+@x$","minLength":4,"maxLength":6}"#,
        #"{"type":"string","pattern":"^(ab|abcd)$","minLength":3}"#,
        #"{"type":"string","pattern":"^\u00e9*[a-c]{2,}$","minLength":3,"maxLength":5}"#,
        #"{"type":"string","pattern":"[0-9]","minLength":2,"maxLength":4}"#,
        #"{"type":"string","pattern":"^[a-zA-Z0-9_.-]+$","minLength":3,"maxLength":12}"#,
        #"{"type":"string","format":"email","maxLength":9}"#,
        #"{"type":"string","format":"date","minLength":5}"#,
        #"{"type":"string","format":"ipv4","maxLength":9}"#,
        #"{"type":"object","properties":{"a":{"type":"string","pattern":"^a","minLength":2,"maxLength":3},"b":{"type":"string","format":"email","minLength":7}},"required":["a","b"]}"#,
        #"{"type":"array","items":{"type":"string","pattern":"^[a-c]+$","maxLength":2},"maxItems":3}"#,
        // Unbounded above: states closed under the string slice take the slice shortcut.
        #"{"type":"string","pattern":"a","minLength":3}"#,
        #"{"type":"string","pattern":"^x.*$","minLength":5}"#,
    ]

    static func compile(_ schema: String, inStates: Bool) throws -> CompiledGrammar {
        var options = GrammarOptions()
        options.countsInStates = inStates
        return try TestVocab.grammar(schema, options)
    }

    static func mask(_ m: GrammarMatcher, remaining: Int? = nil) -> [UInt32] {
        var words = [UInt32](repeating: 0, count: TestVocab.vocabulary.maskWordCount)
        words.withUnsafeMutableBufferPointer { w in
            if let remaining { m.fillAllowedTokens(w, remaining: remaining) } else { m.fillAllowedTokens(w) }
        }
        return words
    }

    @Test(arguments: 0..<schemas.count)
    func tablesGiveTheProductsMasksAndDistances(schema: Int) throws {
        let table = try Self.compile(Self.schemas[schema], inStates: false)
        let product = try Self.compile(Self.schemas[schema], inStates: true)
        #expect(table.grammar.ruleCountBase.contains { $0 >= 0 }, "no rule counted against a table")
        #expect(!product.grammar.ruleCountBase.contains { $0 >= 0 })
        var rng = SplitMix(state: UInt64(schema) &+ 7)
        for _ in 0..<40 {
            let a = table.makeMatcher(), b = product.makeMatcher()
            while !a.isTerminated {
                let ma = Self.mask(a), mb = Self.mask(b)
                #expect(ma == mb, "masks differ after \(a.acceptedTokenCount) tokens")
                #expect(a.minimumCompletionBytes == b.minimumCompletionBytes)
                let d = a.minimumCompletionBytes
                for r in [d, d + 1, d + 3] { #expect(Self.mask(a, remaining: r) == Self.mask(b, remaining: r)) }
                guard ma == mb else { break }
                let allowed = (0..<Int32(TestVocab.tokens.count)).filter { TestVocab.isAllowed(ma, $0) }
                #expect(!allowed.isEmpty, "a dead end after \(a.acceptedTokenCount) tokens")
                guard let t = allowed.randomElement(using: &rng) else { break }
                #expect(a.accept(t) && b.accept(t))
            }
        }
    }

    @Test func charactersAreCountedNotBytes() throws {
        let g = try TestVocab.grammar(#"{"type":"string","pattern":"^\u00e9+$","maxLength":2}"#)
        #expect(TestVocab.accepts(g, "\"\u{e9}\u{e9}\""))
        #expect(!TestVocab.accepts(g, "\"\u{e9}\u{e9}\u{e9}\""))
        let astral = try TestVocab.grammar(#"{"type":"string","pattern":"^.+x$","maxLength":2}"#)
        #expect(TestVocab.accepts(astral, "\"\u{1F600}x\""))
        #expect(!TestVocab.accepts(astral, "\"\u{1F600}\u{1F600}x\""))
        let escapes = try TestVocab.grammar(#"{"type":"string","pattern":"^[a\\n]+$","minLength":3,"maxLength":3}"#)
        #expect(TestVocab.accepts(escapes, #""a\na""#))
        #expect(!TestVocab.accepts(escapes, #""a\n""#))
    }

    /// Bounds too large for a table are refused by the state budget, not by a crash.
    @Test func hugeBoundsAreRefused() throws {
        for bound in ["minLength", "maxLength"] {
            #expect(throws: GrammarError.self) {
                try TestVocab.grammar(#"{"type":"string","pattern":"a",""# + "\"\(bound)\":999999999999999999}")
            }
        }
    }

    /// A byte that would leave too few characters for the rest of the pattern is refused at
    /// once, as the product's trimmed states refused it.
    @Test func deadEndsAreRefused() throws {
        let g = try TestVocab.grammar(Self.schemas[0])
        let m = g.makeMatcher()
        #expect(m.accept(bytes: Array(#""ab"#.utf8)))
        #expect(!m.accept(bytes: Array("c".utf8)))
        #expect(m.accept(bytes: Array("@x\"".utf8)) && m.isComplete)
        let atLeast = try TestVocab.grammar(Self.schemas[2])
        #expect(!TestVocab.accepts(atLeast, #""ab""#))
        #expect(TestVocab.accepts(atLeast, #""abcd""#))
        let n = atLeast.makeMatcher()
        #expect(n.accept(bytes: Array(#""ab"#.utf8)))
        #expect(!n.accept(bytes: Array("\"".utf8)))
        #expect(n.minimumCompletionBytes == 3)
    }
}
