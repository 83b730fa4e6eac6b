import ArgumentParser
import Foundation
import Plinth
import PlinthJSON
import PlinthRuntime
import Synchronization

/// The clause workload's output: what a policy clause does and to whom.
@Generable
struct ClauseClassification: Equatable {
    @Guide(description: "The group of people the clause affects")
    var targetGroup: String
    @Guide(description: "Whether the clause expands or restricts the group's access to benefits or rights")
    var effectDirection: EffectDirection
    @Guide(description: "Attributes the clause uses that can stand in for protected traits", .maximumCount(3))
    var proxyVariables: [String]

    @Generable
    enum EffectDirection: Equatable { case expands, restricts, neutral }
}

/// `plinth bench-concurrent`: what one scheduler under every session buys.
struct ConcurrencyBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-concurrent",
        abstract: "Measure concurrent sessions on one model against the same requests one after another.",
        discussion: """
            Records: each line of --input (JSONL with "id" and "text") is classified into a 3-field \
            @Generable type with greedy decoding, each in a fresh LanguageModelSession with the same \
            instructions: first one after another, then from --concurrency concurrent tasks. The \
            prompt cache is emptied before each run. Outputs of the two runs must agree record by \
            record. Then: single-stream decode through the scheduler against the raw runtime (one \
            token per step on an InferenceContext, as `plinth bench` tg), and the time to first token \
            of a request arriving while --concurrency - 1 others decode against the same request on \
            an idle engine. Rounds alternate; figures are medians.
            """
    )

    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var backendOptions: BackendOptions

    @Option(help: "The records (JSONL: id, text).")
    var input: String = "Benchmarks/workloads/clauses.jsonl"

    @Option(help: "Concurrent sessions.")
    var concurrency: Int = 16

    @Option(help: "Most tokens per response.")
    var maxTokens: Int = 96

    @Option(name: [.short, .long], help: "Rounds of the decode and first-token tests.")
    var rounds: Int = 5

    @Flag(help: "Print the output type's JSON schema and exit (for the llama-server side).")
    var printSchema = false

    @Flag(help: "Print the instructions every record gets and exit (for the llama-server side).")
    var printInstructions = false

    @Flag(help: "Print the results as one JSON object.")
    var json = false

    static let instructions = "Classify the policy clause. targetGroup: who it affects. effectDirection: whether it expands or restricts their access to benefits or rights. proxyVariables: attributes it uses that may stand in for protected traits."

    func validate() throws {
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
        guard maxTokens >= 1 else { throw ValidationError("--max-tokens must be at least 1") }
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
    }

    func run() async throws {
        if printInstructions {
            try Output.line(Self.instructions)
            return
        }
        if printSchema {
            let data = try JSONEncoder().encode(ClauseClassification.generationSchema)
            try Output.line(String(decoding: data, as: UTF8.self))
            return
        }
        try await reportingErrors {
            let url = try modelOptions.url()
            let records = try Self.records(input)
            let model = LocalLanguageModel(name: url.path, backend: try backendOptions.localValue())
            let options = GenerationOptions(sampling: .greedy, maximumResponseTokens: maxTokens)
            _ = try await Self.classify(model, records.prefix(1), options, concurrency: 1)  // load and warm up

            try model.forgetCachedPrompts()
            let t0 = DispatchTime.now().uptimeNanoseconds
            let sequential = try await Self.classify(model, records[...], options, concurrency: 1)
            let t1 = DispatchTime.now().uptimeNanoseconds
            try model.forgetCachedPrompts()
            let concurrent = try await Self.classify(model, records[...], options, concurrency: concurrency)
            let t2 = DispatchTime.now().uptimeNanoseconds
            let mismatches = zip(sequential, concurrent).filter { $0 != $1 }.count
            let sequentialRate = Double(records.count) / (Double(t1 - t0) / 1e9)
            let concurrentRate = Double(records.count) / (Double(t2 - t1) / 1e9)

            let runtime = try loadingModelFile(url) { try PlinthRuntime.Model(url: url) }
            let decode = try Self.decodeRates(runtime, rounds: rounds, backend: backendOptions.value())
            let ttft = try Self.firstTokenTimes(runtime, others: concurrency - 1, rounds: rounds, backend: backendOptions.value())
            let decodeRatio = median(zip(decode.raw, decode.scheduled).map { $1 / $0 })
            let ttftRatio = median(zip(ttft.idle, ttft.loaded).map { $1 / $0 })
            if json {
                let object: JSONValue = [
                    "model": .string(url.lastPathComponent), "records": .integer(records.count), "concurrency": .integer(concurrency),
                    "sequential_records_per_second": .double(sequentialRate), "concurrent_records_per_second": .double(concurrentRate),
                    "concurrent_over_sequential": .double(concurrentRate / sequentialRate), "mismatched_records": .integer(mismatches),
                    "outputs": .array(concurrent.map(JSONValue.string)),
                    "raw_decode_tokens_per_second": .array(decode.raw.map(JSONValue.double)),
                    "scheduler_decode_tokens_per_second": .array(decode.scheduled.map(JSONValue.double)),
                    "decode_ratio": .double(decodeRatio),
                    "idle_ttft_seconds": .array(ttft.idle.map(JSONValue.double)),
                    "loaded_ttft_seconds": .array(ttft.loaded.map(JSONValue.double)), "ttft_ratio": .double(ttftRatio),
                ]
                try Output.line(object.prettyText)
            } else {
                try Output.line("model: \(url.lastPathComponent), \(records.count) records")
                try Output.line(String(format: "records: one after another %.2f/s, %d concurrent sessions %.2f/s: %.2fx; %d of %d outputs differ",
                             sequentialRate, concurrency, concurrentRate, concurrentRate / sequentialRate, mismatches, records.count))
                try Output.line(String(format: "single-stream decode: raw runtime %.1f tok/s, scheduler %.1f tok/s: %.3fx (median of paired rounds)",
                             median(decode.raw), median(decode.scheduled), decodeRatio))
                try Output.line(String(format: "first token: idle %.1f ms, with %d others decoding %.1f ms: %.2fx",
                             median(ttft.idle) * 1000, concurrency - 1, median(ttft.loaded) * 1000, ttftRatio))
            }
            guard mismatches == 0 else { throw CLIError("\(mismatches) records differ between the sequential and concurrent runs") }
        }
    }

    struct Record: Decodable { var id: String; var text: String }

    static func records(_ path: String) throws -> [Record] {
        guard let data = FileManager.default.contents(atPath: path) else { throw CLIError("cannot read \(path)") }
        var out: [Record] = []
        for (i, line) in String(decoding: data, as: UTF8.self).split(separator: "\n").enumerated() where !line.allSatisfy(\.isWhitespace) {
            do {
                out.append(try JSONDecoder().decode(Record.self, from: Data(line.utf8)))
            } catch {
                throw CLIError("\(path):\(i + 1): not a record with \"id\" and \"text\": \(error.localizedDescription)")
            }
        }
        guard !out.isEmpty else { throw CLIError("\(path) holds no records") }
        return out
    }

    /// Classifies records, each in a fresh session, from `concurrency` tasks; outputs in input order.
    static func classify(_ model: LocalLanguageModel, _ records: ArraySlice<Record>, _ options: GenerationOptions,
                         concurrency: Int) async throws -> [String] {
        final class Counter: Sendable { let next: Mutex<Int>; init(_ i: Int) { next = Mutex(i) } }
        let counter = Counter(records.startIndex)
        var results = [String](repeating: "", count: records.count)
        try await withThrowingTaskGroup(of: [(Int, String)].self) { group in
            for _ in 0..<min(concurrency, records.count) {
                group.addTask {
                    var done: [(Int, String)] = []
                    while true {
                        let i = counter.next.withLock { i in defer { i += 1 }; return i }
                        guard i < records.endIndex else { return done }
                        let session = LanguageModelSession(model: model, instructions: Self.instructions)
                        let response = try await session.respond(to: records[i].text, generating: ClauseClassification.self,
                                                                 options: options)
                        done.append((i - records.startIndex, response.rawContent.jsonString))
                    }
                }
            }
            for try await part in group { for (i, text) in part { results[i] = text } }
        }
        return results
    }

    /// A chat prompt of about 40 + 40 tokens, as the records have.
    static func prompt(_ runtime: PlinthRuntime.Model, _ text: String) throws -> [Int32] {
        runtime.tokenizer.encodeRendered(try runtime.renderChat([.system(instructions), .user(text)]))
    }

    /// Greedy decode rates (tokens after the first, per second) of the raw runtime and of the scheduler.
    static func decodeRates(_ runtime: PlinthRuntime.Model, rounds: Int, backend: Backend) throws -> (raw: [Double], scheduled: [Double]) {
        let prompt = try Self.prompt(runtime, "Write a long story about a lighthouse keeper.")
        let n = 128
        let context = try InferenceContext(transformer: runtime.transformer, contextLength: prompt.count + n + 1, slots: 1, maxBatch: 256,
                                           backend: backend)
        let scheduler = try Scheduler(model: runtime, configuration: .init(contextLength: prompt.count + n + 1, slots: 1, backend: backend))
        var raw: [Double] = [], scheduled: [Double] = []
        for round in 0...rounds {
            for side in (round % 2 == 0 ? [0, 1] : [1, 0]) {
                if side == 0 {
                    context.reset(slot: 0)
                    try context.forward(.sequence(prompt))
                    var token = Sampler.argmax(context.logits(0))
                    let start = DispatchTime.now().uptimeNanoseconds
                    for i in 0..<(n - 1) {
                        var b = Batch()
                        b.add(token, position: prompt.count + i, logits: true)
                        try context.forward(b)
                        token = Sampler.argmax(context.logits(0))
                    }
                    let t = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                    if round > 0 { raw.append(Double(n - 1) / t) }
                } else {
                    scheduler.forgetCachedPrefixes()
                    let summary = try scheduler.run(GenerationRequest(prompt: prompt, maxTokens: n))
                    if round > 0 { scheduled.append(summary.decodeTokensPerSecond) }
                }
            }
        }
        return (raw, scheduled)
    }

    /// Time to first token of a record's request on an idle engine and while `others` decode.
    static func firstTokenTimes(_ runtime: PlinthRuntime.Model, others: Int, rounds: Int, backend: Backend) throws -> (idle: [Double], loaded: [Double]) {
        let scheduler = try Scheduler(model: runtime, configuration: .init(contextLength: 1024, slots: others + 2, maxRunning: others + 1,
                                                                                   backend: backend))
        // Plain text, no chat template: the others share no prefix with the probe to copy from.
        let story = runtime.tokenizer.encode("Once upon a time, far out at sea, there was a lighthouse", addSpecial: false, parseSpecial: false)
        var idle: [Double] = [], loaded: [Double] = []
        for round in 0...rounds {
            // A prompt no cache holds: the whole record is prefilled.
            let probe = try Self.prompt(runtime, "Round \(round): applicants over the age of 65 shall receive a discount on bus passes.")
            scheduler.forgetCachedPrefixes()
            let a = try scheduler.run(GenerationRequest(prompt: probe, maxTokens: 1))
            scheduler.forgetCachedPrefixes()
            let decoding = DispatchSemaphore(value: 0)
            let handles = (0..<others).map { i in
                let started = Mutex(false)
                return scheduler.submit(GenerationRequest(prompt: story + [Int32(i % 7 + 100)], maxTokens: 100_000)) { event in
                    if case .text = event, started.withLock({ s in defer { s = true }; return !s }) { decoding.signal() }
                }
            }
            for _ in 0..<others { decoding.wait() }
            let b = try scheduler.run(GenerationRequest(prompt: probe, maxTokens: 1))
            handles.forEach { $0.cancel() }
            if round > 0 {
                idle.append(a.timeToFirstToken)
                loaded.append(b.timeToFirstToken)
            }
        }
        return (idle, loaded)
    }
}
