import PlinthRuntime

/// The inference context that `perplexity`, `imatrix` and `quantize --method gptq` run a text's
/// chunks on: `slots` chunks of `context` tokens per step, in forwards of at most `batch` tokens.
func chunkContext(_ model: Model, context: Int, slots: Int = 1, batch: Int? = nil, threads: Int? = nil,
                  backend: Backend = .cpu) throws -> InferenceContext {
    guard context <= model.config.contextLength else {
        throw CLIError("--ctx-size \(context) is more than the model's context of \(model.config.contextLength)")
    }
    return try InferenceContext(transformer: model.transformer, contextLength: context, slots: slots,
                                maxBatch: batch ?? slots * context, threads: threads, backend: backend)
}
