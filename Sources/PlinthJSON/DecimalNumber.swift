/// An exact decimal: sign, digits and a power-of-ten exponent, read from JSON number text. JSON
/// Schema's bounds and `multipleOf` are compared with it, never through binary floating point.
public struct DecimalNumber: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Significant digits without leading or trailing zeros (empty for zero).
    public var digits: [UInt8]
    /// value = digits × 10^exponent
    public var exponent: Int
    public var negative: Bool

    public init?(_ text: String) {
        var bytes = Array(text.utf8)[...]
        negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes = bytes.dropFirst() }
        var mantissa: [UInt8] = []
        var exp = 0
        var seenDot = false
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let c = bytes[i]
            if c >= 0x30 && c <= 0x39 { mantissa.append(c - 0x30); if seenDot { exp -= 1 } }
            else if c == UInt8(ascii: ".") { if seenDot { return nil }; seenDot = true }
            else if c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                guard let e = Int(String(decoding: bytes[(i + 1)...], as: UTF8.self)), abs(e) < 100_000 else { return nil }
                exp += e
                break
            } else { return nil }
            i += 1
        }
        if mantissa.isEmpty { return nil }
        while let f = mantissa.first, f == 0 { mantissa.removeFirst() }
        while let l = mantissa.last, l == 0 { mantissa.removeLast(); exp += 1 }
        if mantissa.isEmpty { exp = 0; negative = false }
        digits = mantissa
        exponent = exp
    }

    public init(integer: Int) { self.init(String(integer))! }

    public var isZero: Bool { digits.isEmpty }
    public var isInteger: Bool { isZero || exponent >= 0 }
    /// The value as an `Int`, nil past its range (Int.min and Int.max included).
    public var intValue: Int? {
        guard isInteger, digits.count + exponent <= 19 else { return nil }
        // Accumulated towards the sign, so that Int.min's magnitude needs no room above Int.max.
        var v = 0
        for i in 0..<(digits.count + max(exponent, 0)) {
            let d = i < digits.count ? Int(digits[i]) : 0
            let (shifted, o1) = v.multipliedReportingOverflow(by: 10)
            let (next, o2) = negative ? shifted.subtractingReportingOverflow(d) : shifted.addingReportingOverflow(d)
            if o1 || o2 { return nil }
            v = next
        }
        return v
    }
    /// Digits of the integer part of |value| ([0] for values below one).
    public var integerPartDigits: [UInt8] {
        let n = digits.count + exponent
        if n <= 0 { return [0] }
        var r = Array(digits.prefix(n))
        while r.count < n { r.append(0) }
        return r
    }
    /// Digits of the fractional part of |value| (no trailing zeros; empty when whole).
    public var fractionDigits: [UInt8] {
        if exponent >= 0 { return [] }
        let fracLen = -exponent
        if digits.count >= fracLen { return Array(digits.suffix(fracLen)) }
        return Array(repeating: 0, count: fracLen - digits.count) + digits
    }
    public var magnitude: DecimalNumber { var m = self; m.negative = false; return m }
    public var description: String {
        let ip = integerPartDigits.map { String($0) }.joined()
        let fp = fractionDigits.map { String($0) }.joined()
        return (negative ? "-" : "") + ip + (fp.isEmpty ? "" : "." + fp)
    }
    public static func < (a: DecimalNumber, b: DecimalNumber) -> Bool {
        if a.negative != b.negative { return a.negative }
        return a.negative ? DecimalNumber.magnitudeLess(b, a) : DecimalNumber.magnitudeLess(a, b)
    }
    public static func magnitudeLess(_ a: DecimalNumber, _ b: DecimalNumber) -> Bool {
        if a.isZero { return !b.isZero }
        if b.isZero { return false }
        let ma = a.digits.count + a.exponent, mb = b.digits.count + b.exponent
        if ma != mb { return ma < mb }
        let n = max(a.digits.count, b.digits.count)
        for i in 0..<n {
            let x = i < a.digits.count ? a.digits[i] : 0, y = i < b.digits.count ? b.digits[i] : 0
            if x != y { return x < y }
        }
        return false
    }
}
