extension Jinja {
    /// A token of a Jinja template.
    struct Token: Sendable {
        enum Kind: Sendable, Equatable {
            case data(String)
            case variableBegin
            case variableEnd
            case blockBegin
            case blockEnd
            case name(String)
            case string(String)
            case integer(Int)
            case float(Double)
            case op(String)
            case eof
        }

        let kind: Kind
        let location: TemplateSourceLocation

        /// How the token reads in an error message.
        var description: String {
            switch kind {
            case .data: return "template data"
            case .variableBegin: return "begin of print statement"
            case .variableEnd: return "end of print statement"
            case .blockBegin: return "begin of statement block"
            case .blockEnd: return "end of statement block"
            case .name(let n): return n
            case .string(let s): return "'\(s)'"
            case .integer(let i): return String(i)
            case .float(let d): return String(d)
            case .op(let o): return o
            case .eof: return "end of template"
            }
        }
    }

    /// Splits a template into tokens the way Jinja's lexer does with `trim_blocks=True` and
    /// `lstrip_blocks=True`: `{{ }}` expressions, `{% %}` statements, `{# #}` comments, `{% raw %}`
    /// blocks, the `-` and `+` whitespace-control signs, and the data between them.
    struct Lexer {
        let trimBlocks: Bool
        let lstripBlocks: Bool

        private var source: [Unicode.Scalar] = []
        private var lineStarts: [Int] = [0]
        private var tokens: [Token] = []
        private var pos = 0

        init(trimBlocks: Bool = true, lstripBlocks: Bool = true) {
            self.trimBlocks = trimBlocks
            self.lstripBlocks = lstripBlocks
        }

        /// Normalizes line endings to `\n` and drops one trailing newline, as Jinja does when
        /// `keep_trailing_newline` is off.
        static func normalize(_ text: String) -> [Unicode.Scalar] {
            var out: [Unicode.Scalar] = []
            out.reserveCapacity(text.unicodeScalars.count)
            var previousWasCR = false
            for s in text.unicodeScalars {
                if s == "\r" {
                    out.append("\n")
                    previousWasCR = true
                    continue
                }
                if s == "\n" && previousWasCR {
                    previousWasCR = false
                    continue
                }
                previousWasCR = false
                out.append(s)
            }
            if out.last == "\n" { out.removeLast() }
            return out
        }

        mutating func tokenize(_ text: String) throws(ChatTemplateError) -> [Token] {
            source = Lexer.normalize(text)
            lineStarts = [0]
            for (i, s) in source.enumerated() where s == "\n" { lineStarts.append(i + 1) }
            tokens = []
            pos = 0
            try lexRoot()
            tokens.append(Token(kind: .eof, location: location(source.count)))
            return tokens
        }

        // MARK: - Positions

        func location(_ index: Int) -> TemplateSourceLocation {
            var lo = 0
            var hi = lineStarts.count - 1
            while lo < hi {
                let mid = (lo + hi + 1) / 2
                if lineStarts[mid] <= index { lo = mid } else { hi = mid - 1 }
            }
            return TemplateSourceLocation(line: lo + 1, column: index - lineStarts[lo] + 1)
        }

        private func at(_ i: Int) -> Unicode.Scalar? { i < source.count ? source[i] : nil }

        private func matches(_ literal: String, at i: Int) -> Bool {
            var j = i
            for s in literal.unicodeScalars {
                guard j < source.count, source[j] == s else { return false }
                j += 1
            }
            return true
        }

        private func skipWhitespace(from i: Int) -> Int {
            var j = i
            while j < source.count, PythonText.isSpace(source[j]) { j += 1 }
            return j
        }

        private func string(_ range: Range<Int>) -> String {
            var s = String.UnicodeScalarView()
            s.append(contentsOf: source[range])
            return String(s)
        }

        // MARK: - Root state

        private enum TagKind { case variable, block, comment }

        /// Applies `-`, `+` and `lstrip_blocks` to the data in front of a tag.
        private func stripData(_ range: Range<Int>, sign: Unicode.Scalar?, kind: TagKind, lineStarting: Bool) -> Range<Int> {
            if sign == "-" {
                var end = range.upperBound
                while end > range.lowerBound, PythonText.isSpace(source[end - 1]) { end -= 1 }
                return range.lowerBound..<end
            }
            guard sign != "+", lstripBlocks, kind != .variable else { return range }
            var lineStart = range.lowerBound
            var k = range.upperBound
            while k > range.lowerBound {
                if source[k - 1] == "\n" { lineStart = k; break }
                k -= 1
            }
            let afterNewline = lineStart > range.lowerBound
            guard afterNewline || lineStarting, lineStart < range.upperBound else { return range }
            for i in lineStart..<range.upperBound where !PythonText.isSpace(source[i]) { return range }
            return range.lowerBound..<lineStart
        }

        private mutating func emitData(_ range: Range<Int>) {
            guard !range.isEmpty else { return }
            tokens.append(Token(kind: .data(string(range)), location: location(range.lowerBound)))
        }

        private mutating func lexRoot() throws(ChatTemplateError) {
            var lineStarting = true
            while pos < source.count {
                // Find the next tag opener.
                var i = pos
                var found: (Int, TagKind)? = nil
                while i + 1 < source.count {
                    if source[i] == "{" {
                        switch source[i + 1] {
                        case "{": found = (i, .variable)
                        case "%": found = (i, .block)
                        case "#": found = (i, .comment)
                        default: break
                        }
                        if found != nil { break }
                    }
                    i += 1
                }
                guard let (tagStart, kind) = found else {
                    emitData(pos..<source.count)
                    return
                }
                var sign: Unicode.Scalar? = nil
                if let s = at(tagStart + 2), s == "-" || s == "+" { sign = s }
                let afterOpener = tagStart + 2 + (sign == nil ? 0 : 1)

                if kind == .block, let rawEnd = rawBegin(afterOpener) {
                    emitData(stripData(pos..<tagStart, sign: sign, kind: .block, lineStarting: lineStarting))
                    lineStarting = source[rawEnd - 1] == "\n"
                    try lexRaw(from: rawEnd, openedAt: tagStart, lineStarting: lineStarting)
                    lineStarting = pos > 0 && source[pos - 1] == "\n"
                    continue
                }

                emitData(stripData(pos..<tagStart, sign: sign, kind: kind, lineStarting: lineStarting))
                pos = afterOpener
                switch kind {
                case .comment:
                    try lexComment(openedAt: tagStart)
                case .variable:
                    tokens.append(Token(kind: .variableBegin, location: location(tagStart)))
                    try lexInsideTag(block: false, openedAt: tagStart)
                case .block:
                    tokens.append(Token(kind: .blockBegin, location: location(tagStart)))
                    try lexInsideTag(block: true, openedAt: tagStart)
                }
                lineStarting = pos > 0 && source[pos - 1] == "\n"
            }
        }

        /// If `{% raw %}` starts here (just after `{%` and its sign), returns the index after it.
        private func rawBegin(_ i: Int) -> Int? {
            var j = skipWhitespace(from: i)
            guard matches("raw", at: j) else { return nil }
            j = skipWhitespace(from: j + 3)
            if matches("-%}", at: j) { return skipWhitespace(from: j + 3) }
            if matches("%}", at: j) { return j + 2 }
            return nil
        }

        private mutating func lexRaw(from start: Int, openedAt: Int, lineStarting: Bool) throws(ChatTemplateError) {
            if start >= source.count {
                pos = start
                return
            }
            var i = start
            while i < source.count {
                if source[i] == "{", at(i + 1) == "%" {
                    var j = i + 2
                    var sign: Unicode.Scalar? = nil
                    if let s = at(j), s == "-" || s == "+" { sign = s; j += 1 }
                    j = skipWhitespace(from: j)
                    if matches("endraw", at: j) {
                        j = skipWhitespace(from: j + 6)
                        var end: Int? = nil
                        if matches("+%}", at: j) {
                            end = j + 3
                        } else if matches("-%}", at: j) {
                            end = skipWhitespace(from: j + 3)
                        } else if matches("%}", at: j) {
                            end = j + 2
                            if trimBlocks, at(j + 2) == "\n" { end = j + 3 }
                        }
                        if let end {
                            emitData(stripData(start..<i, sign: sign, kind: .block, lineStarting: lineStarting))
                            pos = end
                            return
                        }
                    }
                }
                i += 1
            }
            throw .syntax("Missing end of raw directive: '{% raw %}' has no matching '{% endraw %}'.", at: location(openedAt))
        }

        private mutating func lexComment(openedAt: Int) throws(ChatTemplateError) {
            // Like Jinja, an opener that ends the template is accepted silently.
            if pos >= source.count { return }
            var i = pos
            while i < source.count {
                if source[i] == "+", matches("#}", at: i + 1) {
                    pos = i + 3
                    return
                }
                if source[i] == "-", matches("#}", at: i + 1) {
                    pos = skipWhitespace(from: i + 3)
                    return
                }
                if source[i] == "#", at(i + 1) == "}" {
                    pos = i + 2
                    if trimBlocks, at(pos) == "\n" { pos += 1 }
                    return
                }
                i += 1
            }
            throw .syntax("Missing end of comment tag: '{#' is never closed with '#}'.", at: location(openedAt))
        }

        // MARK: - Inside {{ }} and {% %}

        private static let operators2: [String] = ["**", "//", "==", "!=", ">=", "<="]
        private static let operators1: Set<Unicode.Scalar> = [
            "+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";",
        ]

        private mutating func lexInsideTag(block: Bool, openedAt: Int) throws(ChatTemplateError) {
            var balance: [Unicode.Scalar] = []
            let closer = block ? "%}" : "}}"
            while true {
                guard pos < source.count else {
                    let what = block ? "statement ('{%' … '%}')" : "expression ('{{' … '}}')"
                    throw .syntax("Unclosed \(what): this tag is never closed with '\(closer)'.", at: location(openedAt))
                }
                // End of tag, only when brackets are balanced.
                if balance.isEmpty {
                    if block {
                        if matches("+%}", at: pos) {
                            tokens.append(Token(kind: .blockEnd, location: location(pos)))
                            pos += 3
                            return
                        }
                        if matches("-%}", at: pos) {
                            tokens.append(Token(kind: .blockEnd, location: location(pos)))
                            pos = skipWhitespace(from: pos + 3)
                            return
                        }
                        if matches("%}", at: pos) {
                            tokens.append(Token(kind: .blockEnd, location: location(pos)))
                            pos += 2
                            if trimBlocks, at(pos) == "\n" { pos += 1 }
                            return
                        }
                    } else {
                        if matches("-}}", at: pos) {
                            tokens.append(Token(kind: .variableEnd, location: location(pos)))
                            pos = skipWhitespace(from: pos + 3)
                            return
                        }
                        if matches("}}", at: pos) {
                            tokens.append(Token(kind: .variableEnd, location: location(pos)))
                            pos += 2
                            return
                        }
                    }
                }
                let c = source[pos]
                if PythonText.isSpace(c) {
                    pos += 1
                    continue
                }
                let start = pos
                if let number = lexNumber() {
                    tokens.append(Token(kind: number, location: location(start)))
                    continue
                }
                if c == "_" || c.properties.isAlphabetic {
                    var j = pos + 1
                    while j < source.count, source[j] == "_" || source[j].properties.isAlphabetic || source[j].properties.numericType == .decimal {
                        j += 1
                    }
                    tokens.append(Token(kind: .name(string(pos..<j)), location: location(start)))
                    pos = j
                    continue
                }
                if c == "'" || c == "\"" {
                    tokens.append(Token(kind: .string(try lexString()), location: location(start)))
                    continue
                }
                if let two = Lexer.operators2.first(where: { matches($0, at: pos) }) {
                    tokens.append(Token(kind: .op(two), location: location(start)))
                    pos += 2
                    continue
                }
                if Lexer.operators1.contains(c) {
                    switch c {
                    case "(": balance.append(")")
                    case "[": balance.append("]")
                    case "{": balance.append("}")
                    case ")", "]", "}":
                        guard let expected = balance.popLast() else {
                            throw .syntax("unexpected '\(c)'", at: location(pos))
                        }
                        if expected != c {
                            throw .syntax("unexpected '\(c)', expected '\(expected)'", at: location(pos))
                        }
                    default: break
                    }
                    tokens.append(Token(kind: .op(String(c)), location: location(start)))
                    pos += 1
                    continue
                }
                throw .syntax("unexpected character '\(c)'", at: location(pos))
            }
        }

        private func isDigit(_ s: Unicode.Scalar?) -> Bool {
            guard let s else { return false }
            return s >= "0" && s <= "9"
        }

        /// Digits with single underscores between them, starting at `i`; returns the end index.
        private func digitRun(_ i: Int, digit: (Unicode.Scalar) -> Bool) -> Int? {
            guard let s = at(i), digit(s) else { return nil }
            var j = i + 1
            while true {
                if let s = at(j), digit(s) { j += 1; continue }
                if at(j) == "_", let s = at(j + 1), digit(s) { j += 2; continue }
                return j
            }
        }

        private mutating func lexNumber() -> Token.Kind? {
            guard isDigit(at(pos)) else { return nil }
            let decimal: (Unicode.Scalar) -> Bool = { $0 >= "0" && $0 <= "9" }
            // Floats first, as Jinja does; a float may not follow a '.'.
            if pos == 0 || source[pos - 1] != ".", let intEnd = digitRun(pos, digit: decimal) {
                var j = intEnd
                var isFloat = false
                if at(j) == ".", let fracEnd = digitRun(j + 1, digit: decimal) {
                    j = fracEnd
                    isFloat = true
                }
                if let e = at(j), e == "e" || e == "E" {
                    var k = j + 1
                    if let sign = at(k), sign == "+" || sign == "-" { k += 1 }
                    if let expEnd = digitRun(k, digit: decimal) {
                        j = expEnd
                        isFloat = true
                    }
                }
                if isFloat {
                    let text = string(pos..<j).replacingOccurrences(of: "_", with: "")
                    pos = j
                    return .float(Double(text) ?? .nan)
                }
            }
            // Integers: 0b…, 0o…, 0x…, decimal.
            if source[pos] == "0", let p = at(pos + 1) {
                let radix: Int?
                let digit: (Unicode.Scalar) -> Bool
                switch p {
                case "b", "B": radix = 2; digit = { $0 == "0" || $0 == "1" }
                case "o", "O": radix = 8; digit = { $0 >= "0" && $0 <= "7" }
                case "x", "X": radix = 16; digit = { $0.properties.isASCIIHexDigit }
                default: radix = nil; digit = decimal
                }
                if let radix {
                    var j = pos + 2
                    if at(j) == "_" { j += 1 }
                    if let end = digitRun(j, digit: digit) {
                        let text = string(j..<end).replacingOccurrences(of: "_", with: "")
                        pos = end
                        return .integer(Int(text, radix: radix) ?? Int.max)
                    }
                }
            }
            if source[pos] == "0" {
                var j = pos + 1
                while true {
                    if at(j) == "0" { j += 1; continue }
                    if at(j) == "_", at(j + 1) == "0" { j += 2; continue }
                    break
                }
                pos = j
                return .integer(0)
            }
            let end = digitRun(pos, digit: decimal)!
            let text = string(pos..<end).replacingOccurrences(of: "_", with: "")
            pos = end
            return .integer(Int(text) ?? Int.max)
        }

        /// A quoted string literal with Python's backslash escapes.
        private mutating func lexString() throws(ChatTemplateError) -> String {
            let quote = source[pos]
            let start = pos
            var j = pos + 1
            var out = String.UnicodeScalarView()
            while true {
                guard let c = at(j) else {
                    throw .syntax("unterminated string literal", at: location(start))
                }
                if c == quote { pos = j + 1; return String(out) }
                if c != "\\" {
                    out.append(c)
                    j += 1
                    continue
                }
                guard let e = at(j + 1) else {
                    throw .syntax("unterminated string literal", at: location(start))
                }
                j += 2
                switch e {
                case "\n": break
                case "\\": out.append("\\")
                case "'": out.append("'")
                case "\"": out.append("\"")
                case "a": out.append("\u{07}")
                case "b": out.append("\u{08}")
                case "f": out.append("\u{0C}")
                case "n": out.append("\n")
                case "r": out.append("\r")
                case "t": out.append("\t")
                case "v": out.append("\u{0B}")
                case "0"..."7":
                    var value = Int(e.value - 48)
                    var count = 1
                    while count < 3, let d = at(j), d >= "0" && d <= "7" {
                        value = value * 8 + Int(d.value - 48)
                        j += 1
                        count += 1
                    }
                    out.append(Unicode.Scalar(UInt32(value)) ?? "\u{FFFD}")
                case "x", "u", "U":
                    let width = e == "x" ? 2 : (e == "u" ? 4 : 8)
                    var value: UInt32 = 0
                    for k in 0..<width {
                        guard let d = at(j + k), let v = d.properties.isASCIIHexDigit ? UInt32(String(d), radix: 16) : nil else {
                            throw .syntax("truncated \\\(e) escape in string literal", at: location(j - 2))
                        }
                        value = value * 16 + v
                    }
                    j += width
                    out.append(Unicode.Scalar(value) ?? "\u{FFFD}")
                default:
                    out.append("\\")
                    out.append(e)
                }
            }
        }
    }
}
