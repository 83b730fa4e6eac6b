import Foundation

/// A loaded transformer: its configuration and memory-mapped weights. Immutable and shared by
/// every context that runs it.
public final class Transformer: Sendable {
    public let config: ModelConfig
    /// The family's own hyperparameters and layer.
    public let architecture: any ModelArchitecture
    public let weights: ModelWeights
    public var file: GGUFFile { weights.file }

    public init(file: GGUFFile, packing: WeightPackingOptions = .default) throws {
        let config = try ModelConfig(gguf: file)
        self.config = config
        let architecture = try ModelArchitectures.load(file, config: config)
        self.architecture = architecture
        self.weights = try ModelWeights(file: file, config: config, architecture: architecture, packing: packing)
    }

    public convenience init(url: URL, packing: WeightPackingOptions = .default) throws {
        try self.init(file: GGUFFile(url: url), packing: packing)
    }
}

/// The most threads the kernels use, however many are asked for.
public let maxThreadCount = 256

/// How many threads the kernels use: `PLINTH_THREADS`, else every core.
public func defaultThreadCount() -> Int {
    if let s = ProcessInfo.processInfo.environment["PLINTH_THREADS"], let n = Int(s), n > 0 { return min(n, maxThreadCount) }
    return max(1, ProcessInfo.processInfo.activeProcessorCount)
}
