import Foundation

/// Reads a file (or standard input) line by line in fixed-size chunks, so input of any size
/// streams through in the same memory. Lines are numbered from 1; a trailing `\r` is dropped.
final class LineReader {
    /// Nil for standard input, read as it comes (a terminal's line as it is typed).
    private let handle: FileHandle?
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false
    /// The number of the line `next()` returned last.
    private(set) var lineNumber = 0
    /// Bytes before the line `next()` returned last, and that line's length with its newline.
    private(set) var lineOffset = 0
    private(set) var lineLength = 0
    /// Whether the line `next()` returned last ended with a newline (the last line may not).
    private(set) var lineTerminated = true

    init(path: String) throws {
        try FileChecks.requireReadable(path, what: "file")
        guard let handle = FileHandle(forReadingAtPath: path) else { throw CLIError("cannot read \(path)") }
        // From the start: on macOS every open of /dev/stdin shares one offset.
        try? handle.seek(toOffset: 0)
        self.handle = handle
    }

    /// Standard input.
    init() { handle = nil }

    deinit { try? handle?.close() }

    func next() throws -> ArraySlice<UInt8>? {
        while true {
            if let nl = buffer[start...].firstIndex(of: 0x0A) {
                return take(upTo: nl, terminated: true)
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                return take(upTo: buffer.count, terminated: false)
            }
            buffer.removeSubrange(..<start)
            start = 0
            let chunk = try handle.map { try $0.read(upToCount: 1 << 20) ?? Data() } ?? Self.readStandardInput()
            if chunk.isEmpty { atEnd = true } else { buffer.append(contentsOf: chunk) }
        }
    }

    /// What one read of standard input gives: a pipe's waiting bytes, a terminal's line.
    private static func readStandardInput() throws -> Data {
        var chunk = Data(count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if n >= 0 { return chunk.prefix(n) }
            if errno != EINTR { throw CLIError("cannot read standard input: \(String(cString: strerror(errno)))") }
        }
    }

    private func take(upTo end: Int, terminated: Bool) -> ArraySlice<UInt8> {
        lineNumber += 1
        lineOffset += lineLength
        lineLength = end - start + (terminated ? 1 : 0)
        lineTerminated = terminated
        var line = buffer[start..<end]
        if line.last == 0x0D { line = line.dropLast() }
        start = terminated ? end + 1 : end
        return line
    }
}
