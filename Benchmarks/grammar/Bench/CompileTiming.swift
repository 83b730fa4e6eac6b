// `plinth-grammar-bench compile`: compile time alone (no walks, no export), for profiling the
// schema compiler under `perf` or comparing compiler changes quickly.
//
//   plinth-grammar-bench compile [--models smol] [--only SUBSTRING] [--rounds N] [--cold] [--list] [--corpus DIR]
//
// Round 1 compiles the corpus in order with cold shared leaves, as the main benchmark does; later
// rounds empty the grammar cache only (leaves stay warm), which is what a server sees, or with
// `--cold` the shared leaves too (every round as round 1: for profiling cold compiles). Times are
// the thread's CPU time, which other processes on a shared machine disturb far less than wall
// time (the main benchmark reports wall time).
import Foundation
import PlinthGrammar
import PlinthRuntime

func runCompileTiming(_ arguments: [String]) throws {
    var corpusDir = defaultCorpusDirectory()
    var models = ["smol"]
    var only: String? = nil
    var rounds = 1
    var list = false, cold = false
    var args = arguments[...]
    while let a = args.popFirst() {
        switch a {
        case "--corpus": corpusDir = args.popFirst()!
        case "--models": models = args.popFirst()!.split(separator: ",").map(String.init)
        case "--only": only = args.popFirst()!
        case "--rounds": rounds = Int(args.popFirst()!)!
        case "--list": list = true
        case "--cold": cold = true
        default: FileHandle.standardError.write("unknown argument \(a)\n".data(using: .utf8)!); exit(2)
        }
    }
    let corpus = try loadCorpus(corpusDir, only: only)
    let options = GrammarOptions(additionalPropertiesByDefault: true)
    for model in models {
        guard let loaded = try loadVocabulary(model) else { continue }
        let compiler = GrammarCompiler(vocabulary: loaded.vocabulary)
        for round in 1...rounds {
            compiler.removeAllCachedGrammars()
            if cold { GrammarCompiler.removeAllSharedLeaves() }
            var times: [(String, Double, Int)] = []
            for file in corpus {
                let c0 = threadCPUNanos()
                guard let g = try? compiler.compile(schema: file.schema, options: options) else { continue }
                times.append((file.name, Double(threadCPUNanos() - c0) / 1e6, g.stateCount))
            }
            let ms = times.map(\.1)
            print(String(format: "%@ round %d: %d compiled, p50 %.3f ms, p99 %.3f ms, total %.1f ms", model, round, ms.count,
                         percentile(ms, 0.5), percentile(ms, 0.99), ms.reduce(0, +)))
            for (name, t, states) in times.sorted(by: { $0.1 > $1.1 }).prefix(list ? times.count : 8) {
                print(String(format: "  %8.2f ms %6d states  %@", t, states, name))
            }
        }
    }
}

