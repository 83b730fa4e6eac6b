import Foundation
import Plinth
import PlinthRuntime
import Synchronization

/// What `/metrics` reports, in Prometheus' text format: requests by endpoint and status, tokens,
/// each model's queue and batch, and latency histograms.
final class Metrics: Sendable {
    struct Histogram {
        let bounds: [Double]
        var counts: [Int]
        var sum = 0.0
        var count = 0

        init(_ bounds: [Double]) {
            self.bounds = bounds
            counts = Array(repeating: 0, count: bounds.count)
        }

        /// A scheduler's steps by the sequences they served.
        init(batches s: SchedulerStatistics) {
            bounds = SchedulerStatistics.batchBounds.map(Double.init)
            var cumulative = 0
            counts = s.stepsBySequenceBound.map { cumulative += $0; return cumulative }
            sum = Double(s.sequencesServed)
            count = s.steps
        }

        mutating func observe(_ x: Double) {
            for (i, b) in bounds.enumerated() where x <= b { counts[i] += 1 }
            sum += x
            count += 1
        }

        func lines(_ name: String, labels: String) -> [String] {
            let sep = labels.isEmpty ? "" : labels + ","
            // Whole numbers without a fraction (`le="16"`), as Prometheus clients write them.
            func number(_ x: Double) -> String { x == x.rounded() && abs(x) < 1e15 ? String(Int(x)) : String(x) }
            var out = zip(bounds, counts).map { "\(name)_bucket{\(sep)le=\"\(number($0))\"} \($1)" }
            out.append("\(name)_bucket{\(sep)le=\"+Inf\"} \(count)")
            let braces = labels.isEmpty ? "" : "{\(labels)}"
            out.append("\(name)_sum\(braces) \(number(sum))")
            out.append("\(name)_count\(braces) \(count)")
            return out
        }
    }

    private struct State {
        var requests: [String: Int] = [:]  // "endpoint\u{0}status"
        var promptTokens: [String: Int] = [:]
        var cachedTokens: [String: Int] = [:]
        var generatedTokens: [String: Int] = [:]
        var generations: [String: Int] = [:]  // "model\u{0}reason"
        var timeToFirstToken: [String: Histogram] = [:]
        var timePerToken: [String: Histogram] = [:]
        var duration = Histogram([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120])
    }

    private let state = Mutex(State())
    static let ttftBounds = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    static let tokenBounds = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]

    func request(endpoint: String, status: Int, seconds: Double) {
        state.withLock {
            $0.requests["\(endpoint)\u{0}\(status)", default: 0] += 1
            $0.duration.observe(seconds)
        }
    }

    /// A finished choice of `model`.
    func generation(model: String, _ s: GenerationSummary) {
        state.withLock {
            $0.promptTokens[model, default: 0] += s.promptTokens
            $0.cachedTokens[model, default: 0] += s.cachedTokens
            $0.generatedTokens[model, default: 0] += s.generatedTokens
            $0.generations["\(model)\u{0}\(s.finishReason.rawValue)", default: 0] += 1
            guard s.generatedTokens > 0 else { return }
            $0.timeToFirstToken[model, default: Histogram(Self.ttftBounds)].observe(s.timeToFirstToken)
            if s.generatedTokens > 1 {
                $0.timePerToken[model, default: Histogram(Self.tokenBounds)].observe(s.decodeSeconds / Double(s.generatedTokens - 1))
            }
        }
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// The exposition text, with each loaded model's scheduler counters.
    func text(models: [(id: String, model: ServedModel)]) -> String {
        let s = state.withLock { $0 }
        var out: [String] = []
        func family(_ name: String, _ type: String, _ help: String) {
            out.append("# HELP \(name) \(help)")
            out.append("# TYPE \(name) \(type)")
        }
        family("plinth_requests_total", "counter", "HTTP requests answered, by endpoint and status.")
        for (key, n) in s.requests.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "\u{0}", omittingEmptySubsequences: false)
            out.append("plinth_requests_total{endpoint=\"\(Self.escape(String(parts[0])))\",status=\"\(parts[1])\"} \(n)")
        }
        family("plinth_request_duration_seconds", "histogram", "Time from a request's arrival to its response head (a stream's events come after it).")
        out += s.duration.lines("plinth_request_duration_seconds", labels: "")
        let counters: [(String, String, [String: Int])] = [
            ("plinth_prompt_tokens_total", "Prompt tokens of finished generations (none for those cancelled before they started).", s.promptTokens),
            ("plinth_cached_prompt_tokens_total", "Prompt tokens taken from the prefix cache.", s.cachedTokens),
            ("plinth_generated_tokens_total", "Tokens generated (those of requests whose client left too).", s.generatedTokens),
        ]
        for (name, help, values) in counters {
            family(name, "counter", help)
            for (model, n) in values.sorted(by: { $0.key < $1.key }) { out.append("\(name){model=\"\(Self.escape(model))\"} \(n)") }
        }
        // A stream's request counts as 200 once its head is sent; how each choice ended (its
        // client gone, a timeout: cancelled) is here.
        family("plinth_generations_total", "counter", "Finished choices, by how they ended (endOfGeneration, maxTokens, stopSequence, contextFull, cancelled).")
        for (key, n) in s.generations.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "\u{0}", omittingEmptySubsequences: false)
            out.append("plinth_generations_total{model=\"\(Self.escape(String(parts[0])))\",reason=\"\(parts[1])\"} \(n)")
        }
        let gauges: [(String, String, String, (SchedulerStatistics) -> Int)] = [
            ("plinth_queue_depth", "gauge", "Requests waiting for a slot.", { $0.queued }),
            ("plinth_running_sequences", "gauge", "Sequences in the batch after the last step.", { $0.running }),
            ("plinth_largest_batch", "gauge", "The most sequences one step has served.", { $0.largestBatch }),
            ("plinth_steps_total", "counter", "Batched model steps.", { $0.steps }),
            ("plinth_step_tokens_total", "counter", "Tokens computed by the steps (decode and prefill); divided by steps, the mean batch.", { $0.tokens }),
        ]
        family("plinth_model_info", "gauge", "A loaded model: where its steps run and how many sequences it decodes at once.")
        for (id, model) in models {
            out.append("plinth_model_info{model=\"\(Self.escape(id))\",backend=\"\(model.scheduler.backend.rawValue)\",parallel=\"\(model.parallel)\"} 1")
        }
        let stats = models.map { ($0.id, $0.model.scheduler.statistics) }
        for (name, type, help, read) in gauges {
            family(name, type, help)
            for (id, st) in stats { out.append("\(name){model=\"\(Self.escape(id))\"} \(read(st))") }
        }
        family("plinth_batch_sequences", "histogram", "Sequences served by each batched step.")
        for (id, st) in stats {
            out += Histogram(batches: st).lines("plinth_batch_sequences", labels: "model=\"\(Self.escape(id))\"")
        }
        family("plinth_time_to_first_token_seconds", "histogram", "From submission to the first generated token.")
        for (model, h) in s.timeToFirstToken.sorted(by: { $0.key < $1.key }) {
            out += h.lines("plinth_time_to_first_token_seconds", labels: "model=\"\(Self.escape(model))\"")
        }
        family("plinth_time_per_output_token_seconds", "histogram", "Mean time between generated tokens, per generation.")
        for (model, h) in s.timePerToken.sorted(by: { $0.key < $1.key }) {
            out += h.lines("plinth_time_per_output_token_seconds", labels: "model=\"\(Self.escape(model))\"")
        }
        return out.joined(separator: "\n") + "\n"
    }
}
