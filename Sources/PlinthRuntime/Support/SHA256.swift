import Foundation
internal import Crypto

/// A streaming SHA-256 hasher: swift-crypto's (BoringSSL, with the CPU's SHA instructions; about
/// 5× a portable implementation on a model file), with the hex digests model checksums use.
///
/// Feed bytes with ``update(_:)-(UnsafeRawBufferPointer)`` as they arrive, then read the
/// digest with ``finalize()`` (lowercase hex) or ``finalizeBytes()``. Finalizing does not
/// change the hasher, so you can keep feeding it and take another digest later.
///
/// ```swift
/// var hasher = SHA256()
/// hasher.update(Array("abc".utf8))
/// hasher.finalize()  // "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
/// ```
///
/// Use ``hash(fileAt:)`` to check a downloaded model against its published checksum.
public struct SHA256 {
    private var hasher = Crypto.SHA256()

    /// Creates a hasher for an empty message.
    public init() {}

    /// Adds the bytes of `buffer` to the message.
    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        hasher.update(bufferPointer: buffer)
    }

    /// Adds `bytes` (an array, `Data`, a buffer, ...) to the message.
    public mutating func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything fed so far, as 32 bytes.
    public func finalizeBytes() -> [UInt8] { Array(hasher.finalize()) }

    /// The digest of everything fed so far, as 64 lowercase hexadecimal digits.
    public func finalize() -> String {
        let digits = Array("0123456789abcdef".utf8)
        var chars: [UInt8] = []
        chars.reserveCapacity(64)
        for byte in finalizeBytes() {
            chars.append(digits[Int(byte >> 4)])
            chars.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: chars, as: UTF8.self)
    }

    /// The hex digest of `bytes`.
    public static func hash(_ bytes: some ContiguousBytes) -> String {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// The hex digest of the file at `url`, read in chunks (never all in memory at once).
    public static func hash(fileAt url: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 4 << 20), !chunk.isEmpty {
            hasher.update(chunk)
        }
        return hasher.finalize()
    }
}
