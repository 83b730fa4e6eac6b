import Foundation

/// Writes a GGUF file (version 3) as llama.cpp lays it out: the metadata in the order given, the
/// tensor infos, then each tensor's bytes at an aligned offset. Tensors are produced one at a
/// time by their `fill` closures, so a model never has to be in memory whole. The file appears
/// under its name only when complete (it is written to a ``PartialFile`` beside it first).
public struct GGUFWriter {
    public struct Tensor {
        public var name: String
        /// Sizes, row length first.
        public var dimensions: [Int]
        public var type: GGMLType
        /// Writes the tensor's bytes (`type.tensorBytes`) into the buffer.
        public var fill: (UnsafeMutableRawBufferPointer) throws -> Void

        public init(name: String, dimensions: [Int], type: GGMLType, fill: @escaping (UnsafeMutableRawBufferPointer) throws -> Void) {
            self.name = name
            self.dimensions = dimensions
            self.type = type
            self.fill = fill
        }

        var byteCount: Int? {
            let elements = dimensions.reduce(1, *)
            return type.tensorBytes(elements: elements, rowLength: dimensions.first ?? 1)
        }
    }

    public var metadata: [(key: String, value: GGUFValue)]
    public var tensors: [Tensor]

    public init(metadata: [(key: String, value: GGUFValue)], tensors: [Tensor]) {
        self.metadata = metadata
        self.tensors = tensors
    }

    /// Alignment of the tensor data: `general.alignment` when the metadata sets it, else 32.
    var alignment: Int { metadata.first { $0.key == "general.alignment" }?.value.intValue ?? 32 }

    public func write(to url: URL) throws {
        let alignment = self.alignment
        guard alignment > 0, alignment % 8 == 0, alignment <= UInt32.max else { throw GGUFWriteError.badAlignment(alignment) }
        var header = ByteWriter()
        header.bytes += Array("GGUF".utf8)
        header.u32(3)
        header.u64(UInt64(tensors.count))
        header.u64(UInt64(metadata.count))
        for (key, var value) in metadata {
            // The format has it a uint32 (ggml asserts so); a file read may have had another integer.
            if key == "general.alignment" { value = .uint32(UInt32(alignment)) }
            header.string(key)
            header.u32(Self.typeID(value))
            header.value(value)
        }
        var offset = 0
        var sizes: [Int] = []
        for t in tensors {
            guard let bytes = t.byteCount else { throw GGUFWriteError.partialBlocks(tensor: t.name, type: t.type.name) }
            header.string(t.name)
            header.u32(UInt32(t.dimensions.count))
            for d in t.dimensions { header.u64(UInt64(d)) }
            header.u32(t.type.rawValue)
            header.u64(UInt64(offset))
            sizes.append(bytes)
            offset += (bytes + alignment - 1) / alignment * alignment
        }
        header.pad(to: alignment)

        let file: PartialFile
        do { file = try PartialFile(url) } catch { throw GGUFWriteError.cannotWrite(path: url.path, reason: error.reason) }
        func put(_ data: Data) throws {
            do { try file.write(data) } catch { throw GGUFWriteError.cannotWrite(path: url.path, reason: error.reason) }
        }
        try put(Data(header.bytes))
        for (t, bytes) in zip(tensors, sizes) {
            let padded = (bytes + alignment - 1) / alignment * alignment
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(padded, 1), alignment: 64)
            defer { buffer.deallocate() }
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
            try t.fill(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<bytes]))
            try put(Data(bytes: buffer.baseAddress!, count: padded))
        }
        do { try file.commit() } catch { throw GGUFWriteError.cannotWrite(path: url.path, reason: error.reason) }
    }

    /// A value's encoding, without its leading type id.
    static func encode(_ v: GGUFValue) -> [UInt8] {
        var w = ByteWriter()
        w.value(v)
        return w.bytes
    }

    /// GGUF's value type ids (the reader's, GGUFFile).
    static func typeID(_ v: GGUFValue) -> UInt32 {
        switch v {
        case .uint8: 0
        case .int8: 1
        case .uint16: 2
        case .int16: 3
        case .uint32: 4
        case .int32: 5
        case .float32: 6
        case .bool: 7
        case .string: 8
        case .array: 9
        case .uint64: 10
        case .int64: 11
        case .float64: 12
        }
    }
}

/// Little-endian GGUF encoding into a byte array.
private struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }

    mutating func string(_ s: String) {
        let utf8 = Array(s.utf8)
        u64(UInt64(utf8.count))
        bytes += utf8
    }

    mutating func pad(to alignment: Int) {
        bytes += [UInt8](repeating: 0, count: (alignment - bytes.count % alignment) % alignment)
    }

    mutating func value(_ v: GGUFValue) {
        switch v {
        case .uint8(let x): bytes.append(x)
        case .int8(let x): bytes.append(UInt8(bitPattern: x))
        case .uint16(let x): withUnsafeBytes(of: x.littleEndian) { bytes += $0 }
        case .int16(let x): withUnsafeBytes(of: x.littleEndian) { bytes += $0 }
        case .uint32(let x): u32(x)
        case .int32(let x): u32(UInt32(bitPattern: x))
        case .uint64(let x): u64(x)
        case .int64(let x): u64(UInt64(bitPattern: x))
        case .float32(let x): u32(x.bitPattern)
        case .float64(let x): u64(x.bitPattern)
        case .bool(let x): bytes.append(x ? 1 : 0)
        case .string(let s): string(s)
        case .array(let items):
            // The reader keeps no element type for an empty array: strings are the common case.
            u32(items.first.map(GGUFWriter.typeID) ?? 8)
            u64(UInt64(items.count))
            for item in items { value(item) }
        }
    }
}

/// Why a GGUF file could not be written.
public enum GGUFWriteError: Error, LocalizedError, Equatable, Sendable {
    case cannotWrite(path: String, reason: String)
    case partialBlocks(tensor: String, type: String)
    case badAlignment(Int)

    public var errorDescription: String? {
        switch self {
        case .cannotWrite(let p, let why): "cannot write \(p): \(why)"
        case .partialBlocks(let t, let type): "tensor '\(t)': its rows are not whole \(type) blocks"
        case .badAlignment(let a): "general.alignment is \(a); it must be a positive multiple of 8"
        }
    }
}
