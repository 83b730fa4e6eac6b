import ArgumentParser
import PlinthRuntime

/// The `--backend` option's value: auto, cpu or cuda; nil means `Backend.default`
/// (PLINTH_BACKEND, else auto).
func parseBackend(_ name: String?) throws -> Backend {
    guard let name else { return .default }
    guard let backend = Backend(rawValue: name.lowercased()) else {
        throw ValidationError("--backend must be auto, cpu or cuda, not '\(name)'")
    }
    return backend
}
