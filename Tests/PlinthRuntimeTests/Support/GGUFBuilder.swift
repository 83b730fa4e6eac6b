import Foundation

@testable import PlinthRuntime

/// A small GGUF serializer for tests: builds valid files of every shape the format allows, and,
/// through its raw entries, files that break the format in one precise way (which the runtime's
/// GGUFWriter, writing only valid files, cannot).
///
/// Layout written (GGUF v2/v3, little-endian): magic, version, tensor count, metadata count,
/// the metadata entries, the tensor directory, zero padding up to the alignment, then the tensor
/// data section. Tensor offsets are relative to the start of the data section.
struct GGUFBuilder {
    /// One metadata entry: a well-formed value, or raw bytes after the key (for broken files).
    enum Entry {
        case value(key: [UInt8], GGUFValue)
        /// The type id, then `payload` verbatim as the value's encoding.
        case raw(key: [UInt8], type: UInt32, payload: [UInt8])
    }

    /// One tensor directory entry and, optionally, its data.
    struct Tensor {
        var name: [UInt8]
        /// Innermost dimension first, written as `dims.count` then each size.
        var dims: [UInt64]
        var typeID: UInt32
        /// Offset from the start of the data section; nil lets the writer place the tensor after
        /// the previous one, aligned.
        var offset: UInt64?
        /// The tensor's bytes; nil fills the size its type implies with a deterministic pattern
        /// (nothing when the type is unknown or the size does not fit in memory).
        var data: [UInt8]?

        init(_ name: String, dims: [UInt64], type: GGMLType, offset: UInt64? = nil, data: [UInt8]? = nil) {
            self.init(rawName: Array(name.utf8), dims: dims, typeID: type.rawValue, offset: offset, data: data)
        }

        init(_ name: String, dims: [UInt64], typeID: UInt32, offset: UInt64? = nil, data: [UInt8]? = nil) {
            self.init(rawName: Array(name.utf8), dims: dims, typeID: typeID, offset: offset, data: data)
        }

        init(rawName: [UInt8], dims: [UInt64], typeID: UInt32, offset: UInt64? = nil, data: [UInt8]? = nil) {
            self.name = rawName
            self.dims = dims
            self.typeID = typeID
            self.offset = offset
            self.data = data
        }

        /// The byte size the type and dimensions imply, or nil when unknown or absurd.
        var impliedByteCount: Int? {
            guard let type = GGMLType(rawValue: typeID), !dims.isEmpty else { return nil }
            var elements = 1
            for d in dims {
                guard d > 0, d <= UInt64(Int32.max) else { return nil }
                let (m, o) = elements.multipliedReportingOverflow(by: Int(d))
                guard !o else { return nil }
                elements = m
            }
            return type.tensorBytes(elements: elements, rowLength: Int(dims[0]))
        }
    }

    var magic: [UInt8] = Array("GGUF".utf8)
    var version: UInt32 = 3
    var entries: [Entry] = []
    var tensors: [Tensor] = []
    /// Counts written in the header; nil writes the real counts.
    var tensorCountOverride: UInt64?
    var kvCountOverride: UInt64?
    /// Alignment for padding and automatic offsets; nil uses `general.alignment` when it is a
    /// valid power of two, else 32 (the GGUF default).
    var alignment: Int?
    /// Zero bytes appended after the data section.
    var trailingBytes = 0

    init(version: UInt32 = 3) { self.version = version }

    // MARK: Building

    mutating func add(_ key: String, _ value: GGUFValue) {
        entries.append(.value(key: Array(key.utf8), value))
    }

    mutating func addRaw(_ key: String, type: UInt32, payload: [UInt8]) {
        entries.append(.raw(key: Array(key.utf8), type: type, payload: payload))
    }

    mutating func addTensor(_ t: Tensor) { tensors.append(t) }

    var effectiveAlignment: Int {
        if let alignment { return alignment }
        for case .value(let key, let v) in entries where key == Array("general.alignment".utf8) {
            if let a = v.intValue, a > 0, a & (a - 1) == 0 { return a }
        }
        return 32
    }

    // MARK: Encoding primitives

    static func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] {
        withUnsafeBytes(of: v.littleEndian) { Array($0) }
    }

    static func string(_ bytes: [UInt8]) -> [UInt8] { le(UInt64(bytes.count)) + bytes }
    static func string(_ s: String) -> [UInt8] { string(Array(s.utf8)) }

    /// GGUF's type id for a value.
    static func typeID(_ v: GGUFValue) -> UInt32 { GGUFWriter.typeID(v) }

    /// A value's encoding without its leading type id (the runtime writer's), except that an
    /// empty array's element type is uint8; all elements must share one type.
    static func payload(_ v: GGUFValue) -> [UInt8] {
        if case .array(let items) = v { return arrayPayload(elementType: items.first.map(typeID) ?? 0, items) }
        return GGUFWriter.encode(v)
    }

    static func arrayPayload(elementType: UInt32, _ items: [GGUFValue]) -> [UInt8] {
        var out = le(elementType) + le(UInt64(items.count))
        for item in items {
            precondition(typeID(item) == elementType, "GGUF arrays hold one element type")
            out += payload(item)
        }
        return out
    }

    // MARK: Output

    /// Where one fixed-width number sits in the header (for structure-aware fuzzing).
    struct Field {
        var offset: Int
        /// 4 or 8 bytes.
        var width: Int
        var what: String
    }

    /// Header bytes: everything before the alignment padding.
    func header() -> [UInt8] { headerWithFields().bytes }

    /// Header bytes, and where each count, length, type id, dimension and offset is in them
    /// (top-level values only; elements inside arrays are not listed).
    func headerWithFields() -> (bytes: [UInt8], fields: [Field]) {
        let align = effectiveAlignment
        let placed = placedOffsets(alignment: align)
        var out: [UInt8] = []
        var fields: [Field] = []
        func number<T: FixedWidthInteger>(_ v: T, _ what: String) {
            fields.append(Field(offset: out.count, width: MemoryLayout<T>.size, what: what))
            out += Self.le(v)
        }
        func string(_ bytes: [UInt8], _ what: String) {
            number(UInt64(bytes.count), "length of \(what)")
            out += bytes
        }
        out = magic
        number(version, "version")
        number(tensorCountOverride ?? UInt64(tensors.count), "tensor count")
        number(kvCountOverride ?? UInt64(entries.count), "metadata count")
        for e in entries {
            switch e {
            case .value(let key, let v):
                string(key, "a key")
                number(Self.typeID(v), "a value type")
                switch v {
                case .string(let s):
                    string(Array(s.utf8), "a string value")
                case .array(let items):
                    number(items.first.map(Self.typeID) ?? 0, "an element type")
                    number(UInt64(items.count), "an array length")
                    for item in items { out += Self.payload(item) }
                case .uint32, .int32, .float32:
                    number(UInt32(0), "a value")
                    out.replaceSubrange(out.count - 4..<out.count, with: Self.payload(v))
                case .uint64, .int64, .float64:
                    number(UInt64(0), "a value")
                    out.replaceSubrange(out.count - 8..<out.count, with: Self.payload(v))
                default:
                    out += Self.payload(v)
                }
            case .raw(let key, let type, let payload):
                string(key, "a key")
                number(type, "a value type")
                out += payload
            }
        }
        for (t, offset) in zip(tensors, placed) {
            string(t.name, "a tensor name")
            number(UInt32(truncatingIfNeeded: t.dims.count), "a dimension count")
            for d in t.dims { number(d, "a dimension") }
            number(t.typeID, "a tensor type")
            number(offset, "a tensor offset")
        }
        return (out, fields)
    }

    /// The complete file: header, padding, data section, trailing bytes.
    func bytes() -> [UInt8] {
        let align = effectiveAlignment
        var out = header()
        let dataStart = (out.count + align - 1) / align * align
        out += [UInt8](repeating: 0, count: dataStart - out.count)
        let placed = placedOffsets(alignment: align)
        var data: [UInt8] = []
        for (i, (t, offset)) in zip(tensors, placed).enumerated() {
            let bytes = t.data ?? Self.pattern(count: t.impliedByteCount ?? 0, seed: i)
            guard !bytes.isEmpty, offset < 1 << 32 else { continue }
            let start = Int(offset)
            if data.count < start + bytes.count { data += [UInt8](repeating: 0, count: start + bytes.count - data.count) }
            data.replaceSubrange(start..<start + bytes.count, with: bytes)
        }
        out += data
        out += [UInt8](repeating: 0, count: trailingBytes)
        return out
    }

    /// Offsets of the data of each tensor: the explicit ones as given, the others packed after
    /// the previous tensor at the next multiple of the alignment.
    func placedOffsets(alignment: Int) -> [UInt64] {
        var next: UInt64 = 0
        var out: [UInt64] = []
        for t in tensors {
            let offset = t.offset ?? next
            out.append(offset)
            let size = UInt64((t.data?.count ?? t.impliedByteCount) ?? 0)
            let (end, o) = offset.addingReportingOverflow(size)
            let a = UInt64(alignment)
            if !o, end <= UInt64.max - a {
                next = max(next, (end + a - 1) / a * a)
            }
        }
        return out
    }

    /// Offset of the data section in `bytes()`.
    var dataOffset: Int {
        let align = effectiveAlignment
        return (header().count + align - 1) / align * align
    }

    static func pattern(count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed &* 17 &+ 7) }
    }
}

// MARK: Temporary files

/// Writes `bytes` to a fresh file in the temporary directory, runs `body` with its URL and
/// removes the file afterwards. (A mapping made inside `body` stays valid after removal.)
func withTemporaryFile<R>(_ bytes: [UInt8], _ body: (URL) throws -> R) throws -> R {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("plinth-gguf-test-\(UUID().uuidString).gguf")
    try Data(bytes).write(to: url)
    defer { try? FileManager.default.removeItem(at: url) }
    return try body(url)
}

/// Writes `bytes` to a temporary file and opens it with ``GGUFFile``.
func openGGUF(_ bytes: [UInt8]) throws -> Result<GGUFFile, GGUFError> {
    try withTemporaryFile(bytes) { url in
        do throws(GGUFError) { return .success(try GGUFFile(url: url)) } catch { return .failure(error) }
    }
}
