import Foundation
import Testing

@testable import PlinthRuntime

/// SHA-256 against the FIPS 180-4 examples and digests computed with Python's hashlib.
struct SHA256Tests {
    @Test("Known test vectors", arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
    ])
    func vectors(message: String, digest: String) {
        #expect(SHA256.hash(Array(message.utf8)) == digest)
    }

    @Test("One million 'a'")
    func millionA() {
        #expect(SHA256.hash([UInt8](repeating: 0x61, count: 1_000_000))
            == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Lengths around the 55/56/64-byte padding boundaries.
    @Test("Padding boundaries", arguments: [
        (55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"),
        (56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"),
        (63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"),
        (64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"),
        (65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"),
        (119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"),
        (120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"),
        (128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e"),
    ])
    func boundaries(length: Int, digest: String) {
        #expect(SHA256.hash([UInt8](repeating: 0x61, count: length)) == digest)
    }

    static let pattern: [UInt8] = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    static let patternDigest = "731620161155f68e1209f22bc34a726bf5a583f40acf23ae55684b674fdbebf2"

    @Test("Streaming in uneven chunks gives the one-shot digest")
    func streaming() {
        #expect(SHA256.hash(Self.pattern) == Self.patternDigest)
        for chunkSizes in [[1], [63], [64], [65], [7, 130, 1, 64, 999], [4096]] {
            var hasher = SHA256()
            var offset = 0
            var i = 0
            while offset < Self.pattern.count {
                let n = min(chunkSizes[i % chunkSizes.count], Self.pattern.count - offset)
                hasher.update(Self.pattern[offset..<offset + n].withUnsafeBytes { Array($0) })
                offset += n
                i += 1
            }
            #expect(hasher.finalize() == Self.patternDigest, "chunks \(chunkSizes)")
        }
    }

    @Test("Finalizing leaves the hasher usable")
    func finalizeIsNonDestructive() {
        var hasher = SHA256()
        hasher.update(Array("ab".utf8))
        _ = hasher.finalize()
        hasher.update(Array("c".utf8))
        #expect(hasher.finalize() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hasher.finalizeBytes().count == 32)
        #expect(hasher.finalizeBytes().first == 0xba)
    }

    @Test("Hashing a file")
    func file() throws {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("plinth-sha256-\(UUID().uuidString).bin")
        try Data(Self.pattern).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        #expect(try SHA256.hash(fileAt: url) == Self.patternDigest)
    }
}
