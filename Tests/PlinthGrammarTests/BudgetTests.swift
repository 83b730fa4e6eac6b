import Foundation
import Testing
@testable import PlinthGrammar

/// Budget-aware decoding: the distance to completion is exact, and a decoder that takes only
/// tokens that fit always ends with a complete value within its budget.
@Suite struct BudgetTests {
    static let schemas = [
        #"{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}"#,
        #"{"type":"string","minLength":3,"maxLength":6}"#,
        #"{"type":"array","items":{"type":"integer"},"minItems":2}"#,
        #"{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"enum":["alpha","beta"]}},"n":{"type":"number"}},"required":["name","tags"]}"#,
        #"{"anyOf":[{"type":"object","properties":{"x":{"type":"boolean"}},"required":["x"]},{"type":"array","items":{"type":"string","minLength":2}}]}"#,
        #"{"type":"object","properties":{"user_id":{"type":"string"},"nested":{"type":"object","properties":{"deep":{"type":"string","minLength":4}},"required":["deep"]}},"required":["user_id","nested"]}"#,
        // Counted patterns and formats (their characters counted against a table).
        #"{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]+@x$","minLength":4,"maxLength":6},"mail":{"type":"string","format":"email","maxLength":10}},"required":["id","mail"]}"#,
        #"{"type":"array","items":{"type":"string","pattern":"^(ab|abcd)$","minLength":3},"minItems":1}"#,
    ]

    @Test func shortestCompletionsAreCounted() throws {
        let object = try TestVocab.grammar(Self.schemas[0]).makeMatcher()
        #expect(object.minimumCompletionBytes == #"{"a":""}"#.utf8.count)
        for b in #"{"a":"xyz"#.utf8 { #expect(object.accept(Int32(b))) }
        #expect(object.minimumCompletionBytes == 2)
        let counted = try TestVocab.grammar(Self.schemas[1]).makeMatcher()
        #expect(counted.minimumCompletionBytes == 5)
        for b in #""a"#.utf8 { #expect(counted.accept(Int32(b))) }
        #expect(counted.minimumCompletionBytes == 3)
        let array = try TestVocab.grammar(Self.schemas[2]).makeMatcher()
        #expect(array.minimumCompletionBytes == "[0,0]".utf8.count)
        for b in "[12,3,4".utf8 { #expect(array.accept(Int32(b))) }
        #expect(array.minimumCompletionBytes == 1)
        #expect(array.accept(Int32(UInt8(ascii: "]"))))
        #expect(array.minimumCompletionBytes == 0 && array.isComplete)
    }

    /// The distance is 0 exactly at complete outputs, no byte shortens it by more than one, and
    /// from every incomplete prefix some byte shortens it by one: it is the length of the
    /// shortest completion.
    @Test(arguments: 0..<schemas.count)
    func distanceIsTheShortestCompletion(schema: Int) throws {
        let g = try TestVocab.grammar(Self.schemas[schema])
        var rng = SplitMix(state: UInt64(schema) &+ 99)
        for _ in 0..<12 {
            let m = g.makeMatcher()
            for _ in 0..<Int.random(in: 0..<40, using: &rng) {
                let allowed = (0..<256).filter { b in m.accept(Int32(b)) && m.rollback(1) }
                guard let b = allowed.randomElement(using: &rng) else { break }
                m.accept(Int32(b))
            }
            let d = m.minimumCompletionBytes
            #expect((d == 0) == m.isComplete)
            var shortens = false
            for b in 0..<256 where m.accept(Int32(b)) {
                let after = m.minimumCompletionBytes
                m.rollback(1)
                #expect(after >= d - 1, "byte \(b) shortened the completion from \(d) to \(after)")
                if after == d - 1 { shortens = true }
            }
            #expect(d == 0 || shortens, "no byte leads toward completion from distance \(d)")
        }
    }

    /// A decoder that always prefers to continue (the runaway string of a small model) but takes
    /// only tokens that fit ends with a complete, valid value inside every budget that can hold
    /// one, and the exact budget-aware mask allows only such tokens.
    @Test(arguments: 0..<schemas.count)
    func runawayDecodingEndsWithinBudget(schema: Int) throws {
        let g = try TestVocab.grammar(Self.schemas[schema])
        let preferred = ["abc", "12", "alpha", "\",\"", "ab", "a", "0", "[", "{\""].compactMap { text in
            TestVocab.tokens.firstIndex(of: Array(text.utf8)).map(Int32.init)
        }
        let start = g.makeMatcher().minimumCompletionBytes
        for budget in [start, start + 1, start + 7, 40] {
            let m = g.makeMatcher()
            var mask = [UInt32](repeating: 0, count: TestVocab.vocabulary.maskWordCount)
            var used = 0
            while !m.isTerminated {
                let remaining = budget - used
                mask.withUnsafeMutableBufferPointer { m.fillAllowedTokens($0, remaining: remaining) }
                let allowed = (0..<Int32(TestVocab.tokens.count)).filter { TestVocab.isAllowed(mask, $0) }
                #expect(!allowed.isEmpty, "budget \(budget): nothing fits after \(used) tokens")
                guard !allowed.isEmpty else { break }
                for t in allowed { #expect(m.fits(t, remaining: remaining)) }
                // Continue whenever possible: end only when nothing preferred fits.
                let token = preferred.first(where: allowed.contains) ?? allowed.first { $0 != TestVocab.eos } ?? TestVocab.eos
                #expect(m.accept(token))
                if token != TestVocab.eos { used += 1 }
            }
            #expect(m.isComplete && used <= budget, "budget \(budget) used \(used)")
        }
    }

    /// Inside a string at exactly its budget, only tokens toward the end fit; below the
    /// shortest completion in bytes, only tokens that shorten it fit (a string may close, not
    /// grow), and some always does.
    @Test func aBudgetShorterThanTheBytesStillSteers() throws {
        let m = try TestVocab.grammar(Self.schemas[5]).makeMatcher()
        for b in #"{"user_id":"ab"#.utf8 { #expect(m.accept(Int32(b))) }
        let d = m.minimumCompletionBytes
        var plain = [UInt32](repeating: 0, count: TestVocab.vocabulary.maskWordCount)
        plain.withUnsafeMutableBufferPointer { m.fillAllowedTokens($0) }
        var tight = plain, short = plain
        tight.withUnsafeMutableBufferPointer { m.fillAllowedTokens($0, remaining: d) }
        short.withUnsafeMutableBufferPointer { m.fillAllowedTokens($0, remaining: d - 1) }
        let abc = Int32(TestVocab.tokens.firstIndex(of: Array("abc".utf8))!)
        let quote = Int32(UInt8(ascii: "\""))
        #expect(TestVocab.isAllowed(plain, abc) && !TestVocab.isAllowed(tight, abc) && !TestVocab.isAllowed(short, abc))
        #expect(TestVocab.isAllowed(tight, quote) && TestVocab.isAllowed(short, quote))
        for t in 0..<Int32(TestVocab.tokens.count) where TestVocab.isAllowed(short, t) {
            #expect(m.accept(t))
            #expect(m.minimumCompletionBytes < d, "token \(t) does not shorten the completion")
            _ = m.rollback(1)
        }
    }

    /// With budgets shorter in tokens than the shortest value in bytes, the runaway decoder still
    /// ends with a complete value, spending at most one token per byte of the shortest value; one
    /// that prefers long tokens fits `{"a":""}` (8 bytes) in 4.
    @Test(arguments: 0..<schemas.count)
    func budgetsBelowTheBytesEndComplete(schema: Int) throws {
        let g = try TestVocab.grammar(Self.schemas[schema])
        let preferred = ["abc", "12", "alpha", "ab", "a", "0", "["].compactMap { text in
            TestVocab.tokens.firstIndex(of: Array(text.utf8)).map(Int32.init)
        }
        let start = g.makeMatcher().minimumCompletionBytes
        for budget in Set([1, start / 2, start - 1]) where budget > 0 {
            for longest in [false, true] {
                let m = g.makeMatcher()
                var used = 0
                while !m.isTerminated && used <= start {
                    let remaining = budget - used
                    var mask = [UInt32](repeating: 0, count: TestVocab.vocabulary.maskWordCount)
                    mask.withUnsafeMutableBufferPointer { m.fillAllowedTokens($0, remaining: remaining) }
                    let allowed = (0..<Int32(TestVocab.tokens.count)).filter { TestVocab.isAllowed(mask, $0) }
                    #expect(!allowed.isEmpty, "budget \(budget): nothing fits after \(used) tokens")
                    guard !allowed.isEmpty else { break }
                    let others = allowed.filter { $0 != TestVocab.eos }
                    let token = preferred.first(where: allowed.contains)
                        ?? (longest ? others.max { TestVocab.tokens[Int($0)].count < TestVocab.tokens[Int($1)].count } : others.first)
                        ?? TestVocab.eos
                    #expect(m.accept(token))
                    if token != TestVocab.eos { used += 1 }
                }
                #expect(m.isComplete && used <= max(start, budget), "budget \(budget) used \(used) of \(start)")
            }
        }
        if schema == 0 {
            let m = g.makeMatcher()
            for text in ["{\"", "a", "\":\"", "\"}"] {
                let t = Int32(TestVocab.tokens.firstIndex(of: Array(text.utf8))!)
                #expect(m.fits(t, remaining: 4 - m.acceptedTokenCount), "\(text)")
                #expect(m.accept(t))
            }
            #expect(m.isComplete)
        }
    }
}
