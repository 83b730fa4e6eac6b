/// Cuts the text between special tokens into words before byte-level BPE, the way llama.cpp does
/// for each `tokenizer.ggml.pre` value.
///
/// The Hugging Face pre-tokenizer regexes are implemented as hand-written scanners over code
/// points (no regex engine): each follows the alternation order of its regex, including
/// llama.cpp's reading of look-ahead at a piece boundary (a boundary counts as "not `\S`").
struct PreTokenizer: Sendable {
    /// The regex family a pre-tokenizer uses.
    enum Scanner: Sendable {
        /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
        case gpt2
        /// `(?i:'s|…|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
        case llama3
        /// As ``llama3`` but `\p{N}` one digit at a time.
        case qwen2
        /// As ``qwen2`` but letter runs also take combining marks (`[\p{L}\p{M}]+`).
        case qwen35
    }

    /// The `tokenizer.ggml.pre` value.
    let name: String
    let scanner: Scanner
    /// A first pass that makes every `\p{N}` code point a piece of its own (the StarCoder family).
    let isolateDigits: Bool
    /// Whether detokenizing removes the space before `? ! . ,` and some contractions.
    let cleanSpaces: Bool
    /// Whether a word that is itself a vocabulary entry becomes that token without merging.
    let ignoreMerges: Bool
    /// The default for `tokenizer.ggml.add_bos_token` when the file does not say.
    let defaultAddBOS: Bool

    /// SentencePiece's settings. It has no pre-tokenizer (llama.cpp ignores `tokenizer.ggml.pre`
    /// for it), keeps spaces as they are when detokenizing, and adds BOS by default.
    static let sentencePiece = PreTokenizer(name: "", scanner: .gpt2, isolateDigits: false, cleanSpaces: false,
                                            ignoreMerges: false, defaultAddBOS: true)

    private init(name: String, scanner: Scanner, isolateDigits: Bool, cleanSpaces: Bool, ignoreMerges: Bool,
                 defaultAddBOS: Bool) {
        self.name = name
        self.scanner = scanner
        self.isolateDigits = isolateDigits
        self.cleanSpaces = cleanSpaces
        self.ignoreMerges = ignoreMerges
        self.defaultAddBOS = defaultAddBOS
    }

    init(name: String) throws(TokenizerError) {
        var scanner = Scanner.gpt2
        var digits = false
        var clean = true
        var ignoreMerges = false
        var addBOS = false
        switch name {
        case "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
             "a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais", "exaone4":
            scanner = .gpt2
        case "trillion", "granite-docling":
            scanner = .gpt2
            clean = false
        case "starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2":
            scanner = .gpt2
            digits = true
        case "smollm", "command-r":
            scanner = .gpt2
            digits = true
            clean = false
        case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
             "lfm2", "jina-v5-nano":
            scanner = .llama3
            ignoreMerges = true
            addBOS = true
        case "dbrx", "smaug-bpe":
            scanner = .llama3
        case "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2":
            scanner = .qwen2
            clean = false
        case "stablelm2", "megrez":
            scanner = .qwen2
        case "qwen35":
            scanner = .qwen35
            clean = false
        default:
            throw .unsupportedPreTokenizer(name)
        }
        self.init(name: name, scanner: scanner, isolateDigits: digits, cleanSpaces: clean, ignoreMerges: ignoreMerges,
                  defaultAddBOS: addBOS)
    }

    /// Splits `cps[0..<count]` into words, appending the end index (in code points) of each word.
    /// The words cover the text without gaps.
    func split(_ cps: UnsafePointer<UInt32>, _ classes: UnsafePointer<UInt8>, count: Int,
               into ends: inout [Int32]) {
        if isolateDigits {
            var segmentStart = 0
            for i in 0..<count where UnicodeClass.isNumber(classes[i]) {
                scan(cps, classes, segmentStart, i, &ends)
                ends.append(Int32(i + 1))
                segmentStart = i + 1
            }
            scan(cps, classes, segmentStart, count, &ends)
        } else {
            scan(cps, classes, 0, count, &ends)
        }
    }

    @inline(__always)
    private func scan(_ cps: UnsafePointer<UInt32>, _ classes: UnsafePointer<UInt8>,
                      _ lo: Int, _ hi: Int, _ ends: inout [Int32]) {
        guard lo < hi else { return }
        var s = Segment(cps: cps, classes: classes, lo: lo, hi: hi)
        switch scanner {
        case .gpt2: s.gpt2(&ends)
        case .llama3: s.llama3Family(&ends, maxDigits: 3, marks: false)
        case .qwen2: s.llama3Family(&ends, maxDigits: 1, marks: false)
        case .qwen35: s.llama3Family(&ends, maxDigits: 1, marks: true)
        }
    }
}

/// One piece of text under scan: reads outside `lo..<hi` see class ``UnicodeClass/none``, the way
/// a regex sees the end of its input.
private struct Segment {
    let cps: UnsafePointer<UInt32>
    let classes: UnsafePointer<UInt8>
    let lo: Int
    let hi: Int

    static let outside: UInt32 = 0xFFFF_FFFF

    @inline(__always) func cls(_ p: Int) -> UInt8 { p < hi ? classes[p] : UnicodeClass.none }
    @inline(__always) func cp(_ p: Int) -> UInt32 { p < hi ? cps[p] : Segment.outside }

    @inline(__always) static func isOther(_ c: UInt8) -> Bool {
        // [^\s\p{L}\p{N}] and inside the text
        c != UnicodeClass.none && !UnicodeClass.isWhitespace(c)
            && !UnicodeClass.isLetter(c) && !UnicodeClass.isNumber(c)
    }

    /// Length of a contraction (`'s 't 'm 'd 're 've 'll`) at `pos`, or 0.
    @inline(__always) func contraction(at pos: Int, caseInsensitive: Bool) -> Int {
        guard cps[pos] == 0x27, pos + 1 < hi else { return 0 }
        var n = cps[pos + 1]
        if caseInsensitive { n = UnicodeClass.asciiLower(n) }
        if n == 0x73 || n == 0x74 || n == 0x6D || n == 0x64 { return 2 } // s t m d
        guard pos + 2 < hi else { return 0 }
        var nn = cps[pos + 2]
        if caseInsensitive { nn = UnicodeClass.asciiLower(nn) }
        if (n == 0x72 && nn == 0x65) || (n == 0x76 && nn == 0x65) || (n == 0x6C && nn == 0x6C) { return 3 } // re ve ll
        return 0
    }

    /// Number of whitespace code points starting at `pos`.
    @inline(__always) func whitespaceRun(from pos: Int) -> Int {
        var n = 0
        while UnicodeClass.isWhitespace(cls(pos + n)) { n += 1 }
        return n
    }

    mutating func gpt2(_ ends: inout [Int32]) {
        var pos = lo
        while pos < hi {
            let c = cps[pos]
            let k = contraction(at: pos, caseInsensitive: false)
            if k > 0 {
                pos += k
                ends.append(Int32(pos))
                continue
            }
            let isSpace = c == 0x20
            let f2 = isSpace ? cls(pos + 1) : classes[pos]
            // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
            if UnicodeClass.isLetter(f2) {
                if isSpace { pos += 1 }
                while UnicodeClass.isLetter(cls(pos)) { pos += 1 }
                ends.append(Int32(pos))
                continue
            }
            if UnicodeClass.isNumber(f2) {
                if isSpace { pos += 1 }
                while UnicodeClass.isNumber(cls(pos)) { pos += 1 }
                ends.append(Int32(pos))
                continue
            }
            if Segment.isOther(f2) {
                if isSpace { pos += 1 }
                while Segment.isOther(cls(pos)) { pos += 1 }
                ends.append(Int32(pos))
                continue
            }
            let ws = whitespaceRun(from: pos)
            if ws > 1 && pos + ws < hi {
                // `\s+(?!\S)`: leave the last space for the next word
                pos += ws - 1
            } else if ws > 0 {
                pos += ws
            } else {
                pos += 1
            }
            ends.append(Int32(pos))
        }
    }

    mutating func llama3Family(_ ends: inout [Int32], maxDigits: Int, marks: Bool) {
        @inline(__always) func isWordChar(_ c: UInt8) -> Bool {
            UnicodeClass.isLetter(c) || (marks && UnicodeClass.isMark(c))
        }
        @inline(__always) func isOtherChar(_ c: UInt8) -> Bool {
            Segment.isOther(c) && !(marks && UnicodeClass.isMark(c))
        }
        var pos = lo
        while pos < hi {
            let c = cps[pos]
            let f = classes[pos]
            let k = contraction(at: pos, caseInsensitive: true)
            if k > 0 {
                pos += k
                ends.append(Int32(pos))
                continue
            }
            // `[^\r\n\p{L}\p{N}]?\p{L}+`
            if !(c == 0x0D || c == 0x0A || UnicodeClass.isNumber(f)) {
                if isWordChar(f) || isWordChar(cls(pos + 1)) {
                    pos += 1
                    while isWordChar(cls(pos)) { pos += 1 }
                    ends.append(Int32(pos))
                    continue
                }
            }
            // `\p{N}{1,maxDigits}`
            if UnicodeClass.isNumber(f) {
                var start = pos
                while UnicodeClass.isNumber(cls(pos)) {
                    pos += 1
                    if pos - start >= maxDigits {
                        ends.append(Int32(pos))
                        start = pos
                    }
                }
                if pos > start { ends.append(Int32(pos)) }
                continue
            }
            // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (the guard tests the class at `pos`, as llama.cpp does)
            let isSpace = c == 0x20
            let f2 = isSpace ? cls(pos + 1) : f
            if !UnicodeClass.isWhitespace(f2) && !isWordChar(f2) && !UnicodeClass.isNumber(f2)
                && !(marks && UnicodeClass.isMark(f2)) {
                if isSpace { pos += 1 }
                while isOtherChar(cls(pos)) { pos += 1 }
                while true {
                    let c2 = cp(pos)
                    guard c2 == 0x0D || c2 == 0x0A else { break }
                    pos += 1
                }
                ends.append(Int32(pos))
                continue
            }
            // `\s*[\r\n]+`, `\s+(?!\S)`, `\s+`
            var ws = 0
            var lastNewlineEnd = -1
            while UnicodeClass.isWhitespace(cls(pos + ws)) {
                let c2 = cps[pos + ws]
                if c2 == 0x0D || c2 == 0x0A { lastNewlineEnd = pos + ws + 1 }
                ws += 1
            }
            if lastNewlineEnd >= 0 {
                pos = lastNewlineEnd
            } else if ws > 1 && pos + ws < hi {
                pos += ws - 1
            } else if ws > 0 {
                pos += ws
            } else {
                pos += 1
            }
            ends.append(Int32(pos))
        }
    }
}
