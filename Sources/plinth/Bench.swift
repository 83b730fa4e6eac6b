import ArgumentParser
import Foundation
import PlinthJSON
import PlinthRuntime

/// `plinth bench`: prompt-processing and generation speed on synthetic tokens, in the manner of
/// llama-bench (single sequence) and llama-batched-bench (`--parallel`).
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure prompt processing (pp) and generation (tg) speed in tokens per second.",
        discussion: """
            Runs the model on random token ids (no tokenizer, no sampling beyond argmax), like \
            llama-bench, and prints the median of the repetitions with their spread.

            Single sequence (default): the pp test runs one forward step over -p tokens from an empty \
            cache; the tg test generates -n tokens one step at a time from an empty cache, each step \
            feeding back the argmax of the last logits; the pg test (--pg P,N) runs a P-token prompt \
            and then generates N tokens, timed together ((P+N) tokens/s). With --depth D each test \
            starts with D tokens already in the cache (written before the clock starts), as \
            llama-bench's -d: attention's cost grows with it. Each test runs once unmeasured first \
            (warm-up; a tg test's is one step).

            -p, -n, --depth and --parallel take comma lists (-p 128,512) or repeat; every combination \
            runs, as in llama-bench and llama-batched-bench (-npp, -ntg, -npl).

            Batched (--parallel N): N sequences, each with its own KV slot. The prompts of all N \
            sequences (N×p tokens) go through the model together, then -n steps each decode one \
            token for every sequence in one batch. pp counts N×p tokens, tg counts N×n tokens \
            (total generation tokens/s, like S_TG of llama-batched-bench -npp p -ntg n -npl N). \
            The warm-up is a 16-token prompt on one sequence, as in llama-batched-bench. --depth and \
            --pg are single-sequence tests.

            --json prints one JSON object on stdout: the model, threads, peak RSS and, for every \
            test, all samples in tokens/s with their median, mean, standard deviation, min and max. \
            Progress goes to stderr.
            """
    )

    @OptionGroup var modelOptions: ModelOptions

    @Option(name: [.short, .customLong("prompt")], parsing: .singleValue,
            help: "Prompt tokens per sequence, a comma list or repeated (default 512; 0 skips the pp test unless --parallel).",
            transform: Bench.counts)
    var promptLists: [[Int]] = []

    @Option(name: [.customShort("n"), .customLong("gen")], parsing: .singleValue,
            help: "Generated tokens per sequence, a comma list or repeated (default 128; 0 skips the tg test).",
            transform: Bench.counts)
    var genLists: [[Int]] = []

    @Option(name: [.customLong("pg"), .customLong("pg", withSingleDash: true)], parsing: .singleValue,
            help: ArgumentHelp("A prompt of P tokens then N generated, timed together (repeat for several).", valueName: "P,N"),
            transform: Bench.pair)
    var promptGen: [[Int]] = []

    @Option(name: [.short, .customLong("depth")], parsing: .singleValue,
            help: "Tokens already in the cache when each single-sequence test starts, a comma list (default 0).",
            transform: Bench.counts)
    var depthLists: [[Int]] = []

    @Option(name: [.short, .long], help: "Kernel threads (default: PLINTH_THREADS or all cores).")
    var threads: Int?

    @Option(name: [.short, .long], help: "Measured repetitions of each test.")
    var repetitions: Int = 5

    @Option(name: .customLong("parallel"), parsing: .singleValue, help: "Sequences decoded together in one batch per step (batched mode), a comma list.",
            transform: Bench.counts)
    var parallelLists: [[Int]] = []

    @OptionGroup var backendOptions: BackendOptions

    @Option(name: .customLong("adapter"), help: "A LoRA adapter run unmerged (repeat for several: with --parallel, sequence i runs adapter i mod their count).")
    var adapters: [String] = []

    @Flag(inversion: .prefixedNo, help: "Run each test once unmeasured before the repetitions.")
    var warmup = true

    @Option(help: "Seed for the random token ids.")
    var seed: UInt64 = 1

    @Flag(help: "Print the results as one JSON object instead of a table.")
    var json = false

    /// The values of a list option, in the order given, each once; `fallback` when not given.
    private static func values(_ lists: [[Int]], _ fallback: [Int]) -> [Int] {
        var seen = Set<Int>()
        let all = lists.joined().filter { seen.insert($0).inserted }
        return all.isEmpty ? fallback : all
    }

    var prompts: [Int] { Self.values(promptLists, [512]) }
    var gens: [Int] { Self.values(genLists, [128]) }
    var depths: [Int] { Self.values(depthLists, [0]) }
    var parallels: [Int] { Self.values(parallelLists, []) }

    /// A comma list of counts (`128,512`).
    static func counts(_ text: String) throws -> [Int] {
        try text.split(separator: ",", omittingEmptySubsequences: false).map {
            guard let n = Int($0.trimmingCharacters(in: .whitespaces)), n >= 0 else {
                throw ValidationError("'\(text)' is not a comma-separated list of counts (whole numbers, 0 or more)")
            }
            return n
        }
    }

    /// `P,N`: a prompt and a generation length, both positive.
    static func pair(_ text: String) throws -> [Int] {
        let values = try counts(text)
        guard values.count == 2, values.allSatisfy({ $0 > 0 }) else {
            throw ValidationError("--pg takes P,N: prompt and generated tokens, both positive, not '\(text)'")
        }
        return values
    }

    func validate() throws {
        guard repetitions > 0 else { throw ValidationError("--repetitions must be positive") }
        if let threads { guard threads > 0 else { throw ValidationError("--threads must be positive") } }
        if !parallels.isEmpty {
            guard parallels.allSatisfy({ $0 > 0 }) else { throw ValidationError("--parallel must be positive") }
            guard prompts.allSatisfy({ $0 > 0 }) else { throw ValidationError("--parallel needs --prompt of at least 1 token") }
            guard depths == [0] else { throw ValidationError("--depth is for single-sequence tests, not --parallel") }
            guard promptGen.isEmpty else { throw ValidationError("--pg is a single-sequence test, not --parallel") }
        } else {
            guard prompts.contains(where: { $0 > 0 }) || gens.contains(where: { $0 > 0 }) || !promptGen.isEmpty else {
                throw ValidationError("nothing to measure: --prompt and --gen are both 0")
            }
        }
    }

    /// Positions a sequence needs for every test: a single sequence starts each test from its
    /// depth; batched sequences hold their prompt and generation. Nil past Int's range.
    private var positionsNeeded: Int? {
        func sum(_ a: Int, _ b: Int) -> Int? {
            let (s, overflow) = a.addingReportingOverflow(b)
            return overflow ? nil : s
        }
        if !parallels.isEmpty { return sum(prompts.max() ?? 0, gens.max() ?? 0) }
        var longest = max(prompts.max() ?? 0, gens.max() ?? 0)
        for pg in promptGen {
            guard let s = sum(pg[0], pg[1]) else { return nil }
            longest = max(longest, s)
        }
        return sum(longest, depths.max() ?? 0)
    }

    func run() throws {
        try reportingErrors {
            let url = try modelOptions.url()
            let backend = try backendOptions.value()
            // The transformer alone: the benchmark needs no tokenizer or chat template. The GPU
            // reads the file's layouts, so a CUDA run makes no packed copy for the CPU.
            var packing = WeightPackingOptions.default
            if backend == .cuda { packing.enabled = false }
            let transformer = try loadingModelFile(url) { try Transformer(url: url, packing: packing) }
            let config = transformer.config
            // (A huge -p is too long, not a trap.)
            guard let needed = positionsNeeded, needed <= config.contextLength else {
                throw ValidationError("the test needs \(positionsNeeded.map(String.init) ?? "more") positions but the model's context is \(config.contextLength) tokens")
            }
            let slots = parallels.max()
            // The test writes every position it needs in every sequence: refused rather than
            // swapping or killed once the cache outgrows memory (a GPU checks its own). Before
            // the context where the CPU is asked for: its reservation may fail first.
            let written = InferenceContext.kvCacheBytes(config, positions: needed) * Double(slots ?? 1)
            func checkMemory() throws {
                let memory = Double(ProcessInfo.processInfo.physicalMemory)
                guard written > memory else { return }
                throw CLIError(String(format: "the test writes %.3g GiB of KV cache (%ld sequences of %ld positions), more than this machine's %.3g GiB of memory",
                                      written / Double(1 << 30), slots ?? 1, needed, memory / Double(1 << 30)))
            }
            if backend == .cpu { try checkMemory() }
            let context = try InferenceContext(transformer: transformer, contextLength: max(1, needed),
                                               slots: slots ?? 1, threads: threads, backend: backend)
            if backend != .cpu && context.backend == .cpu { try checkMemory() }
            var rng = RandomSource(seed: seed)
            let ids = try adapters.map { try context.attach(LoRAAdapter(named: $0, for: transformer)) }
            if !ids.isEmpty && slots == nil { throw ValidationError("--adapter needs --parallel") }
            var runner = BenchRunner(context: context, vocabularySize: config.vocabularySize, adapters: ids)
            var results: [BenchResult] = []
            if slots != nil {
                for sequences in parallels {
                    for p in prompts {
                        for n in gens {
                            results += try runner.batched(sequences: sequences, prompt: p, gen: n,
                                                          repetitions: repetitions, warmup: warmup, rng: &rng)
                        }
                    }
                }
            } else {
                for p in prompts where p > 0 {
                    for d in depths {
                        results.append(try runner.prompt(p, depth: d, repetitions: repetitions, warmup: warmup, rng: &rng))
                    }
                }
                for n in gens where n > 0 {
                    for d in depths {
                        results.append(try runner.generation(n, depth: d, repetitions: repetitions, warmup: warmup, rng: &rng))
                    }
                }
                for pg in promptGen {
                    for d in depths {
                        results.append(try runner.promptThenGeneration(pg[0], pg[1], depth: d, repetitions: repetitions,
                                                                       warmup: warmup, rng: &rng))
                    }
                }
            }
            let report = BenchReport(modelPath: url.path, modelName: modelName(transformer, url),
                                     modelBytes: fileSize(url), typeMix: typeMix(transformer),
                                     threads: context.threadCount, repetitions: repetitions,
                                     parallel: slots, contextLength: context.contextLength,
                                     peakRSSBytes: peakRSSBytes(), weights: describe(transformer.weights.packing),
                                     backend: context.deviceName.map { name in
                                         "cuda (\(name)\(runner.stepKernels.map { ", \($0) kernels a decode step" } ?? ""))"
                                     } ?? context.backend.rawValue,
                                     results: results)
            try Output.write((json ? report.json() : report.table()))
        }
    }

    private func describe(_ p: WeightPacking) -> String {
        switch p {
        case .reused: "packed"
        case .created: "packed (packed file made by this run)"
        case .disabled: "read from the model file (packing off)"
        case .unavailable(let why): "read from the model file (\(why))"
        }
    }

    private func modelName(_ t: Transformer, _ url: URL) -> String {
        (try? t.file.string("general.name")) ?? url.deletingPathExtension().lastPathComponent
    }

    private func fileSize(_ url: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// The weight types by share of the file's tensor bytes, e.g. "Q4_1 91%, Q6_K 9%".
    private func typeMix(_ t: Transformer) -> String {
        var bytes: [String: Int] = [:]
        var total = 0
        for info in t.file.tensors where info.dimensions.count > 1 {
            bytes[info.type.name, default: 0] += info.byteCount
            total += info.byteCount
        }
        guard total > 0 else { return "" }
        return bytes.sorted { $0.value > $1.value }
            .map { "\($0.key) \(Int((Double($0.value) * 100 / Double(total)).rounded()))%" }
            .joined(separator: ", ")
    }
}

/// The highest resident set size of this process so far.
func peakRSSBytes() -> Int {
    var usage = rusage()
    guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return 0 }
    return Int(usage.ru_maxrss) * 1024 // kilobytes on Linux
}

/// One test's samples in tokens per second.
struct BenchResult {
    var test: String
    var kind: String
    var promptTokens: Int
    var genTokens: Int
    var sequences: Int
    /// Tokens in the cache before the test (`--depth`).
    var depth = 0
    var samples: [Double]

    /// llama-bench's name: `pp512`, `tg128`, `pp512+tg128`, with ` @ d4096` at a depth.
    static func name(_ base: String, depth: Int) -> String { depth == 0 ? base : "\(base) @ d\(depth)" }

    var sorted: [Double] { samples.sorted() }
    var median: Double {
        let s = sorted
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
    var mean: Double { samples.reduce(0, +) / Double(samples.count) }
    var stddev: Double {
        guard samples.count > 1 else { return 0 }
        let m = mean
        return (samples.map { ($0 - m) * ($0 - m) }.reduce(0, +) / Double(samples.count - 1)).squareRoot()
    }
}

/// Runs the tests on one context. The measured work lives in the `benchPhase…` functions so that
/// the regression gate (Benchmarks/gate.sh) can count their instructions under callgrind.
struct BenchRunner {
    let context: InferenceContext
    let vocabularySize: Int
    /// Attached adapters, sequence i of a batched test running adapters[i % count].
    var adapters: [Int] = []
    /// Kernels a single-sequence decode step launches on a GPU (the tg test's warm-up step).
    private(set) var stepKernels: Int?

    private func adapter(_ sequence: Int) -> Int { adapters.isEmpty ? 0 : adapters[sequence % adapters.count] }

    private func randomTokens(_ n: Int, _ rng: inout RandomSource) -> [Int32] {
        (0..<n).map { _ in Int32(truncatingIfNeeded: rng.next() % UInt64(vocabularySize)) }
    }

    /// Empties the single sequence's cache and writes `depth` tokens into it (untimed).
    private func startAt(depth: Int, _ rng: inout RandomSource) throws {
        context.reset(slot: 0)
        if depth > 0 { try context.forward(Batch.sequence(randomTokens(depth, &rng))) }
    }

    func prompt(_ n: Int, depth: Int = 0, repetitions: Int, warmup: Bool, rng: inout RandomSource) throws -> BenchResult {
        let test = BenchResult.name("pp\(n)", depth: depth)
        var samples: [Double] = []
        for rep in (warmup ? -1 : 0)..<repetitions {
            try startAt(depth: depth, &rng)
            let batch = Batch.sequence(randomTokens(n, &rng), startingAt: depth)
            let t0 = DispatchTime.now().uptimeNanoseconds
            try benchPhasePrompt(context, batch)
            let t1 = DispatchTime.now().uptimeNanoseconds
            if rep >= 0 { samples.append(Double(n) * 1e9 / Double(max(t1 - t0, 1))) }
            progress(test, rep, repetitions, samples.last)
        }
        return BenchResult(test: test, kind: "pp", promptTokens: n, genTokens: 0, sequences: 1, depth: depth, samples: samples)
    }

    mutating func generation(_ n: Int, depth: Int = 0, repetitions: Int, warmup: Bool, rng: inout RandomSource) throws -> BenchResult {
        let test = BenchResult.name("tg\(n)", depth: depth)
        var samples: [Double] = []
        for rep in (warmup ? -1 : 0)..<repetitions {
            try startAt(depth: depth, &rng)
            let first = randomTokens(1, &rng)[0]
            let steps = rep < 0 ? 1 : n // like llama-bench, the warm-up is a single step
            let launched = rep < 0 ? context.kernelLaunches : nil
            let t0 = DispatchTime.now().uptimeNanoseconds
            try benchPhaseGeneration(context, first, steps, start: depth)
            let t1 = DispatchTime.now().uptimeNanoseconds
            // The warm-up step is its shape's first, run directly: its launches are a decode step's.
            if let before = launched, let after = context.kernelLaunches, after > before, depth == 0 {
                stepKernels = Int(after - before)
            }
            if rep >= 0 { samples.append(Double(n) * 1e9 / Double(max(t1 - t0, 1))) }
            progress(test, rep, repetitions, samples.last)
        }
        return BenchResult(test: test, kind: "tg", promptTokens: 0, genTokens: n, sequences: 1, depth: depth, samples: samples)
    }

    /// llama-bench's pg test: a `p`-token prompt, then `n` tokens generated from its last
    /// logits, timed together: (p + n) tokens per second. The warm-up generates one token.
    func promptThenGeneration(_ p: Int, _ n: Int, depth: Int = 0, repetitions: Int, warmup: Bool,
                              rng: inout RandomSource) throws -> BenchResult {
        let test = BenchResult.name("pp\(p)+tg\(n)", depth: depth)
        var samples: [Double] = []
        for rep in (warmup ? -1 : 0)..<repetitions {
            try startAt(depth: depth, &rng)
            let batch = Batch.sequence(randomTokens(p, &rng), startingAt: depth)
            let steps = rep < 0 ? 1 : n
            let t0 = DispatchTime.now().uptimeNanoseconds
            try benchPhasePrompt(context, batch)
            try benchPhaseGeneration(context, greedyToken(context, 0), steps, start: depth + p)
            let t1 = DispatchTime.now().uptimeNanoseconds
            if rep >= 0 { samples.append(Double(p + n) * 1e9 / Double(max(t1 - t0, 1))) }
            progress(test, rep, repetitions, samples.last)
        }
        return BenchResult(test: test, kind: "pg", promptTokens: p, genTokens: n, sequences: 1, depth: depth, samples: samples)
    }

    func batched(sequences: Int, prompt: Int, gen: Int, repetitions: Int, warmup: Bool,
                 rng: inout RandomSource) throws -> [BenchResult] {
        var pp: [Double] = [], tg: [Double] = []
        if warmup {
            // Like llama-batched-bench: a short prompt on one sequence maps the weights in.
            context.reset(slot: 0)
            try benchPhaseBatchedPrompt(context, Batch.sequence(randomTokens(min(prompt, 16), &rng)))
            Diagnostics.note("warm-up done")
        }
        for rep in 0..<repetitions {
            for s in 0..<sequences { context.reset(slot: s) }
            var batch = Batch()
            for s in 0..<sequences {
                let tokens = randomTokens(prompt, &rng)
                for (i, t) in tokens.enumerated() {
                    batch.add(t, position: i, slot: s, logits: i == prompt - 1, use: .argmax(allowed: nil), adapter: adapter(s))
                }
            }
            let t0 = DispatchTime.now().uptimeNanoseconds
            try benchPhaseBatchedPrompt(context, batch)
            let t1 = DispatchTime.now().uptimeNanoseconds
            try benchPhaseBatchedGeneration(context, sequences, prompt, gen, adapters: (0..<sequences).map(adapter))
            let t2 = DispatchTime.now().uptimeNanoseconds
            pp.append(Double(sequences * prompt) * 1e9 / Double(max(t1 - t0, 1)))
            if gen > 0 { tg.append(Double(sequences * gen) * 1e9 / Double(max(t2 - t1, 1))) }
            let rates = [("pp", pp.last), ("tg", tg.last)].compactMap { name, v in v.map { String(format: "%@ %.2f t/s", name, $0) } }
            Diagnostics.note("pp\(prompt)+tg\(gen) ×\(sequences): \(rep + 1)/\(repetitions) " + rates.joined(separator: ", "))
        }
        var results = [BenchResult(test: "pp\(prompt)x\(sequences)", kind: "pp", promptTokens: prompt, genTokens: 0,
                                   sequences: sequences, samples: pp)]
        if gen > 0 {
            results.append(BenchResult(test: "tg\(gen)x\(sequences)", kind: "tg", promptTokens: prompt, genTokens: gen,
                                       sequences: sequences, samples: tg))
        }
        return results
    }

    private func progress(_ test: String, _ rep: Int, _ total: Int, _ value: Double?) {
        if rep < 0 {
            Diagnostics.note("\(test): warm-up done")
        } else if let value {
            Diagnostics.note(String(format: "%@: %d/%d %.2f t/s", test, rep + 1, total, value))
        }
    }
}

// The measured phases. Kept out of line and free of closures so that each is one function in a
// profile; Benchmarks/gate.py finds them by name. Rename them only together with gate.py.

@inline(never)
func benchPhasePrompt(_ context: InferenceContext, _ batch: Batch) throws {
    try context.forward(batch)
}

@inline(never)
func benchPhaseGeneration(_ context: InferenceContext, _ first: Int32, _ steps: Int, start: Int = 0) throws {
    var token = first
    var batch = Batch()
    batch.add(token, position: start, slot: 0, logits: true, use: .argmax(allowed: nil))
    for position in start..<(start + steps) {
        batch.tokens[0] = token
        batch.positions[0] = Int32(position)
        try context.forward(batch)
        token = greedyToken(context, 0)
    }
}

@inline(never)
func benchPhaseBatchedPrompt(_ context: InferenceContext, _ batch: Batch) throws {
    try context.forward(batch)
}

/// The greedy token of logits row `row`: chosen by the backend where it does (a GPU), else the
/// argmax of the row's logits.
@inline(__always)
func greedyToken(_ context: InferenceContext, _ row: Int) -> Int32 {
    context.chosenToken(row) ?? Sampler.argmax(context.logits(row))
}

/// `steps` decode steps for `sequences` slots that each hold `start` tokens and have logits.
@inline(never)
func benchPhaseBatchedGeneration(_ context: InferenceContext, _ sequences: Int, _ start: Int, _ steps: Int, adapters: [Int] = []) throws {
    var batch = Batch()
    for s in 0..<sequences {
        batch.add(0, position: start, slot: s, logits: true, use: .argmax(allowed: nil), adapter: adapters.isEmpty ? 0 : adapters[s])
    }
    for step in 0..<steps {
        for s in 0..<sequences {
            batch.tokens[s] = greedyToken(context, s)
            batch.positions[s] = Int32(start + step)
        }
        try context.forward(batch)
    }
}

/// The results of one `plinth bench` run, as a table or as JSON.
struct BenchReport {
    var modelPath: String
    var modelName: String
    var modelBytes: Int
    var typeMix: String
    var threads: Int
    var repetitions: Int
    /// Sequences the context holds (the largest `--parallel`); nil for single-sequence tests.
    var parallel: Int?
    var contextLength: Int
    var peakRSSBytes: Int
    /// How the kernels read the weights (`describe(_:)`).
    var weights: String
    /// Where the step ran: "cpu", or "cuda (device)".
    var backend: String
    var results: [BenchResult]

    func table() -> String {
        let header = ["model", "size", "types", "threads", "test", "t/s (median)", "min … max", "± stddev"]
        var rows: [[String]] = []
        for r in results {
            rows.append([(modelPath as NSString).lastPathComponent, String(format: "%.1f MiB", Double(modelBytes) / 1_048_576), typeMix, "\(threads)", r.test,
                         String(format: "%.2f", r.median),
                         String(format: "%.2f … %.2f", r.sorted.first ?? 0, r.sorted.last ?? 0),
                         String(format: "%.2f", r.stddev)])
        }
        let widths = header.indices.map { c in ([header[c]] + rows.map { $0[c] }).map(\.count).max() ?? 0 }
        func line(_ cells: [String]) -> String {
            "| " + cells.enumerated().map { c, s in
                let pad = String(repeating: " ", count: widths[c] - s.count)
                return c >= 5 ? pad + s : s + pad // numbers right-aligned
            }.joined(separator: " | ") + " |\n"
        }
        var out = line(header)
        out += "| " + widths.enumerated().map { c, w in String(repeating: "-", count: max(w - 1, 0)) + (c >= 5 ? ":" : "-") }
            .joined(separator: " | ") + " |\n"
        for r in rows { out += line(r) }
        out += String(format: "%d repetitions, context %d tokens%@, peak RSS %.1f MiB, weights %@, backend %@\n", repetitions, contextLength,
                      parallel.map { " × \($0) sequences" } ?? "", Double(peakRSSBytes) / 1_048_576, weights, backend)
        return out
    }

    func json() -> String {
        let results: [JSONValue] = self.results.map { r in
            [
                "test": .string(r.test), "kind": .string(r.kind), "n_prompt": .integer(r.promptTokens),
                "n_gen": .integer(r.genTokens), "n_depth": .integer(r.depth), "sequences": .integer(r.sequences),
                "samples_ts": .array(r.samples.map(JSONValue.double)), "median_ts": .double(r.median),
                "mean_ts": .double(r.mean), "stddev_ts": .double(r.stddev),
                "min_ts": .double(r.sorted.first ?? 0), "max_ts": .double(r.sorted.last ?? 0),
            ]
        }
        var object: [(key: String, value: JSONValue)] = [
            ("model", .string(modelPath)), ("model_name", .string(modelName)), ("model_bytes", .integer(modelBytes)),
            ("types", .string(typeMix)), ("threads", .integer(threads)), ("repetitions", .integer(repetitions)),
            ("context", .integer(contextLength)), ("peak_rss_bytes", .integer(peakRSSBytes)), ("weights", .string(weights)),
            ("backend", .string(backend)),
        ]
        if let parallel { object.append(("parallel", .integer(parallel))) }
        object.append(("results", .array(results)))
        return JSONValue.object(object).prettyText + "\n"
    }
}
