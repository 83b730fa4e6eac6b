import Foundation
import PlinthRuntime

/// llama.cpp's reference outputs for one model (made by Scripts/make_generation_fixtures.py).
struct GenerationFixture: Decodable {
    struct LastLogits: Decodable { var min: Float; var max: Float; var argmax: Int }
    /// llama.cpp against itself: the same prompt prefilled token by token.
    struct SelfAgreement: Decodable {
        var logit_error: Float
        var generated: [Int32]
    }
    struct Case: Decodable {
        var kind: String
        /// A chat case's messages as [role, content] pairs; `text` is their rendering.
        var messages: [[String]]?
        var text: String
        var prompt_ids: [Int32]
        var generated: [Int32]
        /// Per step: [top id, top logit, second id, second logit].
        var top2: [[Double]]
        var last_logits: LastLogits
        var llama_self: SelfAgreement
    }

    var model: String
    var llama_cpp_python: String
    var n_vocab: Int
    var logit_files_per_chunk: Int
    /// The cases whose last-position logits are stored, in file order; all when absent.
    var logit_cases: [Int]?
    var cases: [Case]

    /// The prompts of the first `count` cases (all when nil) as one batch: case s in slot s,
    /// logits at each prompt's last token.
    func promptBatch(first count: Int? = nil) -> Batch {
        var batch = Batch()
        for (s, c) in cases.prefix(count ?? cases.count).enumerated() {
            for (i, t) in c.prompt_ids.enumerated() { batch.add(t, position: i, slot: s, logits: i == c.prompt_ids.count - 1) }
        }
        return batch
    }

    static func load(_ name: String) throws -> GenerationFixture {
        try TestModels.fixture("generation/\(name).json")
    }

    /// The reference last-position logits of case `index`, restored from their int16 encoding;
    /// nil when the fixture keeps no logits for that case.
    func lastLogits(_ name: String, case index: Int) throws -> [Float]? {
        guard let stored = logit_cases.map({ $0.firstIndex(of: index) }) ?? index else { return nil }
        let chunk = stored / logit_files_per_chunk
        let url = TestModels.fixtures.appendingPathComponent("generation/\(name)_logits_\(chunk).bin")
        let data = try Data(contentsOf: url)
        let vocab = n_vocab
        let offset = 8 + (stored % logit_files_per_chunk) * vocab * 2
        let lo = cases[index].last_logits.min, hi = cases[index].last_logits.max
        return data.withUnsafeBytes { raw in
            (0..<vocab).map { i in
                let q = Int16(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 2 * i, as: Int16.self))
                return lo + (Float(Int(q) + 32768) / 65535) * (hi - lo)
            }
        }
    }
}
