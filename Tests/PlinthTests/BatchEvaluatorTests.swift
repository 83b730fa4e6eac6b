import Foundation
import FoundationModels
@testable import Plinth
import PlinthGrammar
import PlinthJSON
import Testing

@Generable
struct EvaluatedClause: Equatable {
    @Guide(description: "Who the clause affects", .anyOf(["older adults", "students", "tenants", "veterans", "workers", "other"]))
    var targetGroup: String
    var effectDirection: Direction
    @Guide(description: "Attributes that may stand in for protected traits", .maximumCount(3))
    var proxyVariables: [String]

    @Generable
    enum Direction: Equatable { case expands, restricts, neutral }
}

/// BatchEvaluator on the default model, and budget-aware decoding end to end.
@Suite(.serialized, .enabled(if: LocalTestModels.hasSmolLM2, LocalTestModels.smolLM2Missing))
struct BatchEvaluatorTests {
    static let model = LocalLanguageModel(name: LocalTestModels.smolLM2)
    static let instructions = "Classify the policy clause: who it affects, whether it expands or restricts their access, and proxy attributes."
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func clauses(_ n: Int) throws -> [String] {
        let text = try String(contentsOf: repository.appendingPathComponent("Benchmarks/eval/policy_clauses.jsonl"), encoding: .utf8)
        return try text.split(separator: "\n").prefix(n).map { line in
            let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return try #require(record["text"] as? String)
        }
    }

    /// Without `parallel`, a local model gets twice the sequences it decodes at once in flight;
    /// a given `parallel` is kept.
    @Test func inFlightFollowsTheModel() throws {
        let schema = EvaluatedClause.generationSchema
        let running = try Self.model.loadedSizing().parallel
        #expect(BatchEvaluator(model: Self.model, instructions: nil, schema: schema).inFlight() == 2 * running)
        #expect(BatchEvaluator(model: Self.model, instructions: nil, schema: schema, parallel: 5).inFlight() == 5)
        #expect(BatchEvaluator(model: Self.model, instructions: nil, schema: schema, parallel: 0).inFlight() == 1)
    }

    /// 24 inputs under one schema in steps of 16 rows, whose constrained decoders advance on
    /// several threads (sharing the grammar's caches): each value is the one the input gets alone.
    @Test(.enabled(if: ProcessInfo.processInfo.activeProcessorCount > 1, "one core: the decoders advance one after another"))
    func constrainedRowsOnThreadsMatchSessionsRunOneByOne() async throws {
        let prompts = try Self.clauses(24)
        let options = GenerationOptions(sampling: .greedy, maximumResponseTokens: 48)
        let scheduler = try Self.model.instance().scheduler
        let before = scheduler.statistics.threadedSteps
        let evaluator = BatchEvaluator(model: Self.model, instructions: Self.instructions,
                                       schema: EvaluatedClause.generationSchema, options: options)
        let batched = try await evaluator.evaluate(prompts, generating: EvaluatedClause.self)
        #expect(scheduler.statistics.threadedSteps > before, "no step advanced its decoders on threads")
        for (prompt, result) in zip(prompts, batched) {
            let session = LanguageModelSession(model: Self.model, instructions: Self.instructions)
            let alone = try await session.respond(to: prompt, generating: EvaluatedClause.self, options: options).content
            #expect(try result.get() == alone, "\(prompt)")
        }
    }

    /// Results come back in input order and equal each input run alone in its own session.
    @Test func evaluatorMatchesSessionsRunOneByOne() async throws {
        let prompts = try Self.clauses(10)
        let options = GenerationOptions(sampling: .greedy, maximumResponseTokens: 64)
        let evaluator = BatchEvaluator(model: Self.model, instructions: Self.instructions,
                                       schema: EvaluatedClause.generationSchema, options: options, parallel: 8)
        let batched = try await evaluator.evaluate(prompts, generating: EvaluatedClause.self)
        #expect(batched.count == prompts.count)
        for (prompt, result) in zip(prompts, batched) {
            let session = LanguageModelSession(model: Self.model, instructions: Self.instructions)
            let alone = try await session.respond(to: prompt, generating: EvaluatedClause.self, options: options).content
            #expect(try result.get() == alone, "\(prompt)")
        }
        let outcomes = try await evaluator.evaluate(prompts)
        #expect(outcomes.map(\.index) == Array(0..<prompts.count))
        #expect(outcomes.allSatisfy { $0.promptTokens > 0 && $0.generatedTokens > 0 && $0.cachedTokens > 0 })
    }

    /// Unbounded strings that a small model runs on with greedy decoding close validly inside
    /// the response budget, and the outcome says the budget ended them.
    @Test func runawayValuesCloseWithinTheBudget() async throws {
        let schema = try GenerationSchema(jsonSchema: """
            {"type":"object","properties":{"user_id":{"type":"string"},"history":{"type":"array","items":{"type":"string"}}},
             "required":["user_id","history"],"additionalProperties":false}
            """)
        let prompts = ["Write the user id 1234567890 repeated many times, and a long history of numbered events.",
                       "List every number from 1 to 500 in the history.",
                       "The user id is a very long random string of digits."]
        let validator = try GrammarCompiler(vocabulary: try TokenVocabulary(tokens: (0..<256).map { [UInt8($0)] } + [[0]], endOfSequence: [256]))
            .compile(jsonSchema: schema.debugDescription)
        for budget in [40, 96] {
            let evaluator = BatchEvaluator(model: Self.model, instructions: nil, schema: schema,
                                           options: GenerationOptions(sampling: .greedy, maximumResponseTokens: budget))
            let outcomes = try await evaluator.evaluate(prompts)
            for outcome in outcomes {
                let content = try outcome.result.get()
                let m = validator.makeMatcher()
                #expect(m.accept(bytes: Array(content.jsonString.utf8)) && m.isComplete, "\(content.jsonString)")
                #expect(outcome.generatedTokens <= budget)
            }
            #expect(outcomes.contains { $0.truncatedByBudget }, "no output reached the budget of \(budget)")
        }
    }

    /// Real-world schemas from the corpus (a slice; the whole corpus is a benchmark): every one
    /// that compiles yields a value valid against it within 512 tokens, none lost to the
    /// context window.
    @Test func corpusSchemasEndValidWithin512Tokens() async throws {
        guard let shared = Self.sharedCorpus else {
            withKnownIssue("../shared/schema-corpus is not beside the repository") { throw CancellationError() }
            return
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: shared.path).filter { $0.hasSuffix(".json") }.sorted()
        // PLINTH_CORPUS_ALL=1 runs every schema (the benchmark figure in Benchmarks/README.md).
        let all = ProcessInfo.processInfo.environment["PLINTH_CORPUS_ALL"] == "1"
        let slice = all ? files : stride(from: 0, to: files.count, by: max(1, files.count / 24)).map { files[$0] }
        let started = Date()
        let results = try await CorpusRun.run(slice.map { shared.appendingPathComponent($0) }, model: Self.model, budget: 512)
        print("schema corpus: \(slice.count) schemas, \(results.compiled) compiled, \(results.failures.count) failed, "
              + "\(results.invalid.count) invalid, \(results.truncated) ended by the 512-token budget, "
              + String(format: "%.0f s", Date().timeIntervalSince(started)))
        #expect(results.compiled >= slice.count / 2, "only \(results.compiled) of \(slice.count) schemas compiled")
        #expect(results.failures.isEmpty, "\(results.failures)")
        #expect(results.invalid.isEmpty, "\(results.invalid)")
    }

    static var sharedCorpus: URL? {
        let url = repository.deletingLastPathComponent().appendingPathComponent("shared/schema-corpus")
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }
}

/// Generates one value per corpus schema, concurrently, and checks each against its schema.
enum CorpusRun {
    struct Results {
        var compiled = 0
        var failures: [String] = []
        var invalid: [String] = []
        var truncated = 0
    }

    static func run(_ files: [URL], model: LocalLanguageModel, budget: Int) async throws -> Results {
        let vocabulary = try TokenVocabulary(tokens: (0..<256).map { [UInt8($0)] } + [[0]], endOfSequence: [256])
        let compiler = GrammarCompiler(vocabulary: vocabulary)
        var jobs: [(String, GenerationSchema, CompiledGrammar, String)] = []
        for file in files {
            // Read in document order (JSONValue keeps it): re-serializing a dictionary would order
            // the properties differently in every process, and with them the prompt and the output.
            guard let document = try? JSONValue(parsing: [UInt8](Data(contentsOf: file))), let schemaValue = document["schema"]
            else { continue }
            let text = schemaValue.compactText
            guard let schema = try? GenerationSchema(jsonSchema: text),
                  let checker = try? compiler.compile(jsonSchema: text, options: GrammarOptions(additionalPropertiesByDefault: true))
            else { continue }
            let about = schemaValue["description"]?.stringValue
            jobs.append((file.lastPathComponent, schema, checker, "Produce a realistic example value" + (about.map { " for: \($0)" } ?? ".")))
        }
        var results = Results(compiled: jobs.count)
        let options = GenerationOptions(sampling: .greedy, maximumResponseTokens: budget)
        try await withThrowingTaskGroup(of: (String, CompiledGrammar, BatchEvaluator.Outcome).self) { group in
            var next = 0
            func add() {
                guard next < jobs.count else { return }
                let (name, schema, checker, prompt) = jobs[next]
                next += 1
                group.addTask {
                    let evaluator = BatchEvaluator(model: model, instructions: nil, schema: schema, options: options, parallel: 1)
                    return (name, checker, try await evaluator.evaluate([prompt])[0])
                }
            }
            for _ in 0..<16 { add() }
            while let (name, checker, outcome) = try await group.next() {
                add()
                switch outcome.result {
                case .failure(let failure) where failure.kind == .unsupportedSchema:
                    results.compiled -= 1
                case .failure(let failure):
                    results.failures.append("\(name): \(failure.kind) \(failure.message)")
                case .success(let content):
                    let m = checker.makeMatcher()
                    if !(m.accept(bytes: Array(content.jsonString.utf8)) && m.isComplete) { results.invalid.append("\(name): \(content.jsonString)") }
                    if outcome.truncatedByBudget { results.truncated += 1 }
                }
            }
        }
        return results
    }
}
