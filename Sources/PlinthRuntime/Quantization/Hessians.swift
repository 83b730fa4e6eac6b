import COpenBLAS
import Foundation

/// The calibration activations' second moments per matrix, X^T X (lower triangle), that GPTQ
/// quantizes against. Matrices that share an input (q, k and v; gate and up) share one sum.
/// A transformer block of SmolLM2 holds 3.4 M floats of them (13 MB), of Qwen2.5-0.5B 26 M.
public final class Hessians {
    private var sums: [String: UnsafeMutablePointer<Float>] = [:]
    private var widths: [String: Int] = [:]
    private var owned: [UnsafeMutablePointer<Float>] = []
    /// Activation rows seen per matrix.
    public private(set) var rows: [String: Int] = [:]

    public init() {}

    deinit { owned.forEach { $0.deallocate() } }

    /// Adds `count` activation rows of `width` that met the matrices `names` (those an importance
    /// matrix collects).
    public func accumulate(_ names: [String], _ input: UnsafePointer<Float>, rows count: Int, width: Int) {
        let names = names.filter(ImportanceMatrix.collects)
        guard let first = names.first else { return }
        let h: UnsafeMutablePointer<Float>
        if let existing = sums[first] {
            h = existing
        } else {
            h = .allocate(capacity: width * width)
            h.initialize(repeating: 0, count: width * width)
            owned.append(h)
        }
        for name in names {
            sums[name] = h
            widths[name] = width
        }
        cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, Int32(width), Int32(count), 1, input, Int32(width), 1, h, Int32(width))
        for name in names { rows[name, default: 0] += count }
    }

    /// The sum for matrix `name` (width × width, lower triangle), or nil when it was never seen.
    public func sum(for name: String) -> (pointer: UnsafePointer<Float>, width: Int)? {
        guard let h = sums[name], let w = widths[name] else { return nil }
        return (UnsafePointer(h), w)
    }

    public var count: Int { sums.count }
}
