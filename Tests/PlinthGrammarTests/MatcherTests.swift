import Foundation
import Testing
@testable import PlinthGrammar

@Suite("Matcher")
struct MatcherTests {
    @Test func endOfSequenceOnlyWhenComplete() throws {
        let g = try TestVocab.grammar(#"{"type":"array","items":{"type":"integer"}}"#)
        let m = g.makeMatcher()
        #expect(!TestVocab.isAllowed(m.allowedTokens(), TestVocab.eos))
        for b in "[1,2]".utf8 { #expect(m.accept(Int32(b))) }
        #expect(m.isComplete)
        let mask = m.allowedTokens()
        #expect(TestVocab.isAllowed(mask, TestVocab.eos))
        #expect(mask.enumerated().allSatisfy { i, w in i == Int(TestVocab.eos) >> 5 ? w == 1 << (UInt32(TestVocab.eos) & 31) : w == 0 })
        #expect(m.accept(TestVocab.eos))
        #expect(m.isTerminated)
        #expect(!m.accept(Int32(UInt8(ascii: "1"))))
    }

    @Test func rollbackRestoresState() throws {
        let g = try TestVocab.grammar(#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#)
        let m = g.makeMatcher()
        let start = m.allowedTokens()
        let quoteColon = Int32(TestVocab.tokens.firstIndex(of: Array("{\"".utf8))!)
        #expect(m.accept(quoteColon))
        let afterOpen = m.allowedTokens()
        #expect(m.accept(Int32(UInt8(ascii: "n"))))
        #expect(!m.accept(Int32(UInt8(ascii: "x"))))
        #expect(m.rollback(1))
        #expect(m.allowedTokens() == afterOpen)
        #expect(m.rollback(1))
        #expect(m.allowedTokens() == start)
        #expect(!m.rollback(1))
    }

    @Test func forcedContinuation() throws {
        let g = try TestVocab.grammar(#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}"#)
        let m = g.makeMatcher()
        #expect(String(decoding: m.forcedBytes(), as: UTF8.self) == #"{"name":""#)
        let toks = m.forcedTokens()
        let forced = m.forcedBytes()
        let tokenBytes = toks.flatMap { TestVocab.vocabulary.bytes(of: $0) }
        #expect(!toks.isEmpty && Array(forced.prefix(tokenBytes.count)) == tokenBytes)
        for t in toks { #expect(m.accept(t)) }
        m.reset()
        for b in #"{"name":"Al"#.utf8 { #expect(m.accept(Int32(b))) }
        #expect(m.forcedBytes().isEmpty)
        #expect(m.accept(Int32(UInt8(ascii: "\""))))
        #expect(String(decoding: m.forcedBytes(), as: UTF8.self) == #","age":"#)
    }

    @Test func streamingPath() throws {
        let g = try TestVocab.grammar(#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}}},"required":["a"]}"#)
        let m = g.makeMatcher()
        for b in #"{"a":[{"b":"x"},{"b":"y"#.utf8 { #expect(m.accept(Int32(b))) }
        #expect(m.currentPath == [.property("a"), .element(1), .property("b")])
        m.reset()
        for b in #"{"a":["#.utf8 { #expect(m.accept(Int32(b))) }
        #expect(m.currentPath == [.property("a")])
    }

    @Test func specialTokensNeverAllowed() throws {
        var tokens = TestVocab.tokens
        tokens.append(Array("<|special|>".utf8))
        let v = try TokenVocabulary(tokens: tokens, endOfSequence: [TestVocab.eos], excluded: [Int32(tokens.count - 1)])
        let g = try GrammarCompiler(vocabulary: v).compile(jsonSchema: #"{"type":"string"}"#)
        let m = g.makeMatcher()
        #expect(m.accept(Int32(UInt8(ascii: "\""))))
        #expect(!TestVocab.isAllowed(m.allowedTokens(), Int32(tokens.count - 1)))
        #expect(!m.accept(Int32(tokens.count - 1)))
    }
}
