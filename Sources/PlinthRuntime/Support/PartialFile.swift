import Foundation

/// A file written under `NAME.partial` and renamed to `NAME` only when complete, so that a
/// failed or killed writer never leaves a truncated file under the real name, nor loses the old
/// one. A destination that is a directory is refused before anything is written (replacing it
/// would delete everything in it).
package final class PartialFile {
    package struct Failure: Error {
        package let reason: String
    }

    package let url: URL
    package let partial: URL
    private let handle: FileHandle
    private var committed = false

    package init(_ url: URL) throws(Failure) {
        self.url = url
        partial = url.appendingPathExtension("partial")
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw Failure(reason: "it is a directory")
        }
        guard FileManager.default.createFile(atPath: partial.path, contents: nil),
              let handle = try? FileHandle(forWritingTo: partial) else {
            throw Failure(reason: "cannot create \(partial.path)")
        }
        self.handle = handle
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
