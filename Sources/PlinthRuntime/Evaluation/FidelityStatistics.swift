import Foundation

// The per-position arithmetic is llama-perplexity's, in its float and double types, so that the
// two engines' numbers differ only by their logits.

/// A row's largest logit, its index (the first if tied), and the sum of exp(logit - largest) in
/// double: what every log-softmax here starts from.
func softmaxTerms(_ logits: UnsafeBufferPointer<Float>) -> (max: Float, top: Int, sumExp: Double) {
    var maxLogit = logits[0], top = 0
    for i in 1..<logits.count where logits[i] > maxLogit {
        maxLogit = logits[i]
        top = i
    }
    var sumExp = 0.0
    for v in logits { sumExp += Double(expf(v - maxLogit)) }
    return (maxLogit, top, sumExp)
}

/// The mean of values given by their sum and sum of squares, and its standard error (zero with
/// `minimum` values or fewer, or no spread).
func meanAndError(_ sum: Double, _ sum2: Double, _ count: Int, minimum: Int = 1) -> (mean: Double, error: Double) {
    guard count > 0 else { return (0, 0) }
    let mean = sum / Double(count)
    let variance = sum2 / Double(count) - mean * mean
    return (mean, variance > 0 && count > minimum ? sqrt(variance / Double(count - 1)) : 0)
}

/// Negative log-likelihoods of the scored positions: perplexity and its uncertainty.
public struct PerplexityTally: Sendable {
    public private(set) var count = 0
    private var nll = 0.0, nll2 = 0.0

    public init() {}

    /// Scores one position: `logits` predicted `token`.
    public mutating func add(logits: UnsafeBufferPointer<Float>, token: Int32) {
        let (maxLogit, _, sumExp) = softmaxTerms(logits)
        add(nll: -(Double(logits[Int(token)] - maxLogit) - log(sumExp)))
    }

    /// Adds a position's negative log-likelihood computed elsewhere.
    public mutating func add(nll v: Double) {
        nll += v
        nll2 += v * v
        count += 1
    }

    /// exp(mean negative log-likelihood).
    public var perplexity: Double { exp(nll / Double(max(count, 1))) }

    /// The standard error of the perplexity (llama-perplexity's "+/-").
    public var uncertainty: Double { meanAndError(nll, nll2, count).error * perplexity }
}

/// A base model's log-probabilities at one position, compressed as llama-perplexity stores them.
public enum LogProbabilityRecord {
    /// Writes the record of `logits` into `out` (``LogProbabilityFile/recordWords(vocabularySize:)``
    /// words) and returns the negative log-likelihood of `token`.
    public static func encode(logits: UnsafeBufferPointer<Float>, token: Int32, into out: UnsafeMutableBufferPointer<UInt16>) -> Double {
        let (maxLogit, _, sumExp) = softmaxTerms(logits)
        let minLogit = max(logits.min()!, maxLogit - 16)
        let logSumExp = Float(log(sumExp))
        let minLogProb = minLogit - maxLogit - logSumExp
        let scale = (maxLogit - minLogit) / 65535
        storeFloat(scale, into: out, at: 0)
        storeFloat(minLogProb, into: out, at: 2)
        let q = UnsafeMutableBufferPointer(rebasing: out[4...])
        if scale != 0 {
            let inverse = 1 / scale
            for i in 0..<logits.count {
                q[i] = logits[i] > minLogit ? UInt16(truncatingIfNeeded: nearestInt(inverse * (logits[i] - minLogit))) : 0
            }
        } else {
            for i in 0..<logits.count { q[i] = 0 }
        }
        for i in logits.count..<q.count { q[i] = 0 }
        return Double(maxLogit + logSumExp - logits[Int(token)])
    }

    /// ggml's round to nearest through the float's mantissa (valid below 2^22).
    static func nearestInt(_ f: Float) -> Int32 {
        let bits = Int32(bitPattern: (f + 12_582_912).bitPattern)
        return (bits & 0x007f_ffff) - 0x0040_0000
    }

    private static func storeFloat(_ v: Float, into out: UnsafeMutableBufferPointer<UInt16>, at i: Int) {
        out[i] = UInt16(truncatingIfNeeded: v.bitPattern)
        out[i + 1] = UInt16(truncatingIfNeeded: v.bitPattern >> 16)
    }

    static func loadFloat(_ r: UnsafeBufferPointer<UInt16>, at i: Int) -> Float {
        Float(bitPattern: UInt32(r[i]) | UInt32(r[i + 1]) << 16)
    }
}

/// How far a model's next-token distributions are from a base's: KL divergence, agreement of the
/// top token, the change in the probability of the actual token, and both perplexities.
public struct DivergenceTally: Sendable {
    public private(set) var count = 0
    private var sumNLL = 0.0, sumNLL2 = 0.0, sumNLLBase = 0.0, sumNLLBase2 = 0.0, sumNLLNLLBase = 0.0
    private var sumKLD = 0.0, sumKLD2 = 0.0
    private var sumPDiff = 0.0, sumPDiff2 = 0.0, sumPDiff4 = 0.0
    public private(set) var sameTop = 0
    /// Every position's KL divergence and Δp, in order.
    public private(set) var divergences: [Float] = []
    public private(set) var probabilityChanges: [Float] = []

    public init() {}

    /// Scores one position: this model's `logits` against the base's `record`; `token` came next.
    public mutating func add(logits: UnsafeBufferPointer<Float>, base record: UnsafeBufferPointer<UInt16>, token: Int32) {
        let n = logits.count, tok = Int(token)
        let (maxLogit, top, sumExp) = softmaxTerms(logits)
        let logSumExp = Float(log(sumExp))
        let scale = LogProbabilityRecord.loadFloat(record, at: 0), minLogProb = LogProbabilityRecord.loadFloat(record, at: 2)
        let q = UnsafeBufferPointer(rebasing: record[4...])

        let nll = maxLogit + logSumExp - logits[tok]
        sumNLL += Double(nll)
        sumNLL2 += Double(nll * nll)
        let nllBase = -(scale * Float(q[tok]) + minLogProb)
        sumNLLBase += Double(nllBase)
        sumNLLBase2 += Double(nllBase * nllBase)
        sumNLLNLLBase += Double(nll * nllBase)

        let shifted = maxLogit + logSumExp
        var kld = 0.0
        var topBase = -1
        var topBaseLogProb: Float = 0
        for i in 0..<n {
            let logPBase = scale * Float(q[i]) + minLogProb
            if i == 0 || logPBase > topBaseLogProb {
                topBaseLogProb = logPBase
                topBase = i
            }
            if logPBase > -16 {
                kld += Double(expf(logPBase) * (logPBase - logits[i] + shifted))
            }
        }
        sumKLD += kld
        sumKLD2 += kld * kld
        count += 1
        if top == topBase { sameTop += 1 }

        let pDiff = expf(-nll) - expf(-nllBase)
        sumPDiff += Double(pDiff)
        let pDiff2 = Double(pDiff * pDiff)
        sumPDiff2 += pDiff2
        sumPDiff4 += pDiff2 * pDiff2
        divergences.append(Float(kld))
        probabilityChanges.append(pDiff)
    }

    /// A mean and its standard error (none below 11 values, as llama-perplexity).
    public struct Estimate: Sendable, Equatable {
        public var value: Double
        public var uncertainty: Double
    }

    private static func estimate(_ sum: Double, _ sum2: Double, _ count: Int) -> Estimate {
        let e = meanAndError(sum, sum2, count, minimum: 10)
        return Estimate(value: e.mean, uncertainty: e.error)
    }

    private var covariance: Double {
        guard count >= 10 else { return 0 }
        let c = Double(count)
        return (sumNLLNLLBase / c - (sumNLL / c) * (sumNLLBase / c)) / (c - 1)
    }

    /// exp of the mean log-likelihood: this model's perplexity, and the base's.
    public var perplexity: Estimate { Self.exponential(Self.estimate(sumNLL, sumNLL2, count)) }
    public var basePerplexity: Estimate { Self.exponential(Self.estimate(sumNLLBase, sumNLLBase2, count)) }

    private static func exponential(_ e: Estimate) -> Estimate {
        let v = exp(e.value)
        return Estimate(value: v, uncertainty: v * e.uncertainty)
    }

    /// Mean ln(PPL(Q)/PPL(base)).
    public var logPerplexityRatio: Estimate {
        let q = Self.estimate(sumNLL, sumNLL2, count), b = Self.estimate(sumNLLBase, sumNLLBase2, count)
        let u = q.uncertainty * q.uncertainty + b.uncertainty * b.uncertainty - 2 * covariance
        return Estimate(value: q.value - b.value, uncertainty: sqrt(max(u, 0)))
    }

    /// Correlation of the two models' log-likelihoods.
    public var logPerplexityCorrelation: Double {
        let q = Self.estimate(sumNLL, sumNLL2, count), b = Self.estimate(sumNLLBase, sumNLLBase2, count)
        return covariance / (q.uncertainty * b.uncertainty)
    }

    public var meanDivergence: Estimate { Self.estimate(sumKLD, sumKLD2, count) }
    public var meanProbabilityChange: Estimate { Self.estimate(sumPDiff, sumPDiff2, count) }

    /// Root mean square of Δp.
    public var rmsProbabilityChange: Estimate {
        let mse = Self.estimate(sumPDiff2, sumPDiff4, count)
        let rms = sqrt(mse.value)
        return Estimate(value: rms, uncertainty: rms > 0 ? 0.5 / rms * mse.uncertainty : 0)
    }

    /// The fraction of positions whose most likely token is the base's.
    public var sameTopFraction: Estimate {
        let p = Double(sameTop) / Double(max(count, 1))
        return Estimate(value: p, uncertainty: count > 1 ? sqrt(p * (1 - p) / Double(count - 1)) : 0)
    }

    /// The value below which `fraction` of sorted `values` lie, interpolated as llama-perplexity does.
    public static func percentile(_ sorted: [Float], _ fraction: Float) -> Float {
        if fraction <= 0 { return sorted.first ?? 0 }
        if fraction >= 1 { return sorted.last ?? 0 }
        var p = fraction * Float(sorted.count - 1)
        let i = Int(p)
        p -= Float(i)
        return (1 - p) * sorted[i] + p * sorted[min(i + 1, sorted.count - 1)]
    }

    public static func median(_ sorted: [Float]) -> Float {
        guard !sorted.isEmpty else { return 0 }
        let n = sorted.count
        return n % 2 == 0 ? 0.5 * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2]
    }
}
