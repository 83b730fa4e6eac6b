import Foundation
import PlinthGrammar
import PlinthRuntime

/// What made an output file: a resumed run must be the same run, and shards of one run merge.
struct EvalRunInfo: Codable, Equatable {
    var model: String
    var modelBytes: Int64
    var input: String
    /// The input file's SHA-256: a run resumed on an input that changed would pair records with
    /// the wrong lines. Nil in descriptions made before it was recorded.
    var inputSHA256: String? = nil
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
    /// The context the records had (which of them fit); nil in descriptions made before it was recorded.
    var contextLength: Int? = nil
    /// Set when every record of the run (or shard) is in the output.
    var finished = false
    /// The records in the output once finished: a merge checks that each shard still holds them.
    var records: Int? = nil
    /// Wall time of the runs that wrote the output, resumed ones added up.
    var elapsedSeconds: Double = 0

    /// The fields that differ from `other`, finished-ness aside.
    func differences(from other: EvalRunInfo) -> [String] {
        var out: [String] = []
        if model != other.model || modelBytes != other.modelBytes { out.append("model") }
        if input != other.input { out.append("input file") }
        if let a = inputSHA256, let b = other.inputSHA256, a != b { out.append("input file's contents (it changed since)") }
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
        if let a = contextLength, let b = other.contextLength, a != b { out.append("context") }
        return out
    }

    static func sha256(_ text: String) -> String { SHA256.hash(Data(text.utf8)) }

    static func url(for output: String) -> URL { URL(fileURLWithPath: output + ".run.json") }

    /// The description of `output`, nil when it has none; `remedy` says what a damaged one
    /// leaves the user to do (the command's own way out).
    static func read(for output: String, remedy: String = "rerun with --restart") throws -> EvalRunInfo? {
        let url = url(for: output)
        guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
        do {
            return try JSONDecoder().decode(EvalRunInfo.self, from: data)
        } catch {
            throw CLIError("\(url.path) is not an eval run description (\(Self.describe(decoding: error))): \(remedy)")
        }
    }

    /// What is wrong in a damaged description, by key (the decoder's own text names none).
    static func describe(decoding error: any Error) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error as? DecodingError {
        case .keyNotFound(let key, _)?: return "it has no \"\(key.stringValue)\""
        case .typeMismatch(_, let c)?, .valueNotFound(_, let c)?: return "\"\(path(c))\" is not what it should be: \(c.debugDescription)"
        case .dataCorrupted(let c)?: return c.codingPath.isEmpty ? "it is not JSON" : "\"\(path(c))\": \(c.debugDescription)"
        default: return error.localizedDescription
        }
    }

    func write(for output: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try FileChecks.writing(Self.url(for: output).path) { try encoder.encode(self).write(to: Self.url(for: output), options: .atomic) }
    }
}

/// Checks on the paths a command reads and writes, made before it reads or writes anything.
enum FileChecks {
    /// Throws unless `path` can be read as a file: a directory is refused, and unless `once`, a
    /// pipe or a device too (eval reads its input more than once: to count, to run, to resume).
    static func requireReadable(_ path: String, what: String, once: Bool = true) throws {
        let name = "the \(what) \(path)"
        guard let kind = kind(path) else { throw CLIError("cannot read \(name): \(String(cString: strerror(errno)))") }
        switch kind {
        case .file: return
        case .directory: throw CLIError("\(name) is a directory, not a file")
        case .other:
            if once { return }
            throw CLIError("\(name) is not a regular file (a pipe or a device): give a file, which can be read again to resume")
        }
    }

    /// The UTF-8 text of a file read once to its end (`-`: standard input): a pipe (/dev/stdin,
    /// <(…)) reads as a file does.
    static func readText(_ path: String, what: String) throws -> String {
        let data: Data
        if path == "-" {
            do { data = try FileHandle.standardInput.readToEnd() ?? Data() } catch {
                throw CLIError("cannot read standard input: \(FileErrors.reason(error))")
            }
        } else {
            try requireReadable(path, what: what)
            do {
                let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
                defer { try? handle.close() }
                data = try handle.readToEnd() ?? Data()
            } catch {
                throw CLIError("cannot read the \(what) \(path): \(FileErrors.reason(error))")
            }
        }
        return try Tokenizer.validatedText([UInt8](data))
    }

    private enum Kind { case file, directory, other }

    /// What `path` leads to (links followed); nil where nothing is (`errno` says why).
    private static func kind(_ path: String) -> Kind? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        switch st.st_mode & S_IFMT {
        case S_IFREG: return .file
        case S_IFDIR: return .directory
        default: return .other
        }
    }

    /// Throws unless `path` can be created or replaced by a file: its folder exists and can be
    /// written in, and it is not a directory, nor a device or a pipe unless `streams` (a file
    /// written in one go, such as a summary to /dev/stdout). Commands check before their work,
    /// not after it.
    static func requireWritable(_ path: String, what: String, streams: Bool = false) throws {
        switch kind(path) {
        case .file?, nil: break
        case .directory?: throw CLIError("the \(what) \(path) is a directory")
        case .other?:
            if streams { return }
            throw CLIError("the \(what) \(path) is not a regular file (a device, a pipe or a socket)")
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CLIError("the folder of the \(what) \(path) does not exist")
        }
        guard access(folder, W_OK) == 0 else {
            throw CLIError("cannot write the \(what) \(path): its folder \(folder): \(String(cString: strerror(errno)))")
        }
    }

    /// Runs a write, its failure said as what failed and why ("cannot write X: No space left on
    /// device"), not as Foundation's error dump.
    static func writing<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            throw CLIError("cannot write \(path): \(FileErrors.reason(error))")
        }
    }

    /// Whether two paths name one file: the same existing file (links included), or the same
    /// path once made absolute, for files not made yet.
    static func sameFile(_ a: String, _ b: String) -> Bool {
        var x = stat(), y = stat()
        if stat(a, &x) == 0, stat(b, &y) == 0 { return x.st_dev == y.st_dev && x.st_ino == y.st_ino }
        func absolute(_ p: String) -> String { URL(fileURLWithPath: p).standardizedFileURL.resolvingSymlinksInPath().path }
        return absolute(a) == absolute(b)
    }

    /// Throws if a file the command writes is one it reads, or one it also writes otherwise.
    static func requireDistinct(writes: [(path: String, what: String)], reads: [(path: String, what: String)] = []) throws {
        for (i, w) in writes.enumerated() {
            for r in reads where sameFile(w.path, r.path) {
                throw CLIError("the \(w.what) \(w.path) is the \(r.what) \(r.path): writing it would destroy what is read")
            }
            for other in writes[(i + 1)...] where sameFile(w.path, other.path) {
                throw CLIError("the \(w.what) \(w.path) is also the \(other.what): one would overwrite the other")
            }
        }
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
    /// so are records past input line `through`. With `exclusive` the file is locked first
    /// (`flock`, held while open): a second run on the same output is refused before it
    /// changes anything.
    init(path: String, empty: Bool, through maxLine: Int = .max, exclusive: Bool = false) throws {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))") }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        if exclusive { try Self.lock(fd, path) }
        self.handle = handle
        if empty { try handle.truncate(atOffset: 0) }
        let scan = try Self.scan(path, through: maxLine)
        lastLine = scan.lines.last ?? 0
        records = scan.lines.count
        try handle.truncate(atOffset: UInt64(scan.keep))
        try handle.seekToEnd()
    }

    deinit { try? handle.close() }

    /// Takes the lock a run holds on its output while it writes (`flock`, released with the file).
    static func lock(_ fd: Int32, _ path: String) throws {
        guard flock(fd, LOCK_EX | LOCK_NB) != 0 else { return }
        if errno == EWOULDBLOCK {
            throw CLIError("\(path) is being written by another plinth eval (it holds the file's lock); wait for it to end, or choose another output")
        }
        throw CLIError("cannot lock \(path) (\(String(cString: strerror(errno)))): its file system may not support locks; choose an output on a local disk")
    }

    /// The input lines of the records at the start of the file, in order, and the bytes they
    /// take: reading stops at a partial line, a line that is not a record, a record out of
    /// order or one past `maxLine`.
    static func scan(_ path: String, through maxLine: Int = .max) throws -> (lines: [Int], keep: Int) {
        var lines: [Int] = []
        var keep = 0
        let reader = try LineReader(path: path)
        while let line = try reader.next() {
            guard reader.lineTerminated, let n = recordLine(line), n > lines.last ?? 0, n <= maxLine else { break }
            lines.append(n)
            keep = reader.lineOffset + reader.lineLength
        }
        return (lines, keep)
    }

    /// The `line` field of a record line, or nil when it is not a record.
    static func recordLine(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard case .number(let line)? = (try? JSONValue(parsing: Data(bytes)))?["line"] else { return nil }
        return Int(line)
    }

    func append(_ line: String, inputLine: Int) throws {
        precondition(inputLine > lastLine, "records must come in input order")
        try FileChecks.writing(path) { try handle.write(contentsOf: Data((line + "\n").utf8)) }
        lastLine = inputLine
        records += 1
    }
}
