import Foundation
import Synchronization
internal import PlinthGrammar
internal import PlinthRuntime

/// One model file loaded into this process: the weights (memory-mapped once), the tokenizer and
/// template, the scheduler that owns the KV cache and batches every request on the model, and
/// the grammar compiler for its vocabulary.
/// Every session and executor that uses the same file shares one instance.
final class LocalModelInstance: Sendable {
    let url: URL
    let model: PlinthRuntime.Model
    let scheduler: Scheduler
    /// Built on first guided request: tens of thousands of tokens make a trie worth keeping.
    private let grammarCompiler = Mutex<GrammarCompiler?>(nil)
    /// Adapters read for this model, by resolved path: read once, shared by every request.
    private let adapters = Mutex<[String: LoRAAdapter]>([:])
    /// The tokens that can start a tool call, found once (a pass over the vocabulary).
    private let markerTokens = Mutex<(opening: Set<Int32>, separator: Set<Int32>)?>(nil)
    /// The bytes of the vocabulary's longest token: text of n bytes is at least n / this tokens.
    let longestTokenBytes: Int

    /// Most tokens a conversation may hold (prompt and response).
    var contextSize: Int { scheduler.contextLength }

    /// The context cap: larger windows cost KV memory for little use with small models.
    static let maximumContextLength = 4096
    /// KV slots: sequences decoding together plus prefixes kept warm (the longest shared
    /// prefix picks the slot), and how many sequences one step may run.
    static let slotCount = 24
    static let maximumRunning = 16
    /// On a GPU a step of 64 rows costs little more than a step of 16: more sequences run at
    /// once, with larger prefill chunks (the KV cache is slots × context on the device).
    static let gpuSizing = Scheduler.Configuration.Sizing(slots: 80, maxRunning: 64, stepTokens: 1024)

    static let cpuSizing = Scheduler.Configuration.Sizing(slots: slotCount, maxRunning: maximumRunning, stepTokens: 256)

    /// The scheduler's sizing on the CPU and on a GPU: `parallel` sequences at once where it is
    /// given, else the defaults. The slots beyond the running sequences keep prefixes warm; a
    /// step holds every decoding row and as many prompt tokens again.
    static func sizing(parallel: Int?) -> (cpu: Scheduler.Configuration.Sizing, gpu: Scheduler.Configuration.Sizing) {
        guard let parallel else { return (cpuSizing, gpuSizing) }
        let p = max(1, parallel)
        func scaled(_ base: Scheduler.Configuration.Sizing) -> Scheduler.Configuration.Sizing {
            .init(slots: p + base.slots - base.maxRunning, maxRunning: p, stepTokens: max(base.stepTokens, 2 * p))
        }
        return (scaled(cpuSizing), scaled(gpuSizing))
    }

    /// Loads `url` on `backend` with a scheduler running `parallel` sequences at once (the
    /// backend's default where nil; see ``sizing(parallel:)``), at most `maxQueued` requests
    /// waiting, and `contextLength` tokens per sequence (default: the model's, at most
    /// ``maximumContextLength``).
    init(url: URL, contextLength: Int?, parallel: Int?, maxQueued: Int, backend: Backend) throws {
        self.url = url
        let model: PlinthRuntime.Model
        do {
            model = try PlinthRuntime.Model(url: url)
        } catch {
            throw LocalLanguageModelError.loadFailed(file: url.path, reason: error.localizedDescription)
        }
        guard model.chatTemplate != nil else { throw LocalLanguageModelError.missingChatTemplate(url.path) }
        self.model = model
        longestTokenBytes = (0..<Int32(model.tokenizer.vocabularySize)).reduce(1) { longest, id in
            max(longest, model.tokenizer.withTokenBytes(id) { $0.count })
        }
        let sizing = Self.sizing(parallel: parallel)
        do {
            scheduler = try Scheduler(model: model, configuration: .init(
                contextLength: min(model.config.contextLength, contextLength ?? Self.maximumContextLength),
                slots: sizing.cpu.slots, maxRunning: sizing.cpu.maxRunning, stepTokens: sizing.cpu.stepTokens, maxQueued: maxQueued,
                backend: backend, gpuSizing: sizing.gpu))
        } catch {
            throw LocalLanguageModelError.loadFailed(file: url.path, reason: error.localizedDescription)
        }
    }

    /// The adapter at `url` (a PEFT folder or a GGUF LoRA file), read for this model on first
    /// use, its update multiplied by `scale` (one adapter object per file and scale, so that
    /// requests share its attachment and cached prefixes).
    func adapter(at url: URL, scale: Float = 1) throws -> LoRAAdapter {
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        let key = scale == 1 ? path : "\(path)\u{0}\(scale)"
        return try adapters.withLock { table in
            if let loaded = table[key] { return loaded }
            do {
                let read = try table[path] ?? LoRAAdapter(contentsOf: URL(fileURLWithPath: path), for: model.transformer)
                table[path] = read
                let loaded = read.scaled(by: scale)
                table[key] = loaded
                return loaded
            } catch {
                throw LocalLanguageModelError.adapterFailed(adapter: url.path, reason: error.localizedDescription)
            }
        }
    }

    /// The tokens whose text begins `<tool_call>`, and those whose text begins `\n<tool_call>`.
    func toolMarkerTokens() -> (opening: Set<Int32>, separator: Set<Int32>) {
        markerTokens.withLock { cached in
            if let cached { return cached }
            let found = (opening: LocalToolCalling.prefixTokens(of: LocalToolCalling.openingBytes, tokenizer: model.tokenizer),
                         separator: LocalToolCalling.prefixTokens(of: LocalToolCalling.separatorBytes, tokenizer: model.tokenizer))
            cached = found
            return found
        }
    }

    /// The compiler of grammars for this model's vocabulary (it caches compiled schemas).
    func compiler() throws -> GrammarCompiler {
        try grammarCompiler.withLock { cached in
            if let cached { return cached }
            let tokenizer = model.tokenizer
            let eos = tokenizer.endOfGenerationIDs
            var excluded = Set<Int32>()
            var tokens: [[UInt8]] = []
            tokens.reserveCapacity(tokenizer.vocabularySize)
            for id in 0..<Int32(tokenizer.vocabularySize) {
                // Special tokens never appear inside generated JSON.
                if !tokenizer.attributes(id).isDisjoint(with: [.control, .unknown]) && !eos.contains(id) { excluded.insert(id) }
                tokens.append(tokenizer.tokenBytes(id))
            }
            let vocabulary: TokenVocabulary
            do {
                vocabulary = try TokenVocabulary(tokens: tokens, endOfSequence: eos, excluded: excluded)
            } catch {
                throw LocalLanguageModelError.loadFailed(file: url.path, reason: "its vocabulary can't drive the decoder: \(error.localizedDescription)")
            }
            let compiler = GrammarCompiler(vocabulary: vocabulary)
            cached = compiler
            return compiler
        }
    }
}

/// The models loaded in this process, keyed by file and backend: weights load once and stay
/// shared. A model loaded with `auto` also answers for the backend it runs on, and `auto` reuses
/// a model loaded on the backend it would pick, so that one file is on a GPU once.
enum LocalModelRegistry {
    private static let instances = Mutex<[String: LocalModelInstance]>([:])

    private static func key(_ path: String, _ backend: Backend) -> String { backend.rawValue + ":" + path }

    /// The loaded model for a file on `backend`, loading it on first use with `parallel`
    /// sequences at once (the backend's default where nil) of `contextLength` tokens; a later
    /// caller gets the instance as first loaded.
    static func instance(for url: URL, backend: Backend, parallel: Int? = nil, contextLength: Int? = nil) throws -> LocalModelInstance {
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        // Loading under the lock: a second caller waits for the first load instead of repeating it.
        return try instances.withLock { table in
            if let loaded = table[key(path, backend)] { return loaded }
            if backend == .auto, let loaded = table[key(path, Backend.cudaUnavailableReason == nil ? .cuda : .cpu)] {
                table[key(path, .auto)] = loaded
                return loaded
            }
            let loaded = try LocalModelInstance(url: URL(fileURLWithPath: path), contextLength: contextLength, parallel: parallel, maxQueued: 65536,
                                                backend: backend)
            table[key(path, backend)] = loaded
            if backend == .auto, table[key(path, loaded.scheduler.backend)] == nil { table[key(path, loaded.scheduler.backend)] = loaded }
            return loaded
        }
    }

    /// Whether the file is loaded already on `backend`.
    static func isLoaded(_ url: URL, backend: Backend) -> Bool {
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        return instances.withLock { $0[key(path, backend)] != nil }
    }
}
