/// A small, fast, seedable generator (xoshiro256**), so that the same seed gives the same text
/// on every machine.
public struct RandomSource: RandomNumberGenerator, Sendable {
    private var s: (UInt64, UInt64, UInt64, UInt64)

    public init(seed: UInt64) {
        // SplitMix64 spreads any seed (even 0) over the four words of state.
        var z = seed
        func next() -> UInt64 {
            z &+= Self.golden
            return Self.scramble(z)
        }
        s = (next(), next(), next(), next())
    }

    private static let golden: UInt64 = 0x9E37_79B9_7F4A_7C15

    /// SplitMix64's output function: each input bit changes about half the output bits.
    private static func scramble(_ x: UInt64) -> UInt64 {
        var r = x
        r = (r ^ (r >> 30)) &* 0xBF58_476D_1CE4_E5B9
        r = (r ^ (r >> 27)) &* 0x94D0_49BB_1331_11EB
        return r ^ (r >> 31)
    }

    /// A seed for stream `stream` of `seed` (the choices of one request): unlike `seed + stream`,
    /// the streams of neighbouring seeds don't coincide.
    public static func mix(_ seed: UInt64, _ stream: UInt64) -> UInt64 {
        scramble(seed ^ scramble(stream &* golden))
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
