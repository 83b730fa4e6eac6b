import Foundation
@testable import PlinthRuntime
import Testing

/// What a sequence asks of a backend that reduces rows itself (``LogitsUse``), and that drawing
/// from the best tokens the backend returns continues the sequence as its whole row would.
struct SequenceDecoderTests {
    static let tokenizer: Tokenizer? = TestModels.path(TestModels.smolLM2).flatMap { try? Tokenizer(gguf: GGUFFile(url: $0)) }

    static func decoder(_ sampling: SamplingParameters, prompt: [Int32] = [], logprobs: Int? = nil) -> SequenceDecoder {
        SequenceDecoder(tokenizer: tokenizer!, prompt: prompt, sampling: sampling, limit: 64, stopSequences: [], constraint: nil,
                        logprobs: logprobs)
    }

    @Test(.enabled(if: tokenizer != nil, "needs SmolLM2's tokenizer (plinth models fetch)"))
    func aSampledRowAsksForItsBestTokensWhereTheyDecide() {
        var d = Self.decoder(SamplingParameters(temperature: 0.8, topK: 40))
        #expect(d.logitsUse() == .top(k: 40, allowed: nil))
        d = Self.decoder(.greedy)
        #expect(d.logitsUse() == .argmax(allowed: nil))
        d = Self.decoder(SamplingParameters(temperature: 0.8, topK: LogitsUse.maxTopK + 1))
        #expect(d.logitsUse() == .full)
        d = Self.decoder(SamplingParameters(temperature: 0.8, topK: 0))
        #expect(d.logitsUse() == .full)
        d = Self.decoder(SamplingParameters(temperature: 0.8, topK: 40), logprobs: 2)
        #expect(d.logitsUse() == .full)
        d = Self.decoder(SamplingParameters(temperature: 0.8, topK: 40, repetitionPenalty: 1.3), prompt: [1, 2, 3])
        #expect(d.logitsUse() == .full)
    }

    @Test(.enabled(if: tokenizer != nil, "needs SmolLM2's tokenizer (plinth models fetch)"))
    func drawingFromTheBestTokensContinuesAsTheWholeRow() throws {
        let vocab = Self.tokenizer!.vocabularySize
        var rng = RandomSource(seed: 3)
        let p = SamplingParameters(temperature: 0.9, topK: 40, topP: 0.9, minP: 0.02, seed: 11)
        var whole = Self.decoder(p, prompt: [1]), fromTop = Self.decoder(p, prompt: [1])
        for _ in 0..<20 {
            let logits: [Float] = (0..<vocab).map { _ in Float(rng.nextUnit() * 10 - 5) }
            let top = SamplerTests.best(logits, 40)
            _ = try logits.withUnsafeBufferPointer { try whole.advance($0, { _ in }) }
            _ = try top.withUnsafeBufferPointer { try fromTop.advance(top: $0, { _ in }) }
            #expect(whole.history == fromTop.history)
        }
        #expect(whole.history.count > 1)
        // Under a budget that refuses odd tokens, a refused draw from the best tokens is drawn
        // again from the logits: the seeded run goes on as the whole rows' does.
        whole = SequenceDecoder(tokenizer: Self.tokenizer!, prompt: [1], sampling: p, limit: 64, stopSequences: [],
                                constraint: EvenTokens())
        fromTop = SequenceDecoder(tokenizer: Self.tokenizer!, prompt: [1], sampling: p, limit: 64, stopSequences: [],
                                  constraint: EvenTokens())
        var refusals = 0
        for _ in 0..<20 {
            let logits: [Float] = (0..<vocab).map { _ in Float(rng.nextUnit() * 10 - 5) }
            let top = SamplerTests.best(logits, 40)
            _ = try logits.withUnsafeBufferPointer { try whole.advance($0, { _ in }) }
            if case .rewind = try top.withUnsafeBufferPointer({ try fromTop.advance(top: $0, { _ in }) }) {
                refusals += 1
                _ = try logits.withUnsafeBufferPointer { try fromTop.advance($0, { _ in }) }
            }
            #expect(whole.history == fromTop.history)
        }
        #expect(refusals > 0 && whole.history.dropFirst().allSatisfy { $0 % 2 == 0 })
        #expect(fromTop.budgetRefusals == whole.budgetRefusals && whole.budgetRefusals == refusals)
        // No candidates: the row is asked for again, with its logits.
        var d = Self.decoder(p, prompt: [1])
        let next = try [TokenCandidate]().withUnsafeBufferPointer { try d.advance(top: $0, { _ in }) }
        guard case .rewind = next else { Issue.record("expected a rewind, got \(next)"); return }
        #expect(d.logitsUse() == .full)
    }
}

/// Allows every token, but its budget takes only even ones.
private final class EvenTokens: Constraint {
    func begin(_ out: inout ConstraintOutput) throws {}
    func fillAllowed(_ mask: UnsafeMutableBufferPointer<UInt32>) -> Bool {
        for i in mask.indices { mask[i] = .max }
        return true
    }
    func fits(_ token: Int32, remaining: Int) -> Bool { token % 2 == 0 }
    func accept(_ token: Int32, _ out: inout ConstraintOutput) throws { out.append(token) }
    func end(_ reason: FinishReason, _ out: inout ConstraintOutput) throws {}
}
