import ArgumentParser
import Foundation
import PlinthRuntime

/// `plinth perplexity`: llama-perplexity's measurement, and its KL-divergence comparison against
/// a base model's log-probabilities, in the same file format.
struct Perplexity: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure perplexity on a text, or the KL divergence from a base model, as llama-perplexity does.",
        discussion: """
            The text is tokenized whole (with BOS when the model adds one) and cut into chunks of -c \
            tokens; each chunk runs from an empty cache with its first token replaced by BOS, and \
            its second half is scored. The result is exp(mean negative log-likelihood) with its \
            standard error.

            --kl-divergence-base FILE (without --kl-divergence) also writes the model's \
            log-probabilities at every scored position to FILE, in llama-perplexity's format. With \
            --kl-divergence, FILE is read instead: the chunks are its tokens (no -f needed), and \
            the model is compared with the one that wrote it: KL divergence, how often the most \
            likely token is the same, and the change in the probability of the actual next token. \
            A file written by llama-perplexity works, and this one's work there.
            """
    )

    @OptionGroup var modelOptions: ModelOptions
    @OptionGroup var adapterOptions: AdapterOptions

    @Option(name: [.short, .customLong("file")], help: "The text to score (UTF-8).")
    var file: String?

    @Option(name: [.short, .customLong("ctx-size")], help: "Tokens per chunk.")
    var context: Int = 512

    @Option(help: "Chunks to score (default: all the text holds).")
    var chunks: Int?

    @Option(name: [.short, .customLong("batch-size")], help: "Tokens per step: chunks run batch-size / ctx-size at a time.")
    var batchSize: Int = 512

    @Option(name: [.short, .long], help: "Kernel threads (default: PLINTH_THREADS or all cores).")
    var threads: Int?

    @OptionGroup var backendOptions: BackendOptions

    @Option(name: .customLong("kl-divergence-base"), help: "The base log-probabilities file: written, or read with --kl-divergence.")
    var base: String?

    @Flag(name: .customLong("kl-divergence"), help: "Compare with the base in --kl-divergence-base instead of writing it.")
    var divergence = false

    func validate() throws {
        guard context >= 4 else { throw ValidationError("--ctx-size must be at least 4") }
        guard batchSize >= 1 else { throw ValidationError("--batch-size must be positive") }
        if let chunks { guard chunks > 0 else { throw ValidationError("--chunks must be positive") } }
        if let threads { guard threads > 0 else { throw ValidationError("--threads must be positive") } }
        if divergence {
            guard base != nil else { throw ValidationError("--kl-divergence needs the base file: --kl-divergence-base FILE") }
        } else {
            guard file != nil else { throw ValidationError("give the text to score with -f FILE") }
        }
    }

    func run() throws {
        try reportingErrors {
            let url = try modelOptions.url()
            if !divergence, let base {
                // The base is written here: never over the model or the text.
                try FileChecks.requireWritable(base, what: "base file")
                try FileChecks.requireDistinct(writes: [(base, "base file")],
                                               reads: [(url.path, "model")] + (file.map { [($0, "text")] } ?? []))
            }
            let model = try modelOptions.load(url)
            if divergence, let base {
                try compare(model, base: URL(fileURLWithPath: base))
            } else if let file {
                try score(model, text: URL(fileURLWithPath: file))
            }
        }
    }

    private func inference(_ model: Model, context: Int) throws -> InferenceContext {
        try chunkContext(model, context: context, slots: max(1, batchSize / context), batch: batchSize, threads: threads,
                         backend: backendOptions.value())
    }

    /// Perplexity of the text, writing the base file when one is named.
    private func score(_ model: Model, text url: URL) throws {
        let inference = try inference(model, context: context)
        let adapter = try adapterOptions.load(for: model).map { try inference.attach($0) } ?? 0
        let run = try ChunkedEvaluation(file: url, tokenizer: model.tokenizer, context: context, chunkLimit: chunks)
        let vocabulary = model.config.vocabularySize
        let writer = try base.map {
            try LogProbabilityFile.Writer(url: URL(fileURLWithPath: $0), header: .init(
                context: context, vocabularySize: vocabulary, chunkCount: run.chunkCount, tokens: run.tokens))
        }
        let words = LogProbabilityFile.recordWords(vocabularySize: vocabulary), perChunk = run.scoredPerChunk * words
        let perStep = inference.slotCount
        var records = [UInt16](repeating: 0, count: writer == nil ? 0 : perStep * perChunk)
        var tally = PerplexityTally()
        Diagnostics.note("calculating perplexity over \(run.chunkCount) chunks, n_ctx=\(context), batch_size=\(batchSize), n_seq=\(perStep)")
        let started = Date()
        for g in stride(from: 0, to: run.chunkCount, by: perStep) {
            let group = g..<min(g + perStep, run.chunkCount)
            try run.run(group, on: inference, adapter: adapter) { c, p, logits in
                let next = run.next(chunk: c, position: p)
                if writer == nil {
                    tally.add(logits: logits, token: next)
                } else {
                    let at = (c - g) * perChunk + (p - run.first) * words
                    let nll = records.withUnsafeMutableBufferPointer {
                        LogProbabilityRecord.encode(logits: logits, token: next, into: UnsafeMutableBufferPointer(rebasing: $0[at..<at + words]))
                    }
                    tally.add(nll: nll)
                }
                if p == run.context - 2 {
                    try Output.write(String(format: "[%d]%.4f,", c + 1, tally.perplexity))
                }
            }
            try writer?.append(Array(records[0..<group.count * perChunk]))
            if g == 0 { Diagnostics.note(String(format: "%.2f seconds per pass", Date().timeIntervalSince(started))) }
        }
        try writer?.finish()
        try Output.write(String(format: "\nFinal estimate: PPL = %.4f +/- %.5f\n", tally.perplexity, tally.uncertainty))
    }

    /// KL divergence and the rest against a base file.
    private func compare(_ model: Model, base url: URL) throws {
        let reader = try LogProbabilityFile.Reader(url: url)
        let header = reader.header
        guard header.vocabularySize == model.config.vocabularySize else {
            throw PerplexityError.vocabularyMismatch(path: url.path, file: header.vocabularySize, model: model.config.vocabularySize)
        }
        guard header.context <= model.config.contextLength else {
            throw PerplexityError.contextTooLong(path: url.path, file: header.context, model: model.config.contextLength)
        }
        let count = min(chunks ?? header.chunkCount, header.chunkCount)
        let run = ChunkedEvaluation(chunks: Array(header.tokens.prefix(count * header.context)), context: header.context,
                                    bos: ChunkedEvaluation.bos(of: model.tokenizer))
        let inference = try inference(model, context: header.context)
        let adapter = try adapterOptions.load(for: model).map { try inference.attach($0) } ?? 0
        let words = LogProbabilityFile.recordWords(vocabularySize: header.vocabularySize)
        var tally = DivergenceTally()
        Diagnostics.note("computing over \(count) chunks, n_ctx=\(header.context), batch_size=\(batchSize)")
        try Output.write("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p\n")
        let perStep = inference.slotCount
        for g in stride(from: 0, to: count, by: perStep) {
            let group = g..<min(g + perStep, count)
            var records: [UInt16] = []
            for _ in group { records += try reader.nextChunk() }
            try run.run(group, on: inference, adapter: adapter) { c, p, logits in
                let at = ((c - g) * run.scoredPerChunk + p - run.first) * words
                records.withUnsafeBufferPointer {
                    tally.add(logits: logits, base: UnsafeBufferPointer(rebasing: $0[at..<at + words]), token: run.next(chunk: c, position: p))
                }
                if p == run.context - 2 { try printChunk(c, tally) }
            }
        }
        try printSummary(tally)
    }


    private func printChunk(_ chunk: Int, _ t: DivergenceTally) throws {
        let ppl = t.perplexity, ratio = t.logPerplexityRatio, kld = t.meanDivergence
        let rms = t.rmsProbabilityChange, top = t.sameTopFraction
        try Output.write(String(format: "%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%",
                     chunk + 1, ppl.value, ppl.uncertainty, ratio.value, ratio.uncertainty, kld.value, kld.uncertainty,
                     100 * rms.value, 100 * rms.uncertainty, 100 * top.value, 100 * top.uncertainty) + "\n")
    }

    private func printSummary(_ t: DivergenceTally) throws {
        let line = Output.line
        let ppl = t.perplexity, basePPL = t.basePerplexity, ratio = t.logPerplexityRatio
        try line("")
        try line("====== Perplexity statistics ======")
        try line(String(format: "Mean PPL(Q)                   : %10.6f ± %10.6f", ppl.value, ppl.uncertainty))
        try line(String(format: "Mean PPL(base)                : %10.6f ± %10.6f", basePPL.value, basePPL.uncertainty))
        try line(String(format: "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%", 100 * t.logPerplexityCorrelation))
        try line(String(format: "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f", ratio.value, ratio.uncertainty))
        try line("")
        try line("====== KL divergence statistics ======")
        let kld = t.meanDivergence
        try line(String(format: "Mean    KLD: %10.6f ± %10.6f", kld.value, kld.uncertainty))
        let d = t.divergences.sorted()
        try line(String(format: "Maximum KLD: %10.6f", d.last ?? 0))
        for (label, f) in [("99.9%", 0.999), ("99.0%", 0.990), ("95.0%", 0.950), ("90.0%", 0.900)] as [(String, Float)] {
            try line(label + String(format: "   KLD: %10.6f", DivergenceTally.percentile(d, f)))
        }
        try line(String(format: "Median  KLD: %10.6f", DivergenceTally.median(d)))
        try line(String(format: "Minimum KLD: %10.6f", d.first ?? 0))
        try line("")
        try line("====== Token probability statistics ======")
        let dp = t.meanProbabilityChange, p = t.probabilityChanges.sorted()
        try line(String(format: "Mean    Δp: %6.3f ± %5.3f %%", 100 * dp.value, 100 * dp.uncertainty))
        try line(String(format: "Maximum Δp: %6.3f%%", 100 * (p.last ?? 0)))
        try line(String(format: "Median  Δp: %6.3f%%", 100 * DivergenceTally.median(p)))
        try line(String(format: "Minimum Δp: %6.3f%%", 100 * (p.first ?? 0)))
        let rms = t.rmsProbabilityChange, top = t.sameTopFraction
        try line(String(format: "RMS Δp    : %6.3f ± %5.3f %%", 100 * rms.value, 100 * rms.uncertainty))
        try line(String(format: "Same top p: %6.3f ± %5.3f %%", 100 * top.value, 100 * top.uncertainty))
    }
}
