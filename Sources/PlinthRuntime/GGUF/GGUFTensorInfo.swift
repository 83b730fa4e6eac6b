/// Where a tensor lives in a GGUF file and what it holds.
public struct GGUFTensorInfo: Sendable, Equatable {
    public let name: String
    /// Sizes, innermost (row length) first, as GGUF stores them.
    public let dimensions: [Int]
    public let type: GGMLType
    /// Byte offset from the start of the file.
    public let fileOffset: Int
    public let byteCount: Int

    public var elementCount: Int { dimensions.reduce(1, *) }
    public var rowLength: Int { dimensions.first ?? 1 }
    public var rowCount: Int { elementCount / max(rowLength, 1) }
}
