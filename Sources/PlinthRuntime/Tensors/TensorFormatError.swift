import Foundation

/// An error that describes tensor data Plinth cannot convert.
public enum TensorFormatError: Error, LocalizedError, Equatable, Sendable {
    /// The tensor is stored in a format that Plinth cannot dequantize.
    case unsupportedType(GGMLType)
    /// The file names a type number that ggml has never defined.
    case unknownType(UInt32)
    /// The element count is negative or not a whole number of the type's blocks.
    case partialBlock(type: GGMLType, count: Int)

    public var errorDescription: String? {
        switch self {
        case .unsupportedType(let type):
            let supported = GGMLType.supportedTypes.map(\.name).joined(separator: ", ")
            return "Tensor type \(type.name) (ggml type \(type.rawValue)) is not supported. "
                + "Use a model quantized to one of: \(supported)."
        case .unknownType(let id):
            return "Tensor type number \(id) is not a ggml type. "
                + "The file may be damaged or written by a newer ggml than Plinth knows."
        case .partialBlock(let type, let count):
            if count < 0 {
                return "Cannot convert \(count) weights of type \(type.name): the count is negative."
            }
            return "Cannot convert \(count) weights of type \(type.name): \(type.name) stores weights "
                + "in blocks of \(type.blockElements), and \(count) is not a whole number of blocks."
        }
    }
}
