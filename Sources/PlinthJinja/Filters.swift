import Foundation

extension Jinja {
    /// Jinja's built-in filters (with Jinja 3.1's behaviour) and transformers' `tojson`.
    enum Filters {
        typealias E = ChatTemplateError

        /// Every filter by name (aliases share an entry): adding a filter is a method of `Call`
        /// and a row here.
        static let table: [String: @Sendable (Call) throws(E) -> Value] = [
            "abs": { (c: Call) throws(E) in try c.applyAbs() },
            "attr": { (c: Call) throws(E) in try c.applyAttr() },
            "capitalize": { (c: Call) throws(E) in try c.applyCapitalize() },
            "center": { (c: Call) throws(E) in try c.applyCenter() },
            "count": { (c: Call) throws(E) in try c.applyLength() },
            "d": { (c: Call) throws(E) in try c.applyDefault() },
            "default": { (c: Call) throws(E) in try c.applyDefault() },
            "dictsort": { (c: Call) throws(E) in try c.applyDictsort() },
            "e": { (c: Call) throws(E) in try c.applyEscape() },
            "escape": { (c: Call) throws(E) in try c.applyEscape() },
            "first": { (c: Call) throws(E) in try c.applyFirst() },
            "float": { (c: Call) throws(E) in try c.applyFloat() },
            "forceescape": { (c: Call) throws(E) in try c.applyForceEscape() },
            "format": { (c: Call) throws(E) in try c.applyFormat() },
            "indent": { (c: Call) throws(E) in try c.applyIndent() },
            "int": { (c: Call) throws(E) in try c.applyInt() },
            "items": { (c: Call) throws(E) in try c.applyItems() },
            "join": { (c: Call) throws(E) in try c.applyJoin() },
            "last": { (c: Call) throws(E) in try c.applyLast() },
            "length": { (c: Call) throws(E) in try c.applyLength() },
            "list": { (c: Call) throws(E) in try c.applyList() },
            "lower": { (c: Call) throws(E) in try c.applyLower() },
            "map": { (c: Call) throws(E) in try c.applyMap() },
            "max": { (c: Call) throws(E) in try c.applyMax() },
            "min": { (c: Call) throws(E) in try c.applyMax() },
            "reject": { (c: Call) throws(E) in try c.applySelect() },
            "rejectattr": { (c: Call) throws(E) in try c.applySelect() },
            "replace": { (c: Call) throws(E) in try c.applyReplace() },
            "reverse": { (c: Call) throws(E) in try c.applyReverse() },
            "round": { (c: Call) throws(E) in try c.applyRound() },
            "safe": { (c: Call) throws(E) in try c.applySafe() },
            "select": { (c: Call) throws(E) in try c.applySelect() },
            "selectattr": { (c: Call) throws(E) in try c.applySelect() },
            "sort": { (c: Call) throws(E) in try c.applySort() },
            "string": { (c: Call) throws(E) in try c.applyString() },
            "sum": { (c: Call) throws(E) in try c.applySum() },
            "title": { (c: Call) throws(E) in try c.applyTitle() },
            "tojson": { (c: Call) throws(E) in try c.applyTojson() },
            "trim": { (c: Call) throws(E) in try c.applyTrim() },
            "truncate": { (c: Call) throws(E) in try c.applyTruncate() },
            "unique": { (c: Call) throws(E) in try c.applyUnique() },
            "upper": { (c: Call) throws(E) in try c.applyUpper() },
            "wordcount": { (c: Call) throws(E) in try c.applyWordcount() },
        ]

        static let known = Set(table.keys)

        static func apply(_ name: String, _ value: Value, _ args: Arguments, _ interpreter: Interpreter, _ loc: TemplateSourceLocation) throws(E) -> Value {
            guard let filter = table[name] else { throw .unknownFilter(name, at: loc) }
            // A Markup is a str to every filter but the ones that treat it apart.
            let value = Interpreter.markupFilters.contains(name) ? value : value.plain
            return try filter(Call(name: name, value: value, args: args.plain, interpreter: interpreter, loc: loc))
        }

        /// One filter application: the value, the arguments and where it is; each filter is a method.
        struct Call {
            let name: String
            let value: Value
            let args: Arguments
            let interpreter: Interpreter
            let loc: TemplateSourceLocation

            func reader(_ parameters: [String], varargs: Bool = false) throws(E) -> ArgumentReader {
                try ArgumentReader(args, name, parameters, loc, varargs: varargs)
            }

            func items(_ v: Value) throws(E) -> [Value] {
                guard let items = v.iterate() else {
                    throw .invalidOperation("'\(v.typeName)' object is not iterable", at: loc)
                }
                return items
            }

            func applyAbs() throws(E) -> Value {
                _ = try reader([])
                try Operators.requireDefined(value, loc)
                switch value.number {
                case .int(let i)?:
                    if i == Int.min { throw .invalidOperation("integer result is too large", at: loc) }
                    return .int(abs(i))
                case .double(let d)?: return .double(abs(d))
                case nil: throw .invalidOperation("bad operand type for abs(): '\(value.typeName)'", at: loc)
                }
            }

            func applyAttr() throws(E) -> Value {
                let r = try reader(["name"])
                guard let attribute = try r.string("name") else { throw .invalidOperation("attr() needs a name", at: loc) }
                if case .dict(let d) = value {
                    return Methods.dict(d, attribute) ?? .undefined("'dict object' has no attribute '\(attribute)'")
                }
                return try interpreter.getAttribute(value, attribute, loc)
            }

            func applyCapitalize() throws(E) -> Value {
                _ = try reader([])
                return .string(PythonText.capitalize(value.str))
            }

            func applyCenter() throws(E) -> Value {
                let r = try reader(["width"])
                let width = try r.int("width") ?? 80
                try Jinja.checkLength(width, loc)
                return .string(Methods.pad(value.str, width: width, fill: " ", mode: "center"))
            }

            func applyLength() throws(E) -> Value {
                _ = try reader([])
                switch value {
                case .undefined: return .int(0)
                case .string(let s): return .int(s.unicodeScalars.count)
                case .array(let a), .tuple(let a): return .int(a.count)
                case .dict(let d): return .int(d.count)
                case .iterator(let box) where box.isView: return .int(box.peekAll.count)
                default: throw .invalidOperation("object of type '\(value.typeName)' has no len()", at: loc)
                }
            }

            func applyDefault() throws(E) -> Value {
                let r = try reader(["default_value", "boolean"])
                let fallback = r.value("default_value") ?? .string("")
                if value.isUndefined || ((r.bool("boolean") ?? false) && !value.isTruthy) { return fallback }
                return value
            }

            func applyDictsort() throws(E) -> Value {
                let r = try reader(["case_sensitive", "by", "reverse"])
                guard case .dict(let d) = value else {
                    throw .invalidOperation("dictsort requires a mapping, not \(value.typeName)", at: loc)
                }
                let by = try r.string("by") ?? "key"
                guard by == "key" || by == "value" else {
                    throw .invalidOperation("You can only sort by either \"key\" or \"value\"", at: loc)
                }
                let caseSensitive = r.bool("case_sensitive") ?? false
                let pairs = d.entries.map { [$0, $1] }
                let sorted = try sort(pairs, reverse: r.bool("reverse") ?? false, loc) { pair in
                    [caseSensitive ? pair[by == "key" ? 0 : 1] : ignoreCase(pair[by == "key" ? 0 : 1])]
                }
                return .array(sorted.map { .tuple($0) })
            }

            /// markupsafe's `escape`: a `Markup` as it is, anything else escaped into one.
            func applyEscape() throws(E) -> Value {
                _ = try reader([])
                return value.isMarkup ? value : .markup(htmlEscape(value.str))
            }

            func applyForceEscape() throws(E) -> Value {
                _ = try reader([])
                return .markup(htmlEscape(value.str))
            }

            func applyFirst() throws(E) -> Value {
                _ = try reader([])
                if case .iterator(let box) = value {
                    return box.next() ?? .undefined("No first item, sequence was empty.")
                }
                return try items(value).first ?? .undefined("No first item, sequence was empty.")
            }

            func applyLast() throws(E) -> Value {
                _ = try reader([])
                if case .iterator(let box) = value, !box.isView {
                    throw .invalidOperation("'\(value.typeName)' object is not reversible", at: loc)
                }
                return try items(value).last ?? .undefined("No last item, sequence was empty.")
            }

            func applyFloat() throws(E) -> Value {
                let r = try reader(["default"])
                try Operators.requireDefined(value, loc)
                return toFloat(value) ?? r.value("default") ?? .double(0)
            }

            func applyFormat() throws(E) -> Value {
                if !args.positional.isEmpty && !args.keyword.isEmpty {
                    throw .invalidOperation("can't handle positional and keyword arguments at the same time", at: loc)
                }
                var mapping = ValueDict()
                for (k, v) in args.keyword { mapping[k] = v }
                let argument: Value = args.keyword.isEmpty ? .tuple(args.positional) : .dict(mapping)
                return .string(try Operators.printf(value.str, argument, loc))
            }

            func applyIndent() throws(E) -> Value {
                let r = try reader(["width", "first", "blank"])
                let indentation: String
                switch r.value("width") {
                case .string(let s)?: indentation = s
                default:
                    let width = try r.int("width") ?? 4
                    try Jinja.checkLength(width, loc)
                    indentation = String(repeating: " ", count: max(0, width))
                }
                try Operators.requireDefined(value, loc)
                guard case .string(let text) = value else {
                    throw .invalidOperation("unsupported operand type(s) for +=: '\(value.typeName)' and 'str'", at: loc)
                }
                let lines = PythonText.splitLines(text + "\n")
                var result: String
                if r.bool("blank") ?? false {
                    result = lines.joined(separator: "\n" + indentation)
                } else {
                    result = lines.first ?? ""
                    let rest = lines.dropFirst()
                    if !rest.isEmpty {
                        result += "\n" + rest.map { $0.isEmpty ? $0 : indentation + $0 }.joined(separator: "\n")
                    }
                }
                if r.bool("first") ?? false { result = indentation + result }
                return .string(result)
            }

            func applyInt() throws(E) -> Value {
                let r = try reader(["default", "base"])
                try Operators.requireDefined(value, loc)
                return toInt(value, base: try r.int("base") ?? 10) ?? r.value("default") ?? .int(0)
            }

            func applyItems() throws(E) -> Value {
                _ = try reader([])
                switch value {
                case .undefined: return .iterator(IteratorBox(.generator, []))
                case .dict(let d): return .iterator(IteratorBox(.generator, d.entries.map { .tuple([$0, $1]) }))
                default: throw .invalidOperation("Can only get item pairs from a mapping.", at: loc)
                }
            }

            func applyJoin() throws(E) -> Value {
                let r = try reader(["d", "attribute"])
                var list = try items(value)
                if let attribute = r.value("attribute"), !isNone(attribute) {
                    let getter = try attributeGetter(attribute, interpreter, loc)
                    list = try list.map { (v) throws(E) in try getter(v) }
                }
                return .string(list.map(\.str).joined(separator: r.value("d")?.str ?? ""))
            }

            func applyList() throws(E) -> Value {
                _ = try reader([])
                return .array(try items(value))
            }

            func applyLower() throws(E) -> Value {
                _ = try reader([])
                return .string(PythonText.lower(value.str))
            }

            func applyUpper() throws(E) -> Value {
                _ = try reader([])
                return .string(PythonText.upper(value.str))
            }

            func applyTitle() throws(E) -> Value {
                _ = try reader([])
                return .string(PythonText.jinjaTitle(value.str))
            }

            func applyMap() throws(E) -> Value {
                // Jinja's map and select start with `if value:`: a falsy value (None, 0, "")
                // maps to nothing, before any argument is read.
                guard value.isTruthy else { return .iterator(IteratorBox(.generator, [])) }
                let list = try items(value)
                if args.positional.isEmpty, let attribute = args.keywordValue("attribute") {
                    let r = try reader(["attribute", "default"])
                    let fallback = r.value("default")
                    let getter = try attributeGetter(attribute, interpreter, loc, default: fallback.flatMap { isNone($0) ? nil : $0 })
                    return .iterator(IteratorBox(.generator, try list.map { (v) throws(E) in try getter(v) }))
                }
                guard case .string(let filter)? = args.positional.first else {
                    throw .invalidOperation("map requires a filter argument", at: loc)
                }
                guard known.contains(filter) else { throw .unknownFilter(filter, at: loc) }
                let rest = Arguments(positional: Array(args.positional.dropFirst()), keyword: args.keyword)
                return .iterator(IteratorBox(.generator, try list.map { (v) throws(E) in try apply(filter, v, rest, interpreter, loc) }))
            }

            func applyMax() throws(E) -> Value {
                let r = try reader(["case_sensitive", "attribute"])
                let list = try items(value)
                guard !list.isEmpty else { return .undefined("No aggregated item, sequence was empty.") }
                let getter = try attributeGetter(r.value("attribute") ?? .none, interpreter, loc)
                let caseSensitive = r.bool("case_sensitive") ?? false
                var best = list[0]
                var bestKey = try getter(best)
                if !caseSensitive { bestKey = ignoreCase(bestKey) }
                for item in list.dropFirst() {
                    var key = try getter(item)
                    if !caseSensitive { key = ignoreCase(key) }
                    let c = try Operators.order(key, bestKey, name == "max" ? ">" : "<", loc)
                    if name == "max" ? c > 0 : c < 0 {
                        best = item
                        bestKey = key
                    }
                }
                return best
            }

            func applySelect() throws(E) -> Value {
                guard value.isTruthy else { return .iterator(IteratorBox(.generator, [])) }
                let list = try items(value)
                let byAttribute = name.hasSuffix("attr")
                var offset = 0
                var transform: (Value) throws(E) -> Value = { v throws(E) in v }
                if byAttribute {
                    guard let attribute = args.positional.first else {
                        throw .invalidOperation("Missing parameter for attribute name", at: loc)
                    }
                    transform = try attributeGetter(attribute, interpreter, loc)
                    offset = 1
                }
                var test: String? = nil
                if args.positional.count > offset {
                    guard case .string(let t) = args.positional[offset] else {
                        throw .invalidOperation("the test name must be a string", at: loc)
                    }
                    guard Predicates.known.contains(t) else { throw .unknownTest(t, at: loc) }
                    test = t
                }
                let testArgs = Arguments(positional: Array(args.positional.dropFirst(offset + 1)), keyword: args.keyword)
                let keep = name.hasPrefix("select")
                var result: [Value] = []
                for item in list {
                    let v = try transform(item)
                    let passed = try test.map { (t) throws(E) in try Predicates.apply(t, v, testArgs, interpreter, loc) } ?? v.isTruthy
                    if passed == keep { result.append(item) }
                }
                return .iterator(IteratorBox(.generator, result))
            }

            func applyReplace() throws(E) -> Value {
                let r = try reader(["old", "new", "count"])
                return .string(PythonText.replace(value.str, try r.required("old").str, try r.required("new").str,
                                                  count: try r.int("count") ?? -1))
            }

            func applyReverse() throws(E) -> Value {
                _ = try reader([])
                switch value {
                case .string(let s):
                    return .string(PythonText.string(s.unicodeScalars.reversed()))
                case .iterator(let box) where !box.isView:
                    return .array(box.consumeAll().reversed())
                default:
                    guard let list = value.iterate() else { throw .invalidOperation("argument must be iterable", at: loc) }
                    return .iterator(IteratorBox(.reverseIterator, list.reversed()))
                }
            }

            func applyRound() throws(E) -> Value {
                let r = try reader(["precision", "method"])
                let precision = try r.int("precision") ?? 0
                let method = try r.string("method") ?? "common"
                guard ["common", "ceil", "floor"].contains(method) else {
                    throw .invalidOperation("method must be common, ceil or floor", at: loc)
                }
                try Operators.requireDefined(value, loc)
                guard let n = value.number else {
                    throw .invalidOperation("type \(value.typeName) doesn't define __round__ method", at: loc)
                }
                if method == "common" {
                    switch n {
                    case .int(let i): return .int(i)
                    case .double(let d): return .double(pythonRound(d, precision))
                    }
                }
                let scale = Foundation.pow(10.0, Double(precision))
                let scaled = (n.asDouble * scale).rounded(method == "ceil" ? .up : .down)
                return .double(scaled / scale)
            }

            func applySafe() throws(E) -> Value {
                _ = try reader([])
                return .markup(value.str)
            }

            /// `str()`, but a `Markup` stays one (Jinja's `soft_str`).
            func applyString() throws(E) -> Value {
                _ = try reader([])
                return value.isMarkup ? value : .string(value.str)
            }

            func applySort() throws(E) -> Value {
                let r = try reader(["reverse", "case_sensitive", "attribute"])
                let list = try items(value)
                let caseSensitive = r.bool("case_sensitive") ?? false
                let attribute = r.value("attribute") ?? .none
                var getters: [(Value) throws(E) -> Value] = []
                if case .string(let s) = attribute, s.contains(",") {
                    for part in s.split(separator: ",") {
                        getters.append(try attributeGetter(.string(String(part)), interpreter, loc))
                    }
                } else {
                    getters.append(try attributeGetter(attribute, interpreter, loc))
                }
                let sorted = try sort(list, reverse: r.bool("reverse") ?? false, loc) { (item) throws(E) in
                    var keys: [Value] = []
                    for g in getters {
                        let k = try g(item)
                        keys.append(caseSensitive ? k : ignoreCase(k))
                    }
                    return keys
                }
                return .array(sorted)
            }

            func applySum() throws(E) -> Value {
                let r = try reader(["attribute", "start"])
                var list = try items(value)
                if let attribute = r.value("attribute"), !isNone(attribute) {
                    let getter = try attributeGetter(attribute, interpreter, loc)
                    list = try list.map { (v) throws(E) in try getter(v) }
                }
                var total = r.value("start") ?? .int(0)
                for item in list { total = try Operators.binary(.add, total, item, loc) }
                return total
            }

            func applyTojson() throws(E) -> Value {
                let r = try reader(["ensure_ascii", "indent", "separators", "sort_keys"])
                var indent: String? = nil
                switch r.value("indent") {
                case .string(let s)?: indent = s
                case .int(let i)?:
                    try Jinja.checkLength(i, loc)
                    indent = String(repeating: " ", count: max(0, i))
                case .bool(let b)?: indent = String(repeating: " ", count: b ? 1 : 0)
                case nil, .none?: indent = nil
                case let other?: throw .invalidOperation("indent must be an int or a string, not \(other.typeName)", at: loc)
                }
                var separators: (String, String)? = nil
                if let s = r.value("separators"), !isNone(s) {
                    guard let pair = s.iterate(), pair.count == 2, case .string(let item) = pair[0], case .string(let key) = pair[1] else {
                        throw .invalidOperation("separators must be a pair of strings", at: loc)
                    }
                    separators = (item, key)
                }
                let dumper = JSONDumper(indent: indent, separators: separators, sortKeys: r.bool("sort_keys") ?? false,
                                        ensureASCII: r.bool("ensure_ascii") ?? false)
                return .string(try dumper.dump(value, at: loc))
            }

            func applyTrim() throws(E) -> Value {
                let r = try reader(["chars"])
                return .string(PythonText.strip(value.str, try r.string("chars")))
            }

            func applyTruncate() throws(E) -> Value {
                let r = try reader(["length", "killwords", "end", "leeway"])
                let s = value.str
                let length = try r.int("length") ?? 255
                let end = try r.string("end") ?? "..."
                let leeway = try r.int("leeway") ?? 5
                let scalars = Array(s.unicodeScalars)
                if scalars.count <= length + leeway { return .string(s) }
                let head = PythonText.string(scalars.prefix(max(0, length - end.unicodeScalars.count)))
                if r.bool("killwords") ?? false { return .string(head + end) }
                let kept = PythonText.rsplit(head, " ", maxSplit: 1)?.first ?? head
                return .string(kept + end)
            }

            func applyUnique() throws(E) -> Value {
                let r = try reader(["case_sensitive", "attribute"])
                let caseSensitive = r.bool("case_sensitive") ?? false
                let getter = try attributeGetter(r.value("attribute") ?? .none, interpreter, loc)
                var seen: [Value] = []
                var result: [Value] = []
                for item in try items(value) {
                    var key = try getter(item)
                    if !caseSensitive { key = ignoreCase(key) }
                    if !seen.contains(where: { $0.equals(key) }) {
                        seen.append(key)
                        result.append(item)
                    }
                }
                return .iterator(IteratorBox(.generator, result))
            }

            func applyWordcount() throws(E) -> Value {
                _ = try reader([])
                var count = 0
                var inWord = false
                for c in value.str.unicodeScalars {
                    let isWord = c == "_" || c.properties.isAlphabetic || c.properties.numericType != nil
                    if isWord && !inWord { count += 1 }
                    inWord = isWord
                }
                return .int(count)
            }
        }


        // MARK: - Helpers

        private static func isNone(_ v: Value) -> Bool {
            if case .none = v { return true }
            return false
        }

        static func ignoreCase(_ v: Value) -> Value {
            if case .string(let s) = v { return .string(PythonText.lower(s)) }
            return v
        }

        /// Jinja's `make_attrgetter`: `"a.b.0"` looks up item `a`, then `b`, then index 0.
        static func attributeGetter(_ attribute: Value, _ interpreter: Interpreter, _ loc: TemplateSourceLocation,
                                    default fallback: Value? = nil) throws(E) -> (Value) throws(E) -> Value {
            var parts: [Value] = []
            switch attribute {
            case .none: break
            case .string(let s):
                for p in s.split(separator: ".", omittingEmptySubsequences: false) {
                    let part = String(p)
                    if !part.isEmpty, part.unicodeScalars.allSatisfy({ $0.properties.numericType == .decimal }), let n = Int(part) {
                        parts.append(.int(n))
                    } else {
                        parts.append(.string(part))
                    }
                }
            default: parts = [attribute]
            }
            return { (item: Value) throws(E) -> Value in
                var v = item
                for part in parts {
                    v = try interpreter.getItem(v, part, loc)
                    if let fallback, v.isUndefined { v = fallback }
                }
                return v
            }
        }

        private static func sort<T>(_ items: [T], reverse: Bool, _ loc: TemplateSourceLocation,
                                    key: (T) throws(E) -> [Value]) throws(E) -> [T] {
            var keyed: [(T, Value)] = []
            for item in items { keyed.append((item, .array(try key(item)))) }
            try Sorting.stableSort(&keyed) { (a, b) throws(E) in
                reverse ? try Operators.order(b.1, a.1, "<", loc) < 0 : try Operators.order(a.1, b.1, "<", loc) < 0
            }
            return keyed.map(\.0)
        }

        static func htmlEscape(_ s: String) -> String {
            var out = ""
            for c in s.unicodeScalars {
                switch c {
                case "&": out += "&amp;"
                case "<": out += "&lt;"
                case ">": out += "&gt;"
                case "\"": out += "&#34;"
                case "'": out += "&#39;"
                default: out.unicodeScalars.append(c)
                }
            }
            return out
        }

        /// Python's `float(value)`, or nil where Python raises.
        static func toFloat(_ value: Value) -> Value? {
            switch value {
            case .int(let i): return .double(Double(i))
            case .bool(let b): return .double(b ? 1 : 0)
            case .double: return value
            case .string(let s):
                let t = PythonText.asciiDigits(PythonText.strip(s, nil)).replacingOccurrences(of: "_", with: "")
                let lower = t.lowercased()
                switch lower {
                case "inf", "+inf", "infinity", "+infinity": return .double(.infinity)
                case "-inf", "-infinity": return .double(-.infinity)
                case "nan", "+nan", "-nan": return .double(.nan)
                default: break
                }
                guard !t.isEmpty, t.unicodeScalars.allSatisfy({ "0123456789+-.eE".unicodeScalars.contains($0) }),
                      let d = Double(t) else { return nil }
                return .double(d)
            default: return nil
            }
        }

        /// Jinja's `int` filter: `int(value, base)`, else `int(float(value))`, or nil.
        static func toInt(_ value: Value, base: Int) -> Value? {
            switch value {
            case .int: return value
            case .bool(let b): return .int(b ? 1 : 0)
            case .double(let d):
                guard d.isFinite, abs(d) < 9.2e18 else { return nil }
                return .int(Int(d))
            case .string(let s):
                var t = PythonText.asciiDigits(PythonText.strip(s, nil))
                var negative = false
                if t.hasPrefix("-") || t.hasPrefix("+") {
                    negative = t.hasPrefix("-")
                    t.removeFirst()
                }
                var radix = base
                let lower = t.lowercased()
                for (prefix, r) in [("0x", 16), ("0o", 8), ("0b", 2)] where lower.hasPrefix(prefix) && (base == r || base == 0) {
                    t = String(t.dropFirst(2))
                    radix = r
                }
                if radix == 0 { radix = 10 }
                let digits = t.hasPrefix("_") ? "" : t.replacingOccurrences(of: "_", with: "")
                if !digits.isEmpty, !t.contains("__"), !t.hasSuffix("_"), (2...36).contains(radix), let n = Int(digits, radix: radix) {
                    return .int(negative ? -n : n)
                }
                if case .double(let d)? = toFloat(value) { return toInt(.double(d), base: 10) }
                return nil
            default:
                return nil
            }
        }

        /// Python's `round(x, n)` for floats: half to even on the exact binary value.
        static func pythonRound(_ d: Double, _ precision: Int) -> Double {
            guard d.isFinite else { return d }
            if precision == 0 { return d.rounded(.toNearestOrEven) }
            if precision > 0 {
                let text = String(format: "%.\(min(precision, 340))f", d)
                return Double(text) ?? d
            }
            let scale = Foundation.pow(10.0, Double(-precision))
            return (d / scale).rounded(.toNearestOrEven) * scale
        }
    }
}
