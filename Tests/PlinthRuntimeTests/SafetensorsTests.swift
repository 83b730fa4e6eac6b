import Foundation
import Testing

@testable import PlinthRuntime

/// Builds safetensors bytes: the header JSON as given (so tests can break it), then the data.
func safetensorsBytes(header: String, data: [UInt8]) -> [UInt8] {
    let h = Array(header.utf8)
    var out: [UInt8] = []
    withUnsafeBytes(of: UInt64(h.count).littleEndian) { out += $0 }
    return out + h + data
}

/// A well-formed file: two F32 tensors, one F16 and one BF16, with metadata.
func sampleSafetensors() -> (bytes: [UInt8], values: [String: [Float]]) {
    let a: [Float] = [1, -2, 3.5, 0.25, 8, -0.125]
    let b: [Float] = [0.5, 1.5]
    let half: [UInt16] = [0x3C00, 0xC000, 0x3800]  // 1, -2, 0.5
    let brain: [UInt16] = [0x3F80, 0x4040]  // 1, 3
    var data: [UInt8] = []
    for v in a { withUnsafeBytes(of: v.bitPattern.littleEndian) { data += $0 } }
    for v in b { withUnsafeBytes(of: v.bitPattern.littleEndian) { data += $0 } }
    for v in half { withUnsafeBytes(of: v.littleEndian) { data += $0 } }
    for v in brain { withUnsafeBytes(of: v.littleEndian) { data += $0 } }
    let header = """
    {"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},\
    "b":{"dtype":"F32","shape":[2],"data_offsets":[24,32]},"h":{"dtype":"F16","shape":[3],"data_offsets":[32,38]},\
    "bf":{"dtype":"BF16","shape":[1,2],"data_offsets":[38,42]}}
    """
    return (safetensorsBytes(header: header, data: data), ["a": a, "b": b, "h": [1, -2, 0.5], "bf": [1, 3]])
}

private func parse(_ bytes: [UInt8]) throws(SafetensorsError) -> [SafetensorsTensor] {
    let result = bytes.withUnsafeBytes { b in Result { () throws(SafetensorsError) in try SafetensorsFile.parse(b).tensors } }
    return try result.get()
}

@Suite("safetensors reader")
struct SafetensorsTests {
    @Test func readsTensorsAndMetadata() throws {
        let sample = sampleSafetensors()
        try withTemporaryFile(sample.bytes) { url in
            let f = try SafetensorsFile(url: url)
            #expect(f.metadata == ["format": "pt"])
            #expect(f.tensors.map(\.name) == ["a", "b", "h", "bf"])
            #expect(f.tensor(named: "a")?.shape == [2, 3])
            for (name, expected) in sample.values {
                #expect(try f.floats(try #require(f.tensor(named: name))) == expected, "\(name)")
            }
        }
    }

    @Test func malformedFilesGiveTypedErrors() throws {
        let f32 = [UInt8](repeating: 0, count: 8)
        let cases: [(String, [UInt8], (SafetensorsError) -> Bool)] = [
            ("empty", [], { if case .truncated = $0 { true } else { false } }),
            ("short length", [1, 2, 3], { if case .truncated = $0 { true } else { false } }),
            ("huge header", [0, 0, 0, 0, 0, 0, 0, 0x7f], { if case .headerTooLarge = $0 { true } else { false } }),
            ("header past the end", Array(safetensorsBytes(header: "{}", data: []).dropLast(1)), { if case .truncated = $0 { true } else { false } }),
            ("not JSON", safetensorsBytes(header: "{\"a\":", data: []), { if case .badHeader = $0 { true } else { false } }),
            ("not an object", safetensorsBytes(header: "[1]", data: []), { if case .badHeader = $0 { true } else { false } }),
            ("bad metadata", safetensorsBytes(header: #"{"__metadata__":{"k":1}}"#, data: []), { if case .badHeader = $0 { true } else { false } }),
            ("unknown dtype", safetensorsBytes(header: #"{"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}"#, data: f32),
             { if case .unknownDType(tensor: "a", "F12") = $0 { true } else { false } }),
            ("no shape", safetensorsBytes(header: #"{"a":{"dtype":"F32","data_offsets":[0,8]}}"#, data: f32),
             { if case .badEntry(tensor: "a", _) = $0 { true } else { false } }),
            ("negative dim", safetensorsBytes(header: #"{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}"#, data: f32),
             { if case .badEntry(tensor: "a", _) = $0 { true } else { false } }),
            ("size mismatch", safetensorsBytes(header: #"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, data: f32),
             { if case .sizeMismatch(tensor: "a", expected: 12, found: 8) = $0 { true } else { false } }),
            ("out of bounds", safetensorsBytes(header: #"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#, data: f32),
             { if case .outOfBounds(tensor: "a", end: 16, dataBytes: 8) = $0 { true } else { false } }),
            ("reversed offsets", safetensorsBytes(header: #"{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}"#, data: f32),
             { if case .badEntry(tensor: "a", _) = $0 { true } else { false } }),
            ("overlap", safetensorsBytes(header: #"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#, data: f32),
             { if case .overlappingTensors("a", "b") = $0 { true } else { false } }),
            ("huge shape", safetensorsBytes(header: #"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#, data: f32),
             { if case .sizeMismatch(tensor: "a", expected: nil, found: _) = $0 { true } else { false } }),
        ]
        for (name, bytes, matches) in cases {
            do {
                _ = try parse(bytes)
                Issue.record("\(name): parsed")
            } catch {
                #expect(matches(error), "\(name): \(error)")
                #expect(error.errorDescription?.isEmpty == false)
            }
        }
    }

    @Test func integerTensorsAreNotFloats() throws {
        let bytes = safetensorsBytes(header: #"{"i":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}"#, data: [UInt8](repeating: 1, count: 8))
        try withTemporaryFile(bytes) { url in
            let f = try SafetensorsFile(url: url)
            let e = caughtError(SafetensorsError.self) { _ = try f.floats(f.tensors[0]) }
            #expect(e == .notFloat(tensor: "i", dtype: "I32"))
        }
    }

    /// Blind mutations of a valid file: each parses, or fails with a typed error; a parse that
    /// succeeds keeps every tensor inside the data and apart from the others.
    @Test func fuzzedHeaders() throws {
        let seed = sampleSafetensors().bytes
        var rng = SplitMix64(seed: 0x5AFE_7E45)
        var valid = 0, errors: [String: Int] = [:]
        let jsonBytes = Array("{}[]\":,0123456789-eE.".utf8)
        for _ in 0..<20000 {
            var b = seed
            for _ in 0..<(1 + rng.below(3)) {
                switch rng.below(5) {
                case 0: b[rng.below(b.count)] = UInt8(truncatingIfNeeded: rng.next())
                case 1: b[8 + rng.below(b.count - 8)] = jsonBytes[rng.below(jsonBytes.count)]
                case 2: b.removeLast(rng.below(min(16, b.count)))
                case 3: if b.count > 9 { b.remove(at: 8 + rng.below(b.count - 8)) }
                default: b.insert(UInt8(truncatingIfNeeded: rng.next()), at: 8 + rng.below(b.count - 7))
                }
                if b.count < 1 { break }
            }
            do {
                let tensors = try parse(b)
                valid += 1
                let data = b.count - 8 - Int(b.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
                for t in tensors {
                    #expect(t.range.upperBound <= data)
                    #expect(t.byteCount == t.elementCount * t.dtype.byteSize)
                }
                for (x, y) in zip(tensors, tensors.dropFirst()) { #expect(!x.range.overlaps(y.range)) }
            } catch {
                errors[String(String(describing: error).prefix { $0 != "(" }), default: 0] += 1
            }
        }
        print("safetensors fuzz: 20000 mutations, \(valid) valid, errors \(errors.sorted { $0.key < $1.key })")
        #expect(errors.count >= 5, "the mutations should reach several kinds of error")
    }
}
