import Foundation
import Testing
@testable import PlinthGrammar

/// Property-based and differential checks of the decoder's central promise: a token is allowed
/// exactly when the output can still be completed through it, and every completed output is
/// valid for the schema according to an independent validator.
@Suite("Soundness")
struct SoundnessTests {
    static let schemas: [String] = [
        #"{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":6},"age":{"type":"integer","minimum":0,"maximum":130},"tags":{"type":"array","items":{"type":"string","enum":["a","bb","ccc"]},"maxItems":3}},"required":["name","age"]}"#,
        #"{"type":"array","items":{"anyOf":[{"type":"number","exclusiveMinimum":-2.5,"maximum":10},{"type":"boolean"},{"type":"null"}]},"minItems":1,"maxItems":4}"#,
        #"{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-f0-9]{2,4}(-x)?$"},"when":{"type":"string","format":"date"},"n":{"type":"integer","multipleOf":3}},"additionalProperties":{"type":"integer"}}"#,
        ##"{"$defs":{"t":{"type":"object","properties":{"v":{"type":"string","maxLength":3},"kids":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/t"}"##,
        #"{"anyOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"number"}},"required":["kind","x"]},{"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"string","pattern":"z"}},"required":["kind","y"]}]}"#,
        #"{"type":"string","minLength":2,"maxLength":5}"#,
        #"{"type":"object","properties":{"a":{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false},"b":{"type":["string","null"]}},"required":["a"]}"#,
    ]

    /// Tokens in the order a finishing walk prefers them (close strings, arrays, objects).
    static let finishing: [UInt8] = Array(#""}]0a1-2.e5:,tnul"#.utf8)

    /// Random walks: at every step the mask must agree with `accept` for every token, and
    /// the walk ends in a complete value.
    static func randomWalks(_ g: CompiledGrammar, seed: UInt64, walks: Int, checkAll: Bool) -> [String] {
        var rng = SplitMix(state: seed)
        var outputs: [String] = []
        let v = TestVocab.vocabulary
        for _ in 0..<walks {
            let m = g.makeMatcher()
            var bytes: [UInt8] = []
            var steps = 0
            while steps < 120 {
                steps += 1
                let mask = m.allowedTokens()
                let allowed = (0..<Int32(v.size)).filter { TestVocab.isAllowed(mask, $0) }
                if checkAll {
                    for t in 0..<Int32(v.size) {
                        let ok = m.accept(t)
                        if ok { m.rollback(1) }
                        #expect(ok == TestVocab.isAllowed(mask, t), "mask and accept disagree on token \(t) after \(String(decoding: bytes, as: UTF8.self))")
                    }
                }
                #expect(!allowed.isEmpty, "dead end after \(String(decoding: bytes, as: UTF8.self))")
                if allowed.isEmpty { break }
                if allowed.contains(TestVocab.eos) && (steps > 20 || Bool.random(using: &rng)) { break }
                let t: Int32
                if steps > 30 {
                    // Finish greedily: forced bytes first, else the first finishing byte allowed.
                    if let f = m.forcedBytes().first { t = Int32(f) }
                    else if let f = finishing.first(where: { allowed.contains(Int32($0)) }) { t = Int32(f) }
                    else { t = allowed[Int(rng.next() % UInt64(allowed.count))] }
                } else {
                    t = allowed[Int(rng.next() % UInt64(allowed.count))]
                }
                #expect(m.accept(t))
                if t == TestVocab.eos { break }
                bytes += v.bytes(of: t)
            }
            if m.isComplete { outputs.append(String(decoding: bytes, as: UTF8.self)) }
        }
        return outputs
    }

    /// Masks come partly from the grammar's cache of frontier walks (by stack), which the later
    /// walks of a grammar reuse; `accept` never does, so the two agreeing checks the cache too.
    @Test func maskAgreesWithAcceptEverywhere() throws {
        var completed = 0, cachedStacks = 0
        for (i, s) in Self.schemas.enumerated() {
            let g = try TestVocab.grammar(s, GrammarOptions(additionalPropertiesByDefault: false))
            completed += Self.randomWalks(g, seed: UInt64(i + 1), walks: 3, checkAll: true).count
            cachedStacks += g.frontierMasks.withLock { $0.entries.count }
        }
        #expect(completed >= Self.schemas.count * 2)
        #expect(cachedStacks > 0)
    }

    /// Runs a python3 script with `input` on its standard input; its standard output.
    static func runPython(_ script: String, input: Data) throws -> Data {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", script]
        let inPipe = Pipe(), outPipe = Pipe()
        p.standardInput = inPipe
        p.standardOutput = outPipe
        try p.run()
        // Written from another thread: the script's output can fill its pipe before it has read all its input.
        let writer = Thread { inPipe.fileHandleForWriting.write(input); try? inPipe.fileHandleForWriting.close() }
        writer.start()
        let out = outPipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return out
    }

    static var pythonJSONSchema: Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", "import jsonschema"]
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return false }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }

    @Test("Generated outputs validate with python-jsonschema",
          .enabled(if: pythonJSONSchema, "python3 with the jsonschema package is not installed"))
    func outputsValidateIndependently() throws {
        var pairs: [[String: String]] = []
        for (i, s) in Self.schemas.enumerated() {
            let g = try TestVocab.grammar(s)
            for out in Self.randomWalks(g, seed: UInt64(100 + i), walks: 25, checkAll: false) { pairs.append(["schema": s, "instance": out]) }
        }
        #expect(pairs.count > Self.schemas.count * 15)
        let input = try JSONSerialization.data(withJSONObject: pairs)
        let script = """
        import json, sys, jsonschema
        bad = []
        for p in json.load(sys.stdin):
            schema = json.loads(p["schema"])
            try:
                inst = json.loads(p["instance"])
            except Exception as e:
                bad.append(("not JSON", p["instance"])); continue
            errs = list(jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).iter_errors(inst))
            if errs: bad.append((errs[0].message, p["instance"]))
        print(json.dumps(bad))
        """
        let out = try Self.runPython(script, input: input)
        let bad = (try JSONSerialization.jsonObject(with: out) as? [[String]]) ?? [["python failed"]]
        #expect(bad.isEmpty, "invalid outputs: \(bad.prefix(10))")
    }
}
