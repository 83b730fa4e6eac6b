import Foundation
import Testing
@testable import PlinthGrammar

/// The official JSON-Schema-Test-Suite (draft2020-12 and draft7) as grammar walks: every test
/// schema is compiled (strict mode, JSON Schema's own `additionalProperties` default) and every
/// instance is fed byte by byte. An invalid instance that the grammar accepts is a false
/// acceptance, and there must be none.
@Suite("JSON-Schema-Test-Suite")
struct SchemaTestSuiteTests {
    struct Counts: CustomStringConvertible {
        var acceptedValid = 0, rejectedValid = 0, rejectedInvalid = 0, falseAcceptance = 0
        var compileErrors = 0, compiledSchemas = 0
        var falseAcceptances: [String] = []
        var rejectedValids: [String] = []
        /// Per keyword (the suite's file): instances decided as the suite says, and all instances.
        var perKeyword: [(keyword: String, agree: Int, total: Int)] = []
        var table: String { perKeyword.map { "\($0.keyword) \($0.agree)/\($0.total)" }.joined(separator: ", ") }
        var description: String {
            "compiled \(compiledSchemas) schemas, compile errors \(compileErrors); accepted-valid \(acceptedValid), "
                + "rejected-valid \(rejectedValid), rejected-invalid \(rejectedInvalid), false acceptance \(falseAcceptance)"
        }
    }

    static var suiteRoot: URL? { SharedData.root?.appendingPathComponent("json-schema-test-suite/tests") }

    static func run(draft: String) throws -> Counts {
        let dir = suiteRoot!.appendingPathComponent(draft)
        var counts = Counts()
        let compiler = GrammarCompiler(vocabulary: TestVocab.vocabulary)
        let options = GrammarOptions(additionalPropertiesByDefault: true, stateBudget: 100_000, timeLimit: 5)
        for file in try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() where file.hasSuffix(".json") {
            let groups = try JSONValue(parsing: Data(contentsOf: dir.appendingPathComponent(file)))
            let before = counts.acceptedValid + counts.rejectedInvalid
            var total = 0
            defer { counts.perKeyword.append((String(file.dropLast(5)), counts.acceptedValid + counts.rejectedInvalid - before, total)) }
            for group in groups.arrayValue ?? [] {
                guard let schema = group["schema"], let tests = group["tests"]?.arrayValue else { continue }
                let grammar: CompiledGrammar
                total += tests.count
                do {
                    grammar = try compiler.compile(schema: schema, options: options)
                    counts.compiledSchemas += 1
                } catch {
                    counts.compileErrors += 1
                    continue
                }
                for t in tests {
                    guard let data = t["data"], case .bool(let valid)? = t["valid"] else { continue }
                    let text = data.reordered(forSchema: schema).compactText
                    let ok = TestVocab.accepts(grammar, text)
                    switch (valid, ok) {
                    case (true, true): counts.acceptedValid += 1
                    case (true, false):
                        counts.rejectedValid += 1
                        counts.rejectedValids.append("\(file): \(group["description"]?.stringValue ?? "") / \(t["description"]?.stringValue ?? "")")
                    case (false, false): counts.rejectedInvalid += 1
                    case (false, true):
                        counts.falseAcceptance += 1
                        counts.falseAcceptances.append("\(file): \(group["description"]?.stringValue ?? "") / \(t["description"]?.stringValue ?? ""): \(text)")
                    }
                }
            }
        }
        return counts
    }

    @Test("draft2020-12", .enabled(if: suiteRoot != nil, "../shared/json-schema-test-suite is not beside this repository (a user's clone has no ../shared)"))
    func draft2020() throws {
        let c = try Self.run(draft: "draft2020-12")
        print("JSON-Schema-Test-Suite draft2020-12: \(c)\nper keyword: \(c.table)\nvalid rejected: \(c.rejectedValids.joined(separator: "; "))")
        #expect(c.falseAcceptance == 0, "false acceptances: \(c.falseAcceptances.joined(separator: "\n"))")
        #expect(c.acceptedValid > 300)
    }

    @Test("draft7", .enabled(if: suiteRoot != nil, "../shared/json-schema-test-suite is not beside this repository (a user's clone has no ../shared)"))
    func draft7() throws {
        let c = try Self.run(draft: "draft7")
        print("JSON-Schema-Test-Suite draft7: \(c)\nper keyword: \(c.table)\nvalid rejected: \(c.rejectedValids.joined(separator: "; "))")
        #expect(c.falseAcceptance == 0, "false acceptances: \(c.falseAcceptances.joined(separator: "\n"))")
        #expect(c.acceptedValid > 300)
    }
}
