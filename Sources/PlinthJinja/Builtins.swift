import Foundation

extension Jinja {
    /// Reads the arguments of a built-in function, filter, test or method by parameter name, the
    /// way Python binds positional and keyword arguments.
    struct ArgumentReader {
        typealias E = ChatTemplateError

        let args: Arguments
        let function: String
        let parameters: [String]
        let loc: TemplateSourceLocation

        init(_ args: Arguments, _ function: String, _ parameters: [String], _ loc: TemplateSourceLocation, varargs: Bool = false) throws(E) {
            self.args = args
            self.function = function
            self.parameters = parameters
            self.loc = loc
            if !varargs, args.positional.count > parameters.count {
                throw .invalidOperation("\(function)() takes at most \(parameters.count) argument(s) (\(args.positional.count) given)", at: loc)
            }
            for (name, _) in args.keyword {
                guard let i = parameters.firstIndex(of: name) else {
                    throw .invalidOperation("\(function)() got an unexpected keyword argument '\(name)'", at: loc)
                }
                if i < args.positional.count {
                    throw .invalidOperation("\(function)() got multiple values for argument '\(name)'", at: loc)
                }
            }
        }

        func value(_ name: String) -> Value? {
            if let i = parameters.firstIndex(of: name), i < args.positional.count { return args.positional[i] }
            return args.keywordValue(name)
        }

        /// Positional arguments after the named parameters.
        var extraPositional: [Value] { Array(args.positional.dropFirst(parameters.count)) }

        func required(_ name: String) throws(E) -> Value {
            guard let v = value(name) else {
                throw .invalidOperation("\(function)() missing required argument '\(name)'", at: loc)
            }
            return v
        }

        func string(_ name: String) throws(E) -> String? {
            guard let v = value(name), !isNone(v) else { return nil }
            guard case .string(let s) = v else {
                throw .invalidOperation("\(function)(): argument '\(name)' must be str, not \(v.typeName)", at: loc)
            }
            return s
        }

        func int(_ name: String) throws(E) -> Int? {
            guard let v = value(name), !isNone(v) else { return nil }
            switch v {
            case .int(let i): return i
            case .bool(let b): return b ? 1 : 0
            default:
                throw .invalidOperation("\(function)(): argument '\(name)' must be an integer, not \(v.typeName)", at: loc)
            }
        }

        func bool(_ name: String) -> Bool? {
            value(name).map(\.isTruthy)
        }

        private func isNone(_ v: Value) -> Bool {
            if case .none = v { return true }
            return false
        }
    }

    /// The global functions of the template environment: Jinja's `range`, `dict` and `namespace`,
    /// and transformers' `raise_exception` and `strftime_now`.
    enum Builtins {
        typealias E = ChatTemplateError

        static let names = ["range", "dict", "namespace", "raise_exception", "strftime_now"]

        /// The largest range the sandbox allows, as Jinja's `MAX_RANGE`.
        static let maxRange = 100_000

        static func call(_ name: String, _ args: Arguments, _ loc: TemplateSourceLocation, now: Date) throws(E) -> Value {
            switch name {
            case "range":
                guard args.keyword.isEmpty else { throw .invalidOperation("range() takes no keyword arguments", at: loc) }
                var bounds: [Int] = []
                for v in args.positional {
                    switch v {
                    case .int(let i): bounds.append(i)
                    case .bool(let b): bounds.append(b ? 1 : 0)
                    default: throw .invalidOperation("'\(v.typeName)' object cannot be interpreted as an integer", at: loc)
                    }
                }
                let (start, stop, step): (Int, Int, Int)
                switch bounds.count {
                case 1: (start, stop, step) = (0, bounds[0], 1)
                case 2: (start, stop, step) = (bounds[0], bounds[1], 1)
                case 3: (start, stop, step) = (bounds[0], bounds[1], bounds[2])
                default: throw .invalidOperation("range expected 1 to 3 arguments, got \(bounds.count)", at: loc)
                }
                if step == 0 { throw .invalidOperation("range() arg 3 must not be zero", at: loc) }
                let count = step > 0 ? max(0, (stop - start + step - 1) / step) : max(0, (start - stop - step - 1) / -step)
                if count > maxRange {
                    throw .invalidOperation("Range too big. The sandbox blocks ranges larger than MAX_RANGE (\(maxRange)).", at: loc)
                }
                return .array((0..<count).map { .int(start + $0 * step) })
            case "dict":
                var d = ValueDict()
                if let first = args.positional.first {
                    guard args.positional.count == 1 else {
                        throw .invalidOperation("dict expected at most 1 argument, got \(args.positional.count)", at: loc)
                    }
                    switch first {
                    case .dict(let source): d = source
                    default:
                        guard let items = first.iterate() else {
                            throw .invalidOperation("'\(first.typeName)' object is not iterable", at: loc)
                        }
                        for item in items {
                            guard let pair = item.iterate(), pair.count == 2, !item.isUndefined else {
                                throw .invalidOperation("dictionary update sequence element has the wrong length", at: loc)
                            }
                            d[pair[0]] = pair[1]
                        }
                    }
                }
                for (k, v) in args.keyword { d[k] = v }
                return .dict(d)
            case "namespace":
                var d = ValueDict()
                for v in args.positional {
                    guard case .dict(let source) = v else {
                        throw .invalidOperation("namespace() takes mappings as positional arguments, not \(v.typeName)", at: loc)
                    }
                    for (k, value) in source.entries { d[k] = value }
                }
                for (k, v) in args.keyword { d[k] = v }
                return .namespace(Namespace(d))
            case "raise_exception":
                let message = args.positional.first?.str ?? args.keywordValue("message")?.str ?? ""
                throw .raisedException(message, at: loc)
            case "strftime_now":
                let reader = try ArgumentReader(args, "strftime_now", ["format"], loc)
                guard let format = try reader.string("format") else {
                    throw .invalidOperation("strftime_now() missing required argument 'format'", at: loc)
                }
                return .string(strftime(format, now))
            default:
                throw .invalidOperation("'\(name)' is not a function", at: loc)
            }
        }

        /// Python's `datetime.strftime` for the common directives, in the C locale.
        static func strftime(_ format: String, _ date: Date) -> String {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone.current
            let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday, .nanosecond], from: date)
            let months = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                          "October", "November", "December"]
            let days = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
            func pad(_ n: Int, _ width: Int = 2) -> String {
                let s = String(n)
                return String(repeating: "0", count: max(0, width - s.count)) + s
            }
            let year = c.year ?? 1970, month = c.month ?? 1, day = c.day ?? 1
            let hour = c.hour ?? 0, minute = c.minute ?? 0, second = c.second ?? 0
            let weekday = (c.weekday ?? 1) - 1
            let dayOfYear = calendar.ordinality(of: .day, in: .year, for: date) ?? 1
            var out = ""
            var it = format.makeIterator()
            while let ch = it.next() {
                guard ch == "%" else { out.append(ch); continue }
                guard let d = it.next() else { out.append("%"); break }
                switch d {
                case "Y": out += String(year)
                case "y": out += pad(year % 100)
                case "m": out += pad(month)
                case "d": out += pad(day)
                case "e": out += (day < 10 ? " " : "") + String(day)
                case "B": out += months[month - 1]
                case "b", "h": out += String(months[month - 1].prefix(3))
                case "A": out += days[weekday]
                case "a": out += String(days[weekday].prefix(3))
                case "H": out += pad(hour)
                case "I": out += pad(hour % 12 == 0 ? 12 : hour % 12)
                case "p": out += hour < 12 ? "AM" : "PM"
                case "M": out += pad(minute)
                case "S": out += pad(second)
                case "f": out += pad((c.nanosecond ?? 0) / 1000, 6)
                case "j": out += pad(dayOfYear, 3)
                case "w": out += String(weekday)
                case "F": out += "\(year)-\(pad(month))-\(pad(day))"
                case "%": out += "%"
                default: out += "%" + String(d)
                }
            }
            return out
        }
    }
}
