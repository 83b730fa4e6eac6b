import ArgumentParser
import Plinth
import PlinthRuntime

/// `--backend`, for every command that runs a model: auto, cpu or cuda.
struct BackendOptions: ParsableArguments {
    @Option(help: "Where the model runs: auto, cpu or cuda (default: PLINTH_BACKEND, else auto).")
    var backend: String?

    func validate() throws { _ = try value() }

    /// The backend asked for: `Backend.default` (PLINTH_BACKEND, else auto) without the option.
    func value() throws -> Backend {
        guard let backend else { return .default }
        guard let value = Backend(rawValue: backend.lowercased()) else {
            throw ValidationError("--backend must be auto, cpu or cuda, not '\(backend)'")
        }
        return value
    }

    /// The same, for a `LocalLanguageModel`.
    func localValue() throws -> LocalLanguageModel.Backend { LocalLanguageModel.Backend(try value()) }
}
