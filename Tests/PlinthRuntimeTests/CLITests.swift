import Foundation
import PlinthRuntime
import Testing

/// The `plinth` command run as a subprocess: its help, its errors (non-zero exit, message on
/// stderr, nothing on stdout) and, with the default model, deterministic generation.
@Suite(.serialized)
struct CLITests {
    /// The `plinth` executable built next to the test bundle (`.build/<triple>/<config>/plinth`).
    static let binary: URL? = {
        let url = Bundle.module.bundleURL.deletingLastPathComponent().appendingPathComponent("plinth")
        return FileManager.default.isExecutableFile(atPath: url.path) ? url : nil
    }()

    static let hasBinary = binary != nil
    static let noBinaryReason: Comment = "the plinth executable is not built next to the tests (build the `plinth` product with the same scratch path)"

    /// A `PLINTH_HOME` holding the default model as a verified catalog entry (a hard link to, or
    /// copy of, the file TestModels found, plus the sha256 stamp `plinth models fetch` writes),
    /// so that `-m SmolLM2-135M-Instruct --no-fetch` finds it without any network. Nil when the
    /// model is absent or its hash is wrong. The folder is reused across runs (links cost no space).
    static let modelHome: URL? = {
        guard let source = TestModels.path(TestModels.smolLM2) else { return nil }
        let entry = ModelCatalog.defaultModel
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-cli-tests-home")
        let store = ModelStore(home: home)
        if store.isFetched(entry) { return home }
        guard (try? SHA256.hash(fileAt: source)) == entry.sha256 else { return nil }
        let fm = FileManager.default
        do {
            try fm.createDirectory(at: store.directory(for: entry), withIntermediateDirectories: true)
            let dest = store.path(for: entry)
            try? fm.removeItem(at: dest)
            do { try fm.linkItem(at: source, to: dest) } catch { try fm.copyItem(at: source, to: dest) }
            try (entry.sha256 + "\n").write(to: dest.appendingPathExtension("sha256"), atomically: true, encoding: .utf8)
        } catch {
            return nil
        }
        return store.isFetched(entry) ? home : nil
    }()

    static let hasModel = hasBinary && modelHome != nil
    static let noModelReason: Comment = "needs the plinth executable and the default model SmolLM2-135M-Instruct (run `plinth models fetch`)"

    struct Outcome {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `plinth` with `arguments` (and `input` on stdin); stdout and stderr go to files (no
    /// pipe can fill up).
    /// `stdout` names a file to write standard output to instead (such as /dev/full); it is
    /// not read back.
    static func run(_ arguments: [String], home: URL? = nil, input: String? = nil, environment: [String: String] = [:],
                    stdout: String? = nil, inputBytes: [UInt8]? = nil) throws -> Outcome {
        let input = inputBytes.map { Data($0) } ?? input.map { Data($0.utf8) }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("stdout"), err = dir.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        let outHandle = try FileHandle(forWritingTo: stdout.map { URL(fileURLWithPath: $0) } ?? out)
        let errHandle = try FileHandle(forWritingTo: err)
        let p = Process()
        p.executableURL = binary!
        p.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        // An empty home unless a test needs the model: nothing can be found, so nothing is fetched.
        env["PLINTH_HOME"] = (home ?? dir.appendingPathComponent("home")).path
        // Fetching must never start from a test: a missing python stops it at once.
        env["PLINTH_PYTHON"] = "plinth-test-no-such-python"
        env.merge(environment) { $1 }
        p.environment = env
        p.standardOutput = outHandle
        p.standardError = errHandle
        if let input {
            let inURL = dir.appendingPathComponent("stdin")
            try input.write(to: inURL)
            p.standardInput = try FileHandle(forReadingFrom: inURL)
        } else {
            p.standardInput = FileHandle.nullDevice
        }
        try p.run()
        p.waitUntilExit()
        try outHandle.close()
        try errHandle.close()
        return Outcome(status: p.terminationStatus,
                       stdout: String(decoding: try Data(contentsOf: out), as: UTF8.self),
                       stderr: String(decoding: try Data(contentsOf: err), as: UTF8.self))
    }

    static func runWithModel(_ arguments: [String], input: String? = nil, environment: [String: String] = [:],
                             stdout: String? = nil, inputBytes: [UInt8]? = nil) throws -> Outcome {
        try run(arguments + ["-m", TestModels.smolLM2, "--no-fetch"], home: modelHome!, input: input, environment: environment,
                stdout: stdout, inputBytes: inputBytes)
    }

    /// `plinth eval` with the default model of one record, `text`, under a one-integer schema, in
    /// a scratch folder removed after; and whether it wrote its output.
    static func evalOneRecord(_ text: String, _ arguments: [String], environment: [String: String] = [:]) throws
        -> (outcome: Outcome, wroteOutput: Bool)
    {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.jsonl"), output = dir.appendingPathComponent("out.jsonl")
        let schema = dir.appendingPathComponent("schema.json")
        try JSONSerialization.data(withJSONObject: ["id": "a", "text": text]).write(to: input)
        try Data(#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#.utf8).write(to: schema)
        let outcome = try runWithModel(["eval", "--schema", schema.path, "--input", input.path, "--output", output.path] + arguments,
                                       environment: environment)
        return (outcome, FileManager.default.fileExists(atPath: output.path))
    }

    // MARK: Help

    @Test(.enabled(if: hasBinary, noBinaryReason), arguments: [
        (["generate"], ["--model", "--no-fetch", "--prompt", "--prompt-file", "--chat", "--system", "--max-tokens",
                        "--temperature", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--seed", "--greedy",
                        "--context", "--threads", "--backend", "--quiet"]),
        (["tokenize"], ["--model", "--no-fetch", "--no-parse-special", "--add-special", "--ids-only", "<text>"]),
        (["perplexity"], ["--model", "--file", "--ctx-size", "--chunks", "--batch-size", "--threads", "--backend", "--kl-divergence-base",
                           "--kl-divergence", "llama-perplexity"]),
        (["quantize"], ["--model", "--output", "--type", "--keep", "PATTERN=TYPE", "llama-quantize"]),
        (["models"], ["list", "fetch", "path"]),
        (["models", "fetch"], ["--all", "<names>"]),
        (["models", "path"], ["<name>"]),
        (["respond"], ["--model", "--no-fetch", "--instructions", "--schema", "--stream", "--greedy", "--temperature",
                       "--top-k", "--top-p", "--seed", "--max-tokens", "--no-schema-in-prompt", "--backend", "--quiet", "<prompt>"]),
        (["eval"], ["run", "merge", "report"]),
        (["eval", "run"], ["--model", "--schema", "--instructions", "--instructions-file", "--input", "--output", "--field",
                           "--id-field", "--prompt-template", "--max-tokens", "--parallel", "--label", "--shard", "--greedy",
                           "--temperature", "--seed", "--backend", "--restart", "--summary", "--quiet"]),
        (["eval", "merge"], ["<output>", "<shards>", "--allow-partial"]),
        (["serve"], ["--model", "--host", "--port", "--api-key", "--api-key-file", "--parallel", "--max-queue", "--ctx",
                     "--max-body", "--timeout", "--schema-time-limit", "--backend", "/v1/chat/completions", "/v1/completions", "/metrics", "SIGTERM"]),
        (["chat"], ["--model", "--instructions", "--greedy", "--temperature", "--seed", "--max-tokens", "--backend",
                    "/reset", "/transcript", "/save", "Ctrl-C"]),
        ([], ["generate", "respond", "chat", "serve", "tokenize", "models", "PLINTH_HOME"]),
    ])
    func helpMentionsEveryOption(command: [String], mentions: [String]) throws {
        let r = try Self.run(command + ["--help"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        for word in mentions {
            #expect(r.stdout.contains(word), "`plinth \(command.joined(separator: " ")) --help` does not mention \(word)")
        }
    }

    // MARK: Errors

    /// Every command that runs a model takes --backend, and refuses a name that is none.
    @Test(.enabled(if: hasBinary, noBinaryReason), arguments: [
        ["generate", "-p", "hi"], ["bench"], ["perplexity", "-f", "text.txt"], ["respond", "hi"], ["chat"],
        ["eval", "--schema", "s.json", "--input", "in.jsonl", "--output", "out.jsonl"], ["serve"], ["bench-session"],
        ["bench-concurrent"],
    ])
    func unknownBackendIsRefused(command: [String]) throws {
        let r = try Self.run(command + ["--backend", "metal"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("--backend must be auto, cpu or cuda, not 'metal'"), "stderr: \(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    /// Without a GPU, `--backend cuda` stops a session command and eval with the reason, and
    /// eval touches no output.
    @Test(.enabled(if: hasModel, noModelReason), .enabled(if: Backend.cudaUnavailableReason != nil, "a CUDA GPU is present"))
    func cudaWithoutAGPUIsAnError() throws {
        let respond = try Self.runWithModel(["respond", "--backend", "cuda", "hi"])
        #expect(respond.status != 0)
        #expect(respond.stderr.contains("the CUDA backend is unavailable"), "stderr: \(respond.stderr)")
        #expect(respond.stdout.isEmpty)
        let (eval, wrote) = try Self.evalOneRecord("hello", ["--backend", "cuda"])
        #expect(eval.status != 0)
        #expect(eval.stderr.contains("the CUDA backend is unavailable"), "stderr: \(eval.stderr)")
        #expect(!wrote)
    }

    @Test(.enabled(if: hasBinary, noBinaryReason))
    func missingModelFileFails() throws {
        let r = try Self.run(["generate", "-m", "/nonexistent.gguf", "-p", "hi"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("not found"))
        #expect(r.stderr.contains("/nonexistent.gguf"))
        #expect(r.stdout.isEmpty)
    }

    @Test(.enabled(if: hasBinary, noBinaryReason))
    func serveRefusesBadOptionsBeforeListening() throws {
        for (args, message) in [(["serve", "-m", "no-such-model"], "no such model: no-such-model"),
                                (["serve", "--port", "70000"], "--port must be in 0...65535"),
                                (["serve", "--api-key", "a", "--api-key-file", "/k"], "not both"),
                                (["serve", "--api-key-file", "/nonexistent/key"], "can't read --api-key-file")] {
            let r = try Self.run(args)
            #expect(r.status != 0)
            #expect(r.stderr.contains(message), "\(args): \(r.stderr)")
            #expect(!r.stdout.contains("listening"))
        }
    }

    @Test(.enabled(if: hasBinary, noBinaryReason))
    func unknownModelNameFails() throws {
        let r = try Self.run(["generate", "-m", "no-such-model", "-p", "hi"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("unknown model 'no-such-model'"))
        #expect(r.stdout.isEmpty)
    }

    @Test(.enabled(if: hasBinary, noBinaryReason))
    func unfetchedCatalogModelWithNoFetchFails() throws {
        // The child's home is empty and --no-fetch forbids downloading.
        let r = try Self.run(["generate", "-m", "smollm2", "--no-fetch", "-p", "hi"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("plinth models fetch SmolLM2-135M-Instruct"))
        #expect(r.stdout.isEmpty)
    }

    /// Every command that opens a model file says which file is wrong, and how.
    @Test(.enabled(if: hasBinary, noBinaryReason), arguments: [
        ["generate", "-p", "hi"], ["respond", "hi"], ["bench", "-p", "8", "-n", "8", "-r", "1"], ["tokenize", "hi"],
        ["perplexity", "-f", #filePath], ["imatrix", "-f", #filePath, "-o", "/tmp/never-written.dat"],
        ["quantize", "--type", "q8_0", "-o", "/tmp/never-written.gguf"],
    ])
    func wrongMagicFails(command: [String]) throws {
        var bytes = Array("GGML".utf8) + [3, 0, 0, 0]
        bytes += [UInt8](repeating: 0, count: 56)
        try withTemporaryFile(bytes) { url in
            let r = try Self.run(command + ["-m", url.path])
            #expect(r.status != 0)
            #expect(r.stderr.contains("\"GGML\""), "stderr: \(r.stderr)")
            #expect(r.stderr.contains("not a GGUF file"))
            #expect(r.stderr.contains(url.path), "the message does not name the file: \(r.stderr)")
            #expect(r.stdout.isEmpty)
        }
    }

    @Test(.enabled(if: hasBinary, noBinaryReason))
    func invalidUTF8PromptFileFails() throws {
        try withTemporaryFile([0x66, 0xff]) { url in
            let r = try Self.run(["generate", "-m", "/nonexistent.gguf", "--prompt-file", url.path])
            #expect(r.status != 0)
            #expect(r.stderr.contains("UTF-8"))
            #expect(r.stderr.contains("byte 1"))
            // The prompt is checked before the model is looked for.
            #expect(!r.stderr.contains("not found"))
            #expect(r.stdout.isEmpty)
        }
    }

    @Test(.enabled(if: hasBinary, noBinaryReason))
    func unreadablePromptFileFails() throws {
        let r = try Self.run(["generate", "--prompt-file", "/nonexistent/prompt.txt"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("/nonexistent/prompt.txt"))
        #expect(r.stdout.isEmpty)
    }

    @Test(.enabled(if: hasBinary, noBinaryReason), arguments: [
        (["generate"], "--prompt"),
        (["generate", "-p", "hi", "--prompt-file", "x"], "--prompt"),
        (["generate", "-p", "hi", "--top-p", "0"], "--top-p"),
        (["generate", "-p", "hi", "--temperature", "-1"], "--temperature"),
        (["generate", "-p", "hi", "--min-p", "2"], "--min-p"),
        (["generate", "-p", "hi", "--context", "0"], "--context"),
        (["generate", "-p", "hi", "--max-tokens", "-3"], "--max-tokens"),
        (["generate", "-p", "hi", "--seed", "x"], "--seed"),
        (["generate", "-p", "hi", "--repeat-penalty", "inf"], "--repeat-penalty"),
        (["generate", "-p", "hi", "--adapter", "a", "--adapter", "b"], "--adapter"),
        (["generate", "-p", "hi", "--adapter-scale", "2"], "--adapter-scale"),
        (["generate", "-p", "hi", "--adapter", "a", "--adapter-scale", "nan"], "--adapter-scale"),
        (["respond", "hi", "--greedy", "--seed", "1"], "--greedy"),
        (["respond", "hi", "--top-k", "3", "--top-p", "0.5"], "--top-k"),
        (["respond", "hi", "--max-tokens", "0"], "--max-tokens"),
        (["respond"], "<prompt>"),
        (["models", "fetch", "--all", "qwen"], "--all"),
    ])
    func invalidOptionsFail(args: [String], naming option: String) throws {
        let r = try Self.run(args)
        #expect(r.status != 0)
        #expect(r.stderr.contains(option), "stderr: \(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    // MARK: With the default model

    @Test(.enabled(if: hasModel, noModelReason))
    func greedyGenerationIsRightAndRepeatable() throws {
        let args = ["generate", "--greedy", "-n", "8", "-p", "The capital of France is"]
        let a = try Self.runWithModel(args)
        #expect(a.status == 0, "stderr: \(a.stderr)")
        #expect(!a.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        #expect(a.stdout.contains("Paris"), "stdout: \(a.stdout)")
        // Timings go to stderr, never into the text.
        #expect(a.stderr.contains("generated:"))
        #expect(!a.stdout.contains("tok/s"))
        let b = try Self.runWithModel(args)
        #expect(b.status == 0)
        #expect(a.stdout == b.stdout)
        // --temperature 0 means greedy.
        let z = try Self.runWithModel(["generate", "--temperature", "0", "-n", "8", "-p", "The capital of France is"])
        #expect(z.status == 0)
        #expect(z.stdout == a.stdout)
    }

    @Test(.enabled(if: hasModel, noModelReason))
    func seededSamplingIsRepeatable() throws {
        let args = ["generate", "--seed", "7", "--temperature", "0.9", "-n", "12", "--quiet", "-p", "Once upon a time"]
        let a = try Self.runWithModel(args)
        let b = try Self.runWithModel(args)
        #expect(a.status == 0, "stderr: \(a.stderr)")
        #expect(b.status == 0)
        #expect(!a.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        #expect(a.stdout == b.stdout)
        // --quiet leaves stderr free of timings.
        #expect(!a.stderr.contains("tok/s"))
    }

    @Test(.enabled(if: hasModel, noModelReason))
    func chatWithSystemMessageWorks() throws {
        // What a 135M model answers under "You are terse." is its own affair (llama.cpp gives
        // "Alles mores, les pays Basque."): check that the chat path runs and stays clean.
        let terse = try Self.runWithModel(["generate", "--chat", "--system", "You are terse.", "--greedy", "-n", "16",
                                           "-p", "What is the capital of France?"])
        #expect(terse.status == 0, "stderr: \(terse.stderr)")
        #expect(!terse.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        // The template's markers are not echoed into the answer.
        #expect(!terse.stdout.contains("<|im_start|>") && !terse.stdout.contains("<|im_end|>"))
        #expect(terse.stderr.contains("stop: endOfGeneration") || terse.stderr.contains("stop: maxTokens"))

        // With a helpful system message the model answers (as it does under llama.cpp).
        let helpful = try Self.runWithModel(["generate", "--system", "You are a helpful assistant.", "--greedy",
                                             "-n", "16", "-p", "What is the capital of France?"])
        #expect(helpful.status == 0, "stderr: \(helpful.stderr)")
        #expect(helpful.stdout.contains("Paris"), "stdout: \(helpful.stdout)")
        #expect(helpful.stderr.contains("stop: endOfGeneration"))
    }

    @Test(.enabled(if: hasModel, noModelReason))
    func promptLongerThanTheContextFails() throws {
        let prompt = String(repeating: "The quick brown fox jumps over the lazy dog. ", count: 4)
        let r = try Self.runWithModel(["generate", "--context", "16", "--greedy", "-n", "4", "-p", prompt])
        #expect(r.status != 0)
        #expect(r.stderr.contains("context holds 16 tokens"), "stderr: \(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    /// A batched benchmark whose cache outgrows the machine's memory is refused before it runs
    /// (it swapped, or was killed).
    @Test(.enabled(if: hasModel, noModelReason))
    func benchRefusesACacheLargerThanMemory() throws {
        let r = try Self.runWithModel(["bench", "--backend", "cpu", "--parallel", "100000000", "-p", "16", "-n", "4", "-r", "1"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("GiB of KV cache (100000000 sequences of 20 positions), more than this machine's"), "stderr: \(r.stderr)")
        #expect(r.stdout.isEmpty)
        // Lengths whose sum overflows are too long, not a trap.
        for parallel in [[], ["--parallel", "1"]] {
            let huge = try Self.runWithModel(["bench", "--backend", "cpu", "-p", "\(Int.max)", "-n", "1", "-r", "1"] + parallel)
            #expect(huge.status != 0 && huge.stderr.contains("model's context"), "stderr: \(huge.stderr)")
        }
    }

    /// llama-bench's lists, pg tests and depths; llama-batched-bench's combinations.
    @Test(.enabled(if: hasModel, noModelReason))
    func benchRunsEveryCombination() throws {
        func results(_ arguments: [String]) throws -> (object: [String: Any], tests: [[String: Any]]) {
            let r = try Self.runWithModel(["bench", "--backend", "cpu", "-r", "1", "--no-warmup", "--json"] + arguments)
            #expect(r.status == 0, "stderr: \(r.stderr)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout)")
            let tests = try #require(object["results"] as? [[String: Any]])
            for t in tests { #expect((t["median_ts"] as? Double ?? 0) > 0, "\(t)") }
            return (object, tests)
        }
        let single = try results(["-p", "8,16", "-n", "4", "-pg", "8,4", "--depth", "0,8"])
        #expect(single.tests.map { $0["test"] as? String ?? "" }
            == ["pp8", "pp8 @ d8", "pp16", "pp16 @ d8", "tg4", "tg4 @ d8", "pp8+tg4", "pp8+tg4 @ d8"])
        #expect(single.tests.map { $0["n_depth"] as? Int ?? -1 } == [0, 8, 0, 8, 0, 8, 0, 8])
        #expect(single.tests.last?["kind"] as? String == "pg")
        // The deepest test: 16 prompt tokens after 8.
        #expect(single.object["context"] as? Int ?? 0 >= 24)
        let batched = try results(["-p", "8", "-n", "2", "-n", "4", "--parallel", "1,2"])
        #expect(batched.tests.map { $0["test"] as? String ?? "" } == ["pp8x1", "tg2x1", "pp8x1", "tg4x1", "pp8x2", "tg2x2", "pp8x2", "tg4x2"])
        #expect(batched.object["parallel"] as? Int == 2)
        for (arguments, message) in [(["--pg", "8"], "--pg takes P,N"), (["-p", "8,x"], "is not a comma-separated list"),
                                     (["--parallel", "2", "-d", "4"], "--depth is for single-sequence tests"),
                                     (["--parallel", "2", "--pg", "4,4"], "--pg is a single-sequence test"),
                                     (["-p", "0", "-n", "0,0"], "nothing to measure")] {
            let r = try Self.runWithModel(["bench"] + arguments)
            #expect(r.status != 0 && r.stderr.contains(message), "\(arguments): \(r.stderr)")
        }
    }

    @Test(.enabled(if: hasModel, noModelReason))
    func tokenizePrintsIds() throws {
        let r = try Self.runWithModel(["tokenize", "--ids-only", "Hello world"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        let ids = r.stdout.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
        #expect(!ids.isEmpty)
        #expect(ids.count == r.stdout.split(whereSeparator: \.isWhitespace).count, "stdout: \(r.stdout)")
        // The same ids as the library's tokenizer.
        let tokenizer = try Tokenizer(gguf: GGUFFile(url: TestModels.path(TestModels.smolLM2)!))
        #expect(ids == tokenizer.encode("Hello world", addSpecial: false, parseSpecial: true))
        #expect(tokenizer.decode(ids) == "Hello world")

        // Without --ids-only: one line per token, then a count on stderr.
        let full = try Self.runWithModel(["tokenize", "Hello world"])
        #expect(full.status == 0)
        #expect(full.stdout.split(separator: "\n").count == ids.count)
        #expect(full.stderr.contains("\(ids.count) tokens"))

        // A piece that is part of a character shows its bytes (llama-tokenize's way), not U+FFFD.
        let emoji = try Self.runWithModel(["tokenize", "😀"])
        let emojiIDs = tokenizer.encode("😀", addSpecial: false, parseSpecial: true)
        #expect(emojiIDs.count > 1 && emoji.stdout.split(separator: "\n").count == emojiIDs.count, "\(emoji.stdout)")
        #expect(emoji.stdout.contains(#"\xf0"#) && !emoji.stdout.contains("\u{FFFD}"), "\(emoji.stdout)")
        // Text from a file or standard input (past an argument's 128 KiB), or after `--`.
        let long = String(repeating: "Hello world. ", count: 20_000)
        let piped = try Self.runWithModel(["tokenize", "--ids-only", "-f", "-"], input: long)
        #expect(piped.stdout.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
            == tokenizer.encode(long, addSpecial: false, parseSpecial: true), "stderr: \(piped.stderr)")
        let dashed = try Self.run(["tokenize", "-m", TestModels.smolLM2, "--no-fetch", "--ids-only", "--", "-42"], home: Self.modelHome!)
        #expect(dashed.status == 0 && dashed.stdout.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
            == tokenizer.encode("-42", addSpecial: false, parseSpecial: true), "stderr: \(dashed.stderr)")
        for arguments in [["tokenize"], ["tokenize", "hi", "-f", "-"], ["tokenize", "-f", "/nonexistent/x.txt"]] {
            let r = try Self.runWithModel(arguments)
            #expect(r.status != 0 && r.stdout.isEmpty && !r.stderr.isEmpty, "\(arguments)")
        }
    }

    @Test(.enabled(if: hasModel, noModelReason))
    func modelsListAndPathSeeTheCache() throws {
        let list = try Self.run(["models", "list"], home: Self.modelHome!)
        #expect(list.status == 0)
        #expect(list.stdout.contains("SmolLM2-135M-Instruct (default)"))
        #expect(list.stdout.contains("cached at"))
        let path = try Self.run(["models", "path", "smollm2"], home: Self.modelHome!)
        #expect(path.status == 0)
        #expect(path.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            == ModelStore(home: Self.modelHome!).path(for: ModelCatalog.defaultModel).path)
        // Catalog names only: a path is not echoed back as if it were a cached model.
        for command in [["models", "path", "/tmp"], ["models", "fetch", "./model.gguf"]] {
            let r = try Self.run(command, home: Self.modelHome!)
            #expect(r.status != 0 && r.stderr.contains("takes catalog names"), "\(command): \(r.stderr)")
        }
    }
}

/// `plinth respond` and `plinth chat`: the session API from the command line, with the default model.
@Suite(.serialized)
struct SessionCLITests {
    typealias CLI = CLITests

    static func schemaFile(_ json: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-schema-\(UUID().uuidString).json")
        try Data(json.utf8).write(to: url)
        return url
    }

    static let weatherSchema = """
        {"type": "object", "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 20},
            "sky": {"enum": ["sunny", "rainy", "cloudy"]},
            "celsius": {"type": "integer", "minimum": -30, "maximum": 45}},
         "required": ["city", "sky", "celsius"], "additionalProperties": false}
        """

    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func respondStreamsTheSameTextItPrints() throws {
        let args = ["respond", "--greedy", "-n", "24", "--instructions", "You are a helpful assistant.",
                    "What is the capital of France?"]
        let plain = try CLI.runWithModel(args)
        #expect(plain.status == 0, "stderr: \(plain.stderr)")
        #expect(plain.stdout.contains("Paris"), "stdout: \(plain.stdout)")
        #expect(plain.stderr.contains("generated:") && plain.stderr.contains("tok/s"))
        let streamed = try CLI.runWithModel(args + ["--stream"])
        #expect(streamed.status == 0, "stderr: \(streamed.stderr)")
        #expect(streamed.stdout == plain.stdout)
    }

    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func respondWithASchemaPrintsExactlyTheJSONValue() throws {
        let schema = try Self.schemaFile(Self.weatherSchema)
        defer { try? FileManager.default.removeItem(at: schema) }
        for seed in ["1", "2", "3"] {
            let args = ["respond", "--schema", schema.path, "--seed", seed, "--temperature", "1.0", "--quiet",
                        "Describe the weather in a city."]
            let r = try CLI.runWithModel(args)
            #expect(r.status == 0, "stderr: \(r.stderr)")
            // Nothing but the value (and the final newline) on stdout.
            let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any],
                                      "stdout: \(r.stdout)")
            #expect(Set(object.keys) == ["city", "sky", "celsius"])
            let city = try #require(object["city"] as? String)
            #expect((1...20).contains(city.count))
            #expect(["sunny", "rainy", "cloudy"].contains(object["sky"] as? String))
            let celsius = try #require(object["celsius"] as? Int)
            #expect((-30...45).contains(celsius))
            // Streaming prints the same bytes, as they are written.
            let streamed = try CLI.runWithModel(args + ["--stream"])
            #expect(streamed.status == 0, "stderr: \(streamed.stderr)")
            #expect(streamed.stdout == r.stdout)
        }
    }

    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func respondRejectsBadSchemaFiles() throws {
        let missing = try CLI.runWithModel(["respond", "--schema", "/nonexistent/schema.json", "hi"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("/nonexistent/schema.json"))
        #expect(missing.stdout.isEmpty)

        let notJSON = try Self.schemaFile("{\"type\": ")
        defer { try? FileManager.default.removeItem(at: notJSON) }
        let bad = try CLI.runWithModel(["respond", "--schema", notJSON.path, "hi"])
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("not a JSON Schema"), "stderr: \(bad.stderr)")
        #expect(bad.stdout.isEmpty)

        // A keyword the decoder can't enforce is named, with where it is, and nothing is generated.
        let unenforced = try Self.schemaFile(#"{"type": "array", "items": {"type": "integer"}, "uniqueItems": true}"#)
        defer { try? FileManager.default.removeItem(at: unenforced) }
        let refused = try CLI.runWithModel(["respond", "--schema", unenforced.path, "hi"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("uniqueItems"), "stderr: \(refused.stderr)")
        #expect(refused.stderr.contains(unenforced.path), "the error names the schema's file: \(refused.stderr)")
        #expect(refused.stdout.isEmpty)
    }

    /// A prompt of several lines (between two lines of three quotes, or pasted in a terminal,
    /// which marks pasted text) is one turn, and a line that starts with a path is a prompt.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func chatReadsPromptsOfSeveralLines() throws {
        let input = "\"\"\"\nLine one.\nLine two.\n\"\"\"\n\u{1B}[200~Pasted one.\nPasted two.\u{1B}[201~\n"
            + "/etc/hosts: what is this file?\n//reset please\n/transcript\n"
        let r = try CLI.runWithModel(["chat", "--greedy", "-n", "4"], input: input)
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stderr.split(separator: "\n").filter { $0.hasPrefix("(prompt:") }.count == 4, "stderr: \(r.stderr)")
        for prompt in ["Line one.\nLine two.", "Pasted one.\nPasted two.", "/etc/hosts: what is this file?", "/reset please"] {
            #expect(r.stdout.contains("(Prompt) " + prompt), "stdout: \(r.stdout)")
        }
        #expect(!r.stderr.contains("unknown command"))
    }

    /// Piped chat: a line that isn't UTF-8 is said and left out (not sent altered); prompts that
    /// fail make the exit status non-zero, with no blank lines for them; a standard output that
    /// can't be written ends the chat.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func chatSaysWhatFailed() throws {
        let bad = try CLI.runWithModel(["chat", "--greedy", "-n", "4", "--quiet"],
                                       inputBytes: Array("Hi ".utf8) + [0xFF, 0xFE] + Array("\nSay a word.\n".utf8))
        #expect(bad.status == 0 && bad.stderr.contains("not UTF-8") && !bad.stdout.isEmpty, "stderr: \(bad.stderr)")
        let full = try CLI.runWithModel(["chat", "-c", "20", "--quiet"], input: "Hello there, how are you?\nAgain\n")
        #expect(full.status != 0 && full.stderr.contains("2 of 2 prompts failed"), "stderr: \(full.stderr)")
        #expect(full.stdout.isEmpty)
        let closed = try CLI.runWithModel(["chat", "--greedy", "-n", "4", "--quiet"], input: "Hello\nAgain\n", stdout: "/dev/full")
        #expect(closed.status != 0 && closed.stderr.contains("cannot write standard output"), "stderr: \(closed.stderr)")
        #expect(closed.stderr.components(separatedBy: "cannot write standard output").count == 2, "the chat ends at the first: \(closed.stderr)")
    }

    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func chatKeepsTheConversationAndItsCommandsWork() throws {
        let saved = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-chat-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: saved) }
        let input = """
            What is the capital of France?
            And of Italy?
            /transcript
            /save \(saved.path)
            /reset
            /transcript
            /nonsense
            Hello
            """
        let r = try CLI.runWithModel(["chat", "--greedy", "-n", "16", "--instructions", "You are a helpful assistant."],
                                     input: input + "\n")
        #expect(r.status == 0, "stderr: \(r.stderr)")
        // Three replies, each followed by its speed; the second turn prefilled only what was new.
        let notes = r.stderr.split(separator: "\n").filter { $0.hasPrefix("(prompt:") }
        #expect(notes.count == 3, "stderr: \(r.stderr)")
        let cached = notes.compactMap { note -> Int? in
            guard let open = note.range(of: "tokens ("), let end = note.range(of: " cached") else { return nil }
            return Int(note[open.upperBound..<end.lowerBound])
        }
        #expect(cached.count == 3)
        if cached.count == 3 { #expect(cached[1] > 0) }
        // /transcript printed the first conversation once; after /reset it holds only the instructions.
        #expect(r.stdout.components(separatedBy: "(Prompt) What is the capital of France?").count == 2, "stdout: \(r.stdout)")
        #expect(r.stdout.contains("(Prompt) And of Italy?"))
        #expect(r.stdout.contains("(Instructions) You are a helpful assistant."))
        #expect(r.stderr.contains("unknown command /nonsense"))
        // /save wrote the transcript as JSON: instructions, then two prompts and two responses.
        let data = try Data(contentsOf: saved)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let entries = try #require(json["entries"] as? [[String: Any]])
        #expect(entries.compactMap { $0["type"] as? String } == ["instructions", "prompt", "response", "prompt", "response"])
        #expect(String(decoding: data, as: UTF8.self).contains("And of Italy?"))
    }

    /// quantize refuses, before it writes anything, an importance matrix that has no entry for
    /// any of the model's matrices (another model's), and an output that is a device.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func quantizeRefusesAnotherModelsImportanceMatrixAndADevice() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-quantize-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // A valid importance matrix whose one entry is named as no SmolLM2 matrix is.
        let sums = [Float](repeating: 1, count: 576), count: [Float] = [1]
        let imatrix = dir.appendingPathComponent("other.gguf")
        try GGUFWriter(metadata: [("general.type", .string("imatrix"))], tensors: [
            GGUFWriter.Tensor(name: "layers.0.attn_q.weight.in_sum2", dimensions: [576], type: .f32) { out in sums.withUnsafeBytes { out.copyMemory(from: $0) } },
            GGUFWriter.Tensor(name: "layers.0.attn_q.weight.counts", dimensions: [1], type: .f32) { out in count.withUnsafeBytes { out.copyMemory(from: $0) } },
        ]).write(to: imatrix)
        let out = dir.appendingPathComponent("out.gguf").path
        let r = try CLI.runWithModel(["quantize", "-o", out, "--type", "Q4_0", "--imatrix", imatrix.path])
        #expect(r.status != 0 && r.stderr.contains("has no entry for any matrix of this model"), "stderr: \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
        let device = try CLI.runWithModel(["quantize", "-o", "/dev/null", "--type", "Q8_0"])
        #expect(device.status != 0 && device.stderr.contains("not a regular file"), "stderr: \(device.stderr)")
    }

    /// `--adapter-scale 0` runs the base model, 1 the adapter as trained.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func theAdapterScaleSetsItsEffect() throws {
        let prompt = ["generate", "--greedy", "-n", "16", "-p", "Tag this: The mayor opened a new library."]
        let base = try CLI.runWithModel(prompt)
        let off = try CLI.runWithModel(prompt + ["--adapter", "content-tagger", "--adapter-scale", "0"])
        let on = try CLI.runWithModel(prompt + ["--adapter", "content-tagger"])
        #expect(base.status == 0 && off.status == 0 && on.status == 0, "\(off.stderr) \(on.stderr)")
        #expect(off.stdout == base.stdout)
        #expect(on.stdout != base.stdout)
    }

    /// `adapters merge` never writes over its adapter, named from the store (a PEFT folder's
    /// weights, a GGUF file) or given as a path.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func adaptersMergeNeverOverwritesItsAdapter() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-merge-\(UUID().uuidString)")
        let store = dir.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let tagger = ModelCatalogTests.packageRoot.appendingPathComponent("Adapters/content-tagger")
        try FileManager.default.copyItem(at: tagger.appendingPathComponent("peft"), to: store.appendingPathComponent("myad"))
        try FileManager.default.copyItem(at: tagger.appendingPathComponent("content-tagger.gguf"), to: store.appendingPathComponent("gad.gguf"))
        let targets = [("myad", store.appendingPathComponent("myad/adapter_model.safetensors")),
                       ("gad", store.appendingPathComponent("gad.gguf")),
                       (store.appendingPathComponent("gad.gguf").path, store.appendingPathComponent("gad.gguf"))]
        for (adapter, target) in targets {
            let before = try Data(contentsOf: target)
            let r = try CLI.runWithModel(["adapters", "merge", "--adapter", adapter, "-o", target.path],
                                         environment: ["PLINTH_ADAPTERS": store.path])
            #expect(r.status != 0 && r.stderr.contains("adapter"), "\(adapter): \(r.stderr)")
            #expect(try Data(contentsOf: target) == before, "\(adapter)")
        }
    }

    /// Results that can't be written (a full disk) are an error: a script must not read an
    /// exit status of 0 over lost output.
    @Test(.enabled(if: CLI.hasModel && FileManager.default.fileExists(atPath: "/dev/full"), CLI.noModelReason))
    func aFullStandardOutputIsAnError() throws {
        for arguments in [["tokenize", "hello"], ["generate", "--greedy", "-n", "64", "-p", "Count to a hundred."]] {
            let r = try CLI.runWithModel(arguments, stdout: "/dev/full")
            #expect(r.status != 0 && r.stderr.contains("cannot write standard output: No space left on device"),
                    "\(arguments[0]): \(r.stderr)")
        }
        let list = try CLI.run(["models", "list"], stdout: "/dev/full")
        #expect(list.status != 0 && list.stderr.contains("cannot write standard output"), "\(list.stderr)")
    }

    /// `-c/--context` sets the session commands' context; a response that fills it keeps what
    /// it wrote (printed, streamed or not), then says the context is full and how to grow it.
    @Test(.enabled(if: CLI.hasModel, CLI.noModelReason))
    func aResponseThatFillsTheContextKeepsItsText() throws {
        let prompt = "Tell me a long story about a dragon"
        for stream in [false, true] {
            let r = try CLI.runWithModel(["respond", "-c", "64", "--greedy", prompt] + (stream ? ["--stream"] : []))
            #expect(r.status != 0 && r.stderr.contains("context of 64 tokens") && r.stderr.contains("-c sets a larger context"), "stderr: \(r.stderr)")
            #expect(r.stdout.count > 40 && r.stdout.hasSuffix("\n"), "stdout: \(r.stdout)")
        }
        let whole = try CLI.runWithModel(["respond", "-c", "2048", "--greedy", "-n", "8", prompt])
        #expect(whole.status == 0, "stderr: \(whole.stderr)")
        let chat = try CLI.runWithModel(["chat", "-c", "96", "--greedy"], input: prompt + "\n")
        #expect(chat.stderr.contains("/reset starts a new one"), "stderr: \(chat.stderr)")
        let tiny = try CLI.runWithModel(["respond", "-c", "8", prompt])
        #expect(tiny.status != 0 && tiny.stderr.contains("--context must be at least 16"), "stderr: \(tiny.stderr)")
    }
}
