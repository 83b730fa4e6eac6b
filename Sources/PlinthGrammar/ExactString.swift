/// A string as a dictionary key, compared and hashed by its UTF-8 bytes. Swift's `==` calls
/// canonically equivalent strings equal ("é" and "e\u{301}"); JSON, and so every schema, pattern,
/// literal and pointer, tells them apart. The grammar, leaf and mask caches key by this.
struct ExactString: Hashable, Sendable {
    let string: String

    init(_ string: String) { self.string = string }

    static func == (a: ExactString, b: ExactString) -> Bool { a.string.utf8.elementsEqual(b.string.utf8) }

    func hash(into hasher: inout Hasher) {
        var s = string
        s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
