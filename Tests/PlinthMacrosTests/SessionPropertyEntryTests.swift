import PlinthMacros
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

private let entryMacros: [String: MacroSpec] = ["SessionPropertyEntry": MacroSpec(type: SessionPropertyEntryMacro.self)]

/// `@SessionPropertyEntry`: accessors over a key of the property's own, and what it refuses.
final class SessionPropertyEntryTests: XCTestCase {
    func testEntry() {
        assertMacroExpansion(
            """
            extension SessionPropertyValues {
                @SessionPropertyEntry
                var activatedSkills: [String: Bool] = [:]
            }
            """,
            expandedSource: """
            extension SessionPropertyValues {
                var activatedSkills: [String: Bool] {
                    get {
                        self[__Key_activatedSkills.self]
                    }
                    set {
                        self[__Key_activatedSkills.self] = newValue
                    }
                }

                private struct __Key_activatedSkills: SessionPropertyKey {
                    static var defaultValue: [String: Bool] {
                        [:]
                    }
                }
            }
            """,
            macroSpecs: entryMacros)
    }

    func testBacktickedName() {
        assertMacroExpansion(
            """
            extension SessionPropertyValues {
                @SessionPropertyEntry
                var `default`: Int = 1
            }
            """,
            expandedSource: """
            extension SessionPropertyValues {
                var `default`: Int {
                    get {
                        self[__Key_default.self]
                    }
                    set {
                        self[__Key_default.self] = newValue
                    }
                }

                private struct __Key_default: SessionPropertyKey {
                    static var defaultValue: Int {
                        1
                    }
                }
            }
            """,
            macroSpecs: entryMacros)
    }

    func testMissingType() {
        assertMacroExpansion(
            """
            extension SessionPropertyValues {
                @SessionPropertyEntry
                var count = 0
            }
            """,
            expandedSource: """
            extension SessionPropertyValues {
                var count = 0
            }
            """,
            diagnostics: [DiagnosticSpec(
                message: "Session property 'count' needs an explicit type annotation, such as 'count: Int = 0'",
                line: 3, column: 9)],
            macroSpecs: entryMacros)
    }

    func testMissingDefault() {
        assertMacroExpansion(
            """
            extension SessionPropertyValues {
                @SessionPropertyEntry
                var name: String
            }
            """,
            expandedSource: """
            extension SessionPropertyValues {
                var name: String
            }
            """,
            diagnostics: [DiagnosticSpec(
                message: "Session property 'name' needs a default value, such as 'name: Int = 0': a session starts with it",
                line: 3, column: 9)],
            macroSpecs: entryMacros)
    }

    func testLet() {
        assertMacroExpansion(
            """
            extension SessionPropertyValues {
                @SessionPropertyEntry
                let limit: Int = 3
            }
            """,
            expandedSource: """
            extension SessionPropertyValues {
                let limit: Int = 3
            }
            """,
            diagnostics: [DiagnosticSpec(
                message: "@SessionPropertyEntry applies to one stored 'var' with a type and a default value, in an extension on SessionPropertyValues",
                line: 2, column: 5)],
            macroSpecs: entryMacros)
    }
}
