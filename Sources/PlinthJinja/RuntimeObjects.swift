extension Jinja {
    /// A Python iterator over already computed items: generators and reverse iterators are
    /// used up by one pass; dict views can be iterated again.
    final class IteratorBox {
        enum Kind: String {
            case generator
            case reverseIterator = "list_reverseiterator"
            case dictItems = "dict_items"
            case dictKeys = "dict_keys"
            case dictValues = "dict_values"
        }

        let kind: Kind
        private let items: [Value]
        private var position = 0

        init(_ kind: Kind, _ items: [Value]) {
            self.kind = kind
            self.items = items
        }

        var isView: Bool { kind == .dictItems || kind == .dictKeys || kind == .dictValues }

        /// The remaining items, without consuming them.
        var peekAll: [Value] { Array(items[position...]) }

        func next() -> Value? {
            guard position < items.count else { return nil }
            defer { if !isView { position += 1 } }
            return items[position]
        }

        func consumeAll() -> [Value] {
            let rest = peekAll
            if !isView { position = items.count }
            return rest
        }

        /// Python's `x in iterator`: consumes a generator up to the first match.
        func contains(_ item: Value) -> Bool {
            if isView { return items.contains { $0.equals(item) } }
            while let v = next() {
                if v.equals(item) { return true }
            }
            return false
        }
    }

    /// The object `namespace()` returns: the one thing a template can assign attributes to, which
    /// carries values out of loops.
    final class Namespace {
        var attributes: ValueDict

        init(_ attributes: ValueDict) {
            self.attributes = attributes
        }
    }

    /// The `loop` variable inside a `for` loop.
    final class LoopState {
        let items: [Value]
        var index0 = 0
        var lastChangedValue: [Value]? = nil

        init(items: [Value]) {
            self.items = items
        }

        var length: Int { items.count }

        func attribute(_ name: String) -> Value? {
            switch name {
            case "index": return .int(index0 + 1)
            case "index0": return .int(index0)
            case "revindex": return .int(length - index0)
            case "revindex0": return .int(length - index0 - 1)
            case "first": return .bool(index0 == 0)
            case "last": return .bool(index0 == length - 1)
            case "length": return .int(length)
            case "depth": return .int(1)
            case "depth0": return .int(0)
            case "previtem":
                return index0 > 0 ? items[index0 - 1] : .undefined("there is no previous item")
            case "nextitem":
                return index0 + 1 < length ? items[index0 + 1] : .undefined("there is no next item")
            case "cycle":
                return .function(Function(name: "cycle") { args, _ throws(ChatTemplateError) in
                    guard !args.positional.isEmpty else { return .undefined("no items for cycling given") }
                    return args.positional[self.index0 % args.positional.count]
                })
            case "changed":
                return .function(Function(name: "changed") { args, _ throws(ChatTemplateError) in
                    let current = args.positional
                    if let last = self.lastChangedValue, last.count == current.count,
                       zip(last, current).allSatisfy({ $0.equals($1) }) {
                        return .bool(false)
                    }
                    self.lastChangedValue = current
                    return .bool(true)
                })
            default: return nil
            }
        }
    }

    /// A `{% macro %}`: its definition and the scope it was defined in.
    final class Macro {
        let definition: MacroDefinition
        var closure: Scope?

        var name: String { definition.name }

        init(definition: MacroDefinition, closure: Scope) {
            self.definition = definition
            self.closure = closure
        }
    }

    /// Arguments of a call, after evaluation.
    struct Arguments {
        var positional: [Value] = []
        var keyword: [(String, Value)] = []

        /// The arguments with every Markup read as its str (``Value/plain``).
        var plain: Arguments { Arguments(positional: positional.map(\.plain), keyword: keyword.map { ($0.0, $0.1.plain) }) }

        func keywordValue(_ name: String) -> Value? {
            keyword.first { $0.0 == name }?.1
        }
    }

    /// A built-in function or a bound method (`'text'.strip`, `messages.items`).
    struct Function {
        let name: String
        let body: (Arguments, TemplateSourceLocation) throws(ChatTemplateError) -> Value
    }

    /// A scope of variables; loops, macros and `with` blocks open a new one.
    final class Scope {
        var variables: [String: Value] = [:]
        let parent: Scope?

        init(parent: Scope?) {
            self.parent = parent
        }

        func lookup(_ name: String) -> Value? {
            var s: Scope? = self
            while let scope = s {
                if let v = scope.variables[name] { return v }
                s = scope.parent
            }
            return nil
        }
    }
}
