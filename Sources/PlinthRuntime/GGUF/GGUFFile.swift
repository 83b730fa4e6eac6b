import Foundation
import PlinthJSON

/// A parsed, validated, memory-mapped GGUF file: metadata, tensor directory and tensor bytes.
///
/// Parsing checks every length against the bytes that remain, so a damaged or hostile file gives
/// a ``GGUFError`` naming the problem, never a crash or a giant allocation.
public final class GGUFFile: Sendable {
    public let url: URL
    public let version: UInt32
    /// Metadata keys in file order.
    public let keys: [String]
    public let metadata: [String: GGUFValue]
    /// Tensors in file order.
    public let tensors: [GGUFTensorInfo]
    public let alignment: Int
    /// Offset of the tensor data section from the start of the file.
    public let dataOffset: Int
    private let tensorIndex: [String: Int]
    private let file: MappedFile

    public convenience init(path: String) throws(GGUFError) {
        try self.init(url: URL(fileURLWithPath: path))
    }

    public init(url: URL) throws(GGUFError) {
        let file = try MappedFile(url: url)
        self.url = url
        self.file = file
        var r = ByteReader(file.bytes)
        let header = try GGUFFile.parse(&r, fileSize: file.count)
        version = header.version
        keys = header.keys
        metadata = header.metadata
        tensors = header.tensors
        alignment = header.alignment
        dataOffset = header.dataOffset
        var index: [String: Int] = [:]
        for (i, t) in tensors.enumerated() { index[t.name] = i }
        tensorIndex = index
    }

    // MARK: Tensor access

    public func tensor(named name: String) -> GGUFTensorInfo? {
        tensorIndex[name].map { tensors[$0] }
    }

    /// The bytes of a tensor inside the mapping; valid while this file is alive.
    public func data(of tensor: GGUFTensorInfo) -> UnsafeRawPointer {
        file.base + tensor.fileOffset
    }

    /// Keeps the mapping alive for as long as the caller holds the returned object.
    public var mapping: MappedFile { file }

    // MARK: Typed metadata access

    public subscript(key: String) -> GGUFValue? { metadata[key] }

    public func string(_ key: String) throws(GGUFError) -> String? { try value(key, "string", \.stringValue) }
    public func int(_ key: String) throws(GGUFError) -> Int? { try value(key, "integer", \.intValue) }
    public func double(_ key: String) throws(GGUFError) -> Double? { try value(key, "number", \.doubleValue) }
    public func bool(_ key: String) throws(GGUFError) -> Bool? { try value(key, "bool", \.boolValue) }
    public func array(_ key: String) throws(GGUFError) -> [GGUFValue]? { try value(key, "array", \.arrayValue) }
    public func stringArray(_ key: String) throws(GGUFError) -> [String]? { try elements(key, "strings", \.stringValue) }
    public func intArray(_ key: String) throws(GGUFError) -> [Int]? { try elements(key, "integers", \.intValue) }
    public func doubleArray(_ key: String) throws(GGUFError) -> [Double]? { try elements(key, "numbers", \.doubleValue) }

    /// The value under `key` converted by `convert`; nil when absent, an error naming both
    /// types when it is of another type.
    private func value<T>(_ key: String, _ expected: String, _ convert: (GGUFValue) -> T?) throws(GGUFError) -> T? {
        guard let v = metadata[key] else { return nil }
        guard let t = convert(v) else { throw .wrongValueType(key: key, expected: expected, found: v.typeName) }
        return t
    }

    /// The array under `key` with every element converted by `convert`.
    private func elements<T>(_ key: String, _ expected: String, _ convert: (GGUFValue) -> T?) throws(GGUFError) -> [T]? {
        guard let a = try array(key) else { return nil }
        var out: [T] = []
        out.reserveCapacity(a.count)
        for v in a {
            guard let t = convert(v) else {
                throw .wrongValueType(key: key, expected: "array of \(expected)", found: "array of \(v.typeName)")
            }
            out.append(t)
        }
        return out
    }

    // MARK: Parsing

    /// Parses and validates a GGUF header held in memory, as if it began a file of `fileSize`
    /// bytes (tensor bounds are checked against that size). For tools and fuzzing.
    public static func parseHeader(_ bytes: UnsafeRawBufferPointer, fileSize: Int) throws(GGUFError) -> GGUFHeader {
        var r = ByteReader(bytes)
        return try parse(&r, fileSize: max(fileSize, 0))
    }

    /// Limits that keep a damaged file from asking for absurd work.
    static let maxAlignment = 1 << 20
    static let maxNesting = 8
    static let reserveLimit = 1 << 16

    static func describe(_ v: GGUFValue) -> String {
        switch v {
        case .uint64(let x): "\(x)"
        case .int64(let x): "\(x)"
        case .float32(let x): "\(x)"
        case .float64(let x): "\(x)"
        case .string(let x): "\"\(x)\""
        default: v.intValue.map { "\($0)" } ?? v.typeName
        }
    }
}

/// The parsed front of a GGUF file: metadata and the tensor directory.
public struct GGUFHeader: Sendable {
    public var version: UInt32
    public var keys: [String]
    public var metadata: [String: GGUFValue]
    public var tensors: [GGUFTensorInfo]
    public var alignment: Int
    public var dataOffset: Int
}

extension GGUFFile {
    typealias Header = GGUFHeader

    fileprivate static func parse(_ r: inout ByteReader, fileSize: Int) throws(GGUFError) -> Header {
        guard r.remaining >= 4 else { throw .truncated(offset: 0, reading: "the magic number") }
        let magic = try r.bytes(4, "the magic number")
        guard magic == Array("GGUF".utf8) else {
            let shown = magic.allSatisfy({ $0 >= 0x20 && $0 < 0x7f })
                ? "\"\(String(decoding: magic, as: UTF8.self))\""
                : magic.map { String(format: "%02x", $0) }.joined(separator: " ")
            throw .badMagic(found: shown)
        }
        let version = try r.u32("the version")
        guard version == 2 || version == 3 else { throw .unsupportedVersion(version) }
        let tensorCount = try r.u64("the tensor count")
        let kvCount = try r.u64("the metadata count")
        // Each key/value takes at least 12 bytes, each tensor info at least 24.
        guard kvCount <= UInt64(r.remaining / 12) else { throw .countTooLarge(kvCount, what: "the metadata section") }
        guard tensorCount <= UInt64(r.remaining / 24) else { throw .countTooLarge(tensorCount, what: "the tensor directory") }

        var keys: [String] = []
        var metadata: [String: GGUFValue] = [:]
        keys.reserveCapacity(min(Int(kvCount), GGUFFile.reserveLimit))
        for _ in 0..<Int(kvCount) {
            let key = try r.string("a metadata key")
            let type = try r.u32("the type of '\(key)'")
            let value = try r.value(type: type, key: key, depth: 0)
            guard metadata[key] == nil else { throw .duplicateKey(key) }
            metadata[key] = value
            keys.append(key)
        }

        var alignment = 32
        if let a = metadata["general.alignment"] {
            guard a.isInteger else {
                throw .wrongValueType(key: "general.alignment", expected: "integer", found: a.typeName)
            }
            guard let v = a.intValue, v > 0, v & (v - 1) == 0, v <= GGUFFile.maxAlignment else {
                throw .invalidAlignment(GGUFFile.describe(a))
            }
            alignment = v
        }

        struct RawTensor { var name: String; var dims: [Int]; var type: GGMLType; var offset: UInt64; var bytes: Int }
        var raw: [RawTensor] = []
        var seen = Set<String>()
        raw.reserveCapacity(min(Int(tensorCount), GGUFFile.reserveLimit))
        for _ in 0..<Int(tensorCount) {
            let name = try r.string("a tensor name")
            guard seen.insert(name).inserted else { throw .duplicateTensor(name) }
            let nDims = try r.u32("the dimension count of '\(name)'")
            guard nDims >= 1, nDims <= 4 else { throw .badDimensionCount(tensor: name, count: nDims) }
            var dims: [Int] = []
            var elements = 1
            for i in 0..<Int(nDims) {
                let d = try r.u64("dimension \(i) of '\(name)'")
                guard d >= 1, d <= UInt64(Int32.max) else { throw .invalidDimension(tensor: name, index: i, value: d) }
                let (m, o) = elements.multipliedReportingOverflow(by: Int(d))
                guard !o else { throw .sizeOverflow(tensor: name) }
                elements = m
                dims.append(Int(d))
            }
            let typeID = try r.u32("the type of '\(name)'")
            guard let type = GGMLType(rawValue: typeID), type.blockElements > 0 else {
                throw .unknownTensorType(tensor: name, id: typeID)
            }
            let offset = try r.u64("the offset of '\(name)'")
            guard dims[0] % type.blockElements == 0 else {
                throw .rowNotBlockAligned(tensor: name, type: type.name, rowLength: dims[0], blockElements: type.blockElements)
            }
            let (bytes, o) = (elements / type.blockElements).multipliedReportingOverflow(by: type.blockBytes)
            guard !o else { throw .sizeOverflow(tensor: name) }
            guard offset % UInt64(alignment) == 0 else { throw .misalignedTensor(tensor: name, offset: offset, alignment: alignment) }
            raw.append(RawTensor(name: name, dims: dims, type: type, offset: offset, bytes: bytes))
        }

        let dataOffset = (r.offset + alignment - 1) / alignment * alignment
        var tensors: [GGUFTensorInfo] = []
        tensors.reserveCapacity(raw.count)
        for t in raw {
            let (start, o1) = UInt64(dataOffset).addingReportingOverflow(t.offset)
            let (end, o2) = start.addingReportingOverflow(UInt64(t.bytes))
            guard !o1, !o2, end <= UInt64(fileSize) else {
                throw .tensorOutOfBounds(tensor: t.name, end: o1 || o2 ? UInt64.max : end, fileSize: fileSize)
            }
            tensors.append(GGUFTensorInfo(name: t.name, dimensions: t.dims, type: t.type,
                                          fileOffset: Int(start), byteCount: t.bytes))
        }
        let byStart = tensors.sorted { $0.fileOffset < $1.fileOffset }
        for (a, b) in zip(byStart, byStart.dropFirst()) where a.fileOffset + a.byteCount > b.fileOffset {
            throw .overlappingTensors(a.name, b.name)
        }
        return Header(version: version, keys: keys, metadata: metadata, tensors: tensors,
                      alignment: alignment, dataOffset: dataOffset)
    }
}

/// A bounds-checked little-endian cursor over the mapped header.
struct ByteReader {
    let buf: UnsafeRawBufferPointer
    var offset = 0

    init(_ buf: UnsafeRawBufferPointer) { self.buf = buf }

    var remaining: Int { buf.count - offset }

    mutating func need(_ n: Int, _ what: @autoclosure () -> String) throws(GGUFError) {
        guard n >= 0, n <= remaining else { throw .truncated(offset: offset, reading: what()) }
    }

    mutating func load<T: FixedWidthInteger>(_: T.Type, _ what: @autoclosure () -> String) throws(GGUFError) -> T {
        try need(MemoryLayout<T>.size, what())
        let v = buf.loadUnaligned(fromByteOffset: offset, as: T.self)
        offset += MemoryLayout<T>.size
        return T(littleEndian: v)
    }

    mutating func u32(_ what: @autoclosure () -> String) throws(GGUFError) -> UInt32 { try load(UInt32.self, what()) }
    mutating func u64(_ what: @autoclosure () -> String) throws(GGUFError) -> UInt64 { try load(UInt64.self, what()) }

    mutating func bytes(_ n: Int, _ what: @autoclosure () -> String) throws(GGUFError) -> [UInt8] {
        try need(n, what())
        defer { offset += n }
        return Array(buf[offset..<offset + n])
    }

    mutating func string(_ what: @autoclosure () -> String) throws(GGUFError) -> String {
        let start = offset
        let len = try u64("the length of \(what())")
        guard len <= UInt64(remaining) else { throw .truncated(offset: start, reading: what()) }
        let n = Int(len)
        let slice = UnsafeRawBufferPointer(rebasing: buf[offset..<offset + n])
        guard let s = String(strictUTF8: slice) else { throw .invalidUTF8(offset: offset, reading: what()) }
        offset += n
        return s
    }

    /// Minimum encoded size of one value of a type, to bound array counts before allocating.
    static func minSize(_ type: UInt32) -> Int? {
        switch type {
        case 0, 1, 7: 1
        case 2, 3: 2
        case 4, 5, 6: 4
        case 10, 11, 12, 8: 8
        case 9: 12
        default: nil
        }
    }

    mutating func value(type: UInt32, key: String, depth: Int) throws(GGUFError) -> GGUFValue {
        switch type {
        case 0: return .uint8(try load(UInt8.self, "the value of '\(key)'"))
        case 1: return .int8(try load(Int8.self, "the value of '\(key)'"))
        case 2: return .uint16(try load(UInt16.self, "the value of '\(key)'"))
        case 3: return .int16(try load(Int16.self, "the value of '\(key)'"))
        case 4: return .uint32(try load(UInt32.self, "the value of '\(key)'"))
        case 5: return .int32(try load(Int32.self, "the value of '\(key)'"))
        case 6: return .float32(Float(bitPattern: try load(UInt32.self, "the value of '\(key)'")))
        case 7:
            let b = try load(UInt8.self, "the value of '\(key)'")
            guard b <= 1 else { throw .invalidBool(b, key: key) }
            return .bool(b == 1)
        case 8: return .string(try string("the value of '\(key)'"))
        case 9:
            guard depth < GGUFFile.maxNesting else { throw .nestingTooDeep(key: key, limit: GGUFFile.maxNesting) }
            let elemType = try u32("the element type of '\(key)'")
            let count = try u64("the length of '\(key)'")
            guard let size = ByteReader.minSize(elemType) else { throw .unknownValueType(elemType, key: key) }
            guard count <= UInt64(remaining / size) else { throw .countTooLarge(count, what: "array '\(key)'") }
            var out: [GGUFValue] = []
            // Reserve little up front: a hostile count must not turn into a huge allocation.
            out.reserveCapacity(min(Int(count), GGUFFile.reserveLimit))
            for _ in 0..<Int(count) { out.append(try value(type: elemType, key: key, depth: depth + 1)) }
            return .array(out)
        case 10: return .uint64(try load(UInt64.self, "the value of '\(key)'"))
        case 11: return .int64(try load(Int64.self, "the value of '\(key)'"))
        case 12: return .float64(Double(bitPattern: try load(UInt64.self, "the value of '\(key)'")))
        default: throw .unknownValueType(type, key: key)
        }
    }
}
