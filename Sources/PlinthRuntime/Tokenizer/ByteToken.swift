/// The `<0xAB>` spelling of a raw-byte token (SentencePiece's byte fallback), written and read
/// in one place: the tokenizer finds each byte's token by it, and decoding reads the byte back.
enum ByteToken {
    private static let digits = Array("0123456789ABCDEF".utf8)

    /// The six bytes of byte `b`'s token text, in upper-case hex as SentencePiece writes it.
    static func spelling(_ b: UInt8) -> [UInt8] {
        [UInt8(ascii: "<"), UInt8(ascii: "0"), UInt8(ascii: "x"), digits[Int(b >> 4)], digits[Int(b & 15)], UInt8(ascii: ">")]
    }

    /// The byte a byte token's text stands for: its two hex digits (either case) after `<0x`,
    /// read as far as they are digits (0 when there are none), as llama.cpp reads them.
    static func value(_ text: String) -> UInt8 {
        let u = Array(text.utf8)
        guard u.count >= 5 else { return 0 }
        var v: UInt32 = 0
        for c in u[3..<5] {
            guard let d = hexDigit(c) else { break }
            v = v * 16 + d
        }
        return UInt8(truncatingIfNeeded: v)
    }

    static func hexDigit(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(c - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }
}
