import PlinthKernels

/// The storage format of a tensor in a GGUF file, identified by ggml's type number.
///
/// Every type that ggml has defined for GGUF files has a case here, including the ones
/// Plinth cannot compute with yet and the interleaved layouts that ggml has since removed
/// from files, so that a model using one can be named in an error instead of being
/// rejected as "unknown". Use ``isSupported`` to ask whether ``dequantize(_:count:into:)``
/// can read a type.
///
/// Quantized types store weights in fixed-size blocks: ``blockElements`` weights in
/// ``blockBytes`` bytes. A row of a tensor is always a whole number of blocks.
public enum GGMLType: UInt32, Sendable, CaseIterable, CustomStringConvertible {
    case f32 = 0
    case f16 = 1
    case q4_0 = 2
    case q4_1 = 3
    // 4 (Q4_2) and 5 (Q4_3) were removed from ggml before GGUF existed.
    case q5_0 = 6
    case q5_1 = 7
    case q8_0 = 8
    case q8_1 = 9
    case q2_K = 10
    case q3_K = 11
    case q4_K = 12
    case q5_K = 13
    case q6_K = 14
    case q8_K = 15
    case iq2_XXS = 16
    case iq2_XS = 17
    case iq3_XXS = 18
    case iq1_S = 19
    case iq4_NL = 20
    case iq3_S = 21
    case iq2_S = 22
    case iq4_XS = 23
    case i8 = 24
    case i16 = 25
    case i32 = 26
    case i64 = 27
    case f64 = 28
    case iq1_M = 29
    case bf16 = 30
    /// Interleaved Q4_0 for ARM; ggml no longer reads it from files (it repacks at load).
    case q4_0_4_4 = 31
    /// Interleaved Q4_0; removed from GGUF files by ggml.
    case q4_0_4_8 = 32
    /// Interleaved Q4_0; removed from GGUF files by ggml.
    case q4_0_8_8 = 33
    case tq1_0 = 34
    case tq2_0 = 35
    /// Interleaved IQ4_NL; removed from GGUF files by ggml.
    case iq4_NL_4_4 = 36
    /// Interleaved IQ4_NL; removed from GGUF files by ggml.
    case iq4_NL_4_8 = 37
    /// Interleaved IQ4_NL; removed from GGUF files by ggml.
    case iq4_NL_8_8 = 38
    case mxfp4 = 39
    case nvfp4 = 40
    case q1_0 = 41
    /// Plinth's 2-bit format (2.5 bits/weight, 32-weight blocks, so any row that is a multiple of
    /// 32). Its id is far past ggml's, so other engines refuse a file that uses it.
    case pq2 = 1024

    /// Whether the format is Plinth's own, not ggml's.
    public var isPlinthFormat: Bool { rawValue >= UInt32(PK_PLINTH_TYPES.rawValue) }

    /// The kernels' row for this type (`Kernels/types.h`): every case has one.
    private var info: pk_type_info {
        var info = pk_type_info()
        let found = pk_type_info_of(Int32(bitPattern: rawValue), &info)
        precondition(found == 0, "the kernels' type table has no row for ggml type \(rawValue)")
        return info
    }

    /// ggml's name for the type, as llama.cpp and gguf-py print it (for example `"Q4_K"`).
    public var name: String { String(cString: info.name) }

    public var description: String { name }

    /// The type with ggml's number `id`.
    ///
    /// - Throws: ``TensorFormatError/unknownType(_:)`` when ggml has never defined `id`.
    public init(id: UInt32) throws(TensorFormatError) {
        guard let type = GGMLType(rawValue: id) else { throw .unknownType(id) }
        self = type
    }

    /// The type with ggml's name `name` (case-insensitive), or nil.
    public init?(name: String) {
        let upper = name.uppercased()
        guard let found = Self.allCases.first(where: { $0.name == upper }) else { return nil }
        self = found
    }

    /// Weights per block: 1 for the plain number types, 32 for the legacy quantized formats,
    /// 256 for the k-quants and most i-quants.
    public var blockElements: Int { Int(info.block_elements) }

    /// Bytes per block as ggml lays it out in a file.
    public var blockBytes: Int { Int(info.block_bytes) }

    /// Whether ``dequantize(_:count:into:)`` can read this type.
    public var isSupported: Bool { info.can_dequantize != 0 }

    /// The types Plinth can dequantize, in ggml's order.
    public static var supportedTypes: [GGMLType] { allCases.filter(\.isSupported) }

    /// Whether the type stores quantized blocks rather than one plain number per element.
    public var isQuantized: Bool { blockElements > 1 }

    /// Bytes that `elements` consecutive weights occupy, or nil when `elements` is negative,
    /// is not a whole number of blocks, or the size overflows.
    public func rowBytes(_ elements: Int) -> Int? {
        guard elements >= 0, elements % blockElements == 0 else { return nil }
        let (bytes, overflow) = (elements / blockElements).multipliedReportingOverflow(by: blockBytes)
        return overflow ? nil : bytes
    }

    /// Bytes of a tensor with `elements` weights whose rows are `rowLength` long, or nil when
    /// a row is not a whole number of blocks or the size overflows.
    public func tensorBytes(elements: Int, rowLength: Int) -> Int? {
        guard rowLength > 0, elements >= 0, elements % rowLength == 0,
              let perRow = rowBytes(rowLength) else { return nil }
        let (bytes, overflow) = (elements / rowLength).multipliedReportingOverflow(by: perRow)
        return overflow ? nil : bytes
    }

    /// Converts `count` consecutive weights stored at `source` in this format to `Float`.
    ///
    /// `source` must hold ``rowBytes(_:)`` of `count` bytes and `destination` room for
    /// `count` floats. The conversion is exact: each value is what ggml's reference
    /// dequantizer computes, bit for bit.
    ///
    /// - Throws: ``TensorFormatError/unsupportedType(_:)`` when Plinth cannot read the type,
    ///   ``TensorFormatError/partialBlock(type:count:)`` when `count` is not a whole number
    ///   of blocks.
    public func dequantize(_ source: UnsafeRawPointer, count: Int,
                           into destination: UnsafeMutablePointer<Float>) throws(TensorFormatError) {
        guard isSupported else { throw .unsupportedType(self) }
        guard count >= 0, count % blockElements == 0 else { throw .partialBlock(type: self, count: count) }
        let status = pk_dequantize(Int32(bitPattern: rawValue), source, destination, Int64(count))
        precondition(status == 0, "pk_dequantize rejected \(name) × \(count) after validation")
    }
}

extension GGMLType {
    /// Whether ``rewriteAsQ8_0(_:count:into:)`` takes this type: 32-weight blocks of d · q under
    /// one f16 scale (Q4_0, Q5_0, Q8_0, IQ4_NL, PQ2), whose values a Q8_0 block holds exactly.
    public var convertsExactlyToQ8_0: Bool { info.exact_q8_0 != 0 }

    /// Writes `count` weights of this type at `source` as Q8_0 blocks at `destination`
    /// (``GGMLType/q8_0``'s ``rowBytes(_:)`` of `count` bytes) with the same values: each block
    /// keeps its f16 scale, its codes become int8. Dequantizing either gives the same floats.
    ///
    /// - Throws: ``TensorFormatError/unsupportedType(_:)`` when the type has no exact Q8_0 form,
    ///   ``TensorFormatError/partialBlock(type:count:)`` when `count` is not whole blocks.
    public func rewriteAsQ8_0(_ source: UnsafeRawPointer, count: Int,
                              into destination: UnsafeMutableRawPointer) throws(TensorFormatError) {
        guard convertsExactlyToQ8_0 else { throw .unsupportedType(self) }
        guard count >= 0, count % blockElements == 0 else { throw .partialBlock(type: self, count: count) }
        let status = pk_to_q8_0(Int32(bitPattern: rawValue), source, destination, Int64(count))
        precondition(status == 0, "pk_to_q8_0 rejected \(name) × \(count) after validation")
    }
}

/// Converts `count` consecutive weights of type `type` stored at `source` to `Float`.
///
/// The same as ``GGMLType/dequantize(_:count:into:)``.
public func dequantize(type: GGMLType, from source: UnsafeRawPointer, count: Int,
                       into destination: UnsafeMutablePointer<Float>) throws(TensorFormatError) {
    try type.dequantize(source, count: count, into: destination)
}
