import Foundation
import Synchronization

/// Where an ``InferenceContext`` runs the forward step.
///
/// The scheduler, the sampler and the constrained decoder run on the CPU whatever the backend;
/// only the step itself (weights, KV cache, activations) moves. Choose one when you create the
/// context; ``auto`` uses a GPU when one is usable and the CPU otherwise.
public enum Backend: String, Sendable, CaseIterable, Equatable {
    /// CUDA when the driver, a device, NVRTC and cuBLAS are present and the model's weight types
    /// are supported; otherwise the CPU, with one line on standard error saying why.
    case auto
    /// The CPU kernels (OpenBLAS and Plinth's C kernels).
    case cpu
    /// An NVIDIA GPU through the CUDA driver API, loaded at run time; fails when unavailable.
    case cuda

    /// `PLINTH_BACKEND` (`auto`, `cpu` or `cuda`), else ``auto``. An unknown value is reported
    /// once on standard error and read as ``auto``.
    public static var `default`: Backend {
        guard let name = ProcessInfo.processInfo.environment["PLINTH_BACKEND"], !name.isEmpty else { return .auto }
        if let b = Backend(rawValue: name.lowercased()) { return b }
        BackendNotes.once(.unknownName, "PLINTH_BACKEND=\(name) is not auto, cpu or cuda; using auto")
        return .auto
    }

    /// Where kernels compiled for the GPU are cached: `$PLINTH_HOME/cuda`.
    public static var cudaCacheDirectory: URL {
        ModelStore.defaultHome.appendingPathComponent("cuda")
    }
}

/// Why a backend could not be used, or what failed on it.
public enum BackendError: Error, LocalizedError, Equatable, Sendable {
    /// `cuda` was asked for but cannot run here (no driver, no device, a missing library, a
    /// weight type without CUDA kernels).
    case cudaUnavailable(String)
    /// The model's weights and KV cache (at the slots asked for) do not fit the GPU's free
    /// memory: CUDA is unavailable for this model at this size. `slotsThatFit`: how many KV slots
    /// would have fitted beside the weights (0: not even the weights fit).
    case cudaOutOfMemory(String, slotsThatFit: Int)
    /// A CUDA call failed while running (out of device memory, a launch error).
    case cudaFailed(String)

    public var errorDescription: String? {
        switch self {
        case .cudaUnavailable(let why): "the CUDA backend is unavailable: \(why)"
        case .cudaOutOfMemory(let why, _): "the CUDA backend is unavailable: out of device memory: \(why)"
        case .cudaFailed(let why): "the CUDA backend failed: \(why)"
        }
    }
}

/// Messages on standard error; one-time ones (per process), so that many contexts created in
/// one process report a fallback once.
enum BackendNotes {
    enum Key: Int { case unknownName = 1, fallback = 2 }
    private static let said = Mutex<Set<Int>>([])

    static func once(_ key: Key, _ message: String) {
        let first = said.withLock { $0.insert(key.rawValue).inserted }
        guard first else { return }
        say(message)
    }

    /// A message on standard error, every time.
    static func say(_ message: String) {
        try? FileHandle.standardError.write(contentsOf: Data("plinth: \(message)\n".utf8))
    }
}
