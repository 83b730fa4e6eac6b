import PlinthMacros
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

/// Each diagnostic the macros report, with the expansion that goes with it.
final class DiagnosticTests: XCTestCase {
    func testClass() {
        assertMacroExpansion(
            """
            @Generable
            class Note {
                var text: String = ""
            }
            """,
            expandedSource: """
            class Note {
                var text: String = ""
            }
            """,
            diagnostics: [DiagnosticSpec(
                message: "@Generable can only be applied to a struct or an enum, not a class; use a struct to describe the generated value",
                line: 1, column: 1)],
            macroSpecs: testMacros)
    }

    func testActor() {
        assertMacroExpansion(
            "@Generable actor Store {}",
            expandedSource: "actor Store {}",
            diagnostics: [DiagnosticSpec(
                message: "@Generable can only be applied to a struct or an enum, not an actor; use a struct to describe the generated value",
                line: 1, column: 1)],
            macroSpecs: testMacros)
    }

    func testMissingTypeAnnotation() {
        assertMacroExpansion(
            """
            @Generable
            struct Point {
                var x = 0
            }
            """,
            expandedSource: """
            struct Point {
                var x = 0
            }
            """,
            diagnostics: [DiagnosticSpec(
                message: "Property 'x' of a @Generable type needs an explicit type annotation, such as 'x: String'",
                line: 3, column: 9)],
            macroSpecs: testMacros)
    }

    func testNonGenerablePropertyTypes() {
        assertMacroExpansion(
            """
            @Generable
            struct Bad {
                var scores: [String: Int]
                var pair: (Int, Int)
                var callback: () -> Void
                var small: UInt8
                var anything: any Sendable
            }
            """,
            expandedSource: """
            struct Bad {
                var scores: [String: Int]
                var pair: (Int, Int)
                var callback: () -> Void
                var small: UInt8
                var anything: any Sendable
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "Property 'scores' has type '[String: Int]', which is not Generable: dictionaries can't be generated; use an array of a @Generable struct with key and value properties", line: 3, column: 17),
                DiagnosticSpec(message: "Property 'pair' has type '(Int, Int)', which is not Generable: tuples can't be generated; use a @Generable struct", line: 4, column: 15),
                DiagnosticSpec(message: "Property 'callback' has type '() -> Void', which is not Generable: functions can't be generated", line: 5, column: 19),
                DiagnosticSpec(message: "Property 'small' has type 'UInt8', which is not Generable: UInt8 isn't Generable; use Int with a .range guide", line: 6, column: 16),
                DiagnosticSpec(message: "Property 'anything' has type 'any Sendable', which is not Generable: opaque and existential types can't be generated; use a concrete @Generable type", line: 7, column: 19),
            ],
            macroSpecs: testMacros)
    }

    func testNonGenerableAssociatedValue() {
        assertMacroExpansion(
            """
            @Generable
            enum Event {
                case tick([String: Int])
            }
            """,
            expandedSource: """
            enum Event {
                case tick([String: Int])
            }
            """,
            diagnostics: [DiagnosticSpec(
                message: "The case 'tick' can't be generated: its associated value of type '[String: Int]' isn't Generable: dictionaries can't be generated; use an array of a @Generable struct with key and value properties",
                line: 3, column: 15)],
            macroSpecs: testMacros)
    }

    func testGuideOnAFunctionAndOnComputedAndStaticProperties() {
        assertMacroExpansion(
            """
            struct S {
                @Guide(description: "no")
                func f() {}
                @Guide(description: "no")
                var c: Int { 1 }
                @Guide(description: "no")
                static var s: Int = 1
            }
            """,
            expandedSource: """
            struct S {
                func f() {}
                var c: Int { 1 }
                static var s: Int = 1
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "@Guide can only be applied to a stored property of a @Generable type", line: 2, column: 5),
                DiagnosticSpec(message: "@Guide can only be applied to a stored property of a @Generable type", line: 4, column: 5),
                DiagnosticSpec(message: "@Guide can't be applied to a static property; only instance properties are generated", line: 6, column: 5),
            ],
            macroSpecs: testMacros)
    }

    /// A guide for the wrong kind of value, and guides whose literals can't be satisfied.
    func testGuideMismatchesAndImpossibleGuides() {
        assertMacroExpansion(
            """
            struct S {
                @Guide(.range(1...5))
                var name: String
                @Guide(.anyOf(["a"]))
                var count: Int
                @Guide(.count(2))
                var flag: Bool
                @Guide(/[a-z]+/)
                var age: Int
                @Guide(.count(-1))
                var a: [Int]
                @Guide(.range(9...1))
                var b: Int
                @Guide(.anyOf([]))
                var c: String
                @Guide(.element(.anyOf(["x"])))
                var d: [Int]
                @Guide(.minimumCount(-3))
                var e: [String]
            }
            """,
            expandedSource: """
            struct S {
                var name: String
                var count: Int
                var flag: Bool
                var age: Int
                var a: [Int]
                var b: Int
                var c: String
                var d: [Int]
                var e: [String]
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "The guide '.range' applies to numbers (Int, Float, Double, Decimal), but 'name' has type 'String'", line: 2, column: 12),
                DiagnosticSpec(message: "The guide '.anyOf' applies to String, but 'count' has type 'Int'", line: 4, column: 12),
                DiagnosticSpec(message: "The guide '.count' applies to arrays, but 'flag' has type 'Bool'", line: 6, column: 12),
                DiagnosticSpec(message: "A Regex guide applies to String properties, but 'age' has type 'Int'", line: 8, column: 12),
                DiagnosticSpec(message: "The count in '.count' can't be negative", line: 10, column: 12),
                DiagnosticSpec(message: "The range in '.range' is empty: its lower bound is greater than its upper bound", line: 12, column: 12),
                DiagnosticSpec(message: "'.anyOf' needs at least one choice", line: 14, column: 12),
                DiagnosticSpec(message: "The guide '.anyOf' applies to String, but 'd's elements' has type 'Int'", line: 16, column: 21),
                DiagnosticSpec(message: "The count in '.minimumCount' can't be negative", line: 18, column: 12),
            ],
            macroSpecs: testMacros)
    }

    func testValidGuidesReportNothing() {
        assertMacroExpansion(
            """
            struct S {
                @Guide(description: "A name", .constant("x"))
                var name: String?
                @Guide(.range(0.0...1.0))
                var ratio: Decimal
                @Guide(.count(0...3), .element(.pattern(/a+/)))
                var list: [String]
                @Guide(description: "Anything")
                var custom: MyType
            }
            """,
            expandedSource: """
            struct S {
                var name: String?
                var ratio: Decimal
                var list: [String]
                var custom: MyType
            }
            """,
            macroSpecs: testMacros)
    }
}
