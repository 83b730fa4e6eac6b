import ArgumentParser
import Foundation
import PlinthRuntime

struct Adapters: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, inspect and merge LoRA adapters.",
        discussion: "An adapter is a PEFT folder (adapter_config.json + adapter_model.safetensors) or a llama.cpp GGUF LoRA file. Other commands take one with --adapter and apply it unmerged; `merge` writes a model with it merged.",
        subcommands: [List.self, Show.self, Merge.self]
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the adapters found by name, and where they are looked for.")

        func run() throws {
            try reportingErrors {
                let store = AdapterStore.default
                for name in store.names() { try Output.line("\(name)\t\((try? store.resolve(name).path) ?? "")") }
                Diagnostics.note("searched: \(store.directories.map(\.path).joined(separator: ", "))")
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Read an adapter against a model and describe it.")

        @OptionGroup var modelOptions: ModelOptions
        @Argument(help: "The adapter: a path, or a name (see `plinth adapters list`).")
        var adapter: String

        func run() throws {
            try reportingErrors {
                let lora = try LoRAAdapter(named: adapter, for: try modelOptions.load().transformer)
                try Output.line("\(lora.name): \(lora.format.rawValue) at \(lora.url.path)")
                try Output.line("  base model: \(lora.baseModelName ?? "not named")\(lora.baseModelNote.map { " (\($0))" } ?? ""); sha256 \(lora.fingerprint)")
                let ranks = Set(lora.pairs.values.map(\.rank)).sorted(), scales = Set(lora.pairs.values.map(\.scale)).sorted()
                try Output.line("  \(lora.pairs.count) matrices, rank \(ranks.map(String.init).joined(separator: "/")), scale \(scales.map { "\($0)" }.joined(separator: "/"))")
                var kinds: [String: Int] = [:]
                for t in lora.pairs.keys {
                    switch t {
                    case .layer(_, let m): kinds[m.rawValue, default: 0] += 1
                    default: kinds[t.tensorName, default: 0] += 1
                    }
                }
                try Output.line("  targets: " + kinds.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", "))
                let floats = lora.pairs.values.reduce(0) { $0 + $1.a.count + $1.bt.count }
                try Output.line("  \(floats) parameters")
            }
        }
    }

    struct Merge: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a GGUF model with an adapter merged into its weights (llama.cpp loads it).",
            discussion: "Each changed matrix is W + scale·B·A, computed in f32 from the dequantized rows. --precision automatic (the default) stores changed matrices of types under 8 bits as Q8_0, which keeps the adapter's effect; `base` requantizes them into their own type (smaller, but it loses much of the update).")

        @OptionGroup var modelOptions: ModelOptions
        @Option(help: "The adapter: a PEFT folder, a GGUF LoRA file, or a name (see `plinth adapters list`).")
        var adapter: String
        @Option(name: [.short, .customLong("output")], help: "The merged model file to write.")
        var output: String
        @Option(help: "How changed matrices are stored: automatic, base, Q8_0 or F16.")
        var precision: LoRAMerge.Precision = .automatic
        @Option(help: "Multiply the adapter's update by this before merging (llama.cpp's --lora-scaled).")
        var scale: Float = 1

        func validate() throws {
            guard scale.isFinite else { throw ValidationError("--scale must be a number, not \(scale)") }
        }

        func run() throws {
            try reportingErrors {
                let input = try modelOptions.url()
                let out = URL(fileURLWithPath: output)
                // Where the adapter is, named from the store or given as a path.
                let adapterURL = try AdapterStore.default.resolve(adapter)
                var isFolder: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: adapterURL.path, isDirectory: &isFolder)
                try FileChecks.requireWritable(output, what: "output")
                try FileChecks.requireDistinct(writes: [(output, "output")], reads: [(input.path, "model"), (adapterURL.path, "adapter")])
                // Nor a file in the adapter's PEFT folder.
                if isFolder.boolValue, FileChecks.sameFile(out.deletingLastPathComponent().path, adapterURL.path) {
                    throw CLIError("the output would overwrite a file of the adapter \(adapter) (\(adapterURL.path)); choose another -o")
                }
                let model = try modelOptions.load(input)
                let lora = try LoRAAdapter(contentsOf: adapterURL, for: model.transformer).scaled(by: scale)
                let start = ContinuousClock.now
                try LoRAMerge.write(model: model.transformer, adapter: lora, to: out, precision: precision)
                let took = ContinuousClock.now - start
                Diagnostics.note("merged \(lora.name) (\(lora.pairs.count) matrices) into \(input.lastPathComponent) in \(took): \(out.path)")
            }
        }
    }
}

/// `--precision` names a way of storing merged matrices, in any case (`q8_0` or `Q8_0`).
extension LoRAMerge.Precision: ExpressibleByArgument {
    public init?(argument: String) {
        guard let p = Self.allCases.first(where: { $0.rawValue.lowercased() == argument.lowercased() }) else { return nil }
        self = p
    }
}
