import SwiftSyntax
import SwiftSyntaxMacros

/// `@SessionPropertyEntry var name: Type = value` in an extension on `SessionPropertyValues`:
/// the property reads and writes the session's value under a key of its own, a peer
/// `__Key_name` whose default value is the initial value.
public struct SessionPropertyEntryMacro: AccessorMacro, PeerMacro {
    /// The property's name, type and initial value, or `nil` (and a diagnostic, when `diagnose`)
    /// when it isn't usable.
    private static func entry(_ declaration: some DeclSyntaxProtocol, in context: some MacroExpansionContext,
                              diagnose: Bool) -> (name: String, type: TypeSyntax, value: ExprSyntax)? {
        func report(_ node: some SyntaxProtocol, _ message: PlinthDiagnostic) {
            if diagnose { context.diagnose(.init(node: Syntax(node), message: message)) }
        }
        guard let variable = declaration.as(VariableDeclSyntax.self), variable.bindingSpecifier.tokenKind == .keyword(.var),
              variable.bindings.count == 1, let binding = variable.bindings.first,
              let name = binding.pattern.as(IdentifierPatternSyntax.self).map({ TypeAnalysis.plainName($0.identifier) }),
              binding.accessorBlock == nil else {
            report(declaration, .sessionEntryNotStoredVar)
            return nil
        }
        guard let type = binding.typeAnnotation?.type.trimmed else {
            report(binding, .missingEntryType(property: name))
            return nil
        }
        guard let value = binding.initializer?.value.trimmed else {
            report(binding, .missingEntryDefault(property: name))
            return nil
        }
        return (name, type, value)
    }

    public static func expansion(of node: AttributeSyntax, providingAccessorsOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [AccessorDeclSyntax] {
        guard let (name, _, _) = entry(declaration, in: context, diagnose: true) else { return [] }
        return [
            "get { self[__Key_\(raw: name).self] }",
            "set { self[__Key_\(raw: name).self] = newValue }",
        ]
    }

    public static func expansion(of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [DeclSyntax] {
        // The accessor expansion reports the problems.
        guard let (name, type, value) = entry(declaration, in: context, diagnose: false) else { return [] }
        return [
            """
            private struct __Key_\(raw: name): SessionPropertyKey {
                static var defaultValue: \(type) { \(value) }
            }
            """
        ]
    }
}
