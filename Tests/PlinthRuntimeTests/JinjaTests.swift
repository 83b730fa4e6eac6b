import Foundation
import Testing
@testable import PlinthJinja
@testable import PlinthRuntime

/// The Jinja engine against templates rendered by Python's jinja2 (configured as transformers
/// configures it), and its errors.
@Suite("Jinja")
struct JinjaTests {
    // MARK: - Fixtures made by Scripts/make_chat_template_fixtures.py

    struct SyntheticCase: Decodable, Sendable, CustomTestStringConvertible {
        struct ExpectedError: Decodable, Sendable {
            let type: String
            let message: String
        }

        let name: String
        let template: String
        let contextJSON: String
        let expected: String?
        let error: ExpectedError?

        enum CodingKeys: String, CodingKey {
            case name, template, expected, error
            case contextJSON = "context_json"
        }

        var testDescription: String { name }
    }

    struct SyntheticFixture: Decodable {
        let cases: [SyntheticCase]
    }

    static func syntheticCases() throws -> [SyntheticCase] {
        try TestModels.fixture("chat_templates/synthetic.json", as: SyntheticFixture.self).cases
    }

    static func context(_ json: String) throws -> [String: JinjaValue] {
        guard case .object(let object) = try JinjaValue(json: json) else { return [:] }
        var context: [String: JinjaValue] = [:]
        for (key, value) in object { context[key] = value }
        return context
    }

    /// The engine's error case for each jinja2 exception class.
    static func matches(_ error: ChatTemplateError, pythonType: String, message: String) -> Bool {
        switch (pythonType, error) {
        case ("TemplateSyntaxError", .syntax): return true
        case ("TemplateAssertionError", .unknownFilter), ("TemplateAssertionError", .unknownTest): return true
        case ("TemplateRuntimeError", .unknownFilter): return message.hasPrefix("No filter named")
        case ("TemplateRuntimeError", .invalidOperation): return !message.hasPrefix("No filter named")
        case ("UndefinedError", .undefinedValue): return true
        case ("TemplateError", .raisedException(let m, _)): return m == message
        case ("TypeError", .invalidOperation), ("ValueError", .invalidOperation),
             ("ZeroDivisionError", .invalidOperation), ("SecurityError", .invalidOperation):
            return true
        default: return false
        }
    }

    @Test("fixture count") func fixtureCount() throws {
        let cases = try Self.syntheticCases()
        #expect(cases.count >= 80)
        #expect(cases.contains { $0.error != nil })
    }

    @Test("renders like jinja2", arguments: try syntheticCases())
    func synthetic(_ c: SyntheticCase) throws {
        let context = try Self.context(c.contextJSON)
        if let expected = c.expected {
            let output = try JinjaTemplate(c.template).render(context)
            #expect(output == expected, "\(c.name)\n--- got ---\n\(output)\n--- expected ---\n\(expected)")
        } else if let wanted = c.error {
            do {
                let output = try JinjaTemplate(c.template).render(context)
                Issue.record("\(c.name): expected \(wanted.type) (\(wanted.message)), rendered \(output.debugDescription)")
            } catch {
                #expect(Self.matches(error, pythonType: wanted.type, message: wanted.message),
                        "\(c.name): jinja2 raised \(wanted.type): \(wanted.message); got \(error)")
                #expect(error.location != nil, "\(c.name): the error should name a position")
            }
        } else {
            Issue.record("\(c.name): the fixture has neither an expected output nor an error")
        }
    }

    // MARK: - Errors name their position

    private func error(_ template: String, _ context: [String: JinjaValue] = [:]) -> ChatTemplateError? {
        do {
            _ = try JinjaTemplate(template).render(context)
            return nil
        } catch {
            return error
        }
    }

    @Test func unclosedBlockPointsAtItsOpeningTag() {
        let e = error("line one\n  {% if x %}\n  body\n")
        guard case .syntax(let message, let at)? = e else {
            Issue.record("expected a syntax error, got \(String(describing: e))")
            return
        }
        #expect(at == TemplateSourceLocation(line: 2, column: 3))
        #expect(message.contains("'if'"))
        #expect(e?.errorDescription?.contains("line 2, column 3") == true)
    }

    @Test func unclosedExpressionPointsAtItsOpener() {
        guard case .syntax(_, let at)? = error("ab\ncd {{ name") else {
            Issue.record("expected a syntax error")
            return
        }
        #expect(at == TemplateSourceLocation(line: 2, column: 4))
    }

    @Test func unclosedStatementTag() {
        guard case .syntax(let message, let at)? = error("{% for x in xs %}{{ x }}{% endfor") else {
            Issue.record("expected a syntax error")
            return
        }
        #expect(at == TemplateSourceLocation(line: 1, column: 25))
        #expect(message.contains("%}"))
    }

    @Test func unknownFilterIsReportedAtParseTime() {
        do {
            _ = try JinjaTemplate("{{ 'a' }}\n{{ x | upper | shout }}")
            Issue.record("expected an unknown-filter error")
        } catch {
            #expect(error == .unknownFilter("shout", at: TemplateSourceLocation(line: 2, column: 16)))
            #expect(error.errorDescription?.contains("shout") == true)
        }
    }

    @Test func unknownFilterInsideIfIsReportedWhenUsed() throws {
        let template = try JinjaTemplate("{% if flag %}{{ x | shout }}{% endif %}ok")
        #expect(try template.render(["flag": false]) == "ok")
        #expect(throws: ChatTemplateError.unknownFilter("shout", at: TemplateSourceLocation(line: 1, column: 21))) {
            try template.render(["flag": true])
        }
    }

    @Test func unknownTest() {
        #expect(error("{{ 1 is prime }}") == .unknownTest("prime", at: TemplateSourceLocation(line: 1, column: 9)))
    }

    @Test func raiseExceptionCarriesItsMessageAndPosition() {
        let e = error("{% for m in messages %}\n  {{ raise_exception('bad role: ' ~ m) }}\n{% endfor %}", ["messages": ["x"]])
        #expect(e == .raisedException("bad role: x", at: TemplateSourceLocation(line: 2, column: 21)))
        #expect(e?.errorDescription?.contains("bad role: x") == true)
    }

    @Test func undefinedAttributeAccess() {
        let e = error("{{ a }}\n{{ missing.field }}")
        #expect(e == .undefinedValue("'missing' is undefined", at: TemplateSourceLocation(line: 2, column: 11)))
    }

    @Test func typeErrorsNameTheOperation() {
        guard case .invalidOperation(let message, let at)? = error("{{ 'a' + 1 }}") else {
            Issue.record("expected an invalid operation")
            return
        }
        #expect(message == "can only concatenate str (not \"int\") to str")
        #expect(at.line == 1)
    }

    @Test func unknownTagAndStrayEndTag() {
        guard case .syntax(let m1, _)? = error("{% frobnicate %}"), case .syntax(let m2, _)? = error("a{% endfor %}") else {
            Issue.record("expected syntax errors")
            return
        }
        #expect(m1.contains("frobnicate"))
        #expect(m2.contains("endfor"))
    }

    @Test func breakOutsideLoopIsASyntaxError() {
        guard case .syntax? = error("{% break %}") else {
            Issue.record("expected a syntax error")
            return
        }
    }

    // MARK: - Values and JSON

    @Test func jsonKeepsKeyOrderAndPythonFormatting() throws {
        let text = #"{"z": 1, "a": [1.5, -0.0, 1e21, 1E-7, true, null, "é\n\"\u00e9\ud83d\ude00"], "m": {}, "z": 2}"#
        let value = try JinjaValue(json: text)
        guard case .object(let o) = value else {
            Issue.record("expected an object")
            return
        }
        #expect(o.keys == ["z", "a", "m"])
        #expect(o["z"] == .int(2))
        #expect(value.jsonString() == #"{"z": 2, "a": [1.5, -0.0, 1e+21, 1e-07, true, null, "é\n\"é😀"], "m": {}}"#)
        #expect(value.jsonString(indent: 2).hasPrefix("{\n  \"z\": 2,\n  \"a\": [\n    1.5,"))
        #expect(value.jsonString(sortKeys: true).hasPrefix(#"{"a": "#))
    }

    @Test func invalidJSONIsATypedError() {
        #expect(throws: ChatTemplateError.self) { try JinjaValue(json: #"{"a": }"#) }
        #expect(throws: ChatTemplateError.self) { try JinjaValue(json: "[1, 2] x") }
        #expect(throws: ChatTemplateError.self) { try JinjaValue(json: "\"tab\there\"") }
        #expect(throws: Never.self) { try JinjaValue(json: " [1, 2] ") }
    }

    @Test func literalsBuildValues() throws {
        let value: JinjaValue = ["b": [1, 2.5, "x", nil, true], "a": ["nested": [:]]]
        #expect(value.jsonString() == #"{"b": [1, 2.5, "x", null, true], "a": {"nested": {}}}"#)
        #expect(value["a"]?["nested"] == .object(JinjaObject()))
    }

    @Test func floatReprMatchesPython() {
        let cases: [(Double, String)] = [
            (1, "1.0"), (0.1, "0.1"), (1e16, "1e+16"), (1e15, "1000000000000000.0"), (1e-5, "1e-05"),
            (0.0001, "0.0001"), (123.456, "123.456"), (-2.5e-7, "-2.5e-07"), (Double.leastNonzeroMagnitude, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"), (0.1 + 0.2, "0.30000000000000004"),
            (100, "100.0"), (1234567890123456.7, "1234567890123456.8"), (12345678901234567.0, "1.2345678901234568e+16"),
        ]
        for (value, expected) in cases {
            #expect(Jinja.PythonText.floatRepr(value) == expected)
        }
    }

    @Test func deepNestingFailsCleanly() throws {
        // Within the limits: deep but legal templates work.
        let parens = String(repeating: "(", count: 65) + "1" + String(repeating: ")", count: 65)
        #expect(try JinjaTemplate("{{ \(parens) }}").render([:]) == "1")
        let recursive = try JinjaTemplate("{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{% endif %}x{% endmacro %}{{ r(depth) | length }}")
        #expect(try recursive.render(["depth": 140]) == "141")
        // Past them: a typed error, not a crash.
        let tooDeep = String(repeating: "(", count: 5000) + "1" + String(repeating: ")", count: 5000)
        #expect(throws: ChatTemplateError.self) { try JinjaTemplate("{{ \(tooDeep) }}") }
        #expect(throws: ChatTemplateError.self) { try JinjaTemplate(String(repeating: "{% if true %}", count: 5000)) }
        #expect(throws: ChatTemplateError.self) { try recursive.render(["depth": 100_000]) }
        #expect(throws: ChatTemplateError.self) { try JinjaValue(json: String(repeating: "[", count: 100_000)) }
        // Chains are parsed in loops but walked recursively: a long one is too deep, not a
        // stack overflow.
        for chain in [Array(repeating: "1", count: 5000).joined(separator: " + "), "x" + String(repeating: "|string", count: 5000),
                      "x" + String(repeating: ".a", count: 5000), "x" + String(repeating: "[0]", count: 5000),
                      Array(repeating: "x", count: 5000).joined(separator: " or "), Array(repeating: "2", count: 5000).joined(separator: " ** ")] {
            #expect(throws: ChatTemplateError.self) { try JinjaTemplate("{{ \(chain) }}") }
        }
    }

    /// A template asking for gigabytes gets an error, not the end of the process.
    @Test func hugeResultsAreErrors() throws {
        for source in ["{{ ('x' * 10000000000) | length }}", "{{ ([1, 2] * 4611686018427387904) | length }}", "{{ 'a'.center(1099511627776) }}",
                       "{{ 'a' | center(100000000000) }}", "{{ '%99999999999d' % 1 }}", "{{ 'x' | indent(100000000000) }}",
                       "{{ [1] | tojson(indent=100000000000) }}"] {
            let template = try JinjaTemplate(source)
            #expect(throws: ChatTemplateError.self, "\(source)") { try template.render([:]) }
        }
        #expect(try JinjaTemplate("{{ ('ab' * 1000) | length }}").render([:]) == "2000")
    }

    @Test func transformersGlobals() throws {
        let year = Calendar(identifier: .gregorian).component(.year, from: Date())
        #expect(try JinjaTemplate("{{ strftime_now('%Y') }}").render([:]) == String(year))
        #expect(try JinjaTemplate("{{ strftime_now('%d %b %Y') | length }}").render([:]) == "11")
        #expect(try JinjaTemplate("{% generation %}kept{% endgeneration %}").render([:]) == "kept")
    }

    @Test func templatesRenderConcurrently() async throws {
        let template = try JinjaTemplate("{% for i in range(n) %}{{ i }}{% endfor %}")
        try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for n in 0..<16 {
                group.addTask { (n, try template.render(["n": .int(n)])) }
            }
            for try await (n, output) in group {
                #expect(output == (0..<n).map(String.init).joined())
            }
        }
    }
}
