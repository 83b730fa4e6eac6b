/// Automata for JSON numbers under bounds and `multipleOf`, built digit by digit so that the
/// comparison is exact decimal arithmetic (no floating point).
enum NumberAutomata {
    static let zero = UInt8(ascii: "0")

    /// Digits [0-9]{count}.
    static func anyDigits(_ nfa: inout NFA, _ from: Int32, count: Int) -> Int32 {
        var s = from
        for _ in 0..<count { let t = nfa.add(); nfa.range(s, 0x30, 0x39, t); s = t }
        return s
    }

    /// Digit strings of exactly `a.count` digits with a ≤ value ≤ b (digit by digit).
    static func sameLength(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>, _ nfa: inout NFA, _ from: Int32, _ to: Int32) {
        if a.isEmpty { nfa.epsilon(from, to); return }
        let a0 = a.first!, b0 = b.first!
        let restA = a.dropFirst(), restB = b.dropFirst()
        if restA.allSatisfy({ $0 == 0 }) && restB.allSatisfy({ $0 == 9 }) {
            let m = nfa.add()
            nfa.range(from, 0x30 + a0, 0x30 + b0, m)
            nfa.epsilon(anyDigits(&nfa, m, count: restA.count), to)
            return
        }
        if a0 == b0 {
            let m = nfa.add(); nfa.range(from, 0x30 + a0, 0x30 + a0, m)
            sameLength(restA, restB, &nfa, m, to)
            return
        }
        let m1 = nfa.add(); nfa.range(from, 0x30 + a0, 0x30 + a0, m1)
        sameLength(restA, ArraySlice(repeating: 9, count: restA.count), &nfa, m1, to)
        if a0 + 1 <= b0 - 1 {
            let m2 = nfa.add(); nfa.range(from, 0x30 + a0 + 1, 0x30 + b0 - 1, m2)
            nfa.epsilon(anyDigits(&nfa, m2, count: restA.count), to)
        }
        let m3 = nfa.add(); nfa.range(from, 0x30 + b0, 0x30 + b0, m3)
        sameLength(ArraySlice(repeating: 0, count: restB.count), restB, &nfa, m3, to)
    }

    /// Canonical non-negative integers (no leading zeros) with lo ≤ value ≤ hi (hi nil: unbounded).
    static func natural(lo: [UInt8], hi: [UInt8]?, _ nfa: inout NFA, _ from: Int32, _ to: Int32) {
        let lo = strip(lo)
        if let hi, compare(lo, strip(hi)) > 0 { return }
        let hiS = hi.map(strip)
        let maxLen = hiS?.count ?? lo.count
        for len in lo.count...max(lo.count, maxLen) {
            let low: [UInt8] = len == lo.count ? lo : (len == 1 ? [0] : [1] + Array(repeating: 0, count: len - 1))
            let high: [UInt8] = (hiS != nil && len == hiS!.count) ? hiS! : Array(repeating: 9, count: len)
            var lowAdj = low
            if len > 1 && lowAdj[0] == 0 { lowAdj = [1] + Array(repeating: 0, count: len - 1) }
            if compare(lowAdj, high) <= 0 { sameLength(lowAdj[...], high[...], &nfa, from, to) }
        }
        if hiS == nil {
            // Any number with more digits than `lo`.
            let m = nfa.add(); nfa.range(from, 0x31, 0x39, m)
            let e = anyDigits(&nfa, m, count: lo.count)
            let loop = nfa.add(); nfa.epsilon(e, loop); nfa.range(loop, 0x30, 0x39, loop)
            nfa.epsilon(loop, to)
        }
    }

    static func strip(_ d: [UInt8]) -> [UInt8] {
        var x = d[...]
        while x.count > 1, x.first == 0 { x = x.dropFirst() }
        return x.isEmpty ? [0] : Array(x)
    }
    static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int {
        let x = strip(a), y = strip(b)
        if x.count != y.count { return x.count < y.count ? -1 : 1 }
        for (p, q) in zip(x, y) where p != q { return p < q ? -1 : 1 }
        return 0
    }
    static func increment(_ d: [UInt8]) -> [UInt8] {
        var r = d
        var i = r.count - 1
        while i >= 0 { if r[i] == 9 { r[i] = 0; i -= 1 } else { r[i] += 1; return r } }
        return [1] + r
    }
    static func decrement(_ d: [UInt8]) -> [UInt8]? {
        if compare(d, [0]) == 0 { return nil }
        var r = d
        var i = r.count - 1
        while i >= 0 { if r[i] == 0 { r[i] = 9; i -= 1 } else { r[i] -= 1; break } }
        return strip(r)
    }

    /// An optional fraction `(\.[0-9]+)?` after `from`.
    static func anyFraction(_ nfa: inout NFA, _ from: Int32, _ to: Int32, integerOnly: Bool) {
        nfa.epsilon(from, to)
        let dot = nfa.add(); nfa.range(from, 0x2E, 0x2E, dot)
        let d = nfa.add(); nfa.range(dot, 0x30, integerOnly ? 0x30 : 0x39, d); nfa.range(d, 0x30, integerOnly ? 0x30 : 0x39, d)
        nfa.epsilon(d, to)
    }

    /// Fractions `(\.[0-9]+)?` whose value 0.F compares to 0.bf as asked (`le`: ≤ or <; else ≥ or >).
    static func fraction(_ bf: [UInt8], le: Bool, strict: Bool, _ nfa: inout NFA, _ from: Int32, _ to: Int32) {
        let bfZero = bf.isEmpty
        // No fraction at all: value 0.
        if le { if !strict || !bfZero { nfa.epsilon(from, to) } }
        else { if !strict && bfZero { nfa.epsilon(from, to) } }
        let dot = nfa.add(); nfa.range(from, 0x2E, 0x2E, dot)
        // Decided (strictly less / greater): any further digits.
        let decided = nfa.add(); nfa.range(decided, 0x30, 0x39, decided); nfa.epsilon(decided, to)
        var eq = dot
        for i in 0..<bf.count {
            let d = bf[i]
            if le { if d > 0 { let m = nfa.add(); nfa.range(eq, 0x30, 0x30 + d - 1, m); nfa.epsilon(m, decided) } }
            else if d < 9 { let m = nfa.add(); nfa.range(eq, 0x30 + d + 1, 0x39, m); nfa.epsilon(m, decided) }
            let next = nfa.add(); nfa.range(eq, 0x30 + d, 0x30 + d, next)
            // A fraction that stops here, equal so far: less than bf if more nonzero digits follow.
            if i < bf.count - 1 { if le { nfa.epsilon(next, to) } }
            eq = next
        }
        // Past the last digit of bf: zeros keep equality, anything else is greater.
        let tail = nfa.add(); nfa.epsilon(eq, tail)
        nfa.range(tail, 0x30, 0x30, tail)
        if !le { let m = nfa.add(); nfa.range(tail, 0x31, 0x39, m); nfa.epsilon(m, decided) }
        if !strict && eq != dot { nfa.epsilon(tail, to) }
        if !strict && eq == dot {
            // bf == 0 and at least one digit: ".0…0" equals zero.
            let z = nfa.add(); nfa.range(dot, 0x30, 0x30, z); nfa.range(z, 0x30, 0x30, z); nfa.epsilon(z, to)
        }
    }

    /// Non-negative decimals (integer part and optional fraction) compared with |b|.
    static func magnitude(_ b: DecimalNumber, le: Bool, strict: Bool, _ nfa: inout NFA, _ from: Int32, _ to: Int32) {
        let bi = b.integerPartDigits, bf = b.fractionDigits
        if le {
            if let below = decrement(bi) {
                let m = nfa.add(); natural(lo: [0], hi: below, &nfa, from, m)
                anyFraction(&nfa, m, to, integerOnly: false)
            }
        } else {
            let m = nfa.add(); natural(lo: increment(bi), hi: nil, &nfa, from, m)
            anyFraction(&nfa, m, to, integerOnly: false)
        }
        let m = nfa.add(); natural(lo: bi, hi: bi, &nfa, from, m)
        fraction(bf, le: le, strict: strict, &nfa, m, to)
    }

    static func anyMagnitude(_ nfa: inout NFA, _ from: Int32, _ to: Int32) {
        let m = nfa.add(); natural(lo: [0], hi: nil, &nfa, from, m)
        anyFraction(&nfa, m, to, integerOnly: false)
    }

    /// Numbers x with x ≥ b (or > b).
    static func lowerBound(_ b: DecimalNumber, strict: Bool, budget: Int) throws(GrammarError) -> DFA {
        var nfa = NFA(); let s = nfa.add(); let e = nfa.add()
        if !b.negative && (!b.isZero || strict) {
            magnitude(b, le: false, strict: strict, &nfa, s, e)
        } else {
            anyMagnitude(&nfa, s, e)
            let m = nfa.add(); nfa.range(s, 0x2D, 0x2D, m)
            magnitude(b.magnitude, le: true, strict: strict, &nfa, m, e)
        }
        return try DFA.determinize(nfa, start: s, accepting: [e], budget: budget)
    }

    /// Numbers x with x ≤ b (or < b).
    static func upperBound(_ b: DecimalNumber, strict: Bool, budget: Int) throws(GrammarError) -> DFA {
        var nfa = NFA(); let s = nfa.add(); let e = nfa.add()
        if b.negative || (b.isZero && strict) {
            let m = nfa.add(); nfa.range(s, 0x2D, 0x2D, m)
            magnitude(b.magnitude, le: false, strict: strict, &nfa, m, e)
        } else {
            let m = nfa.add(); nfa.range(s, 0x2D, 0x2D, m)
            anyMagnitude(&nfa, m, e)
            magnitude(b, le: true, strict: strict, &nfa, s, e)
        }
        return try DFA.determinize(nfa, start: s, accepting: [e], budget: budget)
    }

    /// The JSON number grammar; `integer` allows only a zero fraction; `exponent` allows `e±n`;
    /// `maxFractionDigits` limits the fraction. `generated` bounds every part (see
    /// `GrammarOptions.generatedNumbers`): no fraction on integers, at most 16 integer digits,
    /// 1–15 fraction digits, a 1–2 digit exponent.
    static func form(integer: Bool, exponent: Bool, maxFractionDigits: Int? = nil, generated: Bool = false,
                     budget: Int) throws(GrammarError) -> DFA {
        var nfa = NFA(); let s = nfa.add(); let e = nfa.add()
        let signed = nfa.add(); nfa.epsilon(s, signed)
        nfa.range(s, 0x2D, 0x2D, signed)
        let ip = nfa.add()
        natural(lo: [0], hi: generated ? [UInt8](repeating: 9, count: 16) : nil, &nfa, signed, ip)
        let afterFrac = nfa.add()
        nfa.epsilon(ip, afterFrac)
        let dot = nfa.add()
        if !(generated && integer) { nfa.range(ip, 0x2E, 0x2E, dot) }
        if generated {
            var st = dot
            for _ in 0..<15 { let t = nfa.add(); nfa.range(st, 0x30, 0x39, t); nfa.epsilon(t, afterFrac); st = t }
        } else if let k = maxFractionDigits, !integer {
            var st = dot
            for _ in 0..<max(k, 1) { let t = nfa.add(); nfa.range(st, 0x30, 0x39, t); nfa.epsilon(t, afterFrac); st = t }
            // Trailing zeros beyond k digits keep the value.
            let z = nfa.add(); nfa.range(st, 0x30, 0x30, z); nfa.range(z, 0x30, 0x30, z); nfa.epsilon(z, afterFrac)
        } else {
            let d = nfa.add()
            nfa.range(dot, 0x30, integer ? 0x30 : 0x39, d); nfa.range(d, 0x30, integer ? 0x30 : 0x39, d)
            nfa.epsilon(d, afterFrac)
        }
        nfa.epsilon(afterFrac, e)
        if exponent && !integer {
            let ex = nfa.add(); nfa.range(afterFrac, 0x45, 0x45, ex); nfa.range(afterFrac, 0x65, 0x65, ex)
            let sg = nfa.add(); nfa.epsilon(ex, sg); nfa.range(ex, 0x2B, 0x2B, sg); nfa.range(ex, 0x2D, 0x2D, sg)
            let dg = nfa.add(); nfa.range(sg, 0x30, 0x39, dg)
            if generated {
                let dg2 = nfa.add(); nfa.range(dg, 0x30, 0x39, dg2); nfa.epsilon(dg2, e)
            } else {
                nfa.range(dg, 0x30, 0x39, dg)
            }
            nfa.epsilon(dg, e)
        }
        return try DFA.determinize(nfa, start: s, accepting: [e], budget: budget)
    }

    /// Numbers that are multiples of a × 10^-k (digits are read exactly; only plain decimal form).
    static func multipleOf(a: Int, fractionDigits k: Int, budget: Int) throws(GrammarError) -> DFA {
        guard a > 0, a * (k + 3) <= budget, k <= 400 else { throw .budgetExceeded("multipleOf needs too many states") }
        var dfa = DFA()
        let start = dfa.add(), sign = dfa.add()
        func pow10mod(_ e: Int) -> Int { var r = 1 % a; for _ in 0..<e { r = r * 10 % a }; return r }
        let R = (0..<a).map { r in dfa.add(accepting: (r * pow10mod(k)) % a == 0) }
        var F: [[Int32]] = []
        for r in 0..<a {
            F.append((0...k).map { j in dfa.add(accepting: j >= 1 && (r * pow10mod(k - j)) % a == 0) })
        }
        let Z = (0..<a).map { r in dfa.add(accepting: r == 0) }
        func digits(_ r: Int, _ target: (Int) -> Int32) -> [ByteEdge] {
            (0..<10).map { d in ByteEdge(lo: 0x30 + UInt8(d), hi: 0x30 + UInt8(d), to: target((r * 10 + d) % a)) }
        }
        dfa.trans[Int(start)] = [ByteEdge(lo: 0x2D, hi: 0x2D, to: sign)] + digits(0) { R[$0] }
        dfa.trans[Int(sign)] = digits(0) { R[$0] }
        for r in 0..<a {
            dfa.trans[Int(R[r])] = [ByteEdge(lo: 0x2E, hi: 0x2E, to: F[r][0])] + digits(r) { R[$0] }
            for j in 0..<k { dfa.trans[Int(F[r][j])] = digits(r) { F[$0][j + 1] } }
            dfa.trans[Int(F[r][k])] = [ByteEdge(lo: 0x30, hi: 0x30, to: Z[r])]
            dfa.trans[Int(Z[r])] = [ByteEdge(lo: 0x30, hi: 0x30, to: Z[r])]
        }
        return dfa
    }
}
