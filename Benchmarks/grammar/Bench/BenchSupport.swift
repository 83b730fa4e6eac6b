// What every mode of plinth-grammar-bench shares: the corpus, the models' vocabularies, timing.
import Foundation
import PlinthGrammar
import PlinthRuntime

let modelNames = ["smol": "SmolLM2-135M-Instruct", "qwen": "Qwen2.5-Coder-0.5B-Instruct", "gemma": "Gemma-3-270M"]

func nanos() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// CPU time of the calling thread, or of the whole process: unlike wall time, it leaves out the
/// time other processes on a shared machine take from this one.
func threadCPUNanos() -> UInt64 { cpuNanos(CLOCK_THREAD_CPUTIME_ID) }
func processCPUNanos() -> UInt64 { cpuNanos(CLOCK_PROCESS_CPUTIME_ID) }

/// Minor page faults of the process so far (fresh memory the kernel had to zero).
func minorPageFaults() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_minflt
}

private func cpuNanos(_ clock: clockid_t) -> UInt64 {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func percentile(_ xs: [Double], _ p: Double) -> Double {
    guard !xs.isEmpty else { return .nan }
    let s = xs.sorted()
    return s[min(s.count - 1, Int((Double(s.count - 1) * p).rounded()))]
}

func median(_ xs: [Double]) -> Double { percentile(xs, 0.5) }

/// The corpus lives beside the repository (../shared); find it from this source file when the
/// working directory is elsewhere.
func defaultCorpusDirectory() -> String {
    let relative = "../shared/schema-corpus"
    if FileManager.default.fileExists(atPath: relative) { return relative }
    let beside = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../../../shared/schema-corpus").standardized.path
    return FileManager.default.fileExists(atPath: beside) ? beside : relative
}

struct SchemaFile { var name: String; var schema: JSONValue; var tests: [(data: JSONValue, valid: Bool)] }

extension JSONValue {
    var objectArray: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
}

/// The corpus files (sorted by name) whose name contains `only`, when given.
func loadCorpus(_ dir: String, only: String? = nil) throws -> [SchemaFile] {
    let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".json") && $0 != "index.json" }.sorted()
    var corpus: [SchemaFile] = []
    for f in files where only.map({ f.contains($0) }) ?? true {
        let doc = try JSONValue(parsing: Data(contentsOf: URL(fileURLWithPath: dir + "/" + f)))
        guard let schema = doc["schema"], let tests = doc["tests"]?.objectArray else { continue }
        corpus.append(SchemaFile(name: f, schema: schema, tests: tests.compactMap { t in
            guard let d = t["data"], case .bool(let v)? = t["valid"] else { return nil }
            return (d, v)
        }))
    }
    return corpus
}

/// The cached GGUF file of a model by short name (`smol`, `qwen`), or nil when not fetched.
func modelFile(_ short: String) -> URL? {
    guard let name = modelNames[short], let entry = ModelCatalog.entry(named: name) else { return nil }
    let path = ModelStore(home: ModelStore.defaultHome).path(for: entry)
    guard FileManager.default.fileExists(atPath: path.path) else {
        print("skipping \(name): not fetched (plinth models fetch \(name))")
        return nil
    }
    return path
}

/// The constrained decoder's view of a tokenizer: token bytes, with control and unknown tokens
/// excluded and the end-of-generation tokens as end of sequence.
func makeVocabulary(_ tokenizer: Tokenizer) throws -> TokenVocabulary {
    let n = tokenizer.vocabularySize
    let tokens = (0..<n).map { tokenizer.tokenBytes(Int32($0)) }
    let special = Set((0..<n).map(Int32.init).filter { tokenizer.isControl($0) || tokenizer.attributes($0).contains(.unknown) })
    return try TokenVocabulary(tokens: tokens, endOfSequence: tokenizer.endOfGenerationIDs, excluded: special)
}

/// A model's tokenizer and vocabulary, with the time the vocabulary took to build.
func loadVocabulary(_ short: String) throws -> (tokenizer: Tokenizer, vocabulary: TokenVocabulary, buildMs: Double)? {
    guard let path = modelFile(short) else { return nil }
    let tokenizer = try Tokenizer(gguf: GGUFFile(url: path))
    let t0 = nanos()
    let vocabulary = try makeVocabulary(tokenizer)
    return (tokenizer, vocabulary, Double(nanos() - t0) / 1e6)
}
