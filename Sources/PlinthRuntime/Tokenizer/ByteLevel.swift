/// The GPT-2 byte-level alphabet: a bijection between the 256 byte values and 256 printable
/// Unicode scalars, so that byte-level BPE vocabularies can store any byte sequence as text.
///
/// Bytes that are already printable and not a space (`!`…`~`, `¡`…`¬`, `®`…`ÿ`) stand for
/// themselves; the other 68 bytes, in increasing order, take the scalars U+0100, U+0101, …
/// (so the space 0x20 is `Ġ` U+0120 and the newline 0x0A is `Ċ` U+010A).
enum ByteLevel {
    /// The scalar that stands for each byte.
    static let scalarForByte: [UInt32] = {
        var map = [UInt32](repeating: 0, count: 256)
        var next: UInt32 = 256
        for b in 0..<256 {
            if isSelfMapped(UInt8(b)) {
                map[b] = UInt32(b)
            } else {
                map[b] = next
                next += 1
            }
        }
        return map
    }()

    /// The byte each alphabet scalar stands for, indexed by scalar (`-1` outside the alphabet).
    static let byteForScalar: [Int16] = {
        var inverse = [Int16](repeating: -1, count: 0x144)
        for (b, s) in scalarForByte.enumerated() { inverse[Int(s)] = Int16(b) }
        return inverse
    }()

    /// The UTF-8 encoding of the scalar that stands for each byte (one or two bytes).
    static let utf8ForByte: [[UInt8]] = scalarForByte.map { Array(String(Unicode.Scalar($0)!).utf8) }

    @inline(__always) static func isSelfMapped(_ b: UInt8) -> Bool {
        (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE
    }

    /// The byte-level text of a byte sequence (what a vocabulary entry for those bytes looks like).
    static func encode<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        var out: [UInt8] = []
        for b in bytes { out.append(contentsOf: utf8ForByte[Int(b)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes that a byte-level text stands for, or `nil` if a scalar is outside the alphabet.
    static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for s in text.unicodeScalars {
            let v = s.value
            guard v < 0x144, byteForScalar[Int(v)] >= 0 else { return nil }
            out.append(UInt8(byteForScalar[Int(v)]))
        }
        return out
    }
}
