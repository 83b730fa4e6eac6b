import Foundation

/// Everything that can be wrong with a GGUF file, each case naming the problem and where it is.
public enum GGUFError: Error, LocalizedError, Equatable, Sendable {
    case fileNotFound(String)
    case cannotOpen(String, String)
    case badMagic(found: String)
    case unsupportedVersion(UInt32)
    case truncated(offset: Int, reading: String)
    case invalidUTF8(offset: Int, reading: String)
    case unknownValueType(UInt32, key: String)
    case invalidBool(UInt8, key: String)
    case duplicateKey(String)
    case wrongValueType(key: String, expected: String, found: String)
    case countTooLarge(UInt64, what: String)
    case invalidAlignment(String)
    case nestingTooDeep(key: String, limit: Int)
    case duplicateTensor(String)
    case badDimensionCount(tensor: String, count: UInt32)
    case invalidDimension(tensor: String, index: Int, value: UInt64)
    case sizeOverflow(tensor: String)
    case unknownTensorType(tensor: String, id: UInt32)
    case rowNotBlockAligned(tensor: String, type: String, rowLength: Int, blockElements: Int)
    case misalignedTensor(tensor: String, offset: UInt64, alignment: Int)
    case tensorOutOfBounds(tensor: String, end: UInt64, fileSize: Int)
    case overlappingTensors(String, String)

    public var errorDescription: String? {
        switch self {
        case .fileNotFound(let p): "GGUF file not found: \(p)"
        case .cannotOpen(let p, let why): "cannot open \(p): \(why)"
        case .badMagic(let m): "not a GGUF file: the first four bytes are \(m), expected \"GGUF\""
        case .unsupportedVersion(let v): "unsupported GGUF version \(v) (versions 2 and 3 are supported)"
        case .truncated(let o, let what): "GGUF file is truncated: ran out of bytes at offset \(o) while reading \(what)"
        case .invalidUTF8(let o, let what): "invalid UTF-8 in \(what) at offset \(o)"
        case .unknownValueType(let t, let k): "metadata key '\(k)' has unknown value type \(t)"
        case .invalidBool(let v, let k): "metadata key '\(k)' holds a bool with byte value \(v) (must be 0 or 1)"
        case .duplicateKey(let k): "metadata key '\(k)' appears twice"
        case .wrongValueType(let k, let e, let f): "metadata key '\(k)' should be \(e) but is \(f)"
        case .countTooLarge(let n, let what): "\(what) claims \(n) entries, more than the file can hold (the file may be truncated or damaged)"
        case .invalidAlignment(let a): "general.alignment is \(a); it must be a power of two from 1 to 1048576"
        case .nestingTooDeep(let k, let limit): "metadata key '\(k)' nests arrays more than \(limit) deep"
        case .duplicateTensor(let n): "tensor '\(n)' appears twice"
        case .badDimensionCount(let n, let c): "tensor '\(n)' has \(c) dimensions (1 to 4 are allowed)"
        case .invalidDimension(let n, let i, let v): "tensor '\(n)' has invalid size \(v) in dimension \(i)"
        case .sizeOverflow(let n): "tensor '\(n)' is too large: its size overflows"
        case .unknownTensorType(let n, let id): "tensor '\(n)' has unknown type id \(id)"
        case .rowNotBlockAligned(let n, let t, let r, let b):
            "tensor '\(n)' of type \(t) has rows of \(r) elements, not a multiple of the block size \(b)"
        case .misalignedTensor(let n, let o, let a): "tensor '\(n)' has offset \(o), not a multiple of the alignment \(a)"
        case .tensorOutOfBounds(let n, let e, let s): "tensor '\(n)' ends at byte \(e), past the end of the file (\(s) bytes)"
        case .overlappingTensors(let a, let b): "tensors '\(a)' and '\(b)' overlap in the file"
        }
    }
}
