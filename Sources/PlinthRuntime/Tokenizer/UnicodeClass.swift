/// The character classes that the pre-tokenizer scanners test: the Unicode general category of a
/// code point, collapsed to the groups that tokenizer regexes use (`\p{L}`, `\p{N}`, `\p{M}`,
/// `\p{P}`, `\p{S}`, `\p{Z}`, `\p{C}`), plus `\s`.
///
/// The classification matches the one llama.cpp uses, which is what makes token ids identical:
/// - categories come from the Unicode Character Database, but code points first assigned in
///   Unicode 16.0 or later count as unassigned, because llama.cpp's tables stop at Unicode 15.1
///   (checked code point by code point against its tables: this is the only difference);
/// - `\s` is exactly the 25 code points of Unicode's `White_Space` property (no U+001C–U+001F,
///   which Python's `str.isspace` would add).
///
/// A class is one byte: the low four bits hold the category (``none`` means "outside the text",
/// which the scanners use for look-ahead past a boundary), bit 4 is set for whitespace.
enum UnicodeClass {
    static let none: UInt8 = 0
    static let undefined: UInt8 = 1
    static let number: UInt8 = 2
    static let letter: UInt8 = 3
    static let separator: UInt8 = 4
    static let mark: UInt8 = 5
    static let punctuation: UInt8 = 6
    static let symbol: UInt8 = 7
    static let control: UInt8 = 8
    static let whitespaceBit: UInt8 = 0x10

    @inline(__always) static func category(_ c: UInt8) -> UInt8 { c & 0x0F }
    @inline(__always) static func isLetter(_ c: UInt8) -> Bool { c & 0x0F == letter }
    @inline(__always) static func isNumber(_ c: UInt8) -> Bool { c & 0x0F == number }
    @inline(__always) static func isMark(_ c: UInt8) -> Bool { c & 0x0F == mark }
    @inline(__always) static func isWhitespace(_ c: UInt8) -> Bool { c & whitespaceBit != 0 }

    /// The class of a code point (one table load).
    @inline(__always) static func of(_ cp: UInt32) -> UInt8 {
        cp < 0x110000 ? table[Int(cp)] : undefined
    }

    /// Whether a code point is in Unicode's `White_Space` set (what llama.cpp's `\s` matches).
    static func isWhitespaceScalar(_ cp: UInt32) -> Bool {
        switch cp {
        case 0x09...0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
            return true
        default:
            return false
        }
    }

    /// One byte per code point, built once on first use (about 1.1 MB).
    static let table: [UInt8] = {
        var t = [UInt8](repeating: undefined, count: 0x110000)
        t.withUnsafeMutableBufferPointer { buf in
            func fill(_ range: Range<UInt32>) {
                for cp in range {
                    buf[Int(cp)] = classify(cp)
                }
            }
            fill(0..<0x40000)
            // Planes 4–13 hold no assigned characters up to Unicode 15.1; leave them undefined.
            fill(0xE0000..<0x110000)
        }
        return t
    }()

    private static func classify(_ cp: UInt32) -> UInt8 {
        guard let scalar = Unicode.Scalar(cp) else { return control } // surrogates are Cs
        let props = scalar.properties
        guard let age = props.age, age.major < 16 else {
            return isWhitespaceScalar(cp) ? undefined | whitespaceBit : undefined
        }
        let cat: UInt8
        switch props.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter:
            cat = letter
        case .nonspacingMark, .spacingMark, .enclosingMark:
            cat = mark
        case .decimalNumber, .letterNumber, .otherNumber:
            cat = number
        case .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation,
             .initialPunctuation, .finalPunctuation, .otherPunctuation:
            cat = punctuation
        case .mathSymbol, .currencySymbol, .modifierSymbol, .otherSymbol:
            cat = symbol
        case .spaceSeparator, .lineSeparator, .paragraphSeparator:
            cat = separator
        case .control, .format, .surrogate, .privateUse:
            cat = control
        case .unassigned:
            cat = undefined
        @unknown default:
            cat = undefined
        }
        return isWhitespaceScalar(cp) ? cat | whitespaceBit : cat
    }

    /// ASCII-only lower-casing: the contraction rules compare against `s t m d r e v l`, and no
    /// code point outside A–Z lower-cases to one of those.
    @inline(__always) static func asciiLower(_ cp: UInt32) -> UInt32 {
        (cp >= 0x41 && cp <= 0x5A) ? cp + 0x20 : cp
    }
}
