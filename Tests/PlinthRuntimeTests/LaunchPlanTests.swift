import Testing

@testable import PlinthRuntime

/// The CUDA step's grouping of recorded layers into launches (``PlannedLaunch``): which
/// neighbours become one launch, and which stay as recorded.
struct LaunchPlanTests {
    /// One line per launch: its kind, its post-norm and the norm made at its end.
    static func describe(_ plan: [PlannedLaunch]) -> [String] {
        plan.map { p in
            var s: String
            switch p.kind {
            case .op(let op): s = "op \(String(describing: op).prefix { $0 != "(" })"
            case .attention(let product, let q, let k, let table, let window, _):
                s = "attention \(product.map { "qkv:\($0) " } ?? "")q:\(q.map { "\($0)" } ?? "-") k:\(k.map { "\($0)" } ?? "-") table:\(table) window:\(window.map { "\($0)" } ?? "-")"
            case .product(let input, let w, let through, let post): s = "product \(input)×\(w) via \(through) post:\(post.map { "\($0)" } ?? "-")"
            case .feedForward(let input, let a, let through, let post): s = "feedForward \(input) \(a) via \(through) post:\(post.map { "\($0)" } ?? "-")"
            }
            if let n = p.next { s += " next:\(n.layer).\(n.weight)→\(n.target)" }
            return "\(p.layer): " + s
        }
    }

    /// Every recorded operation is in exactly one launch, in the recorded order.
    static func expectCovers(_ plan: [PlannedLaunch], _ layers: [[LayerOp]]) {
        let planned = plan.flatMap { $0.ops.map { "\($0.layer) \($0.op)" } }
        let recorded = layers.enumerated().flatMap { l, ops in ops.map { "\(l) \($0)" } }
        #expect(planned == recorded)
    }

    static func record(_ layer: (LayerRecorder) -> Void) -> [LayerOp] {
        let r = LayerRecorder()
        layer(r)
        return r.program.ops
    }

    @Test func gemmaLayersPlanAsThreeLaunchesEach() throws {
        let t = try ArchitectureTests.load(TinyGemma().bytes())
        let layers = (0..<2).map { LayerRecorder.ops(of: t.architecture, layer: $0) }
        let plan = PlannedLaunch.plan(layers, hasVector: { _, _ in false })
        #expect(Self.describe(plan) == [
            "0: op norm",
            "0: attention qkv:normed q:attnQNorm k:attnKNorm table:1 window:3",
            "0: product attention×attnOutput via output post:postAttentionNorm next:0.ffnNorm→normed",
            "0: feedForward normed geluTanh via output post:postFFNNorm next:1.attnNorm→normed",
            "1: attention qkv:normed q:attnQNorm k:attnKNorm table:0 window:-",
            "1: product attention×attnOutput via output post:postAttentionNorm next:1.ffnNorm→normed",
            "1: feedForward normed geluTanh via output post:postFFNNorm",
        ])
        Self.expectCovers(plan, layers)
        #expect(layers.joined().count == 28, "14 recorded operations a layer")
    }

    @Test func llamaBlockAddsStraightIntoTheResidual() {
        let layers = (0..<2).map { _ in Self.record { Llama.block($0, attentionScale: 0.125) } }
        let plan = PlannedLaunch.plan(layers, hasVector: { _, _ in false })
        #expect(Self.describe(plan) == [
            "0: op norm",
            "0: attention qkv:normed q:- k:- table:0 window:-",
            "0: product attention×attnOutput via output post:- next:0.ffnNorm→normed",
            "0: feedForward normed silu via output post:- next:1.attnNorm→normed",
            "1: attention qkv:normed q:- k:- table:0 window:-",
            "1: product attention×attnOutput via output post:- next:1.ffnNorm→normed",
            "1: feedForward normed silu via output post:-",
        ])
        Self.expectCovers(plan, layers)
    }

    /// Neighbours that one launch cannot do together stay as recorded.
    @Test func whatCannotBeFusedRunsAsRecorded() {
        // q and k rotated by different tables; a key norm after the key's rotation
        let tables = Self.record { s in
            s.rope(.query, table: 0)
            s.rope(.key, table: 1)
            s.attend(window: nil, scale: 1)
        }
        let late = Self.record { s in
            s.rope(.query, table: 0)
            s.rope(.key, table: 0)
            s.headNorm(.key, .attnKNorm)
            s.attend(window: nil, scale: 1)
        }
        for ops in [tables, late] {
            #expect(Self.describe(PlannedLaunch.plan([ops], hasVector: { _, _ in false })).allSatisfy { $0.hasPrefix("0: op ") })
        }
        // a product's buffer read again after it joins the residual; one whose bias exists
        let reread = Self.record { s in
            s.project(.attention, [(.attnOutput, .output)])
            s.addToResidual(.output)
            s.norm(.output, .ffnNorm, into: .normed)
        }
        #expect(Self.describe(PlannedLaunch.plan([reread], hasVector: { _, _ in false })) == ["0: op project", "0: op addToResidual", "0: op norm"])
        let biased = Self.record { s in
            s.project(.normed, [(.attnQ, .output)])
            s.addToResidual(.output)
        }
        #expect(Self.describe(PlannedLaunch.plan([biased], hasVector: { _, r in r == .attnQBias })) == ["0: op project", "0: op addToResidual"])
        #expect(Self.describe(PlannedLaunch.plan([biased], hasVector: { _, _ in false })) == ["0: product normed×attnQ via output post:-"])
        // a q | k | v product with a bias (Qwen2's) runs before the attention launch, not in it
        let qkvBiased = Self.record { s in
            s.project(.normed, [(.attnQ, .query), (.attnK, .key), (.attnV, .value)])
            s.rope(.query, table: 0)
            s.rope(.key, table: 0)
            s.attend(window: nil, scale: 1)
        }
        #expect(Self.describe(PlannedLaunch.plan([qkvBiased], hasVector: { _, r in r == .attnKBias })) == [
            "0: op project", "0: attention q:- k:- table:0 window:-",
        ])
        #expect(Self.describe(PlannedLaunch.plan([qkvBiased], hasVector: { _, _ in false })) == [
            "0: attention qkv:normed q:- k:- table:0 window:-",
        ])
        // a norm of the residual into the buffer the product went through stays on its own
        let sameBuffer = Self.record { s in
            s.feedForward(.normed, .silu, into: .output)
            s.addToResidual(.output)
            s.norm(.residual, .attnNorm, into: .output)
        }
        #expect(Self.describe(PlannedLaunch.plan([sameBuffer], hasVector: { _, _ in false })) == [
            "0: feedForward normed silu via output post:-", "0: op norm",
        ])
    }
}
