import Foundation

/// A streaming SHA-256 hasher (FIPS 180-4).
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
public struct SHA256: Sendable {
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19)
    /// Bytes of a partial block waiting for more input (fewer than 64).
    private var pending: [UInt8] = []
    /// Total bytes fed so far.
    private var length: UInt64 = 0

    /// Creates a hasher for an empty message.
    public init() {
        pending.reserveCapacity(64)
    }

    /// Adds the bytes of `buffer` to the message.
    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        length &+= UInt64(buffer.count)
        var offset = 0
        if !pending.isEmpty {
            let take = min(64 - pending.count, buffer.count)
            pending.append(contentsOf: UnsafeRawBufferPointer(start: base, count: take))
            offset = take
            guard pending.count == 64 else { return }
            pending.withUnsafeBytes { Self.compress(&state, $0.baseAddress!, blocks: 1) }
            pending.removeAll(keepingCapacity: true)
        }
        let blocks = (buffer.count - offset) / 64
        if blocks > 0 {
            Self.compress(&state, base + offset, blocks: blocks)
            offset += blocks * 64
        }
        if offset < buffer.count {
            pending.append(contentsOf: UnsafeRawBufferPointer(start: base + offset, count: buffer.count - offset))
        }
    }

    /// Adds `bytes` (an array, `Data`, a buffer, ...) to the message.
    public mutating func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything fed so far, as 32 bytes.
    public func finalizeBytes() -> [UInt8] {
        var copy = self
        var tail: [UInt8] = [0x80]
        let padding = (55 &- Int(length % 64) + 64) % 64  // zeros so the length ends a block
        tail.append(contentsOf: repeatElement(0, count: padding))
        let bits = length &* 8
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        let savedLength = copy.length
        copy.update(tail)
        copy.length = savedLength
        precondition(copy.pending.isEmpty)
        let s = copy.state
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in [s.0, s.1, s.2, s.3, s.4, s.5, s.6, s.7] {
            out.append(UInt8(truncatingIfNeeded: word >> 24))
            out.append(UInt8(truncatingIfNeeded: word >> 16))
            out.append(UInt8(truncatingIfNeeded: word >> 8))
            out.append(UInt8(truncatingIfNeeded: word))
        }
        return out
    }

    /// The digest of everything fed so far, as 64 lowercase hexadecimal digits.
    public func finalize() -> String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
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

    // MARK: - Compression function

    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]


    // Rotations and shifts are spelled with the masking operators (&>>, &<<): they compile to
    // single instructions even in debug builds, where the generic `>>` is a slow call.

    /// Runs the compression function over `blocks` consecutive 64-byte blocks at `data`.
    private static func compress(
        _ state: inout (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32),
        _ data: UnsafeRawPointer, blocks: Int
    ) {
        k.withUnsafeBufferPointer { kp in
            let k = kp.baseAddress!
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { wb in
                let w = wb.baseAddress!
                var (h0, h1, h2, h3, h4, h5, h6, h7) = state
                for block in 0..<blocks {
                    let p = data + block * 64
                    for t in 0..<16 {
                        w[t] = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: t * 4, as: UInt32.self))
                    }
                    for t in 16..<64 {
                        let a = w[t - 15], b = w[t - 2]
                        let s0 = ((a &>> 7) | (a &<< 25)) ^ ((a &>> 18) | (a &<< 14)) ^ (a &>> 3)
                        let s1 = ((b &>> 17) | (b &<< 15)) ^ ((b &>> 19) | (b &<< 13)) ^ (b &>> 10)
                        w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                    }
                    var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                    for t in 0..<64 {
                        let s1 = ((e &>> 6) | (e &<< 26)) ^ ((e &>> 11) | (e &<< 21)) ^ ((e &>> 25) | (e &<< 7))
                        let ch = (e & f) ^ (~e & g)
                        let t1 = h &+ s1 &+ ch &+ k[t] &+ w[t]
                        let s0 = ((a &>> 2) | (a &<< 30)) ^ ((a &>> 13) | (a &<< 19)) ^ ((a &>> 22) | (a &<< 10))
                        let maj = (a & b) ^ (a & c) ^ (b & c)
                        let t2 = s0 &+ maj
                        h = g; g = f; f = e; e = d &+ t1
                        d = c; c = b; b = a; a = t1 &+ t2
                    }
                    h0 &+= a; h1 &+= b; h2 &+= c; h3 &+= d
                    h4 &+= e; h5 &+= f; h6 &+= g; h7 &+= h
                }
                state = (h0, h1, h2, h3, h4, h5, h6, h7)
            }
        }
    }
}
