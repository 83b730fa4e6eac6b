import Foundation

/// A file written under a new name beside it (`NAME.XXXXXX.partial`) and renamed to `NAME` only
/// when complete, so that a failed or killed writer never leaves a truncated file under the real
/// name, nor loses the old one. The partial name is made unique and created exclusively: no
/// existing file (an input named `NAME.partial` among them) is ever written over. A destination
/// that is a directory is refused before anything is written (replacing it would delete
/// everything in it).
package final class PartialFile {
    package struct Failure: Error {
        package let reason: String
    }

    package let url: URL
    package let partial: URL
    private let handle: FileHandle
    private var committed = false

    package init(_ url: URL) throws(Failure) {
        // A link is written through: its target is replaced, the link kept.
        let url = url.resolvingSymlinksInPath()
        self.url = url
        var st = stat()
        if lstat(url.path, &st) == 0 {
            switch st.st_mode & S_IFMT {
            case S_IFREG: break
            case S_IFDIR: throw Failure(reason: "it is a directory")
            // Renaming over a device or a pipe would replace it (/dev/null with a file).
            default: throw Failure(reason: "it is not a regular file (a device, a pipe or a socket)")
            }
        }
        var template = Array((url.path + ".XXXXXX.partial").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemps($0.baseAddress!, Int32(".partial".utf8.count)) }
        guard fd >= 0 else { throw Failure(reason: "cannot create a file beside it: \(String(cString: strerror(errno)))") }
        // mkstemps makes the file private (0600); the finished file gets the usual mode.
        let mask = umask(0)
        umask(mask)
        fchmod(fd, 0o666 & ~mask)
        partial = URL(fileURLWithPath: String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
        handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    deinit {
        try? handle.close()
        if !committed { try? FileManager.default.removeItem(at: partial) }
    }

    package func write(_ data: Data) throws(Failure) {
        do { try handle.write(contentsOf: data) } catch { throw Failure(reason: error.localizedDescription) }
    }

    /// Puts the finished file under its name: one `rename`, which replaces an old file at once
    /// and fails on a directory.
    package func commit() throws(Failure) {
        do { try handle.close() } catch { throw Failure(reason: error.localizedDescription) }
        guard rename(partial.path, url.path) == 0 else { throw Failure(reason: String(cString: strerror(errno))) }
        committed = true
    }
}
