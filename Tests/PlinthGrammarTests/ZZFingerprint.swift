import Foundation
import Testing
@testable import PlinthGrammar

// TEMPORARY (not committed): fingerprints of every schema's compiled grammar, to check a
// refactor leaves the compiler's output unchanged.
@Suite struct ZZFingerprint {
    static func digest(_ g: Grammar) -> String {
        var h = Hasher()
        var a: [Int] = []
        a += g.classMaps.map(Int.init); a.append(-9)
        a += g.classMapOf.map(Int.init); a.append(-9)
        a += g.next.map(Int.init); a.append(-9)
        a += g.rowOf.map(Int.init); a.append(-9)
        for e in g.single { a += [Int(e.lo), Int(e.hi), Int(e.to)] }; a.append(-9)
        a += g.accepting.map { $0 ? 1 : 0 }; a.append(-9)
        a += g.callStart.map(Int.init); a += g.callRule.map(Int.init); a += g.callReturn.map(Int.init); a.append(-9)
        a += g.ruleOf.map(Int.init); a += g.ruleStart.map(Int.init); a += g.isBoundary.map { $0 ? 1 : 0 }
        a += g.ruleMinCount.map(Int.init); a += g.ruleMaxCount.map(Int.init); a += g.returnLabel.map(Int.init)
        // FNV over the ints (Hasher is seeded per process).
        var f: UInt64 = 0xcbf29ce484222325
        for x in a { f = (f ^ UInt64(bitPattern: Int64(x))) &* 0x100000001b3 }
        _ = h
        let labels = g.labels.map(\.description).joined(separator: ",")
        var f2: UInt64 = 0xcbf29ce484222325
        for c in labels.utf8 { f2 = (f2 ^ UInt64(c)) &* 0x100000001b3 }
        return "\(g.stateCount):\(String(f, radix: 16)):\(String(f2, radix: 16))"
    }

    @Test func fingerprint() throws {
        guard let out = ProcessInfo.processInfo.environment["PLINTH_FINGERPRINT"], let root = SharedData.root else { return }
        var schemas: [(String, JSONValue)] = []
        let corpus = root.appendingPathComponent("schema-corpus")
        for f in try FileManager.default.contentsOfDirectory(atPath: corpus.path).sorted() where f.hasSuffix(".json") && f != "index.json" {
            let doc = try JSONValue(parsing: Data(contentsOf: corpus.appendingPathComponent(f)))
            if let s = doc["schema"] { schemas.append((f, s)) }
        }
        for draft in ["draft2020-12", "draft7"] {
            let dir = root.appendingPathComponent("json-schema-test-suite/tests/" + draft)
            for f in try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() where f.hasSuffix(".json") {
                let groups = try JSONValue(parsing: Data(contentsOf: dir.appendingPathComponent(f)))
                for (i, g) in (groups.arrayValue ?? []).enumerated() { if let s = g["schema"] { schemas.append(("\(draft)/\(f)#\(i)", s)) } }
            }
        }
        let optionSets: [(String, GrammarOptions)] = [
            ("strict", GrammarOptions(stateBudget: 100_000, timeLimit: nil)),
            ("ap", GrammarOptions(additionalPropertiesByDefault: true, stateBudget: 100_000, timeLimit: nil)),
            ("lenient", GrammarOptions(lenient: true, stateBudget: 100_000, timeLimit: nil)),
            ("ws", GrammarOptions(whitespace: .flexible(maxRun: 2), generatedNumbers: true)),
        ]
        var lines: [String] = []
        for (name, s) in schemas {
            for (on, o) in optionSets {
                let sc = SchemaCompiler(s, options: o)
                var line = "\(name)|\(on)|"
                do {
                    let g = try sc.compile()
                    line += Self.digest(g) + "|ignored=" + sc.ignored.joined(separator: ",")
                } catch {
                    line += "ERR \(error)"
                }
                lines.append(line)
            }
        }
        try lines.joined(separator: "\n").write(toFile: out, atomically: true, encoding: .utf8)
    }
}
