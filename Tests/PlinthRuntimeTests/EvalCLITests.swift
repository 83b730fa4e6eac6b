import Foundation
import Testing

/// `plinth eval` on a small file with the default model: the output does not depend on
/// --parallel, on sharding or on being killed and resumed; bad records become error records;
/// a changed command is refused.
@Suite(.serialized)
struct EvalCLITests {
    typealias CLI = CLITests

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let workload = repository.appendingPathComponent("Benchmarks/eval")

    /// A scratch folder with the input: 20 clauses of the benchmark workload, then bad records
    /// (not JSON, JSON but not an object, no text field, a blank line, a prompt past the context).
    static let folder: URL = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-eval-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: EvalCLITests.folder) }
        let clauses = (try? String(contentsOf: workload.appendingPathComponent("policy_clauses.jsonl"), encoding: .utf8)) ?? ""
        var lines = clauses.split(separator: "\n").prefix(20).map(String.init)
        lines.insert("{\"id\": \"bad1\", \"text\": unquoted}", at: 5)
        lines.insert("[1, 2, 3]", at: 9)
        lines.insert("{\"id\": \"bad3\", \"body\": \"no text field\"}", at: 12)
        lines.insert("   ", at: 14)
        lines.append("{\"id\": \"long\", \"text\": \"" + String(repeating: "benefit clause ", count: 3000) + "\"}")
        try? (lines.joined(separator: "\n") + "\n").write(to: dir.appendingPathComponent("in.jsonl"), atomically: true, encoding: .utf8)
        return dir
    }()

    static var input: String { folder.appendingPathComponent("in.jsonl").path }
    static let recordCount = 24  // 20 clauses, 3 bad lines and the long one; the blank line is no record

    static func arguments(output: String, _ extra: [String] = []) -> [String] {
        ["eval", "--schema", workload.appendingPathComponent("policy_clauses.schema.json").path,
         "--instructions-file", workload.appendingPathComponent("policy_instructions.txt").path,
         "--input", input, "--output", output, "--max-tokens", "48", "--label", "effectDirection"] + extra
    }

    static func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    static func contents(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    /// The output of one uninterrupted run at --parallel 8, made once for the suite.
    static let reference: (output: String, stderr: String)? = {
        guard CLI.hasModel else { return nil }
        let out = path("reference.jsonl")
        guard let r = try? CLI.runWithModel(arguments(output: out, ["--parallel", "8"])), r.status == 0 else { return nil }
        return (contents(out), r.stderr)
    }()

    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func everyRecordHasOneLineInInputOrder() throws {
        let reference = try #require(Self.reference)
        let lines = reference.output.split(separator: "\n")
        #expect(lines.count == Self.recordCount)
        var previous = 0
        var errors: [String: Int] = [:]
        for line in lines {
            let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let n = try #require(record["line"] as? Int)
            #expect(n > previous)
            previous = n
            if let error = record["error"] as? [String: Any] {
                errors[error["kind"] as? String ?? "?", default: 0] += 1
                #expect(!(error["message"] as? String ?? "").isEmpty)
            } else {
                let value = try #require(record["value"] as? [String: Any])
                #expect(Set(value.keys) == ["targetGroup", "effectDirection", "proxyVariables"])
                #expect(record["promptTokens"] as? Int ?? 0 > 0 && record["generatedTokens"] as? Int ?? 0 > 0)
                #expect(record["labels"] as? [String: String] != nil)
            }
        }
        #expect(errors == ["invalidJSON": 2, "missingField": 1, "inputTooLong": 1])
        #expect(reference.stderr.contains("valid: 20 of 20 values (100.0%)"), "stderr: \(reference.stderr)")
        #expect(reference.stderr.contains("label effectDirection: accuracy"))
    }

    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason), arguments: ["1", "32"])
    func outputDoesNotDependOnParallel(parallel: String) throws {
        let reference = try #require(Self.reference)
        let out = Self.path("parallel-\(parallel).jsonl")
        let r = try CLI.runWithModel(Self.arguments(output: out, ["--parallel", parallel]))
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(Self.contents(out) == reference.output)
    }

    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func shardsMergeToTheUnshardedOutput() throws {
        let reference = try #require(Self.reference)
        var shards: [String] = []
        for k in 0..<3 {
            let out = Self.path("shard-\(k).jsonl")
            let r = try CLI.runWithModel(Self.arguments(output: out, ["--shard", "\(k)/3"]))
            #expect(r.status == 0, "stderr: \(r.stderr)")
            shards.append(out)
        }
        // Incomplete sets of shards are refused.
        let partial = try CLI.run(["eval", "merge", Self.path("merged-partial.jsonl")] + shards.prefix(2))
        #expect(partial.status != 0 && partial.stderr.contains("2/3"), "stderr: \(partial.stderr)")
        let merged = Self.path("merged.jsonl")
        let m = try CLI.run(["eval", "merge", merged] + shards.reversed())
        #expect(m.status == 0, "stderr: \(m.stderr)")
        #expect(Self.contents(merged) == reference.output)
        let report = try CLI.run(["eval", "report", merged])
        #expect(report.status == 0 && report.stdout.contains("records: 24 (20 values, 4 errors"), "\(report.stdout)\(report.stderr)")
    }

    /// The documented recipe: Scripts/eval_shards.sh runs N shard processes at once and merges.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func shardScriptMergesToTheUnshardedOutput() throws {
        let reference = try #require(Self.reference)
        let out = Self.path("script.jsonl")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = [Self.repository.appendingPathComponent("Scripts/eval_shards.sh").path, "2"]
            + Self.arguments(output: out).dropFirst() + ["-m", "SmolLM2-135M-Instruct", "--no-fetch"]
        var env = ProcessInfo.processInfo.environment
        env["PLINTH_HOME"] = CLI.modelHome!.path
        env["PLINTH"] = CLI.binary!.path
        env["PLINTH_THREADS"] = "1"
        p.environment = env
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(Self.contents(out) == reference.output)
    }

    /// Killed three times at random moments (SIGKILL), then run to the end with the same
    /// command: the file equals an uninterrupted run's, and it was valid JSONL (but for a
    /// partial last line) after every kill.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func resumesAfterSIGKILL() throws {
        let reference = try #require(Self.reference)
        let out = Self.path("killed.jsonl")
        var rng = SplitMix64(seed: 2026)
        var interrupted = 0
        for _ in 0..<3 {
            let p = Process()
            p.executableURL = CLI.binary!
            p.arguments = Self.arguments(output: out, ["--parallel", "4", "--quiet"]) + ["-m", "SmolLM2-135M-Instruct", "--no-fetch"]
            var env = ProcessInfo.processInfo.environment
            env["PLINTH_HOME"] = CLI.modelHome!.path
            p.environment = env
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            // Killed once a random number of new records (at most half of those left) is
            // written: a fixed delay lets a fast machine finish first.
            let before = Self.contents(out).split(separator: "\n").count
            let target = before + 1 + Int(rng.next() % UInt64(max(1, (Self.recordCount - before) / 2)))
            while p.isRunning && Self.contents(out).split(separator: "\n").count < target { usleep(2_000) }
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            let text = Self.contents(out)
            let whole = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            for line in whole { #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line)") }
            #expect(reference.output.hasPrefix(whole.map { $0 + "\n" }.joined()))
            if whole.count < Self.recordCount { interrupted += 1 }
        }
        #expect(interrupted > 0, "every kill came after the run had finished")
        // A partial line (as a kill during a write would leave) is cut and redone.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{\"line\":99,\"id\":\"p0".utf8))
        try handle.close()
        let r = try CLI.runWithModel(Self.arguments(output: out, ["--parallel", "4"]))
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(Self.contents(out) == reference.output)
    }

    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func aChangedCommandIsRefusedUnlessRestarted() throws {
        let out = Self.path("changed.jsonl")
        let first = try CLI.runWithModel(Self.arguments(output: out, ["--shard", "0/4"]))
        #expect(first.status == 0, "stderr: \(first.stderr)")
        let changed = try CLI.runWithModel(Self.arguments(output: out, ["--shard", "0/4", "--instructions", "Classify."])
            .filter { $0 != "--instructions-file" && !$0.hasSuffix("policy_instructions.txt") })
        #expect(changed.status != 0)
        #expect(changed.stderr.contains("different instructions") && changed.stderr.contains("--restart"), "stderr: \(changed.stderr)")
        // The backend that ran is recorded, and one output is not continued on another.
        let description = URL(fileURLWithPath: out + ".run.json")
        let recorded = try String(contentsOf: description, encoding: .utf8)
        #expect(recorded.contains(#""backend" : "cpu""#), "\(recorded)")
        try recorded.replacingOccurrences(of: #""backend" : "cpu""#, with: #""backend" : "cuda""#)
            .write(to: description, atomically: true, encoding: .utf8)
        let otherBackend = try CLI.runWithModel(Self.arguments(output: out, ["--shard", "0/4", "--backend", "cpu"]))
        #expect(otherBackend.status != 0)
        #expect(otherBackend.stderr.contains("different backend"), "stderr: \(otherBackend.stderr)")
        let before = Self.contents(out)
        #expect(!before.isEmpty)
        let restarted = try CLI.runWithModel(Self.arguments(output: out, ["--shard", "1/4", "--restart"]))
        #expect(restarted.status == 0, "stderr: \(restarted.stderr)")
        #expect(Self.contents(out) != before)
        // A file that plinth eval did not write is never touched.
        let foreign = Self.path("foreign.jsonl")
        try Data("precious\n".utf8).write(to: URL(fileURLWithPath: foreign))
        let refused = try CLI.runWithModel(Self.arguments(output: foreign))
        #expect(refused.status != 0 && refused.stderr.contains("not made by plinth eval"))
        #expect(Self.contents(foreign) == "precious\n")
    }
    /// What would destroy a file or lose records silently is refused before the output is
    /// touched: an output that is the input, an input that is a directory or a pipe, a budget
    /// past the context, a schema the decoder can't enforce, resuming a merge of unfinished
    /// shards (records before its last would never run), an output another run holds locked.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func runsThatWouldLoseDataAreRefused() throws {
        func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: Self.path(name)) }
        func replacing(_ args: [String], _ old: (String) -> Bool, with new: String) -> [String] { args.map { old($0) ? new : $0 } }

        let copy = Self.path("input-copy.jsonl")
        try Data(Self.contents(Self.input).utf8).write(to: URL(fileURLWithPath: copy))
        let same = try CLI.runWithModel(replacing(Self.arguments(output: copy, ["--restart"]), { $0 == Self.input }, with: copy))
        #expect(same.status != 0 && same.stderr.contains("is the input file"), "stderr: \(same.stderr)")
        #expect(Self.contents(copy) == Self.contents(Self.input))

        let directory = try CLI.runWithModel(replacing(Self.arguments(output: Self.path("from-dir.jsonl")), { $0 == Self.input }, with: Self.folder.path))
        #expect(directory.status != 0 && directory.stderr.contains("is a directory"), "stderr: \(directory.stderr)")
        let fifo = Self.path("records.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let pipe = try CLI.runWithModel(replacing(Self.arguments(output: Self.path("from-pipe.jsonl")), { $0 == Self.input }, with: fifo))
        #expect(pipe.status != 0 && pipe.stderr.contains("not a regular file"), "stderr: \(pipe.stderr)")
        let budget = try CLI.runWithModel(replacing(Self.arguments(output: Self.path("budget.jsonl")), { $0 == "48" }, with: "9223372036854775807"))
        #expect(budget.status != 0 && budget.stderr.contains("leaves no room"), "stderr: \(budget.stderr)")
        let schema = Self.path("bogus-format.json")
        try Data(#"{"type":"object","properties":{"x":{"type":"string","format":"bogus"}},"required":["x"]}"#.utf8).write(to: URL(fileURLWithPath: schema))
        let bogus = try CLI.runWithModel(replacing(Self.arguments(output: Self.path("bogus.jsonl")), { $0.hasSuffix("policy_clauses.schema.json") }, with: schema))
        #expect(bogus.status != 0 && bogus.stderr.contains("format"), "stderr: \(bogus.stderr)")
        let clash = try CLI.runWithModel(Self.arguments(output: Self.path("clash.jsonl"), ["--summary", Self.path("clash.jsonl")]))
        #expect(clash.status != 0 && clash.stderr.contains("is also the"), "stderr: \(clash.stderr)")
        for name in ["from-dir.jsonl", "from-pipe.jsonl", "budget.jsonl", "bogus.jsonl", "clash.jsonl"] {
            #expect(!exists(name) && !exists(name + ".run.json"), "\(name) was created")
        }

        // Two of three shards merged, then the unsharded command: lines 3, 6, … are missing.
        var shards: [String] = []
        for k in 0..<2 {
            let out = Self.path("gap-shard-\(k).jsonl")
            let r = try CLI.runWithModel(Self.arguments(output: out, ["--shard", "\(k)/3"]))
            #expect(r.status == 0, "stderr: \(r.stderr)")
            shards.append(out)
        }
        let merged = Self.path("gap-merged.jsonl")
        let m = try CLI.run(["eval", "merge", merged, "--allow-partial"] + shards)
        #expect(m.status == 0, "stderr: \(m.stderr)")
        let before = Self.contents(merged)
        let resumed = try CLI.runWithModel(Self.arguments(output: merged))
        #expect(resumed.status != 0 && resumed.stderr.contains("lacks the records of input lines 3, 6"), "stderr: \(resumed.stderr)")
        #expect(Self.contents(merged) == before)
        // A merge never replaces a file eval did not write, nor one of its shards.
        let foreign = Self.path("foreign-merge.txt")
        try Data("precious\n".utf8).write(to: URL(fileURLWithPath: foreign))
        let overForeign = try CLI.run(["eval", "merge", foreign, "--allow-partial"] + shards)
        #expect(overForeign.status != 0 && Self.contents(foreign) == "precious\n", "stderr: \(overForeign.stderr)")
        let overShard = try CLI.run(["eval", "merge", shards[0], "--allow-partial"] + shards)
        #expect(overShard.status != 0 && overShard.stderr.contains("is the shard"), "stderr: \(overShard.stderr)")

        // An output locked by another writer (here this test) is left alone.
        let fd = open(shards[1], O_RDWR)
        #expect(fd >= 0 && flock(fd, LOCK_EX) == 0)
        let shardBefore = Self.contents(shards[1])
        let locked = try CLI.runWithModel(Self.arguments(output: shards[1], ["--shard", "1/3", "--restart"]))
        close(fd)
        #expect(locked.status != 0 && locked.stderr.contains("being written by another plinth eval"), "stderr: \(locked.stderr)")
        #expect(Self.contents(shards[1]) == shardBefore)
    }

    /// `--adapter` runs every record with the adapter (the LoRA fixture), which changes the
    /// values; the run description names it, so resuming with another adapter is refused; a bad
    /// adapter fails before the output is touched.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func adaptersChangeTheValuesAndAreRecorded() throws {
        let reference = try #require(Self.reference)
        let adapter = Self.repository.appendingPathComponent("Tests/PlinthRuntimeTests/Fixtures/lora/peft-r2").path
        let out = Self.path("adapter.jsonl")
        let run = try CLI.runWithModel(Self.arguments(output: out, ["--shard", "0/2", "--adapter", adapter]))
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let info = Self.contents(out + ".run.json")
        #expect(info.contains("peft-r2 sha256:"))
        func values(_ text: String) -> [Int: String] {
            var out: [Int: String] = [:]
            for line in text.split(separator: "\n") {
                guard let r = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let n = r["line"] as? Int else { continue }
                out[n] = r["value"].map { "\($0)" } ?? "error"
            }
            return out
        }
        let adapted = values(Self.contents(out)), base = values(reference.output)
        #expect(!adapted.isEmpty && adapted.count < base.count)
        #expect(adapted.contains { base[$0.key] != $0.value }, "the adapter should change some values")
        let other = try CLI.runWithModel(Self.arguments(output: out, ["--shard", "0/2"]))
        #expect(other.status != 0 && other.stderr.contains("different adapter"), "stderr: \(other.stderr)")
        let bad = try CLI.runWithModel(Self.arguments(output: Self.path("bad-adapter.jsonl"), ["--adapter", "/nonexistent/lora"]))
        #expect(bad.status != 0 && bad.stderr.contains("/nonexistent/lora"), "stderr: \(bad.stderr)")
        #expect(!FileManager.default.fileExists(atPath: Self.path("bad-adapter.jsonl")))
    }

    /// The summary of a resumed run is the whole output's; a run on an input that changed since
    /// it started is refused; report never writes its summary over the run's own files; a shard
    /// cut after it finished is not merged; a labelled record that failed counts against
    /// accuracy; a misspelt --field, which fails every record, fails the run.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func summariesCoverTheWholeOutputAndDamageIsRefused() throws {
        let reference = try #require(Self.reference)
        let referencePath = Self.path("reference.jsonl")
        let lines = reference.output.split(separator: "\n").map { String($0) + "\n" }
        let runInfo = Self.contents(referencePath + ".run.json")
        #expect(runInfo.contains(#""records" : 24"#) && runInfo.contains("inputSHA256"), "\(runInfo)")
        func write(_ text: String, _ path: String) throws { try text.write(toFile: path, atomically: true, encoding: .utf8) }
        func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }

        // Resumed after 10 records: the summary counts all 24.
        let resumed = Self.path("resumed.jsonl"), summary = Self.path("resumed-summary.json")
        try write(lines.prefix(10).joined(), resumed)
        try write(runInfo.replacingOccurrences(of: #""finished" : true"#, with: #""finished" : false"#), resumed + ".run.json")
        let r = try CLI.runWithModel(Self.arguments(output: resumed, ["--summary", summary]))
        #expect(r.status == 0 && r.stderr.contains("this run: 14 records after line"), "stderr: \(r.stderr)")
        #expect(Self.contents(resumed) == reference.output)
        let whole = json(Self.contents(summary))
        #expect(whole["records"] as? Int == 24 && whole["values"] as? Int == 20, "\(whole)")

        // The input changed after the run began: refused, the output untouched.
        let copy = Self.path("changing-input.jsonl"), changing = Self.path("changing.jsonl")
        try write(Self.contents(Self.input), copy)
        let args = Self.arguments(output: changing, ["--shard", "0/6"]).map { $0 == Self.input ? copy : $0 }
        #expect(try CLI.runWithModel(args).status == 0)
        try write(Self.contents(copy) + #"{"id": "new", "text": "A new clause."}"# + "\n", copy)
        let before = Self.contents(changing)
        let again = try CLI.runWithModel(args)
        #expect(again.status != 0 && again.stderr.contains("input file's contents"), "stderr: \(again.stderr)")
        #expect(Self.contents(changing) == before)

        // report --summary over the run's description or timings is refused; they stay.
        for target in [referencePath + ".run.json", referencePath + ".timings.jsonl"] {
            let kept = Self.contents(target)
            let report = try CLI.run(["eval", "report", referencePath, "--summary", target])
            #expect(report.status != 0 && report.stderr.contains("writing it would destroy"), "stderr: \(report.stderr)")
            #expect(Self.contents(target) == kept)
        }

        // A summary may go to a stream (written in one go): /dev/stdout.
        let toStdout = try CLI.run(["eval", "report", referencePath, "--summary", "/dev/stdout"])
        #expect(toStdout.status == 0 && toStdout.stdout.contains(#""repeatedIDs""#), "\(toStdout.stdout)\(toStdout.stderr)")

        // Two shards made from the reference merge to it; one cut after it finished does not.
        var shards: [String] = []
        let timings = Self.contents(referencePath + ".timings.jsonl").split(separator: "\n").map { String($0) + "\n" }
        for k in 0..<2 {
            let path = Self.path("cut-shard-\(k).jsonl")
            func inShard(_ line: String) -> Bool { ((json(line)["line"] as? Int ?? 0) - 1) % 2 == k }
            let mine = lines.filter(inShard)
            try write(mine.joined(), path)
            try write(timings.filter(inShard).joined(), path + ".timings.jsonl")
            var info = json(runInfo)
            info["shard"] = "\(k)/2"
            info["records"] = mine.count
            try JSONSerialization.data(withJSONObject: info).write(to: URL(fileURLWithPath: path + ".run.json"))
            shards.append(path)
        }
        let merged = Self.path("cut-merged.jsonl")
        let m = try CLI.run(["eval", "merge", merged] + shards)
        #expect(m.status == 0 && Self.contents(merged) == reference.output, "stderr: \(m.stderr)")
        try write(Self.contents(shards[1]).split(separator: "\n").dropLast().map { $0 + "\n" }.joined(), shards[1])
        let cut = try CLI.run(["eval", "merge", Self.path("cut-merged-2.jsonl")] + shards)
        #expect(cut.status != 0 && cut.stderr.contains("cut or edited"), "stderr: \(cut.stderr)")

        // The long record (an inputTooLong error) with a label: 21 labelled records, one "(error)".
        let labelled = Self.path("labelled.jsonl")
        try write(lines.map { $0.contains(#""id":"long""#) ? $0.replacingOccurrences(of: "}}\n", with: #"},"labels":{"effectDirection":"increase"}}"# + "\n") : $0 }.joined(), labelled)
        try write(runInfo, labelled + ".run.json")
        let labelledSummary = Self.path("labelled-summary.json")
        let report = try CLI.run(["eval", "report", labelled, "--summary", labelledSummary])
        #expect(report.status == 0, "stderr: \(report.stderr)")
        let label = (json(Self.contents(labelledSummary))["labels"] as? [String: Any])?["effectDirection"] as? [String: Any]
        #expect(label?["total"] as? Int == 21, "\(String(describing: label))")
        #expect(((label?["confusion"] as? [String: Any])?["increase"] as? [String: Int])?["(error)"] == 1, "\(String(describing: label))")

        // A field no record has: every record fails, and so does the run; a label the schema lacks is said.
        let misspelt = try CLI.runWithModel(Self.arguments(output: Self.path("misspelt.jsonl"), ["--field", "txet", "--shard", "0/6", "--label", "nosuch"]))
        #expect(misspelt.status != 0 && misspelt.stderr.contains(#"no record has the field "txet""#), "stderr: \(misspelt.stderr)")
        #expect(misspelt.stderr.contains(#"--label nosuch: the schema has no property"#), "stderr: \(misspelt.stderr)")
    }
}
