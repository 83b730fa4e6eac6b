/// UTF-8 well-formedness checks on raw bytes (Unicode table 3-7: no overlongs, no surrogates,
/// nothing past U+10FFFF).
enum UTF8Scan {
    /// Length of the well-formed sequence starting at `i`, or 0 if the bytes there are ill-formed
    /// or cut short.
    @inline(__always)
    static func sequenceLength(_ p: UnsafeBufferPointer<UInt8>, at i: Int) -> Int {
        let n = p.count
        let b0 = p[i]
        if b0 < 0x80 { return 1 }
        @inline(__always) func cont(_ k: Int, _ lo: UInt8 = 0x80, _ hi: UInt8 = 0xBF) -> Bool {
            i + k < n && p[i + k] >= lo && p[i + k] <= hi
        }
        switch b0 {
        case 0xC2...0xDF:
            return cont(1) ? 2 : 0
        case 0xE0:
            return cont(1, 0xA0) && cont(2) ? 3 : 0
        case 0xE1...0xEC, 0xEE, 0xEF:
            return cont(1) && cont(2) ? 3 : 0
        case 0xED:
            return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0
        case 0xF0:
            return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0
        case 0xF1...0xF3:
            return cont(1) && cont(2) && cont(3) ? 4 : 0
        case 0xF4:
            return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0
        default:
            return 0
        }
    }

    /// The offset of the first ill-formed sequence, or nil if all of `p` is valid UTF-8.
    static func firstInvalidOffset(_ p: UnsafeBufferPointer<UInt8>) -> Int? {
        var i = 0
        let n = p.count
        while i < n {
            if p[i] < 0x80 { i += 1; continue }
            let len = sequenceLength(p, at: i)
            if len == 0 { return i }
            i += len
        }
        return nil
    }

    /// How many bytes at the end of `p` form the start of a well-formed sequence that more bytes
    /// could complete (0…3). Those bytes are held back by a streaming decoder.
    static func incompleteSuffixLength(_ p: UnsafeBufferPointer<UInt8>) -> Int {
        let n = p.count
        var k = 1
        while k <= 3 && k <= n {
            let i = n - k
            let b = p[i]
            if b >= 0x80 && b < 0xC0 { k += 1; continue } // a continuation byte: look further back
            if b < 0x80 { return 0 }
            let need: Int
            switch b {
            case 0xC2...0xDF: need = 2
            case 0xE0...0xEF: need = 3
            case 0xF0...0xF4: need = 4
            default: return 0
            }
            guard need > k else { return 0 } // complete (or too many continuations)
            // the bytes present must be a valid prefix
            for j in 1..<k {
                let c = p[i + j]
                var lo: UInt8 = 0x80, hi: UInt8 = 0xBF
                if j == 1 {
                    switch b {
                    case 0xE0: lo = 0xA0
                    case 0xED: hi = 0x9F
                    case 0xF0: lo = 0x90
                    case 0xF4: hi = 0x8F
                    default: break
                    }
                }
                if c < lo || c > hi { return 0 }
            }
            return k
        }
        return 0
    }
}
