import Foundation
import Testing

@testable import PlinthRuntime

// Tests of the GGUF reader (Sources/PlinthRuntime/GGUF). Synthetic files come from
// Support/GGUFBuilder.swift; the real-model expectations come from gguf-py through
// Scripts/make_gguf_fixtures.py, which wrote Fixtures/gguf/smollm2_tensors.json.

// MARK: - Helpers

/// Opens `w`'s bytes as a file and returns the reader's error, or nil when it opened.
private func openError(_ w: GGUFBuilder) throws -> GGUFError? {
    try openError(w.bytes())
}

private func openError(_ bytes: [UInt8]) throws -> GGUFError? {
    switch try openGGUF(bytes) {
    case .success: nil
    case .failure(let e): e
    }
}

/// Parses an in-memory header as if it began a file of `fileSize` bytes.
private func parseHeader(_ bytes: [UInt8], fileSize: Int) -> Result<GGUFHeader, GGUFError> {
    bytes.withUnsafeBytes { buf in
        do throws(GGUFError) {
            return .success(try GGUFFile.parseHeader(buf, fileSize: fileSize))
        } catch {
            return .failure(error)
        }
    }
}

/// Checks that opening `w` fails with exactly `expected`, and that the message mentions each
/// of `mentions` (the key or tensor the error is about).
private func expectError(_ w: GGUFBuilder, _ expected: GGUFError, mentions: [String],
                         sourceLocation: SourceLocation = #_sourceLocation) throws {
    let error = try openError(w)
    #expect(error == expected, sourceLocation: sourceLocation)
    let message = error?.errorDescription ?? ""
    for m in mentions {
        #expect(message.contains(m), "message \"\(message)\" should mention \(m)", sourceLocation: sourceLocation)
    }
}

private func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { GGUFBuilder.le(v) }

/// A small valid file: two keys and two tensors.
private func smallValidWriter() -> GGUFBuilder {
    var w = GGUFBuilder()
    w.add("general.architecture", .string("llama"))
    w.add("n", .uint32(7))
    w.addTensor(.init("a", dims: [4], type: .f32))
    w.addTensor(.init("b", dims: [32, 2], type: .q4_0))
    return w
}

/// One base file for the error tests: one key, one tensor; each test breaks one thing.
private func baseWriter() -> GGUFBuilder {
    var w = GGUFBuilder()
    w.add("general.architecture", .string("llama"))
    return w
}

/// Metadata of every value type, including nested arrays, empty arrays and non-ASCII strings.
private let everyTypeEntries: [(String, GGUFValue)] = [
    ("general.alignment", .uint32(32)),
    ("u8", .uint8(255)),
    ("i8", .int8(-128)),
    ("u16", .uint16(65535)),
    ("i16", .int16(-32768)),
    ("u32", .uint32(.max)),
    ("i32", .int32(.min)),
    ("u64", .uint64(1 << 40)),
    ("u64.max", .uint64(.max)),
    ("i64", .int64(.min)),
    ("f32", .float32(-1.5)),
    ("f32.inf", .float32(.infinity)),
    ("f32.tiny", .float32(.leastNonzeroMagnitude)),
    ("f64", .float64(.pi)),
    ("f64.negzero", .float64(-0.0)),
    ("b.true", .bool(true)),
    ("b.false", .bool(false)),
    ("s", .string("llama")),
    ("s.empty", .string("")),
    ("s.unicode", .string("héllo, 世界 🦙 — Ünïcödé")),
    ("s.nul", .string("a\u{0}b")),
    ("clé.ünïcode.键", .string("key is not ASCII")),
    ("a.u8", .array([.uint8(0), .uint8(1), .uint8(255)])),
    ("a.i8", .array([.int8(-1), .int8(127)])),
    ("a.u16", .array([.uint16(1), .uint16(65535)])),
    ("a.i16", .array([.int16(-2), .int16(300)])),
    ("a.u32", .array([.uint32(3), .uint32(4_000_000_000)])),
    ("a.i32", .array([.int32(-5), .int32(6), .int32(.max)])),
    ("a.u64", .array([.uint64(7), .uint64(1 << 50)])),
    ("a.i64", .array([.int64(-8), .int64(.max)])),
    ("a.f32", .array([.float32(0.5), .float32(-2.25)])),
    ("a.f64", .array([.float64(1e300), .float64(-1e-300)])),
    ("a.bool", .array([.bool(true), .bool(false), .bool(true)])),
    ("a.str", .array([.string("a"), .string(""), .string("ü"), .string("Ġthe"), .string("🦙🦙")])),
    ("a.empty", .array([])),
    ("a.nested", .array([.array([.int32(1), .int32(2)]), .array([.int32(3)]), .array([])])),
    ("a.nested.mixed", .array([.array([.uint8(9)]), .array([.string("x"), .string("yz")]), .array([.bool(false)])])),
    ("a.nested.str", .array([.array([.string("ab"), .string("c")]), .array([.string("ü")])])),
    ("a.deep", .array([.array([.array([.array([.float64(1.25)])]), .array([])])])),
    ("a.empty.nested", .array([.array([]), .array([])])),
]

private func everyTypeWriter() -> GGUFBuilder {
    var w = GGUFBuilder()
    for (k, v) in everyTypeEntries { w.add(k, v) }
    w.addTensor(.init("norm.weight", dims: [3], type: .f32))
    w.addTensor(.init("embd.f16", dims: [8, 2], type: .f16))
    w.addTensor(.init("blk.0.q4_0", dims: [64, 3], type: .q4_0))
    w.addTensor(.init("blk.0.q8_0", dims: [32], type: .q8_0))
    w.addTensor(.init("four.d", dims: [2, 3, 4, 5], type: .f32))
    w.addTensor(.init("blk.0.q4_k", dims: [256, 2], type: .q4_K))
    return w
}

// MARK: - Round trips

@Suite("GGUF reader: round trips")
struct GGUFRoundTripTests {
    @Test("every metadata value type survives a write and a read through a mapped file")
    func everyValueType() throws {
        let w = everyTypeWriter()
        let file = try openGGUF(w.bytes()).get()
        #expect(file.version == 3)
        #expect(file.keys == everyTypeEntries.map(\.0))
        #expect(file.metadata.count == everyTypeEntries.count)
        for (k, v) in everyTypeEntries {
            #expect(file[k] == v, "key \(k)")
        }
        // -0.0 == 0.0 under ==, so compare the bits.
        if case .float64(let z) = file["f64.negzero"] {
            #expect(z.bitPattern == (-0.0 as Double).bitPattern)
        } else {
            Issue.record("f64.negzero is \(String(describing: file["f64.negzero"]))")
        }
        #expect(file["missing"] == nil)
    }

    @Test("NaN floats keep their bit pattern")
    func nanBits() throws {
        var w = GGUFBuilder()
        let nan32 = Float(bitPattern: 0x7FC0_1234)
        let nan64 = Double(bitPattern: 0x7FF8_0000_0000_ABCD)
        w.add("f32.nan", .float32(nan32))
        w.add("f64.nan", .float64(nan64))
        let file = try openGGUF(w.bytes()).get()
        guard case .float32(let a) = file["f32.nan"], case .float64(let b) = file["f64.nan"] else {
            Issue.record("NaN keys missing or of the wrong type")
            return
        }
        #expect(a.bitPattern == nan32.bitPattern)
        #expect(b.bitPattern == nan64.bitPattern)
    }

    @Test("version 2 files read the same way")
    func version2() throws {
        var w = everyTypeWriter()
        w.version = 2
        let file = try openGGUF(w.bytes()).get()
        #expect(file.version == 2)
        #expect(file.keys.count == everyTypeEntries.count)
        #expect(file.tensors.count == 6)
    }

    @Test("arrays nest eight deep; the ninth level is refused with an error naming the key")
    func nestingDepth() throws {
        func nested(_ levels: Int) -> GGUFValue {
            var v: GGUFValue = .array([.uint8(1)])
            for _ in 1..<levels { v = .array([v]) }
            return v
        }
        var ok = GGUFBuilder()
        ok.add("deep8", nested(8))
        let file = try openGGUF(ok.bytes()).get()
        #expect(file["deep8"] == nested(8))

        var bad = GGUFBuilder()
        bad.add("deep9", nested(9))
        let error = try openError(bad)
        #expect(error != nil)
        #expect(error?.errorDescription?.contains("deep9") == true)
    }

    @Test("typed accessors return values, nil for missing keys, and wrongValueType otherwise")
    func typedAccessors() throws {
        let file = try openGGUF(everyTypeWriter().bytes()).get()

        #expect(try file.string("s") == "llama")
        #expect(try file.string("s.unicode") == "héllo, 世界 🦙 — Ünïcödé")
        #expect(try file.string("s.empty") == "")
        #expect(try file.string("clé.ünïcode.键") == "key is not ASCII")
        #expect(try file.string("missing") == nil)
        #expect(throws: GGUFError.wrongValueType(key: "u32", expected: "string", found: "uint32")) {
            try file.string("u32")
        }

        #expect(try file.int("u8") == 255)
        #expect(try file.int("i8") == -128)
        #expect(try file.int("u16") == 65535)
        #expect(try file.int("i16") == -32768)
        #expect(try file.int("u32") == Int(UInt32.max))
        #expect(try file.int("i32") == Int(Int32.min))
        #expect(try file.int("u64") == 1 << 40)
        #expect(try file.int("i64") == Int.min)
        #expect(try file.int("missing") == nil)
        #expect(throws: GGUFError.wrongValueType(key: "f32", expected: "integer", found: "float32")) {
            try file.int("f32")
        }
        // A uint64 that does not fit in Int is not silently wrapped.
        #expect(throws: GGUFError.wrongValueType(key: "u64.max", expected: "integer", found: "uint64")) {
            try file.int("u64.max")
        }
        #expect(throws: GGUFError.wrongValueType(key: "b.true", expected: "integer", found: "bool")) {
            try file.int("b.true")
        }

        #expect(try file.double("f32") == -1.5)
        #expect(try file.double("f64") == .pi)
        #expect(try file.double("u16") == 65535)
        #expect(try file.double("f32.inf") == .infinity)
        #expect(try file.double("missing") == nil)
        #expect(throws: GGUFError.wrongValueType(key: "s", expected: "number", found: "string")) {
            try file.double("s")
        }

        #expect(try file.bool("b.true") == true)
        #expect(try file.bool("b.false") == false)
        #expect(try file.bool("missing") == nil)
        #expect(throws: GGUFError.wrongValueType(key: "u8", expected: "bool", found: "uint8")) {
            try file.bool("u8")
        }

        #expect(try file.stringArray("a.str") == ["a", "", "ü", "Ġthe", "🦙🦙"])
        #expect(try file.stringArray("a.empty") == [])
        #expect(try file.stringArray("missing") == nil)
        #expect(throws: GGUFError.wrongValueType(key: "a.i32", expected: "array of strings", found: "array of int32")) {
            try file.stringArray("a.i32")
        }
        #expect(throws: GGUFError.wrongValueType(key: "s", expected: "array", found: "string")) {
            try file.stringArray("s")
        }

        #expect(try file.intArray("a.i32") == [-5, 6, Int(Int32.max)])
        #expect(try file.intArray("a.u8") == [0, 1, 255])
        #expect(try file.intArray("a.u64") == [7, 1 << 50])
        #expect(try file.intArray("a.empty") == [])
        #expect(try file.intArray("missing") == nil)
        #expect(throws: GGUFError.wrongValueType(key: "a.str", expected: "array of integers", found: "array of string")) {
            try file.intArray("a.str")
        }
        #expect(throws: GGUFError.wrongValueType(key: "a.nested", expected: "array of integers", found: "array of array")) {
            try file.intArray("a.nested")
        }
        #expect(throws: GGUFError.wrongValueType(key: "u32", expected: "array", found: "uint32")) {
            try file.intArray("u32")
        }

        #expect(try file.doubleArray("a.f32") == [0.5, -2.25])
        #expect(try file.doubleArray("a.i16") == [-2, 300])
        #expect(throws: GGUFError.wrongValueType(key: "a.bool", expected: "array of numbers", found: "array of bool")) {
            try file.doubleArray("a.bool")
        }

        #expect(try file.array("a.nested")?.count == 3)
        #expect(try file.array("a.nested.str") == [.array([.string("ab"), .string("c")]), .array([.string("ü")])])

        let wrong = GGUFError.wrongValueType(key: "u32", expected: "string", found: "uint32")
        #expect(wrong.errorDescription?.contains("'u32'") == true)
        #expect(wrong.errorDescription?.contains("string") == true)
    }

    @Test("tensor infos: dimensions, type, absolute offset, size, and the bytes read back")
    func tensorInfos() throws {
        let w = everyTypeWriter()
        let bytes = w.bytes()
        let file = try openGGUF(bytes).get()
        #expect(file.alignment == 32)
        #expect(file.dataOffset == w.dataOffset)
        #expect(file.dataOffset % 32 == 0)
        #expect(file.dataOffset >= w.header().count && file.dataOffset < w.header().count + 32)

        let offsets = w.placedOffsets(alignment: 32)
        #expect(file.tensors.map(\.name) == w.tensors.map { String(decoding: $0.name, as: UTF8.self) })
        let expected: [(dims: [Int], type: GGMLType, bytes: Int)] = [
            ([3], .f32, 12),
            ([8, 2], .f16, 32),
            ([64, 3], .q4_0, 6 * 18),
            ([32], .q8_0, 34),
            ([2, 3, 4, 5], .f32, 480),
            ([256, 2], .q4_K, 2 * 144),
        ]
        for (i, t) in file.tensors.enumerated() {
            #expect(t.dimensions == expected[i].dims, "\(t.name)")
            #expect(t.type == expected[i].type, "\(t.name)")
            #expect(t.byteCount == expected[i].bytes, "\(t.name)")
            #expect(t.fileOffset == file.dataOffset + Int(offsets[i]), "\(t.name)")
            #expect(t.fileOffset % 32 == 0, "\(t.name)")
            let want = GGUFBuilder.pattern(count: t.byteCount, seed: i)
            #expect(Array(bytes[t.fileOffset..<t.fileOffset + t.byteCount]) == want, "\(t.name) in the file")
            let got = Array(UnsafeRawBufferPointer(start: file.data(of: t), count: t.byteCount))
            #expect(got == want, "\(t.name) through data(of:)")
            #expect(file.tensor(named: t.name) == t)
        }
        let four = try #require(file.tensor(named: "four.d"))
        #expect(four.elementCount == 120)
        #expect(four.rowLength == 2)
        #expect(four.rowCount == 60)
        #expect(file.tensor(named: "nope") == nil)
    }

    @Test("a custom general.alignment of 64 moves the data section and aligns every tensor")
    func customAlignment() throws {
        // Pick a header length where rounding up to 64 differs from rounding up to 32, so the
        // test fails if the reader ignores the key.
        var chosen: GGUFBuilder?
        for pad in 0..<64 {
            var w = GGUFBuilder()
            w.add("general.alignment", .uint32(64))
            w.add("pad", .string(String(repeating: "x", count: pad)))
            w.addTensor(.init("a", dims: [3], type: .f32))
            w.addTensor(.init("b", dims: [5], type: .f32))
            w.addTensor(.init("c", dims: [32], type: .q8_0))
            let h = w.header().count
            if (h + 63) / 64 * 64 != (h + 31) / 32 * 32 { chosen = w; break }
        }
        let w = try #require(chosen)
        #expect(w.effectiveAlignment == 64)
        let bytes = w.bytes()
        let file = try openGGUF(bytes).get()
        #expect(file.alignment == 64)
        #expect(file.dataOffset == w.dataOffset)
        #expect(file.dataOffset % 64 == 0)
        #expect(file.dataOffset != (w.header().count + 31) / 32 * 32)
        #expect(file.tensors.map { $0.fileOffset - file.dataOffset } == [0, 64, 128])
        for (i, t) in file.tensors.enumerated() {
            #expect(t.fileOffset % 64 == 0)
            let got = Array(UnsafeRawBufferPointer(start: file.data(of: t), count: t.byteCount))
            #expect(got == GGUFBuilder.pattern(count: t.byteCount, seed: i))
        }
    }

    @Test("general.alignment may be any integer type", arguments: [
        GGUFValue.uint8(16), .uint16(128), .uint32(1), .int32(8), .uint64(4096), .int64(256),
    ])
    func alignmentIntegerTypes(_ value: GGUFValue) throws {
        var w = GGUFBuilder()
        w.add("general.alignment", value)
        w.addTensor(.init("a", dims: [8], type: .f32))
        w.addTensor(.init("b", dims: [8], type: .f32))
        let file = try openGGUF(w.bytes()).get()
        let a = try #require(value.intValue)
        #expect(file.alignment == a)
        #expect(file.dataOffset % a == 0)
        #expect(file.tensors[1].fileOffset == file.dataOffset + (32 + a - 1) / a * a)
    }

    @Test("a file with no tensors and no metadata is valid")
    func emptyModel() throws {
        let file = try openGGUF(GGUFBuilder().bytes()).get()
        #expect(file.keys.isEmpty)
        #expect(file.tensors.isEmpty)
        #expect(file.dataOffset == 32)
    }
}

// MARK: - Errors

@Suite("GGUF reader: typed errors")
struct GGUFErrorTests {
    @Test("bad magic shows the bytes found, as text or hex")
    func badMagic() throws {
        var w = baseWriter()
        w.magic = Array("GGML".utf8)
        try expectError(w, .badMagic(found: "\"GGML\""), mentions: ["GGML"])
        w.magic = [0x00, 0x01, 0xFE, 0xFF]
        try expectError(w, .badMagic(found: "00 01 fe ff"), mentions: ["00 01 fe ff"])
        // Three bytes are not even a magic number.
        #expect(try openError(Array("GGU".utf8)) == .truncated(offset: 0, reading: "the magic number"))
    }

    @Test("unsupported versions are named", arguments: [UInt32(0), 1, 4, 0x0300_0000, .max])
    func unsupportedVersion(_ version: UInt32) throws {
        var w = baseWriter()
        w.version = version
        try expectError(w, .unsupportedVersion(version), mentions: ["\(version)"])
    }

    @Test("every prefix of a small valid file throws, and the whole file opens")
    func truncatedAtEveryLength() throws {
        let w = smallValidWriter()
        let bytes = w.bytes()
        let headerLength = w.header().count
        #expect(try openError(bytes) == nil)
        var truncatedCount = 0
        for n in 0..<bytes.count {
            let error = try openError(Array(bytes[..<n]))
            guard let error else {
                Issue.record("a prefix of \(n) of \(bytes.count) bytes opened without error")
                continue
            }
            #expect(error.errorDescription?.isEmpty == false)
            switch error {
            case .truncated(let offset, _):
                truncatedCount += 1
                #expect(offset <= n, "prefix \(n): \(error)")
                #expect(n < headerLength, "prefix \(n): \(error)")
            case .countTooLarge:
                // A count that exceeds what the remaining bytes can hold: also a fair verdict.
                #expect(n < headerLength, "prefix \(n): \(error)")
            case .tensorOutOfBounds(let name, _, let size):
                #expect(n >= headerLength, "prefix \(n): \(error)")
                #expect(["a", "b"].contains(name))
                #expect(size == n)
            default:
                Issue.record("prefix \(n): unexpected \(error)")
            }
        }
        #expect(truncatedCount > headerLength / 2)
        #expect(try openError([]) == .truncated(offset: 0, reading: "the header (file is empty)"))

        // In memory, every prefix shorter than the header throws; the header alone parses.
        for n in 0...headerLength {
            let result = parseHeader(Array(bytes[..<n]), fileSize: bytes.count)
            switch result {
            case .success: #expect(n == headerLength, "prefix \(n) parsed")
            case .failure(let e): #expect(n < headerLength, "prefix \(n): \(e)")
            }
        }
    }

    @Test("truncation inside a value names what was being read")
    func truncatedInsideValue() throws {
        var w = GGUFBuilder()
        w.add("tokenizer.ggml.tokens", .array([.string("hello"), .string("world")]))
        let bytes = w.bytes()
        let cut = w.header().count - 3  // inside "world"
        let error = try openError(Array(bytes[..<cut]))
        guard case .truncated(_, let reading)? = error else {
            Issue.record("expected truncated, got \(String(describing: error))")
            return
        }
        #expect(reading.contains("tokenizer.ggml.tokens"))
        #expect(error?.errorDescription?.contains("tokenizer.ggml.tokens") == true)
    }

    @Test("invalid UTF-8 in a key, a string value, a string array and a tensor name")
    func invalidUTF8() throws {
        for bad: [UInt8] in [[0x62, 0xFF, 0x61], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xE2, 0x82]] {
            var w = GGUFBuilder()
            w.entries.append(.value(key: bad, .uint8(1)))
            try expectError(w, .invalidUTF8(offset: 32, reading: "a metadata key"), mentions: ["metadata key", "32"])
        }

        var v = GGUFBuilder()
        v.addRaw("general.name", type: 8, payload: GGUFBuilder.string([0x41, 0xFF]))
        let valueOffset = 24 + 8 + "general.name".utf8.count + 4 + 8
        try expectError(v, .invalidUTF8(offset: valueOffset, reading: "the value of 'general.name'"),
                        mentions: ["general.name"])

        var a = GGUFBuilder()
        a.addRaw("tokenizer.ggml.tokens", type: 9,
                 payload: le(UInt32(8)) + le(UInt64(2)) + GGUFBuilder.string("ok") + GGUFBuilder.string([0xFE]))
        let error = try openError(a)
        guard case .invalidUTF8(_, let reading)? = error else {
            Issue.record("expected invalidUTF8, got \(String(describing: error))")
            return
        }
        #expect(reading.contains("tokenizer.ggml.tokens"))

        var t = baseWriter()
        t.addTensor(.init(rawName: [0x77, 0x80], dims: [4], typeID: 0))
        let te = try openError(t)
        guard case .invalidUTF8(_, "a tensor name")? = te else {
            Issue.record("expected invalidUTF8 in a tensor name, got \(String(describing: te))")
            return
        }
    }

    @Test("unknown value types name the key, also as an array's element type")
    func unknownValueType() throws {
        for type: UInt32 in [13, 99, .max] {
            var w = baseWriter()
            w.addRaw("weird.key", type: type, payload: [0, 0, 0, 0])
            try expectError(w, .unknownValueType(type, key: "weird.key"), mentions: ["weird.key", "\(type)"])
        }
        var a = baseWriter()
        a.addRaw("weird.array", type: 9, payload: le(UInt32(13)) + le(UInt64(1)) + [0])
        try expectError(a, .unknownValueType(13, key: "weird.array"), mentions: ["weird.array"])
    }

    @Test("a bool byte other than 0 or 1 is refused, also inside an array")
    func invalidBool() throws {
        var w = baseWriter()
        w.addRaw("tokenizer.ggml.add_bos_token", type: 7, payload: [2])
        try expectError(w, .invalidBool(2, key: "tokenizer.ggml.add_bos_token"),
                        mentions: ["tokenizer.ggml.add_bos_token", "2"])
        var a = baseWriter()
        a.addRaw("flags", type: 9, payload: le(UInt32(7)) + le(UInt64(3)) + [1, 0, 0x80])
        try expectError(a, .invalidBool(0x80, key: "flags"), mentions: ["flags", "128"])
    }

    @Test("a duplicate metadata key is named")
    func duplicateKey() throws {
        var w = baseWriter()
        w.add("llama.block_count", .uint32(30))
        w.add("llama.block_count", .uint32(30))
        try expectError(w, .duplicateKey("llama.block_count"), mentions: ["llama.block_count"])
    }

    @Test("a duplicate tensor name is named")
    func duplicateTensor() throws {
        var w = baseWriter()
        w.addTensor(.init("blk.0.attn_q.weight", dims: [8], type: .f32))
        w.addTensor(.init("blk.0.attn_q.weight", dims: [8], type: .f32))
        try expectError(w, .duplicateTensor("blk.0.attn_q.weight"), mentions: ["blk.0.attn_q.weight"])
    }

    @Test("more than four dimensions is refused, naming the tensor")
    func tooManyDimensions() throws {
        var w = baseWriter()
        w.addTensor(.init("five.d", dims: [1, 2, 3, 4, 5], type: .f32))
        try expectError(w, .badDimensionCount(tensor: "five.d", count: 5), mentions: ["five.d", "5"])
        var many = baseWriter()
        many.addTensor(.init("many.d", dims: [UInt64](repeating: 1, count: 64), type: .f32))
        try expectError(many, .badDimensionCount(tensor: "many.d", count: 64), mentions: ["many.d", "64"])
    }

    @Test("a tensor with no dimensions gives an error naming it")
    func zeroDimensionCount() throws {
        var w = baseWriter()
        w.addTensor(.init("scalar", dims: [], type: .f32))
        let error = try openError(w)
        #expect(error != nil)
        #expect(error?.errorDescription?.contains("scalar") == true)
    }

    @Test("a zero or absurd dimension size is named with its index")
    func invalidDimension() throws {
        var w = baseWriter()
        w.addTensor(.init("zero.dim", dims: [4, 0], type: .f32))
        try expectError(w, .invalidDimension(tensor: "zero.dim", index: 1, value: 0), mentions: ["zero.dim"])
        var h = baseWriter()
        h.addTensor(.init("huge.dim", dims: [1 << 40], type: .f32))
        try expectError(h, .invalidDimension(tensor: "huge.dim", index: 0, value: 1 << 40), mentions: ["huge.dim"])
    }

    @Test("a tensor whose element count or byte size overflows is refused")
    func sizeOverflow() throws {
        let big = UInt64(Int32.max)
        var w = baseWriter()
        w.addTensor(.init("too.many.elements", dims: [big, big, big], type: .f32))
        try expectError(w, .sizeOverflow(tensor: "too.many.elements"), mentions: ["too.many.elements"])
        // The element count fits in Int; the byte count (4 bytes each) does not.
        var b = baseWriter()
        b.addTensor(.init("too.many.bytes", dims: [big, big, 2], type: .f32))
        try expectError(b, .sizeOverflow(tensor: "too.many.bytes"), mentions: ["too.many.bytes"])
    }

    @Test("unknown tensor type ids are named", arguments: [UInt32(99), 4, 5, 42, .max])
    func unknownTensorType(_ id: UInt32) throws {
        var w = baseWriter()
        w.addTensor(.init("w", dims: [32], typeID: id))
        try expectError(w, .unknownTensorType(tensor: "w", id: id), mentions: ["'w'", "\(id)"])
    }

    @Test("a row that is not a whole number of blocks is refused")
    func rowNotBlockAligned() throws {
        var w = baseWriter()
        w.addTensor(.init("blk.0.ffn_up.weight", dims: [33, 2], type: .q4_0))
        try expectError(w, .rowNotBlockAligned(tensor: "blk.0.ffn_up.weight", type: "Q4_0", rowLength: 33, blockElements: 32),
                        mentions: ["blk.0.ffn_up.weight", "Q4_0", "33", "32"])
        var k = baseWriter()
        k.addTensor(.init("k.576", dims: [576], type: .q4_K))
        try expectError(k, .rowNotBlockAligned(tensor: "k.576", type: "Q4_K", rowLength: 576, blockElements: 256),
                        mentions: ["k.576"])
    }

    @Test("a tensor offset that is not a multiple of the alignment is refused")
    func misalignedTensor() throws {
        var w = baseWriter()
        w.addTensor(.init("a", dims: [8], type: .f32))
        w.addTensor(.init("b", dims: [8], type: .f32, offset: 48))
        try expectError(w, .misalignedTensor(tensor: "b", offset: 48, alignment: 32), mentions: ["'b'", "48", "32"])

        var c = baseWriter()
        c.add("general.alignment", .uint32(64))
        c.addTensor(.init("c", dims: [8], type: .f32, offset: 32))
        try expectError(c, .misalignedTensor(tensor: "c", offset: 32, alignment: 64), mentions: ["'c'", "64"])
    }

    @Test("a tensor past the end of the file is refused, also when its end overflows")
    func tensorOutOfBounds() throws {
        var w = baseWriter()
        w.addTensor(.init("missing.data", dims: [16], type: .f32, data: []))
        let bytes = w.bytes()
        #expect(bytes.count == w.dataOffset)
        try expectError(w, .tensorOutOfBounds(tensor: "missing.data", end: UInt64(w.dataOffset + 64), fileSize: bytes.count),
                        mentions: ["missing.data", "\(bytes.count)"])

        // One byte short.
        var s = baseWriter()
        s.addTensor(.init("short", dims: [16], type: .f32, data: [UInt8](repeating: 1, count: 63)))
        let sb = s.bytes()
        try expectError(s, .tensorOutOfBounds(tensor: "short", end: UInt64(s.dataOffset + 64), fileSize: sb.count),
                        mentions: ["short"])

        var o = baseWriter()
        o.addTensor(.init("wraps", dims: [16], type: .f32, offset: UInt64.max - 31, data: []))
        let ob = o.bytes()
        try expectError(o, .tensorOutOfBounds(tensor: "wraps", end: .max, fileSize: ob.count), mentions: ["wraps"])

        var f = baseWriter()
        f.addTensor(.init("far", dims: [16], type: .f32, offset: 1 << 40, data: []))
        let fb = f.bytes()
        try expectError(f, .tensorOutOfBounds(tensor: "far", end: UInt64(f.dataOffset) + (1 << 40) + 64, fileSize: fb.count),
                        mentions: ["far"])
    }

    @Test("overlapping tensors are named, in either directory order")
    func overlappingTensors() throws {
        var w = baseWriter()
        w.addTensor(.init("first", dims: [16], type: .f32, offset: 0))     // bytes 0..<64
        w.addTensor(.init("second", dims: [16], type: .f32, offset: 32))   // bytes 32..<96
        try expectError(w, .overlappingTensors("first", "second"), mentions: ["first", "second"])

        // Listed in reverse order, one inside another.
        var r = baseWriter()
        r.addTensor(.init("inner", dims: [8], type: .f32, offset: 64))
        r.addTensor(.init("outer", dims: [64], type: .f32, offset: 0))
        let error = try openError(r)
        guard case .overlappingTensors(let a, let b)? = error else {
            Issue.record("expected overlappingTensors, got \(String(describing: error))")
            return
        }
        #expect(Set([a, b]) == ["inner", "outer"])

        // Touching is not overlapping.
        var t = baseWriter()
        t.addTensor(.init("x", dims: [8], type: .f32, offset: 0))
        t.addTensor(.init("y", dims: [8], type: .f32, offset: 32))
        #expect(try openError(t) == nil)
    }

    @Test("general.alignment must be a non-zero power of two", arguments: [UInt32(3), 0, 48, 1 << 21])
    func invalidAlignment(_ value: UInt32) throws {
        var w = baseWriter()
        w.add("general.alignment", .uint32(value))
        w.alignment = 32
        try expectError(w, .invalidAlignment("\(value)"), mentions: ["general.alignment", "\(value)"])
    }

    @Test("general.alignment of a non-integer type is a wrongValueType naming the key")
    func alignmentWrongType() throws {
        var w = baseWriter()
        w.add("general.alignment", .string("32"))
        try expectError(w, .wrongValueType(key: "general.alignment", expected: "integer", found: "string"),
                        mentions: ["general.alignment"])
    }

    @Test("counts larger than the file can hold are refused before allocating")
    func countTooLarge() throws {
        var kv = baseWriter()
        kv.kvCountOverride = 1 << 60
        try expectError(kv, .countTooLarge(1 << 60, what: "the metadata section"), mentions: ["\(UInt64(1) << 60)"])

        var tc = baseWriter()
        tc.tensorCountOverride = .max
        try expectError(tc, .countTooLarge(.max, what: "the tensor directory"), mentions: ["tensor directory"])

        var arr = baseWriter()
        arr.addRaw("tokenizer.ggml.merges", type: 9, payload: le(UInt32(8)) + le(UInt64(1) << 60))
        try expectError(arr, .countTooLarge(1 << 60, what: "array 'tokenizer.ggml.merges'"),
                        mentions: ["tokenizer.ggml.merges"])

        var nested = baseWriter()
        nested.addRaw("nested", type: 9, payload: le(UInt32(9)) + le(UInt64(1)) + le(UInt32(0)) + le(UInt64.max))
        try expectError(nested, .countTooLarge(.max, what: "array 'nested'"), mentions: ["nested"])

        var str = baseWriter()
        str.addRaw("long.string", type: 8, payload: le(UInt64(1) << 62) + Array("abc".utf8))
        let e = try openError(str)
        guard case .truncated(_, let reading)? = e else {
            Issue.record("expected truncated, got \(String(describing: e))")
            return
        }
        #expect(reading.contains("long.string"))
    }

    @Test("a missing file, an empty file and a directory each have their error")
    func fileErrors() throws {
        let missing = FileManager.default.temporaryDirectory
            .appendingPathComponent("plinth-no-such-\(UUID().uuidString).gguf")
        #expect(throws: GGUFError.fileNotFound(missing.path)) { try GGUFFile(url: missing) }
        #expect(GGUFError.fileNotFound(missing.path).errorDescription?.contains(missing.path) == true)
        #expect(throws: GGUFError.fileNotFound(missing.path)) { try GGUFFile(path: missing.path) }

        let empty = try openError([])
        #expect(empty == .truncated(offset: 0, reading: "the header (file is empty)"))
        #expect(empty?.errorDescription?.contains("empty") == true)

        let dir = FileManager.default.temporaryDirectory.path
        #expect(throws: GGUFError.cannotOpen(dir, "not a regular file")) { try GGUFFile(path: dir) }
    }

    @Test("every error case has a non-empty message")
    func everyMessage() {
        let all: [GGUFError] = [
            .fileNotFound("/x"), .cannotOpen("/x", "why"), .badMagic(found: "00"), .unsupportedVersion(9),
            .truncated(offset: 1, reading: "r"), .invalidUTF8(offset: 1, reading: "r"),
            .unknownValueType(13, key: "k"), .invalidBool(2, key: "k"), .duplicateKey("k"),
            .wrongValueType(key: "k", expected: "e", found: "f"), .countTooLarge(5, what: "w"),
            .invalidAlignment("3"), .duplicateTensor("t"), .badDimensionCount(tensor: "t", count: 5),
            .invalidDimension(tensor: "t", index: 0, value: 0), .sizeOverflow(tensor: "t"),
            .unknownTensorType(tensor: "t", id: 99),
            .rowNotBlockAligned(tensor: "t", type: "Q4_0", rowLength: 33, blockElements: 32),
            .misalignedTensor(tensor: "t", offset: 1, alignment: 32),
            .tensorOutOfBounds(tensor: "t", end: 9, fileSize: 8), .overlappingTensors("t", "u"),
        ]
        for e in all {
            let m = e.errorDescription ?? ""
            #expect(!m.isEmpty, "\(e)")
            #expect(m == e.localizedDescription, "\(e)")
        }
    }
}

// MARK: - Defects found by these tests

// Each test here fails against the reader as first written: it states the behaviour a user
// should get, and the defect was reported to the reader's owner with a suggested fix.
@Suite("GGUF reader: edge cases of validation messages")
struct GGUFEdgeCaseTests {
    @Test("a negative general.alignment is reported with its real value, not as a huge unsigned number")
    func negativeAlignmentMessage() throws {
        var w = baseWriter()
        w.add("general.alignment", .int32(-32))
        w.alignment = 32
        let error = try openError(w)
        guard case .invalidAlignment? = error else {
            Issue.record("expected invalidAlignment, got \(String(describing: error))")
            return
        }
        let message = error?.errorDescription ?? ""
        #expect(message.contains("-32"), "message: \(message)")
    }

    @Test("a uint64 general.alignment too large for Int is an invalid alignment, not a wrong type")
    func hugeUnsignedAlignment() throws {
        var w = baseWriter()
        w.add("general.alignment", .uint64(1 << 63))
        w.alignment = 32
        let error = try openError(w)
        guard case .invalidAlignment? = error else {
            Issue.record("expected invalidAlignment, got \(String(describing: error)): \(error?.errorDescription ?? "")")
            return
        }
    }

    @Test("an alignment over the 1 MiB limit is not described as 'not a power of two'")
    func alignmentOverLimitMessage() throws {
        var w = baseWriter()
        w.add("general.alignment", .uint32(1 << 21))
        w.alignment = 32
        let error = try openError(w)
        #expect(error == .invalidAlignment("2097152"))
        let message = error?.errorDescription ?? ""
        // 2097152 is a power of two: the message must state the limit it exceeds.
        #expect(message.contains("1048576"), "message: \(message)")
    }

    @Test("arrays nested deeper than the limit are not reported as an unknown value type")
    func nestingTooDeepMessage() throws {
        var v: GGUFValue = .array([.uint8(1)])
        for _ in 1..<9 { v = .array([v]) }
        var w = GGUFBuilder()
        w.add("deep9", v)
        let error = try openError(w)
        #expect(error == .nestingTooDeep(key: "deep9", limit: 8))
    }

    @Test("parseHeader with a negative fileSize throws or returns; it does not trap")
    func negativeFileSize() async {
        await #expect(processExitsWith: .success) {
            var w = GGUFBuilder()
            w.addTensor(.init("a", dims: [4], type: .f32))
            _ = parseHeader(w.header(), fileSize: -1)
        }
    }
}

// MARK: - The real default model

/// Fixtures/gguf/smollm2_tensors.json, written by Scripts/make_gguf_fixtures.py from gguf-py.
private struct GGUFFixture: Decodable {
    struct Tensor: Decodable {
        let name: String
        let type: String
        let type_id: UInt32
        let shape: [Int]
        let offset: Int
        let n_bytes: Int
        let first_bytes: String
    }

    let file: String
    let sha256: String
    let file_size: Int
    let version: UInt32
    let alignment: Int
    let data_offset: Int
    let kv_count: Int
    let gguf_py_field_count: Int
    let tensor_count: Int
    let keys: [String]
    let tensors: [Tensor]

    static func load() throws -> GGUFFixture {
        try TestModels.fixture("gguf/smollm2_tensors.json")
    }
}

private let smolLM2Path = TestModels.path(TestModels.smolLM2)

@Suite("GGUF reader: the real default model")
struct GGUFRealModelTests {
    @Test("SmolLM2 reads as gguf-py reads it",
          .enabled(if: smolLM2Path != nil, "SmolLM2-135M-Instruct is not in the model cache (run `plinth models fetch`)"))
    func smolLM2MatchesGGUFPy() throws {
        let url = try #require(smolLM2Path)
        let fixture = try GGUFFixture.load()
        let file = try GGUFFile(url: url)
        #expect(file.mapping.count == fixture.file_size, "not the file the fixture was made from (\(fixture.file))")

        #expect(file.version == 3)
        #expect(file.version == fixture.version)
        #expect(file.tensors.count == 272)
        #expect(file.tensors.count == fixture.tensor_count)
        #expect(file.keys.count == 33)
        #expect(file.keys.count == fixture.kv_count)
        #expect(fixture.gguf_py_field_count == fixture.kv_count + 3)
        #expect(file.keys == fixture.keys)
        #expect(file.alignment == fixture.alignment)
        #expect(file.dataOffset == fixture.data_offset)

        #expect(try file.string("general.architecture") == "llama")
        #expect(try file.stringArray("tokenizer.ggml.tokens")?.count == 49152)
        #expect(try file.intArray("tokenizer.ggml.token_type")?.count == 49152)
        #expect(try file.stringArray("tokenizer.ggml.merges")?.count == 48900)
        #expect(try file.int("llama.block_count") == 30)
        #expect(try file.int("llama.embedding_length") == 576)
        #expect(try file.double("llama.rope.freq_base") == 100000)
        #expect(try file.string("tokenizer.chat_template")?.contains("<|im_start|>") == true)

        for (t, want) in zip(file.tensors, fixture.tensors) {
            #expect(t.name == want.name)
            #expect(t.type.name == want.type, "\(t.name)")
            #expect(t.type.rawValue == want.type_id, "\(t.name)")
            #expect(t.dimensions == want.shape, "\(t.name)")
            #expect(t.fileOffset == want.offset, "\(t.name)")
            #expect(t.byteCount == want.n_bytes, "\(t.name)")
            let head = UnsafeRawBufferPointer(start: file.data(of: t), count: 8)
            #expect(head.map { String(format: "%02x", $0) }.joined() == want.first_bytes, "\(t.name)")
        }
    }
}

// MARK: - Fuzzing


/// Applies one random mutation to `bytes`; returns its name.
@discardableResult
private func mutate(_ bytes: inout [UInt8], _ rng: inout SplitMix64) -> String {
    let n = bytes.count
    guard n > 0 else { return "none" }
    switch rng.below(9) {
    case 0:
        bytes[rng.below(n)] ^= UInt8(1) << UInt8(rng.below(8))
        return "bit flip"
    case 1:
        let start = rng.below(n)
        for i in start..<min(n, start + 1 + rng.below(8)) { bytes[i] = UInt8(truncatingIfNeeded: rng.next()) }
        return "random bytes"
    case 2:
        let start = rng.below(n)
        let fill: UInt8 = rng.below(2) == 0 ? 0x00 : 0xFF
        for i in start..<min(n, start + 1 + rng.below(16)) { bytes[i] = fill }
        return "constant run"
    case 3, 4:
        // A little-endian field overwritten with a value chosen to stress counts and offsets.
        let huge: [UInt64] = [.max, 1 << 63, 1 << 60, 1 << 40, 1 << 32, UInt64(Int64.max), UInt64(Int32.max),
                              0xFFFF_FFFF, 0, 1, 5, 64, rng.next()]
        let v = huge[rng.below(huge.count)]
        let width = rng.below(2) == 0 ? 8 : 4
        let start = rng.below(n)
        let field = width == 8 ? GGUFBuilder.le(v) : GGUFBuilder.le(UInt32(truncatingIfNeeded: v))
        for (i, b) in field.enumerated() where start + i < n { bytes[start + i] = b }
        return "huge field"
    case 5:
        let start = rng.below(n)
        let len = 1 + rng.below(min(64, n - start))
        let chunk = Array(bytes[start..<start + len])
        bytes.insert(contentsOf: chunk, at: rng.below(n + 1))
        return "duplicate range"
    case 6:
        let start = rng.below(n)
        let len = 1 + rng.below(min(64, n - start))
        bytes.removeSubrange(start..<start + len)
        return "remove range"
    case 7:
        // Swap two 4-byte-aligned words: moves type ids, counts and lengths around.
        guard n >= 8 else { return "none" }
        let a = rng.below(n / 4) * 4, b = rng.below(n / 4) * 4
        for i in 0..<4 where a + i < n && b + i < n { bytes.swapAt(a + i, b + i) }
        return "swap words"
    default:
        bytes.removeSubrange(rng.below(n)..<n)
        return "truncate"
    }
}

/// Overwrites one known header field (a count, length, type id, dimension or offset) with a
/// value chosen to sit on or just past a boundary; returns a description.
private func mutateField(_ bytes: inout [UInt8], _ fields: [GGUFBuilder.Field], _ rng: inout SplitMix64) -> String {
    let f = fields[rng.below(fields.count)]
    guard f.offset + f.width <= bytes.count else { return "none" }
    var old: UInt64 = 0
    for i in 0..<f.width { old |= UInt64(bytes[f.offset + i]) << (8 * UInt64(i)) }
    let same = fields.filter { $0.width == f.width }
    let other = same[rng.below(same.count)]
    var copied: UInt64 = 0
    for i in 0..<other.width where other.offset + i < bytes.count {
        copied |= UInt64(bytes[other.offset + i]) << (8 * UInt64(i))
    }
    let candidates: [UInt64] = [
        0, 1, 2, 3, 4, 5, 8, 9, 12, 13, 31, 32, 33, 64, 99, 256,
        old &+ 1, old &- 1, old &* 2, old &+ 32, old &- 32, old / 2, copied,
        UInt64(Int32.max), 1 << 31, 1 << 32, 1 << 60, 1 << 63, UInt64(Int64.max), .max, UInt64(UInt32.max), rng.next(),
    ]
    let v = candidates[rng.below(candidates.count)]
    let encoded = f.width == 8 ? GGUFBuilder.le(v) : GGUFBuilder.le(UInt32(truncatingIfNeeded: v))
    bytes.replaceSubrange(f.offset..<f.offset + f.width, with: encoded)
    return "\(f.what) := \(v)"
}

/// What must hold of any header the reader accepts; returns the violations.
private func invariantViolations(_ h: GGUFHeader, fileSize: Int) -> [String] {
    var bad: [String] = []
    if h.version != 2 && h.version != 3 { bad.append("version \(h.version)") }
    if h.alignment <= 0 || h.alignment & (h.alignment - 1) != 0 { bad.append("alignment \(h.alignment)") }
    if h.alignment > 0 && h.dataOffset % h.alignment != 0 { bad.append("data offset \(h.dataOffset) misaligned") }
    if h.keys.count != h.metadata.count || Set(h.keys) != Set(h.metadata.keys) { bad.append("keys and metadata disagree") }
    if let a = h.metadata["general.alignment"], a.intValue != h.alignment { bad.append("general.alignment ignored") }
    if Set(h.tensors.map(\.name)).count != h.tensors.count { bad.append("duplicate tensor names") }
    for t in h.tensors {
        if t.dimensions.isEmpty || t.dimensions.count > 4 { bad.append("\(t.name): \(t.dimensions.count) dims") }
        if t.dimensions.contains(where: { $0 <= 0 }) { bad.append("\(t.name): dims \(t.dimensions)") }
        if t.rowLength % t.type.blockElements != 0 { bad.append("\(t.name): row not block aligned") }
        var elements = 1, overflow = false
        for d in t.dimensions {
            let (m, o) = elements.multipliedReportingOverflow(by: d)
            overflow = overflow || o
            elements = m
        }
        if overflow || t.elementCount != elements { bad.append("\(t.name): element count overflows") }
        if t.type.tensorBytes(elements: elements, rowLength: t.rowLength) != t.byteCount {
            bad.append("\(t.name): byteCount \(t.byteCount) inconsistent with \(t.type) × \(t.dimensions)")
        }
        if t.fileOffset < h.dataOffset { bad.append("\(t.name): starts before the data section") }
        if t.byteCount <= 0 || t.fileOffset > fileSize || t.byteCount > fileSize - t.fileOffset {
            bad.append("\(t.name): [\(t.fileOffset), +\(t.byteCount)) outside \(fileSize) bytes")
        }
        if h.alignment > 0 && (t.fileOffset - h.dataOffset) % h.alignment != 0 { bad.append("\(t.name): misaligned") }
    }
    let byStart = h.tensors.sorted { $0.fileOffset < $1.fileOffset }
    for (a, b) in zip(byStart, byStart.dropFirst()) where a.fileOffset + a.byteCount > b.fileOffset {
        bad.append("\(a.name) and \(b.name) overlap")
    }
    return bad
}

private struct FuzzReport {
    var valid = 0
    var errors: [String: Int] = [:]
    var violations: [String] = []
    var emptyMessages = 0

    var thrown: Int { errors.values.reduce(0, +) }

    var summary: String {
        let kinds = errors.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return "\(valid) valid, \(thrown) typed errors (\(kinds))"
    }
}

/// Mutates `seed` `iterations` times and parses every result. Each iteration applies 1 to 3
/// blind mutations, or (one time in three, when `fields` is given) first overwrites one known
/// header field and then applies 0 or 1 blind mutations.
private func fuzz(_ seed: [UInt8], fields: [GGUFBuilder.Field] = [], fileSize: Int, iterations: Int,
                  rngSeed: UInt64) -> FuzzReport {
    var rng = SplitMix64(seed: rngSeed)
    var report = FuzzReport()
    for i in 0..<iterations {
        var bytes = seed
        var applied: [String] = []
        var blind = 1 + rng.below(3)
        if !fields.isEmpty, rng.below(3) == 0 {
            applied.append(mutateField(&bytes, fields, &rng))
            blind = rng.below(2)
        }
        for _ in 0..<blind { applied.append(mutate(&bytes, &rng)) }
        switch parseHeader(bytes, fileSize: fileSize) {
        case .success(let h):
            report.valid += 1
            let v = invariantViolations(h, fileSize: fileSize)
            if !v.isEmpty, report.violations.count < 10 {
                report.violations.append("iteration \(i) (\(applied.joined(separator: ", "))): \(v.prefix(3).joined(separator: "; "))")
            }
        case .failure(let e):
            let description = String(describing: e)
            let kind = String(description.prefix { $0 != "(" })
            report.errors[kind, default: 0] += 1
            if e.errorDescription?.isEmpty != false { report.emptyMessages += 1 }
        }
    }
    return report
}

/// Shrinks a real header: the same metadata with big arrays cut to their first 64 entries,
/// and the same tensor directory with the same data-relative offsets.
private func shrunkHeader(of file: GGUFFile) -> GGUFBuilder {
    var w = GGUFBuilder(version: file.version)
    w.alignment = file.alignment
    for key in file.keys {
        var value = file.metadata[key]!
        if case .array(let items) = value, items.count > 64 { value = .array(Array(items.prefix(64))) }
        w.add(key, value)
    }
    for t in file.tensors {
        w.addTensor(.init(t.name, dims: t.dimensions.map { UInt64($0) }, type: t.type,
                          offset: UInt64(t.fileOffset - file.dataOffset), data: []))
    }
    return w
}

@Suite("GGUF reader: fuzzing")
struct GGUFFuzzTests {
    @Test("mutated and truncated SmolLM2 headers: always a typed error or a valid model",
          .enabled(if: smolLM2Path != nil, "SmolLM2-135M-Instruct is not in the model cache (run `plinth models fetch`)"))
    func fuzzRealHeader() throws {
        let file = try GGUFFile(url: try #require(smolLM2Path))
        let fileSize = file.mapping.count
        let w = shrunkHeader(of: file)
        let (header, fields) = w.headerWithFields()
        #expect(header == w.header())
        #expect(header.count < 32 * 1024, "the shrunk header should be small (\(header.count) bytes)")

        // Unmutated, the shrunk header describes the same tensors as the real file.
        let clean = try parseHeader(header, fileSize: fileSize).get()
        #expect(clean.keys == file.keys)
        #expect(clean.tensors.count == file.tensors.count)
        for (a, b) in zip(clean.tensors, file.tensors) {
            #expect(a.name == b.name && a.dimensions == b.dimensions && a.type == b.type && a.byteCount == b.byteCount)
            #expect(a.fileOffset - clean.dataOffset == b.fileOffset - file.dataOffset)
        }
        #expect(invariantViolations(clean, fileSize: fileSize).isEmpty)

        let clock = ContinuousClock()
        let start = clock.now
        let report = fuzz(header, fields: fields, fileSize: fileSize, iterations: 6000, rngSeed: 0x5EED_0001)
        print("GGUF fuzz (SmolLM2 header, \(header.count) bytes, 6000 mutations, \(clock.now - start)): \(report.summary)")
        #expect(report.valid + report.thrown == 6000)
        #expect(report.valid >= 1, "no mutation produced a valid header: the fuzz is not reaching the validation")
        #expect(report.thrown >= 1)
        #expect(report.emptyMessages == 0)
        #expect(report.violations.isEmpty, "\(report.violations)")
    }

    @Test("mutated and truncated synthetic every-type headers: always a typed error or a valid model")
    func fuzzSyntheticHeader() throws {
        let w = everyTypeWriter()
        let bytes = w.bytes()
        let fields = w.headerWithFields().fields
        let fileSize = bytes.count
        #expect(invariantViolations(try parseHeader(bytes, fileSize: fileSize).get(), fileSize: fileSize).isEmpty)

        let clock = ContinuousClock()
        let start = clock.now
        let report = fuzz(bytes, fields: fields, fileSize: fileSize, iterations: 5000, rngSeed: 0x5EED_0002)
        print("GGUF fuzz (synthetic every-type file, \(bytes.count) bytes, 5000 mutations, \(clock.now - start)): \(report.summary)")
        #expect(report.valid + report.thrown == 5000)
        #expect(report.valid >= 1, "no mutation produced a valid header: the fuzz is not reaching the validation")
        #expect(report.thrown >= 1)
        #expect(report.emptyMessages == 0)
        #expect(report.violations.isEmpty, "\(report.violations)")
    }

    @Test("mutated files on disk open or fail with a typed error")
    func fuzzThroughFiles() throws {
        // The mapped path (MappedFile + GGUFFile.init) on a few hundred mutated files.
        let seed = smallValidWriter().bytes()
        var rng = SplitMix64(seed: 0x5EED_0003)
        var opened = 0, failed = 0
        for _ in 0..<300 {
            var bytes = seed
            for _ in 0...rng.below(2) { mutate(&bytes, &rng) }
            switch try openGGUF(bytes) {
            case .success(let f):
                opened += 1
                let h = GGUFHeader(version: f.version, keys: f.keys, metadata: f.metadata, tensors: f.tensors,
                                   alignment: f.alignment, dataOffset: f.dataOffset)
                #expect(invariantViolations(h, fileSize: bytes.count).isEmpty)
                for t in f.tensors {
                    // Touch the first and last byte of every accepted tensor through the mapping.
                    let p = f.data(of: t)
                    _ = p.load(as: UInt8.self) &+ p.load(fromByteOffset: t.byteCount - 1, as: UInt8.self)
                }
            case .failure(let e):
                failed += 1
                #expect(e.errorDescription?.isEmpty == false)
            }
        }
        print("GGUF fuzz (files on disk, 300 mutations): \(opened) opened, \(failed) typed errors")
        #expect(opened >= 1)
        #expect(failed >= 1)
    }
}
