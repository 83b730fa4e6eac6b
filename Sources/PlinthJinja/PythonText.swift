import Foundation

extension Jinja {
    /// String operations with Python's semantics (code points, Python's whitespace set, Python's
    /// `repr` and float formatting), which Jinja templates observe through `str` methods and
    /// filters.
    enum PythonText {
        /// Python's `str.isspace()` for one code point.
        static func isSpace(_ s: Unicode.Scalar) -> Bool {
            switch s.value {
            case 0x09...0x0D, 0x1C...0x20, 0x85, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
                return true
            default:
                return false
            }
        }

        static func scalars(_ s: String) -> [Unicode.Scalar] { Array(s.unicodeScalars) }

        static func string<S: Sequence>(_ scalars: S) -> String where S.Element == Unicode.Scalar {
            var view = String.UnicodeScalarView()
            view.append(contentsOf: scalars)
            return String(view)
        }

        static func length(_ s: String) -> Int { s.unicodeScalars.count }

        // MARK: - Stripping

        enum StripSide { case both, left, right }

        static func strip(_ s: String, _ chars: String?, side: StripSide = .both) -> String {
            let a = scalars(s)
            let set = chars.map { Set($0.unicodeScalars) }
            func stripped(_ c: Unicode.Scalar) -> Bool { set?.contains(c) ?? isSpace(c) }
            var lo = 0
            var hi = a.count
            if side != .right { while lo < hi, stripped(a[lo]) { lo += 1 } }
            if side != .left { while hi > lo, stripped(a[hi - 1]) { hi -= 1 } }
            return string(a[lo..<hi])
        }

        // MARK: - Splitting

        /// Python's `str.split(sep, maxsplit)`; `sep == nil` splits on runs of whitespace.
        static func split(_ s: String, _ sep: String?, maxSplit: Int = -1) -> [String]? {
            let a = scalars(s)
            guard let sep else {
                var parts: [String] = []
                var i = 0
                var splits = 0
                while true {
                    while i < a.count, isSpace(a[i]) { i += 1 }
                    if i == a.count { break }
                    if maxSplit >= 0, splits == maxSplit {
                        parts.append(string(a[i...]))
                        break
                    }
                    var j = i
                    while j < a.count, !isSpace(a[j]) { j += 1 }
                    parts.append(string(a[i..<j]))
                    splits += 1
                    i = j
                }
                return parts
            }
            let p = scalars(sep)
            guard !p.isEmpty else { return nil }
            var parts: [String] = []
            var start = 0
            var i = 0
            var splits = 0
            while i + p.count <= a.count {
                if maxSplit >= 0, splits == maxSplit { break }
                if a[i..<(i + p.count)].elementsEqual(p) {
                    parts.append(string(a[start..<i]))
                    i += p.count
                    start = i
                    splits += 1
                } else {
                    i += 1
                }
            }
            parts.append(string(a[start...]))
            return parts
        }

        /// Python's `str.rsplit(sep, maxsplit)`.
        static func rsplit(_ s: String, _ sep: String?, maxSplit: Int = -1) -> [String]? {
            if maxSplit < 0 { return split(s, sep) }
            let a = scalars(s)
            guard let sep else {
                var parts: [String] = []
                var i = a.count
                var splits = 0
                while true {
                    while i > 0, isSpace(a[i - 1]) { i -= 1 }
                    if i == 0 { break }
                    if splits == maxSplit {
                        parts.append(string(a[..<i]))
                        break
                    }
                    var j = i
                    while j > 0, !isSpace(a[j - 1]) { j -= 1 }
                    parts.append(string(a[j..<i]))
                    splits += 1
                    i = j
                }
                return parts.reversed()
            }
            let p = scalars(sep)
            guard !p.isEmpty else { return nil }
            var parts: [String] = []
            var end = a.count
            var i = a.count - p.count
            var splits = 0
            while i >= 0, splits < maxSplit {
                if a[i..<(i + p.count)].elementsEqual(p) {
                    parts.append(string(a[(i + p.count)..<end]))
                    end = i
                    i -= p.count
                    splits += 1
                } else {
                    i -= 1
                }
            }
            parts.append(string(a[..<end]))
            return parts.reversed()
        }

        private static func isLineBoundary(_ c: Unicode.Scalar) -> Bool {
            switch c.value {
            case 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029: return true
            default: return false
            }
        }

        /// Python's `str.splitlines(keepends)`.
        static func splitLines(_ s: String, keepEnds: Bool = false) -> [String] {
            let a = scalars(s)
            var lines: [String] = []
            var start = 0
            var i = 0
            while i < a.count {
                if isLineBoundary(a[i]) {
                    var end = i + 1
                    if a[i] == "\r", i + 1 < a.count, a[i + 1] == "\n" { end = i + 2 }
                    lines.append(string(a[start..<(keepEnds ? end : i)]))
                    start = end
                    i = end
                } else {
                    i += 1
                }
            }
            if start < a.count { lines.append(string(a[start...])) }
            return lines
        }

        /// Index of `needle` in `s` in code points, or nil.
        static func find(_ s: String, _ needle: String, reverse: Bool = false) -> Int? {
            let a = scalars(s)
            let p = scalars(needle)
            guard p.count <= a.count else { return nil }
            let range = 0...(a.count - p.count)
            for i in reverse ? Array(range.reversed()) : Array(range) where a[i..<(i + p.count)].elementsEqual(p) {
                return i
            }
            return nil
        }

        static func count(_ s: String, _ needle: String) -> Int {
            let a = scalars(s)
            let p = scalars(needle)
            if p.isEmpty { return a.count + 1 }
            var n = 0
            var i = 0
            while i + p.count <= a.count {
                if a[i..<(i + p.count)].elementsEqual(p) { n += 1; i += p.count } else { i += 1 }
            }
            return n
        }

        /// Python's `str.replace(old, new, count)`.
        static func replace(_ s: String, _ old: String, _ new: String, count limit: Int = -1) -> String {
            let a = scalars(s)
            let p = scalars(old)
            let n = scalars(new)
            var out: [Unicode.Scalar] = []
            var done = 0
            if p.isEmpty {
                for c in a {
                    if limit < 0 || done < limit { out.append(contentsOf: n); done += 1 }
                    out.append(c)
                }
                if limit < 0 || done < limit { out.append(contentsOf: n) }
                return string(out)
            }
            var i = 0
            while i < a.count {
                if (limit < 0 || done < limit), i + p.count <= a.count, a[i..<(i + p.count)].elementsEqual(p) {
                    out.append(contentsOf: n)
                    i += p.count
                    done += 1
                } else {
                    out.append(a[i])
                    i += 1
                }
            }
            return string(out)
        }

        // MARK: - Case

        static func upper(_ s: String) -> String { s.uppercased() }

        /// Python's `str.lower()`: Unicode's mappings, with capital sigma as final sigma (ς)
        /// at the end of a word (after a cased letter, not before one; case-ignorable
        /// characters such as apostrophes are skipped both ways).
        static func lower(_ s: String) -> String {
            let scalars = Array(s.unicodeScalars)
            guard scalars.contains("\u{3A3}") else { return s.lowercased() }
            func casedNeighbour(from i: Int, step: Int) -> Bool {
                var j = i + step
                while j >= 0 && j < scalars.count && scalars[j].properties.isCaseIgnorable { j += step }
                return j >= 0 && j < scalars.count && isCased(scalars[j])
            }
            var out = String.UnicodeScalarView()
            for (i, c) in scalars.enumerated() {
                if c == "\u{3A3}" && casedNeighbour(from: i, step: -1) && !casedNeighbour(from: i, step: 1) {
                    out.append("\u{3C2}")
                } else {
                    out.append(contentsOf: c.properties.lowercaseMapping.unicodeScalars)
                }
            }
            return String(out)
        }

        /// Python's `str.casefold()`: Unicode's full case folding ("ß" is "ss", "Σ" is "σ"
        /// wherever it stands), as Foundation's case-insensitive folding gives it.
        static func casefold(_ s: String) -> String {
            s.folding(options: .caseInsensitive, locale: nil)
        }

        /// The text with every decimal digit of any script as its ASCII digit, as Python's
        /// `int()` and `float()` read them ("１２" is 12).
        static func asciiDigits(_ s: String) -> String {
            guard s.unicodeScalars.contains(where: { !$0.isASCII }) else { return s }
            var out = String.UnicodeScalarView()
            for c in s.unicodeScalars {
                if !c.isASCII, c.properties.numericType == .decimal, let v = c.properties.numericValue {
                    out.append(Unicode.Scalar(UInt8(48 + Int(v))))
                } else {
                    out.append(c)
                }
            }
            return String(out)
        }

        private static func isCased(_ c: Unicode.Scalar) -> Bool {
            switch c.properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter: return true
            default: return c.properties.isCased
            }
        }

        /// Python's `str.title()`: a cased letter after an uncased character starts a word.
        static func title(_ s: String) -> String {
            var out = ""
            var previousCased = false
            for c in s.unicodeScalars {
                out += previousCased ? c.properties.lowercaseMapping : c.properties.titlecaseMapping
                previousCased = isCased(c)
            }
            return out
        }

        /// Python's `str.capitalize()`.
        static func capitalize(_ s: String) -> String {
            var it = s.unicodeScalars.makeIterator()
            guard let first = it.next() else { return "" }
            var out = first.properties.titlecaseMapping
            var rest = String.UnicodeScalarView()
            while let c = it.next() { rest.append(c) }
            out += String(rest).lowercased()
            return out
        }

        /// Jinja's `title` filter: words start after `-`, whitespace, `(`, `{`, `[` or `<`.
        static func jinjaTitle(_ s: String) -> String {
            func isSeparator(_ c: Unicode.Scalar) -> Bool {
                c == "-" || c == "(" || c == "{" || c == "[" || c == "<" || isSpace(c)
            }
            var out = ""
            var word = String.UnicodeScalarView()
            var first: Unicode.Scalar? = nil
            func flushWord() {
                if let f = first {
                    out += String(f).uppercased() + String(word).lowercased()
                }
                first = nil
                word = String.UnicodeScalarView()
            }
            for c in s.unicodeScalars {
                if isSeparator(c) {
                    flushWord()
                    out.unicodeScalars.append(c)
                } else if first == nil {
                    first = c
                } else {
                    word.append(c)
                }
            }
            flushWord()
            return out
        }

        // MARK: - repr and number formatting

        private static func isPrintable(_ c: Unicode.Scalar) -> Bool {
            if c == " " { return true }
            switch c.properties.generalCategory {
            case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator, .paragraphSeparator, .spaceSeparator:
                return false
            default:
                return true
            }
        }

        private static func hex(_ v: UInt32, width: Int) -> String {
            let h = String(v, radix: 16)
            return String(repeating: "0", count: max(0, width - h.count)) + h
        }

        /// Python's `repr()` of a string.
        static func repr(_ s: String) -> String {
            let quote: Unicode.Scalar = s.unicodeScalars.contains("'") && !s.unicodeScalars.contains("\"") ? "\"" : "'"
            var out = String(quote)
            for c in s.unicodeScalars {
                switch c {
                case quote, "\\": out += "\\" + String(c)
                case "\t": out += "\\t"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                default:
                    if c.value < 0x20 || c.value == 0x7F {
                        out += "\\x" + hex(c.value, width: 2)
                    } else if c.value < 0x7F || isPrintable(c) {
                        out.unicodeScalars.append(c)
                    } else if c.value <= 0xFF {
                        out += "\\x" + hex(c.value, width: 2)
                    } else if c.value <= 0xFFFF {
                        out += "\\u" + hex(c.value, width: 4)
                    } else {
                        out += "\\U" + hex(c.value, width: 8)
                    }
                }
            }
            out.unicodeScalars.append(quote)
            return out
        }

        /// The shortest round-tripping decimal digits of a finite, nonzero magnitude, and the
        /// position of the decimal point relative to the first digit.
        private static func shortestDigits(_ d: Double) -> (digits: [Character], pointPosition: Int) {
            let text = "\(d.magnitude)"
            let parts = text.split(separator: "e", maxSplits: 1)
            let mantissa = parts[0]
            let exponent = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            var digits: [Character] = []
            var point = mantissa.count
            for (i, c) in mantissa.enumerated() {
                if c == "." { point = i } else { digits.append(c) }
            }
            point += exponent
            while digits.first == "0", digits.count > 1 {
                digits.removeFirst()
                point -= 1
            }
            while digits.last == "0", digits.count > 1 { digits.removeLast() }
            return (digits, point)
        }

        /// Python's `repr()` of a float (which `str()` and `json.dumps` also use).
        static func floatRepr(_ d: Double) -> String {
            if d.isNaN { return "nan" }
            if d.isInfinite { return d < 0 ? "-inf" : "inf" }
            if d == 0 { return d.sign == .minus ? "-0.0" : "0.0" }
            let (digits, point) = shortestDigits(d)
            let sign = d < 0 ? "-" : ""
            let exponent = point - 1
            if exponent >= -4 && exponent < 16 {
                if point <= 0 {
                    return sign + "0." + String(repeating: "0", count: -point) + String(digits)
                }
                if point >= digits.count {
                    return sign + String(digits) + String(repeating: "0", count: point - digits.count) + ".0"
                }
                return sign + String(digits[..<point]) + "." + String(digits[point...])
            }
            var mantissa = String(digits[0])
            if digits.count > 1 { mantissa += "." + String(digits[1...]) }
            let e = abs(exponent)
            return sign + mantissa + "e" + (exponent < 0 ? "-" : "+") + (e < 10 ? "0" : "") + String(e)
        }

        /// Formats `d` with a fixed number of decimals, rounding half to even on the exact binary
        /// value as Python's `'%.Nf'` does.
        static func fixed(_ d: Double, precision: Int) -> String {
            if d.isNaN { return "nan" }
            if d.isInfinite { return d < 0 ? "-inf" : "inf" }
            return String(format: "%.\(precision)f", d)
        }
    }
}
