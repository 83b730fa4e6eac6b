import Foundation
import PlinthRuntime
import Testing

/// The sampler on synthetic logits: greedy choice, seeding, and each filter (top-k, top-p, min-p,
/// repetition penalty, allowed set) checked by drawing many times.
struct SamplerTests {
    /// Draws `count` tokens from `logits` with one sampler (its random state advancing).
    static func draws(_ logits: [Float], _ parameters: SamplingParameters, count: Int,
                      history: [Int32] = [], allowed: ((Int32) -> Bool)? = nil) -> [Int32] {
        var sampler = Sampler(parameters)
        return logits.withUnsafeBufferPointer { buf in
            (0..<count).map { _ in sampler.sample(buf, history: history[...], allowed: allowed) }
        }
    }

    /// Counts of each token id among `tokens`.
    static func histogram(_ tokens: [Int32]) -> [Int32: Int] {
        tokens.reduce(into: [:]) { $0[$1, default: 0] += 1 }
    }

    /// Pure sampling: no filter, temperature 1.
    static func plain(seed: UInt64 = 1) -> SamplingParameters {
        SamplingParameters(temperature: 1, topK: 0, topP: 1, minP: 0, seed: seed)
    }

    /// Logits whose softmax is exactly `probs` (up to rounding).
    static func logits(probabilities probs: [Double]) -> [Float] { probs.map { Float(log($0)) } }

    // MARK: Greedy

    @Test func argmaxTakesTheLargestLogit() {
        let logits: [Float] = [0.1, -2, 3.5, 3.4, -Float.infinity, 1]
        #expect(logits.withUnsafeBufferPointer { Sampler.argmax($0) } == 2)
    }

    @Test func argmaxTakesTheLowestIdAmongEquals() {
        let logits: [Float] = [1, 7, 3, 7, 7, 2]
        #expect(logits.withUnsafeBufferPointer { Sampler.argmax($0) } == 1)
        let flat = [Float](repeating: 0.5, count: 10)
        #expect(flat.withUnsafeBufferPointer { Sampler.argmax($0) } == 0)
    }

    @Test func greedyParametersAlwaysTakeTheArgmax() {
        let logits: [Float] = [0.3, 2.0, 1.99, -1, 2.0]
        let tokens = Self.draws(logits, .greedy, count: 50)
        #expect(tokens == [Int32](repeating: 1, count: 50))
    }

    @Test func temperatureZeroAgreesWithGreedy() {
        var rng = RandomSource(seed: 99)
        for trial in 0..<20 {
            let logits = (0..<500).map { _ in Float(rng.nextUnit() * 20 - 10) }
            // Temperature 0 with the default (non-greedy) filters still means greedy.
            let zero = SamplingParameters(temperature: 0, topK: 40, topP: 0.95, minP: 0.05, seed: UInt64(trial))
            #expect(zero.isGreedy)
            let a = Self.draws(logits, zero, count: 5)
            let b = Self.draws(logits, .greedy, count: 5)
            let expected = logits.withUnsafeBufferPointer { Sampler.argmax($0) }
            #expect(a == b)
            #expect(a.allSatisfy { $0 == expected })
        }
    }

    @Test func topKOfOneIsGreedyAtAnyTemperature() {
        let logits: [Float] = [1.0, 1.5, 1.4, 0.2, 1.49]
        for seed: UInt64 in [0, 1, 2, 3] {
            let p = SamplingParameters(temperature: 2.5, topK: 1, topP: 1, minP: 0, seed: seed)
            #expect(p.isGreedy)
            #expect(Self.draws(logits, p, count: 200).allSatisfy { $0 == 1 })
        }
    }

    // MARK: Seeding

    @Test func sameSeedGivesTheSameDraws() {
        let logits: [Float] = (0..<64).map { Float(sin(Double($0)) * 2) }
        let p = SamplingParameters(temperature: 1.3, topK: 0, topP: 1, minP: 0, seed: 1234)
        let a = Self.draws(logits, p, count: 500)
        let b = Self.draws(logits, p, count: 500)
        #expect(a == b)
        // The draws actually vary (otherwise equality would prove nothing).
        #expect(Set(a).count > 10)
    }

    @Test func differentSeedsGiveDifferentDraws() {
        let logits: [Float] = (0..<64).map { Float(sin(Double($0)) * 2) }
        var p = SamplingParameters(temperature: 1.3, topK: 0, topP: 1, minP: 0, seed: 1)
        let a = Self.draws(logits, p, count: 200)
        p.seed = 2
        let b = Self.draws(logits, p, count: 200)
        #expect(a != b)
    }

    @Test func drawsFollowTheSoftmaxProbabilities() {
        let probs = [0.4, 0.3, 0.2, 0.1]
        let n = 20_000
        let h = Self.histogram(Self.draws(Self.logits(probabilities: probs), Self.plain(seed: 5), count: n))
        for (i, q) in probs.enumerated() {
            let f = Double(h[Int32(i), default: 0]) / Double(n)
            #expect(abs(f - q) < 0.02, "token \(i): frequency \(f), probability \(q)")
        }
    }

    /// A draw close to 1 over a large vocabulary lands where the probabilities put it (a Float
    /// running sum of 151,936 equal probabilities ends near 0.9983, which sent every such draw to
    /// the last token).
    @Test func drawsNearOneOverALargeVocabularyStayInPlace() {
        let n = 151_936
        let logits = [Float](repeating: 0, count: n)
        var tried = 0
        for seed in UInt64(0)..<200_000 where tried < 3 {
            var source = RandomSource(seed: seed)
            let r = source.nextUnit()
            guard r > 0.9985 else { continue }
            tried += 1
            let token = Self.draws(logits, Self.plain(seed: seed), count: 1)[0]
            #expect(abs(Int(token) - Int(r * Double(n))) <= 1, "seed \(seed): draw \(r) chose \(token)")
        }
        #expect(tried == 3)
    }

    @Test func temperatureSharpensAndFlattens() {
        let logits = Self.logits(probabilities: [0.6, 0.4])
        let n = 20_000
        func share(_ t: Float) -> Double {
            var p = Self.plain(seed: 11)
            p.temperature = t
            return Double(Self.histogram(Self.draws(logits, p, count: n))[0, default: 0]) / Double(n)
        }
        // p0 at temperature t is 0.6^(1/t) / (0.6^(1/t) + 0.4^(1/t)).
        func expected(_ t: Double) -> Double { pow(0.6, 1 / t) / (pow(0.6, 1 / t) + pow(0.4, 1 / t)) }
        #expect(abs(share(0.5) - expected(0.5)) < 0.02)
        #expect(abs(share(2.0) - expected(2.0)) < 0.02)
        #expect(share(0.5) > share(2.0))
    }

    // MARK: Filters

    @Test func topKRestrictsDrawsToTheKBest() {
        let logits: [Float] = [0.0, 1.0, 0.5, 2.0, 1.8, 1.9, -1, 0.2, 0.3, 0.1, 1.7, 1.75]
        let p = SamplingParameters(temperature: 1, topK: 3, topP: 1, minP: 0, seed: 3)
        let tokens = Self.draws(logits, p, count: 2000)
        let top3: Set<Int32> = [3, 5, 4]
        #expect(tokens.allSatisfy { top3.contains($0) })
        #expect(Set(tokens) == top3)
    }

    @Test func topKBreaksTiesByLowestId() {
        // Four tokens tie for the best logit; top-k 2 keeps the two lowest ids.
        let logits: [Float] = [0, 5, 0, 5, 5, 5]
        let p = SamplingParameters(temperature: 1, topK: 2, topP: 1, minP: 0, seed: 8)
        #expect(Set(Self.draws(logits, p, count: 500)) == [1, 3])
    }

    @Test func topPKeepsTheSmallestNucleus() {
        // Probabilities 0.5, 0.3, 0.15, 0.05 spread over ids out of order.
        var probs = [Double](repeating: 1e-9, count: 8)
        probs[6] = 0.5; probs[2] = 0.3; probs[0] = 0.15; probs[5] = 0.05
        let logits = Self.logits(probabilities: probs)
        var p = Self.plain(seed: 21)
        p.topP = 0.75
        let two = Self.draws(logits, p, count: 2000)
        #expect(Set(two) == [6, 2])
        // Renormalized over the nucleus: 0.5 / 0.8 for the first.
        let share = Double(Self.histogram(two)[6, default: 0]) / 2000
        #expect(abs(share - 0.625) < 0.04)

        p.topP = 0.9
        #expect(Set(Self.draws(logits, p, count: 2000)) == [6, 2, 0])

        p.topP = 0.4
        #expect(Set(Self.draws(logits, p, count: 500)) == [6])
    }

    @Test func minPDropsTokensBelowAFractionOfTheBest() {
        let logits = Self.logits(probabilities: [0.05, 0.5, 0.15, 0.3])
        var p = Self.plain(seed: 4)
        // Floor 0.2 * 0.5 = 0.1: only the 0.05 token goes.
        p.minP = 0.2
        #expect(Set(Self.draws(logits, p, count: 2000)) == [1, 3, 2])
        // Floor 0.5 * 0.5 = 0.25: 0.3 stays, 0.15 goes.
        p.minP = 0.5
        #expect(Set(Self.draws(logits, p, count: 2000)) == [1, 3])
        // Floor 0.9 * 0.5: only the best.
        p.minP = 0.9
        #expect(Set(Self.draws(logits, p, count: 300)) == [1])
    }

    @Test func repetitionPenaltyDividesPositiveLogits() {
        let logits: [Float] = [2.0, 1.8, -1.0, -0.5]
        var p = SamplingParameters.greedy
        #expect(Self.draws(logits, p, count: 1, history: [0]) == [0])
        p.repetitionPenalty = 1.5
        // 2.0 / 1.5 = 1.33 < 1.8.
        #expect(Self.draws(logits, p, count: 1, history: [0]) == [1])
        // A penalty of 1.05 leaves 2.0 / 1.05 = 1.9 on top.
        p.repetitionPenalty = 1.05
        #expect(Self.draws(logits, p, count: 1, history: [0]) == [0])
    }

    @Test func repetitionPenaltyMultipliesNegativeLogits() {
        let logits: [Float] = [-1.0, -1.2, -3.0]
        var p = SamplingParameters.greedy
        p.repetitionPenalty = 1.5
        // -1.0 * 1.5 = -1.5 < -1.2 (dividing would have raised it to -0.67 and kept it on top).
        #expect(Self.draws(logits, p, count: 1, history: [0]) == [1])
        #expect(Self.draws(logits, p, count: 1, history: [2]) == [0])
    }

    @Test func repetitionPenaltyOnlyLooksAtTheWindow() {
        let logits: [Float] = [2.0, 1.8, 0.1, 0.2]
        var p = SamplingParameters.greedy
        p.repetitionPenalty = 2
        p.repetitionWindow = 2
        // Token 0 is three tokens back: outside the window, not penalized.
        #expect(Self.draws(logits, p, count: 1, history: [0, 3, 2]) == [0])
        #expect(Self.draws(logits, p, count: 1, history: [3, 0, 2]) == [1])
    }

    /// OpenAI's penalties as llama.cpp applies them: logit − count × frequency − presence, for
    /// each token in the window; negative values favour seen tokens.
    @Test func frequencyAndPresencePenaltiesSubtractFromSeenTokens() {
        let logits: [Float] = [2.0, 1.5, 1.2, 0.0]
        var p = SamplingParameters.greedy
        #expect(p.penalizes == false)
        p.frequencyPenalty = 0.3
        // Token 0 seen once: 1.7 > 1.5 stays on top; seen twice: 1.4 < 1.5.
        #expect(Self.draws(logits, p, count: 1, history: [0]) == [0])
        #expect(Self.draws(logits, p, count: 1, history: [0, 0]) == [1])
        // Seen twice, and token 1 once: token 0 at 1.4 is back above token 1 at 1.2.
        #expect(Self.draws(logits, p, count: 1, history: [0, 1, 0]) == [0])
        p.frequencyPenalty = 0
        p.presencePenalty = 0.6
        // Presence counts once however often: 1.4 < 1.5 either way.
        #expect(Self.draws(logits, p, count: 1, history: [0]) == [1])
        #expect(Self.draws(logits, p, count: 1, history: [0, 0, 0]) == [1])
        p.presencePenalty = -1
        // A negative penalty raises seen tokens: token 2 at 2.2 passes token 0.
        #expect(Self.draws(logits, p, count: 1, history: [2]) == [2])
        // Outside the window nothing changes: token 2 is two back.
        p.repetitionWindow = 1
        #expect(Self.draws(logits, p, count: 1, history: [2, 3]) == [0])
    }

    @Test func repetitionPenaltyAppliesWhenSampling() {
        // Two equally likely tokens; penalizing one makes the other dominate.
        let logits: [Float] = [3, 3, -5]
        var p = Self.plain(seed: 9)
        p.repetitionPenalty = 3   // 3 / 3 = 1: e^1 vs e^3, about 12% vs 88%
        let h = Self.histogram(Self.draws(logits, p, count: 4000, history: [0]))
        let share0 = Double(h[0, default: 0]) / 4000
        let expected = exp(1.0) / (exp(1.0) + exp(3.0) + exp(-5.0))
        #expect(abs(share0 - expected) < 0.03)
    }

    @Test func allowedFilterIsRespectedWhenGreedy() {
        let logits: [Float] = [0.5, 4.0, 3.0, 2.0]
        let tokens = Self.draws(logits, .greedy, count: 3, allowed: { $0 != 1 })
        #expect(tokens == [2, 2, 2])
        #expect(Self.draws(logits, .greedy, count: 1, allowed: { $0 == 0 }) == [0])
    }

    @Test func allowedFilterIsRespectedWhenSampling() {
        let logits: [Float] = (0..<40).map { Float(($0 * 7) % 11) / 3 }
        let even: (Int32) -> Bool = { $0 % 2 == 0 }
        // Without top-k (all candidates) and with it (the bounded heap).
        for k in [0, 5] {
            let p = SamplingParameters(temperature: 1.5, topK: k, topP: 1, minP: 0, seed: 17)
            let tokens = Self.draws(logits, p, count: 1000, allowed: even)
            #expect(tokens.allSatisfy { $0 % 2 == 0 }, "top-k \(k)")
            #expect(Set(tokens).count > 1, "top-k \(k)")
        }
        // The allowed set is applied before top-k: the 3 best even tokens, not the evens among the 3 best.
        let p = SamplingParameters(temperature: 1, topK: 3, topP: 1, minP: 0, seed: 5)
        let ranked: [Float] = [10, 9, 8, 7, 6, 5, 4, 3]
        #expect(Set(Self.draws(ranked, p, count: 2000, allowed: even)) == [0, 2, 4])
    }

    @Test func maskChoosesAsTheClosureDoes() {
        // A grammar-style bitmask and the closure that reads it give the same draws, for every
        // kind of choice: greedy, penalized, the bounded top-k heap, and all candidates.
        var rng = RandomSource(seed: 31)
        let n = 300
        let logits = (0..<n).map { _ in Float(rng.nextUnit() * 8 - 4) }
        var words = [UInt32](repeating: 0, count: (n + 31) / 32)
        for i in 0..<n where rng.nextUnit() < 0.3 { words[i >> 5] |= 1 << UInt32(i & 31) }
        let allowed: (Int32) -> Bool = { words[Int($0) >> 5] & (1 << (UInt32($0) & 31)) != 0 }
        var penalized = SamplingParameters.greedy
        penalized.repetitionPenalty = 1.8
        let cases = [SamplingParameters.greedy, penalized,
                     SamplingParameters(temperature: 0.9, topK: 10, topP: 0.9, minP: 0.02, seed: 3),
                     SamplingParameters(temperature: 1.2, topK: 0, topP: 1, minP: 0, seed: 4)]
        let history: [Int32] = (0..<40).map { Int32($0 * 7 % n) }
        for p in cases {
            var a = Sampler(p), b = Sampler(p)
            let (viaMask, viaClosure) = logits.withUnsafeBufferPointer { buf in
                words.withUnsafeBufferPointer { mask in
                    ((0..<200).map { _ in a.sample(buf, history: history[...], allowedMask: mask) },
                     (0..<200).map { _ in b.sample(buf, history: history[...], allowed: allowed) })
                }
            }
            #expect(viaMask == viaClosure, "\(p)")
            #expect(viaMask.allSatisfy(allowed))
        }
    }

    // MARK: RandomSource

    @Test func randomSourceIsDeterministic() {
        var a = RandomSource(seed: 42), b = RandomSource(seed: 42), c = RandomSource(seed: 43)
        let sa = (0..<1000).map { _ in a.next() }
        let sb = (0..<1000).map { _ in b.next() }
        let sc = (0..<1000).map { _ in c.next() }
        #expect(sa == sb)
        #expect(sa != sc)
        #expect(Set(sa).count == 1000)
        // Seed 0 is spread by SplitMix64, not an all-zero (stuck) state.
        var z = RandomSource(seed: 0)
        #expect((0..<10).map { _ in z.next() }.contains { $0 != 0 })
    }

    @Test func nextUnitIsInTheUnitIntervalWithASaneMean() {
        var r = RandomSource(seed: 7)
        let n = 100_000
        var sum = 0.0, sumSq = 0.0
        var lo = 1.0, hi = 0.0
        var belowHalf = 0, outside = 0
        for _ in 0..<n {
            let u = r.nextUnit()
            if !(u >= 0 && u < 1) { outside += 1 }
            sum += u
            sumSq += u * u
            lo = min(lo, u)
            hi = max(hi, u)
            if u < 0.5 { belowHalf += 1 }
        }
        let mean = sum / Double(n)
        let variance = sumSq / Double(n) - mean * mean
        #expect(outside == 0)
        #expect(abs(mean - 0.5) < 0.01)
        #expect(abs(variance - 1.0 / 12) < 0.005)
        #expect(lo < 0.001 && hi > 0.999)
        #expect(abs(Double(belowHalf) / Double(n) - 0.5) < 0.01)
    }

    // MARK: Drawing from a row's best tokens (what a GPU returns for LogitsUse.top)

    /// A row's `k` best allowed tokens, best first (the larger logit, then the lower id): what
    /// pkc_topk returns, computed here by a full sort.
    static func best(_ logits: [Float], _ k: Int, mask: [UInt32]? = nil) -> [TokenCandidate] {
        var all: [TokenCandidate] = []
        for (i, v) in logits.enumerated() where !v.isNaN {
            if let mask, (mask[i / 32] >> UInt32(i % 32)) & 1 == 0 { continue }
            all.append(TokenCandidate(id: Int32(i), logit: v))
        }
        all.sort { $0.logit > $1.logit || ($0.logit == $1.logit && $0.id < $1.id) }
        return Array(all.prefix(k))
    }

    /// Sampling from the k best tokens gives the same tokens, draw for draw, as sampling the
    /// whole row, under every filter, with ties on the k-th logit, and with a token mask (a row
    /// where fewer than k tokens are allowed included).
    @Test func drawingFromTheBestTokensMatchesTheWholeRow() {
        var rng = RandomSource(seed: 7)
        for trial in 0..<60 {
            let n = 300 + trial * 37
            // coarse logits (many ties) on every third trial
            let logits: [Float] = (0..<n).map { _ in
                let v = Float(rng.nextUnit() * 8 - 4)
                return trial % 3 == 0 ? v.rounded() : v
            }
            let k = [1, 2, 5, 40, 64][trial % 5]
            let p = SamplingParameters(temperature: [0.3, 0.8, 1.5][trial % 3], topK: k, topP: [1, 0.9, 0.5][trial % 3],
                                       minP: trial % 2 == 0 ? 0.05 : 0, seed: UInt64(trial))
            var mask: [UInt32]? = nil
            if trial % 4 == 1 {
                var m = [UInt32](repeating: 0, count: (n + 31) / 32)
                let allowed = trial % 8 == 1 ? 3 : n / 2
                for _ in 0..<allowed { let i = Int(rng.nextUnit() * Double(n)); m[i / 32] |= 1 << (UInt32(i) % 32) }
                mask = m
            }
            var whole = Sampler(p), fromTop = Sampler(p)
            #expect(fromTop.canSampleFromTop(history: [], vocabularySize: n) == (k > 1))
            let top = Self.best(logits, k, mask: mask)
            let a: [Int32] = logits.withUnsafeBufferPointer { buf in
                (0..<50).map { _ in
                    if let mask { return mask.withUnsafeBufferPointer { whole.sample(buf, allowedMask: $0) } }
                    return whole.sample(buf)
                }
            }
            let b: [Int32] = top.withUnsafeBufferPointer { buf in (0..<50).map { _ in fromTop.sample(top: buf) ?? -1 } }
            #expect(a == b, "trial \(trial): k \(k), \(top.count) candidates")
        }
    }

    /// Where drawing from the best tokens would not match the whole row, it is not offered:
    /// greedy choice, no top-k, k at least the vocabulary, a repetition penalty with history.
    @Test func theBestTokensAreOnlyOfferedWhereTheyDecide() {
        let s = { (p: SamplingParameters) in Sampler(p) }
        #expect(s(SamplingParameters(temperature: 0.8, topK: 40)).canSampleFromTop(history: [], vocabularySize: 1000))
        #expect(!s(.greedy).canSampleFromTop(history: [], vocabularySize: 1000))
        #expect(!s(SamplingParameters(temperature: 0.8, topK: 0)).canSampleFromTop(history: [], vocabularySize: 1000))
        #expect(!s(SamplingParameters(temperature: 0.8, topK: 40)).canSampleFromTop(history: [], vocabularySize: 40))
        let penalized = s(SamplingParameters(temperature: 0.8, topK: 40, repetitionPenalty: 1.2))
        #expect(penalized.canSampleFromTop(history: [], vocabularySize: 1000))
        #expect(!penalized.canSampleFromTop(history: [3, 4], vocabularySize: 1000))
        var empty = s(SamplingParameters(temperature: 0.8, topK: 40))
        #expect([TokenCandidate]().withUnsafeBufferPointer { empty.sample(top: $0) } == nil)
    }
}
