import ArgumentParser
import Foundation
import Plinth
import PlinthGrammar
import PlinthRuntime

/// `plinth eval`: one instruction and one output schema over a JSONL file of records.
struct Eval: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Classify every record of a JSONL file into a JSON Schema, batched, resumable and shardable.",
        subcommands: [EvalRun.self, EvalMerge.self, EvalReport.self],
        defaultSubcommand: EvalRun.self
    )
}

struct EvalRun: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the records of --input through the model into --output (the default subcommand).",
        discussion: """
            Each record (a JSON object per line) becomes one prompt, from --field or from \
            --prompt-template with {name} for the record's fields, answered in a fresh session \
            with the same instructions under --schema. All records go through one scheduler, \
            --parallel at a time, sharing its steps and the instructions' cached prefix. The \
            output has one line per record, in input order: {"line", "id", "value" or "error", \
            "promptTokens", "generatedTokens", "truncatedByBudget", "labels"}; per-record times and \
            cached tokens go to OUTPUT.timings.jsonl and the run's description to OUTPUT.run.json. \
            Stopped at any point (even killed), the same command continues where it stopped; a \
            different command on an existing output is refused unless --restart. With greedy \
            decoding (the default) the output does not depend on --parallel or on interruptions.
            """
    )

    /// The model, instructions, sampling (greedy unless a sampling option is given; a seed gives
    /// each record a seed of its own) and --max-tokens (default 256).
    @OptionGroup var session: SessionOptions

    @Option(help: "The JSON Schema every value must match.")
    var schema: String

    @Option(help: "A file holding the instructions.")
    var instructionsFile: String?

    @Option(help: "The records: a JSON object per line.")
    var input: String

    @Option(help: "Where the results go (JSONL, one line per record).")
    var output: String

    @Option(help: "The record field that is the prompt (without --prompt-template).")
    var field = "text"

    @Option(help: "The record field that identifies it in the output.")
    var idField = "id"

    @Option(help: "The prompt, with {name} replaced by the record's field `name`.")
    var promptTemplate: String?

    @Option(help: "Records generating at once (default: 16 on the CPU, 64 on a GPU).")
    var parallel: Int?

    @Option(help: "A record field holding the expected value of the output field of the same name (repeatable): accuracy and a confusion table in the summary.")
    var label: [String] = []

    @Option(help: "K/N: only the records whose line number modulo N is K (0 ≤ K < N), for N processes or machines; merge with `plinth eval merge`.")
    var shard: String?

    @Flag(help: "Don't put the schema into the prompt (the decoder still enforces it).")
    var noSchemaInPrompt = false

    @Flag(help: "Start the output over instead of continuing it.")
    var restart = false

    @Option(help: "Also write the summary as JSON to this file.")
    var summary: String?

    @Flag(help: "No progress or summary on standard error.")
    var quiet = false

    func validate() throws {
        if session.instructions != nil && instructionsFile != nil { throw ValidationError("give --instructions or --instructions-file, not both") }
        if let parallel { guard (1...Self.maximumParallel).contains(parallel) else { throw ValidationError("--parallel must be in 1...\(Self.maximumParallel)") } }
        if let shard { _ = try Self.parseShard(shard) }
        if let twice = label.first(where: { name in label.count { $0 == name } > 1 }) { throw ValidationError("--label \(twice) is given twice") }
    }

    static func parseShard(_ text: String) throws -> (k: Int, n: Int) {
        let parts = text.split(separator: "/")
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]), n >= 1, k >= 0, k < n else {
            throw ValidationError("--shard takes K/N with 0 ≤ K < N, as in 0/4; got \(text)")
        }
        return (k, n)
    }

    /// Sequences one model may decode at once: past this the KV slots alone outgrow a GPU.
    static let maximumParallel = 1024

    /// The default response budget.
    static let defaultMaxTokens = 256

    /// The session options with eval's defaults: greedy unless sampling is asked for.
    var generationOptions: GenerationOptions {
        var options = session.generationOptions
        let sampled = session.temperature.map { $0 > 0 } ?? (session.topK != nil || session.topP != nil || session.seed != nil)
        if !sampled { options.sampling = .greedy }
        options.maximumResponseTokens = options.maximumResponseTokens ?? Self.defaultMaxTokens
        return options
    }

    /// How values are sampled, in words, for the run's description.
    static func describe(_ options: GenerationOptions) -> String {
        switch options.sampling?.kind {
        case .greedy?: return "greedy"
        case .randomTopK(let k, let seed)?: return "top \(k), temperature \(options.temperature ?? 0.8), seed \(seed.map(String.init) ?? "random")"
        case .randomProbabilityThreshold(let p, let seed)?: return "top-p \(p), temperature \(options.temperature ?? 0.8), seed \(seed.map(String.init) ?? "random")"
        case nil: return "temperature \(options.temperature ?? 0.8), seed random"
        }
    }

    func run() async throws {
        // A reader of standard error that goes away (`2>&1 | head`) must not kill a long run.
        signal(SIGPIPE, SIG_IGN)
        try await reportingErrors {
            // The files, checked before the model loads and before anything is written.
            try FileChecks.requireReadable(schema, what: "schema file")
            if let instructionsFile { try FileChecks.requireReadable(instructionsFile, what: "instructions file") }
            try FileChecks.requireReadable(input, what: "input file", once: false)
            try FileChecks.requireWritable(output, what: "output")
            if let summary { try FileChecks.requireWritable(summary, what: "summary", streams: true) }
            let written = [(output, "output"), (output + ".run.json", "run description"), (output + ".timings.jsonl", "timings file")]
                + (summary.map { [($0, "summary")] } ?? [])
            try FileChecks.requireDistinct(
                writes: written.map { (path: $0.0, what: $0.1) },
                reads: [(input, "input file"), (schema, "schema file")] + (instructionsFile.map { [($0, "instructions file")] } ?? []))

            let schemaText = Self.droppingByteOrderMark(try Self.read(schema, what: "schema"))
            do { _ = try JSONValue(parsing: Data(schemaText.utf8)) } catch { throw CLIError("\(schema) is not JSON: \(error)") }
            let generationSchema: GenerationSchema
            do {
                generationSchema = try GenerationSchema(jsonSchema: schemaText)
            } catch {
                throw CLIError("\(schema) is not a JSON Schema: \(error.localizedDescription)")
            }
            // Hashed as read (runs made before the mark was dropped resume), given without the mark.
            let instructionsRead = try instructionsFile.map { try Self.read($0, what: "instructions") } ?? session.instructions
            let instructionText = instructionsRead.map(Self.droppingByteOrderMark)
            let url = try session.modelOptions.url()
            let adapterURL = try session.adapterOptions.url()
            let model = LocalLanguageModel(name: url.path, adapter: adapterURL, adapterScale: session.adapterOptions.adapterScale,
                                           backend: try session.backendOptions.localValue(), parallel: parallel, contextLength: session.context)
            let options = generationOptions
            let shardSpec = try shard.map(Self.parseShard)
            // Loaded now, and the adapter read and the schema compiled, so that none of them
            // fails after the output is touched; the backend that runs goes into the run's description.
            let sizing = try model.loadedSizing()
            if !quiet { Diagnostics.note("\(url.lastPathComponent) on \(sizing.backend.rawValue), \(sizing.parallel) records decoding at once") }
            // A scaled adapter's outputs differ: its scale is part of what a resume must match.
            let adapter = try model.loadedAdapter()
            if let adapter, let note = adapter.baseModelNote, !quiet { Diagnostics.note("adapter \(adapter.name): \(note)") }
            let adapterID = adapter.map { "\($0.name) sha256:\($0.fingerprint)" + ($0.userScale == 1 ? "" : " scale \($0.userScale)") }
            // A budget the context cannot hold fails every record: said once, here.
            let context = model.contextSize
            if let budget = options.maximumResponseTokens, budget >= context {
                throw CLIError("--max-tokens \(budget) leaves no room for a prompt in the model's context of \(context) tokens")
            }
            do {
                try model.checkEnforceable(generationSchema)
            } catch LocalLanguageModelError.schemaNotEnforceable(_, let reason) {
                // Named by its file: a schema read from JSON has no type name of its own.
                throw CLIError("the schema in \(schema) can't be enforced while decoding: \(reason)")
            } catch {
                throw CLIError("\(schema): \(error.localizedDescription)")
            }
            // A label the output has no property for can never be right: said before the run.
            if case .object(let properties)? = (try? JSONValue(parsing: Data(schemaText.utf8)))?["properties"] {
                for name in label where !properties.contains(where: { $0.key == name }) {
                    Diagnostics.note("--label \(name): the schema has no property \"\(name)\", so no value can match it")
                }
            }
            let inputSHA256: String
            do { inputSHA256 = try SHA256.hash(fileAt: URL(fileURLWithPath: input)) } catch { throw CLIError("cannot read the input file \(input): \(error.localizedDescription)") }

            var info = EvalRunInfo(
                model: url.lastPathComponent,
                modelBytes: (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int64) ?? 0,
                input: URL(fileURLWithPath: input).standardizedFileURL.path, inputSHA256: inputSHA256,
                schema: schemaText, schemaSHA256: EvalRunInfo.sha256(schemaText),
                instructionsSHA256: EvalRunInfo.sha256(instructionsRead ?? ""), promptTemplate: promptTemplate,
                field: field, idField: idField, labels: label, maxTokens: options.maximumResponseTokens ?? Self.defaultMaxTokens,
                sampling: Self.describe(options),
                includeSchemaInPrompt: !noSchemaInPrompt, shard: shard, adapter: adapterID, backend: sizing.backend.rawValue,
                contextLength: context)
            var previous: Double = 0
            var done: [Int] = []
            if !restart, FileManager.default.fileExists(atPath: output) {
                guard let existing = try EvalRunInfo.read(for: output) else {
                    throw CLIError("\(output) exists but has no \(EvalRunInfo.url(for: output).lastPathComponent): it was not made by plinth eval; rerun with --restart to replace it")
                }
                let changed = existing.differences(from: info)
                guard changed.isEmpty else {
                    throw CLIError("\(output) was made with a different \(changed.joined(separator: ", ")); rerun with --restart to start it over, or choose another --output")
                }
                previous = existing.elapsedSeconds
                done = try EvalOutputFile.scan(output).lines
            }
            let (total, missing) = try Self.countRecords(input, shard: shardSpec, done: done)
            if !missing.isEmpty {
                // Resuming runs what comes after the last record; records missing before it (a
                // merge of unfinished shards) would be skipped for good.
                let listed = missing.prefix(5).map(String.init).joined(separator: ", ") + (missing.count > 5 ? " and \(missing.count - 5) more" : "")
                throw CLIError("\(output) lacks the records of input lines \(listed) before its last record (a merge of unfinished shards?): finish the shards' runs and merge them again, or rerun with --restart")
            }
            info.elapsedSeconds = previous
            // A new output's description first: a run killed before it would leave an output
            // that no later run recognizes as its own.
            if !FileManager.default.fileExists(atPath: output) { try info.write(for: output) }
            let out = try EvalOutputFile(path: output, empty: restart, exclusive: true)
            try info.write(for: output)
            let timings = try EvalOutputFile(path: output + ".timings.jsonl", empty: restart, through: out.lastLine)
            let resumedAt = out.lastLine
            if resumedAt > 0 && !quiet { Diagnostics.note("continuing \(output) after input line \(resumedAt) (\(out.records) records done)") }

            // Records in flight: the evaluator's default, twice what the model decodes at once.
            let evaluator = BatchEvaluator(model: model, instructions: instructionText, schema: generationSchema,
                                           options: options, includeSchemaInPrompt: !noSchemaInPrompt)
            // The summary is the whole output's, tallied once at the end; the run counts for progress.
            let validator = try? SchemaValidator(schema: schemaText)
            var runRecords = 0, runGenerated = 0
            let progress = quiet ? nil : EvalProgress(total: total, alreadyDone: out.records)
            let reader = try LineReader(path: input)
            var records: [Int: JSONValue] = [:]  // records in flight, by line: ids and labels
            var lastSaved: Double = 0
            let started = DispatchTime.now().uptimeNanoseconds
            func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9 }

            try await evaluator.run(next: {
                while var line = try reader.next() {
                    let n = reader.lineNumber
                    if n == 1 { line = Self.droppingByteOrderMark(line) }
                    if n <= resumedAt || Self.isBlank(line) { continue }
                    if let (k, count) = shardSpec, (n - 1) % count != k { continue }
                    let (record, prompt) = self.prompt(of: line)
                    records[n] = record
                    return BatchEvaluator.Input(index: n, prompt: prompt)
                }
                return nil
            }, emit: { outcome in
                if case .failure(let failure) = outcome.result, failure.kind == .unsupportedSchema {
                    throw CLIError("\(self.schema): \(failure.message)")
                }
                let record = records.removeValue(forKey: outcome.index) ?? .null
                let line = self.recordLine(outcome, record)
                // The timing first: a kill between the two writes leaves a timing past the last
                // record, which reopening cuts, rather than a record without its timing.
                try timings.append(#"{"line":\#(outcome.index),"cachedTokens":\#(outcome.cachedTokens),"seconds":\#(String(format: "%.4f", outcome.seconds))}"#,
                                   inputLine: outcome.index)
                try out.append(line, inputLine: outcome.index)
                runRecords += 1
                runGenerated += outcome.generatedTokens
                progress?.update(done: out.records, generatedTokens: runGenerated)
                // The wall time so far, kept for `eval report` should the run be killed.
                if elapsed() - lastSaved >= 1 {
                    lastSaved = elapsed()
                    info.elapsedSeconds = previous + lastSaved
                    try info.write(for: output)
                }
            })
            progress?.update(done: out.records, generatedTokens: runGenerated, final: true)
            info.elapsedSeconds = previous + elapsed()
            info.finished = true
            info.records = out.records
            try info.write(for: output)

            // The summary is the whole output's, resumed runs' records included, over their time.
            let seconds = elapsed()
            var whole = try EvalTally.of(output: output, validator: validator)
            whole.uncheckedReason = "the checker could not compile the schema"
            if !quiet {
                if resumedAt > 0 {
                    Diagnostics.note(String(format: "this run: %d records after line %d in %.1f s (%.2f records/s); the whole output:",
                                            runRecords, resumedAt, seconds, seconds > 0 ? Double(runRecords) / seconds : 0))
                }
                Diagnostics.note(whole.text(seconds: info.elapsedSeconds))
                for name in label where whole.labels[name] == nil && whole.records > 0 {
                    Diagnostics.note("--label \(name): no record has the field \"\(name)\"")
                }
            }
            if let summary { try whole.write(summary: summary, seconds: info.elapsedSeconds) }
            // A misspelt --field (or a template's field) fails every record: the run says so.
            if whole.records > 0, whole.errors[BatchEvaluator.Failure.Kind.missingField.rawValue] == whole.records {
                let source = promptTemplate == nil ? "the field \"\(field)\" (--field)" : "a field of --prompt-template"
                throw CLIError("no record has \(source): every record failed; check the name, then rerun with --restart")
            }
        }
    }

    /// The record of a line and its prompt, or why it has none.
    func prompt(of line: ArraySlice<UInt8>) -> (JSONValue, Result<String, BatchEvaluator.Failure>) {
        let record: JSONValue
        do {
            record = try JSONValue(parsing: Data(line))
        } catch {
            return (.null, .failure(.init(.invalidJSON, "the line is not JSON: \(error)")))
        }
        guard case .object = record else {
            return (.null, .failure(.init(.invalidJSON, "the line is JSON but not an object")))
        }
        guard let template = promptTemplate else {
            guard let value = record[field] else { return (record, .failure(.init(.missingField, "the record has no field \"\(field)\""))) }
            guard case .string(let text) = value else { return (record, .failure(.init(.missingField, "the field \"\(field)\" is not a string"))) }
            return (record, .success(text))
        }
        switch Self.fill(template, with: record) {
        case .success(let prompt): return (record, .success(prompt))
        case .failure(let problem): return (record, .failure(.init(.missingField, problem.message)))
        }
    }

    /// The template with each `{name}` replaced by the record's field (strings as they are,
    /// other values as JSON); `{{` and `}}` are literal braces.
    static func fill(_ template: String, with record: JSONValue) -> Result<String, CLIError> {
        var out = ""
        var i = template.startIndex
        while i < template.endIndex {
            let c = template[i]
            let next = template.index(after: i)
            if c == "{", next < template.endIndex, template[next] == "{" { out.append("{"); i = template.index(after: next); continue }
            if c == "}", next < template.endIndex, template[next] == "}" { out.append("}"); i = template.index(after: next); continue }
            if c == "{", let close = template[next...].firstIndex(of: "}") {
                let name = String(template[next..<close])
                guard let value = record[name] else { return .failure(CLIError("the record has no field \"\(name)\" that the template uses")) }
                // Strings as they are (a field "30" is 30 in the prompt), other values as JSON.
                out += value.stringValue ?? value.compactText
                i = template.index(after: close)
                continue
            }
            out.append(c)
            i = next
        }
        return .success(out)
    }

    /// One output line; keys in a fixed order so that reruns give the same bytes.
    func recordLine(_ outcome: BatchEvaluator.Outcome, _ record: JSONValue) -> String {
        func json(_ text: String) -> String { JSONValue.string(text).compactText }
        var parts = [#""line":\#(outcome.index)"#, #""id":\#(record[idField]?.compactText ?? "null")"#]
        switch outcome.result {
        case .success(let content):
            parts.append(#""value":\#(content.jsonString)"#)
            parts.append(#""promptTokens":\#(outcome.promptTokens)"#)
            parts.append(#""generatedTokens":\#(outcome.generatedTokens)"#)
            parts.append(#""truncatedByBudget":\#(outcome.truncatedByBudget)"#)
        case .failure(let failure):
            parts.append(#""error":{"kind":\#(json(failure.kind.rawValue)),"message":\#(json(failure.message))}"#)
        }
        let labels = label.compactMap { name in record[name].map { (name, $0) } }
        if !labels.isEmpty {
            parts.append(#""labels":{\#(labels.map { "\(json($0.0)):\($0.1.compactText)" }.joined(separator: ","))}"#)
        }
        return "{" + parts.joined(separator: ",") + "}"
    }

    static func read(_ path: String, what: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else { throw CLIError("cannot read the \(what) file \(path)") }
        return String(decoding: data, as: UTF8.self)
    }

    /// Text without the byte order mark some editors write (the input's first line drops it too).
    static func droppingByteOrderMark(_ text: String) -> String {
        text.unicodeScalars.first == "\u{FEFF}" ? String(text.unicodeScalars.dropFirst()) : text
    }

    /// Records (non-blank lines) of the input in the shard, for the progress bar, and those
    /// before the last of `done` (the input lines of an output's records, in order) that are
    /// not among them.
    static func countRecords(_ path: String, shard: (k: Int, n: Int)?, done: [Int] = []) throws -> (count: Int, missing: [Int]) {
        let reader = try LineReader(path: path)
        var count = 0
        var missing: [Int] = []
        var next = 0  // the first of `done` not yet passed
        while let line = try reader.next() {
            let n = reader.lineNumber
            if isBlank(n == 1 ? droppingByteOrderMark(line) : line) { continue }
            if let (k, count) = shard, (n - 1) % count != k { continue }
            count += 1
            guard let last = done.last, n < last else { continue }
            while next < done.count && done[next] < n { next += 1 }
            if done[next] != n { missing.append(n) }
        }
        return (count, missing)
    }

    static func isBlank(_ line: ArraySlice<UInt8>) -> Bool { line.allSatisfy { $0 == 0x20 || $0 == 0x09 } }

    /// A file's first line without the UTF-8 byte order mark some editors write.
    static func droppingByteOrderMark(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        line.starts(with: [0xEF, 0xBB, 0xBF]) ? line.dropFirst(3) : line
    }
}

/// `plinth eval merge`: shards of one run into one output, as the unsharded run would write it.
struct EvalMerge: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Merge the outputs of --shard runs into one output file, in input order.",
        discussion: "Every shard 0/N … N-1/N of one run must be given, each finished. The merged file equals the output of the same run without --shard."
    )

    @Argument(help: "The merged output file.")
    var output: String

    @Argument(help: "The shards' output files.")
    var shards: [String]

    @Flag(help: "Merge shards that have not finished (the merged file then lacks their missing records).")
    var allowPartial = false

    func run() throws {
        try reportingErrors {
            guard !shards.isEmpty else { throw CLIError("give the shards' output files") }
            var infos: [EvalRunInfo] = []
            for path in shards {
                guard let info = try EvalRunInfo.read(for: path, remedy: "run the shard's command again with --restart") else {
                    throw CLIError("\(path) has no \(EvalRunInfo.url(for: path).lastPathComponent): not an eval output")
                }
                guard info.finished || allowPartial else { throw CLIError("\(path) has not finished; run its command again to complete it, or pass --allow-partial") }
                infos.append(info)
            }
            guard let spec = infos[0].shard, let n = try? EvalRun.parseShard(spec).n else { throw CLIError("\(shards[0]) is not a shard's output") }
            var unsharded = infos[0]
            unsharded.shard = nil
            // Shards may run on different machines, a GPU's and a CPU's: the merge says which.
            let backends = Set(infos.compactMap(\.backend))
            unsharded.backend = backends.count > 1 ? backends.sorted().joined(separator: "+") : backends.first
            var seen = Set<Int>()
            for (path, info) in zip(shards, infos) {
                var other = info
                other.shard = nil
                other.backend = unsharded.backend
                let changed = other.differences(from: unsharded)
                guard changed.isEmpty else { throw CLIError("\(path) comes from a run with a different \(changed.joined(separator: ", ")) than \(shards[0])") }
                guard let s = info.shard, let (k, count) = try? EvalRun.parseShard(s), count == n else { throw CLIError("\(path) is not a shard of \(n)") }
                guard seen.insert(k).inserted else { throw CLIError("shard \(k)/\(n) is given twice") }
                // A finished shard still holds every record its run wrote (not cut or edited since):
                // as many as its description says, or (descriptions made before it said) as its
                // input has in its shard.
                let counted = FileManager.default.fileExists(atPath: info.input) ? try? EvalRun.countRecords(info.input, shard: (k, count)).count : nil
                if info.finished, let expected = info.records ?? counted {
                    let scan = try EvalOutputFile.scan(path)
                    let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
                    guard scan.lines.count == expected, scan.keep == size else {
                        throw CLIError("\(path) holds \(scan.lines.count) whole records\(scan.keep == size ? "" : " and then other text"), "
                                       + "where its run wrote \(expected): it was cut or edited since; run its command again to complete it")
                    }
                }
            }
            let missing = (0..<n).filter { !seen.contains($0) }
            guard missing.isEmpty || allowPartial else { throw CLIError("shards \(missing.map { "\($0)/\(n)" }.joined(separator: ", ")) are missing") }

            try FileChecks.requireWritable(output, what: "merged output")
            if let shard = shards.first(where: { FileChecks.sameFile($0, output) }) { throw CLIError("the merged output \(output) is the shard \(shard)") }
            // The merge replaces the output (never one plinth eval did not write, nor one a run holds).
            var held: FileHandle?
            if FileManager.default.fileExists(atPath: output) {
                guard try EvalRunInfo.read(for: output) != nil else {
                    throw CLIError("\(output) exists and was not made by plinth eval: remove it, or choose another output")
                }
                guard let handle = FileHandle(forUpdatingAtPath: output) else { throw CLIError("cannot write \(output)") }
                try EvalOutputFile.lock(handle.fileDescriptor, output)
                held = handle
            }
            defer { try? held?.close() }
            // Both files merged before either replaces its old one.
            let merged = try ["", ".timings.jsonl"].map { suffix in try Self.merge(shards.map { $0 + suffix }, into: output + suffix) }
            for file in merged {
                do throws(PartialFile.Failure) { try file.commit() } catch { throw CLIError("cannot write \(file.url.path): \(error.reason)") }
            }
            unsharded.finished = infos.allSatisfy(\.finished) && missing.isEmpty
            unsharded.records = unsharded.finished ? infos.compactMap(\.records).reduce(0, +) : nil
            unsharded.elapsedSeconds = infos.map(\.elapsedSeconds).max() ?? 0
            try unsharded.write(for: output)
            Diagnostics.note("merged \(shards.count) shards into \(output)")
        }
    }

    /// Merges files whose lines are records ordered by "line" into one such file, to be committed.
    static func merge(_ paths: [String], into output: String) throws -> PartialFile {
        let readers = try paths.map { try LineReader(path: $0) }
        var heads: [(line: Int, text: ArraySlice<UInt8>)?] = try readers.map { try next($0) }
        // Whole or not at all: a merge that fails leaves the old file (or none).
        let file: PartialFile
        do { file = try PartialFile(URL(fileURLWithPath: output)) } catch { throw CLIError("cannot write \(output): \(error.reason)") }
        func write(_ data: Data) throws {
            do { try file.write(data) } catch { throw CLIError("cannot write \(output): \(error.reason)") }
        }
        var pending = Data()
        while let (i, head) = heads.enumerated().compactMap({ i, h in h.map { (i, $0) } }).min(by: { $0.1.line < $1.1.line }) {
            pending.append(contentsOf: head.text)
            pending.append(0x0A)
            if pending.count > 1 << 20 { try write(pending); pending.removeAll(keepingCapacity: true) }
            heads[i] = try next(readers[i])
        }
        try write(pending)
        return file
    }

    private static func next(_ reader: LineReader) throws -> (line: Int, text: ArraySlice<UInt8>)? {
        while let text = try reader.next() {
            guard reader.lineTerminated, let n = EvalOutputFile.recordLine(text) else { continue }
            return (n, text)
        }
        return nil
    }
}

/// `plinth eval report`: the summary of an output file.
struct EvalReport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Print the summary of an eval output file: validity, errors, speed and label accuracy."
    )

    @Argument(help: "An output file of plinth eval.")
    var output: String

    @Option(help: "Also write the summary as JSON to this file.")
    var summary: String?

    func run() throws {
        try reportingErrors {
            if let summary {
                try FileChecks.requireWritable(summary, what: "summary", streams: true)
                try FileChecks.requireDistinct(writes: [(summary, "summary")], reads: [
                    (output, "output"), (EvalRunInfo.url(for: output).path, "run description"), (output + ".timings.jsonl", "timings file"),
                ])
            }
            let info = try EvalRunInfo.read(for: output, remedy: "its values can't be checked; the run's command with --restart writes it anew")
            let tally = try EvalTally.of(output: output, validator: try info.map { try SchemaValidator(schema: $0.schema) })
            let seconds = info?.elapsedSeconds ?? 0
            if info == nil { Diagnostics.note("\(output) has no \(EvalRunInfo.url(for: output).lastPathComponent): its values are not checked against a schema") }
            if let info, !info.finished { Diagnostics.note("\(output) is not finished: its command has records left to run") }
            if tally.otherLines > 0 {
                let lines = tally.otherLines == 1 ? "1 line of \(output) is not a record" : "\(tally.otherLines) lines of \(output) are not records"
                Diagnostics.note("\(lines) (a JSON object with a \"line\"): passed over")
            }
            try Output.line(tally.text(seconds: seconds))
            if let summary { try tally.write(summary: summary, seconds: seconds) }
        }
    }
}
