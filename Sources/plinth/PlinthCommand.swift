import ArgumentParser
import Foundation
import PlinthRuntime

@main
struct PlinthCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plinth",
        abstract: "Run open-weight language models in-process on the CPU.",
        discussion: "Models are GGUF files. Give -m a catalog name (see `plinth models list`) or a path to any GGUF file. Catalog models are cached under $PLINTH_HOME (default ~/.cache/plinth). PLINTH_THREADS sets how many threads the kernels use.",
        subcommands: [Generate.self, Tokenize.self, Models.self, Bench.self]
    )

    static func main() {
        // Swift repairs invalid UTF-8 in arguments silently; refuse it instead of changing the prompt.
        if let bad = invalidUTF8Argument() {
            Diagnostics.error("argument \(bad.index) is not valid UTF-8 (bad byte at offset \(bad.offset))")
            Foundation.exit(2)
        }
        do {
            var command = try parseAsRoot()
            try command.run()
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
    static func write(_ s: String) { FileHandle.standardError.write(Data(s.utf8)) }
}

/// Runs a command body, turning library errors into a message on stderr and a non-zero exit.
func reportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as ExitCode {
        throw error
    } catch let error as any LocalizedError {
        Diagnostics.error(error.errorDescription ?? "\(error)")
        throw ExitCode(1)
    } catch {
        Diagnostics.error("\(error)")
        throw ExitCode(1)
    }
}

/// Options shared by commands that load a model.
struct ModelOptions: ParsableArguments {
    @Option(name: [.short, .customLong("model")],
            help: "A catalog model name or alias, or a path to a GGUF file.")
    var model: String = ModelCatalog.defaultModelName

    @Flag(help: "Fail instead of downloading a catalog model that is not cached yet.")
    var noFetch = false

    func load() throws -> Model {
        let store = ModelStore()
        let url = try store.resolve(model, fetchIfMissing: !noFetch) { Diagnostics.note($0) }
        return try Model(url: url)
    }
}
