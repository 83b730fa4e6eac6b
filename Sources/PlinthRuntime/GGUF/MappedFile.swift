import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A read-only memory map of a whole file. Weights are read straight from it; nothing is copied.
///
/// The mapping is `PROT_READ` and lives as long as this object, so sharing it across threads is
/// safe even though it holds a raw pointer.
public final class MappedFile: @unchecked Sendable {
    public let url: URL
    public let base: UnsafeRawPointer
    public let count: Int

    public init(url: URL) throws(GGUFError) {
        self.url = url
        // O_NONBLOCK: opening a FIFO must not hang before the regular-file check below.
        let fd = open(url.path, O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else {
            let e = errno
            if e == ENOENT { throw .fileNotFound(url.path) }
            throw .cannotOpen(url.path, String(cString: strerror(e)))
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .cannotOpen(url.path, String(cString: strerror(errno))) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw .cannotOpen(url.path, "not a regular file") }
        let size = Int(st.st_size)
        guard size > 0 else { throw .truncated(offset: 0, reading: "the header (file is empty)") }
        guard let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), p != MAP_FAILED else {
            throw .cannotOpen(url.path, "mmap failed: \(String(cString: strerror(errno)))")
        }
        self.base = UnsafeRawPointer(p)
        self.count = size
    }

    deinit { munmap(UnsafeMutableRawPointer(mutating: base), count) }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
}
