extension Jinja {
    /// Jinja's built-in tests: `x is defined`, `x is string`, `x is equalto y`, …
    enum Predicates {
        typealias E = ChatTemplateError

        static let known: Set<String> = [
            "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "escaped", "even", "false",
            "filter", "float", "ge", ">=", "gt", "greaterthan", ">", "in", "integer", "iterable", "le", "<=",
            "lower", "lt", "lessthan", "<", "mapping", "ne", "!=", "none", "number", "odd", "sameas", "sequence",
            "string", "test", "true", "undefined", "upper",
        ]

        static func apply(_ name: String, _ value: Value, _ args: Arguments, _ interpreter: Interpreter, _ loc: TemplateSourceLocation) throws(E) -> Bool {
            // A Markup is a str to every test.
            let value = value.plain, args = args.plain
            func other() throws(E) -> Value {
                let r = try ArgumentReader(args, name, ["other"], loc)
                return try r.required("other")
            }
            func noArguments() throws(E) {
                _ = try ArgumentReader(args, name, [], loc)
            }
            switch name {
            case "defined": try noArguments(); return !value.isUndefined
            case "undefined": try noArguments(); return value.isUndefined
            case "none": try noArguments(); if case .none = value { return true }; return false
            case "boolean": try noArguments(); if case .bool = value { return true }; return false
            case "true": try noArguments(); if case .bool(true) = value { return true }; return false
            case "false": try noArguments(); if case .bool(false) = value { return true }; return false
            case "integer": try noArguments(); if case .int = value { return true }; return false
            case "float": try noArguments(); if case .double = value { return true }; return false
            case "number": try noArguments(); return value.number != nil
            case "string": try noArguments(); if case .string = value { return true }; return false
            case "mapping": try noArguments(); if case .dict = value { return true }; return false
            case "callable":
                try noArguments()
                switch value {
                case .macro, .function: return true
                default: return false
                }
            case "iterable":
                try noArguments()
                return value.isIterable
            case "sequence":
                try noArguments()
                switch value {
                case .undefined, .string, .array, .tuple, .dict: return true
                default: return false
                }
            case "escaped":
                try noArguments()
                return false
            case "lower", "upper":
                try noArguments()
                guard case .string(let s) = value else {
                    return try Predicates.apply(name, .string(value.str), args, interpreter, loc)
                }
                let scalars = Array(s.unicodeScalars)
                let cased = scalars.contains { $0.properties.isUppercase || $0.properties.isLowercase }
                if name == "lower" { return cased && !scalars.contains { $0.properties.isUppercase } }
                return cased && !scalars.contains { $0.properties.isLowercase }
            case "even", "odd":
                try noArguments()
                let r = try Operators.binary(.modulo, value, .int(2), loc)
                return r.equals(.int(name == "even" ? 0 : 1))
            case "divisibleby":
                let r = try Operators.binary(.modulo, value, try other(), loc)
                return r.equals(.int(0))
            case "eq", "equalto", "==": return value.equals(try other())
            case "ne", "!=": return !value.equals(try other())
            case "lt", "lessthan", "<": return try Operators.order(value, try other(), "<", loc) < 0
            case "le", "<=": return try Operators.order(value, try other(), "<=", loc) <= 0
            case "gt", "greaterthan", ">": return try Operators.order(value, try other(), ">", loc) > 0
            case "ge", ">=": return try Operators.order(value, try other(), ">=", loc) >= 0
            case "in":
                let r = try ArgumentReader(args, name, ["seq"], loc)
                return try Operators.contains(try r.required("seq"), value, loc)
            case "sameas":
                let o = try other()
                switch (value, o) {
                case (.none, .none), (.undefined, .undefined): return true
                case (.bool(let a), .bool(let b)): return a == b
                case (.namespace(let a), .namespace(let b)): return a === b
                case (.macro(let a), .macro(let b)): return a === b
                case (.int(let a), .int(let b)): return a == b
                case (.string(let a), .string(let b)): return a == b
                default: return false
                }
            case "filter":
                try noArguments()
                guard case .string(let s) = value else { return false }
                return Filters.known.contains(s)
            case "test":
                try noArguments()
                guard case .string(let s) = value else { return false }
                return known.contains(s)
            default:
                throw .unknownTest(name, at: loc)
            }
        }
    }
}
