import SwiftCompilerPlugin
import SwiftSyntaxMacros

@main
struct PlinthMacrosPlugin: CompilerPlugin {
    let providingMacros: [Macro.Type] = [GenerableMacro.self, GuideMacro.self, SessionPropertyEntryMacro.self]
}
