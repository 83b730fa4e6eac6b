/// A set of Unicode scalar values as sorted, disjoint, closed ranges.
struct CharSet: Hashable, Sendable {
    var ranges: [ClosedRange<UInt32>]

    static let maxScalar: UInt32 = 0x10FFFF
    static let all = CharSet(ranges: [0...0xD7FF, 0xE000...0x10FFFF])
    static let empty = CharSet(ranges: [])

    init(ranges: [ClosedRange<UInt32>]) { self.ranges = CharSet.normalize(ranges) }
    init(_ scalar: UInt32) { ranges = [scalar...scalar] }

    static func normalize(_ input: [ClosedRange<UInt32>]) -> [ClosedRange<UInt32>] {
        let sorted = input.sorted { $0.lowerBound < $1.lowerBound }
        var out: [ClosedRange<UInt32>] = []
        for r in sorted {
            if let last = out.last, r.lowerBound <= last.upperBound &+ 1 {
                out[out.count - 1] = last.lowerBound...max(last.upperBound, r.upperBound)
            } else {
                out.append(r)
            }
        }
        // Remove surrogates: they are not scalars.
        var cleaned: [ClosedRange<UInt32>] = []
        for r in out {
            if r.upperBound < 0xD800 || r.lowerBound > 0xDFFF { cleaned.append(r); continue }
            if r.lowerBound < 0xD800 { cleaned.append(r.lowerBound...0xD7FF) }
            if r.upperBound > 0xDFFF { cleaned.append(0xE000...r.upperBound) }
        }
        return cleaned
    }

    func union(_ o: CharSet) -> CharSet { CharSet(ranges: ranges + o.ranges) }
    var inverted: CharSet {
        var out: [ClosedRange<UInt32>] = []
        var lo: UInt32 = 0
        for r in ranges {
            if r.lowerBound > lo { out.append(lo...(r.lowerBound - 1)) }
            lo = r.upperBound + 1
        }
        if lo <= CharSet.maxScalar { out.append(lo...CharSet.maxScalar) }
        return CharSet(ranges: out)
    }
    func intersection(_ o: CharSet) -> CharSet { inverted.union(o.inverted).inverted }
    func contains(_ c: UInt32) -> Bool { ranges.contains { $0.contains(c) } }
    var isEmpty: Bool { ranges.isEmpty }

    static let digits = CharSet(ranges: [0x30...0x39])
    static let word = CharSet(ranges: [0x30...0x39, 0x41...0x5A, 0x5F...0x5F, 0x61...0x7A])
    /// What `\s` matches in ECMA-262 (JSON Schema's dialect) and in Python's `re` alike, and in
    /// either (Python adds U+001C–U+001F and U+0085, ECMA U+FEFF). A generated string must
    /// match its pattern under both kinds of validator: `\s` is the first set, `\S` and a
    /// negated class's `\s` leave out the second.
    static let spaceInBoth = CharSet(ranges: [0x09...0x0D, 0x20...0x20, 0xA0...0xA0, 0x1680...0x1680,
                                              0x2000...0x200A, 0x2028...0x2029, 0x202F...0x202F, 0x205F...0x205F,
                                              0x3000...0x3000])
    static let spaceInEither = spaceInBoth.union(CharSet(ranges: [0x1C...0x1F, 0x85...0x85, 0xFEFF...0xFEFF]))
    static let lineTerminators = CharSet(ranges: [0x0A...0x0A, 0x0D...0x0D, 0x2028...0x2029])
}

/// A parsed regular expression.
indirect enum RegexNode: Sendable {
    case chars(CharSet)
    case concat([RegexNode])
    case alt([RegexNode])
    case repetition(RegexNode, min: Int, max: Int?)
    case startAnchor
    case endAnchor
    static let empty = RegexNode.concat([])
}

/// Reads the ECMAScript-style regular expressions of JSON Schema `pattern` (the common
/// subset: classes, escapes, groups, alternation, greedy and lazy quantifiers, anchors).
/// Lookaround, backreferences, word boundaries and Unicode property escapes are rejected.
struct RegexParser {
    let pattern: String
    let chars: [UInt32]
    var pos = 0

    init(_ pattern: String) {
        self.pattern = pattern
        chars = pattern.unicodeScalars.map(\.value)
    }

    func fail(_ reason: String) -> GrammarError { .invalidRegex(pattern: pattern, reason: reason) }

    static func parse(_ pattern: String) throws(GrammarError) -> RegexNode {
        var p = RegexParser(pattern)
        let node = try p.parseAlt()
        if p.pos < p.chars.count { throw p.fail("unexpected ')' at \(p.pos)") }
        return node
    }

    var atEnd: Bool { pos >= chars.count }
    var peek: UInt32 { chars[pos] }

    mutating func parseAlt() throws(GrammarError) -> RegexNode {
        var branches: [RegexNode] = [try parseConcat()]
        while !atEnd && peek == 0x7C { pos += 1; branches.append(try parseConcat()) }
        return branches.count == 1 ? branches[0] : .alt(branches)
    }

    mutating func parseConcat() throws(GrammarError) -> RegexNode {
        var items: [RegexNode] = []
        while !atEnd && peek != 0x7C && peek != 0x29 {
            var atom = try parseAtom()
            atom = try parseQuantifiers(atom)
            items.append(atom)
        }
        return items.count == 1 ? items[0] : .concat(items)
    }

    mutating func parseQuantifiers(_ atom: RegexNode) throws(GrammarError) -> RegexNode {
        var node = atom
        while !atEnd {
            let c = peek
            var minC = 0, maxC: Int? = nil
            if c == 0x2A { pos += 1; minC = 0; maxC = nil }
            else if c == 0x2B { pos += 1; minC = 1; maxC = nil }
            else if c == 0x3F { pos += 1; minC = 0; maxC = 1 }
            else if c == 0x7B, let (a, b, len) = braceQuantifier(at: pos) { pos += len; minC = a; maxC = b }
            else { break }
            if case .startAnchor = node { throw fail("quantified anchor") }
            if case .endAnchor = node { throw fail("quantified anchor") }
            if let m = maxC, m < minC { throw fail("quantifier range out of order") }
            if minC > 10_000 || (maxC ?? 0) > 10_000 { throw fail("repetition count too large") }
            if !atEnd && peek == 0x3F { pos += 1 } // lazy: same language
            node = .repetition(node, min: minC, max: maxC)
        }
        return node
    }

    /// `{n}`, `{n,}`, `{n,m}` at `i`: (min, max, length), or nil if it is a literal brace.
    func braceQuantifier(at i: Int) -> (Int, Int?, Int)? {
        var j = i + 1
        func number(_ j: inout Int) -> Int? {
            let s = j
            var v = 0
            while j < chars.count, chars[j] >= 0x30, chars[j] <= 0x39 { v = min(v * 10 + Int(chars[j] - 0x30), 1_000_000); j += 1 }
            return j > s ? v : nil
        }
        guard let a = number(&j) else { return nil }
        guard j < chars.count else { return nil }
        if chars[j] == 0x7D { return (a, a, j - i + 1) }
        guard chars[j] == 0x2C else { return nil }
        j += 1
        let b = number(&j)
        guard j < chars.count, chars[j] == 0x7D else { return nil }
        return (a, b, j - i + 1)
    }

    mutating func parseAtom() throws(GrammarError) -> RegexNode {
        let c = peek
        pos += 1
        switch c {
        case 0x5E: return .startAnchor
        case 0x24: return .endAnchor
        case 0x2E: return .chars(CharSet.lineTerminators.inverted)
        case 0x28:
            if !atEnd && peek == 0x3F {
                pos += 1
                guard !atEnd else { throw fail("unterminated group") }
                let k = peek
                if k == 0x3A { pos += 1 }
                else if k == 0x3C, pos + 1 < chars.count, chars[pos + 1] != 0x3D, chars[pos + 1] != 0x21 {
                    // Named group (?<name>...)
                    while !atEnd && peek != 0x3E { pos += 1 }
                    guard !atEnd else { throw fail("unterminated group name") }
                    pos += 1
                } else { throw fail("lookaround assertions are not supported") }
            }
            let inner = try parseAlt()
            guard !atEnd, peek == 0x29 else { throw fail("missing ')'") }
            pos += 1
            return inner
        case 0x5B: return .chars(try parseClass())
        case 0x5C: return try parseEscape(inClass: false)
        case 0x2A, 0x2B, 0x3F: throw fail("nothing to repeat")
        case 0x7B:
            if braceQuantifier(at: pos - 1) != nil { throw fail("nothing to repeat") }
            return .chars(CharSet(c))
        default: return .chars(CharSet(c))
        }
    }

    mutating func parseClass() throws(GrammarError) -> CharSet {
        var negate = false
        if !atEnd && peek == 0x5E { negate = true; pos += 1 }
        var set = CharSet.empty
        var first = true
        while true {
            guard !atEnd else { throw fail("unterminated character class") }
            if peek == 0x5D && !(first && false) { pos += 1; break }
            first = false
            let lo = try classAtom(negated: negate)
            if !atEnd, peek == 0x2D, pos + 1 < chars.count, chars[pos + 1] != 0x5D {
                pos += 1
                let hi = try classAtom(negated: negate)
                guard case .single(let a) = lo, case .single(let b) = hi else { throw fail("class range with a class escape") }
                guard a <= b else { throw fail("class range out of order") }
                set = set.union(CharSet(ranges: [a...b]))
            } else {
                switch lo {
                case .single(let a): set = set.union(CharSet(a))
                case .set(let s): set = set.union(s)
                }
            }
        }
        return negate ? set.inverted : set
    }

    enum ClassAtom { case single(UInt32), set(CharSet) }

    mutating func classAtom(negated: Bool) throws(GrammarError) -> ClassAtom {
        let c = peek
        pos += 1
        if c != 0x5C { return .single(c) }
        guard !atEnd else { throw fail("trailing backslash") }
        if peek == 0x62 { pos += 1; return .single(0x08) } // [\b] is backspace
        if peek == 0x2D { pos += 1; return .single(0x2D) }
        let node = try parseEscape(inClass: true, negatedClass: negated)
        guard case .chars(let s) = node else { throw fail("unsupported escape in class") }
        if s.ranges.count == 1, s.ranges[0].lowerBound == s.ranges[0].upperBound { return .single(s.ranges[0].lowerBound) }
        return .set(s)
    }

    mutating func hex(_ n: Int) throws(GrammarError) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<n {
            guard !atEnd, let d = hexDigit(peek) else { throw fail("bad hex escape") }
            v = v * 16 + d
            pos += 1
        }
        return v
    }

    func hexDigit(_ c: UInt32) -> UInt32? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }

    mutating func parseEscape(inClass: Bool, negatedClass: Bool = false) throws(GrammarError) -> RegexNode {
        guard !atEnd else { throw fail("trailing backslash") }
        let c = peek
        pos += 1
        switch c {
        case 0x64: return .chars(.digits)                 // \d
        case 0x44: return .chars(CharSet.digits.inverted) // \D
        case 0x77: return .chars(.word)                   // \w
        case 0x57: return .chars(CharSet.word.inverted)   // \W
        case 0x73: return .chars(negatedClass ? .spaceInEither : .spaceInBoth)                   // \s
        case 0x53: return .chars(negatedClass ? CharSet.spaceInBoth.inverted : CharSet.spaceInEither.inverted) // \S
        case 0x6E: return .chars(CharSet(0x0A))
        case 0x72: return .chars(CharSet(0x0D))
        case 0x74: return .chars(CharSet(0x09))
        case 0x66: return .chars(CharSet(0x0C))
        case 0x76: return .chars(CharSet(0x0B))
        case 0x30:
            if !atEnd, peek >= 0x30, peek <= 0x39 { throw fail("octal escapes are not supported") }
            return .chars(CharSet(0))
        case 0x78: return .chars(CharSet(try hex(2)))
        case 0x75:
            if !atEnd, peek == 0x7B {
                pos += 1
                var v: UInt32 = 0
                while !atEnd, let d = hexDigit(peek) { v = v * 16 + d; pos += 1; if v > 0x10FFFF { throw fail("bad \\u{} escape") } }
                guard !atEnd, peek == 0x7D else { throw fail("bad \\u{} escape") }
                pos += 1
                return .chars(CharSet(v))
            }
            var v = try hex(4)
            if v >= 0xD800, v < 0xDC00, pos + 5 < chars.count, chars[pos] == 0x5C, chars[pos + 1] == 0x75 {
                let save = pos
                pos += 2
                let lo = try hex(4)
                if lo >= 0xDC00, lo < 0xE000 { v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00) } else { pos = save }
            }
            return .chars(CharSet(v))
        case 0x63:
            guard !atEnd else { throw fail("bad control escape") }
            let l = peek
            pos += 1
            return .chars(CharSet(l % 32))
        case 0x62, 0x42: throw fail("word boundary assertions are not supported")
        case 0x70, 0x50: throw fail("Unicode property escapes are not supported")
        case 0x31...0x39, 0x6B: throw fail("backreferences are not supported")
        default:
            if (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) { throw fail("unknown escape \\\(String(UnicodeScalar(c)!))") }
            return .chars(CharSet(c))
        }
    }
}

/// Builds byte automata for regular expressions over the characters of a JSON string's
/// contents: each character is written as raw UTF-8, except `"`, `\` and control characters,
/// which take their JSON escape.
struct RegexBuilder {
    let pattern: String
    /// Whether characters are written as inside a JSON string (escaped) or as raw UTF-8.
    var json = true
    var fragmentBudget = 200_000

    /// Appends the byte paths of one character from `set` (JSON-encoded) between `from` and `to`.
    static func addChars(_ set: CharSet, _ nfa: inout NFA, from: Int32, to: Int32, json: Bool = true) {
        if !json {
            for r in set.ranges {
                for seq in utf8Sequences(r.lowerBound, r.upperBound) {
                    var s = from
                    for (k, br) in seq.enumerated() {
                        let t = k == seq.count - 1 ? to : nfa.add()
                        nfa.range(s, br.0, br.1, t)
                        s = t
                    }
                }
            }
            return
        }
        for r in set.ranges {
            let lo = r.lowerBound, hi = r.upperBound
            // Characters that need escapes.
            for esc in [UInt32(0x22), 0x5C] where lo <= esc && esc <= hi {
                let m = nfa.literal(from, [0x5C])
                nfa.range(m, UInt8(esc), UInt8(esc), to)
            }
            if lo < 0x20 {
                for c in lo...min(hi, 0x1F) {
                    let bytes: [UInt8]
                    switch c {
                    case 0x08: bytes = [0x5C, 0x62]
                    case 0x0C: bytes = [0x5C, 0x66]
                    case 0x0A: bytes = [0x5C, 0x6E]
                    case 0x0D: bytes = [0x5C, 0x72]
                    case 0x09: bytes = [0x5C, 0x74]
                    default:
                        let hexd = Array("0123456789abcdef".utf8)
                        bytes = [0x5C, 0x75, 0x30, 0x30, hexd[Int(c >> 4)], hexd[Int(c & 15)]]
                    }
                    let m = nfa.literal(from, Array(bytes.dropLast()))
                    nfa.range(m, bytes.last!, bytes.last!, to)
                }
            }
            // Raw UTF-8 for the rest.
            var pieces: [ClosedRange<UInt32>] = []
            var start = max(lo, 0x20)
            for esc in [UInt32(0x22), 0x5C] where start <= esc && esc <= hi {
                if esc > start { pieces.append(start...(esc - 1)) }
                start = esc + 1
            }
            if start <= hi { pieces.append(start...hi) }
            for p in pieces {
                for seq in utf8Sequences(p.lowerBound, p.upperBound) {
                    var s = from
                    for (k, br) in seq.enumerated() {
                        let t = k == seq.count - 1 ? to : nfa.add()
                        nfa.range(s, br.0, br.1, t)
                        s = t
                    }
                }
            }
        }
    }

    /// Splits a scalar range into sequences of byte ranges whose concatenations are exactly
    /// the UTF-8 encodings of the range.
    static func utf8Sequences(_ lo: UInt32, _ hi: UInt32) -> [[(UInt8, UInt8)]] {
        var out: [[(UInt8, UInt8)]] = []
        var stack: [(UInt32, UInt32)] = [(lo, hi)]
        let limits: [UInt32] = [0x7F, 0x7FF, 0xFFFF, 0x10FFFF]
        while let (a, b) = stack.popLast() {
            if a > b { continue }
            // Split across encoded lengths.
            var split = false
            for l in limits.dropLast() where a <= l && b > l {
                stack.append((l + 1, b)); stack.append((a, l)); split = true; break
            }
            if split { continue }
            let n = a <= 0x7F ? 1 : a <= 0x7FF ? 2 : a <= 0xFFFF ? 3 : 4
            if n > 1 {
                var didSplit = false
                for i in 1..<n {
                    let m: UInt32 = (1 << (6 * UInt32(i))) - 1
                    if a & ~m != b & ~m {
                        if a & m != 0 { stack.append(((a | m) + 1, b)); stack.append((a, a | m)); didSplit = true; break }
                        if b & m != m { stack.append((b & ~m, b)); stack.append((a, (b & ~m) - 1)); didSplit = true; break }
                    }
                }
                if didSplit { continue }
            }
            let ea = encode(a), eb = encode(b)
            out.append(zip(ea, eb).map { ($0, $1) })
        }
        return out
    }

    static func encode(_ c: UInt32) -> [UInt8] {
        if c < 0x80 { return [UInt8(c)] }
        if c < 0x800 { return [UInt8(0xC0 | (c >> 6)), UInt8(0x80 | (c & 0x3F))] }
        if c < 0x10000 { return [UInt8(0xE0 | (c >> 12)), UInt8(0x80 | ((c >> 6) & 0x3F)), UInt8(0x80 | (c & 0x3F))] }
        return [UInt8(0xF0 | (c >> 18)), UInt8(0x80 | ((c >> 12) & 0x3F)), UInt8(0x80 | ((c >> 6) & 0x3F)), UInt8(0x80 | (c & 0x3F))]
    }

    /// Adds the NFA of `node` after `from`; returns its end state.
    mutating func build(_ node: RegexNode, _ nfa: inout NFA, from: Int32) throws(GrammarError) -> Int32 {
        if nfa.count > fragmentBudget { throw .budgetExceeded("the regular expression /\(pattern)/ expands to too many states") }
        switch node {
        case .chars(let set):
            let to = nfa.add()
            RegexBuilder.addChars(set, &nfa, from: from, to: to, json: json)
            return to
        case .concat(let items):
            var s = from
            for i in items { s = try build(i, &nfa, from: s) }
            return s
        case .alt(let branches):
            let end = nfa.add()
            for b in branches {
                let s = nfa.add()
                nfa.epsilon(from, s)
                nfa.epsilon(try build(b, &nfa, from: s), end)
            }
            return end
        case let .repetition(inner, minC, maxC):
            var s = from
            for _ in 0..<minC { s = try build(inner, &nfa, from: s) }
            if let m = maxC {
                let end = nfa.add()
                nfa.epsilon(s, end)
                for _ in minC..<m {
                    s = try build(inner, &nfa, from: s)
                    nfa.epsilon(s, end)
                }
                return end
            }
            let loop = nfa.add()
            nfa.epsilon(s, loop)
            let e = try build(inner, &nfa, from: loop)
            nfa.epsilon(e, loop)
            return loop
        case .startAnchor, .endAnchor:
            throw .invalidRegex(pattern: pattern, reason: "anchors are supported only at the start and end of the pattern")
        }
    }

    /// The JSON-string content automaton for a `pattern` (search semantics: unanchored ends may
    /// be preceded or followed by anything), or for a full-match regex when `fullMatch`.
    static func contentNFA(_ pattern: String, fullMatch: Bool, json: Bool = true, nfa: inout NFA, from: Int32) throws(GrammarError) -> Int32 {
        let root = try RegexParser.parse(pattern)
        var b = RegexBuilder(pattern: pattern)
        b.json = json
        let branches: [RegexNode]
        if case .alt(let bs) = root { branches = bs } else { branches = [root] }
        let end = nfa.add()
        for br in branches {
            var (core, anchoredStart, anchoredEnd) = try stripAnchors(br, pattern: pattern)
            if fullMatch { anchoredStart = true; anchoredEnd = true }
            var s = nfa.add()
            nfa.epsilon(from, s)
            if !anchoredStart { s = try b.build(.repetition(.chars(.all), min: 0, max: nil), &nfa, from: s) }
            s = try b.build(core, &nfa, from: s)
            if !anchoredEnd {
                s = try b.build(.repetition(.chars(.all), min: 0, max: nil), &nfa, from: s)
                nfa.absorbing.insert(s)
            }
            nfa.epsilon(s, end)
        }
        return end
    }

    /// Removes a leading `^` and trailing `$` (also inside a leading/trailing group whose every
    /// branch has them). Anchors elsewhere are errors.
    static func stripAnchors(_ node: RegexNode, pattern: String) throws(GrammarError) -> (RegexNode, Bool, Bool) {
        var items: [RegexNode]
        if case .concat(let xs) = node { items = xs } else { items = [node] }
        var start = false, end = false
        while let f = items.first, case .startAnchor = f { items.removeFirst(); start = true }
        while let l = items.last, case .endAnchor = l { items.removeLast(); end = true }
        if !start, let f = items.first, case .alt(let bs) = f {
            let stripped = try bs.map { b throws(GrammarError) in try stripAnchors(b, pattern: pattern) }
            if stripped.allSatisfy({ $0.1 }) && (items.count > 1 || !stripped.contains(where: { $0.2 }) || stripped.allSatisfy({ $0.2 })) {
                if items.count == 1 && stripped.allSatisfy({ $0.2 }) {
                    return (.alt(stripped.map(\.0)), true, true)
                }
                if !stripped.contains(where: { $0.2 }) {
                    items[0] = .alt(stripped.map(\.0)); start = true
                }
            }
        }
        if !end, let l = items.last, case .alt(let bs) = l {
            let stripped = try bs.map { b throws(GrammarError) in try stripAnchors(b, pattern: pattern) }
            if stripped.allSatisfy({ $0.2 }) && !stripped.contains(where: { $0.1 }) {
                items[items.count - 1] = .alt(stripped.map(\.0)); end = true
            }
        }
        let core: RegexNode = items.count == 1 ? items[0] : .concat(items)
        try checkNoAnchors(core, pattern: pattern)
        return (core, start, end)
    }

    static func checkNoAnchors(_ n: RegexNode, pattern: String) throws(GrammarError) {
        switch n {
        case .startAnchor, .endAnchor:
            throw .invalidRegex(pattern: pattern, reason: "anchors are supported only at the start and end of the pattern")
        case .chars: return
        case .concat(let xs), .alt(let xs): for x in xs { try checkNoAnchors(x, pattern: pattern) }
        case .repetition(let x, _, _): try checkNoAnchors(x, pattern: pattern)
        }
    }
}
