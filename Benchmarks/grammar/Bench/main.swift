// plinth-grammar-bench: walks the labelled instances of the schema corpus token by token through
// PlinthGrammar's matcher, timing every mask, and writes the same walks (token ids, vocabulary
// bytes) for `llguidance_bench.py`, so that both engines see identical inputs.
//
//   swift build -c release --scratch-path .build-grammar --product plinth-grammar-bench
//   .build-grammar/release/plinth-grammar-bench [--corpus DIR] [--out DIR] [--limit N] [--models smol,qwen]
//
// Other modes: `compile` (compile time alone, CompileTiming.swift) and `e2e` (generation with the
// model, E2EBenchmark.swift).
import Foundation
import PlinthGrammar
import PlinthRuntime

struct Options {
    var corpus = "../shared/schema-corpus"
    var out = "/tmp/plinth-grammar-bench"
    var limit = Int.max
    var models = ["smol", "qwen"]
    var verbose = false
    var only: String? = nil
}

switch CommandLine.arguments.dropFirst().first {
case "compile": try runCompileTiming(Array(CommandLine.arguments.dropFirst(2))); exit(0)
case "e2e": try runEndToEnd(Array(CommandLine.arguments.dropFirst(2))); exit(0)
default: break
}

var opts = Options()
opts.corpus = defaultCorpusDirectory()
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--corpus": opts.corpus = args.popFirst()!
    case "--out": opts.out = args.popFirst()!
    case "--limit": opts.limit = Int(args.popFirst()!)!
    case "--models": opts.models = args.popFirst()!.split(separator: ",").map(String.init)
    case "--verbose": opts.verbose = true
    case "--only": opts.only = args.popFirst()!
    default: FileHandle.standardError.write("unknown argument \(a)\n".data(using: .utf8)!); exit(2)
    }
}
try FileManager.default.createDirectory(atPath: opts.out, withIntermediateDirectories: true)

let corpus = Array(try loadCorpus(opts.corpus, only: opts.only).prefix(opts.limit))

var summary: [String: Any] = [:]
for model in opts.models {
    guard let loaded = try loadVocabulary(model) else { continue }
    let (tokenizer, vocabulary, vocabMs) = (loaded.tokenizer, loaded.vocabulary, loaded.buildMs)
    let n = tokenizer.vocabularySize
    let tokens = (0..<n).map { tokenizer.tokenBytes(Int32($0)) }
    let special = Set((0..<n).map(Int32.init).filter { tokenizer.isControl($0) || tokenizer.attributes($0).contains(.unknown) })
    let eos = tokenizer.endOfGenerationIDs
    // Export the vocabulary for llguidance.
    let vocabJSON: [String: Any] = [
        "tokens": tokens.map { $0.map { String(format: "%02x", $0) }.joined() },
        "eos": eos.map(Int.init), "special": special.sorted().map(Int.init),
    ]
    try JSONSerialization.data(withJSONObject: vocabJSON).write(to: URL(fileURLWithPath: "\(opts.out)/vocab-\(model).json"))

    let compiler = GrammarCompiler(vocabulary: vocabulary)
    let options = GrammarOptions(additionalPropertiesByDefault: true)
    var compileMs: [Double] = [], compileCPUMs: [Double] = [], compileFirstMaskMs: [Double] = []
    var compileBySchema: [(String, Double, Int, Int)] = []
    var unenforced: [String] = []
    var maskUs: [Double] = []
    var compiled = 0, compileErrors: [String: Int] = [:]
    var validAccepted = 0, validRejected = 0, invalidRejected = 0, invalidAccepted = 0
    var walks: [[String: Any]] = []
    var rejectedValid: [String] = []
    var acceptedInvalid: [String] = []
    let words = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: vocabulary.maskWordCount)
    defer { words.deallocate() }
    for file in corpus {
        let c0 = nanos(), cpu0 = processCPUNanos(), faults0 = minorPageFaults()
        var grammar: CompiledGrammar? = nil
        do {
            grammar = try compiler.compile(schema: file.schema, options: options)
            compileMs.append(Double(nanos() - c0) / 1e6)
            compileCPUMs.append(Double(processCPUNanos() - cpu0) / 1e6)
            compileBySchema.append((file.name, compileMs.last!, grammar!.stateCount, minorPageFaults() - faults0))
            if opts.verbose && Double(nanos() - c0) / 1e6 > 5 { print("slow compile \(Double(nanos() - c0) / 1e6)ms \(file.name) states \(grammar!.stateCount)") }
            compiled += 1
        } catch {
            let key: String
            switch error {
            case .unsupportedKeyword(let k, let p):
                key = "unsupported " + k
                unenforced.append("\(file.name): \(k) at \(p)")
            case .invalidRegex(_, let r): key = "regex: " + r
            default: key = "\(error)".components(separatedBy: "(").first ?? "\(error)"
            }
            compileErrors[key, default: 0] += 1
            if opts.verbose { print("compile error \(file.name): \(error.localizedDescription)") }
        }
        // Compile plus the first mask: engines that defer work to the first masks (llguidance
        // builds its lexer states lazily) compare fairly here.
        var firstMaskPending = grammar != nil
        for (ti, test) in file.tests.enumerated() {
            let text = test.data.reordered(forSchema: file.schema).compactText
            let ids = tokenizer.encode(text, addSpecial: false)
            walks.append(["schema": file.name, "test": ti, "valid": test.valid, "tokens": ids.map(Int.init)])
            guard let g = grammar else { continue }
            let m = g.makeMatcher()
            var ok = true
            for t in ids {
                let s = nanos()
                m.fillAllowedTokens(words)
                let e = nanos()
                if test.valid { maskUs.append(Double(e - s) / 1e3) }
                if firstMaskPending {
                    compileFirstMaskMs.append(compileMs.last! + Double(e - s) / 1e6)
                    firstMaskPending = false
                }
                if opts.verbose && Double(e - s) / 1e3 > 2000 { print("slow mask \(Double(e - s) / 1e3)us \(file.name) test \(ti) before token \(t)") }
                let allowed = words[Int(t) >> 5] & (1 << (UInt32(t) & 31)) != 0
                let accepted = m.accept(t)
                if allowed != accepted { print("MASK/ACCEPT MISMATCH \(file.name) test \(ti) token \(t)"); }
                if !accepted { ok = false; break }
            }
            if ok {
                let s = nanos()
                m.fillAllowedTokens(words)
                if test.valid { maskUs.append(Double(nanos() - s) / 1e3) }
                let eosOK = eos.contains { words[Int($0) >> 5] & (1 << (UInt32($0) & 31)) != 0 }
                ok = eosOK && m.isComplete
            }
            switch (test.valid, ok) {
            case (true, true): validAccepted += 1
            case (true, false): validRejected += 1; rejectedValid.append("\(file.name)#\(ti): \(text.prefix(200))")
            case (false, false): invalidRejected += 1
            case (false, true): invalidAccepted += 1; acceptedInvalid.append("\(file.name)#\(ti)")
            }
        }
    }
    try JSONSerialization.data(withJSONObject: walks).write(to: URL(fileURLWithPath: "\(opts.out)/walks-\(model).json"))
    let mean = maskUs.reduce(0, +) / Double(max(maskUs.count, 1))
    let result: [String: Any] = [
        "engine": "plinth", "vocab": model, "vocab_size": n, "vocab_build_ms": vocabMs,
        "schemas": corpus.count, "compiled": compiled, "compile_errors": compileErrors,
        "compile_p50_ms": percentile(compileMs, 0.5), "compile_p99_ms": percentile(compileMs, 0.99),
        "compile_cpu_p50_ms": percentile(compileCPUMs, 0.5), "compile_cpu_p99_ms": percentile(compileCPUMs, 0.99),
        "compile_first_mask_p50_ms": percentile(compileFirstMaskMs, 0.5), "compile_first_mask_p99_ms": percentile(compileFirstMaskMs, 0.99),
        "mask_mean_us": mean, "mask_p50_us": percentile(maskUs, 0.5), "mask_p99_us": percentile(maskUs, 0.99),
        "mask_max_us": maskUs.max() ?? 0, "masks": maskUs.count,
        "slowest_compiles": compileBySchema.sorted { $0.1 > $1.1 }.prefix(10).map { "\($0.0): \(String(format: "%.2f", $0.1)) ms, \($0.2) states, \($0.3) page faults" },
        "accepted_invalid": acceptedInvalid, "rejected_valid": rejectedValid.map { String($0.prefix { $0 != ":" }) },
        "unenforced_keywords": unenforced,
        "valid_accepted": validAccepted, "valid_rejected": validRejected,
        "invalid_rejected": invalidRejected, "invalid_accepted": invalidAccepted,
    ]
    summary[model] = result
    try JSONSerialization.data(withJSONObject: result, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: "\(opts.out)/plinth-\(model).json"))
    print(String(data: try JSONSerialization.data(withJSONObject: result, options: [.prettyPrinted, .sortedKeys]), encoding: .utf8)!)
    if opts.verbose || !rejectedValid.isEmpty {
        print("valid instances rejected (\(rejectedValid.count)):")
        for r in rejectedValid.prefix(40) { print("  " + r) }
    }
    if opts.verbose || !acceptedInvalid.isEmpty { print("invalid instances accepted: \(acceptedInvalid.count)"); for r in acceptedInvalid.prefix(40) { print("  " + r) } }
}
