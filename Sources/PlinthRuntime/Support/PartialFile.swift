import Foundation

/// A file written under a new name beside it (`NAME.plinth-XXXXXX.partial`) and renamed to `NAME` only
/// when complete, so that a failed or killed writer never leaves a truncated file under the real
/// name, nor loses the old one. The partial name is made unique and created exclusively: no
/// existing file (an input named `NAME.partial` among them) is ever written over. A writer holds
/// a lock on its partial file; the partial files of `NAME` that no writer holds (left by one
/// that was killed) are removed when the next starts. A destination that is a directory is
/// refused before anything is written (replacing it would delete everything in it).
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
        Self.removeAbandoned(beside: url)
        // O_EXCL: a new file or none (the mode as the umask has it, as any new file's).
        var fd: Int32 = -1
        var path = ""
        for _ in 0..<100 {
            path = url.path + "." + Self.tagPrefix + Self.randomTag() + ".partial"
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw Failure(reason: "cannot create a file beside it: \(String(cString: strerror(errno)))") }
        flock(fd, LOCK_EX | LOCK_NB)
        partial = URL(fileURLWithPath: path)
        handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    /// Marks the partial files this type makes, so that no other file (a user's `NAME.backup.partial`,
    /// an input) is ever taken for an abandoned one.
    private static let tagPrefix = "plinth-"

    private static func randomTag() -> String {
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<6).map { _ in letters.randomElement()! })
    }

    /// Removes the partial files of `url` that no writer holds locked: left by killed writers.
    private static func removeAbandoned(beside url: URL) {
        let folder = url.deletingLastPathComponent().path
        let prefix = url.lastPathComponent + "." + tagPrefix
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for name in names where name.hasPrefix(prefix) && name.hasSuffix(".partial") && name.count == prefix.count + 6 + ".partial".count {
            let path = folder + "/" + name
            let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { unlink(path) }
            close(fd)
        }
    }

    deinit {
        try? handle.close()
        if !committed { try? FileManager.default.removeItem(at: partial) }
    }

    package func write(_ data: Data) throws(Failure) {
        do { try handle.write(contentsOf: data) } catch { throw Failure(reason: FileErrors.reason(error)) }
    }

    /// Puts the finished file under its name: one `rename`, which replaces an old file at once
    /// and fails on a directory.
    package func commit() throws(Failure) {
        do { try handle.close() } catch { throw Failure(reason: FileErrors.reason(error)) }
        guard rename(partial.path, url.path) == 0 else { throw Failure(reason: String(cString: strerror(errno))) }
        committed = true
    }
}
