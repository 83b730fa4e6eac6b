extension Jinja {
    /// Builds the syntax tree of a template from its tokens, following the grammar and operator
    /// precedence of Jinja 3.
    struct Parser {
        private let tokens: [Token]
        private var index = 0
        /// The statements that are open, innermost last, for error messages.
        private var openBlocks: [(name: String, location: TemplateSourceLocation)] = []
        private var loopDepth = 0
        /// Inside `{% if %}` or an inline `if`, unknown filters and tests are reported when used,
        /// not when parsed (as Jinja does).
        private var conditionalDepth = 0
        /// Where the `{%` of the statement being parsed is.
        private var tagLocation = TemplateSourceLocation(line: 1, column: 1)
        private var nesting = 0
        /// How deeply expressions and blocks may nest (Python's parser stops at about this depth).
        static let maxNesting = 140

        init(tokens: [Token]) {
            self.tokens = tokens
        }

        static func parse(_ source: String) throws(ChatTemplateError) -> [Node] {
            var lexer = Lexer()
            let tokens = try lexer.tokenize(source)
            var parser = Parser(tokens: tokens)
            return try parser.parseTemplate()
        }

        mutating func parseTemplate() throws(ChatTemplateError) -> [Node] {
            let (body, _) = try subparse(until: [])
            return body
        }

        // MARK: - Token stream

        private var current: Token { tokens[index] }
        private var next: Token { tokens[min(index + 1, tokens.count - 1)] }

        private mutating func advance() -> Token {
            let t = tokens[index]
            if index < tokens.count - 1 { index += 1 }
            return t
        }

        private func isName(_ token: Token, _ name: String) -> Bool {
            if case .name(name) = token.kind { return true }
            return false
        }

        private func isOp(_ token: Token, _ op: String) -> Bool {
            if case .op(op) = token.kind { return true }
            return false
        }

        private mutating func skipName(_ name: String) -> Bool {
            if isName(current, name) { _ = advance(); return true }
            return false
        }

        private mutating func skipOp(_ op: String) -> Bool {
            if isOp(current, op) { _ = advance(); return true }
            return false
        }

        private func fail(_ message: String, _ token: Token? = nil) -> ChatTemplateError {
            .syntax(message, at: (token ?? current).location)
        }

        private mutating func expectOp(_ op: String) throws(ChatTemplateError) {
            guard skipOp(op) else { throw unexpected(expected: "'\(op)'") }
        }

        private mutating func expectName() throws(ChatTemplateError) -> (String, Token) {
            let t = current
            guard case .name(let n) = t.kind else { throw unexpected(expected: "a name") }
            _ = advance()
            return (n, t)
        }

        private mutating func expectBlockEnd() throws(ChatTemplateError) {
            guard case .blockEnd = current.kind else { throw unexpected(expected: "end of statement block ('%}')") }
            _ = advance()
        }

        private func unexpected(expected: String) -> ChatTemplateError {
            if case .eof = current.kind { return eofError() }
            return fail("expected \(expected), got '\(current.description)'")
        }

        private func eofError(looking endTags: [String] = []) -> ChatTemplateError {
            guard let innermost = openBlocks.last else {
                return fail("unexpected end of template")
            }
            var message = "Unexpected end of template: the '\(innermost.name)' block opened here is never closed"
            if !endTags.isEmpty {
                message += " (Jinja was looking for " + endTags.map { "'\($0)'" }.joined(separator: " or ") + ")"
            }
            return .syntax(message + ".", at: innermost.location)
        }

        // MARK: - Statements

        private mutating func enterNesting() throws(ChatTemplateError) {
            guard nesting < Parser.maxNesting else {
                throw fail("the template nests blocks or expressions more than \(Parser.maxNesting) levels deep")
            }
            nesting += 1
        }

        /// One more link of a chain (`a + b + …`, `x.y[0]`, `v|f|g`). A chain is parsed in a
        /// loop but its tree is one level deeper per link, and the interpreter walks it
        /// recursively: links count as nesting (a 5000-term sum would overflow the stack). The
        /// chain's parser gives them back when it returns (`defer { nesting -= links }`).
        private mutating func link(_ links: inout Int) throws(ChatTemplateError) {
            try enterNesting()
            links += 1
        }

        /// Parses nodes until a `{% tag %}` whose name is in `endTags`; returns the nodes and that
        /// tag's name, leaving the stream just after the tag name.
        private mutating func subparse(until endTags: [String]) throws(ChatTemplateError) -> ([Node], String?) {
            try enterNesting()
            defer { nesting -= 1 }
            var body: [Node] = []
            while true {
                let token = current
                switch token.kind {
                case .eof:
                    if endTags.isEmpty { return (body, nil) }
                    throw eofError(looking: endTags)
                case .data(let text):
                    _ = advance()
                    body.append(.text(text))
                case .variableBegin:
                    _ = advance()
                    let expr = try parseTuple()
                    guard case .variableEnd = current.kind else {
                        throw unexpected(expected: "end of print statement ('}}')")
                    }
                    _ = advance()
                    body.append(.output(expr))
                case .blockBegin:
                    tagLocation = advance().location
                    if case .name(let n) = current.kind, endTags.contains(n) {
                        _ = advance()
                        return (body, n)
                    }
                    body.append(try parseStatement())
                    try expectBlockEnd()
                default:
                    throw fail("unexpected '\(token.description)'")
                }
            }
        }

        /// Parses a block body after its opening statement's `%}`.
        private mutating func parseBody(_ endTags: [String]) throws(ChatTemplateError) -> ([Node], String) {
            _ = skipOp(":")
            try expectBlockEnd()
            let (body, end) = try subparse(until: endTags)
            return (body, end ?? "")
        }

        private mutating func parseStatement() throws(ChatTemplateError) -> Node {
            let token = current
            guard case .name(let tag) = token.kind else {
                if case .eof = token.kind { throw eofError() }
                throw fail("tag name expected")
            }
            switch tag {
            case "if": return try parseIf()
            case "for": return try parseFor()
            case "set": return try parseSet()
            case "macro": return try parseMacro()
            case "call": return try parseCallBlock()
            case "filter": return try parseFilterBlock()
            case "with": return try parseWith()
            case "generation":
                // transformers' AssistantTracker extension: renders its body unchanged.
                _ = advance()
                openBlocks.append(("generation", tagLocation))
                let (body, _) = try parseBody(["endgeneration"])
                openBlocks.removeLast()
                return .with([], body: body)
            case "break", "continue":
                _ = advance()
                guard loopDepth > 0 else { throw fail("'\(tag)' is only allowed inside a for loop", token) }
                return tag == "break" ? .breakLoop : .continueLoop
            default:
                var message = "Encountered unknown tag '\(tag)'."
                if let innermost = openBlocks.last {
                    message += " The innermost block that needs to be closed is '\(innermost.name)'."
                }
                throw fail(message, token)
            }
        }

        private mutating func parseIf() throws(ChatTemplateError) -> Node {
            _ = advance()
            openBlocks.append(("if", tagLocation))
            defer { openBlocks.removeLast() }
            var branches: [IfBranch] = []
            var otherwise: [Node] = []
            conditionalDepth += 1
            defer { conditionalDepth -= 1 }
            while true {
                let condition = try parseTuple(withConditional: false)
                let (body, end) = try parseBody(["elif", "else", "endif"])
                branches.append(IfBranch(condition: condition, body: body))
                if end == "elif" { continue }
                if end == "else" {
                    (otherwise, _) = try parseBody(["endif"])
                }
                break
            }
            return .ifBlock(branches, otherwise: otherwise)
        }

        private mutating func parseFor() throws(ChatTemplateError) -> Node {
            let start = advance()
            openBlocks.append(("for", tagLocation))
            defer { openBlocks.removeLast() }
            let savedConditionalDepth = conditionalDepth
            conditionalDepth = 0
            defer { conditionalDepth = savedConditionalDepth }
            let target = try parseAssignTarget(endNames: ["in"], allowNamespace: false)
            guard skipName("in") else { throw unexpected(expected: "'in'") }
            let iterable = try parseTuple(withConditional: false, endNames: ["recursive"])
            var condition: Expr? = nil
            if skipName("if") {
                condition = try parseExpression()
            }
            let recursive = skipName("recursive")
            if recursive { throw fail("recursive for loops are not supported", start) }
            loopDepth += 1
            let (body, end) = try parseBody(["endfor", "else"])
            loopDepth -= 1
            var otherwise: [Node] = []
            if end == "else" {
                (otherwise, _) = try parseBody(["endfor"])
            }
            return .forLoop(ForLoop(target: target, iterable: iterable, condition: condition, recursive: recursive,
                                    body: body, otherwise: otherwise, location: start.location))
        }

        private mutating func parseSet() throws(ChatTemplateError) -> Node {
            let start = advance()
            let target = try parseAssignTarget(endNames: [], allowNamespace: true)
            if skipOp("=") {
                let value = try parseTuple()
                return .set(target, value, start.location)
            }
            var filter: Expr? = nil
            if isOp(current, "|") {
                filter = try parseFilters(nil)
            }
            openBlocks.append(("set", tagLocation))
            defer { openBlocks.removeLast() }
            let (body, _) = try parseBody(["endset"])
            return .setBlock(target, filter: filter, body: body, start.location)
        }

        private mutating func parseSignature() throws(ChatTemplateError) -> [MacroParameter] {
            var parameters: [MacroParameter] = []
            try expectOp("(")
            while !isOp(current, ")") {
                if !parameters.isEmpty { try expectOp(",") }
                let (name, token) = try expectName()
                if skipOp("=") {
                    parameters.append(MacroParameter(name: name, defaultValue: try parseExpression()))
                } else {
                    if parameters.contains(where: { $0.defaultValue != nil }) {
                        throw fail("non-default argument follows default argument", token)
                    }
                    parameters.append(MacroParameter(name: name, defaultValue: nil))
                }
            }
            try expectOp(")")
            return parameters
        }

        /// Names the macro body being parsed refers to (innermost macro last).
        private var referencedNames: [Set<String>] = []

        private mutating func noteName(_ name: String) {
            guard !referencedNames.isEmpty, name == "varargs" || name == "kwargs" || name == "caller" else { return }
            for i in referencedNames.indices { referencedNames[i].insert(name) }
        }

        private func withSpecialNames(_ definition: MacroDefinition, _ names: Set<String>) -> MacroDefinition {
            var d = definition
            d.usesVarargs = names.contains("varargs")
            d.usesKwargs = names.contains("kwargs")
            d.usesCaller = names.contains("caller")
            return d
        }

        /// The body of a `macro` or `call` block, up to `end<tag>`: a scope of its own, which the
        /// enclosing loops and conditionals do not reach. Also returns the special names
        /// (`varargs`, `kwargs`, `caller`) the body uses.
        private mutating func parseCallableBody(_ tag: String) throws(ChatTemplateError) -> ([Node], Set<String>) {
            openBlocks.append((tag, tagLocation))
            defer { openBlocks.removeLast() }
            let savedLoopDepth = loopDepth
            let savedConditionalDepth = conditionalDepth
            loopDepth = 0
            conditionalDepth = 0
            defer {
                loopDepth = savedLoopDepth
                conditionalDepth = savedConditionalDepth
            }
            referencedNames.append([])
            let (body, _) = try parseBody(["end" + tag])
            return (body, referencedNames.removeLast())
        }

        private mutating func parseMacro() throws(ChatTemplateError) -> Node {
            let start = advance()
            let (name, _) = try expectName()
            let parameters = try parseSignature()
            let (body, names) = try parseCallableBody("macro")
            return .macro(withSpecialNames(MacroDefinition(name: name, parameters: parameters, body: body, location: start.location), names))
        }

        private mutating func parseCallBlock() throws(ChatTemplateError) -> Node {
            let start = advance()
            let parameters = isOp(current, "(") ? try parseSignature() : []
            let call = try parseExpression()
            guard case .call = call.kind else { throw fail("expected a call after 'call'", start) }
            let (body, names) = try parseCallableBody("call")
            if case .call(_, let args) = call.kind, args.keyword.contains(where: { $0.name == "caller" }) {
                throw fail("keyword argument repeated: caller", start)
            }
            let caller = withSpecialNames(MacroDefinition(name: "", parameters: parameters, body: body, location: start.location), names)
            return .callBlock(call: call, caller: caller, start.location)
        }

        private mutating func parseFilterBlock() throws(ChatTemplateError) -> Node {
            _ = advance()
            let filter = try parseFilters(nil, startInline: true)
            openBlocks.append(("filter", tagLocation))
            defer { openBlocks.removeLast() }
            let (body, _) = try parseBody(["endfilter"])
            return .filterBlock(filter: filter, body: body)
        }

        private mutating func parseWith() throws(ChatTemplateError) -> Node {
            _ = advance()
            var bindings: [(AssignTarget, Expr)] = []
            while true {
                if case .blockEnd = current.kind { break }
                if !bindings.isEmpty { try expectOp(",") }
                let target = try parseAssignTarget(endNames: [], allowNamespace: false, allowTuple: false)
                try expectOp("=")
                bindings.append((target, try parseExpression()))
            }
            openBlocks.append(("with", tagLocation))
            defer { openBlocks.removeLast() }
            let (body, _) = try parseBody(["endwith"])
            return .with(bindings, body: body)
        }

        private mutating func parseAssignTarget(endNames: [String], allowNamespace: Bool, allowTuple: Bool = true) throws(ChatTemplateError) -> AssignTarget {
            var targets: [AssignTarget] = []
            var isTuple = false
            while true {
                if !targets.isEmpty { try expectOp(",") }
                if case .name(let n) = current.kind, endNames.contains(n) { break }
                if case .blockEnd = current.kind { break }
                if isOp(current, "=") || isOp(current, ")") { break }
                if allowTuple, skipOp("(") {
                    let inner = try parseAssignTarget(endNames: [], allowNamespace: false)
                    try expectOp(")")
                    targets.append(inner)
                } else {
                    let (name, token) = try expectName()
                    if ["true", "false", "none", "True", "False", "None"].contains(name) {
                        throw fail("can't assign to '\(name)'", token)
                    }
                    if allowNamespace, isOp(current, ".") {
                        _ = advance()
                        let (attribute, _) = try expectName()
                        targets.append(.namespaceAttribute(name, attribute))
                    } else {
                        targets.append(.name(name))
                    }
                }
                guard allowTuple, isOp(current, ",") else { break }
                isTuple = true
            }
            if targets.isEmpty { throw unexpected(expected: "an assignment target") }
            return isTuple ? .tuple(targets) : targets[0]
        }

        // MARK: - Expressions

        private mutating func parseTuple(withConditional: Bool = true, endNames: [String] = [], explicitParentheses: Bool = false) throws(ChatTemplateError) -> Expr {
            let location = current.location
            var items: [Expr] = []
            var isTuple = false
            while true {
                if !items.isEmpty { try expectOp(",") }
                if isTupleEnd(endNames) { break }
                items.append(withConditional ? try parseExpression() : try parseOr())
                if isOp(current, ",") { isTuple = true } else { break }
            }
            if !isTuple {
                if let first = items.first { return first }
                if !explicitParentheses { throw unexpected(expected: "an expression") }
            }
            return Expr(.tuple(items), location)
        }

        private func isTupleEnd(_ endNames: [String]) -> Bool {
            switch current.kind {
            case .variableEnd, .blockEnd, .eof: return true
            case .op(")"): return true
            case .name(let n): return endNames.contains(n)
            default: return false
            }
        }

        mutating func parseExpression() throws(ChatTemplateError) -> Expr {
            try enterNesting()
            defer { nesting -= 1 }
            var expr = try parseOr()
            while isName(current, "if") {
                let token = advance()
                conditionalDepth += 1
                defer { conditionalDepth -= 1 }
                let condition = try parseOr()
                var otherwise: Expr? = nil
                if skipName("else") {
                    otherwise = try parseExpression()
                }
                expr = Expr(.conditional(condition: condition, then: expr, otherwise: otherwise), token.location)
            }
            return expr
        }

        private mutating func parseOr() throws(ChatTemplateError) -> Expr {
            var left = try parseAnd()
            var links = 0
            defer { nesting -= links }
            while isName(current, "or") {
                try link(&links)
                let token = advance()
                left = Expr(.or(left, try parseAnd()), token.location)
            }
            return left
        }

        private mutating func parseAnd() throws(ChatTemplateError) -> Expr {
            var left = try parseNot()
            var links = 0
            defer { nesting -= links }
            while isName(current, "and") {
                try link(&links)
                let token = advance()
                left = Expr(.and(left, try parseNot()), token.location)
            }
            return left
        }

        private mutating func parseNot() throws(ChatTemplateError) -> Expr {
            if isName(current, "not") {
                let token = advance()
                try enterNesting()
                defer { nesting -= 1 }
                return Expr(.not(try parseNot()), token.location)
            }
            return try parseCompare()
        }

        private mutating func parseCompare() throws(ChatTemplateError) -> Expr {
            let location = current.location
            let left = try parseMath1()
            var operands: [CompareOperand] = []
            while true {
                if case .op(let o) = current.kind, let op = CompareOperator(rawValue: o), op != .isIn, op != .notIn {
                    _ = advance()
                    operands.append(CompareOperand(op: op, expr: try parseMath1()))
                } else if skipName("in") {
                    operands.append(CompareOperand(op: .isIn, expr: try parseMath1()))
                } else if isName(current, "not"), isName(next, "in") {
                    _ = advance()
                    _ = advance()
                    operands.append(CompareOperand(op: .notIn, expr: try parseMath1()))
                } else {
                    break
                }
            }
            return operands.isEmpty ? left : Expr(.compare(left, operands), location)
        }

        private mutating func parseMath1() throws(ChatTemplateError) -> Expr {
            var left = try parseConcat()
            var links = 0
            defer { nesting -= links }
            while case .op(let o) = current.kind, o == "+" || o == "-" {
                try link(&links)
                let token = advance()
                left = Expr(.binary(o == "+" ? .add : .subtract, left, try parseConcat()), token.location)
            }
            return left
        }

        private mutating func parseConcat() throws(ChatTemplateError) -> Expr {
            let location = current.location
            var parts = [try parseMath2()]
            while skipOp("~") {
                parts.append(try parseMath2())
            }
            return parts.count == 1 ? parts[0] : Expr(.concat(parts), location)
        }

        private mutating func parseMath2() throws(ChatTemplateError) -> Expr {
            var left = try parsePow()
            var links = 0
            defer { nesting -= links }
            while case .op(let o) = current.kind, let op = BinaryOperator(rawValue: o),
                  op == .multiply || op == .divide || op == .floorDivide || op == .modulo {
                try link(&links)
                let token = advance()
                left = Expr(.binary(op, left, try parsePow()), token.location)
            }
            return left
        }

        private mutating func parsePow() throws(ChatTemplateError) -> Expr {
            var left = try parseUnary()
            var links = 0
            defer { nesting -= links }
            while isOp(current, "**") {
                try link(&links)
                let token = advance()
                left = Expr(.binary(.power, left, try parseUnary()), token.location)
            }
            return left
        }

        private mutating func parseUnary(withFilter: Bool = true) throws(ChatTemplateError) -> Expr {
            let token = current
            try enterNesting()
            defer { nesting -= 1 }
            var node: Expr
            if isOp(token, "-") {
                _ = advance()
                node = Expr(.unary(.negate, try parseUnary(withFilter: false)), token.location)
            } else if isOp(token, "+") {
                _ = advance()
                node = Expr(.unary(.plus, try parseUnary(withFilter: false)), token.location)
            } else {
                node = try parsePrimary()
            }
            node = try parsePostfix(node)
            if withFilter {
                node = try parseFilterExpression(node)
            }
            return node
        }

        private mutating func parsePrimary() throws(ChatTemplateError) -> Expr {
            let token = current
            switch token.kind {
            case .name(let n):
                _ = advance()
                switch n {
                case "true", "True": return Expr(.literal(.bool(true)), token.location)
                case "false", "False": return Expr(.literal(.bool(false)), token.location)
                case "none", "None": return Expr(.literal(.none), token.location)
                default:
                    noteName(n)
                    return Expr(.name(n), token.location)
                }
            case .string(var s):
                _ = advance()
                while case .string(let more) = current.kind {
                    s += more
                    _ = advance()
                }
                return Expr(.literal(.string(s)), token.location)
            case .integer(let i):
                _ = advance()
                return Expr(.literal(.int(i)), token.location)
            case .float(let d):
                _ = advance()
                return Expr(.literal(.double(d)), token.location)
            case .op("("):
                _ = advance()
                let expr = try parseTuple(explicitParentheses: true)
                try expectOp(")")
                return expr
            case .op("["):
                _ = advance()
                var items: [Expr] = []
                while !isOp(current, "]") {
                    if !items.isEmpty { try expectOp(",") }
                    if isOp(current, "]") { break }
                    items.append(try parseExpression())
                }
                try expectOp("]")
                return Expr(.list(items), token.location)
            case .op("{"):
                _ = advance()
                var entries: [DictEntry] = []
                while !isOp(current, "}") {
                    if !entries.isEmpty { try expectOp(",") }
                    if isOp(current, "}") { break }
                    let key = try parseExpression()
                    try expectOp(":")
                    entries.append(DictEntry(key: key, value: try parseExpression()))
                }
                try expectOp("}")
                return Expr(.dict(entries), token.location)
            case .eof:
                throw eofError()
            default:
                throw fail("unexpected '\(token.description)'")
            }
        }

        private mutating func parsePostfix(_ start: Expr) throws(ChatTemplateError) -> Expr {
            var node = start
            var links = 0
            defer { nesting -= links }
            while true {
                let token = current
                if isOp(token, ".") || isOp(token, "[") || isOp(token, "(") { try link(&links) }
                if isOp(token, ".") {
                    _ = advance()
                    let attribute = current
                    switch attribute.kind {
                    case .name(let n):
                        _ = advance()
                        node = Expr(.getAttribute(node, n), token.location)
                    case .integer(let i):
                        _ = advance()
                        node = Expr(.getItem(node, Expr(.literal(.int(i)), attribute.location)), token.location)
                    default:
                        throw fail("expected name or number after '.'", attribute)
                    }
                } else if isOp(token, "[") {
                    _ = advance()
                    var subscripts: [Expr] = []
                    while !isOp(current, "]") {
                        if !subscripts.isEmpty { try expectOp(",") }
                        subscripts.append(try parseSubscript())
                    }
                    try expectOp("]")
                    let index = subscripts.count == 1 ? subscripts[0] : Expr(.tuple(subscripts), token.location)
                    node = Expr(.getItem(node, index), token.location)
                } else if isOp(token, "(") {
                    node = Expr(.call(node, try parseCallArguments()), token.location)
                } else {
                    return node
                }
            }
        }

        private mutating func parseSubscript() throws(ChatTemplateError) -> Expr {
            let location = current.location
            var parts: [Expr?] = []
            if skipOp(":") {
                parts.append(nil)
            } else {
                let expr = try parseExpression()
                guard skipOp(":") else { return expr }
                parts.append(expr)
            }
            if isOp(current, ":") || isOp(current, "]") || isOp(current, ",") {
                parts.append(nil)
            } else {
                parts.append(try parseExpression())
            }
            if skipOp(":") {
                if isOp(current, "]") || isOp(current, ",") {
                    parts.append(nil)
                } else {
                    parts.append(try parseExpression())
                }
            } else {
                parts.append(nil)
            }
            return Expr(.slice(parts[0], parts[1], parts[2]), location)
        }

        private mutating func parseCallArguments() throws(ChatTemplateError) -> CallArguments {
            let open = current
            try expectOp("(")
            var args = CallArguments()
            var requireComma = false
            while !isOp(current, ")") {
                if requireComma {
                    try expectOp(",")
                    if isOp(current, ")") { break }
                }
                if isOp(current, "*") {
                    _ = advance()
                    guard args.splatPositional == nil, args.splatKeyword == nil else {
                        throw fail("invalid syntax for function call expression", open)
                    }
                    args.splatPositional = try parseExpression()
                } else if isOp(current, "**") {
                    _ = advance()
                    guard args.splatKeyword == nil else { throw fail("invalid syntax for function call expression", open) }
                    args.splatKeyword = try parseExpression()
                } else if case .name(let n) = current.kind, isOp(next, "=") {
                    guard args.splatKeyword == nil else { throw fail("invalid syntax for function call expression", open) }
                    if args.keyword.contains(where: { $0.name == n }) { throw fail("keyword argument repeated: \(n)") }
                    _ = advance()
                    _ = advance()
                    args.keyword.append(KeywordArgument(name: n, value: try parseExpression()))
                } else {
                    guard args.splatPositional == nil, args.splatKeyword == nil, args.keyword.isEmpty else {
                        throw fail("positional argument follows keyword argument", current)
                    }
                    args.positional.append(try parseExpression())
                }
                requireComma = true
            }
            try expectOp(")")
            return args
        }

        private mutating func parseFilterExpression(_ start: Expr) throws(ChatTemplateError) -> Expr {
            var node = start
            var links = 0
            defer { nesting -= links }
            while true {
                if isOp(current, "|") {
                    node = try parseFilters(node, links: &links)
                } else if isName(current, "is") {
                    try link(&links)
                    node = try parseTest(node)
                } else if isOp(current, "(") {
                    try link(&links)
                    let location = current.location
                    node = Expr(.call(node, try parseCallArguments()), location)
                } else {
                    return node
                }
            }
        }

        private mutating func parseDottedName() throws(ChatTemplateError) -> (String, Token) {
            var (name, token) = try expectName()
            while skipOp(".") {
                let (part, _) = try expectName()
                name += "." + part
            }
            return (name, token)
        }

        private mutating func parseFilters(_ start: Expr?, startInline: Bool = false) throws(ChatTemplateError) -> Expr {
            var links = 0
            defer { nesting -= links }
            return try parseFilters(start, startInline: startInline, links: &links)
        }

        /// The filters of a chain whose links are counted in `links`.
        private mutating func parseFilters(_ start: Expr?, startInline: Bool = false, links: inout Int) throws(ChatTemplateError) -> Expr {
            var node = start
            var inline = startInline
            while isOp(current, "|") || inline {
                try link(&links)
                if !inline { _ = advance() }
                inline = false
                let (name, token) = try parseDottedName()
                if conditionalDepth == 0, !Filters.known.contains(name) {
                    throw .unknownFilter(name, at: token.location)
                }
                let args = isOp(current, "(") ? try parseCallArguments() : .empty
                node = Expr(.filter(node, name, args), token.location)
            }
            return node!
        }

        private mutating func parseTest(_ value: Expr) throws(ChatTemplateError) -> Expr {
            _ = advance()  // 'is'
            let negated = skipName("not")
            let (name, token) = try parseDottedName()
            if conditionalDepth == 0, !Predicates.known.contains(name) {
                throw .unknownTest(name, at: token.location)
            }
            var args = CallArguments()
            if isOp(current, "(") {
                args = try parseCallArguments()
            } else {
                switch current.kind {
                case .name(let n) where n == "else" || n == "or" || n == "and":
                    break
                case .name("is"):
                    throw fail("You cannot chain multiple tests with is")
                case .name, .string, .integer, .float, .op("("), .op("["), .op("{"):
                    args.positional = [try parsePostfix(try parsePrimary())]
                default:
                    break
                }
            }
            return Expr(.test(value, name, args, negated: negated), token.location)
        }
    }
}
