import Foundation

extension Jinja {
    /// Renders a parsed template: walks the syntax tree, evaluates expressions with Python's
    /// semantics and Jinja's scoping (each loop iteration, macro call and `with` block has its
    /// own scope; `if` blocks do not), and writes the output.
    ///
    /// One interpreter renders one template once; it is not shared between threads.
    final class Interpreter {
        typealias E = ChatTemplateError

        private var output = ""
        private var macros: [Macro] = []
        private var macroDepth = 0
        /// Python stops recursive macros at about this depth (its recursion limit).
        static let maxMacroDepth = 150
        let globals: Scope

        private enum Flow { case normal, breakLoop, continueLoop }

        /// `now`: the time `strftime_now` formats.
        init(context: [String: Value], now: Date = Date()) {
            globals = Scope(parent: nil)
            for name in Builtins.names {
                globals.variables[name] = .function(Function(name: name) { args, loc throws(E) in
                    try Builtins.call(name, args, loc, now: now)
                })
            }
            for (k, v) in context { globals.variables[k] = v }
        }

        func render(_ nodes: [Node]) throws(E) -> String {
            defer {
                // Macros refer to their scope and scopes to their macros: break the cycles.
                for m in macros { m.closure = nil }
                macros.removeAll()
            }
            output = ""
            _ = try execute(nodes, Scope(parent: globals))
            return output
        }

        // MARK: - Statements

        private func execute(_ nodes: [Node], _ scope: Scope) throws(E) -> Flow {
            for node in nodes {
                let flow = try execute(node, scope)
                if flow != .normal { return flow }
            }
            return .normal
        }

        private func capture(_ nodes: [Node], _ scope: Scope) throws(E) -> String {
            try captureWithFlow(nodes, scope).0
        }

        /// Renders `nodes` into a string of its own; a `break` or `continue` inside them still
        /// acts on the enclosing loop, as in Jinja's compiled code.
        private func captureWithFlow(_ nodes: [Node], _ scope: Scope) throws(E) -> (String, Flow) {
            let saved = output
            output = ""
            defer { output = saved }
            let flow = try execute(nodes, scope)
            return (output, flow)
        }

        private func execute(_ node: Node, _ scope: Scope) throws(E) -> Flow {
            switch node {
            case .text(let text):
                output += text
            case .output(let expr):
                output += try evaluate(expr, scope).str
            case .ifBlock(let branches, let otherwise):
                for branch in branches where try evaluate(branch.condition, scope).isTruthy {
                    return try execute(branch.body, scope)
                }
                return try execute(otherwise, scope)
            case .forLoop(let loop):
                return try runLoop(loop, scope)
            case .set(let target, let expr, let loc):
                try assign(target, try evaluateKeepingMarkup(expr, scope), scope, loc)
            case .setBlock(let target, let filter, let body, let loc):
                let (text, flow) = try captureWithFlow(body, Scope(parent: scope))
                if flow != .normal { return flow }
                var value = Value.string(text)
                if let filter { value = try applyFilterChain(filter, to: value, scope) }
                try assign(target, value, scope, loc)
            case .macro(let definition):
                let macro = Macro(definition: definition, closure: scope)
                macros.append(macro)
                scope.variables[definition.name] = .macro(macro)
            case .callBlock(let call, let callerDefinition, _):
                guard case .call(let calleeExpr, let argExprs) = call.kind else { return .normal }
                let caller = Macro(definition: callerDefinition, closure: scope)
                macros.append(caller)
                let callee = try evaluate(calleeExpr, scope)
                var args = try evaluateArguments(argExprs, scope)
                // Jinja passes `caller` after the explicit keywords and before `**kwargs`.
                args.keyword.insert(("caller", .macro(caller)), at: argExprs.keyword.count)
                output += try self.call(callee, args, call.location).str
            case .filterBlock(let filter, let body):
                let (text, flow) = try captureWithFlow(body, Scope(parent: scope))
                if flow != .normal { return flow }
                output += try applyFilterChain(filter, to: .string(text), scope).str
            case .with(let bindings, let body):
                let inner = Scope(parent: scope)
                for (target, expr) in bindings {
                    try assign(target, try evaluateKeepingMarkup(expr, scope), inner, expr.location)
                }
                return try execute(body, inner)
            case .breakLoop:
                return .breakLoop
            case .continueLoop:
                return .continueLoop
            }
            return .normal
        }

        /// Runs a loop; returns the control flow of its `else` block, which (being outside the
        /// loop in Jinja's compiled code) acts on the enclosing loop.
        private func runLoop(_ loop: ForLoop, _ scope: Scope) throws(E) -> Flow {
            let iterable = try evaluate(loop.iterable, scope)
            guard var items = iterable.iterate() else {
                throw .invalidOperation("'\(iterable.typeName)' object is not iterable", at: loop.iterable.location)
            }
            if let condition = loop.condition {
                var kept: [Value] = []
                for item in items {
                    let s = Scope(parent: scope)
                    try assign(loop.target, item, s, loop.location)
                    if try evaluate(condition, s).isTruthy { kept.append(item) }
                }
                items = kept
            }
            if items.isEmpty {
                return try execute(loop.otherwise, Scope(parent: scope))
            }
            let state = LoopState(items: items)
            // As in Jinja's compiled code, `else` runs unless some iteration reached the end of
            // the body: iterations cut short by `continue` or `break` do not count.
            var completedAnIteration = false
            for (i, item) in items.enumerated() {
                state.index0 = i
                let s = Scope(parent: scope)
                s.variables["loop"] = .loop(state)
                try assign(loop.target, item, s, loop.location)
                let flow = try execute(loop.body, s)
                if flow == .normal { completedAnIteration = true }
                if flow == .breakLoop { break }
            }
            if !completedAnIteration, !loop.otherwise.isEmpty {
                return try execute(loop.otherwise, Scope(parent: scope))
            }
            return .normal
        }

        private func assign(_ target: AssignTarget, _ value: Value, _ scope: Scope, _ loc: TemplateSourceLocation) throws(E) {
            switch target {
            case .name(let name):
                scope.variables[name] = value
            case .tuple(let targets):
                guard let items = value.iterate(), !value.isUndefined else {
                    if case .undefined(let u) = value { throw u.error(at: loc) }
                    throw .invalidOperation("cannot unpack non-iterable \(value.typeName) object", at: loc)
                }
                guard items.count == targets.count else {
                    if items.count < targets.count {
                        throw .invalidOperation("not enough values to unpack (expected \(targets.count), got \(items.count))", at: loc)
                    }
                    throw .invalidOperation("too many values to unpack (expected \(targets.count))", at: loc)
                }
                for (t, v) in zip(targets, items) { try assign(t, v, scope, loc) }
            case .namespaceAttribute(let name, let attribute):
                guard case .namespace(let ns) = scope.lookup(name) ?? .none else {
                    throw .invalidOperation("cannot assign attribute on non-namespace object", at: loc)
                }
                ns.attributes[attribute] = value
            }
        }

        // MARK: - Expressions

        /// The value of `expr`, a `Markup` read as its `str`.
        func evaluate(_ expr: Expr, _ scope: Scope) throws(E) -> Value {
            try evaluateKeepingMarkup(expr, scope).plain
        }

        /// The filters that treat a `Markup` apart from a `str`.
        static let markupFilters: Set<String> = ["safe", "escape", "e", "forceescape", "string"]

        /// The value of `expr`, a `Markup` kept as one: what a variable stores, what `and`, `or`
        /// and `if` pass on, and what `+`, `*`, `%`, its methods and the ``markupFilters`` read.
        /// (A `Markup` in a list or dict literal is stored as its `str`.)
        private func evaluateKeepingMarkup(_ expr: Expr, _ scope: Scope) throws(E) -> Value {
            let loc = expr.location
            switch expr.kind {
            case .literal(let literal):
                switch literal {
                case .none: return .none
                case .bool(let b): return .bool(b)
                case .int(let i): return .int(i)
                case .double(let d): return .double(d)
                case .string(let s): return .string(s)
                }
            case .name(let name):
                return scope.lookup(name) ?? .undefined("'\(name)' is undefined")
            case .list(let items):
                return .array(try items.map { (e) throws(E) in try evaluate(e, scope) })
            case .tuple(let items):
                return .tuple(try items.map { (e) throws(E) in try evaluate(e, scope) })
            case .dict(let entries):
                var d = ValueDict()
                for entry in entries {
                    let key = try evaluate(entry.key, scope)
                    switch key {
                    case .array, .dict, .namespace, .loop, .undefined:
                        throw .invalidOperation("unhashable type: '\(key.typeName)'", at: entry.key.location)
                    default: break
                    }
                    d[key] = try evaluate(entry.value, scope)
                }
                return .dict(d)
            case .getAttribute(let objectExpr, let name):
                return try getAttribute(try evaluateKeepingMarkup(objectExpr, scope), name, loc)
            case .getItem(let objectExpr, let subscriptExpr):
                let object = try evaluate(objectExpr, scope)
                if case .slice(let a, let b, let c) = subscriptExpr.kind {
                    func bound(_ e: Expr?) throws(E) -> Value? {
                        guard let e else { return nil }
                        return try evaluate(e, scope)
                    }
                    return try Operators.slice(object, try bound(a), try bound(b), try bound(c), loc)
                }
                return try getItem(object, try evaluate(subscriptExpr, scope), loc)
            case .slice:
                throw .syntax("a slice is only allowed inside brackets", at: loc)
            case .call(let calleeExpr, let argExprs):
                let callee = try evaluate(calleeExpr, scope)
                // What a namespace, dict or macro stores keeps a Markup; other callees read its str.
                let stores: Bool
                switch callee {
                case .function(let f): stores = f.name == "namespace" || f.name == "dict"
                case .macro: stores = true
                default: stores = false
                }
                return try call(callee, try evaluateArguments(argExprs, scope, keepingMarkup: stores), loc)
            case .filter(let valueExpr, let name, let argExprs):
                guard let valueExpr else { throw .syntax("filter without a value", at: loc) }
                let value = Self.markupFilters.contains(name) ? try evaluateKeepingMarkup(valueExpr, scope) : try evaluate(valueExpr, scope)
                return try Filters.apply(name, value, try evaluateArguments(argExprs, scope), self, loc)
            case .test(let valueExpr, let name, let argExprs, let negated):
                let value = try evaluate(valueExpr, scope)
                let result = try Predicates.apply(name, value, try evaluateArguments(argExprs, scope), self, loc)
                return .bool(result != negated)
            case .unary(let op, let operand):
                return try Operators.unary(op, try evaluate(operand, scope), loc)
            case .binary(let op, let left, let right):
                let a = try evaluateKeepingMarkup(left, scope)
                let b = try evaluateKeepingMarkup(right, scope)
                return try Operators.binary(op, a, b, loc)
            case .and(let left, let right):
                let a = try evaluateKeepingMarkup(left, scope)
                return a.isTruthy ? try evaluateKeepingMarkup(right, scope) : a
            case .or(let left, let right):
                let a = try evaluateKeepingMarkup(left, scope)
                return a.isTruthy ? a : try evaluateKeepingMarkup(right, scope)
            case .not(let operand):
                return .bool(!(try evaluate(operand, scope).isTruthy))
            case .compare(let first, let operands):
                var left = try evaluate(first, scope)
                for operand in operands {
                    let right = try evaluate(operand.expr, scope)
                    if !(try Operators.compare(operand.op, left, right, operand.expr.location)) { return .bool(false) }
                    left = right
                }
                return .bool(true)
            case .concat(let parts):
                var s = ""
                for part in parts { s += try evaluate(part, scope).str }
                return .string(s)
            case .conditional(let condition, let then, let otherwise):
                if try evaluate(condition, scope).isTruthy { return try evaluateKeepingMarkup(then, scope) }
                if let otherwise { return try evaluateKeepingMarkup(otherwise, scope) }
                return .undefined("the inline if-expression on line \(loc.line) evaluated to false and no else section was defined.")
            }
        }

        private func evaluateArguments(_ args: CallArguments, _ scope: Scope, keepingMarkup: Bool = false) throws(E) -> Arguments {
            let value = { (e: Expr) throws(E) -> Value in
                keepingMarkup ? try self.evaluateKeepingMarkup(e, scope) : try self.evaluate(e, scope)
            }
            var result = Arguments()
            for e in args.positional { result.positional.append(try value(e)) }
            for k in args.keyword { result.keyword.append((k.name, try value(k.value))) }
            if let splat = args.splatPositional {
                let v = try evaluate(splat, scope)
                guard let items = v.iterate() else {
                    throw .invalidOperation("argument after * must be an iterable, not \(v.typeName)", at: splat.location)
                }
                result.positional += items
            }
            if let splat = args.splatKeyword {
                let v = try evaluate(splat, scope)
                guard case .dict(let d) = v else {
                    throw .invalidOperation("argument after ** must be a mapping, not \(v.typeName)", at: splat.location)
                }
                for (k, value) in d.entries {
                    guard case .string(let name) = k else {
                        throw .invalidOperation("keywords must be strings", at: splat.location)
                    }
                    result.keyword.append((name, value))
                }
            }
            return result
        }

        /// Applies a filter chain parsed with no value (from `{% filter %}` or `{% set x | f %}`).
        private func applyFilterChain(_ chain: Expr, to value: Value, _ scope: Scope) throws(E) -> Value {
            guard case .filter(let inner, let name, let argExprs) = chain.kind else { return value }
            let input = try inner.map { (e) throws(E) in try applyFilterChain(e, to: value, scope) } ?? value
            return try Filters.apply(name, input, try evaluateArguments(argExprs, scope), self, chain.location)
        }

        // MARK: - Attribute and item access

        /// `object.name`: Python attributes (methods) first, then items, else undefined.
        func getAttribute(_ object: Value, _ name: String, _ loc: TemplateSourceLocation) throws(E) -> Value {
            switch object {
            case .undefined(let u):
                // Python attributes such as `__class__` exist even on Undefined; the sandbox refuses them.
                if name.hasPrefix("__") {
                    return .undefined(Undefined(message: "access to attribute '\(name)' of 'Undefined' object is unsafe.", isUnsafe: true))
                }
                throw u.error(at: loc)
            case .dict(let d):
                if let method = Methods.dict(d, name) { return method }
                if let v = d[name] { return v }
            case .string(let s):
                if let method = Methods.string(s, name) { return method }
            case .markup(let s):
                // markupsafe's methods: str arguments escaped (join's items too, format's
                // through its formatter); str results, and split's parts, are Markups.
                if case .function(let f)? = Methods.string(s, name) {
                    let splits: Set = ["split", "rsplit", "splitlines", "partition", "rpartition"]
                    return .function(Function(name: f.name) { args, loc throws(E) in
                        func escaped(_ v: Value) -> Value {
                            if case .string(let t) = v { return .string(Filters.htmlEscape(t)) }
                            return v.plain
                        }
                        var args = args
                        if !splits.contains(name) {
                            if name == "join", let items = args.positional.first?.iterate() {
                                args.positional[0] = .array(items.map(escaped))
                            } else {
                                args.positional = args.positional.map(escaped)
                            }
                            args.keyword = args.keyword.map { ($0.0, escaped($0.1)) }
                        }
                        switch try f.body(args, loc) {
                        case .string(let t): return .markup(t)
                        case .array(let parts): return .array(parts.map { if case .string(let t) = $0 { .markup(t) } else { $0 } })
                        case .tuple(let parts): return .tuple(parts.map { if case .string(let t) = $0 { .markup(t) } else { $0 } })
                        case let r: return r
                        }
                    })
                }
            case .array(let a):
                if let method = Methods.list(a, name) { return method }
            case .tuple(let a):
                if let method = Methods.tuple(a, name) { return method }
            case .namespace(let ns):
                if let v = ns.attributes[name] { return v }
            case .loop(let state):
                if let v = state.attribute(name) { return v }
            case .macro(let m):
                switch name {
                case "name": return .string(m.name)
                case "arguments": return .tuple(m.definition.parameters.map { .string($0.name) })
                default: break
                }
            default:
                break
            }
            if Methods.isUnsafe(object, name) {
                return .undefined(Undefined(message: "access to attribute '\(name)' of '\(object.typeName)' object is unsafe.", isUnsafe: true))
            }
            return .undefined("\(object.objectDescription) has no attribute '\(name)'")
        }

        /// `object[key]`: items first, then (for string keys) attributes, else undefined.
        func getItem(_ object: Value, _ key: Value, _ loc: TemplateSourceLocation) throws(E) -> Value {
            func index(_ count: Int) -> Int? {
                let raw: Int
                switch key {
                case .int(let i): raw = i
                case .bool(let b): raw = b ? 1 : 0
                default: return nil
                }
                let i = raw < 0 ? raw + count : raw
                return i >= 0 && i < count ? i : nil
            }
            switch object {
            case .undefined(let u):
                throw u.error(at: loc)
            case .array(let a), .tuple(let a):
                if let i = index(a.count) { return a[i] }
            case .string(let s):
                let scalars = Array(s.unicodeScalars)
                if let i = index(scalars.count) { return .string(String(scalars[i])) }
            case .dict(let d):
                if let v = d[key] { return v }
            default:
                break
            }
            if case .string(let name) = key {
                return try getAttribute(object, name, loc)
            }
            return .undefined("\(object.objectDescription) has no element \(key.repr)")
        }

        // MARK: - Calls

        func call(_ callee: Value, _ args: Arguments, _ loc: TemplateSourceLocation) throws(E) -> Value {
            switch callee {
            case .function(let f):
                return try f.body(args, loc)
            case .macro(let m):
                return try callMacro(m, args, loc)
            case .undefined(let u):
                throw u.error(at: loc)
            default:
                throw .invalidOperation("'\(callee.typeName)' object is not callable", at: loc)
            }
        }

        private func callMacro(_ macro: Macro, _ args: Arguments, _ loc: TemplateSourceLocation) throws(E) -> Value {
            let definition = macro.definition
            guard macroDepth < Interpreter.maxMacroDepth else {
                throw .invalidOperation("maximum recursion depth exceeded (macro '\(macro.name)' nested \(Interpreter.maxMacroDepth) deep)", at: loc)
            }
            macroDepth += 1
            defer { macroDepth -= 1 }
            let scope = Scope(parent: macro.closure ?? globals)
            var keyword = args.keyword
            var caller: Value? = nil
            let callerIsParameter = definition.parameters.contains { $0.name == "caller" }
            if definition.usesCaller, !callerIsParameter {
                if let i = keyword.firstIndex(where: { $0.0 == "caller" }) {
                    caller = keyword[i].1
                    keyword.remove(at: i)
                } else {
                    caller = .undefined("No caller defined")
                }
            }
            for (i, parameter) in definition.parameters.enumerated() {
                let keywordIndex = i < args.positional.count ? nil : keyword.firstIndex { $0.0 == parameter.name }
                if i < args.positional.count {
                    scope.variables[parameter.name] = args.positional[i]
                } else if let k = keywordIndex {
                    scope.variables[parameter.name] = keyword[k].1
                    keyword.remove(at: k)
                } else if let d = parameter.defaultValue {
                    scope.variables[parameter.name] = try evaluate(d, scope)
                } else {
                    scope.variables[parameter.name] = .undefined("parameter '\(parameter.name)' was not provided")
                }
            }
            if !definition.usesKwargs, let (name, _) = keyword.first {
                if name == "caller" {
                    throw .invalidOperation("macro '\(macro.name)' was invoked with two values for the special caller argument. This is most likely a bug.", at: loc)
                }
                throw .invalidOperation("macro '\(macro.name)' takes no keyword argument '\(name)'", at: loc)
            }
            let extra = args.positional.dropFirst(definition.parameters.count)
            if !definition.usesVarargs, !extra.isEmpty {
                throw .invalidOperation("macro '\(macro.name)' takes not more than \(definition.parameters.count) argument(s)", at: loc)
            }
            scope.variables["varargs"] = .tuple(Array(extra))
            var kwargs = ValueDict()
            for (k, v) in keyword { kwargs[k] = v }
            scope.variables["kwargs"] = .dict(kwargs)
            if let caller { scope.variables["caller"] = caller }
            return .string(try capture(definition.body, scope))
        }
    }
}
