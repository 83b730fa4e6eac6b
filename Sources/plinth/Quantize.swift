import ArgumentParser
import Foundation
import PlinthRuntime

/// `plinth quantize`: a model's matrices rewritten in another type, as llama-quantize writes them.
struct Quantize: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a model with its matrices in another type (a GGUF file llama.cpp reads).",
        discussion: """
            Matrices (tensors named *weight with two or more dimensions) are dequantized and \
            quantized to --type by round-to-nearest, with the bytes llama-quantize writes without an \
            importance matrix (with --imatrix, each block's scale minimizes the error the \
            activations see; IQ4_XS and IQ4_NL always search their scales, Plinth's own search); \
            a matrix already in that type is copied. As in llama-quantize, unless \
            --pure: the output projection is Q6_K (Q8_0 where its rows are not whole 256-blocks); \
            a k-quant mix raises attn_v, ffn_down and attn_output by its rules; IQ4_XS/IQ4_NL \
            raise attn_v to Q5_K where 4 or more query heads share a kv head, and (without \
            --imatrix) the first eighth of ffn_down to Q5_K; with --imatrix the \
            first eighth of the ffn_down matrices of Q4_0/Q5_0 are Q4_1/Q5_1. Vectors keep their \
            type (F32), unless --type is F32: then every tensor is F32, the dequantization that \
            fidelity is measured against. A matrix whose rows are not whole blocks of its type gets \
            llama-quantize's fallback (Q4_0 for Q2_K/Q3_K, Q5_0 for Q4_K, Q5_1 for Q5_K, Q8_0 for \
            Q6_K, IQ4_NL for IQ4_XS, else F16), and the plan says so. Metadata and tensor order are the input's; \
            general.file_type names the new type.
            """
    )

    @OptionGroup var modelOptions: ModelOptions

    @Option(name: [.short, .customLong("output")], help: "The GGUF file to write.")
    var output: String

    @Option(help: "The type for the matrices: F32, F16, BF16, Q8_0, Q5_1, Q5_0, Q4_1, Q4_0, IQ4_XS, IQ4_NL, PQ2, or a k-quant mix as llama-quantize names them: Q6_K, Q5_K_M, Q5_K_S, Q4_K_M, Q4_K_S, Q3_K_L, Q3_K_M, Q3_K_S, Q2_K (Q5_K, Q4_K, Q3_K: the _M mixes).")
    var type: String

    @Flag(help: "Every matrix in --type: no output projection rule, no mix, no ffn_down guard (llama-quantize --pure).")
    var pure = false

    @Option(help: "An importance matrix (plinth imatrix or llama-imatrix: GGUF, or llama-imatrix's legacy .dat): each matrix it covers is quantized to minimize the error its activations see.")
    var imatrix: String?

    @Option(help: "How matrices are rounded: rtn (to nearest; weighted with --imatrix) or gptq (each column's error spread over the later ones, from --calibration).")
    var method: String = "rtn"

    @Option(help: "The calibration text for --method gptq (UTF-8); the input model runs on it.")
    var calibration: String?

    @Option(help: "Calibration chunks of 512 tokens for --method gptq.")
    var calibrationChunks: Int = 32

    @Option(help: ArgumentHelp("A different type for the matrices whose name matches a regular expression (repeatable).",
                               valueName: "PATTERN=TYPE"))
    var keep: [String] = []

    func validate() throws {
        guard method == "rtn" || method == "gptq" else { throw ValidationError("--method must be rtn or gptq, not '\(method)'") }
        if method == "gptq" { guard calibration != nil else { throw ValidationError("--method gptq needs --calibration TEXT") } }
        guard calibrationChunks > 0 else { throw ValidationError("--calibration-chunks must be positive") }
    }

    /// X^T X of every block matrix's inputs over the calibration text, from the input model.
    private func calibrate(_ input: URL) throws -> Hessians {
        let model = try loadingModelFile(input) { try Model(url: input) }
        let context = min(512, model.config.contextLength)
        let inference = try chunkContext(model, context: context)
        guard let path = calibration else { throw CLIError("--method gptq needs --calibration TEXT") }
        let run = try ChunkedEvaluation(file: URL(fileURLWithPath: path), tokenizer: model.tokenizer, context: context,
                                        chunkLimit: calibrationChunks)
        let hessians = Hessians()
        inference.inputObserver = { names, x, rows, width in hessians.accumulate(names, x, rows: rows, width: width) }
        Diagnostics.note("calibrating on \(run.chunkCount) chunks of \(context) tokens of \(path)")
        try run.run(on: inference) { _, _, _ in }
        return hessians
    }

    func run() throws {
        try reportingErrors {
            let mix = QuantizationMix(name: type)
            guard let target = mix?.base ?? GGMLType(name: type) else { throw CLIError("--type: no type or mix named '\(type)'") }
            let overrides = try keep.map { spec -> (pattern: String, type: GGMLType) in
                guard let eq = spec.lastIndex(of: "="), let t = GGMLType(name: String(spec[spec.index(after: eq)...])) else {
                    throw CLIError("--keep '\(spec)': expected PATTERN=TYPE with a type name after the last '='")
                }
                return (String(spec[..<eq]), t)
            }
            let input = try modelOptions.url()
            let out = URL(fileURLWithPath: output)
            try FileChecks.requireWritable(output, what: "output")
            try FileChecks.requireDistinct(writes: [(output, "output")],
                                           reads: [(input.path, "model")] + (imatrix.map { [($0, "importance matrix")] } ?? [])
                                               + (calibration.map { [($0, "calibration text")] } ?? []))
            let file = try loadingModelFile(input) { try GGUFFile(url: input) }
            let plan = try Quantizer.plan(file, target: target, mix: mix, overrides: overrides, pure: pure, withImportance: imatrix != nil)
            for step in plan where step.note != nil { Diagnostics.note("\(step.tensor.name): \(step.note!)") }
            let started = Date()
            let importance = try imatrix.map { try ImportanceMatrix(url: URL(fileURLWithPath: $0)) }
            if let importance {
                Diagnostics.note("\(imatrix!): \(importance.entries.count) matrices over \(importance.chunkCount) chunks")
                // An embedding is looked up, not multiplied: no importance is measured for it.
                let weighted = plan.filter { $0.type.isQuantized && $0.tensor.name != "token_embd.weight" }.map(\.tensor.name)
                let missing = weighted.filter { importance.entries[$0] == nil }
                if !weighted.isEmpty && missing.count == weighted.count {
                    let theirs = importance.entries.keys.sorted().first ?? ""
                    throw CLIError("the importance matrix \(imatrix!) has no entry for any matrix of this model (it names '\(theirs)'; "
                                   + "the model '\(weighted[0])'): it was made for another model")
                }
                if let first = missing.first {
                    Diagnostics.note("\(missing.count) of \(weighted.count) quantized matrices have no entry in the importance matrix "
                                     + "(\(first) first): rounded to nearest")
                }
            }
            let hessians = method == "gptq" ? try calibrate(input) : nil
            try Quantizer.write(file, plan: plan, target: target, mix: mix, to: out, importance: importance, importanceFile: imatrix,
                                hessians: hessians)
            let inBytes = plan.reduce(0) { $0 + $1.tensor.byteCount }
            let outBytes = plan.reduce(0) { $0 + ($1.type.tensorBytes(elements: $1.tensor.elementCount, rowLength: $1.tensor.rowLength) ?? 0) }
            var counts: [String: Int] = [:]
            for step in plan { counts[step.type.name, default: 0] += 1 }
            let types = counts.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            let sizes = String(format: "%.1f MiB -> %.1f MiB in %.1f s", Double(inBytes) / 1_048_576, Double(outBytes) / 1_048_576,
                               Date().timeIntervalSince(started))
            try Output.line("\(out.path): \(plan.count) tensors (\(types)), \(sizes)")
        }
    }
}
