import Foundation
import PlinthGrammar

/// Checks values against the run's JSON Schema apart from the decoding that made them: the
/// schema compiled again, over single bytes rather than the model's tokens, and each value's
/// JSON text fed through it. It is the decoder's grammar all the same, with its canonical form:
/// members in the schema's order, numbers as the decoder writes them. Values Plinth wrote pass
/// or fail on the schema alone; a value edited or brought from elsewhere (members reordered,
/// `1e0` for 1) may count invalid though the schema allows it.
struct SchemaValidator {
    private let grammar: CompiledGrammar

    init(schema: String) throws {
        let vocabulary = try TokenVocabulary(tokens: (0..<256).map { [UInt8($0)] } + [Array("<end>".utf8)], endOfSequence: [256])
        grammar = try GrammarCompiler(vocabulary: vocabulary)
            .compile(jsonSchema: schema, options: GrammarOptions(whitespace: .flexible(maxRun: 64), additionalPropertiesByDefault: true))
    }

    func isValid(_ json: String) -> Bool {
        let m = grammar.makeMatcher()
        return m.accept(bytes: Array(json.utf8)) && m.isComplete
    }
}

/// Counts over an output file's records: what the summary of a run (or `eval report`) prints.
struct EvalTally {
    struct Label {
        var total = 0
        var correct = 0
        /// Expected value → output value → records.
        var confusion: [String: [String: Int]] = [:]
    }

    var records = 0
    var values = 0
    var validValues = 0
    var truncatedByBudget = 0
    var errors: [String: Int] = [:]
    var promptTokens = 0
    var generatedTokens = 0
    var cachedTokens = 0
    var labels: [String: Label] = [:]
    /// Lines of an output file that are not records (`eval report` says how many it passed over).
    var otherLines = 0
    /// Records whose id an earlier record has (a join on ids downstream would be ambiguous).
    var repeatedIDs = 0
    private var ids = Set<String>()
    /// Nil where values can't be checked: no schema (an output without its run description),
    /// or one the checker could not compile.
    let validator: SchemaValidator?
    /// Why values were not checked, where ``validator`` is nil.
    var uncheckedReason = "no run description holds the schema"

    init(validator: SchemaValidator?) { self.validator = validator }

    /// Adds one record line of an output file (read with member order kept: a value is
    /// validated as it was written).
    mutating func add(recordLine line: some Collection<UInt8>) {
        guard let record = try? JSONValue(parsing: Data(line)), case .object = record, record["line"] != nil else {
            otherLines += 1
            return
        }
        records += 1
        if let error = record["error"] {
            if case .string(let kind)? = error["kind"] { errors[kind, default: 0] += 1 } else { errors["unknown", default: 0] += 1 }
        }
        promptTokens += Self.integer(record["promptTokens"])
        generatedTokens += Self.integer(record["generatedTokens"])
        if record["truncatedByBudget"] == .bool(true) { truncatedByBudget += 1 }
        if let id = record["id"], id != .null, !ids.insert(id.compactText).inserted { repeatedIDs += 1 }
        let value = record["value"]
        if let value {
            values += 1
            if validator?.isValid(value.compactText) ?? false { validValues += 1 }
        }
        guard case .object(let expected)? = record["labels"] else { return }
        // A labelled record that failed counts against accuracy: it has no right value.
        for (field, label) in expected {
            let output = value.map { $0[field].map(Self.display) ?? "(missing)" } ?? "(error)"
            let want = Self.display(label)
            labels[field, default: Label()].total += 1
            if let got = value?[field], Self.same(got, label) { labels[field, default: Label()].correct += 1 }
            labels[field, default: Label()].confusion[want, default: [:]][output, default: 0] += 1
        }
    }

    /// The tally of a whole output file and its timings file (lines cut short by a kill passed over).
    static func of(output: String, validator: SchemaValidator?) throws -> EvalTally {
        var tally = EvalTally(validator: validator)
        let records = try LineReader(path: output)
        while let line = try records.next() { if records.lineTerminated { tally.add(recordLine: line) } }
        if FileManager.default.fileExists(atPath: output + ".timings.jsonl") {
            let timings = try LineReader(path: output + ".timings.jsonl")
            while let line = try timings.next() { if timings.lineTerminated { tally.add(timingLine: line) } }
        }
        return tally
    }

    /// Adds a line of the timings file.
    mutating func add(timingLine line: some Collection<UInt8>) {
        guard let record = try? JSONValue(parsing: Data(line)) else { return }
        cachedTokens += Self.integer(record["cachedTokens"])
    }

    static func integer(_ value: JSONValue?) -> Int {
        if case .number(let text)? = value { return Int(text) ?? 0 }
        return 0
    }

    /// A label or value as it is shown: strings bare (but for those that would read as another
    /// JSON value, such as "1" or "true", which keep their quotes), anything else as compact JSON.
    static func display(_ value: JSONValue) -> String {
        switch value {
        case .string(let s):
            if let other = try? JSONValue(parsing: Data(s.utf8)), other.stringValue == nil { return value.compactText }
            return s
        case .number(let text):
            // One spelling per number, as ``same(_:_:)`` compares them: 1.0 shows as 1.
            guard let d = DecimalNumber(text), abs(d.exponent) < 40 else { return text }
            return d.description
        default:
            return value.compactText
        }
    }

    /// Whether an output value is the expected one: the same JSON value (numbers by value, so
    /// 1 is 1.0; a string is never the number or literal it spells).
    static func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.number(let x), .number(let y)):
            if let dx = DecimalNumber(x), let dy = DecimalNumber(y) { return dx == dy }
            return x == y
        case (.array(let x), .array(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && x.allSatisfy { m in y.first { $0.key == m.key }.map { same(m.value, $0.value) } ?? false }
        default:
            return a == b
        }
    }

    func json(seconds: Double) -> JSONValue {
        func counts(_ d: [String: Int]) -> JSONValue { JSONValue(sortingMembersOf: d.mapValues { .integer($0) }) }
        return [
            "records": .integer(records), "values": .integer(values), "repeatedIDs": .integer(repeatedIDs),
            "validValues": validator == nil ? .null : .integer(validValues),
            "validRate": validator == nil ? .null : .double(values > 0 ? Double(validValues) / Double(values) : 0),
            "truncatedByBudget": .integer(truncatedByBudget), "errors": counts(errors),
            "promptTokens": .integer(promptTokens), "cachedTokens": .integer(cachedTokens),
            "generatedTokens": .integer(generatedTokens), "seconds": .double(seconds),
            "recordsPerSecond": .double(seconds > 0 ? Double(records) / seconds : 0),
            "generatedTokensPerSecond": .double(seconds > 0 ? Double(generatedTokens) / seconds : 0),
            "labels": JSONValue(sortingMembersOf: labels.mapValues { l in
                ["total": .integer(l.total), "correct": .integer(l.correct),
                 "accuracy": .double(l.total > 0 ? Double(l.correct) / Double(l.total) : 0),
                 "confusion": JSONValue(sortingMembersOf: l.confusion.mapValues(counts))]
            }),
        ]
    }

    /// Writes ``json(seconds:)`` to `path`. Standard output (`/dev/stdout`, whatever it is
    /// redirected to) is written through, after what is printed there: opened again, it would be
    /// truncated under the report.
    func write(summary path: String, seconds: Double) throws {
        let data = Data((json(seconds: seconds).prettyText + "\n").utf8)
        var target = stat(), out = stat()
        if stat(path, &target) == 0, fstat(STDOUT_FILENO, &out) == 0, target.st_dev == out.st_dev, target.st_ino == out.st_ino {
            try FileChecks.writing(path) { try FileHandle.standardOutput.write(contentsOf: data) }
        } else {
            try FileChecks.writing(path) { try data.write(to: URL(fileURLWithPath: path)) }
        }
    }

    func text(seconds: Double) -> String {
        var lines: [String] = []
        let errorList = errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        lines.append("records: \(records) (\(values) values, \(records - values) errors\(errorList.isEmpty ? "" : ": " + errorList))")
        if repeatedIDs > 0 { lines.append("ids: \(repeatedIDs) record\(repeatedIDs == 1 ? " has" : "s have") the id of an earlier record") }
        let rate = values > 0 ? 100 * Double(validValues) / Double(values) : 0
        if validator != nil {
            lines.append(String(format: "valid: %d of %d values (%.1f%%), %d ended early by the token budget",
                                validValues, values, rate, truncatedByBudget))
        } else {
            lines.append(String(format: "valid: not checked (%@), %d ended early by the token budget", uncheckedReason, truncatedByBudget))
        }
        if seconds > 0 {
            lines.append(String(format: "speed: %.2f records/s, %.1f generated tokens/s over %.1f s (prompts %d tokens, %d from the cache)",
                                Double(records) / seconds, Double(generatedTokens) / seconds, seconds, promptTokens, cachedTokens))
        }
        for (field, l) in labels.sorted(by: { $0.key < $1.key }) {
            lines.append(String(format: "label %@: accuracy %.1f%% (%d of %d)", field,
                                l.total > 0 ? 100 * Double(l.correct) / Double(l.total) : 0, l.correct, l.total))
            lines.append(contentsOf: Self.table(l.confusion).map { "  " + $0 })
        }
        return lines.joined(separator: "\n")
    }

    /// A confusion table: expected values down, output values across.
    static func table(_ confusion: [String: [String: Int]]) -> [String] {
        let rows = confusion.keys.sorted()
        let columns = Set(confusion.values.flatMap(\.keys)).sorted()
        func clip(_ s: String) -> String { s.count > 40 ? String(s.prefix(39)) + "…" : s }
        let header = ["expected \\ output"] + columns.map(clip)
        var cells = [header]
        for r in rows { cells.append([clip(r)] + columns.map { String(confusion[r]?[$0] ?? 0) }) }
        let widths = (0..<header.count).map { c in cells.map { $0[c].count }.max() ?? 0 }
        return cells.map { row in
            row.enumerated().map { c, cell in
                c == 0 ? cell.padding(toLength: widths[c], withPad: " ", startingAt: 0)
                       : String(repeating: " ", count: widths[c] - cell.count) + cell
            }.joined(separator: "  ")
        }
    }
}

/// Progress on standard error: a redrawn bar on a terminal, a plain line every 10 s otherwise.
final class EvalProgress {
    private let total: Int?
    private let terminal = isatty(STDERR_FILENO) != 0
    private let started = DispatchTime.now().uptimeNanoseconds
    private var shown: UInt64 = 0
    private let startDone: Int

    init(total: Int?, alreadyDone: Int) {
        self.total = total
        startDone = alreadyDone
    }

    var elapsed: Double { Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9 }

    func update(done: Int, generatedTokens: Int, final: Bool = false) {
        let now = DispatchTime.now().uptimeNanoseconds
        let interval: UInt64 = terminal ? 200_000_000 : 10_000_000_000
        guard final || now - shown >= interval else { return }
        shown = now
        let seconds = elapsed
        let rate = seconds > 0 ? Double(done - startDone) / seconds : 0
        let tokenRate = seconds > 0 ? Double(generatedTokens) / seconds : 0
        var text: String
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            let eta = rate > 0 ? Double(total - done) / rate : 0
            let bar = String(repeating: "#", count: Int(fraction * 24)).padding(toLength: 24, withPad: ".", startingAt: 0)
            text = String(format: "[%@] %d/%d records, %.2f records/s, %.0f tok/s, ETA %@", bar, done, total, rate, tokenRate,
                          Self.duration(eta))
        } else {
            text = String(format: "%d records, %.2f records/s, %.0f tok/s", done, rate, tokenRate)
        }
        if terminal {
            Diagnostics.write("\r\u{1B}[K" + text + (final ? "\n" : ""))
        } else {
            Diagnostics.write(text + "\n")
        }
    }

    static func duration(_ s: Double) -> String {
        let t = Int(s.rounded())
        return t >= 3600 ? String(format: "%dh%02dm", t / 3600, t % 3600 / 60) : String(format: "%dm%02ds", t / 60, t % 60)
    }
}
