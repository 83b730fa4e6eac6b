import Foundation
import PlinthRuntime
import Testing
@testable import PlinthGrammar

/// The 410 real-world schemas of `../shared/schema-corpus` with their labelled instances, walked
/// token by token with the real SmolLM2 vocabulary: no valid instance may be rejected, and
/// invalid instances of compiled schemas are rejected.
@Suite("Schema corpus")
struct CorpusTests {
    static var corpus: URL? { SharedData.root?.appendingPathComponent("schema-corpus") }
    static var model: URL? {
        guard let entry = ModelCatalog.entry(named: "SmolLM2-135M-Instruct") else { return nil }
        let url = ModelStore(home: ModelStore.defaultHome).path(for: entry)
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }

    @Test("Valid corpus instances are never rejected",
          .enabled(if: corpus != nil, "../shared/schema-corpus is not beside this repository"),
          .enabled(if: model != nil, "SmolLM2-135M-Instruct is not fetched (plinth models fetch SmolLM2-135M-Instruct)"))
    func corpusWalks() throws {
        let tokenizer = try Tokenizer(gguf: GGUFFile(url: Self.model!))
        let n = tokenizer.vocabularySize
        let special = Set((0..<n).map(Int32.init).filter { tokenizer.isControl($0) })
        let vocabulary = try TokenVocabulary(tokens: (0..<n).map { tokenizer.tokenBytes(Int32($0)) },
                                             endOfSequence: tokenizer.endOfGenerationIDs, excluded: special)
        let compiler = GrammarCompiler(vocabulary: vocabulary)
        let options = GrammarOptions(additionalPropertiesByDefault: true)
        var compiled = 0, errors = 0, validOK = 0, invalidRejected = 0, invalidAccepted = 0
        var rejectedValid: [String] = []
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.corpus!.path).filter { $0.hasSuffix(".json") && $0 != "index.json" }.sorted()
        for f in files {
            let doc = try JSONValue(parsing: Data(contentsOf: Self.corpus!.appendingPathComponent(f)))
            guard let schema = doc["schema"] else { continue }
            guard let g = try? compiler.compile(schema: schema, options: options) else { errors += 1; continue }
            compiled += 1
            for (i, t) in (doc["tests"]?.arrayValue ?? []).enumerated() {
                guard let data = t["data"], case .bool(let valid)? = t["valid"] else { continue }
                let text = data.reordered(forSchema: schema).compactText
                let m = g.makeMatcher()
                var ok = true
                for tok in tokenizer.encode(text, addSpecial: false) where !m.accept(tok) { ok = false; break }
                ok = ok && m.isComplete
                if valid { if ok { validOK += 1 } else { rejectedValid.append("\(f)#\(i)") } }
                else if ok { invalidAccepted += 1 } else { invalidRejected += 1 }
            }
        }
        print("schema corpus: compiled \(compiled)/\(files.count) (errors \(errors)); valid accepted \(validOK), valid rejected \(rejectedValid.count); invalid rejected \(invalidRejected), invalid accepted \(invalidAccepted)")
        #expect(compiled >= 355)
        #expect(rejectedValid.isEmpty, "valid instances rejected: \(rejectedValid)")
        #expect(invalidAccepted == 0)
    }
}
