import Foundation

extension Jinja {
    /// Python's arithmetic, comparison, membership and slicing on template values.
    enum Operators {
        typealias E = ChatTemplateError

        /// markupsafe's operators on a `Markup`: `+` escapes the `str` it joins, `*` keeps the
        /// type, `%` escapes the arguments it formats. Nil: the operator reads it as its `str`.
        private static func markupBinary(_ op: BinaryOperator, _ a: Value, _ b: Value, _ loc: TemplateSourceLocation) throws(E) -> Value? {
            let escape = Filters.htmlEscape
            switch (op, a, b) {
            case (.add, .markup(let x), .markup(let y)): return .markup(x + y)
            case (.add, .markup(let x), .string(let y)): return .markup(x + escape(y))
            case (.add, .string(let x), .markup(let y)): return .markup(escape(x) + y)
            case (.add, .undefined, _), (.add, _, .undefined): return nil
            case (.add, _, _): throw unsupported("+", a, b, loc)
            case (.multiply, _, _):
                guard case .string(let s) = try binary(op, a.plain, b.plain, loc) else { return nil }
                return .markup(s)
            case (.modulo, .markup(let format), _):
                // Each argument formats as its escaped text (numbers as numbers; undefined as nothing).
                func escaped(_ v: Value) -> Value {
                    switch v {
                    case .markup, .int, .double, .bool: return v
                    default: return .string(escape(v.str))
                    }
                }
                let args: Value
                switch b {
                case .tuple(let items): args = .tuple(items.map(escaped))
                case .dict(let d):
                    var e = ValueDict()
                    for (k, v) in d.entries { e[k] = escaped(v) }
                    args = .dict(e)
                default: args = escaped(b)
                }
                return .markup(try printf(format, args, loc))
            default: return nil
            }
        }

        static func requireDefined(_ v: Value, _ loc: TemplateSourceLocation) throws(E) {
            if case .undefined(let u) = v { throw u.error(at: loc) }
        }

        private static func unsupported(_ op: String, _ a: Value, _ b: Value, _ loc: TemplateSourceLocation) -> E {
            .invalidOperation("unsupported operand type(s) for \(op): '\(a.typeName)' and '\(b.typeName)'", at: loc)
        }

        private static func overflow(_ loc: TemplateSourceLocation) -> E {
            .invalidOperation("integer result is too large (beyond 64 bits)", at: loc)
        }

        static func binary(_ op: BinaryOperator, _ a: Value, _ b: Value, _ loc: TemplateSourceLocation) throws(E) -> Value {
            if a.isMarkup || b.isMarkup, let r = try markupBinary(op, a, b, loc) { return r }
            let (a, b) = (a.plain, b.plain)
            try requireDefined(a, loc)
            if case .string(let format) = a, op == .modulo {
                // str.__mod__ never calls into its argument for a format without conversions.
                return .string(try printf(format, b, loc))
            }
            try requireDefined(b, loc)
            switch op {
            case .add:
                switch (a, b) {
                case (.string(let x), .string(let y)): return .string(x + y)
                case (.array(let x), .array(let y)): return .array(x + y)
                case (.tuple(let x), .tuple(let y)): return .tuple(x + y)
                case (.string, _):
                    throw .invalidOperation("can only concatenate str (not \"\(b.typeName)\") to str", at: loc)
                case (.array, _):
                    throw .invalidOperation("can only concatenate list (not \"\(b.typeName)\") to list", at: loc)
                default:
                    guard let x = a.number, let y = b.number else { throw unsupported("+", a, b, loc) }
                    if case .int(let i) = x, case .int(let j) = y {
                        let (r, o) = i.addingReportingOverflow(j)
                        if o { throw overflow(loc) }
                        return .int(r)
                    }
                    return .double(x.asDouble + y.asDouble)
                }
            case .subtract:
                guard let x = a.number, let y = b.number else { throw unsupported("-", a, b, loc) }
                if case .int(let i) = x, case .int(let j) = y {
                    let (r, o) = i.subtractingReportingOverflow(j)
                    if o { throw overflow(loc) }
                    return .int(r)
                }
                return .double(x.asDouble - y.asDouble)
            case .multiply:
                func repeated<T>(_ items: [T], _ n: Value.Number) throws(E) -> [T]? {
                    guard case .int(let count) = n else { return nil }
                    guard count > 0 else { return [] }
                    let (total, overflow) = items.count.multipliedReportingOverflow(by: count)
                    try Jinja.checkLength(overflow ? Int.max : total, loc)
                    return Array([[T]](repeating: items, count: count).joined())
                }
                switch (a, b) {
                case (.string(let s), _):
                    if let n = b.number, let r = try repeated(Array(s.unicodeScalars), n) { return .string(PythonText.string(r)) }
                    throw .invalidOperation("can't multiply sequence by non-int of type '\(b.typeName)'", at: loc)
                case (_, .string(let s)):
                    if let n = a.number, let r = try repeated(Array(s.unicodeScalars), n) { return .string(PythonText.string(r)) }
                    throw .invalidOperation("can't multiply sequence by non-int of type '\(a.typeName)'", at: loc)
                case (.array(let items), _):
                    if let n = b.number, let r = try repeated(items, n) { return .array(r) }
                    throw .invalidOperation("can't multiply sequence by non-int of type '\(b.typeName)'", at: loc)
                case (_, .array(let items)):
                    if let n = a.number, let r = try repeated(items, n) { return .array(r) }
                    throw .invalidOperation("can't multiply sequence by non-int of type '\(a.typeName)'", at: loc)
                case (.tuple(let items), _):
                    if let n = b.number, let r = try repeated(items, n) { return .tuple(r) }
                    throw .invalidOperation("can't multiply sequence by non-int of type '\(b.typeName)'", at: loc)
                case (_, .tuple(let items)):
                    if let n = a.number, let r = try repeated(items, n) { return .tuple(r) }
                    throw .invalidOperation("can't multiply sequence by non-int of type '\(a.typeName)'", at: loc)
                default:
                    guard let x = a.number, let y = b.number else { throw unsupported("*", a, b, loc) }
                    if case .int(let i) = x, case .int(let j) = y {
                        let (r, o) = i.multipliedReportingOverflow(by: j)
                        if o { throw overflow(loc) }
                        return .int(r)
                    }
                    return .double(x.asDouble * y.asDouble)
                }
            case .divide:
                guard let x = a.number, let y = b.number else { throw unsupported("/", a, b, loc) }
                if y.asDouble == 0 { throw .invalidOperation("division by zero", at: loc) }
                return .double(x.asDouble / y.asDouble)
            case .floorDivide:
                guard let x = a.number, let y = b.number else { throw unsupported("//", a, b, loc) }
                if case .int(let i) = x, case .int(let j) = y {
                    if j == 0 { throw .invalidOperation("integer division or modulo by zero", at: loc) }
                    if i == Int.min && j == -1 { throw overflow(loc) }
                    var q = i / j
                    if (i % j != 0) && ((i < 0) != (j < 0)) { q -= 1 }
                    return .int(q)
                }
                let (p, q) = (x.asDouble, y.asDouble)
                if q == 0 { throw .invalidOperation("float floor division by zero", at: loc) }
                return .double(pythonFloatDivmod(p, q).0)
            case .modulo:
                if case .string(let format) = a {
                    return .string(try printf(format, b, loc))
                }
                guard let x = a.number, let y = b.number else { throw unsupported("%", a, b, loc) }
                if case .int(let i) = x, case .int(let j) = y {
                    if j == 0 { throw .invalidOperation("integer division or modulo by zero", at: loc) }
                    if j == -1 { return .int(0) }
                    var r = i % j
                    if r != 0 && ((r < 0) != (j < 0)) { r += j }
                    return .int(r)
                }
                let (p, q) = (x.asDouble, y.asDouble)
                if q == 0 { throw .invalidOperation("float modulo", at: loc) }
                return .double(pythonFloatDivmod(p, q).1)
            case .power:
                guard let x = a.number, let y = b.number else { throw unsupported("** or pow()", a, b, loc) }
                if case .int(let base) = x, case .int(let exponent) = y, exponent >= 0 {
                    var result = 1
                    var factor = base
                    var e = exponent
                    while e > 0 {
                        if e & 1 == 1 {
                            let (r, o) = result.multipliedReportingOverflow(by: factor)
                            if o { throw overflow(loc) }
                            result = r
                        }
                        e >>= 1
                        if e > 0 {
                            let (f, o) = factor.multipliedReportingOverflow(by: factor)
                            if o { throw overflow(loc) }
                            factor = f
                        }
                    }
                    return .int(result)
                }
                if x.asDouble == 0, y.asDouble < 0 {
                    throw .invalidOperation("0.0 cannot be raised to a negative power", at: loc)
                }
                let result = Foundation.pow(x.asDouble, y.asDouble)
                if result.isInfinite, x.asDouble.isFinite, y.asDouble.isFinite {
                    throw .invalidOperation("(34, 'Numerical result out of range')", at: loc)
                }
                return .double(result)
            }
        }

        /// Python's float `divmod`: the floor quotient and a remainder with the divisor's sign.
        private static func pythonFloatDivmod(_ a: Double, _ b: Double) -> (Double, Double) {
            var mod = fmod(a, b)
            var div = (a - mod) / b
            if mod != 0 {
                if (b < 0) != (mod < 0) {
                    mod += b
                    div -= 1
                }
            } else {
                mod = Double(signOf: b, magnitudeOf: 0)
            }
            var floorDiv: Double
            if div != 0 {
                floorDiv = div.rounded(.down)
                if div - floorDiv > 0.5 { floorDiv += 1 }
            } else {
                floorDiv = Double(signOf: a / b, magnitudeOf: 0)
            }
            return (floorDiv, mod)
        }

        static func unary(_ op: UnaryOperator, _ v: Value, _ loc: TemplateSourceLocation) throws(E) -> Value {
            try requireDefined(v, loc)
            guard let n = v.number else {
                throw .invalidOperation("bad operand type for unary \(op == .negate ? "-" : "+"): '\(v.typeName)'", at: loc)
            }
            switch (op, n) {
            case (.plus, .int(let i)): return .int(i)
            case (.plus, .double(let d)): return .double(d)
            case (.negate, .int(let i)):
                if i == Int.min { throw overflow(loc) }
                return .int(-i)
            case (.negate, .double(let d)): return .double(-d)
            }
        }

        // MARK: - Comparison

        static func compare(_ op: CompareOperator, _ a: Value, _ b: Value, _ loc: TemplateSourceLocation) throws(E) -> Bool {
            switch op {
            case .equal: return a.equals(b)
            case .notEqual: return !a.equals(b)
            case .isIn: return try contains(b, a, loc)
            case .notIn: return try !contains(b, a, loc)
            case .less: return try order(a, b, op.rawValue, loc) < 0
            case .lessOrEqual: return try order(a, b, op.rawValue, loc) <= 0
            case .greater: return try order(a, b, op.rawValue, loc) > 0
            case .greaterOrEqual: return try order(a, b, op.rawValue, loc) >= 0
            }
        }

        /// Python's ordering of two values: negative, zero or positive.
        static func order(_ a: Value, _ b: Value, _ op: String = "<", _ loc: TemplateSourceLocation) throws(E) -> Int {
            try requireDefined(a, loc)
            try requireDefined(b, loc)
            switch (a.plain, b.plain) {
            case (.string(let x), .string(let y)):
                return compareScalars(x, y)
            case (.array(let x), .array(let y)), (.tuple(let x), .tuple(let y)):
                for (p, q) in zip(x, y) where !p.equals(q) {
                    return try order(p, q, op, loc)
                }
                return x.count < y.count ? -1 : (x.count > y.count ? 1 : 0)
            default:
                guard let x = a.number, let y = b.number else {
                    throw .invalidOperation("'\(op)' not supported between instances of '\(a.typeName)' and '\(b.typeName)'", at: loc)
                }
                if case .int(let i) = x, case .int(let j) = y { return i < j ? -1 : (i > j ? 1 : 0) }
                let (p, q) = (x.asDouble, y.asDouble)
                return p < q ? -1 : (p > q ? 1 : 0)
            }
        }

        static func compareScalars(_ x: String, _ y: String) -> Int {
            var i = x.unicodeScalars.makeIterator()
            var j = y.unicodeScalars.makeIterator()
            while true {
                switch (i.next(), j.next()) {
                case (nil, nil): return 0
                case (nil, _): return -1
                case (_, nil): return 1
                case (let p?, let q?):
                    if p.value != q.value { return p.value < q.value ? -1 : 1 }
                }
            }
        }

        /// Python's `item in container`.
        static func contains(_ container: Value, _ item: Value, _ loc: TemplateSourceLocation) throws(E) -> Bool {
            switch container {
            case .undefined: return false
            case .string(let s):
                guard case .string(let needle) = item else {
                    throw .invalidOperation("'in <string>' requires string as left operand, not \(item.typeName)", at: loc)
                }
                return needle.isEmpty || PythonText.find(s, needle) != nil
            case .array(let items), .tuple(let items):
                return items.contains { $0.equals(item) }
            case .dict(let d):
                switch item {
                case .array, .dict, .namespace, .loop:
                    throw .invalidOperation("unhashable type: '\(item.typeName)'", at: loc)
                default:
                    return d[item] != nil
                }
            case .iterator(let box):
                return box.contains(item)
            default:
                throw .invalidOperation("argument of type '\(container.typeName)' is not iterable", at: loc)
            }
        }

        // MARK: - Slicing

        static func slice(_ value: Value, _ start: Value?, _ stop: Value?, _ step: Value?, _ loc: TemplateSourceLocation) throws(E) -> Value {
            func index(_ v: Value?) throws(E) -> Int? {
                guard let v else { return nil }
                switch v {
                case .none: return nil
                case .int(let i): return i
                case .bool(let b): return b ? 1 : 0
                default: throw .invalidOperation("slice indices must be integers or None", at: loc)
                }
            }
            let step = try index(step) ?? 1
            if step == 0 { throw .invalidOperation("slice step cannot be zero", at: loc) }
            let startIndex = try index(start)
            let stopIndex = try index(stop)
            func indices(_ length: Int) -> [Int] {
                func clamp(_ i: Int?, _ defaultValue: Int) -> Int {
                    guard var i else { return defaultValue }
                    if i < 0 {
                        i += length
                        if i < 0 { i = step < 0 ? -1 : 0 }
                    } else if i >= length {
                        i = step < 0 ? length - 1 : length
                    }
                    return i
                }
                let s = clamp(startIndex, step < 0 ? length - 1 : 0)
                let e = clamp(stopIndex, step < 0 ? -1 : length)
                var out: [Int] = []
                var i = s
                while step > 0 ? i < e : i > e {
                    out.append(i)
                    i += step
                }
                return out
            }
            switch value {
            case .undefined(let u): throw u.error(at: loc)
            case .array(let items): return .array(indices(items.count).map { items[$0] })
            case .tuple(let items): return .tuple(indices(items.count).map { items[$0] })
            case .string(let s):
                let a = Array(s.unicodeScalars)
                return .string(PythonText.string(indices(a.count).map { a[$0] }))
            default:
                return .undefined("\(value.objectDescription) has no element slice")
            }
        }

        // MARK: - printf-style formatting (`'%s' % value`, the `format` filter)

        static func printf(_ format: String, _ argument: Value, _ loc: TemplateSourceLocation) throws(E) -> String {
            var positional: [Value]
            var mapping: ValueDict? = nil
            // Python skips the "not all arguments converted" check for subscriptable arguments.
            var subscriptable = false
            switch argument {
            case .tuple(let items): positional = items
            case .dict(let d): positional = [argument]; mapping = d; subscriptable = true
            case .array: positional = [argument]; subscriptable = true
            default: positional = [argument]
            }
            let f = Array(format.unicodeScalars)
            var out = ""
            var i = 0
            var next = 0
            func fail(_ m: String) -> E { .invalidOperation(m, at: loc) }
            while i < f.count {
                let c = f[i]
                if c != "%" {
                    out.unicodeScalars.append(c)
                    i += 1
                    continue
                }
                i += 1
                guard i < f.count else { throw fail("incomplete format") }
                var value: Value? = nil
                if f[i] == "(" {
                    guard let close = f[i...].firstIndex(of: ")") else { throw fail("incomplete format key") }
                    let key = PythonText.string(f[(i + 1)..<close])
                    guard let mapping else { throw fail("format requires a mapping") }
                    guard let v = mapping[key] else { throw fail("KeyError: '\(key)'") }
                    value = v
                    i = close + 1
                }
                var flags = ""
                while i < f.count, "-+ #0".unicodeScalars.contains(f[i]) {
                    flags.unicodeScalars.append(f[i])
                    i += 1
                }
                var width = ""
                while i < f.count, f[i] >= "0" && f[i] <= "9" { width.unicodeScalars.append(f[i]); i += 1 }
                var precision: String? = nil
                if i < f.count, f[i] == "." {
                    i += 1
                    var p = ""
                    while i < f.count, f[i] >= "0" && f[i] <= "9" { p.unicodeScalars.append(f[i]); i += 1 }
                    precision = p.isEmpty ? "0" : p
                }
                guard i < f.count else { throw fail("incomplete format") }
                let conversion = f[i]
                i += 1
                if conversion == "%" {
                    out += "%"
                    continue
                }
                if value == nil {
                    guard next < positional.count else { throw fail("not enough arguments for format string") }
                    value = positional[next]
                    next += 1
                }
                let v = value!
                let spec = "%" + flags + width + (precision.map { "." + $0 } ?? "")
                try Jinja.checkLength(max(width.isEmpty ? 0 : Int(width) ?? .max, precision.map { Int($0) ?? .max } ?? 0), loc)
                switch conversion {
                case "s", "r", "a":
                    var text = conversion == "s" ? v.str : v.repr
                    if let precision, let p = Int(precision) { text = PythonText.string(text.unicodeScalars.prefix(p)) }
                    let w = Int(width) ?? 0
                    let pad = String(repeating: " ", count: max(0, w - text.unicodeScalars.count))
                    out += flags.contains("-") ? text + pad : pad + text
                case "d", "i", "u", "x", "X", "o", "c":
                    guard let n = v.number else {
                        throw fail("%\(conversion) format: a number is required, not \(v.typeName)")
                    }
                    let integer: Int
                    switch n {
                    case .int(let k): integer = k
                    case .double(let d):
                        guard d.isFinite, abs(d) < 9.2e18 else { throw fail("cannot convert float to integer") }
                        integer = Int(d)
                    }
                    if conversion == "c" {
                        out.unicodeScalars.append(Unicode.Scalar(UInt32(clamping: integer)) ?? "\u{FFFD}")
                    } else {
                        let c = conversion == "i" || conversion == "u" ? "d" : String(conversion)
                        out += String(format: spec + "l" + c, integer)
                    }
                case "f", "F", "e", "E", "g", "G":
                    guard let n = v.number else {
                        throw fail("must be real number, not \(v.typeName)")
                    }
                    out += String(format: spec + String(conversion), n.asDouble)
                default:
                    throw fail("unsupported format character '\(conversion)'")
                }
            }
            if !subscriptable, next < positional.count {
                throw fail("not all arguments converted during string formatting")
            }
            return out
        }
    }
}
