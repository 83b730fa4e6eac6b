extension Jinja {
    /// A value while a template renders: Python's data types as Jinja sees them, plus Jinja's
    /// runtime objects (undefined, namespaces, loop state, macros, callables).
    ///
    /// Values are created and used within one render, on one thread; they are not `Sendable`
    /// because namespaces and macros are shared mutable objects, as in Jinja.
    enum Value {
        case undefined(Undefined)
        case none
        case bool(Bool)
        case int(Int)
        case double(Double)
        case string(String)
        /// markupsafe's `Markup`, a `str` marked safe (`safe`, `escape`): joined to a `str` with
        /// `+` it escapes that `str` (HTML). Only the operators and filters that treat it apart
        /// see it; every other use reads it as the `str` it is (``plain``).
        case markup(String)
        case array([Value])
        case tuple([Value])
        case dict(ValueDict)
        case namespace(Namespace)
        case loop(LoopState)
        case macro(Macro)
        case function(Function)
        /// A Python generator or iterator (`select`, `map`, `unique`, `items`, `reverse`) or a
        /// dict view (`d.items()`, `d.keys()`, `d.values()`).
        case iterator(IteratorBox)

        static func undefined(_ message: String) -> Value { .undefined(Undefined(message: message)) }

        init(_ json: JinjaValue) {
            switch json {
            case .null: self = .none
            case .bool(let b): self = .bool(b)
            case .int(let i): self = .int(i)
            case .double(let d): self = .double(d)
            case .string(let s): self = .string(s)
            case .array(let a): self = .array(a.map(Value.init))
            case .object(let o):
                var d = ValueDict()
                for (k, v) in o { d[.string(k)] = Value(v) }
                self = .dict(d)
            }
        }

        /// A `Markup` as the `str` it is; any other value as it is.
        var plain: Value {
            if case .markup(let s) = self { return .string(s) }
            return self
        }

        var isMarkup: Bool {
            if case .markup = self { return true }
            return false
        }

        var isUndefined: Bool {
            if case .undefined = self { return true }
            return false
        }

        /// Python's truth value.
        var isTruthy: Bool {
            switch self {
            case .undefined, .none: return false
            case .bool(let b): return b
            case .int(let i): return i != 0
            case .double(let d): return d != 0
            case .string(let s), .markup(let s): return !s.isEmpty
            case .array(let a), .tuple(let a): return !a.isEmpty
            case .dict(let d): return !d.isEmpty
            case .namespace, .loop, .macro, .function: return true
            case .iterator(let box): return box.isView ? !box.peekAll.isEmpty : true
            }
        }

        /// The name of the Python type, for error messages ("'int' object …").
        var typeName: String {
            switch self {
            case .undefined: return "Undefined"
            case .none: return "NoneType"
            case .bool: return "bool"
            case .int: return "int"
            case .double: return "float"
            case .string: return "str"
            case .markup: return "Markup"
            case .array: return "list"
            case .tuple: return "tuple"
            case .dict: return "dict"
            case .namespace: return "Namespace"
            case .loop: return "LoopContext"
            case .macro: return "Macro"
            case .function: return "builtin_function_or_method"
            case .iterator(let box): return box.kind.rawValue
            }
        }

        /// Jinja's description of an object in "has no attribute" messages.
        var objectDescription: String {
            switch self {
            case .none: return "None"
            default: return "'\(typeName) object'"
            }
        }

        /// Python's `str()`.
        var str: String {
            switch self {
            case .undefined: return ""
            case .string(let s), .markup(let s): return s
            default: return repr
            }
        }

        /// Python's `repr()`.
        var repr: String {
            switch self {
            case .undefined: return "Undefined"
            case .none: return "None"
            case .bool(let b): return b ? "True" : "False"
            case .int(let i): return String(i)
            case .double(let d): return PythonText.floatRepr(d)
            case .string(let s): return PythonText.repr(s)
            case .markup(let s): return "Markup(" + PythonText.repr(s) + ")"
            case .array(let a): return "[" + a.map(\.repr).joined(separator: ", ") + "]"
            case .tuple(let a):
                if a.count == 1 { return "(" + a[0].repr + ",)" }
                return "(" + a.map(\.repr).joined(separator: ", ") + ")"
            case .dict(let d): return d.repr
            case .namespace(let ns): return "<Namespace " + ns.attributes.repr + ">"
            case .loop(let l): return "<LoopContext \(l.index0 + 1)/\(l.length)>"
            case .macro(let m): return m.name.isEmpty ? "<Macro anonymous>" : "<Macro '\(m.name)'>"
            case .function(let f): return "<built-in method \(f.name)>"
            case .iterator(let box):
                if box.isView { return box.kind.rawValue + "(" + Value.array(box.peekAll).repr + ")" }
                return "<\(box.kind.rawValue) object>"
            }
        }

        /// Iterates the value as Python's `iter()` does, or returns nil when it is not iterable.
        /// Strings give their code points and mappings their keys; a generator gives what is
        /// left of it and is then exhausted, as in Python.
        func iterate() -> [Value]? {
            switch self {
            case .undefined: return []
            case .array(let a), .tuple(let a): return a
            case .string(let s), .markup(let s): return s.unicodeScalars.map { .string(String($0)) }
            case .dict(let d): return d.keys
            case .iterator(let box): return box.consumeAll()
            case .namespace, .loop, .macro, .function, .none, .bool, .int, .double: return nil
            }
        }

        /// Whether `iter()` accepts the value; does not consume generators.
        var isIterable: Bool {
            switch self {
            case .undefined, .array, .tuple, .string, .markup, .dict, .iterator: return true
            default: return false
            }
        }

        /// The number the value stands for in arithmetic: `bool` counts as `int`, as in Python.
        var number: Number? {
            switch self {
            case .bool(let b): return .int(b ? 1 : 0)
            case .int(let i): return .int(i)
            case .double(let d): return .double(d)
            default: return nil
            }
        }

        enum Number {
            case int(Int)
            case double(Double)

            var asDouble: Double {
                switch self {
                case .int(let i): return Double(i)
                case .double(let d): return d
                }
            }
        }

        /// Python's `==`.
        func equals(_ other: Value) -> Bool {
            switch (self.plain, other.plain) {
            case (.undefined, .undefined), (.none, .none): return true
            case (.string(let a), .string(let b)): return a.unicodeScalars.elementsEqual(b.unicodeScalars)
            case (.array(let a), .array(let b)), (.tuple(let a), .tuple(let b)):
                return a.count == b.count && zip(a, b).allSatisfy { $0.equals($1) }
            case (.dict(let a), .dict(let b)):
                guard a.count == b.count else { return false }
                for (k, v) in a.entries {
                    guard let w = b[k], v.equals(w) else { return false }
                }
                return true
            case (.namespace(let a), .namespace(let b)): return a === b
            case (.loop(let a), .loop(let b)): return a === b
            case (.macro(let a), .macro(let b)): return a === b
            case (.iterator(let a), .iterator(let b)):
                if a === b { return true }
                guard a.isView, a.kind == b.kind, a.kind != .dictValues else { return false }
                let (x, y) = (a.peekAll, b.peekAll)
                return x.count == y.count && x.allSatisfy { item in y.contains { $0.equals(item) } }
            default:
                if let x = number, let y = other.number {
                    switch (x, y) {
                    case (.int(let i), .int(let j)): return i == j
                    default: return x.asDouble == y.asDouble
                    }
                }
                return false
            }
        }
    }

    /// Jinja's default `Undefined`: renders as nothing, is false, iterates as empty, and raises
    /// an error for anything else.
    struct Undefined {
        let message: String
        /// Set for attributes the sandbox refuses (`list.append`): using one is a security error.
        var isUnsafe = false

        /// The error that using this value raises.
        func error(at loc: TemplateSourceLocation) -> ChatTemplateError {
            isUnsafe ? .invalidOperation(message, at: loc) : .undefinedValue(message, at: loc)
        }
    }

    /// An insertion-ordered mapping with Python's key equality (`1 == 1.0 == True`).
    struct ValueDict {
        private(set) var keys: [Value] = []
        private(set) var values: [Value] = []
        /// Position of string keys, the common case, for quick look-up.
        private var stringIndex: [String: Int] = [:]

        var count: Int { keys.count }
        var isEmpty: Bool { keys.isEmpty }
        var entries: Zip2Sequence<[Value], [Value]> { zip(keys, values) }

        private func position(of key: Value) -> Int? {
            if case .string(let s) = key.plain { return stringIndex[s] }
            return keys.firstIndex { $0.equals(key) }
        }

        subscript(key: Value) -> Value? {
            get { position(of: key).map { values[$0] } }
            set {
                if let i = position(of: key) {
                    if let newValue { values[i] = newValue } else { remove(at: i) }
                } else if let newValue {
                    let key = key.plain
                    if case .string(let s) = key { stringIndex[s] = keys.count }
                    keys.append(key)
                    values.append(newValue)
                }
            }
        }

        subscript(string: String) -> Value? {
            get { self[.string(string)] }
            set { self[.string(string)] = newValue }
        }

        private mutating func remove(at i: Int) {
            keys.remove(at: i)
            values.remove(at: i)
            stringIndex = [:]
            for (j, k) in keys.enumerated() { if case .string(let s) = k { stringIndex[s] = j } }
        }

        var repr: String {
            "{" + entries.map { $0.repr + ": " + $1.repr }.joined(separator: ", ") + "}"
        }
    }
}
