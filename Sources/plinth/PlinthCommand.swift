import ArgumentParser
import Foundation
import PlinthRuntime

@main
struct PlinthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plinth",
        abstract: "Run open-weight language models in-process on the CPU.",
        discussion: "Models are GGUF files. Give -m a catalog name (see `plinth models list`) or a path to any GGUF file. Catalog models are cached under $PLINTH_HOME (default ~/.cache/plinth). PLINTH_THREADS sets how many threads the kernels use.",
        subcommands: [Generate.self, Respond.self, Chat.self, Eval.self, Serve.self, Tokenize.self, Perplexity.self, Imatrix.self, Quantize.self, Models.self, Adapters.self, Bench.self, SessionBench.self, ConcurrencyBench.self]
    )

    static func main() async {
        // Swift repairs invalid UTF-8 in arguments silently; refuse it instead of changing the prompt.
        if let bad = invalidUTF8Argument() {
            Diagnostics.error("argument \(bad.index) is not valid UTF-8 (bad byte at offset \(bad.offset))")
            Foundation.exit(2)
        }
        do {
            var command = try parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    private static func invalidUTF8Argument() -> (index: Int, offset: Int)? {
        for i in 1..<Int(CommandLine.argc) {
            guard let p = CommandLine.unsafeArgv[i] else { continue }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: strlen(p))
            if let offset = firstInvalidUTF8Offset(bytes) { return (i, offset) }
        }
        return nil
    }
}

/// The offset of the first byte that does not start or continue a valid UTF-8 sequence, if any.
func firstInvalidUTF8Offset(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
    var it = bytes.makeIterator()
    var decoder = UTF8()
    var offset = 0
    while true {
        switch decoder.decode(&it) {
        case .scalarValue(let s): offset += UTF8.width(s)
        case .emptyInput: return nil
        case .error: return offset
        }
    }
}

/// Everything that is not generated text goes to standard error.
enum Diagnostics {
    static func error(_ message: String) { write("error: \(message)\n") }
    static func note(_ message: String) { write("\(message)\n") }
    /// A write that fails (standard error closed) is dropped: messages never stop the work.
    static func write(_ s: String) { try? FileHandle.standardError.write(contentsOf: Data(s.utf8)) }
}

/// Standard output, for results. A write that fails (a full disk, a reader gone while SIGPIPE is
/// ignored) is an error naming the cause: a script must not take lost output for success.
enum Output {
    static func write(_ text: String) throws { try write(Data(text.utf8)) }

    static func write(_ data: Data) throws {
        do { try FileHandle.standardOutput.write(contentsOf: data) } catch {
            throw Failure(reason: FileErrors.reason(error))
        }
    }

    /// Standard output can't be written: the end of a command's results (chat stops at it).
    struct Failure: LocalizedError {
        let reason: String
        var errorDescription: String? { "cannot write standard output: \(reason)" }
    }

    static func line(_ text: String) throws { try write(text + "\n") }
}

/// A command-line mistake that isn't a library error, with what is wrong.
struct CLIError: LocalizedError {
    let message: String
    init(_ message: String) { self.message = message }
    var errorDescription: String? { message }
}

/// Runs a command body, turning library errors into a message on stderr and a non-zero exit.
func reportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch {
        throw reported(error)
    }
}

/// The same for commands that await.
func reportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch {
        throw reported(error)
    }
}

/// Prints an error on stderr; returns the exit code for it.
func reported(_ error: any Error) -> ExitCode {
    if let code = error as? ExitCode { return code }
    Diagnostics.error(message(for: error))
    return ExitCode(1)
}

/// An error's description, with its reason and suggestion when it has them.
func message(for error: any Error) -> String {
    guard let error = error as? any LocalizedError else { return "\(error)" }
    var message = error.errorDescription ?? "\(error)"
    if let reason = error.failureReason, !message.contains(reason) { message += " " + reason }
    if let suggestion = error.recoverySuggestion { message += " " + suggestion }
    return message
}

/// Loads from a model file; an error then names the file (the runtime's errors say what is
/// wrong and where in it, not which file).
func loadingModelFile<T>(_ url: URL, _ load: () throws -> T) throws -> T {
    do {
        return try load()
    } catch {
        throw CLIError("The model file \(url.path) can't be loaded: \(message(for: error))")
    }
}

/// Options shared by commands that load a model.
struct ModelOptions: ParsableArguments {
    @Option(name: [.short, .customLong("model")],
            help: "A catalog model name or alias, or a path to a GGUF file (a name is the catalog's first: ./NAME for a file so named).")
    var model: String = ModelCatalog.defaultModelName

    @Flag(help: "Fail instead of downloading a catalog model that is not cached yet.")
    var noFetch = false

    /// The model file, downloaded first when it is a catalog model that isn't cached (unless --no-fetch).
    func url() throws -> URL {
        if ModelCatalog.entry(named: model) != nil, !model.contains("/"), FileManager.default.fileExists(atPath: model) {
            Diagnostics.note("'\(model)' is a catalog model's name, and also a file here: the catalog model runs (./\(model) for the file)")
        }
        return try ModelStore().resolve(model, fetchIfMissing: !noFetch) { Diagnostics.note($0) }
    }

    /// The model, from `url` where the caller has resolved it already.
    func load(_ resolved: URL? = nil) throws -> Model {
        let url = try resolved ?? url()
        return try loadingModelFile(url) { try Model(url: url) }
    }
}

/// `--adapter`: a LoRA adapter for the model, applied unmerged.
struct AdapterOptions: ParsableArguments {
    @Option(name: .customLong("adapter"),
            help: "A LoRA adapter: a PEFT folder, a llama.cpp GGUF LoRA file, or the name of one in $PLINTH_HOME/adapters or the package's Adapters/.")
    var adapters: [String] = []

    @Option(name: .customLong("adapter-scale"),
            help: "Multiply the adapter's update by this (llama.cpp's --lora-scaled): 0 is the base model, 1 the adapter as trained.")
    var adapterScale: Float = 1

    /// The adapter given, if any.
    var adapter: String? { adapters.first }

    func validate() throws {
        guard adapterScale.isFinite else { throw ValidationError("--adapter-scale must be a number, not \(adapterScale)") }
        if adapterScale != 1 && adapters.isEmpty { throw ValidationError("--adapter-scale needs an --adapter") }
        // Taking the last one silently would run another adapter than the user thinks.
        if adapters.count > 1 {
            throw ValidationError("--adapter is given \(adapters.count) times; one adapter runs at a time (merge one into the model with `plinth adapters merge` to use two)")
        }
    }

    /// The adapter's file or folder, when one is given.
    func url() throws -> URL? {
        try adapter.map { try AdapterStore.default.resolve($0) }
    }

    /// The adapter read for `model`, when one is given.
    func load(for model: Model) throws -> LoRAAdapter? {
        try adapter.map { name in
            let adapter = try LoRAAdapter(named: name, for: model.transformer)
            if let note = adapter.baseModelNote { Diagnostics.note("adapter \(adapter.name): \(note)") }
            return adapter.scaled(by: adapterScale)
        }
    }
}
