import Foundation
import PlinthKernels

/// The mutable state of running a ``Transformer``: a KV cache with one slot per sequence,
/// scratch buffers sized once, and a thread pool. One owner drives a context at a time.
///
/// ``forward(_:)`` runs one batched step: tokens from several sequences go through the model
/// together, so weights are read once for all of them. The step runs on the ``Backend`` chosen
/// at creation (the CPU, or a GPU holding the weights, KV cache and activations); logits always
/// arrive in host memory, so everything that reads them is the same on both.
public final class InferenceContext {
    public let transformer: Transformer
    public let contextLength: Int
    public let slotCount: Int
    public let maxBatch: Int
    public let threadCount: Int
    /// Where the step runs: ``Backend/cpu`` or ``Backend/cuda`` (``Backend/auto`` resolved).
    public let backend: Backend
    /// The GPU running the step, e.g. "NVIDIA H100 80GB HBM3, sm_90"; nil on the CPU.
    public var deviceName: String? { device?.deviceName }
    /// Kernels the GPU step has launched so far; nil on the CPU. A step's first run launches
    /// its kernels and its capture into a graph counts them again; replays count nothing.
    public var kernelLaunches: UInt64? { device?.kernelLaunches }
    /// Bytes of the GPU's f16 copies of the weights for the GEMM path; nil on the CPU.
    var f16WeightBytes: Int? { device?.f16WeightBytes }
    /// Tokens stored in each slot's cache.
    public private(set) var slotLengths: [Int]

    private let config: ModelConfig
    // The CPU step's state, read by its layer operations (CPULayerStep).
    let pool: OpaquePointer
    let kvDim: Int, qDim: Int
    let kCache: [UnsafeMutablePointer<UInt16>]
    let keySlotStride: Int, valueSlotStride: Int
    let vCache: [UnsafeMutablePointer<UInt16>]
    let x, h, q, k, v, attn, tmp, gate, up: UnsafeMutablePointer<Float>
    private let matmulScratch: UnsafeMutableRawPointer
    private let embeddingRow: UnsafeMutableRawPointer
    let attnScratch: UnsafeMutablePointer<Float>
    /// The layer being recorded by its CPULayerStep.
    let layerProgram = LayerProgram()
    let kRows, vRows: UnsafeMutablePointer<UnsafePointer<UInt16>?>
    let kStore, vStore: UnsafeMutablePointer<UnsafeMutablePointer<UInt16>?>
    /// Per row: its position, its first attended position (windowed layers) and one past its last.
    let rowPositions, kvStart, kvLen: UnsafeMutablePointer<Int32>
    /// One RoPE table per rotary embedding of the architecture (``ModelArchitecture/ropes``).
    let ropeTables: [UnsafeMutablePointer<Float>]
    /// Whether RoPE rotates (i, i + d/2) pairs, as the kernels take it.
    let neoxRoPE: Int32
    private var logitsBuffer: UnsafeMutablePointer<Float>
    private var logitsCapacity: Int
    private let allocations: [UnsafeMutableRawPointer]
    /// The CUDA step, when the backend is CUDA (then the CPU KV cache is not allocated).
    private let device: CUDAForward?
    /// Rows of the last step that produced logits, in batch order.
    public private(set) var logitRowCount = 0
    /// Per logits row of the last step: the token the backend chose (``LogitsUse/argmax(allowed:)``
    /// rows on a GPU), -2 where the row's best tokens are in `top` (``LogitsUse/top(k:allowed:)``),
    /// or -1 where the row's logits are in host memory.
    private var chosen: [Int32] = []
    /// ``LogitsUse/maxTopK`` entries per logits row of the last step (id -1 past a row's count),
    /// for `topRows` rows.
    private var top: UnsafeMutablePointer<TokenCandidate>? = nil
    private var topRows = 0

    /// Adapters attached with ``attach(_:)``, by id.
    private var adapters: [Int: AttachedAdapter] = [:]
    private var nextAdapterID = 1

    /// Whether the backend picks ``LogitsUse/argmax(allowed:)`` rows' tokens itself (then only
    /// ``chosenToken(_:)`` answers for them) and reduces ``LogitsUse/top(k:allowed:)`` rows to
    /// their best tokens (``topCandidates(_:)``). On the CPU every row's logits are in host memory
    /// and the caller chooses, so it need not prepare masks ahead of the step.
    public var choosesTokens: Bool { device != nil }

    /// Creates a context with `slots` KV-cache slots of `contextLength` positions on `backend`
    /// (default: `PLINTH_BACKEND`, else ``Backend/auto``). Throws ``BackendError`` when
    /// ``Backend/cuda`` is asked for and cannot run the model here.
    public convenience init(transformer: Transformer, contextLength: Int? = nil, slots: Int = 1, maxBatch: Int = 512,
                            threads: Int? = nil, backend: Backend = .default) throws {
        try self.init(transformer: transformer, contextLength: contextLength, slots: slots, maxBatch: maxBatch, threads: threads,
                      backend: backend, recordedLayers: false)
    }

    /// Bytes of CPU key and value cache that `positions` positions of one sequence take (keys
    /// in whole blocks), as a Double so that absurd sizes compare instead of overflowing.
    public static func kvCacheBytes(_ c: ModelConfig, positions: Int) -> Double {
        let n = max(positions, 0)
        return Double(keyPositions(n) + n) * Double(c.kvHeadCount * c.headDim * c.layerCount * MemoryLayout<UInt16>.stride)
    }

    /// Positions the keys of `n` positions take: keys are stored in whole blocks of
    /// PK_KEY_BLOCK positions (see pk_ops.h).
    static func keyPositions(_ n: Int) -> Int {
        let block = Int(PK_KEY_BLOCK)
        return (n + block - 1) / block * block
    }

    /// Far below x86-64's 128 TiB of user address space, far above any machine's memory.
    static let addressableBytes = Double(1 << 46)
    /// More sequences than any step could batch; the per-slot tables stay small.
    static let maxSlots = 1 << 24

    /// `recordedLayers`: on CUDA, every family's layers run as recorded (``PlannedLaunch``), the
    /// fused families' too (tests compare the two). `unifyRuns`: whether CUDA rewrites side-by-side
    /// products to one type where that is exact (``CUDAForward/unifiedRuns(_:enabled:)``).
    /// `pagesByUse`: on a GPU without room for every slot's whole context, a KV cache of the
    /// pages that fit (and at most `maxPages`); the caller then keeps the sequences' pages within
    /// ``kvPageBudget``.
    init(transformer: Transformer, contextLength: Int? = nil, slots: Int = 1, maxBatch: Int = 512,
         threads: Int? = nil, backend: Backend = .default, recordedLayers: Bool, unifyRuns: Bool = CUDAForward.unifyRuns,
         pagesByUse: Bool = false, maxPages: Int? = nil) throws {
        let c = transformer.config
        self.transformer = transformer
        self.config = c
        self.contextLength = max(1, min(contextLength ?? min(c.contextLength, 4096), c.contextLength))
        self.slotCount = max(1, slots)
        self.maxBatch = max(1, maxBatch)
        // Pages of the cache are committed as they are written, so it may reserve more than the
        // machine's memory; not more than a process can address (an absurd slot count trapped
        // in an array allocation).
        let reserved = Self.kvCacheBytes(c, positions: self.contextLength) * Double(slotCount)
        guard reserved < Self.addressableBytes, slotCount <= Self.maxSlots else {
            throw ModelError.outOfMemory("the KV cache: \(slotCount) sequences of \(self.contextLength) positions "
                + "(\(String(format: "%.3g", reserved / Double(1 << 30))) GiB) are more than a context holds")
        }
        // The cap PLINTH_THREADS has: thousands of threads only make every barrier crawl.
        self.threadCount = min(threads ?? defaultThreadCount(), maxThreadCount)
        self.slotLengths = Array(repeating: 0, count: slotCount)
        neoxRoPE = c.architecture.neoxRoPE ? 1 : 0
        kvDim = c.kvHeadCount * c.headDim
        qDim = c.headCount * c.headDim
        var device: CUDAForward? = nil
        if backend != .cpu {
            do {
                device = try CUDAForward(transformer: transformer, contextLength: self.contextLength, slots: slotCount,
                                         maxBatch: self.maxBatch, pagesByUse: pagesByUse, maxPages: maxPages,
                                         recorded: recordedLayers, unify: unifyRuns)
            } catch BackendError.cudaUnavailable(let why) where backend == .auto {
                BackendNotes.once(.fallback, "running on the CPU: the CUDA backend is unavailable (\(why))")
            } catch BackendError.cudaOutOfMemory(let why, _) where backend == .auto {
                // Per model (a GPU may hold one model and not the next): every time.
                BackendNotes.say("running on the CPU: the model does not fit the GPU's memory (\(why))")
            }
        }
        self.device = device
        self.backend = device == nil ? .cpu : .cuda
        guard let p = pk_pool_create(Int32(threadCount)) else { throw ModelError.outOfMemory("the thread pool") }
        pool = p

        var allocs: [UnsafeMutableRawPointer] = []
        func alloc<T>(_ count: Int, _ what: String) throws -> UnsafeMutablePointer<T> {
            let bytes = max(count, 1) * MemoryLayout<T>.stride
            // Whole cache lines: a kv head's row then spans the fewest lines attention must fetch.
            guard let raw = aligned_alloc(64, (bytes + 63) / 64 * 64) else { throw ModelError.outOfMemory(what) }
            allocs.append(raw)
            return raw.bindMemory(to: T.self, capacity: max(count, 1))
        }
        do {
            let keysPerSlot = Self.keyPositions(self.contextLength) * kvDim
            let valuesPerSlot = self.contextLength * kvDim, slots = slotCount
            keySlotStride = keysPerSlot
            valueSlotStride = valuesPerSlot
            // Attention reads only positions already written, and pages of unused context are
            // never touched, so they cost no memory.
            let layersOnCPU = device == nil ? c.layerCount : 0
            kCache = try (0..<layersOnCPU).map { _ in try alloc(slots * keysPerSlot, "the key cache") }
            vCache = try (0..<layersOnCPU).map { _ in try alloc(slots * valuesPerSlot, "the value cache") }
            let n = self.maxBatch, e = c.embeddingLength
            x = try alloc(n * e, "activations")
            h = try alloc(n * max(e, qDim), "activations")
            q = try alloc(n * qDim, "activations")
            k = try alloc(n * kvDim, "activations")
            v = try alloc(n * kvDim, "activations")
            attn = try alloc(n * qDim, "activations")
            tmp = try alloc(n * e, "activations")
            gate = try alloc(n * c.feedForwardLength, "activations")
            up = try alloc(n * c.feedForwardLength, "activations")
            let maxK = max(e, qDim, c.feedForwardLength)
            let mmBytes = pk_matmul_scratch_bytes(Int64(n), Int64(maxK), Int32(threadCount))
            let mm: UnsafeMutablePointer<UInt8> = try alloc(mmBytes, "matmul scratch")
            matmulScratch = UnsafeMutableRawPointer(mm)
            let er: UnsafeMutablePointer<UInt8> = try alloc(transformer.weights.tokenEmbedding.rowBytes, "an embedding row")
            embeddingRow = UnsafeMutableRawPointer(er)
            attnScratch = try alloc(pk_attention_scratch_floats(Int64(self.contextLength), Int32(c.headCount / c.kvHeadCount), Int32(threadCount)), "attention scratch")
            kRows = try alloc(n, "row tables")
            vRows = try alloc(n, "row tables")
            kStore = try alloc(n, "row tables")
            vStore = try alloc(n, "row tables")
            kvLen = try alloc(n, "row tables")
            kvStart = try alloc(n, "row tables")
            rowPositions = try alloc(n, "row tables")
            ropeTables = try transformer.architecture.ropes.map { _ in try alloc(n * c.ropeDims, "row tables") }
            logitsCapacity = 1
            guard let raw = malloc(c.vocabularySize * MemoryLayout<Float>.stride) else { throw ModelError.outOfMemory("logits") }
            logitsBuffer = raw.bindMemory(to: Float.self, capacity: c.vocabularySize)
        } catch {
            allocs.forEach { free($0) }
            pk_pool_destroy(p)
            throw error
        }
        allocations = allocs
    }

    deinit {
        pk_pool_destroy(pool)
        allocations.forEach { free($0) }
        free(logitsBuffer)
        top?.deallocate()
    }

    /// Forgets a slot's tokens (or keeps its first `keeping`), so the slot can hold a new sequence.
    public func reset(slot: Int, keeping: Int = 0) {
        guard slot >= 0, slot < slotCount else { return }
        end(slot: slot, at: min(max(0, keeping), slotLengths[slot]))
    }

    /// Slot `slot` now holds `length` positions; on a GPU, its pages past them are freed.
    private func end(slot: Int, at length: Int) {
        slotLengths[slot] = length
        device?.truncate(slot: slot, keeping: length)
    }

    /// Where the GPU's KV cache has fewer pages than every slot's whole context (created with
    /// `pagesByUse`): positions per page, and the pages the sequences may hold in all. A step
    /// whose slots need more pages than are free (``kvPagesFree``, ``kvPagesToWrite``) is
    /// refused; nil where every slot has room for its whole context (the CPU, or a GPU with
    /// memory for it).
    var kvPageBudget: (pageLength: Int, pages: Int)? {
        guard let device, device.pagesLimited else { return nil }
        return device.pageBudget
    }

    /// KV-cache pages no slot holds (0 on the CPU).
    var kvPagesFree: Int { device?.pagesFree ?? 0 }

    /// KV-cache pages slot `slot` takes to write positions `first...last`: past those it holds,
    /// and its own copy of each it shares with another slot (0 on the CPU).
    func kvPagesToWrite(slot: Int, from first: Int, through last: Int) -> Int {
        device?.pagesToWrite(slot: slot, from: first, through: last) ?? 0
    }

    /// KV-cache pages that resetting every slot of `slots` frees: those no other slot shares (0 on the CPU).
    func kvPagesFreed(emptying slots: Set<Int>) -> Int { device?.pagesFreed(emptying: slots) ?? 0 }

    /// Copies the first `count` positions of `source`'s cache into `target`, which then holds
    /// exactly those positions: a shared prefix computed once serves another sequence. The
    /// copy is bit-identical to prefilling the same tokens (rows are computed independently).
    public func copyPrefix(from source: Int, to target: Int, count: Int) throws {
        guard source >= 0, source < slotCount else { throw ModelError.invalidSlot(source, slots: slotCount) }
        guard target >= 0, target < slotCount else { throw ModelError.invalidSlot(target, slots: slotCount) }
        guard count >= 0, count <= slotLengths[source] else {
            throw ModelError.malformedBatch("slot \(source) holds \(slotLengths[source]) positions, not \(count)")
        }
        guard source != target else { end(slot: target, at: count); return }
        if let device {
            do {
                try device.copyPrefix(from: source, to: target, count: count)
            } catch {
                // The target may have given up its pages already: it holds nothing now.
                reset(slot: target)
                throw error
            }
            slotLengths[target] = count
            return
        }
        let keyHalves = Self.keyPositions(count) * kvDim
        let valueStride = contextLength * kvDim
        for l in 0..<config.layerCount {
            (kCache[l] + target * keySlotStride).update(from: kCache[l] + source * keySlotStride, count: keyHalves)
            (vCache[l] + target * valueStride).update(from: vCache[l] + source * valueStride, count: count * kvDim)
        }
        slotLengths[target] = count
    }

    /// Makes `adapter` available to the rows of later steps, unmerged: its low-rank products
    /// are added to the base model's for the rows whose ``Batch/adapters`` name the returned id,
    /// so sequences with different adapters (or none) share one step. Attaching an adapter
    /// already attached returns its id.
    ///
    /// - Throws: ``AdapterError`` when the adapter was read for another model, or its pairs
    ///   cannot be placed on the GPU (``AdapterError/unsupportedBackend(_:)``: out of device memory).
    public func attach(_ adapter: LoRAAdapter) throws(AdapterError) -> Int {
        if let (id, _) = adapters.first(where: { $0.value.adapter === adapter }) { return id }
        try adapter.checkShapes(in: config)
        let id = nextAdapterID
        let attached = AttachedAdapter(adapter, layerCount: config.layerCount)
        if let device {
            do { try device.attach(id, attached) } catch {
                throw .unsupportedBackend("adapter '\(adapter.name)' could not be placed on the GPU: \(error.localizedDescription)")
            }
        }
        nextAdapterID += 1
        adapters[id] = attached
        return id
    }

    /// Forgets an attached adapter. Slots whose caches it computed should be reset by the caller.
    public func detach(_ id: Int) {
        adapters[id] = nil
        device?.detach(id)
    }

    /// The adapter attached as `id`.
    public func adapter(_ id: Int) -> LoRAAdapter? { adapters[id]?.adapter }

    /// The token the backend chose for the `index`-th row that asked for logits in the last step,
    /// when that row's use was ``LogitsUse/argmax(allowed:)`` and the backend chooses
    /// (``choosesTokens``); nil when the row's logits are in host memory (``logits(_:)``).
    public func chosenToken(_ index: Int) -> Int32? {
        precondition(index >= 0 && index < logitRowCount, "logits row \(index) out of range")
        guard device != nil, chosen[index] >= 0 else { return nil }
        return chosen[index]
    }

    /// The best tokens of the `index`-th row that asked for logits in the last step, best first,
    /// when that row's use was ``LogitsUse/top(k:allowed:)`` and the backend reduced it (a GPU);
    /// nil when the row's logits are in host memory. Valid until the next step.
    public func topCandidates(_ index: Int) -> UnsafeBufferPointer<TokenCandidate>? {
        precondition(index >= 0 && index < logitRowCount, "logits row \(index) out of range")
        guard device != nil, chosen[index] == -2 else { return nil }
        let row = UnsafeBufferPointer(start: top! + index * LogitsUse.maxTopK, count: LogitsUse.maxTopK)
        return UnsafeBufferPointer(rebasing: row.prefix { $0.id >= 0 })
    }

    /// The logits of the `index`-th row that asked for them in the last step. Valid until the next
    /// step. Not for a row whose token the backend chose (``chosenToken(_:)``).
    public func logits(_ index: Int) -> UnsafeBufferPointer<Float> {
        precondition(index >= 0 && index < logitRowCount, "logits row \(index) out of range")
        precondition(device == nil || chosen[index] == -1, "logits row \(index) was reduced on the device (its argmax or best tokens)")
        return UnsafeBufferPointer(start: logitsBuffer + index * config.vocabularySize, count: config.vocabularySize)
    }

    /// Runs one step over a ragged batch. Batches larger than `maxBatch` run in chunks.
    public func forward(_ batch: Batch) throws {
        guard batch.count > 0 else { throw ModelError.emptyBatch }
        guard batch.positions.count == batch.count, batch.slots.count == batch.count, batch.wantsLogits.count == batch.count,
              batch.uses.count == batch.count, batch.adapters.count == batch.count else {
            throw ModelError.malformedBatch("tokens, positions, slots, logits flags and adapters differ in length")
        }
        try validate(batch)
        let wanted = batch.wantsLogits.filter { $0 }.count
        try reserveLogits(wanted)
        logitRowCount = 0
        var start = 0
        while start < batch.count {
            let end = min(start + maxBatch, batch.count)
            if let device {
                if chosen.count < max(wanted, 1) { chosen = Array(repeating: -1, count: max(wanted, 1)) }
                if topRows < max(wanted, 1) {
                    top?.deallocate()
                    topRows = max(wanted, 1)
                    top = .allocate(capacity: topRows * LogitsUse.maxTopK)
                }
                let first = logitRowCount, topOut = top! + first * LogitsUse.maxTopK
                let none = AdapterRows(ids: [], adapters: [:])
                let lora = adapters.isEmpty ? (rows: none, logitRows: none)
                    : (rows: adapterRows(batch, Array(start..<end)), logitRows: adapterRows(batch, (start..<end).filter { batch.wantsLogits[$0] }))
                logitRowCount += try chosen.withUnsafeMutableBufferPointer { chosenOut in
                    try device.step(batch, start..<end, adapters: lora, logitsOut: logitsBuffer + first * config.vocabularySize,
                                    chosenOut: chosenOut.baseAddress! + first, topOut: topOut)
                }
            } else {
                step(batch, start..<end)
            }
            start = end
        }
        // Each slot now ends after its last position in the batch (starting earlier truncates it).
        var lastPos: [Int: Int32] = [:]
        for (i, s) in batch.slots.enumerated() { lastPos[s] = batch.positions[i] }
        for (s, p) in lastPos { end(slot: s, at: Int(p) + 1) }
    }

    private func validate(_ batch: Batch) throws {
        var next: [Int: Int32] = [:]
        for i in 0..<batch.count {
            let t = batch.tokens[i], s = batch.slots[i], p = batch.positions[i]
            guard t >= 0, Int(t) < config.vocabularySize else { throw ModelError.tokenOutOfRange(token: t, vocabularySize: config.vocabularySize) }
            guard s >= 0, s < slotCount else { throw ModelError.invalidSlot(s, slots: slotCount) }
            if let expected = next[s] {
                guard p == expected else { throw ModelError.nonContiguousPositions(slot: s, expected: expected, found: p) }
            } else {
                guard p >= 0, Int(p) <= slotLengths[s] else {
                    throw ModelError.nonContiguousPositions(slot: s, expected: Int32(slotLengths[s]), found: p)
                }
            }
            guard Int(p) < contextLength else { throw ModelError.contextOverflow(slot: s, needed: Int(p) + 1, capacity: contextLength) }
            let a = batch.adapters[i]
            guard a == 0 || adapters[a] != nil else { throw ModelError.malformedBatch("row \(i) names adapter \(a), which is not attached") }
            next[s] = p + 1
        }
    }

    /// Grows the logits buffer (outside the step) when a batch asks for more rows than ever before.
    private func reserveLogits(_ rows: Int) throws {
        guard rows > logitsCapacity else { return }
        guard let raw = realloc(logitsBuffer, rows * config.vocabularySize * MemoryLayout<Float>.stride) else {
            throw ModelError.outOfMemory("logits for \(rows) rows")
        }
        logitsBuffer = raw.bindMemory(to: Float.self, capacity: rows * config.vocabularySize)
        logitsCapacity = rows
    }

    /// Hears the input of every matrix product of a CPU step before it runs: the weights' names,
    /// then `rows` activation rows of `width` floats (what an importance matrix is made of).
    public var inputObserver: ((_ weights: [String], _ input: UnsafePointer<Float>, _ rows: Int, _ width: Int) -> Void)?

    /// Products of one input (n rows) with up to PK_MATMUL_MAX_OPS weights, with their
    /// epilogues, in one pass over the pool: the input is quantized once and all rows are split
    /// between the threads together. `glu` pairs two products into act(first) ⊙ second
    /// (``pk_matmul_fuse``), and `norm` makes the input first.
    func matmul(_ input: UnsafeMutablePointer<Float>, _ n: Int, _ products: [ProductTarget], glu: Int32 = 0, norm: NormFusion? = nil) {
        if norm == nil { inputObserver?(products.map(\.weight.name), input, n, products[0].weight.rowLength) }
        withUnsafeTemporaryAllocation(of: pk_matmul_op.self, capacity: products.count) { ops in
            for (i, p) in products.enumerated() {
                let w = p.weight
                ops[i] = pk_matmul_op(type: Int32(w.type.rawValue), w: w.data, m: Int64(w.rowCount), y: p.output, ldy: Int64(w.rowCount),
                                      packed: w.packed, bias: p.bias, accumulate: p.accumulate ? 1 : 0)
            }
            var fuse = pk_matmul_fuse(glu: glu, norm_source: norm?.source, norm_weight: norm?.weight, norm_eps: norm?.eps ?? 0)
            let rc = pk_matmul_fused(pool, ops.baseAddress, Int32(products.count), Int64(products[0].weight.rowLength),
                                     input, Int64(n), &fuse, matmulScratch)
            precondition(rc == 0, "matmul rejected \(products.map { "\($0.weight.name) (\($0.weight.type.name))" }); the loader should have refused it")
        }
    }

    /// The rows of `rows` (indices into the step's rows, in order) grouped by their adapter.
    private func adapterRows(_ batch: Batch, _ rows: [Int]) -> AdapterRows {
        guard !adapters.isEmpty else { return AdapterRows(ids: [], adapters: [:]) }
        return AdapterRows(ids: rows.map { batch.adapters[$0] }, adapters: adapters)
    }

    private func step(_ batch: Batch, _ range: Range<Int>) {
        let c = config, e = c.embeddingLength, n = range.count
        let w = transformer.weights
        let lora = adapterRows(batch, Array(range))
        for (r, i) in range.enumerated() {
            let te = w.tokenEmbedding, token = Int(batch.tokens[i])
            var row = te.row(token)
            // A tied embedding is read from the output's packed copy, so the file's pages stay cold.
            if let p = te.packed, pk_packed_row(Int32(te.type.rawValue), p, Int64(te.rowCount), Int64(te.rowLength), Int64(token), embeddingRow) == 0 {
                row = UnsafeRawPointer(embeddingRow)
            }
            _ = pk_dequantize(Int32(te.type.rawValue), row, x + r * e, Int64(e))
            if batch.adapters[i] != 0, let p = adapters[batch.adapters[i]]?.adapter.pairs[.tokenEmbedding] {
                p.addDelta(row: token, to: x + r * e)
            }
            if let scale = transformer.architecture.embeddingScale {
                for j in 0..<e { x[r * e + j] *= scale }
            }
            rowPositions[r] = batch.positions[i]
            kvLen[r] = batch.positions[i] + 1
        }
        for (table, rope) in zip(ropeTables, transformer.architecture.ropes) {
            (rope.factors ?? []).withUnsafeBufferPointer { f in
                pk_rope_table(rowPositions, Int64(n), Int32(c.ropeDims), rope.base, rope.scale, rope.factors == nil ? nil : f.baseAddress, table)
            }
        }
        let architecture = transformer.architecture
        for (l, lw) in w.layers.enumerated() {
            let step = CPULayerStep(context: self, layer: l, weights: lw, batch: batch, rows: range, lora: lora)
            architecture.layer(l, step)
            step.run()
        }
        // Only the rows that asked for logits go through the output projection.
        var m = 0
        var logitRows: [Int] = []
        for (r, i) in range.enumerated() where batch.wantsLogits[i] {
            (h + m * e).update(from: x + r * e, count: e)
            m += 1
            if !lora.isEmpty { logitRows.append(i) }
        }
        guard m > 0 else { return }
        pk_rms_norm(pool, h, w.outputNorm.data.assumingMemoryBound(to: Float.self), h, Int64(m), Int64(e), c.rmsEpsilon)
        var done = 0
        while done < m {
            let chunk = min(m - done, maxBatch)
            matmul(h + done * e, chunk, [ProductTarget(weight: w.output, output: logitsBuffer + (logitRowCount + done) * c.vocabularySize)])
            done += chunk
        }
        if !lora.isEmpty {
            adapterRows(batch, logitRows).apply([({ $0.pairs[.output] }, logitsBuffer + logitRowCount * c.vocabularySize, c.vocabularySize)],
                                                input: h, width: e, pool: pool)
        }
        if let cap = transformer.architecture.logitSoftcap {
            let logits = logitsBuffer + logitRowCount * c.vocabularySize
            for j in 0..<m * c.vocabularySize { logits[j] = cap * tanhf(logits[j] / cap) }
        }
        logitRowCount += m
    }
}

/// One product of a matmul call: its weights, where its rows go, and its epilogue.
struct ProductTarget {
    let weight: WeightTensor
    let output: UnsafeMutablePointer<Float>
    var bias: UnsafePointer<Float>? = nil
    /// Add the result to `output` instead of storing it.
    var accumulate = false
}

/// RMSNorm rows of `source` times `weight`, made as a product's input.
struct NormFusion {
    let source: UnsafePointer<Float>
    let weight: UnsafePointer<Float>
    let eps: Float
}
