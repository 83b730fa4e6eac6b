import Testing
import PlinthJSON

@Suite struct StrictUTF8Tests {
    @Test func wellFormedTextIsKept() {
        for text in ["", "plain", "Ġthe", "naïve café", "日本語", "𝄞 and 😀", "\u{0}x"] {
            #expect(String(strictUTF8: Array(text.utf8)) == text)
        }
    }

    /// Each ill-formed kind, including a truncated four-byte sequence that repair turns into one
    /// replacement character of the same length.
    @Test func illFormedBytesAreRefused() {
        let bad: [[UInt8]] = [[0x80], [0x61, 0xFF], [0xC0, 0xAF], [0xE0, 0x80, 0x80],
                              [0xED, 0xA0, 0x80], [0xF0, 0x90, 0x80], [0xF4, 0x90, 0x80, 0x80],
                              [0xE2, 0x82], [0x61, 0xC3]]
        for bytes in bad {
            #expect(String(strictUTF8: bytes) == nil, "\(bytes)")
        }
    }

    /// Agrees with the standard library's validator on every string of one or two bytes, and on
    /// every string of three or four bytes drawn from UTF-8's boundary bytes.
    @Test func agreesWithTheStandardValidator() {
        var cases: [[UInt8]] = (0...255).map { [UInt8($0)] }
        for a in 0...255 { for b in 0...255 { cases.append([UInt8(a), UInt8(b)]) } }
        let edges: [UInt8] = [0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF,
                              0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF]
        for a in edges { for b in edges { for c in edges {
            cases.append([a, b, c])
            for d in edges { cases.append([a, b, c, d]) }
        } } }
        var refused = 0
        for bytes in cases {
            let expected = String(validating: bytes, as: UTF8.self)
            if String(strictUTF8: bytes) != expected { Issue.record("\(bytes): expected \(String(describing: expected))") }
            if expected == nil { refused += 1 }
        }
        #expect(refused > cases.count / 2)
    }
}
