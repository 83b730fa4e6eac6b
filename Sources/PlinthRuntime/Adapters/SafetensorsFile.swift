import Foundation
import PlinthJSON

/// A parsed, validated, memory-mapped safetensors file: an 8-byte little-endian header length,
/// a JSON header naming each tensor's dtype, shape and byte range, then the tensors' bytes.
///
/// Every header field is checked against the file (ranges inside the data, sizes equal to
/// shape × dtype, no two tensors sharing bytes), so a damaged or hostile file gives a
/// ``SafetensorsError`` naming the problem, never a crash or a giant allocation.
public final class SafetensorsFile: Sendable {
    /// The element types safetensors names; ``SafetensorsTensor/floats()`` reads the float ones.
    public enum DType: String, Sendable, CaseIterable {
        case f64 = "F64", f32 = "F32", f16 = "F16", bf16 = "BF16"
        case i64 = "I64", i32 = "I32", i16 = "I16", i8 = "I8", u64 = "U64", u32 = "U32", u16 = "U16", u8 = "U8"
        case bool = "BOOL", f8e4m3 = "F8_E4M3", f8e5m2 = "F8_E5M2"

        public var byteSize: Int {
            switch self {
            case .f64, .i64, .u64: 8
            case .f32, .i32, .u32: 4
            case .f16, .bf16, .i16, .u16: 2
            case .i8, .u8, .bool, .f8e4m3, .f8e5m2: 1
            }
        }
    }

    public let url: URL
    /// Tensors in the order of their bytes in the file.
    public let tensors: [SafetensorsTensor]
    /// The header's `__metadata__` (string to string), empty when absent.
    public let metadata: [String: String]
    private let index: [String: Int]
    private let file: MappedFile

    /// The largest header read (the format's own readers refuse more than 100 MB).
    public static let maximumHeaderBytes = 100 << 20

    public init(url: URL) throws(SafetensorsError) {
        let file: MappedFile
        do {
            file = try MappedFile(url: url)
        } catch .fileNotFound(let p) {
            throw .fileNotFound(p)
        } catch .cannotOpen(let p, let why) {
            throw .cannotOpen(p, why)
        } catch {
            throw .truncated(reading: "the header length (the file is empty)")
        }
        self.url = url
        self.file = file
        let parsed = try Self.parse(file.bytes)
        tensors = parsed.tensors
        metadata = parsed.metadata
        var index: [String: Int] = [:]
        for (i, t) in tensors.enumerated() { index[t.name] = i }
        self.index = index
    }

    public func tensor(named name: String) -> SafetensorsTensor? { index[name].map { tensors[$0] } }

    /// The bytes of a tensor inside the mapping; valid while this file is alive.
    public func data(of tensor: SafetensorsTensor) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: file.base + tensor.fileOffset, count: tensor.byteCount)
    }

    /// A float tensor's values as `Float` (F32 as is, F16 and BF16 widened exactly, F64 rounded).
    public func floats(_ tensor: SafetensorsTensor) throws(SafetensorsError) -> [Float] {
        let bytes = data(of: tensor)
        let n = tensor.elementCount
        var out = [Float](repeating: 0, count: n)
        switch tensor.dtype {
        case .f32, .f16, .bf16:
            let type: GGMLType = tensor.dtype == .f32 ? .f32 : tensor.dtype == .f16 ? .f16 : .bf16
            out.withUnsafeMutableBufferPointer { o in
                if n > 0 { try? type.dequantize(bytes.baseAddress!, count: n, into: o.baseAddress!) }
            }
        case .f64:
            for i in 0..<n { out[i] = Float(bytes.loadUnaligned(fromByteOffset: 8 * i, as: UInt64.self).littleEndian.asDouble) }
        default:
            throw .notFloat(tensor: tensor.name, dtype: tensor.dtype.rawValue)
        }
        return out
    }

    /// Parses and validates the header of a whole file's bytes.
    static func parse(_ bytes: UnsafeRawBufferPointer) throws(SafetensorsError) -> (tensors: [SafetensorsTensor], metadata: [String: String]) {
        guard bytes.count >= 8 else { throw .truncated(reading: "the header length (\(bytes.count) bytes in the file)") }
        let declared = bytes.loadUnaligned(as: UInt64.self).littleEndian
        guard declared <= UInt64(maximumHeaderBytes) else { throw .headerTooLarge(declared) }
        let headerBytes = Int(declared)
        guard headerBytes <= bytes.count - 8 else {
            throw .truncated(reading: "the header (\(headerBytes) bytes declared, \(bytes.count - 8) in the file)")
        }
        let dataStart = 8 + headerBytes, dataBytes = bytes.count - dataStart
        let json: JSONValue
        do {
            json = try JSONValue(parsing: UnsafeRawBufferPointer(rebasing: bytes[8..<dataStart]))
        } catch {
            throw .badHeader("not JSON: \(error)")
        }
        guard let members = json.objectMembers else { throw .badHeader("the header is \(json.typeName), not an object") }
        var tensors: [SafetensorsTensor] = []
        var metadata: [String: String] = [:]
        // A name given twice keeps its last entry, as JSON readers do.
        for (name, value) in members {
            if name == "__metadata__" {
                guard let entries = value.objectMembers else { throw .badHeader("__metadata__ is \(value.typeName), not an object") }
                for (k, v) in entries {
                    guard let s = v.stringValue else { throw .badHeader("__metadata__ entry '\(k)' is \(v.typeName), not a string") }
                    metadata[k] = s
                }
                continue
            }
            tensors.append(try tensor(name, value, dataBytes: dataBytes, dataStart: dataStart))
        }
        tensors.sort { ($0.range.lowerBound, $0.range.upperBound) < ($1.range.lowerBound, $1.range.upperBound) }
        for (a, b) in zip(tensors, tensors.dropFirst()) where a.range.overlaps(b.range) {
            throw .overlappingTensors(a.name, b.name)
        }
        return (tensors, metadata)
    }

    private static func tensor(_ name: String, _ value: JSONValue, dataBytes: Int, dataStart: Int) throws(SafetensorsError) -> SafetensorsTensor {
        guard value.objectMembers != nil else { throw .badEntry(tensor: name, "its entry is \(value.typeName), not an object") }
        guard let dtypeName = value["dtype"]?.stringValue else { throw .badEntry(tensor: name, "no dtype string") }
        guard let dtype = DType(rawValue: dtypeName) else { throw .unknownDType(tensor: name, dtypeName) }
        guard let shapeValues = value["shape"]?.arrayValue else { throw .badEntry(tensor: name, "no shape array") }
        var shape: [Int] = []
        var elements = 1
        for (i, d) in shapeValues.enumerated() {
            guard let n = d.integerValue, n >= 0 else { throw .badEntry(tensor: name, "shape[\(i)] is not a non-negative integer") }
            let (product, overflow) = elements.multipliedReportingOverflow(by: n)
            guard !overflow, product <= dataBytes else { throw .sizeMismatch(tensor: name, expected: nil, found: 0) }
            shape.append(n)
            elements = product
        }
        guard let offsets = value["data_offsets"]?.arrayValue, offsets.count == 2,
              let begin = offsets[0].integerValue, let end = offsets[1].integerValue, begin >= 0, end >= begin else {
            throw .badEntry(tensor: name, "data_offsets must be [begin, end] with 0 ≤ begin ≤ end")
        }
        guard end <= dataBytes else { throw .outOfBounds(tensor: name, end: end, dataBytes: dataBytes) }
        let expected = elements * dtype.byteSize
        guard end - begin == expected else { throw .sizeMismatch(tensor: name, expected: expected, found: end - begin) }
        return SafetensorsTensor(name: name, dtype: dtype, shape: shape, range: begin..<end, dataStart: dataStart)
    }
}

/// One tensor's entry in a safetensors header.
public struct SafetensorsTensor: Sendable, Equatable {
    public let name: String
    public let dtype: SafetensorsFile.DType
    /// Outermost dimension first (row-major, as PyTorch writes it).
    public let shape: [Int]
    /// Bytes relative to the start of the data section.
    public let range: Range<Int>
    let dataStart: Int

    public var elementCount: Int { shape.reduce(1, *) }
    public var byteCount: Int { range.count }
    var fileOffset: Int { dataStart + range.lowerBound }
}

private extension UInt64 {
    var asDouble: Double { Double(bitPattern: self) }
}

/// Everything that can be wrong with a safetensors file, each case naming the problem.
public enum SafetensorsError: Error, LocalizedError, Equatable, Sendable {
    case fileNotFound(String)
    case cannotOpen(String, String)
    case truncated(reading: String)
    case headerTooLarge(UInt64)
    case badHeader(String)
    case badEntry(tensor: String, String)
    case unknownDType(tensor: String, String)
    case sizeMismatch(tensor: String, expected: Int?, found: Int)
    case outOfBounds(tensor: String, end: Int, dataBytes: Int)
    case overlappingTensors(String, String)
    case notFloat(tensor: String, dtype: String)

    public var errorDescription: String? {
        switch self {
        case .fileNotFound(let p): "safetensors file not found: \(p)"
        case .cannotOpen(let p, let why): "cannot open \(p): \(why)"
        case .truncated(let what): "safetensors file is truncated: ran out of bytes reading \(what)"
        case .headerTooLarge(let n): "safetensors header claims \(n) bytes, more than the \(SafetensorsFile.maximumHeaderBytes) allowed (not a safetensors file, or damaged)"
        case .badHeader(let why): "safetensors header is malformed: \(why)"
        case .badEntry(let n, let why): "tensor '\(n)': \(why)"
        case .unknownDType(let n, let d): "tensor '\(n)' has unknown dtype '\(d)'"
        case .sizeMismatch(let n, let e, let f):
            e.map { "tensor '\(n)' spans \(f) bytes but its shape and dtype need \($0)" } ?? "tensor '\(n)' has a shape larger than the file"
        case .outOfBounds(let n, let e, let d): "tensor '\(n)' ends at data byte \(e), past the end of the data (\(d) bytes)"
        case .overlappingTensors(let a, let b): "tensors '\(a)' and '\(b)' overlap in the safetensors file"
        case .notFloat(let n, let d): "tensor '\(n)' is \(d), not a float type (F32, F16, BF16 or F64)"
        }
    }
}
