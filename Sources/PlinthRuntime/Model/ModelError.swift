import Foundation

/// Problems loading a model or running a step, each naming what is wrong.
public enum ModelError: Error, LocalizedError, Equatable, Sendable {
    case unsupportedArchitecture(String)
    case missingMetadata(String)
    case invalidMetadata(key: String, reason: String)
    case missingTensor(String)
    case tensorShape(tensor: String, expected: [Int], found: [Int])
    case unsupportedTensorType(tensor: String, type: String)
    case tokenOutOfRange(token: Int32, vocabularySize: Int)
    case contextOverflow(slot: Int, needed: Int, capacity: Int)
    case invalidSlot(Int, slots: Int)
    case nonContiguousPositions(slot: Int, expected: Int32, found: Int32)
    case malformedBatch(String)
    case emptyBatch
    case outOfMemory(String)

    public var errorDescription: String? {
        switch self {
        case .unsupportedArchitecture(let a):
            "unsupported model architecture '\(a)' (supported: \(Architecture.allCases.map(\.rawValue).joined(separator: ", ")))"
        case .missingMetadata(let k): "the model file has no '\(k)' metadata"
        case .invalidMetadata(let k, let why): "metadata '\(k)' is invalid: \(why)"
        case .missingTensor(let n): "the model file has no tensor '\(n)'"
        case .tensorShape(let n, let e, let f): "tensor '\(n)' has shape \(f), expected \(e)"
        case .unsupportedTensorType(let n, let t):
            "tensor '\(n)' uses type \(t), which Plinth cannot compute with (supported: \(GGMLType.supportedTypes.map(\.name).joined(separator: ", ")))"
        case .tokenOutOfRange(let t, let v): "token id \(t) is outside the vocabulary (0..<\(v))"
        case .contextOverflow(let s, let n, let c):
            "sequence \(s) needs \(n) positions but the context holds \(c) tokens"
        case .invalidSlot(let s, let n): "sequence slot \(s) does not exist (the context has \(n))"
        case .nonContiguousPositions(let s, let e, let f):
            "sequence \(s): expected position \(e) next, got \(f) (positions of a sequence must be consecutive)"
        case .malformedBatch(let why): "malformed batch: \(why)"
        case .emptyBatch: "the batch holds no tokens"
        case .outOfMemory(let what): "could not allocate \(what)"
        }
    }
}
