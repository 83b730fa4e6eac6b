import Foundation

/// llama.cpp's LoRA format: a GGUF file with `general.type = adapter`, `adapter.type = lora`,
/// `adapter.lora.alpha`, and for each changed matrix `NAME.lora_a` (ggml shape [in, r], so A
/// row-major) and `NAME.lora_b` ([r, out], so B row-major), rows already in the GGUF order.
/// The token embedding's pair is stored flipped: `lora_a` [r, vocab] and `lora_b` [r, hidden].
extension LoRAAdapter {
    static func loadGGUF(_ url: URL, config: ModelConfig) throws(AdapterError) -> Loaded {
        let file: GGUFFile
        do { file = try GGUFFile(url: url) } catch { throw .gguf(url.lastPathComponent, error) }
        func string(_ key: String) throws(AdapterError) -> String? {
            do { return try file.string(key) } catch { throw .gguf(url.lastPathComponent, error) }
        }
        guard try string("general.type") == "adapter" else {
            throw .notAnAdapter(url.path, "general.type is \(try string("general.type").map { "'\($0)'" } ?? "missing"), not 'adapter' (is it a model?)")
        }
        guard let kind = try string("adapter.type"), kind == "lora" else {
            throw .unsupported("adapter.type '\(try string("adapter.type") ?? "missing")' (only 'lora' is read)")
        }
        if let arch = try string("general.architecture"), arch != config.architecture.rawValue {
            throw .architectureMismatch(adapter: arch, model: config.architecture.rawValue)
        }
        if file.tensors.isEmpty == false, (try? file.array("adapter.alora.invocation_tokens")) != nil {
            throw .unsupported("activated LoRA (adapter.alora.invocation_tokens)")
        }
        let alpha: Double
        do { alpha = try file.double("adapter.lora.alpha") ?? 0 } catch { throw .gguf(url.lastPathComponent, error) }

        var halves = HalfTable()
        for t in file.tensors {
            let isA = t.name.hasSuffix(".lora_a"), isB = t.name.hasSuffix(".lora_b")
            guard isA || isB else { throw .unsupportedTensor(tensor: t.name, why: "not a .lora_a or .lora_b tensor") }
            let base = String(t.name.dropLast(7))
            guard let target = AdapterTarget(tensorName: base) else {
                throw .unknownTarget(tensor: t.name, why: "'\(base)' is not a matrix of llama's or qwen2's that Plinth adapts")
            }
            guard t.dimensions.count == 2 else { throw .badTensor(tensor: t.name, why: "has \(t.dimensions.count) dimensions, not 2") }
            guard t.type.isSupported else { throw .badTensor(tensor: t.name, why: "type \(t.type.name) cannot be read") }
            var values = [Float](repeating: 0, count: t.elementCount)
            do {
                try values.withUnsafeMutableBufferPointer { v throws(TensorFormatError) in
                    try t.type.dequantize(file.data(of: t), count: t.elementCount, into: v.baseAddress!)
                }
            } catch {
                throw .badTensor(tensor: t.name, why: error.localizedDescription)
            }
            let half = Half(values: values, rows: t.dimensions[1], columns: t.dimensions[0], source: t.name)
            try halves.add(half, isA: isA, to: target)
        }
        guard !halves.isEmpty else { throw .notAnAdapter(url.path, "it holds no LoRA tensors") }
        var pairs: [AdapterTarget: LoRAPair] = [:]
        for (target, a, b) in try halves.complete() {
            var (a, b) = (a, b)
            if target == .tokenEmbedding {
                // lora_a holds B' (tokens × r) and lora_b holds A'ᵀ (hidden × r).
                (a, b) = (transposed(b), a)
            }
            // llama.cpp's scale: alpha / rank, or 1 when the file gives no alpha.
            pairs[target] = try pair(target, a: a, b: b) { alpha != 0 ? Float(alpha / Double($0)) : 1 }
        }
        let baseName = (try? file.string("general.base_model.0.name")) ?? (try? file.string("general.basename"))
        return Loaded(format: .gguf, pairs: pairs, baseModelName: baseName ?? nil, fingerprint: try fingerprint(of: [url]))
    }
}
