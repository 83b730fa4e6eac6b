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
    /// What identifies this version of the file: derived data made from it records this and is
    /// remade when the file changes.
    public let identity: FileIdentity

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
        identity = FileIdentity(st)
    }

    /// Drops this process's copies of the pages of [offset, offset + length) (rounded to whole
    /// pages); they are read again from the page cache if touched later.
    public func release(offset: Int, length: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (offset + page - 1) / page * page, end = min(count, offset + length) / page * page
        guard end > start else { return }
        madvise(UnsafeMutableRawPointer(mutating: base + start), end - start, MADV_DONTNEED)
    }

    /// Asks for 2 MiB pages where the page cache holds (or, when read in, can hold) the file in
    /// such blocks: a file streamed whole on every step then costs far fewer TLB misses.
    public func adviseHugePages() {
        madvise(UnsafeMutableRawPointer(mutating: base), count, MADV_HUGEPAGE)
    }

    deinit { munmap(UnsafeMutableRawPointer(mutating: base), count) }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
}

/// Size, modification time and inode of a file: a change of any of them means a new version.
public struct FileIdentity: Sendable, Equatable {
    public var size: UInt64
    /// Nanoseconds since the epoch.
    public var modified: Int64
    public var inode: UInt64
    public var device: UInt64

    public init(size: UInt64, modified: Int64, inode: UInt64, device: UInt64) {
        (self.size, self.modified, self.inode, self.device) = (size, modified, inode, device)
    }

    init(_ st: stat) {
        self.init(size: UInt64(st.st_size), modified: Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec),
                  inode: UInt64(st.st_ino), device: UInt64(st.st_dev))
    }

    /// The identity of the file at `path` now; nil where there is none (or it cannot be read).
    public static func of(path: String) -> FileIdentity? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return FileIdentity(st)
    }
}
