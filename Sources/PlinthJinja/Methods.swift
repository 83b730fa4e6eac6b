extension Jinja {
    /// Python methods that templates call on strings, dicts and lists (`content.strip()`,
    /// `message.get('name')`, `tools.index(t)`), bound to their receiver.
    enum Methods {
        typealias E = ChatTemplateError

        private static func bound(_ name: String, _ body: @escaping (Arguments, TemplateSourceLocation) throws(E) -> Value) -> Value {
            .function(Function(name: name, body: body))
        }

        /// Attributes that exist in Python but that the immutable sandbox refuses to give out.
        static func isUnsafe(_ object: Value, _ name: String) -> Bool {
            if name.hasPrefix("__") { return true }
            switch object {
            case .array: return ["append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"].contains(name)
            case .dict: return ["clear", "pop", "popitem", "setdefault", "update"].contains(name)
            default: return false
            }
        }

        // MARK: - dict

        static func dict(_ d: ValueDict, _ name: String) -> Value? {
            switch name {
            case "items":
                return bound(name) { args, loc throws(E) in
                    _ = try ArgumentReader(args, "items", [], loc)
                    return .iterator(IteratorBox(.dictItems, d.entries.map { .tuple([$0, $1]) }))
                }
            case "keys":
                return bound(name) { args, loc throws(E) in
                    _ = try ArgumentReader(args, "keys", [], loc)
                    return .iterator(IteratorBox(.dictKeys, d.keys))
                }
            case "values":
                return bound(name) { args, loc throws(E) in
                    _ = try ArgumentReader(args, "values", [], loc)
                    return .iterator(IteratorBox(.dictValues, d.values))
                }
            case "get":
                return bound(name) { args, loc throws(E) in
                    guard args.keyword.isEmpty, (1...2).contains(args.positional.count) else {
                        throw .invalidOperation("get() takes 1 or 2 positional arguments", at: loc)
                    }
                    return d[args.positional[0]] ?? (args.positional.count > 1 ? args.positional[1] : .none)
                }
            case "copy":
                return bound(name) { _, _ throws(E) in .dict(d) }
            default:
                return nil
            }
        }

        // MARK: - list and tuple

        private static func sequenceMethod(_ items: [Value], _ name: String, _ typeName: String) -> Value? {
            switch name {
            case "index":
                return bound(name) { args, loc throws(E) in
                    guard let needle = args.positional.first else {
                        throw .invalidOperation("index expected at least 1 argument, got 0", at: loc)
                    }
                    guard let i = items.firstIndex(where: { $0.equals(needle) }) else {
                        throw .invalidOperation("\(needle.repr) is not in \(typeName)", at: loc)
                    }
                    return .int(i)
                }
            case "count":
                return bound(name) { args, loc throws(E) in
                    guard args.positional.count == 1 else {
                        throw .invalidOperation("count() takes exactly one argument", at: loc)
                    }
                    return .int(items.filter { $0.equals(args.positional[0]) }.count)
                }
            default:
                return nil
            }
        }

        static func list(_ items: [Value], _ name: String) -> Value? {
            if name == "copy" { return bound(name) { _, _ throws(E) in .array(items) } }
            return sequenceMethod(items, name, "list")
        }

        static func tuple(_ items: [Value], _ name: String) -> Value? {
            sequenceMethod(items, name, "tuple")
        }

        // MARK: - str

        static func string(_ s: String, _ name: String) -> Value? {
            switch name {
            case "strip", "lstrip", "rstrip":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["chars"], loc)
                    let side: PythonText.StripSide = name == "strip" ? .both : (name == "lstrip" ? .left : .right)
                    return .string(PythonText.strip(s, try r.string("chars"), side: side))
                }
            case "split", "rsplit":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["sep", "maxsplit"], loc)
                    let sep = try r.string("sep")
                    let maxSplit = try r.int("maxsplit") ?? -1
                    let parts = name == "split" ? PythonText.split(s, sep, maxSplit: maxSplit)
                        : PythonText.rsplit(s, sep, maxSplit: maxSplit)
                    guard let parts else { throw .invalidOperation("empty separator", at: loc) }
                    return .array(parts.map { .string($0) })
                }
            case "splitlines":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["keepends"], loc)
                    return .array(PythonText.splitLines(s, keepEnds: r.bool("keepends") ?? false).map { .string($0) })
                }
            case "startswith", "endswith":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["prefix", "start", "end"], loc)
                    let affix = try r.required("prefix")
                    var candidates: [String] = []
                    switch affix {
                    case .string(let a): candidates = [a]
                    case .tuple(let items):
                        for item in items {
                            guard case .string(let a) = item else {
                                throw .invalidOperation("tuple for \(name) must only contain str, not \(item.typeName)", at: loc)
                            }
                            candidates.append(a)
                        }
                    default:
                        throw .invalidOperation("\(name) first arg must be str or a tuple of str, not \(affix.typeName)", at: loc)
                    }
                    var scalars = Array(s.unicodeScalars)
                    let start = try r.int("start"), end = try r.int("end")
                    if start != nil || end != nil {
                        guard case .string(let sliced) = try Operators.slice(.string(s), start.map { .int($0) }, end.map { .int($0) }, nil, loc) else {
                            return .bool(false)
                        }
                        scalars = Array(sliced.unicodeScalars)
                    }
                    for c in candidates {
                        let p = Array(c.unicodeScalars)
                        if p.count <= scalars.count,
                           name == "startswith" ? scalars.prefix(p.count).elementsEqual(p) : scalars.suffix(p.count).elementsEqual(p) {
                            return .bool(true)
                        }
                    }
                    return .bool(false)
                }
            case "upper", "lower", "title", "capitalize", "swapcase", "casefold":
                return bound(name) { args, loc throws(E) in
                    _ = try ArgumentReader(args, name, [], loc)
                    switch name {
                    case "upper": return .string(PythonText.upper(s))
                    case "lower": return .string(PythonText.lower(s))
                    case "casefold": return .string(PythonText.casefold(s))
                    case "title": return .string(PythonText.title(s))
                    case "capitalize": return .string(PythonText.capitalize(s))
                    default:
                        return .string(s.unicodeScalars.map { c in
                            c.properties.isUppercase ? c.properties.lowercaseMapping
                                : (c.properties.isLowercase ? c.properties.uppercaseMapping : String(c))
                        }.joined())
                    }
                }
            case "replace":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["old", "new", "count"], loc)
                    guard case .string(let old) = try r.required("old"), case .string(let new) = try r.required("new") else {
                        throw .invalidOperation("replace() arguments must be str", at: loc)
                    }
                    return .string(PythonText.replace(s, old, new, count: try r.int("count") ?? -1))
                }
            case "find", "rfind", "index", "rindex", "count":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["sub"], loc)
                    guard case .string(let sub) = try r.required("sub") else {
                        throw .invalidOperation("\(name)() argument must be str", at: loc)
                    }
                    if name == "count" { return .int(PythonText.count(s, sub)) }
                    let position = PythonText.find(s, sub, reverse: name.hasPrefix("r"))
                    if let position { return .int(position) }
                    if name.hasSuffix("index") { throw .invalidOperation("substring not found", at: loc) }
                    return .int(-1)
                }
            case "join":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["iterable"], loc)
                    let iterable = try r.required("iterable")
                    guard let items = iterable.iterate() else {
                        throw .invalidOperation("can only join an iterable", at: loc)
                    }
                    var parts: [String] = []
                    for (i, item) in items.enumerated() {
                        guard case .string(let part) = item else {
                            throw .invalidOperation("sequence item \(i): expected str instance, \(item.typeName) found", at: loc)
                        }
                        parts.append(part)
                    }
                    return .string(parts.joined(separator: s))
                }
            case "isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "islower", "isupper":
                return bound(name) { args, loc throws(E) in
                    _ = try ArgumentReader(args, name, [], loc)
                    let scalars = Array(s.unicodeScalars)
                    func cased(_ c: Unicode.Scalar) -> Bool { c.properties.isUppercase || c.properties.isLowercase }
                    switch name {
                    case "islower":
                        return .bool(scalars.contains(where: cased) && !scalars.contains { $0.properties.isUppercase })
                    case "isupper":
                        return .bool(scalars.contains(where: cased) && !scalars.contains { $0.properties.isLowercase })
                    default:
                        guard !scalars.isEmpty else { return .bool(false) }
                        return .bool(scalars.allSatisfy { c in
                            switch name {
                            case "isdigit", "isdecimal": return c.properties.numericType == .decimal || (name == "isdigit" && c.properties.numericType == .digit)
                            case "isnumeric": return c.properties.numericType != nil
                            case "isalpha": return c.properties.isAlphabetic
                            case "isalnum": return c.properties.isAlphabetic || c.properties.numericType != nil
                            default: return PythonText.isSpace(c)
                            }
                        })
                    }
                }
            case "removeprefix", "removesuffix":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["affix"], loc)
                    guard case .string(let affix) = try r.required("affix") else {
                        throw .invalidOperation("\(name)() argument must be str", at: loc)
                    }
                    let a = Array(s.unicodeScalars), p = Array(affix.unicodeScalars)
                    if name == "removeprefix", a.starts(with: p) { return .string(PythonText.string(a.dropFirst(p.count))) }
                    if name == "removesuffix", !p.isEmpty, a.suffix(p.count).elementsEqual(p) {
                        return .string(PythonText.string(a.dropLast(p.count)))
                    }
                    return .string(s)
                }
            case "partition", "rpartition":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["sep"], loc)
                    guard case .string(let sep) = try r.required("sep"), !sep.isEmpty else {
                        throw .invalidOperation("empty separator", at: loc)
                    }
                    let a = Array(s.unicodeScalars)
                    guard let i = PythonText.find(s, sep, reverse: name == "rpartition") else {
                        return name == "partition" ? .tuple([.string(s), .string(""), .string("")])
                            : .tuple([.string(""), .string(""), .string(s)])
                    }
                    let n = sep.unicodeScalars.count
                    return .tuple([.string(PythonText.string(a[..<i])), .string(sep), .string(PythonText.string(a[(i + n)...]))])
                }
            case "center", "ljust", "rjust", "zfill":
                return bound(name) { args, loc throws(E) in
                    let r = try ArgumentReader(args, name, ["width", "fillchar"], loc)
                    let width = try r.int("width") ?? 0
                    try Jinja.checkLength(width, loc)
                    let fill = try r.string("fillchar") ?? (name == "zfill" ? "0" : " ")
                    return .string(pad(s, width: width, fill: fill, mode: name))
                }
            case "format":
                return bound(name) { args, loc throws(E) in .string(try format(s, args, loc)) }
            default:
                return nil
            }
        }

        static func pad(_ s: String, width: Int, fill: String, mode: String) -> String {
            let n = s.unicodeScalars.count
            guard width > n else { return s }
            let margin = width - n
            func fillString(_ k: Int) -> String { String(repeating: fill, count: k) }
            switch mode {
            case "ljust": return s + fillString(margin)
            case "rjust": return fillString(margin) + s
            case "zfill":
                if let first = s.unicodeScalars.first, first == "+" || first == "-" {
                    return String(first) + fillString(margin) + String(s.unicodeScalars.dropFirst())
                }
                return fillString(margin) + s
            default:
                let left = margin / 2 + (margin & width & 1)
                return fillString(left) + s + fillString(margin - left)
            }
        }

        /// `str.format` with `{}`, `{0}`, `{name}`, `!r`/`!s` conversions and no format specs.
        static func format(_ s: String, _ args: Arguments, _ loc: TemplateSourceLocation) throws(E) -> String {
            let a = Array(s.unicodeScalars)
            var out = ""
            var i = 0
            var auto = 0
            while i < a.count {
                let c = a[i]
                if c == "{" {
                    if i + 1 < a.count, a[i + 1] == "{" { out += "{"; i += 2; continue }
                    guard let close = a[i...].firstIndex(of: "}") else {
                        throw .invalidOperation("Single '{' encountered in format string", at: loc)
                    }
                    var field = PythonText.string(a[(i + 1)..<close])
                    var conversion: Character? = nil
                    if let bang = field.firstIndex(of: "!") {
                        conversion = field[field.index(after: bang)...].first
                        field = String(field[..<bang])
                    }
                    if field.contains(":") {
                        throw .invalidOperation("format specifications in str.format are not supported", at: loc)
                    }
                    let value: Value
                    if field.isEmpty {
                        guard auto < args.positional.count else {
                            throw .invalidOperation("Replacement index \(auto) out of range for positional args tuple", at: loc)
                        }
                        value = args.positional[auto]
                        auto += 1
                    } else if let n = Int(field) {
                        guard n < args.positional.count else {
                            throw .invalidOperation("Replacement index \(n) out of range for positional args tuple", at: loc)
                        }
                        value = args.positional[n]
                    } else {
                        guard let v = args.keywordValue(field) else { throw .invalidOperation("KeyError: '\(field)'", at: loc) }
                        value = v
                    }
                    out += conversion == "r" ? value.repr : value.str
                    i = close + 1
                } else if c == "}" {
                    if i + 1 < a.count, a[i + 1] == "}" { out += "}"; i += 2; continue }
                    throw .invalidOperation("Single '}' encountered in format string", at: loc)
                } else {
                    out.unicodeScalars.append(c)
                    i += 1
                }
            }
            return out
        }
    }
}
