import SwiftSyntax
import SwiftSyntaxMacros

/// `@SessionPropertyEntry var name: Type = value` in an extension on `SessionPropertyValues`:
/// the property reads and writes the session's value under a key of its own, a peer
/// `__Key_name` whose default value is the initial value.
public struct SessionPropertyEntryMacro: AccessorMacro, PeerMacro {
    /// The property's name, type and initial value, or a diagnostic when it isn't usable.
    private static func entry(_ declaration: some DeclSyntaxProtocol, in context: some MacroExpansionContext)
    -> (name: String, type: TypeSyntax, value: ExprSyntax)? {
        guard let variable = declaration.as(VariableDeclSyntax.self), variable.bindingSpecifier.tokenKind == .keyword(.var),
              variable.bindings.count == 1, let binding = variable.bindings.first,
              let name = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier.trimmedDescription,
              binding.accessorBlock == nil else {
            context.diagnose(.init(node: Syntax(declaration), message: PlinthDiagnostic.sessionEntryNotStoredVar))
            return nil
        }
        guard let type = binding.typeAnnotation?.type.trimmed else {
            context.diagnose(.init(node: Syntax(binding), message: PlinthDiagnostic.missingEntryType(property: name)))
            return nil
        }
        guard let value = binding.initializer?.value.trimmed else {
            context.diagnose(.init(node: Syntax(binding), message: PlinthDiagnostic.missingEntryDefault(property: name)))
            return nil
        }
        return (name, type, value)
    }

    public static func expansion(of node: AttributeSyntax, providingAccessorsOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [AccessorDeclSyntax] {
        guard let (name, _, _) = entry(declaration, in: context) else { return [] }
        return [
            "get { self[__Key_\(raw: name).self] }",
            "set { self[__Key_\(raw: name).self] = newValue }",
        ]
    }

    public static func expansion(of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [DeclSyntax] {
        // The accessor expansion reports the problems; the peer only needs a usable entry.
        guard let variable = declaration.as(VariableDeclSyntax.self), let binding = variable.bindings.first,
              variable.bindings.count == 1,
              let name = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier.trimmedDescription,
              let type = binding.typeAnnotation?.type.trimmed, let value = binding.initializer?.value.trimmed else { return [] }
        return [
            """
            private struct __Key_\(raw: name): SessionPropertyKey {
                static var defaultValue: \(type) { \(value) }
            }
            """
        ]
    }
}
