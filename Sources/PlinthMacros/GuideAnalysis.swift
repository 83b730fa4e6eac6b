import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// The arguments of one `@Guide` attribute.
struct GuideArguments {
    var description: ExprSyntax?
    var guides: [ExprSyntax] = []
    var regexes: [ExprSyntax] = []

    init(_ attribute: AttributeSyntax) {
        guard case .argumentList(let arguments) = attribute.arguments else { return }
        for argument in arguments {
            if argument.label?.text == "description" {
                description = argument.expression
            } else if GuideAnalysis.isRegex(argument.expression) {
                regexes.append(argument.expression)
            } else {
                guides.append(argument.expression)
            }
        }
    }
}

enum GuideAnalysis {
    static func guideAttribute(of variable: VariableDeclSyntax) -> AttributeSyntax? {
        for element in variable.attributes {
            if case .attribute(let attribute) = element,
               attribute.attributeName.trimmedDescription == "Guide" {
                return attribute
            }
        }
        return nil
    }

    static func isRegex(_ expression: ExprSyntax) -> Bool {
        if expression.is(RegexLiteralExprSyntax.self) { return true }
        if let tryExpr = expression.as(TryExprSyntax.self) { return isRegex(tryExpr.expression) }
        if let call = expression.as(FunctionCallExprSyntax.self) {
            return isRegexType(call.calledExpression)
        }
        if let call = expression.as(MacroExpansionExprSyntax.self) { return call.macroName.text == "regex" }
        return false
    }

    private static func isRegexType(_ expression: ExprSyntax) -> Bool {
        if let reference = expression.as(DeclReferenceExprSyntax.self) { return reference.baseName.text == "Regex" }
        if let generic = expression.as(GenericSpecializationExprSyntax.self) { return isRegexType(generic.expression) }
        return false
    }

    /// The name of a guide such as `.range(1...5)` or `GenerationGuide.count(3)`.
    static func name(_ expression: ExprSyntax) -> String? {
        if let call = expression.as(FunctionCallExprSyntax.self) { return name(call.calledExpression) }
        if let member = expression.as(MemberAccessExprSyntax.self) { return member.declName.baseName.text }
        return nil
    }

    static func firstArgument(_ expression: ExprSyntax) -> ExprSyntax? {
        expression.as(FunctionCallExprSyntax.self)?.arguments.first?.expression
    }

    static let stringGuides: Set<String> = ["constant", "anyOf", "pattern"]
    static let numberGuides: Set<String> = ["minimum", "maximum", "range"]
    static let arrayGuides: Set<String> = ["minimumCount", "maximumCount", "count", "element"]

    /// Checks guides against the type they apply to; returns whether all are valid.
    static func check(_ guides: [ExprSyntax], regexes: [ExprSyntax], type: TypeSyntax, property: String,
                      in context: some MacroExpansionContext) -> Bool {
        var valid = true
        let (base, _) = TypeAnalysis.unwrapOptional(type)
        let category = TypeAnalysis.category(base)
        for regex in regexes where category != .string && category != .other {
            context.diagnose(Diagnostic(node: regex, message: PlinthDiagnostic.regexOnNonString(
                property: property, type: type.trimmedDescription)))
            valid = false
        }
        for guide in guides {
            guard let name = name(guide) else { continue }
            let expected: (Set<TypeCategory>, String)? =
                if stringGuides.contains(name) { ([.string], "String") }
                else if numberGuides.contains(name) { ([.integer, .floating], "numbers (Int, Float, Double, Decimal)") }
                else if arrayGuides.contains(name) { ([.array], "arrays") }
                else { nil }
            if let (categories, family) = expected, category != .other, !categories.contains(category) {
                context.diagnose(Diagnostic(node: guide, message: PlinthDiagnostic.guideMismatch(
                    guide: name, guides: family, property: property, type: type.trimmedDescription)))
                valid = false
                continue
            }
            if ["count", "minimumCount", "maximumCount"].contains(name), let argument = firstArgument(guide),
               let value = literalValue(argument), value < 0 {
                context.diagnose(Diagnostic(node: guide, message: PlinthDiagnostic.negativeCount(guide: name)))
                valid = false
            }
            if ["count", "range"].contains(name), let argument = firstArgument(guide),
               let (lower, upper) = literalRange(argument) {
                if lower > upper {
                    context.diagnose(Diagnostic(node: guide, message: PlinthDiagnostic.invertedRange(guide: name)))
                    valid = false
                } else if name == "count" && lower < 0 {
                    context.diagnose(Diagnostic(node: guide, message: PlinthDiagnostic.negativeCount(guide: name)))
                    valid = false
                }
            }
            if name == "anyOf", let argument = firstArgument(guide), let array = argument.as(ArrayExprSyntax.self),
               array.elements.isEmpty {
                context.diagnose(Diagnostic(node: guide, message: PlinthDiagnostic.emptyChoices))
                valid = false
            }
            if name == "element", let inner = firstArgument(guide), let element = TypeAnalysis.arrayElement(base) {
                valid = check([inner], regexes: [], type: element, property: "\(property)'s elements", in: context) && valid
            }
        }
        return valid
    }

    /// The value of a numeric literal, possibly negative.
    static func literalValue(_ expression: ExprSyntax) -> Double? {
        if let integer = expression.as(IntegerLiteralExprSyntax.self) {
            return Double(integer.literal.text.filter { $0 != "_" })
        }
        if let float = expression.as(FloatLiteralExprSyntax.self) {
            return Double(float.literal.text.filter { $0 != "_" })
        }
        if let prefix = expression.as(PrefixOperatorExprSyntax.self), prefix.operator.text == "-",
           let value = literalValue(prefix.expression) {
            return -value
        }
        return nil
    }

    /// The bounds of a closed-range literal such as `1...5`.
    static func literalRange(_ expression: ExprSyntax) -> (Double, Double)? {
        if let sequence = expression.as(SequenceExprSyntax.self) {
            let elements = Array(sequence.elements)
            guard elements.count == 3, let op = elements[1].as(BinaryOperatorExprSyntax.self),
                  op.operator.text == "...",
                  let lower = literalValue(elements[0]), let upper = literalValue(elements[2]) else { return nil }
            return (lower, upper)
        }
        if let infix = expression.as(InfixOperatorExprSyntax.self),
           infix.operator.as(BinaryOperatorExprSyntax.self)?.operator.text == "...",
           let lower = literalValue(infix.leftOperand), let upper = literalValue(infix.rightOperand) {
            return (lower, upper)
        }
        return nil
    }
}

/// `@Guide`: checks where it is applied and its guides; the `@Generable` macro reads it.
public struct GuideMacro: PeerMacro {
    public static func expansion(of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [DeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: PlinthDiagnostic.guideNotOnStoredProperty))
            return []
        }
        if variable.modifiers.contains(where: { ["static", "class"].contains($0.name.text) }) {
            context.diagnose(Diagnostic(node: node, message: PlinthDiagnostic.guideOnStaticProperty))
            return []
        }
        guard variable.bindings.count == 1, let binding = variable.bindings.first,
              let pattern = binding.pattern.as(IdentifierPatternSyntax.self),
              GenerableMacro.isStored(binding) else {
            context.diagnose(Diagnostic(node: node, message: PlinthDiagnostic.guideNotOnStoredProperty))
            return []
        }
        guard let type = binding.typeAnnotation?.type else { return [] }  // @Generable reports it.
        let arguments = GuideArguments(node)
        _ = GuideAnalysis.check(arguments.guides, regexes: arguments.regexes, type: type,
                                property: TypeAnalysis.plainName(pattern.identifier), in: context)
        return []
    }
}
