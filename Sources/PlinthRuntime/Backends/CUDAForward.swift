import Foundation
import PlinthCUDA
import Synchronization

/// The forward step on an NVIDIA GPU (PlinthCUDA): the same operations as the CPU step of
/// ``InferenceContext``, in the same order, on device memory.
///
/// Weights are uploaded once, in their GGUF block layouts (the file's bytes, not the CPU's
/// packed copies), into one device allocation. Products of one input lie back to back where
/// their types match (a layer's q, k and v; its gate and up), so that one launch computes them
/// side by side in one activation row; the residual adds are folded into the output and down
/// products. A decode step is mostly launch-bound, so fewer launches is what makes it fast. The KV cache is f16 on the device, in
/// pages of 64 positions (``KVPages``): a slot holds the pages of the positions it stored, and
/// slots share the whole pages of a common prefix. Activations stay on
/// the device; a step uploads its token ids, positions, slots and kv lengths in one copy and
/// downloads only the logits of the rows that asked for them.
///
/// Not thread-safe: its ``InferenceContext`` drives it from one thread at a time.
final class CUDAForward {
    private let ctx: OpaquePointer
    private let config: ModelConfig
    private let maxBatch: Int
    private let contextLength: Int
    private let slotCount: Int
    private let kvDim: Int, qDim: Int
    /// Device description for messages ("NVIDIA H100 80GB HBM3, sm_90").
    let deviceName: String
    /// Kernels launched so far, those captured into graphs included (a replay launches none).
    var kernelLaunches: UInt64 { Self.deviceInfo(ctx).map { UInt64($0.kernel_launches) } ?? 0 }

    /// A matrix on the device.
    private struct Matrix {
        var type: Int32
        var ptr: pkc_ptr
        var rows: Int64   // m: output features
        var cols: Int64   // k: input features

        /// Whether `m`'s rows are rows of this matrix (a run of matrices holds each of them).
        func holds(_ m: Matrix) -> Bool {
            let rowBytes = pkc_ptr(pkc_row_bytes(type, cols))
            return m.type == type && m.cols == cols && m.ptr >= ptr && m.ptr + pkc_ptr(m.rows) * rowBytes <= ptr + pkc_ptr(rows) * rowBytes
        }
    }
    /// Products of one input written side by side in one activation row: each run is one launch
    /// (matrices back to back in memory with one type), its output from `column` on.
    private struct Products {
        let runs: [(w: Matrix, column: Int)]
        /// The runs as pkc_matmul_runs takes them, made once.
        let launches: [pkc_run]
        init(runs: [(w: Matrix, column: Int)]) {
            self.runs = runs
            launches = runs.map { pkc_run(type: $0.w.type, w: $0.w.ptr, m: $0.w.rows, column: Int64($0.column)) }
        }
    }
    private struct Layer {
        var attnNorm, ffnNorm: pkc_ptr
        /// q | k | v, and their biases (runs of vectors back to back) where the model has them.
        var qkv: Products
        var qkvBias: [(ptr: pkc_ptr, column: Int, count: Int)]
        var wo, down: Matrix
        /// gate | up
        var gateUp: Products
        /// Every matrix and vector of the layer by role, for the recorded layers (``plan``).
        var matrices: [LayerTensor: Matrix]
        var vectors: [LayerTensor: pkc_ptr]
    }
    private let embedding: Matrix
    private let output: Matrix
    private let outputNorm: pkc_ptr
    private let layers: [Layer]
    /// Families without the fused step of ``compute(_:ids:positions:slots:kvLen:rows:maskRows:chosen:topK:)``
    /// (Gemma 3) run their architecture's layers as recorded (``LayerOp``), grouped into launches
    /// (``PlannedLaunch``); empty for the fused families.
    private let plan: [PlannedLaunch]
    private let ropes: [RoPE]
    private let embeddingScale: Float?
    private let logitSoftcap: Float?
    /// Whether a step's prompt rows take attention on tensor cores (``promptFrom(_:_:rowsRun:)``).
    private let tensorCoreAttention: Bool

    private let kCache, vCache: pkc_ptr
    /// Halves between one layer's cache and the next's (the pool's pages).
    private let layerStride: Int64
    /// Which pages each slot holds, and their table on the device (the kernels' pkc_kv.pages).
    private var pages: KVPages
    private let pageTable: pkc_ptr
    /// Positions per page: 64 (a slot's last page is on average half empty; a page's keys of one
    /// layer are 64 × kv_dim halves, 24 KiB for SmolLM2).
    static let pageShift: Int32 = 6
    /// Whether the pool holds fewer pages than every slot's whole context
    /// (``init(transformer:contextLength:slots:maxBatch:pagesByUse:recorded:unify:)``'s `pagesByUse`).
    let pagesLimited: Bool

    /// x: the residual stream; h: normed rows; qkv: q | k | v per row (qkvStride floats);
    /// gu: gate | up per row (2 × feed-forward floats), the gate becoming silu(gate) × up;
    /// tmp: a recorded layer's ``StepBuffer/output`` (0 for the fused families).
    private let x, h, qkv, attn, gu, logits, tmp: pkc_ptr
    /// One RoPE table per entry of ``ropes``, and its frequencies (a scaled RoPE's factors on
    /// the device).
    private let ropeTables: [pkc_ptr]
    private let ropeFreqs: [pkc_rope_freqs]
    private let qkvStride: Int
    /// The input rows of the products (the norms' and swiglu's outputs, made by the same launches
    /// as the floats): int8 rows on the GEMV path (one byte per weight read instead of four), f16
    /// rows on the GEMM path (no conversion launch before each product).
    private let xq: pkc_ptr
    /// int32 row tables, one after another, each as long as the step's rows (``metaTable(_:rows:)``):
    /// token ids, positions, slots, kv lengths, logit rows, the logit rows' mask rows (-1: none),
    /// the chosen tokens, the logit rows' k for pkc_topk (0: none), the rows with adapters and the
    /// logit rows with adapters (grouped by adapter: ``AdapterGroup``).
    private let meta: pkc_ptr
    private static let metaTables = 10
    /// Row table `t` of a step of `rows` rows (padded): a step uploads its own rows' tables only,
    /// 32 bytes at one row (40 with adapters) rather than every table at the largest batch (16 KB at 512).
    private func metaTable(_ t: Int, rows: Int) -> pkc_ptr { meta + pkc_ptr(t * rows * MemoryLayout<Int32>.stride) }
    /// pkc_topk's output: LogitsUse.maxTopK (id, logit) pairs per logit row.
    private let topBuffer: pkc_ptr
    private var hostMeta: [Int32]
    /// Allowed-token masks of the step's ``LogitsUse/argmax(allowed:)`` rows, maxBatch rows of
    /// maskWords words (device), and their host staging.
    private let masks: pkc_ptr
    private let maskWords: Int
    private var hostMasks: [UInt32] = []
    /// Captured steps by shape (``run(_:_:)``), shapes run once, and shapes whose capture failed.
    private var graphs: [StepShape: OpaquePointer] = [:]
    private var seenShapes: Set<StepShape> = []
    private var uncapturable: Set<StepShape> = []
    private var allocations: [pkc_ptr] = []
    /// Set where init failed after freeing what it allocated and closing the context: an init
    /// that throws once every stored property is set still runs deinit, which must not close it again.
    private var released = false

    /// The families whose layer the fused step runs; the others run as recorded.
    static let fusedArchitectures: Set<Architecture> = [Llama.architecture, Qwen2.architecture]

    /// Opens device 0 and uploads `transformer`'s weights. Throws ``BackendError/cudaUnavailable(_:)``
    /// when CUDA cannot run this model here, ``BackendError/cudaOutOfMemory(_:slotsThatFit:)`` when its weights
    /// and cache of `slots` × `contextLength` positions do not fit the device's memory,
    /// ``BackendError/cudaFailed(_:)`` when a device call fails.
    /// `pagesByUse`: where that cache does not fit, the pages that do (at least one slot's whole
    /// context), the caller admitting sequences by what they may hold (``pagesLimited``); and at
    /// most `maxPages` pages (tests of that admission), but never fewer than one context's.
    /// `recorded`: run the recorded layers even where the family has the fused step (for tests).
    init(transformer: Transformer, contextLength: Int, slots: Int, maxBatch: Int, pagesByUse: Bool = false, maxPages: Int? = nil,
         recorded: Bool = false, unify: Bool = unifyRuns) throws {
        let c = transformer.config
        let w = transformer.weights
        // A weight type without CUDA kernels makes the model unrunnable here.
        let matrices = [w.tokenEmbedding, w.output] + w.layers.flatMap(\.matrices)
        let ctx = try CUDAForward.open()
        // Llama's block (with Qwen2's biases and RoPE pairs) has a fused step; other families run
        // their recorded layers.
        let architecture = transformer.architecture
        plan = !recorded && CUDAForward.fusedArchitectures.contains(c.architecture) ? []
            : PlannedLaunch.plan((0..<c.layerCount).map { LayerRecorder.ops(of: architecture, layer: $0) },
                                 hasVector: { l, r in w.layers[l][r] != nil })
        ropes = architecture.ropes
        if (0..<c.layerCount).contains(where: { l in LayerRecorder.ops(of: architecture, layer: l).contains {
            if case .attend(_, _, let cap?) = $0 { cap > 0 } else { false } } }) {
            pkc_close(ctx)
            throw BackendError.cudaUnavailable("soft-capped attention (\(c.architecture)) has no CUDA kernel yet")
        }
        embeddingScale = architecture.embeddingScale
        logitSoftcap = architecture.logitSoftcap
        if let m = matrices.first(where: { pkc_supports_type(Int32($0.type.rawValue)) == 0 }) {
            pkc_close(ctx)
            throw BackendError.cudaUnavailable("tensor '\(m.name)' uses type \(m.type.name), which has no CUDA kernels")
        }
        guard c.headDim >= 8, c.headDim <= 256, c.headDim & (c.headDim - 1) == 0,
              c.headCount % c.kvHeadCount == 0, c.headCount / c.kvHeadCount <= 8 else {
            pkc_close(ctx)
            throw BackendError.cudaUnavailable("the CUDA attention kernel needs a power-of-two head size from 8 to 256 and at most 8 query heads per kv head (model: \(c.headDim), \(c.headCount)/\(c.kvHeadCount))")
        }
        // q | k | v and gate | up with one type where that is exact (``unifiedRuns(_:enabled:)``);
        // the rewritten matrices' host bytes are freed once uploaded.
        var (layerWeights, rewritten) = Self.unifiedRuns(w.layers, enabled: unify)
        defer { for b in rewritten { b.deallocate() } }
        self.ctx = ctx
        config = c
        self.maxBatch = maxBatch
        self.contextLength = contextLength
        self.slotCount = slots
        kvDim = c.kvHeadCount * c.headDim
        qDim = c.headCount * c.headDim
        tensorCoreAttention = pkc_attention_uses_mma(ctx, Int32(c.headDim)) != 0
        let opened = Self.deviceInfo(ctx)
        let memoryAtOpen = opened.map { (free: Int($0.free_memory), total: Int($0.total_memory)) }
        if var info = opened {
            let name = withUnsafeBytes(of: &info.name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            // Whether launches overlap (pkc_set_dependent_launch), where the device could: a
            // benchmark's record then says which way it ran.
            let off = withUnsafeBytes(of: &info.dependent_launch_off) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            let overlap = info.dependent_launch != 0 ? ", dependent launch" : info.cc_major >= 9 ? ", no dependent launch (\(off))" : ""
            // Kernels as PTX: NVRTC predates the device, whose driver compiles them (say so: a
            // newer NVRTC gives machine code, and the device's own features where it has more).
            let ptx = info.kernel_ptx != 0 ? ", kernels as PTX for compute_\(info.kernel_arch) (NVRTC predates the device)" : ""
            deviceName = "\(name), sm_\(info.cc_major)\(info.cc_minor)\(overlap)\(ptx)"
        } else {
            deviceName = "CUDA device 0"
        }

        // Everything below allocates on the device; on failure free what was allocated. Running
        // out of device memory while loading makes CUDA unavailable for this model (so that `auto`
        // runs it on the CPU), saying what did not fit.
        var allocs: [pkc_ptr] = []
        /// `fit`: the KV slots that would fit, where known; else fewer than asked for.
        func outOfMemory(_ what: String, slotsThatFit fit: Int? = nil) -> BackendError {
            let free = memoryAtOpen.map { ", of \(Self.mib($0.free)) free when the model began to load (\(Self.mib($0.total)) in all)" } ?? ""
            return .cudaOutOfMemory("\(what) did not fit\(free)", slotsThatFit: fit ?? max(0, slots - 1))
        }
        func alloc(_ bytes: Int, _ what: String) throws -> pkc_ptr {
            var p: pkc_ptr = 0
            let rc = pkc_alloc(ctx, max(bytes, 16), &p)
            if rc == Int32(PKC_ERR_OUT_OF_MEMORY.rawValue) { throw outOfMemory("\(what) (\(Self.mib(bytes)))") }
            guard rc == 0 else { throw BackendError.cudaFailed("allocating \(bytes) bytes for \(what): \(String(cString: pkc_error(ctx)))") }
            allocs.append(p)
            return p
        }
        func check(_ rc: Int32, _ what: String) throws {
            guard rc == 0 else { throw BackendError.cudaFailed("\(what): \(String(cString: pkc_error(ctx)))") }
        }
        do {
            // One allocation for all weights, each tensor at a 256-byte boundary; a tensor whose
            // bytes were already placed (a tied embedding and output) is placed once.
            var offsets: [UnsafeRawPointer: Int] = [:]
            var order: [(UnsafeRawPointer, Int)] = []
            var total = 0
            // `joined`: right after the tensor placed before (no alignment gap), as a run of one
            // product or one bias vector.
            func place(_ data: UnsafeRawPointer, _ bytes: Int, joined: Bool = false) {
                guard offsets[data] == nil else { return }
                if !joined { total = (total + 255) / 256 * 256 }
                offsets[data] = total
                order.append((data, bytes))
                total += bytes
            }
            func bytes(_ t: WeightTensor) -> Int { t.rowBytes * t.rowCount }
            func vectorBytes(_ t: WeightTensor) -> Int { t.rowLength * MemoryLayout<Float>.stride }
            func placeSideBySide(_ ts: [WeightTensor]) {
                var previousPlacedHere = false
                for (i, t) in ts.enumerated() {
                    let new = offsets[t.data] == nil
                    let joined = previousPlacedHere && new && t.type == ts[i - 1].type && t.rowLength == ts[i - 1].rowLength
                    place(t.data, bytes(t), joined: joined)
                    previousPlacedHere = new
                }
            }
            place(w.tokenEmbedding.data, bytes(w.tokenEmbedding))
            place(w.output.data, bytes(w.output))
            for l in layerWeights {
                for group in Self.sideBySide(l) { placeSideBySide(group) }
                place(l.wo.data, bytes(l.wo))
                place(l.wDown.data, bytes(l.wDown))
            }
            place(w.outputNorm.data, vectorBytes(w.outputNorm))
            let biasRoles: [LayerTensor] = [.attnQBias, .attnKBias, .attnVBias]
            for l in layerWeights {
                // The norms' weights (and any other vector a family declares); the biases back to back.
                for r in LayerTensor.allCases where !r.isMatrix && !biasRoles.contains(r) {
                    if let t = l[r] { place(t.data, vectorBytes(t)) }
                }
                let biases = biasRoles.compactMap { l[$0] }
                for (i, b) in biases.enumerated() { place(b.data, vectorBytes(b), joined: i > 0) }
            }
            // The weights, the KV cache and the largest activations (allocated below, at maxBatch
            // rows: the logits, the gated product's, the step's vectors; the GEMM path's scratch for
            // the output matrix as f16 and x's f16 rows), checked before any upload. The cache: every
            // slot's whole context, and one page for the padding rows (``paddedRows(_:)``).
            let pageLength = 1 << Int(Self.pageShift), pagesPerSlot = (contextLength + pageLength - 1) / pageLength
            let pageBytes = 2 * pageLength * kvDim * c.layerCount * MemoryLayout<UInt16>.stride  // keys and values, all layers
            let everyPage = slots * pagesPerSlot + 1
            var pageCount = everyPage
            let activationBytes = maxBatch * MemoryLayout<Float>.stride
                * (c.vocabularySize + 2 * c.feedForwardLength + 3 * c.embeddingLength + 2 * qDim + 2 * kvDim)
                + MemoryLayout<UInt16>.stride * (c.vocabularySize * c.embeddingLength + maxBatch * max(c.embeddingLength, c.feedForwardLength, qDim))
            if let memory = memoryAtOpen, total + everyPage * pageBytes + activationBytes > memory.free {
                // The pages that fit: beside the f16 copies of the weights (``copyF16(_:_:rows:)``'s
                // budget and the room it leaves) where that leaves one context, else beside what is
                // allocated later (adapters, scratch that grows: a twentieth of the memory, at most 1 GiB).
                let room = memory.free - total - activationBytes
                var copies = 0
                if Self.f16Copies && maxBatch >= Int(pkc_gemm_min_rows(ctx)) {
                    let quantized = ([w.output] + layerWeights.flatMap(\.matrices)).filter { $0.type != .f32 && $0.type != .f16 }
                    copies = min(quantized.reduce(0) { $0 + $1.rowCount * $1.rowLength * 2 }, memory.total / 4) + max(1 << 30, memory.total / 10)
                }
                let fit = [room - copies, room - min(memory.total / 20, 1 << 30)].map { $0 / pageBytes }.first { $0 >= pagesPerSlot + 1 }
                if pagesByUse, let fit {
                    pageCount = fit
                } else {
                    let slotsThatFit = pagesByUse ? 0 : max(0, (memory.free - total - activationBytes - pageBytes) / (pagesPerSlot * pageBytes))
                    throw outOfMemory("the weights (\(Self.mib(total))), the KV cache (\(Self.mib(everyPage * pageBytes)): \(slots) slot\(slots == 1 ? "" : "s") of \(contextLength) positions\(pagesByUse ? ", or at least one" : "")) and activations for \(maxBatch) rows (\(Self.mib(activationBytes)))",
                                      slotsThatFit: slotsThatFit)
                }
            }
            if pagesByUse, let cap = maxPages { pageCount = min(pageCount, max(cap, pagesPerSlot + 1)) }
            pagesLimited = pageCount < everyPage
            pages = KVPages(pageLength: pageLength, contextLength: contextLength, slots: slots, pageCount: pageCount)
            layerStride = Int64(pageCount * pageLength * kvDim)
            let cacheBytes = Int(layerStride) * c.layerCount * MemoryLayout<UInt16>.stride
            let base = try alloc(total, "the weights")
            for (data, n) in order {
                try check(pkc_upload(ctx, base + pkc_ptr(offsets[data]!), data, n), "uploading the weights")
            }
            // From pageable memory an upload is staged before it returns.
            for b in rewritten { b.deallocate() }
            rewritten = []
            // The kernels of the model's weight formats (and F32's, which gathers rows of
            // activations), compiled together (in parallel) or read from the cache now: a format
            // first needed inside a captured step would be refused.
            let types = ([w.tokenEmbedding, w.output] + layerWeights.flatMap(\.matrices)).map { Int32($0.type.rawValue) }
                + [Int32(GGMLType.f32.rawValue)]
            try check(pkc_prepare(ctx, types, Int32(types.count)), "preparing the CUDA kernels")
            func matrix(_ t: WeightTensor) -> Matrix {
                Matrix(type: Int32(t.type.rawValue), ptr: base + pkc_ptr(offsets[t.data]!), rows: Int64(t.rowCount), cols: Int64(t.rowLength))
            }
            func vector(_ t: WeightTensor) -> pkc_ptr { base + pkc_ptr(offsets[t.data]!) }
            // Runs of matrices that lie back to back with one type and row length become one matrix.
            func products(_ ts: [WeightTensor]) -> Products {
                var runs: [(w: Matrix, column: Int)] = []
                var column = 0
                for t in ts {
                    let m = matrix(t)
                    if let last = runs.last, last.w.type == m.type, last.w.cols == m.cols,
                       last.w.ptr + pkc_ptr(Int(last.w.rows) * t.rowBytes) == m.ptr {
                        runs[runs.count - 1].w.rows += m.rows
                    } else {
                        runs.append((m, column))
                    }
                    column += t.rowCount
                }
                return Products(runs: runs)
            }
            let qDim = c.headCount * c.headDim, kvDim = c.kvHeadCount * c.headDim
            func biases(_ l: LayerWeights) -> [(ptr: pkc_ptr, column: Int, count: Int)] {
                var runs: [(ptr: pkc_ptr, column: Int, count: Int)] = []
                for (b, column) in [(l.bq, 0), (l.bk, qDim), (l.bv, qDim + kvDim)] {
                    guard let b else { continue }
                    let p = vector(b)
                    if let last = runs.last, last.column + last.count == column,
                       last.ptr + pkc_ptr(last.count * MemoryLayout<Float>.stride) == p {
                        runs[runs.count - 1].count += b.rowLength
                    } else {
                        runs.append((p, column, b.rowLength))
                    }
                }
                return runs
            }
            embedding = matrix(w.tokenEmbedding)
            output = matrix(w.output)
            outputNorm = vector(w.outputNorm)
            layers = layerWeights.map { l in
                let roles = LayerTensor.allCases.compactMap { r in l[r].map { (r, $0) } }
                let groups = Self.sideBySide(l).map(products)
                return Layer(attnNorm: vector(l.attnNorm), ffnNorm: vector(l.ffnNorm),
                             qkv: groups[0], qkvBias: biases(l), wo: matrix(l.wo), down: matrix(l.wDown),
                             gateUp: groups[1],
                             matrices: Dictionary(uniqueKeysWithValues: roles.filter { $0.0.isMatrix }.map { ($0.0, matrix($0.1)) }),
                             vectors: Dictionary(uniqueKeysWithValues: roles.filter { !$0.0.isMatrix }.map { ($0.0, vector($0.1)) }))
            }

            // The KV cache: all layers' keys in one array, values in another; the page table.
            kCache = try alloc(cacheBytes, "the key cache")
            vCache = try alloc(cacheBytes, "the value cache")
            let table = pages.table
            let tableOnDevice = try alloc(table.count * MemoryLayout<Int32>.stride, "the KV page table")
            try table.withUnsafeBytes { try check(pkc_upload(ctx, tableOnDevice, $0.baseAddress, $0.count), "uploading the KV page table") }
            pageTable = tableOnDevice
            pages.clean()

            let n = maxBatch, e = c.embeddingLength, f = c.feedForwardLength
            let fl = MemoryLayout<Float>.stride
            x = try alloc(n * e * fl, "activations")
            h = try alloc(n * max(e, qDim) * fl, "activations")
            qkvStride = qDim + 2 * kvDim
            qkv = try alloc(n * qkvStride * fl, "activations")
            attn = try alloc(n * qDim * fl, "activations")
            gu = try alloc(n * 2 * f * fl, "activations")
            // The input rows: int8 ones below the GEMM path, f16 ones from it (at the largest batch).
            let maxK = Int64(max(e, f, qDim)), gemmRows = Int(pkc_gemm_min_rows(ctx)), q8Rows = min(n, max(gemmRows - 1, 0))
            let f16RowBytes = n >= gemmRows ? n * pkc_input_row_bytes(ctx, maxK, Int64(n)) : 0
            xq = try alloc(max(q8Rows * pkc_q8_row_bytes(maxK), f16RowBytes), "input rows")
            logits = try alloc(n * c.vocabularySize * fl, "logits")
            ropeTables = try ropes.map { _ in try alloc(n * c.ropeDims * fl, "a RoPE table") }
            ropeFreqs = try ropes.map { rope in
                var factors: pkc_ptr = 0
                if let f = rope.factors {
                    factors = try alloc(f.count * fl, "RoPE frequency factors")
                    try f.withUnsafeBytes { try check(pkc_upload(ctx, factors, $0.baseAddress, $0.count), "uploading RoPE frequency factors") }
                }
                return pkc_rope_freqs(base: rope.base, scale: rope.scale, factors: factors)
            }
            tmp = plan.isEmpty ? 0 : try alloc(n * e * fl, "activations")
            meta = try alloc(Self.metaTables * n * MemoryLayout<Int32>.stride, "row tables")
            hostMeta = Array(repeating: 0, count: Self.metaTables * n)
            topBuffer = try alloc(n * LogitsUse.maxTopK * MemoryLayout<TokenCandidate>.stride, "sampling candidates")
            maskWords = (c.vocabularySize + 31) / 32
            masks = try alloc(n * maskWords * MemoryLayout<UInt32>.stride, "token masks")
            // The GEMM path (prefill, batches): f16 copies of the weights where memory allows, read
            // by every such product instead of a dequantization per product and step. Then scratch
            // for the f16 rows of x, and of the weights left without a copy, at the largest batch,
            // so that no step allocates.
            // The output first: the largest product, and one every batched decode step makes.
            var products: [Matrix] = [output]
            for l in layers {
                let runs: [Matrix] = l.qkv.runs.map(\.w) + l.gateUp.runs.map(\.w)
                let others = l.matrices.values.filter { m in !runs.contains { $0.holds(m) } && m.ptr != l.wo.ptr && m.ptr != l.down.ptr }
                products += runs + [l.wo, l.down] + others.sorted { $0.ptr < $1.ptr }
            }
            let copied = try Self.copyF16(ctx, products, rows: n)
            for m in products {
                let rc = pkc_reserve(ctx, copied.contains(m.ptr) ? 0 : m.rows, m.cols, Int64(n))
                if rc == Int32(PKC_ERR_OUT_OF_MEMORY.rawValue) { throw outOfMemory("the products' scratch (\(String(cString: pkc_error(ctx))))") }
                try check(rc, "reserving scratch")
            }
            try check(pkc_synchronize(ctx), "uploading the weights")
        } catch {
            released = true
            for p in allocs { _ = pkc_free(ctx, p) }
            pkc_close(ctx)
            throw error
        }
        allocations = allocs
    }

    deinit {
        guard !released else { return }
        for g in graphs.values { pkc_graph_destroy(ctx, g) }
        for a in adapters.values { _ = pkc_free(ctx, a.memory) }
        for p in allocations { _ = pkc_free(ctx, p) }
        pkc_close(ctx)
    }

    /// `bytes` in MiB, for messages.
    static func mib(_ bytes: Int) -> String { "\((bytes + (1 << 20) - 1) >> 20) MiB" }

    /// The reason CUDA could not be opened in this process, once it failed (not retried).
    private static let openFailure = Mutex<String?>(nil)

    /// `PLINTH_CUDA_F16_WEIGHTS=0` turns the GEMM path's f16 copies of the weights off.
    static let f16Copies = ProcessInfo.processInfo.environment["PLINTH_CUDA_F16_WEIGHTS"] != "0"

    /// Makes f16 copies (pkc_cache_f16) of `products`, in order, while they fit the budget: at
    /// most a quarter of the device's memory, leaving free at least 1 GiB or a tenth of it (for
    /// adapters, attention's scratch, other contexts) beside the GEMM path's own scratch (the f16
    /// rows of x at `rows` rows, and the largest product that may be left without a copy). None
    /// where steps of `rows` rows never reach the GEMM path. Returns the copied matrices' addresses.
    private static func copyF16(_ ctx: OpaquePointer, _ products: [Matrix], rows: Int) throws -> Set<pkc_ptr> {
        guard f16Copies, rows >= Int(pkc_gemm_min_rows(ctx)), let info = deviceInfo(ctx) else { return [] }
        let f32 = Int32(GGMLType.f32.rawValue), f16 = Int32(GGMLType.f16.rawValue)
        // The f16 bytes of a product's dequantized weights (0: F32 and F16 weights need none).
        let sizes = products.map { $0.type == f32 || $0.type == f16 ? Int64(0) : $0.rows * $0.cols * 2 }
        var laterMax = sizes, skippedMax: Int64 = 0 // laterMax[i]: the largest of sizes[i + 1...]
        for i in sizes.indices.reversed() { laterMax[i] = i + 1 < sizes.count ? max(sizes[i + 1], laterMax[i + 1]) : 0 }
        let total = Int64(info.total_memory), xRows = Int64(rows) * (products.map(\.cols).max() ?? 0) * 2
        var budget = min(Int64(info.free_memory) - max(Int64(1) << 30, total / 10) - xRows, total / 4)
        var copied: Set<pkc_ptr> = []
        for (i, m) in products.enumerated() where sizes[i] > 0 && !copied.contains(m.ptr) {
            guard sizes[i] + max(skippedMax, laterMax[i]) <= budget else {
                skippedMax = max(skippedMax, sizes[i])
                continue
            }
            let rc = pkc_cache_f16(ctx, m.type, m.ptr, m.rows, m.cols)
            if rc == Int32(PKC_ERR_OUT_OF_MEMORY.rawValue) { break } // the budget's view of free memory was optimistic
            guard rc == 0 else { throw BackendError.cudaFailed("copying weights to f16: \(String(cString: pkc_error(ctx)))") }
            budget -= sizes[i]
            copied.insert(m.ptr)
        }
        return copied
    }

    /// A layer's products of one input, each written side by side into one activation row: q | k | v
    /// and gate | up (``Layer/qkv``, ``Layer/gateUp``, in this order).
    private static func sideBySide(_ l: LayerWeights) -> [[WeightTensor]] { [[l.wq, l.wk, l.wv], [l.wGate, l.wUp]] }

    /// `PLINTH_CUDA_UNIFY=0` keeps side-by-side products in their file's types (``unifiedRuns(_:enabled:)``).
    static let unifyRuns = ProcessInfo.processInfo.environment["PLINTH_CUDA_UNIFY"] != "0"
    /// The most bytes a group's rewrite may add: reading 4 MiB more takes an H100 about 1.3 µs a
    /// step, less than the launch and the fork and join of a second run.
    static let maxUnifyGrowth = 4 << 20

    /// A layer's q | k | v (or gate | up) of different types is a launch per type, and at one or two
    /// rows the runs after the first go on a side stream forked and joined around them (12 of
    /// Qwen2.5-Coder-0.5B's 24 layers: q and k Q5_0, v Q8_0). Where every type of the group has an
    /// exact Q8_0 form (``GGMLType/convertsExactlyToQ8_0``) and the rewrite adds at most
    /// ``maxUnifyGrowth`` bytes, the group's other matrices are rewritten as Q8_0: the same weights,
    /// one launch. Returns the layers with the rewritten matrices, and their buffers (the caller
    /// frees them once uploaded).
    static func unifiedRuns(_ layers: [LayerWeights], enabled: Bool) -> (layers: [LayerWeights], buffers: [UnsafeMutableRawPointer]) {
        guard enabled else { return (layers, []) }
        var buffers: [UnsafeMutableRawPointer] = []
        let unified = layers.map { l in
            var rewrite: [UnsafeRawPointer: WeightTensor] = [:]
            for group in sideBySide(l) {
                let others = group.filter { $0.type != .q8_0 }
                guard Set(group.map(\.type)).count > 1, Set(group.map(\.rowLength)).count == 1,
                      others.allSatisfy(\.type.convertsExactlyToQ8_0),
                      others.reduce(0, { $0 + $1.rowCount * (GGMLType.q8_0.rowBytes($1.rowLength)! - $1.rowBytes) }) <= maxUnifyGrowth
                else { continue }
                for t in others where rewrite[t.data] == nil {
                    let buffer = UnsafeMutableRawPointer.allocate(byteCount: t.rowCount * GGMLType.q8_0.rowBytes(t.rowLength)!, alignment: 16)
                    buffers.append(buffer)
                    // Total by the checks above: the type converts, and its rows are whole blocks.
                    try! t.type.rewriteAsQ8_0(t.data, count: t.rowCount * t.rowLength, into: buffer)
                    rewrite[t.data] = WeightTensor(name: t.name, type: .q8_0, rowLength: t.rowLength, rowCount: t.rowCount,
                                                   data: UnsafeRawPointer(buffer))
                }
            }
            return rewrite.isEmpty ? l : l.mapMatrices { rewrite[$0.data] ?? $0 }
        }
        return (unified, buffers)
    }

    private static func deviceInfo(_ ctx: OpaquePointer) -> pkc_device_info? {
        var info = pkc_device_info()
        return pkc_device_info_get(ctx, &info) == 0 ? info : nil
    }

    /// Bytes of the GEMM path's f16 copies of the weights (``copyF16(_:_:rows:)``).
    var f16WeightBytes: Int { Self.deviceInfo(ctx).map { Int($0.f16_weight_bytes) } ?? 0 }

    static func open() throws -> OpaquePointer {
        if let why = openFailure.withLock({ $0 }) { throw BackendError.cudaUnavailable(why) }
        let dir = Backend.cudaCacheDirectory.path
        var handle: OpaquePointer?
        var message = [CChar](repeating: 0, count: 1024)
        let rc = pkc_open(0, dir, &handle, &message, message.count)
        if rc == 0, let handle { return handle }
        let text = message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        let why = "\(String(cString: pkc_status_name(rc)))\(text.isEmpty ? "" : ": " + text)"
        // A missing driver, device or library stays missing; other failures may be retried.
        if rc == Int32(PKC_ERR_NO_DRIVER.rawValue) || rc == Int32(PKC_ERR_NO_DEVICE.rawValue)
            || rc == Int32(PKC_ERR_NO_NVRTC.rawValue) || rc == Int32(PKC_ERR_NO_CUBLAS.rawValue) {
            openFailure.withLock { $0 = why }
        }
        throw BackendError.cudaUnavailable(why)
    }

    @inline(__always)
    private func check(_ rc: Int32, _ what: StaticString) throws {
        guard rc == 0 else { throw BackendError.cudaFailed("\(what): \(String(cString: pkc_error(ctx)))") }
    }

    /// A product input's rows in the form its product reads (``xq``; pk_cuda.h's input rows):
    /// int8 rows below the GEMM path, f16 rows on it; or none (ptr 0): the product reads the floats.
    private struct InputRows {
        var ptr: pkc_ptr
        var stride: Int64
        static let none = InputRows(ptr: 0, stride: 0)
    }

    /// The input rows for an input of `n` rows whose products are `ws` (one row length), where
    /// some product reads them; else none, and the launch that makes the input writes no rows.
    /// One decision per input, for its maker and all its readers, so no product reads rows that
    /// were not written this step.
    private func inputRows(for ws: [Matrix], _ n: Int) -> InputRows {
        guard let k = ws.first?.cols, ws.contains(where: { pkc_matmul_reads_rows(ctx, $0.type, $0.rows, $0.cols, Int64(n)) != 0 })
        else { return .none }
        return InputRows(ptr: xq, stride: Int64(pkc_input_row_bytes(ctx, k, Int64(n))))
    }

    /// The input rows attention writes for the products of its output by `ws`: f16 rows on the GEMM
    /// path (pkc_attention_window's rows), none below it (that product reads attention's floats).
    private func attentionRows(_ ws: [Matrix], _ n: Int) -> InputRows {
        Int64(n) >= pkc_gemm_min_rows(ctx) ? inputRows(for: ws, n) : .none
    }

    /// The input rows of the down product's input (the gated activation): none at the rows where the
    /// gated product can run fused (1 or 2 on the GEMV path; its down product reads floats), also
    /// where it does not (turned off, an adapter on gate or up, gate and up not one run), so that a
    /// row's logits do not depend on the other rows' adapters or on the switch.
    private func downRows(_ down: Matrix, _ n: Int) -> InputRows {
        pkc_glu_rows(ctx, Int64(n)) != 0 ? .none : inputRows(for: [down], n)
    }

    /// out += W input: a product feeding the residual stream; with `norm`, then out's rows
    /// normalized by those weights into `h` (and the input rows `nq`), in the product's launch
    /// on the GEMV path (pkc_matmul_add_norm).
    private func matmulAdd(_ w: Matrix, _ input: pkc_ptr, _ ldx: Int, _ q: InputRows, _ n: Int, _ out: pkc_ptr, _ ldy: Int,
                           norm: pkc_ptr? = nil, _ nq: InputRows = .none) throws {
        guard let norm else {
            try check(pkc_matmul_q8(ctx, w.type, w.ptr, w.rows, w.cols, input, Int64(ldx), q.ptr, q.stride, Int64(n), out,
                                    Int64(ldy), 1), "matmul")
            return
        }
        var spec = pkc_norm(weight: norm, eps: config.rmsEpsilon, out: h, ldo: Int64(config.embeddingLength), q: nq.ptr, ldq: nq.stride)
        try check(pkc_matmul_add_norm(ctx, w.type, w.ptr, w.rows, w.cols, input, Int64(ldx), q.ptr, q.stride, Int64(n), out,
                                      Int64(ldy), &spec), "matmul and norm")
    }

    /// Each run of `p` times `input`, written side by side into rows of `out` (stride `ldy`);
    /// runs of different types overlap on the device (pkc_matmul_runs).
    private func matmul(_ p: Products, _ input: pkc_ptr, _ ldx: Int, _ q: InputRows, _ n: Int, _ out: pkc_ptr, _ ldy: Int) throws {
        try check(pkc_matmul_runs(ctx, p.launches, Int32(p.launches.count), p.runs[0].w.cols, input, Int64(ldx), q.ptr, q.stride,
                                  Int64(n), out, Int64(ldy)), "matmul")
    }

    /// Layer `l`'s q | k | v product into qkv, then (in its last block where it can) the bias (one
    /// vector over the row, or 0), the head norms (0: none), RoPE by `table` and the cache store:
    /// pkc_matmul_runs_rope_store, for the fused step and the planned one alike.
    private func qkvRopeStore(_ l: Int, _ input: pkc_ptr, _ ldx: Int, _ q: InputRows, _ n: Int, table: pkc_ptr, bias: pkc_ptr = 0,
                              qNorm: pkc_ptr = 0, kNorm: pkc_ptr = 0, positions: pkc_ptr, slots: pkc_ptr) throws {
        let c = config, p = layers[l].qkv
        var rope = pkc_rope_store(cache: cacheOf(l), q_heads: Int32(c.headCount), kv_heads: Int32(c.kvHeadCount), head_dim: Int32(c.headDim),
                                  rope_dims: Int32(c.ropeDims), table: table, neox: neox, bias: bias, slots: slots, positions: positions,
                                  q_norm: qNorm, k_norm: kNorm, eps: c.rmsEpsilon)
        try check(pkc_matmul_runs_rope_store(ctx, p.launches, Int32(p.launches.count), p.runs[0].w.cols, input, Int64(ldx), q.ptr, q.stride,
                                             Int64(n), qkv, Int64(qkvStride), &rope), "matmul and rope")
    }

    /// An attached adapter's pairs on the device (one allocation): the int8 copies the CPU's
    /// kernels read (``AttachedAdapter``), and the embedding's pair as floats.
    private struct DeviceAdapter {
        struct Pair {
            var a, bt, aScale, btScale: pkc_ptr
            var rank, rows: Int64
            var scale: Float
        }
        /// By layer, then ``AdapterTarget/Matrix/index``.
        var layers: [[Pair?]]
        var output: Pair?
        var embedding: (a: pkc_ptr, bt: pkc_ptr, rank: Int64, vocabulary: Int64, scale: Float)?
        var memory: pkc_ptr
    }
    private var adapters: [Int: DeviceAdapter] = [:]

    /// Places `adapter`'s pairs on the device for the rows of later steps that name `id`.
    func attach(_ id: Int, _ adapter: AttachedAdapter) throws {
        var pieces: [(offset: Int, bytes: Int, upload: (pkc_ptr) throws -> Void)] = []
        var total = 0
        /// The offset of a piece of `bytes` in the allocation (16-byte aligned).
        func place(_ bytes: Int, _ upload: @escaping (pkc_ptr) throws -> Void) -> Int {
            let offset = (total + 15) / 16 * 16
            pieces.append((offset, bytes, upload))
            total = offset + bytes
            return offset
        }
        func place(_ data: UnsafeRawPointer, _ bytes: Int) -> Int {
            place(bytes) { [ctx] dst in try self.check(pkc_upload(ctx, dst, data, bytes), "uploading an adapter") }
        }
        func place(_ values: [Float]) -> Int {
            place(values.count * MemoryLayout<Float>.stride) { [ctx] dst in
                try values.withUnsafeBytes { try self.check(pkc_upload(ctx, dst, $0.baseAddress, $0.count), "uploading an adapter") }
            }
        }
        let fl = MemoryLayout<Float>.stride
        var offsets: [AdapterTarget: (a: Int, bt: Int, aScale: Int, btScale: Int)] = [:]
        for (target, p) in adapter.pairs {
            offsets[target] = (place(p.a, p.rank * p.columns), place(p.bt, p.rank * p.rows),
                               place(p.aScale, p.rank * fl), place(p.btScale, p.rank * fl))
        }
        /// A pair's place on the device, by its target.
        func devicePair(_ target: AdapterTarget, _ memory: pkc_ptr) -> DeviceAdapter.Pair? {
            guard let p = adapter.pairs[target], let o = offsets[target] else { return nil }
            return DeviceAdapter.Pair(a: memory + pkc_ptr(o.a), bt: memory + pkc_ptr(o.bt), aScale: memory + pkc_ptr(o.aScale),
                                      btScale: memory + pkc_ptr(o.btScale), rank: Int64(p.rank), rows: Int64(p.rows), scale: p.scale)
        }
        // The embedding's pair is read as floats, as LoRAPair.addDelta reads it.
        let embedding = adapter.adapter.pairs[.tokenEmbedding]
        let embeddingOffsets = embedding.map { (a: place($0.a), bt: place($0.bt)) }
        var memory: pkc_ptr = 0
        try check(pkc_alloc(ctx, max(total, 16), &memory), "allocating an adapter")
        do {
            for p in pieces { try p.upload(memory + pkc_ptr(p.offset)) }
            try check(pkc_synchronize(ctx), "uploading an adapter")
        } catch {
            _ = pkc_free(ctx, memory)
            throw error
        }
        let matrices = AdapterTarget.Matrix.allCases
        var device = DeviceAdapter(layers: (0..<config.layerCount).map { l in matrices.map { devicePair(.layer(l, $0), memory) } },
                                   output: devicePair(.output, memory), embedding: nil, memory: memory)
        if let e = embedding, let o = embeddingOffsets {
            device.embedding = (memory + pkc_ptr(o.a), memory + pkc_ptr(o.bt), Int64(e.rank), Int64(e.rows), e.scale)
        }
        adapters[id] = device
    }

    /// Frees adapter `id`'s pairs and the captured steps that used them.
    func detach(_ id: Int) {
        guard let a = adapters.removeValue(forKey: id) else { return }
        for (shape, g) in graphs where (shape.adapterRows + shape.adapterLogitRows).contains(where: { $0.id == id }) {
            pkc_graph_destroy(ctx, g)
            graphs[shape] = nil
        }
        _ = pkc_free(ctx, a.memory)
    }

    /// Makes slot `target` hold the first `count` positions of slot `source`: their whole pages
    /// shared, the last partly filled one copied.
    func copyPrefix(from source: Int, to target: Int, count: Int) throws {
        if let copy = try pages.share(from: source, to: target, count: count) { try copyPages([copy]) }
    }

    /// Frees slot `slot`'s pages past its first `keeping` positions.
    func truncate(slot: Int, keeping: Int) { pages.truncate(slot: slot, keeping: keeping) }

    /// Free pages; the pages slot `slot` takes to write positions `first...last`; the pages that
    /// emptying `slots` frees; the pages the cache has for sequences (the padding rows' aside).
    var pagesFree: Int { pages.freeCount }
    func pagesToWrite(slot: Int, from first: Int, through last: Int) -> Int { pages.pagesToWrite(slot: slot, from: first, through: last) }
    func pagesFreed(emptying slots: Set<Int>) -> Int { pages.pagesFreed(emptying: slots) }
    var pageBudget: (pageLength: Int, pages: Int) { (pages.pageLength, pages.pageCount - 1) }

    /// Runs copies of pages' first rows in every layer, one launch for them all (up to 16): a page
    /// is the slot of a slotted view of the pool.
    private func copyPages(_ copies: [KVPages.Copy]) throws {
        guard !copies.isEmpty else { return }
        var pool = pkc_kv()
        (pool.k, pool.v, pool.slot_stride, pool.kv_dim) = (kCache, vCache, Int64(pages.pageLength * kvDim), Int64(kvDim))
        let list = copies.map { pkc_kv_copy(src: $0.from, dst: $0.to, count: Int64($0.rows)) }
        try check(pkc_copy_kv(ctx, &pool, Int32(config.layerCount), layerStride, list, Int32(list.count)), "copying KV pages")
    }

    /// Gives the slots of rows `range` of `batch` the pages their positions need (copying shared
    /// ones they write into), and uploads the rows of the page table that changed.
    private func preparePages(_ batch: Batch, _ range: Range<Int>) throws {
        var spans: [Int: (first: Int, last: Int)] = [:]
        for i in range {
            let p = Int(batch.positions[i])
            spans[batch.slots[i]] = spans[batch.slots[i]].map { (min($0.first, p), max($0.last, p)) } ?? (p, p)
        }
        var copies: [KVPages.Copy] = [], refused: (any Error)?
        for (slot, span) in spans.sorted(by: { $0.key < $1.key }) {
            do { copies += try pages.prepare(slot: slot, writing: span.first, through: span.last) } catch { refused = error; break }
        }
        // Slots prepared before a refused one keep their new pages, which must hold their rows either way.
        try copyPages(copies)
        if let refused { throw refused }
        guard let rows = pages.dirty else { return }
        let per = pages.pagesPerSlot, size = MemoryLayout<Int32>.stride
        try pages.table.withUnsafeBytes {
            try check(pkc_upload(ctx, pageTable + pkc_ptr(rows.lowerBound * per * size), $0.baseAddress! + rows.lowerBound * per * size,
                                 rows.count * per * size), "uploading the KV page table")
        }
        pages.clean()
    }

    /// Runs rows `range` of `batch` (at most maxBatch). For the rows that want logits, in batch
    /// order: ``LogitsUse/full`` rows' logits go to their place in `logitsOut` (row i at
    /// i × vocabulary) and `chosenOut[i]` = -1; ``LogitsUse/argmax(allowed:)`` rows get their
    /// token in `chosenOut[i]` and nothing in `logitsOut`; ``LogitsUse/top(k:allowed:)`` rows
    /// their best tokens in `topOut` (row i at i × LogitsUse.maxTopK, id -1 past the row's
    /// count) and `chosenOut[i]` = -2. Returns how many rows want logits.
    func step(_ batch: Batch, _ range: Range<Int>, adapters lora: (rows: AdapterRows, logitRows: AdapterRows),
              logitsOut: UnsafeMutablePointer<Float>,
              chosenOut: UnsafeMutablePointer<Int32>, topOut: UnsafeMutablePointer<TokenCandidate>) throws -> Int {
        let c = config, n = range.count
        try preparePages(batch, range)
        // Rows up to a bucket of sizes, so that steps of nearby sizes (decode rows plus forced
        // tokens and prefill chunks vary from step to step) replay one graph: a padding row is
        // token 0 at position 0 of the scratch slot, and its results are never read.
        let rowsRun = paddedRows(n), mb = rowsRun
        // The row tables (``meta``), rowsRun entries each.
        var wanted = 0, maxKV: Int32 = 1, masked = 0
        var fullRows: [Int] = [], topRows: [Int] = []
        /// A row's allowed tokens into the next mask row; its index.
        func addMask(_ allowed: [UInt32]) -> Int32 {
            if hostMasks.count < (masked + 1) * maskWords { hostMasks += Array(repeating: 0, count: maskWords) }
            let words = min(allowed.count, maskWords)
            hostMasks.withUnsafeMutableBufferPointer { dst in
                let row = dst.baseAddress! + masked * maskWords
                allowed.withUnsafeBufferPointer { row.update(from: $0.baseAddress!, count: words) }
                (row + words).update(repeating: 0, count: maskWords - words)
            }
            masked += 1
            return Int32(masked - 1)
        }
        for (r, i) in range.enumerated() {
            let p = batch.positions[i]
            hostMeta[r] = batch.tokens[i]
            hostMeta[mb + r] = p
            hostMeta[2 * mb + r] = Int32(batch.slots[i])
            hostMeta[3 * mb + r] = p + 1
            maxKV = max(maxKV, p + 1)
            guard batch.wantsLogits[i] else { continue }
            hostMeta[4 * mb + wanted] = Int32(r)
            hostMeta[5 * mb + wanted] = -1
            hostMeta[7 * mb + wanted] = 0
            switch batch.uses[i] {
            case .argmax(let allowed):
                if let allowed { hostMeta[5 * mb + wanted] = addMask(allowed) }
            case .top(let k, let allowed) where Self.reducesTop && k >= 1 && k <= LogitsUse.maxTopK && k < c.vocabularySize:
                hostMeta[7 * mb + wanted] = Int32(k)
                if let allowed { hostMeta[5 * mb + wanted] = addMask(allowed) }
                topRows.append(wanted)
            case .full, .top:
                fullRows.append(wanted)
            }
            wanted += 1
        }
        for r in n..<rowsRun {
            (hostMeta[r], hostMeta[mb + r], hostMeta[2 * mb + r], hostMeta[3 * mb + r]) = (0, 0, Int32(slotCount), 1)
        }
        // The adapters' rows (and logit rows), one adapter's after another.
        for (table, rows) in [(8, lora.rows.rows), (9, lora.logitRows.rows)] {
            for (j, r) in rows.enumerated() { hostMeta[table * mb + j] = r }
        }
        func groups(_ a: AdapterRows) -> [AdapterGroup] { a.groups.map { AdapterGroup(id: $0.id, start: $0.start, count: $0.count) } }
        let ids = metaTable(0, rows: mb), positions = metaTable(1, rows: mb), slots = metaTable(2, rows: mb)
        let kvLen = metaTable(3, rows: mb), rows = metaTable(4, rows: mb)
        let maskRows = metaTable(5, rows: mb), chosen = metaTable(6, rows: mb), topK = metaTable(7, rows: mb)
        // The chosen tokens' table goes up too (the kernels overwrite it): one upload.
        let tables = lora.rows.isEmpty ? 8 : Self.metaTables
        try hostMeta.withUnsafeBytes { try check(pkc_upload(ctx, meta, $0.baseAddress, tables * mb * 4), "uploading the row tables") }
        if masked > 0 {
            try hostMasks.withUnsafeBytes { try check(pkc_upload(ctx, masks, $0.baseAddress, masked * maskWords * 4), "uploading token masks") }
        }

        // Attention plans its split of positions by the longest context; planning by a bucket of
        // it keeps a decode step's launches the same for many steps, so its graph replays.
        let kvBucket = (maxKV + Self.kvBucket - 1) / Self.kvBucket * Self.kvBucket
        let shape = StepShape(rows: rowsRun, wanted: wanted, argmax: fullRows.count + topRows.count < wanted, top: !topRows.isEmpty,
                              masked: masked > 0, kvBucket: kvBucket, promptFrom: promptFrom(batch, range, rowsRun: rowsRun),
                              adapterRows: groups(lora.rows), adapterLogitRows: groups(lora.logitRows))
        try run(shape) {
            try compute(shape, ids: ids, positions: positions, slots: slots, kvLen: kvLen, rows: rows, maskRows: maskRows, chosen: chosen,
                        topK: topK)
        }
        guard wanted > 0 else { return 0 }
        let vocab = c.vocabularySize
        if fullRows.count == wanted {
            try check(pkc_download(ctx, logitsOut, logits, wanted * vocab * MemoryLayout<Float>.stride), "downloading logits")
            chosenOut.update(repeating: -1, count: wanted)
            return wanted
        }
        // Argmax rows were chosen on the device; only the tokens come back, the top rows' best
        // tokens, and the full rows' logits.
        try check(pkc_download(ctx, chosenOut, chosen, wanted * MemoryLayout<Int32>.stride), "downloading chosen tokens")
        if !topRows.isEmpty {
            try check(pkc_download(ctx, topOut, topBuffer, wanted * LogitsUse.maxTopK * MemoryLayout<TokenCandidate>.stride),
                      "downloading sampling candidates")
            for r in topRows { chosenOut[r] = -2 }
        }
        for r in fullRows {
            var one = Int32(r)
            try check(pkc_download_rows(ctx, logitsOut + r * vocab, logits, Int64(vocab), &one, 1, Int64(vocab)), "downloading logits")
            chosenOut[r] = -1
        }
        return wanted
    }

    /// The launches of one step (everything between the uploads and the downloads), the same
    /// for every step of one ``StepShape``: what differs between such steps is in device memory.
    private func compute(_ shape: StepShape, ids: pkc_ptr, positions: pkc_ptr, slots: pkc_ptr, kvLen: pkc_ptr, rows: pkc_ptr,
                         maskRows: pkc_ptr, chosen: pkc_ptr, topK: pkc_ptr) throws {
        guard plan.isEmpty else {
            let fused = embeddingFuses(shape) && planOpensWithNorm
            if !fused { try embed(shape, ids: ids, positions: positions) }
            let normed = try runPlan(shape, ids: fused ? ids : nil, positions: positions, slots: slots, kvLen: kvLen)
            return try outputs(shape, rows: rows, maskRows: maskRows, chosen: chosen, topK: topK, normed: normed)
        }
        let c = config, e = c.embeddingLength, n = shape.rows, f = c.feedForwardLength, wanted = shape.wanted
        let eps = c.rmsEpsilon
        let scale = 1 / Float(c.headDim).squareRoot()
        let fl = pkc_ptr(MemoryLayout<Float>.stride)
        let groups = shape.adapterRows
        /// Whether a row of this step runs an adapter with a pair on one of layer l's `matrices`.
        func adapted(_ l: Int, _ matrices: [AdapterTarget.Matrix]) -> Bool {
            groups.contains { g in matrices.contains { adapters[g.id]?.layers[l][$0.index] != nil } }
        }
        func lora(_ sites: [LoRASite], input: pkc_ptr, ldx: Int, k: Int) throws {
            try applyLoRA(shape, sites, input: input, ldx: ldx, k: k)
        }
        func layerPair(_ l: Int, _ m: AdapterTarget.Matrix) -> (DeviceAdapter) -> DeviceAdapter.Pair? { { $0.layers[l][m.index] } }
        /// x's rows normalized into h (and the input rows `q`): a norm no product before it made.
        func norm(_ weight: pkc_ptr, _ q: InputRows) throws {
            try check(pkc_rms_norm_q8(ctx, x, Int64(e), weight, h, Int64(e), Int64(n), Int64(e), eps, q.ptr, q.stride), "rms_norm")
        }
        // Each norm but the first layer's is made by the product before it (matmulAdd's norm),
        // unless an adapter's product must be added first.
        let attnRows = layers.map { inputRows(for: $0.qkv.runs.map(\.w), n) }
        let oq = inputRows(for: [output], wanted)
        if embeddingFuses(shape) {
            try embedNorm(shape, ids: ids, positions: positions, weight: layers[0].attnNorm, into: h, e, attnRows[0])
        } else {
            try embed(shape, ids: ids, positions: positions)
            try norm(layers[0].attnNorm, attnRows[0])
        }
        for (l, lw) in layers.enumerated() {
            let aq = attnRows[l]
            var cache = cacheOf(l)
            // Bias, rotation of q's and k's heads and the cache store in one launch, or in the q | k
            // | v product's (pkc_matmul_runs_rope_store); biases that are not one vector over the
            // whole row go first on their own, and adapters' deltas come before any of it.
            let wholeBias = lw.qkvBias.count == 1 && lw.qkvBias[0].column == 0 && lw.qkvBias[0].count == qkvStride
            if groups.isEmpty && (wholeBias || lw.qkvBias.isEmpty) {
                try qkvRopeStore(l, h, e, aq, n, table: ropeTables[0], bias: wholeBias ? lw.qkvBias[0].ptr : 0, positions: positions,
                                 slots: slots)
            } else {
                try matmul(lw.qkv, h, e, aq, n, qkv, qkvStride)
                if !groups.isEmpty {
                    try lora([(layerPair(l, .attnQ), qkv, qkvStride), (layerPair(l, .attnK), qkv + pkc_ptr(qDim) * fl, qkvStride),
                              (layerPair(l, .attnV), qkv + pkc_ptr(qDim + kvDim) * fl, qkvStride)], input: h, ldx: e, k: e)
                }
                if !wholeBias {
                    for b in lw.qkvBias {
                        try check(pkc_add_bias(ctx, qkv + pkc_ptr(b.column) * fl, Int64(qkvStride), b.ptr, Int64(n), Int64(b.count)), "bias")
                    }
                }
                try check(pkc_qkv_rope_store(ctx, &cache, qkv, Int64(n), Int64(qkvStride), Int32(c.headCount), Int32(c.kvHeadCount),
                                             Int32(c.headDim), Int32(c.ropeDims), ropeTables[0], neox, wholeBias ? lw.qkvBias[0].ptr : 0,
                                             slots, positions), "qkv_rope_store")
            }
            let ao = attentionRows([lw.wo], n)
            try attend(layer: l, shape, window: nil, scale: scale, slots: slots, kvLen: kvLen, rows: ao)
            let gq = inputRows(for: lw.gateUp.runs.map(\.w), n)
            let woAdapted = adapted(l, [.attnOutput]), ffAdapted = adapted(l, [.ffnGate, .ffnUp]), downAdapted = adapted(l, [.ffnDown])
            try matmulAdd(lw.wo, attn, qDim, ao, n, x, e, norm: woAdapted ? nil : lw.ffnNorm, gq)
            if woAdapted {
                try lora([(layerPair(l, .attnOutput), x, e)], input: attn, ldx: qDim, k: qDim)
                try norm(lw.ffnNorm, gq)
            }
            // The next norm: the next layer's, or the output's when every row wants logits.
            let next: (pkc_ptr, InputRows)? = l + 1 < layers.count ? (layers[l + 1].attnNorm, attnRows[l + 1])
                : wanted == n ? (outputNorm, oq) : nil
            let fusedNext = downAdapted ? nil : next
            let dq = try gatedProduct(lw, .silu, h, e, gq, n, adapt: !ffAdapted ? nil : { [self] in
                try lora([(layerPair(l, .ffnGate), gu, 2 * f), (layerPair(l, .ffnUp), gu + pkc_ptr(f) * fl, 2 * f)], input: h, ldx: e, k: e)
            })
            try matmulAdd(lw.down, gu, 2 * f, dq, n, x, e, norm: fusedNext?.0, fusedNext?.1 ?? .none)
            if downAdapted {
                try lora([(layerPair(l, .ffnDown), x, e)], input: gu, ldx: 2 * f, k: f)
                if let next { try norm(next.0, next.1) }
            }
        }
        // When every row wants logits, the last product has normalized them already.
        try outputs(shape, rows: rows, maskRows: maskRows, chosen: chosen, topK: topK, normed: wanted == n)
    }

    /// One product's outputs an adapter's pair adds to: the pair by adapter, and the rows.
    private typealias LoRASite = (pair: (DeviceAdapter) -> DeviceAdapter.Pair?, y: pkc_ptr, ldy: Int)

    /// Adds each of the step's adapter groups' pairs for `sites` (outputs of one product of
    /// `input`, rows of `k` floats with stride `ldx`) to its rows, or its logit rows.
    private func applyLoRA(_ shape: StepShape, _ sites: [LoRASite], input: pkc_ptr, ldx: Int, k: Int, logitRows: Bool = false) throws {
        let i32 = pkc_ptr(MemoryLayout<Int32>.stride)
        let table0 = metaTable(logitRows ? 9 : 8, rows: shape.rows)
        var ops: [pkc_lora_op] = []
        for g in logitRows ? shape.adapterLogitRows : shape.adapterRows {
            guard let a = adapters[g.id] else { continue }
            let table = table0 + pkc_ptr(g.start) * i32
            for site in sites {
                guard let p = site.pair(a) else { continue }
                ops.append(pkc_lora_op(a: p.a, bt: p.bt, a_scale: p.aScale, bt_scale: p.btScale, rank: p.rank, m: p.rows,
                                       scale: p.scale, y: site.y, ldy: Int64(site.ldy), rows: table, n: Int64(g.count)))
            }
        }
        guard !ops.isEmpty else { return }
        try check(pkc_lora_apply(ctx, ops, Int32(ops.count), input, Int64(ldx), Int64(k)), "adapter products")
    }

    /// The recorded layers (``plan``) on the step's rows. The buffers: ``StepBuffer/query``,
    /// ``StepBuffer/key`` and ``StepBuffer/value`` are the columns of qkv (so a layer's q, k and v
    /// products run as the fused step's are, side by side). A norm (on its own or in a product's
    /// last block) also writes input rows where the launch after it multiplies its output. A
    /// launch that an adapter of the step changes runs as its recorded operations. With `ids`, the
    /// first launch (``planOpensWithNorm``) also embeds them (``embedNorm(_:ids:positions:weight:into:_:_:)``).
    /// Returns whether the last launch normalized every row into h for the output (as the fused step's).
    private func runPlan(_ shape: StepShape, ids: pkc_ptr?, positions: pkc_ptr, slots: pkc_ptr, kvLen: pkc_ptr) throws -> Bool {
        let c = config, n = shape.rows, groups = shape.adapterRows
        let launches = groups.isEmpty ? plan : plan.flatMap { p -> [PlannedLaunch] in
            let matrices: [LayerTensor] = switch p.kind {
            case .op, .attention(nil, _, _, _, _, _): []
            case .attention: [.attnQ, .attnK, .attnV]
            case .product(_, let w, _, _): [w]
            case .feedForward: [.ffnGate, .ffnUp, .ffnDown]
            }
            let adapted = groups.contains { g in matrices.contains { m in m.adapterMatrix.flatMap { adapters[g.id]?.layers[p.layer][$0.index] } != nil } }
            guard adapted else { return [p] }
            // The q | k | v product with its adapters on its own; the attention launch stays whole.
            if case .attention(_?, let q, let k, let t, let w, let s) = p.kind {
                return [PlannedLaunch(layer: p.layer, kind: .op(p.ops[0].op), ops: [p.ops[0]]),
                        PlannedLaunch(layer: p.layer, kind: .attention(product: nil, qNorm: q, kNorm: k, table: t, window: w, scale: s),
                                      ops: Array(p.ops.dropFirst()))]
            }
            return p.ops.map { PlannedLaunch(layer: $0.layer, kind: .op($0.op), ops: [$0]) }
        }
        /// The matrices launch i multiplies its input by.
        func products(_ i: Int) throws -> [Matrix] {
            let p = launches[i], lw = layers[p.layer]
            switch p.kind {
            case .op(.project(_, let ps)):
                // q | k | v as the side-by-side runs that multiply them (the int8 policy is by run)
                if ps.map(\.0) == [.attnQ, .attnK, .attnV] { return lw.qkv.runs.map(\.w) }
                return try ps.map { try matrix($0.0, p.layer) }
            case .attention(_?, _, _, _, _, _): return lw.qkv.runs.map(\.w)
            case .op(.feedForward), .feedForward: return lw.gateUp.runs.map(\.w)
            case .product(_, let w, _, _): return [try matrix(w, p.layer)]
            default: return []
            }
        }
        // The input rows the launch before made, and of which buffer.
        var made: (buffer: StepBuffer, q: InputRows)?
        var normed = false
        for (i, p) in launches.enumerated() {
            let q = made.map { m in p.input == m.buffer ? m.q : .none } ?? .none
            /// The input rows this launch writes with its output `target` (a norm's, or attention's):
            /// where the next launch multiplies it.
            func nextRows(_ target: StepBuffer) throws -> InputRows {
                guard i + 1 < launches.count, launches[i + 1].input == target else { return .none }
                let ws = try products(i + 1)
                let q = target == .attention ? attentionRows(ws, n) : inputRows(for: ws, n)
                if q.ptr != 0 { made = (target, q) }
                return q
            }
            made = nil
            switch p.kind {
            case .op(let op):
                let nq: InputRows = if case .norm(_, _, let target) = op { try nextRows(target) } else { .none }
                if i == 0, let ids, case .norm(.residual, let weight, let target) = op {
                    let (tp, tld, _) = place(target)
                    try embedNorm(shape, ids: ids, positions: positions, weight: try vector(weight, p.layer), into: tp, tld, nq)
                } else {
                    try run(op, layer: p.layer, shape, q: q, normRows: nq, positions: positions, slots: slots, kvLen: kvLen)
                }
            case .attention(let product, let qNorm, let kNorm, let table, let window, let scale):
                var cache = cacheOf(p.layer)
                let qn = try qNorm.map { try vector($0, p.layer) } ?? 0, kn = try kNorm.map { try vector($0, p.layer) } ?? 0
                if let product {
                    let (xp, ldx, _) = place(product)
                    try qkvRopeStore(p.layer, xp, ldx, q, n, table: ropeTables[table], qNorm: qn, kNorm: kn, positions: positions, slots: slots)
                } else {
                    try check(pkc_qkv_norm_rope_store(ctx, &cache, qkv, Int64(n), Int64(qkvStride), Int32(c.headCount), Int32(c.kvHeadCount),
                                                      Int32(c.headDim), Int32(c.ropeDims), ropeTables[table], neox, qn, kn, c.rmsEpsilon,
                                                      slots, positions), "qkv_norm_rope_store")
                }
                try attend(layer: p.layer, shape, window: window, scale: scale, slots: slots, kvLen: kvLen, rows: try nextRows(.attention))
            case .product(let input, let w, let through, let post):
                let (xp, ldx, _) = place(input)
                normed = try residualProduct(try matrix(w, p.layer), xp, ldx, q, n, through: through, post: post, p, last: i + 1 == launches.count,
                                             shape, normRows: nextRows)
            case .feedForward(let input, let activation, let through, let post):
                let lw = layers[p.layer]
                let (xp, ldx, _) = place(input)
                let dq = try gatedProduct(lw, activation, xp, ldx, q, n)
                normed = try residualProduct(lw.down, gu, 2 * c.feedForwardLength, dq, n, through: through, post: post, p,
                                             last: i + 1 == launches.count, shape, normRows: nextRows)
            }
        }
        return normed
    }

    /// The residual's rows plus W input's (through `through`, normalized by `post` first where
    /// given), then the launch's next norm (or, as the step's last launch when every row wants
    /// logits, the output's), in the product's launch on the GEMV path. Returns whether the output norm ran.
    private func residualProduct(_ w: Matrix, _ input: pkc_ptr, _ ldx: Int, _ q: InputRows, _ n: Int, through: StepBuffer, post: LayerTensor?,
                                 _ p: PlannedLaunch, last: Bool, _ shape: StepShape, normRows: (StepBuffer) throws -> InputRows) throws -> Bool {
        let c = config, e = c.embeddingLength
        guard w.rows == e else { throw BackendError.cudaFailed("a product of \(w.rows) rows joining a residual stream of \(e)") }
        var norm: pkc_norm?
        if let next = p.next {
            let (tp, tld, _) = place(next.target), nq = try normRows(next.target)
            norm = pkc_norm(weight: try vector(next.weight, next.layer), eps: c.rmsEpsilon, out: tp, ldo: Int64(tld), q: nq.ptr, ldq: nq.stride)
        } else if last, shape.wanted == n {
            let oq = inputRows(for: [output], n)
            norm = pkc_norm(weight: outputNorm, eps: c.rmsEpsilon, out: h, ldo: Int64(e), q: oq.ptr, ldq: oq.stride)
        }
        if let post {
            let (yp, ldy, _) = place(through)
            var spec = pkc_post_norm(weight: try vector(post, p.layer), eps: c.rmsEpsilon, residual: x, ldr: Int64(e))
            let rc = withUnsafePointer(to: norm ?? pkc_norm()) { np in
                pkc_matmul_post_norm(ctx, w.type, w.ptr, w.rows, w.cols, input, Int64(ldx), q.ptr, q.stride, Int64(n), yp, Int64(ldy), &spec,
                                     norm == nil ? nil : np)
            }
            try check(rc, "matmul and norms")
        } else if var norm {
            try check(pkc_matmul_add_norm(ctx, w.type, w.ptr, w.rows, w.cols, input, Int64(ldx), q.ptr, q.stride, Int64(n), x, Int64(e),
                                          &norm), "matmul and norm")
        } else {
            try check(pkc_matmul_q8(ctx, w.type, w.ptr, w.rows, w.cols, input, Int64(ldx), q.ptr, q.stride, Int64(n), x, Int64(e), 1), "matmul")
        }
        return p.next == nil && norm != nil
    }

    /// Where a recorded step's buffer lies: its first float, row stride and width.
    private func place(_ b: StepBuffer) -> (ptr: pkc_ptr, ld: Int, width: Int) {
        let e = config.embeddingLength, fl = pkc_ptr(MemoryLayout<Float>.stride)
        return switch b {
        case .residual: (x, e, e)
        case .normed: (h, e, e)
        case .query: (qkv, qkvStride, qDim)
        case .key: (qkv + pkc_ptr(qDim) * fl, qkvStride, kvDim)
        case .value: (qkv + pkc_ptr(qDim + kvDim) * fl, qkvStride, kvDim)
        case .attention: (attn, qDim, qDim)
        case .output: (tmp, e, e)
        }
    }

    private func matrix(_ r: LayerTensor, _ l: Int) throws -> Matrix {
        guard let m = layers[l].matrices[r] else { throw BackendError.cudaFailed("layer \(l) has no \(r) matrix") }
        return m
    }

    private func vector(_ r: LayerTensor, _ l: Int) throws -> pkc_ptr {
        guard let v = layers[l].vectors[r] else { throw BackendError.cudaFailed("layer \(l) has no \(r) vector") }
        return v
    }

    private var neox: Int32 { config.architecture.neoxRoPE ? 1 : 0 }

    /// Layer l's part of the KV cache.
    private func cacheOf(_ l: Int) -> pkc_kv {
        let offset = pkc_ptr(l) * pkc_ptr(layerStride) * pkc_ptr(MemoryLayout<UInt16>.stride)
        return pkc_kv(k: kCache + offset, v: vCache + offset, slot_stride: 0, kv_dim: Int64(kvDim), pages: pageTable,
                      max_pages: Int64(pages.pagesPerSlot), page_shift: Self.pageShift)
    }

    /// Attention of the step's queries over layer l's cache (the keys and values already stored),
    /// also into the input `rows` of the product after it (``attentionRows(_:_:)``) where given.
    private func attend(layer l: Int, _ shape: StepShape, window: Int?, scale: Float, slots: pkc_ptr, kvLen: pkc_ptr, rows: InputRows) throws {
        let c = config
        var cache = cacheOf(l)
        try check(pkc_attention_prompt(ctx, &cache, qkv, Int64(qkvStride), Int64(shape.rows), Int32(c.headCount), Int32(c.kvHeadCount),
                                       Int32(c.headDim), slots, kvLen, Int64(shape.kvBucket), Int32(clamping: window ?? 0), scale,
                                       attn, Int64(qDim), rows.ptr, rows.stride, Int64(shape.promptFrom)), "attention")
    }

    /// gu = gate | up of n rows of `input` (input rows `q` or none), its gate half then
    /// activation(gate) × up: in one launch where the gated product runs fused (1 or 2 rows, gate and
    /// up one run) and no `adapt` adds adapters' deltas to gate | up before the activation. Returns
    /// the input rows the down product reads (``downRows(_:_:)``).
    private func gatedProduct(_ lw: Layer, _ activation: Activation, _ input: pkc_ptr, _ ldx: Int, _ q: InputRows, _ n: Int,
                              adapt: (() throws -> Void)? = nil) throws -> InputRows {
        let f = config.feedForwardLength, fl = pkc_ptr(MemoryLayout<Float>.stride)
        if adapt == nil, pkc_glu_fused(ctx, Int64(n)) != 0, lw.gateUp.runs.count == 1 {
            let w = lw.gateUp.runs[0].w
            try check(pkc_matmul_glu(ctx, w.type, w.ptr, w.rows / 2, w.cols, input, Int64(ldx), q.ptr, q.stride, Int64(n), gu, Int64(2 * f),
                                     activation == .geluTanh ? 1 : 0), "gated matmul")
            return .none
        }
        try matmul(lw.gateUp, input, ldx, q, n, gu, 2 * f)
        try adapt?()
        let dq = downRows(lw.down, n)
        let fn = activation == .silu ? pkc_swiglu_q8 : pkc_geglu_q8
        try check(fn(ctx, gu, Int64(2 * f), gu + pkc_ptr(f) * fl, Int64(2 * f), Int64(n), Int64(f), dq.ptr, dq.stride), "gated activation")
        return dq
    }

    /// One recorded operation of layer l, as recorded: `q` the input rows of its products' input
    /// (or none), `normRows` the input rows a norm writes (or none).
    private func run(_ op: LayerOp, layer l: Int, _ shape: StepShape, q: InputRows, normRows nq: InputRows, positions: pkc_ptr, slots: pkc_ptr,
                     kvLen: pkc_ptr) throws {
        let c = config, n = shape.rows, f = c.feedForwardLength, hd = c.headDim, lw = layers[l]
        let fl = pkc_ptr(MemoryLayout<Float>.stride)
        func pair(_ r: LayerTensor) -> (DeviceAdapter) -> DeviceAdapter.Pair? {
            let m = r.adapterMatrix
            return { a in m.flatMap { a.layers[l][$0.index] } }
        }
        switch op {
        case .norm(let source, let weight, let target):
            let (sp, sld, width) = place(source), (tp, tld, _) = place(target)
            try check(pkc_rms_norm_q8(ctx, sp, Int64(sld), try vector(weight, l), tp, Int64(tld), Int64(n), Int64(width), c.rmsEpsilon,
                                      nq.ptr, nq.stride), "rms_norm")
        case .headNorm(let b, let weight):
            let (p, ld, width) = place(b)
            try check(pkc_rms_norm_heads(ctx, p, Int64(ld), Int32(width / hd), try vector(weight, l), Int64(n), Int64(hd), c.rmsEpsilon),
                      "head norm")
        case .project(let input, let ps):
            let (xp, ldx, k) = place(input)
            if ps.map(\.0) == [.attnQ, .attnK, .attnV], ps.map(\.1) == [.query, .key, .value] {
                try matmul(lw.qkv, xp, ldx, q, n, qkv, qkvStride)
            } else {
                for (r, out) in ps {
                    let w = try matrix(r, l), (yp, ldy, _) = place(out)
                    try check(pkc_matmul_q8(ctx, w.type, w.ptr, w.rows, w.cols, xp, Int64(ldx), q.ptr, q.stride, Int64(n), yp, Int64(ldy), 0),
                              "matmul")
                }
            }
            // The rows' adapters, then the biases (the CPU's order).
            if !shape.adapterRows.isEmpty {
                try applyLoRA(shape, ps.map { r, out in let (yp, ldy, _) = place(out); return (pair(r), yp, ldy) }, input: xp, ldx: ldx, k: k)
            }
            for (r, out) in ps {
                guard let b = r.bias.flatMap({ lw.vectors[$0] }) else { continue }
                let (yp, ldy, width) = place(out)
                try check(pkc_add_bias(ctx, yp, Int64(ldy), b, Int64(n), Int64(width)), "bias")
            }
        case .rope(let b, let table):
            let (p, ld, width) = place(b)
            try check(pkc_rope(ctx, p, Int64(n), Int64(ld), Int32(width / hd), Int32(hd), Int32(c.ropeDims), ropeTables[table], neox), "rope")
        case .attend(let window, let scale, _):
            // (init refuses soft-capped attention)
            var cache = cacheOf(l)
            let (kp, ldk, _) = place(.key), (vp, ldv, _) = place(.value)
            try check(pkc_store_kv(ctx, &cache, kp, Int64(ldk), vp, Int64(ldv), Int64(n), slots, positions), "store_kv")
            try attend(layer: l, shape, window: window, scale: scale, slots: slots, kvLen: kvLen, rows: .none)
        case .feedForward(let input, let activation, let target):
            let (xp, ldx, k) = place(input), (yp, ldy, _) = place(target), down = lw.down
            let fq = try gatedProduct(lw, activation, xp, ldx, q, n, adapt: shape.adapterRows.isEmpty ? nil : { [self] in
                try applyLoRA(shape, [(pair(.ffnGate), gu, 2 * f), (pair(.ffnUp), gu + pkc_ptr(f) * fl, 2 * f)], input: xp, ldx: ldx, k: k)
            })
            try check(pkc_matmul_q8(ctx, down.type, down.ptr, down.rows, down.cols, gu, Int64(2 * f), fq.ptr, fq.stride, Int64(n), yp,
                                    Int64(ldy), 0), "matmul")
            if !shape.adapterRows.isEmpty {
                try applyLoRA(shape, [(pair(.ffnDown), yp, ldy)], input: gu, ldx: 2 * f, k: f)
            }
        case .addToResidual(let b):
            let (p, ld, width) = place(b), e = c.embeddingLength
            guard ld == e, width == e else { throw BackendError.cudaFailed("adding a \(b) buffer to the residual stream") }
            try check(pkc_add(ctx, x, p, Int64(n * e)), "residual add")
        }
    }

    /// Whether the step's first launches (the embedding, its scale, the RoPE tables and the first
    /// norm) run as one (``embedNorm(_:ids:positions:weight:into:_:_:)``): unless an adapter adds to
    /// the embedding before the scale, or the family has more than two RoPE bases.
    private func embeddingFuses(_ shape: StepShape) -> Bool {
        ropes.count <= 2 && !shape.adapterRows.contains { adapters[$0.id]?.embedding != nil }
    }

    /// Whether a recorded step's first launch is the first norm, of the residual rows (the
    /// embedding's), which ``runPlan(_:ids:positions:slots:kvLen:)`` can then run with the embedding.
    private var planOpensWithNorm: Bool {
        guard let p = plan.first, p.layer == 0, case .op(.norm(.residual, _, _)) = p.kind else { return false }
        return true
    }

    /// ``embed(_:ids:positions:)`` (but for adapters) and the first norm of x's rows by `weight`
    /// into `out` (row stride `ldo`, and the input rows `q`) in one launch (pkc_embed_norm_rope).
    private func embedNorm(_ shape: StepShape, ids: pkc_ptr, positions: pkc_ptr, weight: pkc_ptr, into out: pkc_ptr, _ ldo: Int,
                           _ q: InputRows) throws {
        let c = config, e = c.embeddingLength
        try check(pkc_embed_norm_rope(ctx, embedding.type, embedding.ptr, embedding.rows, embedding.cols, ids, Int64(shape.rows), x, Int64(e),
                                      embeddingScale ?? 1, weight, out, Int64(ldo), c.rmsEpsilon, q.ptr, q.stride, positions,
                                      Int32(c.ropeDims), ropeFreqs, ropeTables, Int32(ropes.count)), "embedding")
    }

    /// The step's first launches: token embeddings into x (with the rows' adapters' embedding
    /// pairs, then the family's scale) and the RoPE tables of the step's positions.
    private func embed(_ shape: StepShape, ids: pkc_ptr, positions: pkc_ptr) throws {
        let c = config, e = c.embeddingLength, n = shape.rows
        try check(pkc_get_rows(ctx, embedding.type, embedding.ptr, embedding.rows, embedding.cols, ids, Int64(n), x, Int64(e)), "embedding")
        for (table, freqs) in zip(ropeTables, ropeFreqs) {
            try check(pkc_rope_table(ctx, positions, Int64(n), Int32(c.ropeDims), freqs, table), "rope table")
        }
        let i32 = pkc_ptr(MemoryLayout<Int32>.stride)
        for g in shape.adapterRows {
            guard let p = adapters[g.id]?.embedding else { continue }
            try check(pkc_lora_embed(ctx, p.a, p.bt, p.rank, p.vocabulary, p.scale, metaTable(8, rows: n) + pkc_ptr(g.start) * i32,
                                     Int64(g.count), ids, x, Int64(e), Int64(e)), "adapter embedding")
        }
        if let s = embeddingScale { try check(pkc_scale(ctx, x, Int64(n * e), s), "embedding scale") }
    }

    /// The step's last launches: the rows that asked for logits through the output norm (unless
    /// `normed`: the last product normalized every row into h) and projection, then their
    /// adapters, the family's softcap, and the device's choices (argmax, top-k).
    private func outputs(_ shape: StepShape, rows: pkc_ptr, maskRows: pkc_ptr, chosen: pkc_ptr, topK: pkc_ptr, normed: Bool) throws {
        let c = config, e = c.embeddingLength, n = shape.rows, wanted = shape.wanted, eps = c.rmsEpsilon
        guard wanted > 0 else { return }
        let oq = inputRows(for: [output], wanted)
        if wanted < n {
            try check(pkc_get_rows(ctx, Int32(GGMLType.f32.rawValue), x, Int64(n), Int64(e), rows, Int64(wanted), h, Int64(e)), "gathering rows")
            try check(pkc_rms_norm_q8(ctx, h, Int64(e), outputNorm, h, Int64(e), Int64(wanted), Int64(e), eps, oq.ptr, oq.stride), "rms_norm")
        } else if !normed {
            try check(pkc_rms_norm_q8(ctx, x, Int64(e), outputNorm, h, Int64(e), Int64(n), Int64(e), eps, oq.ptr, oq.stride), "rms_norm")
        }
        try check(pkc_matmul_q8(ctx, output.type, output.ptr, output.rows, output.cols, h, Int64(e), oq.ptr, oq.stride,
                                Int64(wanted), logits, output.rows, 0), "matmul")
        if !shape.adapterLogitRows.isEmpty {
            try applyLoRA(shape, [({ $0.output }, logits, c.vocabularySize)], input: h, ldx: e, k: e, logitRows: true)
        }
        if let cap = logitSoftcap { try check(pkc_softcap(ctx, logits, Int64(wanted * c.vocabularySize), cap), "logit softcap") }
        if shape.argmax {
            let vocab = Int64(c.vocabularySize)
            try check(pkc_argmax_masked(ctx, logits, vocab, Int64(wanted), vocab, shape.masked ? masks : 0,
                                        Int64(maskWords), maskRows, chosen), "argmax")
        }
        if shape.top {
            let vocab = Int64(c.vocabularySize)
            try check(pkc_topk(ctx, logits, vocab, Int64(wanted), vocab, topK, shape.masked ? masks : 0, Int64(maskWords), maskRows,
                               topBuffer), "top-k")
        }
    }

    /// A step's launches as they depend on the batch: a captured graph replays them when the
    /// same shape comes again (decode steps, mostly); the first time they run directly.
    struct StepShape: Hashable {
        var rows: Int
        var wanted: Int
        var argmax: Bool
        var top: Bool
        var masked: Bool
        var kvBucket: Int32
        /// The row from which attention runs as a prompt's, on tensor cores (``promptFrom(_:_:rowsRun:)``).
        var promptFrom: Int
        /// The rows with adapters, and the rows of those that want logits (``AdapterRows``).
        var adapterRows: [AdapterGroup]
        var adapterLogitRows: [AdapterGroup]
    }

    /// One adapter's rows in a step: `count` of them from `start` in their row table.
    struct AdapterGroup: Hashable {
        var id: Int
        var start: Int
        var count: Int
    }

    static let kvBucket: Int32 = 256

    /// Where a step's prompt rows begin, for attention on tensor cores (pkc_attention_prompt):
    /// the scheduler puts decode rows first, so the first run of 16 or more of one slot's
    /// consecutive positions starts the prompts' chunks. Rounded up to a whole tile of 16 rows
    /// (a tile of decode rows would take a pass per row), and `rowsRun` (none) where fewer than
    /// 32 rows would go or the device has no such kernel. Any split gives the same outputs
    /// within rounding; only speed depends on it.
    private func promptFrom(_ batch: Batch, _ range: Range<Int>, rowsRun: Int) -> Int {
        tensorCoreAttention ? Self.promptFrom(slots: batch.slots[range], positions: batch.positions[range], rowsRun: rowsRun) : rowsRun
    }

    /// ``promptFrom(_:_:rowsRun:)``'s rule for a step's rows (`rowsRun` of them once padded).
    static func promptFrom(slots: ArraySlice<Int>, positions: ArraySlice<Int32>, rowsRun: Int) -> Int {
        var i = slots.startIndex
        while i < slots.endIndex {
            var j = i + 1
            while j < slots.endIndex && slots[j] == slots[i] && positions[j] == positions[j - 1] + 1 { j += 1 }
            if j - i >= 16 {
                let from = (i - slots.startIndex + 15) / 16 * 16
                return rowsRun - from >= 32 ? from : rowsRun
            }
            i = j
        }
        return rowsRun
    }

    /// Whether ``LogitsUse/top(k:allowed:)`` rows come back as their best tokens (else whole
    /// rows, as ``LogitsUse/full``): `PLINTH_CUDA_TOPK=0` turns it off, for comparisons.
    static let reducesTop = ProcessInfo.processInfo.environment["PLINTH_CUDA_TOPK"] != "0"

    /// The rows a step of `n` runs: n up to 8 (each has its own GEMV kernel), then multiples of 8
    /// up to 64, of 32 up to 256, of 128 beyond; never past maxBatch.
    private func paddedRows(_ n: Int) -> Int {
        let step = n <= 8 ? 1 : n <= 64 ? 8 : n <= 256 ? 32 : 128
        return min((n + step - 1) / step * step, maxBatch)
    }
    /// Graphs kept; past this many shapes the cache starts over.
    private static let maxGraphs = 64
    private static let graphsEnabled = ProcessInfo.processInfo.environment["PLINTH_CUDA_GRAPHS"] != "0"

    private func run(_ shape: StepShape, _ launches: () throws -> Void) throws {
        guard Self.graphsEnabled else { return try launches() }
        if let g = graphs[shape] {
            return try check(pkc_graph_launch(ctx, g), "graph launch")
        }
        // Capture on a shape's second step: one-off shapes (prefill chunks) run directly, and the
        // first run has grown any scratch the launches need (nothing may allocate in a capture).
        guard seenShapes.contains(shape), !uncapturable.contains(shape) else {
            seenShapes.insert(shape)
            return try launches()
        }
        if graphs.count >= Self.maxGraphs {
            for g in graphs.values { pkc_graph_destroy(ctx, g) }
            graphs.removeAll()
        }
        try check(pkc_graph_begin(ctx), "graph capture")
        var captured: OpaquePointer?
        do {
            try launches()
        } catch {
            _ = pkc_graph_end(ctx, &captured)
            if let captured { pkc_graph_destroy(ctx, captured) }
            uncapturable.insert(shape)
            return try launches()
        }
        guard pkc_graph_end(ctx, &captured) == 0, let captured else {
            uncapturable.insert(shape)
            return try launches()
        }
        graphs[shape] = captured
        try check(pkc_graph_launch(ctx, captured), "graph launch")
    }
}

extension Backend {
    /// Why the CUDA backend cannot run here (no driver, no device, a missing library, kernels
    /// that do not compile), or nil when a context opens on device 0. Probed once per process;
    /// on a GPU the probe loads the common kernels (compiled at first use, then from the cache;
    /// each weight format's are prepared when a model loads).
    public static let cudaUnavailableReason: String? = {
        do {
            pkc_close(try CUDAForward.open())
            return nil
        } catch BackendError.cudaUnavailable(let why) {
            return why
        } catch {
            return error.localizedDescription
        }
    }()

    /// Whether the step would run on a GPU: ``cuda``, or ``auto`` with a CUDA device present (a
    /// cheap probe of the driver; opening it may still fail, and then ``auto`` runs on the CPU).
    var expectsGPU: Bool {
        switch self {
        case .cpu: false
        case .cuda: true
        case .auto: pkc_device_count() > 0
        }
    }
}
