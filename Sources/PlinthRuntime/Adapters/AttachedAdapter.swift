import Foundation
import PlinthKernels

/// An adapter's pairs copied, as int8 rows with a scale each, into memory the kernels read for
/// as long as a context uses it. With several adapters in a step, reading their weights from
/// memory bounds the low-rank products, and int8 reads half of F16's bytes; the rounding is
/// small beside the base model's own quantization (the fidelity tests hold it to that).
final class AttachedAdapter {
    struct Pair {
        var rank: Int, rows: Int, columns: Int
        var scale: Float
        /// A (rank × columns) and B transposed (rank × rows), int8, with one scale per row.
        var a: UnsafeMutablePointer<Int8>, aScale: UnsafeMutablePointer<Float>
        var bt: UnsafeMutablePointer<Int8>, btScale: UnsafeMutablePointer<Float>
    }

    let adapter: LoRAAdapter
    let pairs: [AdapterTarget: Pair]
    /// The pairs of each layer's matrices (by ``AdapterTarget/Matrix/index``), for the step's inner loop.
    let layers: [[Pair?]]

    init(_ adapter: LoRAAdapter, layerCount: Int) {
        self.adapter = adapter
        var pairs: [AdapterTarget: Pair] = [:]
        var layers = [[Pair?]](repeating: Array(repeating: nil, count: AdapterTarget.Matrix.allCases.count), count: layerCount)
        func quantized(_ values: [Float], width: Int) -> (UnsafeMutablePointer<Int8>, UnsafeMutablePointer<Float>) {
            let rows = values.count / width
            let q = UnsafeMutablePointer<Int8>.allocate(capacity: values.count)
            let s = UnsafeMutablePointer<Float>.allocate(capacity: rows)
            pk_lora_quantize_rows(values, Int64(rows), Int64(width), q, s)
            return (q, s)
        }
        // The embedding's pair is applied row by row from the adapter's own floats (one row per
        // token), not by the kernels.
        for (target, p) in adapter.pairs where target != .tokenEmbedding {
            let (a, aScale) = quantized(p.a, width: p.columns)
            let (bt, btScale) = quantized(p.bt, width: p.rows)
            let pair = Pair(rank: p.rank, rows: p.rows, columns: p.columns, scale: p.scale, a: a, aScale: aScale, bt: bt, btScale: btScale)
            pairs[target] = pair
            if case .layer(let i, let m) = target, i < layerCount { layers[i][m.index] = pair }
        }
        self.pairs = pairs
        self.layers = layers
    }

    deinit {
        for p in pairs.values {
            p.a.deallocate()
            p.aScale.deallocate()
            p.bt.deallocate()
            p.btScale.deallocate()
        }
    }
}

/// The rows of one step that run each adapter.
struct AdapterRows {
    /// Each adapter used by the step's rows (its id and itself), with where its rows lie in `rows`.
    var groups: [(id: Int, adapter: AttachedAdapter, start: Int, count: Int)] = []
    /// The groups' rows (indices into the step's rows), one group after another: the list the
    /// kernels read, built once per step.
    var rows: [Int32] = []

    var isEmpty: Bool { groups.isEmpty }

    /// Groups `rows` (indices into the step's rows, in order) by adapter id; id 0 is none.
    init(ids: [Int], adapters: [Int: AttachedAdapter]) {
        var lists: [(id: Int, rows: [Int32])] = []
        var at: [Int: Int] = [:]
        for (r, id) in ids.enumerated() where id != 0 {
            if let g = at[id] { lists[g].rows.append(Int32(r)) } else {
                at[id] = lists.count
                lists.append((id, [Int32(r)]))
            }
        }
        for l in lists {
            groups.append((l.id, adapters[l.id]!, rows.count, l.rows.count))
            rows += l.rows
        }
    }
}

extension AdapterRows {
    /// Adds each group's low-rank products for `targets` (the outputs of one matrix product,
    /// `y` rows of stride `ldy`) to its rows: one call to the kernels for all adapters and
    /// targets that share the input `x` (rows of width `k`).
    func apply(_ targets: [(pair: (AttachedAdapter) -> AttachedAdapter.Pair?, y: UnsafeMutablePointer<Float>, ldy: Int)],
               input x: UnsafePointer<Float>, width k: Int, pool: OpaquePointer) {
        rows.withUnsafeBufferPointer { all in
            var ops: [pk_lora_op] = []
            ops.reserveCapacity(groups.count * targets.count)
            for g in groups {
                for t in targets {
                    guard let p = t.pair(g.adapter) else { continue }
                    ops.append(pk_lora_op(a: p.a, bt: p.bt, a_scale: p.aScale, bt_scale: p.btScale, rank: Int64(p.rank),
                                          m: Int64(p.rows), scale: p.scale, y: t.y, ldy: Int64(t.ldy),
                                          rows: all.baseAddress! + g.start, n: Int64(g.count)))
                }
            }
            guard !ops.isEmpty else { return }
            let rc = pk_lora_apply(pool, ops, Int32(ops.count), x, Int64(k))
            precondition(rc == 0, "pk_lora_apply rejected \(ops.count) products; attach() should have refused the adapter")
        }
    }
}
