import ArgumentParser
import Foundation
import PlinthRuntime

/// `plinth imatrix`: llama-imatrix's importance matrix of a model on a calibration text.
struct Imatrix: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure which inputs of each matrix matter on a calibration text (an importance matrix).",
        discussion: """
            Runs the text in chunks of -c tokens as plinth perplexity does and, for every matrix of \
            the transformer blocks, sums the squares of the activations each of its columns meets. \
            The file is llama-imatrix's GGUF format: plinth quantize --imatrix and llama-quantize \
            --imatrix both read it. The perplexity of the text is printed as a check.
            """
    )

    @OptionGroup var modelOptions: ModelOptions

    @Option(name: [.short, .customLong("file")], help: "The calibration text (UTF-8).")
    var file: String

    @Option(name: [.short, .customLong("output")], help: "The importance matrix to write (.gguf).")
    var output: String

    @Option(name: [.short, .customLong("ctx-size")], help: "Tokens per chunk.")
    var context: Int = 512

    @Option(help: "Chunks to run (default: all the text holds).")
    var chunks: Int?

    @Option(name: [.short, .long], help: "Kernel threads (default: PLINTH_THREADS or all cores).")
    var threads: Int?

    func validate() throws {
        guard context >= 4 else { throw ValidationError("--ctx-size must be at least 4") }
        if let chunks { guard chunks > 0 else { throw ValidationError("--chunks must be positive") } }
        if let threads { guard threads > 0 else { throw ValidationError("--threads must be positive") } }
    }

    func run() throws {
        try reportingErrors {
            try FileChecks.requireWritable(output, what: "output")
            let url = try modelOptions.url()
            try FileChecks.requireDistinct(writes: [(output, "output")], reads: [(url.path, "model"), (file, "text")])
            let model = try modelOptions.load(url)
            // Activations are observed on the CPU step.
            let inference = try chunkContext(model, context: context, threads: threads)
            let run = try ChunkedEvaluation(file: URL(fileURLWithPath: file), tokenizer: model.tokenizer, context: context,
                                            chunkLimit: chunks)
            var matrix = ImportanceMatrix()
            matrix.datasets = [file]
            matrix.chunkSize = context
            inference.inputObserver = { names, input, rows, width in matrix.accumulate(names, input, rows: rows, width: width) }
            var tally = PerplexityTally()
            Diagnostics.note("computing over \(run.chunkCount) chunks of \(context) tokens")
            for chunk in 0..<run.chunkCount {
                try run.run(chunk..<chunk + 1, on: inference) { c, p, logits in
                    tally.add(logits: logits, token: run.next(chunk: c, position: p))
                }
                matrix.chunkCount = chunk + 1
                try Output.write(String(format: "[%d]%.4f,", chunk + 1, tally.perplexity))
            }
            inference.inputObserver = nil
            try matrix.write(to: URL(fileURLWithPath: output))
            try Output.line(String(format: "\nFinal estimate: PPL = %.4f +/- %.5f", tally.perplexity, tally.uncertainty))
            try Output.line("\(output): \(matrix.entries.count) matrices over \(matrix.chunkCount) chunks")
        }
    }
}
