import Foundation

/// Why an adapter could not be read or used, each case naming the file, tensor or setting.
public enum AdapterError: Error, LocalizedError, Sendable {
    case notFound(String)
    case cannotRead(String, String)
    case notAnAdapter(String, String)
    case badConfig(String)
    case unsupported(String)
    case safetensors(String, SafetensorsError)
    case gguf(String, GGUFError)
    case unsupportedTensor(tensor: String, why: String)
    case unknownTarget(tensor: String, why: String)
    case badTensor(tensor: String, why: String)
    case rankMismatch(tensor: String, a: Int, b: Int)
    case shapeMismatch(tensor: String, adapter: [Int], model: [Int])
    case architectureMismatch(adapter: String, model: String)
    case unknownName(String, searched: [String])
    case unsupportedBackend(String)

    public var errorDescription: String? {
        switch self {
        case .notFound(let p): "adapter not found: \(p)"
        case .cannotRead(let p, let why): "cannot read \(p): \(why)"
        case .notAnAdapter(let p, let why): "\(p) is not a LoRA adapter: \(why)"
        case .badConfig(let why): "adapter configuration: \(why)"
        case .unsupported(let what): "the adapter uses \(what), which Plinth does not support"
        case .safetensors(let f, let e): "\(f): \(e.localizedDescription)"
        case .gguf(let f, let e): "\(f): \(e.localizedDescription)"
        case .unsupportedTensor(let t, let why): "adapter tensor '\(t)' is \(why)"
        case .unknownTarget(let t, let why): "adapter tensor '\(t)' has no matrix to adapt: \(why)"
        case .badTensor(let t, let why): "adapter tensor '\(t)': \(why)"
        case .rankMismatch(let t, let a, let b): "the pair for \(t) disagrees on its rank: A has \(a) rows, B has \(b) columns"
        case .shapeMismatch(let t, let a, let m):
            "the adapter changes \(t) as a \(a[0])×\(a[1]) matrix but the model's is \(m[0])×\(m[1]) (an adapter for another model?)"
        case .architectureMismatch(let a, let m): "the adapter is for a \(a) model, not \(m)"
        case .unknownName(let n, let dirs): "no adapter named '\(n)' in \(dirs.joined(separator: ", ")) (a name is a PEFT folder or NAME.gguf there)"
        case .unsupportedBackend(let why): "adapters cannot run here: \(why)"
        }
    }
}
