import PlinthRuntime

/// Runs `tokens` as one sequence from position 0 with logits at every position, and returns the
/// largest difference between those logits and `reference` (one row per position).
func worstLogitError(_ ctx: InferenceContext, _ tokens: [Int32], against reference: [[Double]]) throws -> Double {
    var b = Batch()
    for (i, t) in tokens.enumerated() { b.add(t, position: i, logits: true) }
    try ctx.forward(b)
    var worst = 0.0
    for row in tokens.indices {
        let logits = ctx.logits(row)
        for v in reference[row].indices { worst = max(worst, abs(Double(logits[v]) - reference[row][v])) }
    }
    return worst
}
