/// A small, fast, seedable generator (xoshiro256**), so that the same seed gives the same text
/// on every machine.
public struct RandomSource: RandomNumberGenerator, Sendable {
    private var s: (UInt64, UInt64, UInt64, UInt64)

    public init(seed: UInt64) {
        // SplitMix64 spreads any seed (even 0) over the four words of state.
        var z = seed
        func next() -> UInt64 {
            z &+= 0x9E37_79B9_7F4A_7C15
            var r = z
            r = (r ^ (r >> 30)) &* 0xBF58_476D_1CE4_E5B9
            r = (r ^ (r >> 27)) &* 0x94D0_49BB_1331_11EB
            return r ^ (r >> 31)
        }
        s = (next(), next(), next(), next())
    }

    public mutating func next() -> UInt64 {
        let result = rotl(s.1 &* 5, 7) &* 9
        let t = s.1 << 17
        s.2 ^= s.0
        s.3 ^= s.1
        s.1 ^= s.2
        s.0 ^= s.3
        s.2 ^= t
        s.3 = rotl(s.3, 45)
        return result
    }

    /// A uniform float in [0, 1).
    public mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    private func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }
}
