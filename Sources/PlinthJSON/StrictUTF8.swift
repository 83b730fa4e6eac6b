extension String {
    /// The string these bytes encode, or nil when they are not well-formed UTF-8.
    ///
    /// `String(validating:as:)` runs the standard library's unspecialized generic validator, about
    /// a thousand instructions for a short string; a model's vocabulary has ~10^5 of them. Decoding
    /// with repair is the specialized fast path, and it changes the bytes exactly when some
    /// sequence was ill-formed, so comparing them back is the strict check.
    public init?(strictUTF8 bytes: UnsafeRawBufferPointer) {
        var ascii = true
        for b in bytes where b >= 0x80 { ascii = false; break }
        var s = String(decoding: bytes, as: UTF8.self)
        if !ascii {
            let same = s.withUTF8 { decoded in
                decoded.count == bytes.count && decoded.elementsEqual(bytes)
            }
            if !same { return nil }
        }
        self = s
    }

    /// `init?(strictUTF8:)` for bytes in an array.
    public init?(strictUTF8 bytes: [UInt8]) {
        guard let s = bytes.withUnsafeBytes({ String(strictUTF8: $0) }) else { return nil }
        self = s
    }
}
