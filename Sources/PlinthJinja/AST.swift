extension Jinja {
    /// The syntax tree of a parsed Jinja template.
    ///
    /// Nodes are plain values, so a parsed template is `Sendable` and can be rendered from any
    /// number of tasks at once.
    struct Expr: Sendable {
        indirect enum Kind: Sendable {
            case literal(Literal)
            case name(String)
            case list([Expr])
            case tuple([Expr])
            case dict([DictEntry])
            case getAttribute(Expr, String)
            case getItem(Expr, Expr)
            /// Only appears as the subscript of `getItem`: `start:stop:step`.
            case slice(Expr?, Expr?, Expr?)
            case call(Expr, CallArguments)
            /// `value | name(args)`; `value` is nil in a `{% filter %}` block or `{% set x | f %}`.
            case filter(Expr?, String, CallArguments)
            case test(Expr, String, CallArguments, negated: Bool)
            case unary(UnaryOperator, Expr)
            case binary(BinaryOperator, Expr, Expr)
            case and(Expr, Expr)
            case or(Expr, Expr)
            case not(Expr)
            case compare(Expr, [CompareOperand])
            case concat([Expr])
            case conditional(condition: Expr, then: Expr, otherwise: Expr?)
        }

        let kind: Kind
        let location: TemplateSourceLocation

        init(_ kind: Kind, _ location: TemplateSourceLocation) {
            self.kind = kind
            self.location = location
        }
    }

    enum Literal: Sendable {
        case none
        case bool(Bool)
        case int(Int)
        case double(Double)
        case string(String)
    }

    struct DictEntry: Sendable {
        let key: Expr
        let value: Expr
    }

    struct CallArguments: Sendable {
        var positional: [Expr] = []
        var keyword: [KeywordArgument] = []
        var splatPositional: Expr? = nil
        var splatKeyword: Expr? = nil

        static let empty = CallArguments()
    }

    struct KeywordArgument: Sendable {
        let name: String
        let value: Expr
    }

    struct CompareOperand: Sendable {
        let op: CompareOperator
        let expr: Expr
    }

    enum UnaryOperator: Sendable { case negate, plus }

    enum BinaryOperator: String, Sendable {
        case add = "+", subtract = "-", multiply = "*", divide = "/", floorDivide = "//"
        case modulo = "%", power = "**"
    }

    enum CompareOperator: String, Sendable {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">"
        case greaterOrEqual = ">=", isIn = "in", notIn = "not in"
    }

    /// The left-hand side of `{% set %}`, a `for` loop's target, or a `with` binding.
    indirect enum AssignTarget: Sendable {
        case name(String)
        case tuple([AssignTarget])
        /// `ns.attribute`: only namespaces accept attribute assignment.
        case namespaceAttribute(String, String)
    }

    struct MacroParameter: Sendable {
        let name: String
        let defaultValue: Expr?
    }

    struct MacroDefinition: Sendable {
        let name: String
        let parameters: [MacroParameter]
        let body: [Node]
        let location: TemplateSourceLocation
        /// Whether the body mentions `varargs`, `kwargs` or `caller`: Jinja accepts extra
        /// positional arguments, unknown keyword arguments or a `{% call %}` body only then.
        var usesVarargs = false
        var usesKwargs = false
        var usesCaller = false
    }

    struct IfBranch: Sendable {
        let condition: Expr
        let body: [Node]
    }

    struct ForLoop: Sendable {
        let target: AssignTarget
        let iterable: Expr
        let condition: Expr?
        let recursive: Bool
        let body: [Node]
        let otherwise: [Node]
        let location: TemplateSourceLocation
    }

    indirect enum Node: Sendable {
        case text(String)
        case output(Expr)
        case ifBlock([IfBranch], otherwise: [Node])
        case forLoop(ForLoop)
        case set(AssignTarget, Expr, TemplateSourceLocation)
        /// `{% set x %}…{% endset %}`, optionally through a filter chain.
        case setBlock(AssignTarget, filter: Expr?, body: [Node], TemplateSourceLocation)
        case macro(MacroDefinition)
        /// `{% call(params) callee(args) %}…{% endcall %}`: the body becomes `caller()`.
        case callBlock(call: Expr, caller: MacroDefinition, TemplateSourceLocation)
        case filterBlock(filter: Expr, body: [Node])
        case with([(AssignTarget, Expr)], body: [Node])
        case breakLoop
        case continueLoop
    }
}
