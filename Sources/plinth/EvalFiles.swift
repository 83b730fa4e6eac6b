import Foundation
import PlinthGrammar
import PlinthRuntime

/// Reads a file line by line in fixed-size chunks, so a file of any size streams through in
/// the same memory. Lines are numbered from 1; a trailing `\r` is dropped.
final class LineReader {
    private let handle: FileHandle
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
        guard let handle = FileHandle(forReadingAtPath: path) else { throw CLIError("cannot read \(path)") }
        self.handle = handle
    }

    deinit { try? handle.close() }

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
            let chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            if chunk.isEmpty { atEnd = true } else { buffer.append(contentsOf: chunk) }
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

/// What made an output file: a resumed run must be the same run, and shards of one run merge.
struct EvalRunInfo: Codable, Equatable {
    var model: String
    var modelBytes: Int64
    var input: String
    /// The schema's text, for `eval report` to validate values against.
    var schema: String
    var schemaSHA256: String
    var instructionsSHA256: String
    var promptTemplate: String?
    var field: String
    var idField: String
    var labels: [String]
    var maxTokens: Int
    var sampling: String
    var includeSchemaInPrompt: Bool
    /// "K/N", or nil for the whole input.
    var shard: String?
    /// The adapter's name and SHA-256, or nil for the base model.
    var adapter: String? = nil
    /// Where the steps ran (cpu or cuda; merged shards: each one's, as "cpu+cuda"); nil in the
    /// descriptions of runs made before it was recorded.
    var backend: String? = nil
    /// Set when every record of the run (or shard) is in the output.
    var finished = false
    /// Wall time of the runs that wrote the output, resumed ones added up.
    var elapsedSeconds: Double = 0

    /// The fields that differ from `other`, finished-ness aside.
    func differences(from other: EvalRunInfo) -> [String] {
        var out: [String] = []
        if model != other.model || modelBytes != other.modelBytes { out.append("model") }
        if input != other.input { out.append("input file") }
        if schemaSHA256 != other.schemaSHA256 { out.append("schema") }
        if instructionsSHA256 != other.instructionsSHA256 { out.append("instructions") }
        if promptTemplate != other.promptTemplate { out.append("prompt template") }
        if field != other.field || idField != other.idField { out.append("input fields") }
        if labels != other.labels { out.append("labels") }
        if maxTokens != other.maxTokens { out.append("max tokens") }
        if sampling != other.sampling { out.append("sampling") }
        if includeSchemaInPrompt != other.includeSchemaInPrompt { out.append("schema in prompt") }
        if shard != other.shard { out.append("shard") }
        if adapter != other.adapter { out.append("adapter") }
        // Greedy values on a GPU may differ from the CPU's at near-ties: one output, one backend.
        if let a = backend, let b = other.backend, a != b { out.append("backend") }
        return out
    }

    static func sha256(_ text: String) -> String { SHA256.hash(Data(text.utf8)) }

    static func url(for output: String) -> URL { URL(fileURLWithPath: output + ".run.json") }

    static func read(for output: String) throws -> EvalRunInfo? {
        let url = url(for: output)
        guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
        do {
            return try JSONDecoder().decode(EvalRunInfo.self, from: data)
        } catch {
            throw CLIError("\(url.path) is not an eval run description (\(error.localizedDescription)); rerun with --restart")
        }
    }

    func write(for output: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: Self.url(for: output), options: .atomic)
    }
}

/// An output JSONL file that only grows by whole lines, each written with one `write`: killed at
/// any moment, it holds whole records and at most one partial last line, which reopening
/// removes. Records are in input order, so the last whole record says where to resume.
final class EvalOutputFile {
    let path: String
    private let handle: FileHandle
    /// The input line of the last record in the file (0 when empty).
    private(set) var lastLine = 0
    private(set) var records = 0

    /// Opens `path` for appending, creating it (or emptying it, when `empty`). Lines after the
    /// last whole record (a partial line from a kill, a line that is not a record) are cut, and
    /// so are records past input line `through`.
    init(path: String, empty: Bool, through maxLine: Int = .max) throws {
        self.path = path
        let fm = FileManager.default
        if empty || !fm.fileExists(atPath: path) {
            guard fm.createFile(atPath: path, contents: nil) else { throw CLIError("cannot create \(path)") }
        }
        var keep = 0
        let reader = try LineReader(path: path)
        while let line = try reader.next() {
            guard reader.lineTerminated, let n = Self.recordLine(line), n > lastLine, n <= maxLine else { break }
            lastLine = n
            records += 1
            keep = reader.lineOffset + reader.lineLength
        }
        guard let handle = FileHandle(forUpdatingAtPath: path) else { throw CLIError("cannot write \(path)") }
        self.handle = handle
        try handle.truncate(atOffset: UInt64(keep))
        try handle.seekToEnd()
    }

    deinit { try? handle.close() }

    /// The `line` field of a record line, or nil when it is not a record.
    static func recordLine(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard case .number(let line)? = (try? JSONValue(parsing: Data(bytes)))?["line"] else { return nil }
        return Int(line)
    }

    func append(_ line: String, inputLine: Int) throws {
        precondition(inputLine > lastLine, "records must come in input order")
        try handle.write(contentsOf: Data((line + "\n").utf8))
        lastLine = inputLine
        records += 1
    }
}
