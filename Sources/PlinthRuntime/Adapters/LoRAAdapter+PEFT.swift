import Foundation
import PlinthJSON

/// PEFT's LoRA format: `adapter_config.json` (rank, alpha, targets, options) beside
/// `adapter_model.safetensors`, whose tensors are named by module path
/// (`base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight`), A as `[r, in]` and B as
/// `[out, r]` (embeddings: `lora_embedding_A` `[r, vocab]`, `lora_embedding_B` `[hidden, r]`).
extension LoRAAdapter {
    /// Hugging Face module names of llama and qwen2 models.
    static let peftModules: [String: AdapterTarget.Matrix] = [
        "q_proj": .attnQ, "k_proj": .attnK, "v_proj": .attnV, "o_proj": .attnOutput,
        "gate_proj": .ffnGate, "up_proj": .ffnUp, "down_proj": .ffnDown,
    ]

    struct PEFTConfig {
        var rank: Int
        var alpha: Double
        var rsLoRA: Bool
        var rankPattern: [(String, Int)]
        var alphaPattern: [(String, Double)]
        var baseModel: String?
        /// Modules the adapter replaces whole (PEFT saves them under their own names).
        var modulesToSave: [String]

        init(_ json: JSONValue) throws(AdapterError) {
            guard json.objectMembers != nil else { throw .badConfig("adapter_config.json is \(json.typeName), not an object") }
            if let type = json["peft_type"]?.stringValue, type.uppercased() != "LORA" {
                throw .unsupported("PEFT type \(type) (only LORA adapters are read)")
            }
            guard let r = json["r"]?.integerValue, r > 0, r <= LoRAAdapter.maximumRank else {
                throw .badConfig("adapter_config.json has no valid rank \"r\" (1...\(LoRAAdapter.maximumRank))")
            }
            rank = r
            // A field of the wrong type is an error, not its default: a string "16" would scale by 8/r.
            func flag(_ key: String) throws(AdapterError) -> Bool {
                guard let v = json[key], v != .null else { return false }
                guard let b = v.boolValue else { throw .badConfig("adapter_config.json's \(key) must be true or false, not \(v.compactText)") }
                return b
            }
            if let v = json["lora_alpha"], v != .null {
                guard let a = v.doubleValue, a.isFinite else { throw .badConfig("adapter_config.json's lora_alpha must be a number, not \(v.compactText)") }
                alpha = a
            } else {
                alpha = 8  // PEFT's LoraConfig default
            }
            rsLoRA = try flag("use_rslora")
            if try flag("use_dora") { throw .unsupported("DoRA (use_dora: true)") }
            if try flag("fan_in_fan_out") { throw .unsupported("fan_in_fan_out: true (GPT-2 style Conv1D weights)") }
            if let bias = json["bias"]?.stringValue, bias != "none" { throw .unsupported("trained biases (bias: \"\(bias)\")") }
            if json["lora_bias"]?.boolValue == true { throw .unsupported("a bias on B (lora_bias: true)") }
            if let t = json["alora_invocation_tokens"], t != .null { throw .unsupported("activated LoRA (alora_invocation_tokens)") }
            func pattern<T>(_ key: String, _ read: (JSONValue) -> T?) throws(AdapterError) -> [(String, T)] {
                guard let v = json[key], v != .null else { return [] }
                guard let members = v.objectMembers else { throw .badConfig("\(key) is \(v.typeName), not an object") }
                var out: [(String, T)] = []
                for (k, x) in members {
                    guard let t = read(x) else { throw .badConfig("\(key)[\"\(k)\"] is \(x.typeName), not a number") }
                    out.append((k, t))
                }
                return out
            }
            rankPattern = try pattern("rank_pattern") { $0.integerValue }
            alphaPattern = try pattern("alpha_pattern") { $0.doubleValue }
            baseModel = json["base_model_name_or_path"]?.stringValue
            modulesToSave = (json["modules_to_save"]?.arrayValue ?? []).compactMap(\.stringValue)
                + (json["trainable_token_indices"].map { $0 == .null ? [] : ["embed_tokens"] } ?? [])
        }

        /// PEFT's scaling for the module at `path` (e.g. `model.layers.3.self_attn.q_proj`) whose
        /// tensors have rank `rank`: alpha / r, or alpha / √r with rsLoRA, patterns applied.
        /// The configured rank (`r`, or the module's `rank_pattern`) must be the tensors': PEFT
        /// refuses such a file, and the scale would be wrong.
        func scale(path: String, rank: Int) throws(AdapterError) -> Float {
            func matches(_ p: String) -> Bool {
                if path == p || path.hasSuffix("." + p) { return true }
                guard let re = try? NSRegularExpression(pattern: "^(?:.*\\.)?(?:\(p))$") else { return false }
                return re.firstMatch(in: path, range: NSRange(path.startIndex..., in: path)) != nil
            }
            let pattern = rankPattern.first { matches($0.0) }
            let configured = pattern?.1 ?? self.rank
            guard configured == rank else {
                let source = pattern.map { "rank_pattern[\"\($0.0)\"]" } ?? "r"
                throw .badConfig("\(path)'s tensors have rank \(rank), but adapter_config.json's \(source) is \(configured)")
            }
            let a = alphaPattern.first { matches($0.0) }?.1 ?? alpha
            return Float(rsLoRA ? a / Double(rank).squareRoot() : a / Double(rank))
        }
    }

    static func loadPEFT(folder: URL, config: ModelConfig, weights: URL? = nil) throws(AdapterError) -> Loaded {
        let configURL = folder.appendingPathComponent("adapter_config.json")
        let weightsURL = weights ?? folder.appendingPathComponent("adapter_model.safetensors")
        guard FileManager.default.fileExists(atPath: configURL.path) else {
            throw .notAnAdapter(folder.path, "no adapter_config.json (a PEFT adapter folder holds adapter_config.json and adapter_model.safetensors)")
        }
        guard FileManager.default.fileExists(atPath: weightsURL.path) else {
            let pickle = FileManager.default.fileExists(atPath: folder.appendingPathComponent("adapter_model.bin").path)
            throw .notAnAdapter(folder.path, pickle ? "only adapter_model.bin (PyTorch pickle) is there; save the adapter with safetensors"
                                                    : "no adapter_model.safetensors")
        }
        let json: JSONValue
        do {
            json = try JSONValue(parsing: Array(try Data(contentsOf: configURL)))
        } catch let e as JSONSyntaxError {
            throw .badConfig("adapter_config.json is not JSON: \(e)")
        } catch {
            throw .cannotRead(configURL.path, error.localizedDescription)
        }
        let peft = try PEFTConfig(json)
        let file: SafetensorsFile
        do { file = try SafetensorsFile(url: weightsURL) } catch { throw .safetensors(weightsURL.lastPathComponent, error) }

        // Halves by target, with the module path PEFT's patterns match.
        var halves = HalfTable()
        var paths: [AdapterTarget: String] = [:]
        for t in file.tensors {
            let parts = t.name.split(separator: ".").map(String.init)
            guard let at = parts.firstIndex(where: { ["lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B"].contains($0) }), at > 0 else {
                if t.name.contains("modules_to_save") || parts.contains(where: peft.modulesToSave.contains) {
                    throw .unsupportedTensor(tensor: t.name, why: "a full replacement module (modules_to_save or trainable_token_indices in adapter_config.json), which Plinth does not apply")
                }
                throw .unsupportedTensor(tensor: t.name, why: "not a LoRA A or B tensor")
            }
            let module = parts[at - 1]
            // The module's path in the model, as PEFT's patterns see it (without PEFT's wrapper).
            var path = Array(parts[..<at])
            if path.starts(with: ["base_model", "model"]) { path.removeFirst(2) }
            let target: AdapterTarget
            if module == "embed_tokens" {
                target = .tokenEmbedding
            } else if module == "lm_head" {
                target = .output
            } else if let m = peftModules[module], let li = parts.firstIndex(of: "layers"), li + 1 < parts.count, let layer = Int(parts[li + 1]) {
                target = .layer(layer, m)
            } else {
                throw .unknownTarget(tensor: t.name, why: "module '\(module)' is not one of llama's or qwen2's (\(peftModules.keys.sorted().joined(separator: ", ")), embed_tokens, lm_head)")
            }
            guard t.shape.count == 2 else { throw .badTensor(tensor: t.name, why: "has \(t.shape.count) dimensions, not 2") }
            let values: [Float]
            do { values = try file.floats(t) } catch { throw .safetensors(weightsURL.lastPathComponent, error) }
            let half = Half(values: values, rows: t.shape[0], columns: t.shape[1], source: t.name)
            try halves.add(half, isA: parts[at].hasSuffix("A"), to: target)
            paths[target] = path.joined(separator: ".")
        }
        guard !halves.isEmpty else { throw .notAnAdapter(weightsURL.path, "it holds no LoRA tensors") }
        var pairs: [AdapterTarget: LoRAPair] = [:]
        for (target, a, b) in try halves.complete() {
            var (a, b) = (a, b)
            if target == .tokenEmbedding {
                // ΔE[token] = B · A[:, token]: in ΔW = B'·A' terms (rows are tokens), B' = Aᵀ, A' = Bᵀ.
                (a, b) = (transposed(b), transposed(a))
            } else if case .layer(_, let m) = target, !config.architecture.neoxRoPE, m == .attnQ || m == .attnK {
                b = ggufRowOrder(b, heads: m == .attnQ ? config.headCount : config.kvHeadCount)
            }
            pairs[target] = try pair(target, a: a, b: b) { rank throws(AdapterError) in try peft.scale(path: paths[target] ?? "", rank: rank) }
        }
        return Loaded(format: .peft, pairs: pairs, baseModelName: baseName(fromPEFT: peft.baseModel),
                      fingerprint: try fingerprint(of: [configURL, weightsURL]))
    }
}
