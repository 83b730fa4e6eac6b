import PlinthMacros
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

let testMacros: [String: MacroSpec] = [
    "Generable": MacroSpec(type: GenerableMacro.self, conformances: ["Generable"]),
    "Guide": MacroSpec(type: GuideMacro.self),
]

final class GenerableExpansionTests: XCTestCase {
    func testEveryGuideKind() {
        assertMacroExpansion(Cases.allGuides, expandedSource: Expected.allGuides, macroSpecs: testMacros)
    }

    func testSimpleEnum() {
        assertMacroExpansion(Cases.simpleEnum, expandedSource: Expected.simpleEnum, macroSpecs: testMacros)
    }

    func testEnumWithAssociatedValues() {
        assertMacroExpansion(Cases.payloadEnum, expandedSource: Expected.payloadEnum, macroSpecs: testMacros)
    }

    func testNameExplicitNilSendableAndIDProperty() {
        assertMacroExpansion(Cases.options, expandedSource: Expected.options, macroSpecs: testMacros)
    }
}
