import Foundation
import PlinthKernels

/// How the next token is chosen from the logits.
///
/// Filters apply in llama.cpp's order: the penalties (repetition, then frequency and presence),
/// top-k, top-p, min-p, then temperature and a draw. A temperature of 0 (or `greedy`) takes the most likely token.
public struct SamplingParameters: Sendable, Equatable {
    public var temperature: Float
    /// Keep the k most likely tokens; 0 keeps all.
    public var topK: Int
    /// Keep the smallest set of tokens whose probability reaches p; 1 keeps all.
    public var topP: Float
    /// Drop tokens less likely than `minP` times the most likely one; 0 keeps all.
    public var minP: Float
    /// Divides positive (multiplies negative) logits of recently seen tokens; 1 disables it.
    public var repetitionPenalty: Float
    /// Subtracted from the logit of each token seen in the window, once (OpenAI's
    /// `presence_penalty`); 0 disables it.
    public var presencePenalty: Float
    /// Subtracted from the logit of each token seen in the window, once per time seen (OpenAI's
    /// `frequency_penalty`); 0 disables it.
    public var frequencyPenalty: Float
    /// How many of the latest tokens the penalties look at.
    public var repetitionWindow: Int
    public var seed: UInt64
    /// Added to the logits of these tokens before anything else (OpenAI's `logit_bias`: -100
    /// bans a token, 100 all but forces it).
    public var logitBias: [Int32: Float] = [:]

    public init(temperature: Float = 0.8, topK: Int = 40, topP: Float = 0.95, minP: Float = 0.05,
                repetitionPenalty: Float = 1.0, presencePenalty: Float = 0, frequencyPenalty: Float = 0,
                repetitionWindow: Int = 64, seed: UInt64 = 0) {
        self.temperature = temperature
        self.topK = topK
        self.topP = topP
        self.minP = minP
        self.repetitionPenalty = repetitionPenalty
        self.presencePenalty = presencePenalty
        self.frequencyPenalty = frequencyPenalty
        self.repetitionWindow = repetitionWindow
        self.seed = seed
    }

    /// Whether any penalty changes the logits of tokens already seen.
    public var penalizes: Bool { repetitionPenalty != 1 || presencePenalty != 0 || frequencyPenalty != 0 }

    /// Whether the logits are changed before the choice (a bias, or a penalty once tokens are seen).
    public func adjustsLogits(history: ArraySlice<Int32>) -> Bool {
        !logitBias.isEmpty || (penalizes && !history.isEmpty)
    }

    public static let greedy = SamplingParameters(temperature: 0, topK: 1, topP: 1, minP: 0)

    public var isGreedy: Bool { temperature <= 0 || topK == 1 }
}

/// A token and its logit: one of the few a backend returns for a row instead of all of them
/// (``LogitsUse/top(k:allowed:)``). Laid out as the CUDA kernels write them (id, then value).
public struct TokenCandidate: Sendable, Equatable {
    public var id: Int32
    public var logit: Float
    public init(id: Int32, logit: Float) {
        self.id = id
        self.logit = logit
    }
}

/// Draws tokens from logits with ``SamplingParameters``; owns its random state.
public struct Sampler: Sendable {
    public let parameters: SamplingParameters
    private var rng: RandomSource
    private var candidates: [(id: Int32, logit: Float)] = []

    public init(_ parameters: SamplingParameters) {
        self.parameters = parameters
        rng = RandomSource(seed: parameters.seed)
    }

    /// The most likely token (the lowest id among equals).
    public static func argmax(_ logits: UnsafeBufferPointer<Float>) -> Int32 {
        guard let base = logits.baseAddress else { return 0 }
        return Int32(pk_argmax(base, Int64(logits.count)))
    }

    /// Chooses the next token. `history` is the sequence so far (for the repetition penalty);
    /// `allowed`, when given, excludes every token for which it returns false.
    public mutating func sample(_ logits: UnsafeBufferPointer<Float>, history: ArraySlice<Int32> = [],
                                allowed: ((Int32) -> Bool)? = nil) -> Int32 {
        let p = parameters
        if p.isGreedy && !p.adjustsLogits(history: history) && allowed == nil { return Sampler.argmax(logits) }
        if let allowed {
            return choose(logits, history: history) { visit in
                for i in 0..<logits.count where allowed(Int32(i)) { visit(i) }
            }
        }
        return choose(logits, history: history) { visit in for i in 0..<logits.count { visit(i) } }
    }

    /// Chooses the next token among those whose bit is set in `allowedMask` (bit `i % 32` of
    /// word `i / 32` is token `i`; a grammar's token mask). The same choice as
    /// ``sample(_:history:allowed:)`` with a closure that reads the mask, but only the allowed
    /// tokens are visited, which is what keeps constrained decoding as fast as free decoding.
    public mutating func sample(_ logits: UnsafeBufferPointer<Float>, history: ArraySlice<Int32> = [],
                                allowedMask: UnsafeBufferPointer<UInt32>) -> Int32 {
        choose(logits, history: history) { visit in
            let n = logits.count
            for w in 0..<min(allowedMask.count, (n + 31) / 32) {
                var bits = allowedMask[w]
                while bits != 0 {
                    let i = w &* 32 &+ bits.trailingZeroBitCount
                    if i < n { visit(i) }
                    bits &= bits &- 1
                }
            }
        }
    }

    /// Whether ``sample(top:)`` given a row's `parameters.topK` best tokens chooses as
    /// ``sample(_:history:allowed:)`` given all of them would: a draw at a temperature with
    /// top-k on, no bias or penalty in effect, and k below the vocabulary (else every token is a
    /// candidate).
    public func canSampleFromTop(history: ArraySlice<Int32>, vocabularySize: Int) -> Bool {
        let p = parameters
        return !p.isGreedy && p.topK > 0 && p.topK < vocabularySize && !p.adjustsLogits(history: history)
    }

    /// Chooses among a row's best tokens (at most `parameters.topK`, best first: the larger
    /// logit, then the lower id), where ``canSampleFromTop(history:vocabularySize:)`` holds:
    /// the same token, and the same random draw, as sampling the whole row. Nil when `top` is empty.
    public mutating func sample(top: UnsafeBufferPointer<TokenCandidate>) -> Int32? {
        guard !top.isEmpty else { return nil }
        candidates.removeAll(keepingCapacity: true)
        for c in top.prefix(max(parameters.topK, 1)) { candidates.append((c.id, c.logit)) }
        candidates.sort { $0.logit > $1.logit || ($0.logit == $1.logit && $0.id < $1.id) }
        return draw()
    }

    /// The choice among the tokens `forEachCandidate` visits (in increasing id order).
    @inline(__always)
    private mutating func choose(_ logits: UnsafeBufferPointer<Float>, history: ArraySlice<Int32>,
                                 _ forEachCandidate: ((Int) -> Void) -> Void) -> Int32 {
        let p = parameters
        let penalized = p.penalizes && !history.isEmpty
        var seen: [Int32: Int] = [:]
        if penalized {
            for t in history.suffix(p.repetitionWindow) { seen[t, default: 0] += 1 }
        }
        let biased = !p.logitBias.isEmpty
        // Without a bias or penalty the logits are used as they are (no lookup per token).
        func adjusted(_ i: Int) -> Float {
            var l = logits[i]
            if biased, let bias = p.logitBias[Int32(i)] { l += bias }
            guard penalized, let count = seen[Int32(i)] else { return l }
            if p.repetitionPenalty != 1 { l = l > 0 ? l / p.repetitionPenalty : l * p.repetitionPenalty }
            return l - Float(count) * p.frequencyPenalty - p.presencePenalty
        }

        if p.isGreedy {
            var best: Int32 = -1
            var bestValue = -Float.infinity
            forEachCandidate { i in
                let l = adjusted(i)
                if best < 0 || l > bestValue { best = Int32(i); bestValue = l }
            }
            return max(best, 0)
        }

        // Candidates: all tokens, or the top k kept in a bounded min-heap.
        candidates.removeAll(keepingCapacity: true)
        let k = p.topK > 0 ? min(p.topK, logits.count) : logits.count
        if k < logits.count {
            var heap = MinHeap(capacity: k)
            forEachCandidate { i in heap.offer(Int32(i), adjusted(i)) }
            candidates = heap.items
        } else {
            forEachCandidate { i in candidates.append((Int32(i), adjusted(i))) }
        }
        guard !candidates.isEmpty else { return Sampler.argmax(logits) }
        candidates.sort { $0.logit > $1.logit || ($0.logit == $1.logit && $0.id < $1.id) }
        return draw()
    }

    /// The top-p and min-p cuts and the draw over `candidates`, sorted best first.
    private mutating func draw() -> Int32 {
        let p = parameters
        // Probabilities at temperature 1 decide the top-p and min-p cuts, as in llama.cpp.
        let probs = probabilities()
        var keep = candidates.count
        if p.topP < 1 {
            var cum = 0.0
            for (i, q) in probs.enumerated() {
                cum += q
                if cum >= Double(p.topP) { keep = i + 1; break }
            }
        }
        if p.minP > 0 {
            let floor = probs[0] * Double(p.minP)
            var n = 0
            while n < keep && probs[n] >= floor { n += 1 }
            keep = max(1, n)
        }
        candidates.removeSubrange(keep...)

        // The draw scales a uniform number by the weights' own sum, in Double: a Float running
        // sum over a large vocabulary ends short of 1, and a draw past it would fall to the
        // least likely token.
        let t = Double(max(p.temperature, 1e-6))
        var weights: [Double]
        if t == 1 {
            // OpenAI's default: the cuts' probabilities are the weights.
            weights = Array(probs.prefix(keep))
        } else {
            let top = Double(candidates[0].logit)
            weights = candidates.map { exp((Double($0.logit) - top) / t) }
        }
        let total = weights.reduce(0, +)
        let r = rng.nextUnit() * total
        var cum = 0.0
        var last = 0
        for i in 0..<keep where weights[i] > 0 {
            cum += weights[i]
            last = i
            if r < cum { return candidates[i].id }
        }
        return candidates[last].id
    }

    /// The candidates' probabilities at temperature 1, in Double (a long Float sum drifts).
    private func probabilities() -> [Double] {
        let top = Double(candidates.first?.logit ?? 0)
        var e = candidates.map { exp(Double($0.logit) - top) }
        let s = e.reduce(0, +)
        for i in e.indices { e[i] /= s }
        return e
    }
}

/// Keeps the `capacity` largest (logit, id) pairs seen.
private struct MinHeap {
    let capacity: Int
    var items: [(id: Int32, logit: Float)] = []

    init(capacity: Int) {
        self.capacity = capacity
        items.reserveCapacity(capacity)
    }

    private func less(_ a: (id: Int32, logit: Float), _ b: (id: Int32, logit: Float)) -> Bool {
        a.logit < b.logit || (a.logit == b.logit && a.id > b.id)
    }

    mutating func offer(_ id: Int32, _ logit: Float) {
        let item = (id: id, logit: logit)
        if items.count < capacity {
            items.append(item)
            var i = items.count - 1
            while i > 0 {
                let parent = (i - 1) / 2
                guard less(items[i], items[parent]) else { break }
                items.swapAt(i, parent)
                i = parent
            }
        } else if less(items[0], item) {
            items[0] = item
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var smallest = i
                if l < items.count && less(items[l], items[smallest]) { smallest = l }
                if r < items.count && less(items[r], items[smallest]) { smallest = r }
                if smallest == i { break }
                items.swapAt(i, smallest)
                i = smallest
            }
        }
    }
}
