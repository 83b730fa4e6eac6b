// `plinth-grammar-bench e2e`: constrained generation with the model, end to end.
//
//   plinth-grammar-bench e2e [-m GGUF] [--threads 2] [--rounds 7] [--max-tokens 160] [--corpus DIR]
//                            [--closure-sampler]
//
// For each workload (a JSON Schema and a prompt asking for an instance), greedy decoding, one
// sequence, measures in alternating rounds:
//   free     unconstrained decoding of as many tokens as the constrained output has (tok/s)
//   masked   constrained decoding, one token per step, jump-forward off: mask, masked sample,
//            accept, forward (tok/s); masked / free is the cost of the masks
//   jump     constrained decoding with jump-forward: forced text is accepted without sampling
//            and its tokens go through the model in one batched step with the sampled token
//   forced   the jump run's token sequence fed one token per step, each with an unconstrained
//            sample, as unconstrained generation of that text would run (teacher forcing)
// Prefill is excluded everywhere; times are wall clock from the first sample to the last.
// `--closure-sampler` samples under the mask through a per-token closure instead of the mask
// form of `Sampler.sample` (how the engine sampled before; kept to show the difference).
import Foundation
import PlinthGrammar
import PlinthRuntime

/// One thing to generate: a schema and the prompt that asks for it.
struct E2EWorkload {
    var name: String
    var schema: JSONValue
    var prompt: [Int32] = []
    var grammar: CompiledGrammar? = nil
}

/// Schemas with many fixed keys and small values: the outputs jump-forward is for.
let schemaHeavyWorkloads: [(String, String)] = [
    ("service-config", #"""
    {"type":"object","additionalProperties":false,
     "required":["service_name","enable_logging","enable_metrics","enable_tracing","log_level","max_connections",
                 "timeout_seconds","retry_policy","region","replicas","autoscaling_enabled","tls_required","cache_ttl_seconds"],
     "properties":{
      "service_name":{"type":"string","maxLength":24},
      "enable_logging":{"type":"boolean"},
      "enable_metrics":{"type":"boolean"},
      "enable_tracing":{"type":"boolean"},
      "log_level":{"enum":["debug","info","warning","error"]},
      "max_connections":{"type":"integer","minimum":1,"maximum":10000},
      "timeout_seconds":{"type":"integer","minimum":1,"maximum":3600},
      "retry_policy":{"enum":["none","linear","exponential"]},
      "region":{"enum":["us-east-1","eu-west-1","ap-south-1"]},
      "replicas":{"type":"integer","minimum":1,"maximum":9},
      "autoscaling_enabled":{"type":"boolean"},
      "tls_required":{"type":"boolean"},
      "cache_ttl_seconds":{"type":"integer","minimum":0,"maximum":86400}}}
    """#),
    ("contact-card", #"""
    {"type":"object","additionalProperties":false,"required":["person","address","contact","preferences"],
     "properties":{
      "person":{"type":"object","additionalProperties":false,"required":["first_name","last_name","birth_year"],
        "properties":{"first_name":{"type":"string","maxLength":16},"last_name":{"type":"string","maxLength":16},
                      "birth_year":{"type":"integer","minimum":1900,"maximum":2024}}},
      "address":{"type":"object","additionalProperties":false,"required":["street","city","postal_code","country_code"],
        "properties":{"street":{"type":"string","maxLength":32},"city":{"type":"string","maxLength":20},
                      "postal_code":{"type":"string","maxLength":10},"country_code":{"enum":["US","GB","FR","DE","JP"]}}},
      "contact":{"type":"object","additionalProperties":false,"required":["email_verified","phone_verified","preferred_channel"],
        "properties":{"email_verified":{"type":"boolean"},"phone_verified":{"type":"boolean"},
                      "preferred_channel":{"enum":["email","phone","post"]}}},
      "preferences":{"type":"object","additionalProperties":false,"required":["newsletter","dark_mode","language"],
        "properties":{"newsletter":{"type":"boolean"},"dark_mode":{"type":"boolean"},"language":{"enum":["en","fr","de","ja"]}}}}}
    """#),
    ("sensor-readings", #"""
    {"type":"object","additionalProperties":false,"required":["device_id","firmware_version","readings"],
     "properties":{
      "device_id":{"type":"string","maxLength":12},
      "firmware_version":{"enum":["1.0.0","1.1.0","2.0.0"]},
      "readings":{"type":"array","minItems":3,"maxItems":3,"items":{"type":"object","additionalProperties":false,
        "required":["sensor_type","temperature_celsius","humidity_percent","battery_ok"],
        "properties":{"sensor_type":{"enum":["indoor","outdoor"]},"temperature_celsius":{"type":"integer","minimum":-40,"maximum":60},
                      "humidity_percent":{"type":"integer","minimum":0,"maximum":100},"battery_ok":{"type":"boolean"}}}}}}
    """#),
]

/// Corpus schemas (file names without `.json`) that the e2e run uses besides the ones above.
let corpusWorkloads = [
    "Glaiveai2K---generate_invoice_cda7de78", "Glaiveai2K---book_flight_22ba5334",
    "Github_easy---o21471", "Snowplow---sp_296_Normalized",
]

func runEndToEnd(_ arguments: [String]) throws {
    var modelPath: String? = nil
    var threads = 2
    var rounds = 7
    var maxTokens = 160
    var corpusDir = defaultCorpusDirectory()
    var closureSampler = false
    var args = arguments[...]
    while let a = args.popFirst() {
        switch a {
        case "-m", "--model": modelPath = args.popFirst()!
        case "--threads": threads = Int(args.popFirst()!)!
        case "--rounds": rounds = Int(args.popFirst()!)!
        case "--max-tokens": maxTokens = Int(args.popFirst()!)!
        case "--corpus": corpusDir = args.popFirst()!
        case "--closure-sampler": closureSampler = true
        default: FileHandle.standardError.write("unknown argument \(a)\n".data(using: .utf8)!); exit(2)
        }
    }
    guard let url = modelPath.map({ URL(fileURLWithPath: $0) }) ?? modelFile("smol") else {
        FileHandle.standardError.write("no model: pass -m GGUF\n".data(using: .utf8)!); exit(2)
    }
    let model = try Model(url: url)
    let context = try InferenceContext(transformer: model.transformer, contextLength: 2048, slots: 1, maxBatch: 256, threads: threads)
    let tokenizer = model.tokenizer
    let compiler = GrammarCompiler(vocabulary: try makeVocabulary(tokenizer))
    print("model \(model.name), \(threads) threads, vocabulary \(tokenizer.vocabularySize), \(rounds) rounds, at most \(maxTokens) tokens"
          + (closureSampler ? ", masked sampling through a closure" : ""))

    var workloads = try schemaHeavyWorkloads.map { try E2EWorkload(name: $0.0, schema: JSONValue(parsing: $0.1)) }
    for name in corpusWorkloads {
        let doc = try JSONValue(parsing: Data(contentsOf: URL(fileURLWithPath: corpusDir + "/" + name + ".json")))
        guard let schema = doc["schema"] else { continue }
        workloads.append(E2EWorkload(name: name, schema: schema))
    }
    for i in workloads.indices {
        do {
            workloads[i].grammar = try compiler.compile(schema: workloads[i].schema)
        } catch {
            print("\(workloads[i].name): skipped, \(error.localizedDescription)")
            continue
        }
        let messages = [
            ChatMessage(role: "system", content: "You are a helpful assistant. You answer with JSON only."),
            ChatMessage(role: "user", content: "Write a realistic JSON object that follows this JSON Schema:\n" + workloads[i].schema.compactText),
        ]
        workloads[i].prompt = tokenizer.encode(try model.renderChat(messages), addSpecial: true, parseSpecial: true)
    }

    workloads.removeAll { $0.grammar == nil }
    let runner = E2ERunner(model: model, context: context, maxTokens: maxTokens, closureSampler: closureSampler)
    // Calibration (untimed; also warms caches and masks): the outputs the timed runs reproduce.
    var reference: [(masked: E2ERunner.Run, jump: E2ERunner.Run)] = []
    for w in workloads {
        let m = try runner.constrained(w, jumpForward: false)
        let j = try runner.constrained(w, jumpForward: true)
        _ = try runner.free(w, tokens: m.tokens.count, ended: m.ended)
        _ = try runner.teacherForced(w, tokens: j.tokens)
        reference.append((m, j))
        let text = String(decoding: j.tokens.flatMap { tokenizer.tokenBytes($0) }, as: UTF8.self)
        print("\(w.name): \(m.tokens.count) tokens masked, \(j.tokens.count) with jump-forward in \(j.steps) steps: \(text.prefix(160))")
    }

    enum Mode: CaseIterable { case free, masked, jump, forced }
    var times = [[Mode: [Double]]](repeating: [:], count: workloads.count)
    var maskUs = [[Double]](repeating: [], count: workloads.count), sampleUs = maskUs, forcedUs = maskUs
    for round in 0..<rounds {
        for (i, w) in workloads.enumerated() {
            // Rotate the order each round so that no mode always runs first (or after another).
            let modes = Mode.allCases
            for k in 0..<modes.count {
                let mode = modes[(k + round + i) % modes.count]
                let seconds: Double
                switch mode {
                case .free: seconds = try runner.free(w, tokens: reference[i].masked.tokens.count, ended: reference[i].masked.ended).seconds
                case .masked:
                    let r = try runner.constrained(w, jumpForward: false)
                    precondition(r.tokens == reference[i].masked.tokens, "greedy constrained output changed between runs")
                    seconds = r.seconds
                    let samples = Double(r.tokens.count + (r.ended ? 1 : 0))
                    maskUs[i].append(r.maskSeconds / samples * 1e6)
                    sampleUs[i].append(r.sampleSeconds / samples * 1e6)
                case .jump:
                    let r = try runner.constrained(w, jumpForward: true)
                    precondition(r.tokens == reference[i].jump.tokens, "greedy jump-forward output changed between runs")
                    seconds = r.seconds
                    forcedUs[i].append(r.forcedSeconds / Double(max(r.steps, 1)) * 1e6)
                case .forced: seconds = try runner.teacherForced(w, tokens: reference[i].jump.tokens).seconds
                }
                times[i][mode, default: []].append(seconds)
            }
        }
    }

    print("\nmedians over \(rounds) rounds (decode only, prefill excluded); the ratios are medians of each round's ratio")
    print("| workload | tokens | free tok/s | masked tok/s | masked/free | jump tokens (steps) | jump ms | forced ms | forced/jump |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    var maskRatios: [Double] = [], jumpRatios: [Double] = []
    for (i, w) in workloads.enumerated() {
        let n = Double(reference[i].masked.tokens.count)
        let free = n / median(times[i][.free]!), masked = n / median(times[i][.masked]!)
        let jump = median(times[i][.jump]!), forced = median(times[i][.forced]!)
        // Ratios of the runs of one round (adjacent in time), then their median: the machine's
        // drift between rounds cancels out.
        let maskRatio = median(zip(times[i][.free]!, times[i][.masked]!).map { $0 / $1 })
        let jumpRatio = median(zip(times[i][.forced]!, times[i][.jump]!).map { $0 / $1 })
        maskRatios.append(maskRatio)
        jumpRatios.append(jumpRatio)
        print(String(format: "| %@ | %d | %.1f | %.1f | %.3f | %d (%d) | %.1f | %.1f | %.2f |", w.name, Int(n), free, masked, maskRatio,
                     reference[i].jump.tokens.count, reference[i].jump.steps, jump * 1e3, forced * 1e3, jumpRatio))
    }
    print("\nper token of the masked runs: mask µs, masked sample µs; per step of the jump runs: forced-text µs")
    for (i, w) in workloads.enumerated() {
        print(String(format: "  %@: mask %.0f, sample %.0f, forced %.0f", w.name, median(maskUs[i]), median(sampleUs[i]), median(forcedUs[i])))
    }
    print(String(format: "unconstrained greedy sample: %.0f µs", runner.sampleSeconds(repeats: 50) * 1e6))
    var byCount: [String] = []
    for k in 1...8 { byCount.append(String(format: "%d: %.1f", k, try runner.forwardSeconds(workloads[0], count: k, repeats: 9) * 1e3)) }
    print("forward step ms by tokens in the step: " + byCount.joined(separator: ", "))
    print(String(format: "\nmasked/free: median %.3f, min %.3f (target >= 0.95)", median(maskRatios), maskRatios.min() ?? .nan))
    print(String(format: "forced/jump: median %.2f, min %.2f (> 1: jump-forward is faster than one token per step)",
                 median(jumpRatios), jumpRatios.min() ?? .nan))
}

/// Decoding loops over one slot of the context, shaped like LocalInferenceEngine's.
struct E2ERunner {
    let model: Model
    let context: InferenceContext
    let maxTokens: Int
    let closureSampler: Bool

    struct Run {
        var tokens: [Int32]
        var seconds: Double
        /// Forward steps after the prompt.
        var steps: Int
        /// Whether the model ended the output (a last sample chose end of sequence).
        var ended: Bool
        /// Where a constrained run's time went besides the model: masks, masked samples, and
        /// finding and tokenizing forced text.
        var maskSeconds = 0.0, sampleSeconds = 0.0, forcedSeconds = 0.0
    }

    /// Prefills the prompt (its last token's logits ready); returns the history.
    func prefill(_ w: E2EWorkload) throws -> [Int32] {
        context.reset(slot: 0)
        try context.forward(Batch.sequence(w.prompt, startingAt: 0, slot: 0))
        return w.prompt
    }

    func feed(_ tokens: [Int32], after history: [Int32]) throws {
        try context.forward(Batch.sequence(tokens, startingAt: history.count - tokens.count, slot: 0))
    }

    /// Unconstrained greedy decoding of exactly `tokens` tokens (end-of-generation counts as
    /// any other token), each step one sample and one single-token forward, with the same
    /// number of samples and forwards as a constrained run of that length (`ended`: one more
    /// sample, which chose end of sequence there).
    func free(_ w: E2EWorkload, tokens: Int, ended: Bool) throws -> Run {
        var history = try prefill(w)
        var sampler = Sampler(.greedy)
        var out: [Int32] = []
        let t0 = nanos()
        while true {
            let token = sampler.sample(context.logits(0), history: history[...])
            if out.count == tokens { break }
            out.append(token)
            history.append(token)
            if out.count == tokens && !ended { break }
            try feed([token], after: history)
        }
        return Run(tokens: out, seconds: Double(nanos() - t0) / 1e9, steps: out.count, ended: ended)
    }

    /// Constrained greedy decoding until end of sequence (or `maxTokens`), as the engine does it:
    /// mask, sample under the mask, accept; with `jumpForward`, forced tokens follow the sampled
    /// one in the same batched forward step.
    func constrained(_ w: E2EWorkload, jumpForward: Bool) throws -> Run {
        var history = try prefill(w)
        let tokenizer = model.tokenizer
        let matcher = w.grammar!.makeMatcher()
        var sampler = Sampler(.greedy)
        var mask = [UInt32](repeating: 0, count: w.grammar!.vocabulary.maskWordCount)
        var out: [Int32] = []
        var steps = 0
        var ended = false
        var maskNanos: UInt64 = 0, sampleNanos: UInt64 = 0, forcedNanos: UInt64 = 0
        func forced() -> [Int32] {
            guard jumpForward else { return [] }
            let f0 = nanos()
            defer { forcedNanos += nanos() - f0 }
            var taken: [Int32] = []
            let tokens = matcher.forcedTokens { bytes in
                (try? tokenizer.encode(bytes: bytes, addSpecial: false, parseSpecial: false)) ?? []
            }
            for token in tokens.prefix(max(maxTokens - out.count, 0)) {
                guard matcher.accept(token) else { break }
                taken.append(token)
            }
            return taken
        }
        let t0 = nanos()
        var step = forced()
        if !step.isEmpty {
            out += step
            history += step
            try feed(step, after: history)
            steps += 1
        }
        while out.count < maxTokens {
            let m0 = nanos()
            mask.withUnsafeMutableBufferPointer { matcher.fillAllowedTokens($0) }
            let m1 = nanos()
            let token = mask.withUnsafeBufferPointer { words in
                closureSampler
                    ? sampler.sample(context.logits(0), history: history[...], allowed: { words[Int($0) >> 5] & (1 << (UInt32($0) & 31)) != 0 })
                    : sampler.sample(context.logits(0), history: history[...], allowedMask: words)
            }
            maskNanos += m1 - m0
            sampleNanos += nanos() - m1
            guard matcher.accept(token) else { throw GrammarBenchError.rejected(token) }
            if matcher.isTerminated { ended = true; break }
            step = [token] + forced()
            out += step
            history += step
            if out.count >= maxTokens { break }
            try feed(step, after: history)
            steps += 1
        }
        return Run(tokens: out, seconds: Double(nanos() - t0) / 1e9, steps: steps, ended: ended,
                   maskSeconds: Double(maskNanos) / 1e9, sampleSeconds: Double(sampleNanos) / 1e9, forcedSeconds: Double(forcedNanos) / 1e9)
    }

    /// Seconds of one forward step of `count` tokens after the prompt (the median of `repeats`).
    func forwardSeconds(_ w: E2EWorkload, count: Int, repeats: Int) throws -> Double {
        _ = try prefill(w)
        let filler = Array(w.prompt.suffix(count))
        var times: [Double] = []
        for _ in 0..<repeats {
            context.reset(slot: 0, keeping: w.prompt.count)
            let t0 = nanos()
            try context.forward(Batch.sequence(filler, startingAt: w.prompt.count, slot: 0))
            times.append(Double(nanos() - t0) / 1e9)
        }
        return median(times)
    }

    /// Seconds of one unconstrained greedy sample (the median of `repeats`).
    func sampleSeconds(repeats: Int) -> Double {
        var sampler = Sampler(.greedy)
        var times: [Double] = []
        for _ in 0..<repeats {
            let t0 = nanos()
            _ = sampler.sample(context.logits(0), history: [])
            times.append(Double(nanos() - t0) / 1e9)
        }
        return median(times)
    }

    /// `tokens` fed one per step, each step with an unconstrained sample (whose result is not
    /// used), as unconstrained generation of the same text would run.
    func teacherForced(_ w: E2EWorkload, tokens: [Int32]) throws -> Run {
        var history = try prefill(w)
        var sampler = Sampler(.greedy)
        let t0 = nanos()
        for token in tokens {
            _ = sampler.sample(context.logits(0), history: history[...])
            history.append(token)
            try feed([token], after: history)
        }
        _ = sampler.sample(context.logits(0), history: history[...])
        return Run(tokens: tokens, seconds: Double(nanos() - t0) / 1e9, steps: tokens.count, ended: true)
    }
}

enum GrammarBenchError: Error {
    case rejected(Int32)
}
