import Foundation
import PlinthKernels
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the kernels read a model's weight matrices from.
///
/// The matrix kernels multiply sixteen weight rows at a time, side by side. Packed weights
/// (`pk_pack`) hold the same bytes already in that order, which makes decode up to ~1.4× faster
/// than shuffling rows together at every product. They live in a file of their own, made once
/// per model file (see ``WeightPackingOptions``) and memory-mapped like the model, so they cost no anonymous memory and are shared between processes.
public enum WeightPacking: Sendable, Equatable {
    /// A packed file made earlier was valid and is in use.
    case reused(URL)
    /// The packed file was made by this load.
    case created(URL)
    /// `PLINTH_PACK=0`, or no matrix has a packed form: the kernels read the model file.
    case disabled
    /// The packed file could not be made (for example, its directory is not writable): the
    /// kernels read the model file, with the same results, more slowly.
    case unavailable(String)
}

/// Whether and where a model's packed weights are kept.
public struct WeightPackingOptions: Sendable {
    public var enabled: Bool
    public var directory: URL

    public init(enabled: Bool = true, directory: URL) {
        self.enabled = enabled
        self.directory = directory
    }

    /// `$PLINTH_PACK_DIR`, else `$PLINTH_HOME/packed`; `PLINTH_PACK=0` turns packing off.
    public static var `default`: WeightPackingOptions {
        let env = ProcessInfo.processInfo.environment
        let dir = env["PLINTH_PACK_DIR"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
        return WeightPackingOptions(enabled: env["PLINTH_PACK"] != "0",
                                    directory: dir ?? ModelStore.defaultHome.appendingPathComponent("packed"))
    }
}

/// The packed copies of a model's matrices: where they came from, the mapping that holds them,
/// and each one's address by the address of its bytes in the model file.
struct PackedMatrices {
    var packing: WeightPacking
    var file: MappedFile?
    var address: [UnsafeRawPointer: UnsafeRawPointer] = [:]

    /// `w` reading its packed copy, if its bytes have one (so a tied embedding finds the output's).
    func applied(to w: WeightTensor) -> WeightTensor {
        var w = w
        w.packed = address[w.data]
        return w
    }
}

/// Finds or makes the packed file of a model's matrices.
enum WeightPacker {
    static let magic = Array("PLNTPACK".utf8)
    /// The file's own layout (the header below); the tiles' layout is PK_PACK_VERSION.
    /// 2: the model file's path follows the entries.
    static let fileFormat: UInt32 = 2

    private static let lock = NSLock()

    /// Byte offsets of the header's fixed fields (64 bytes), which ``isStale(_:)`` reads back.
    enum Field {
        static let format = 8, packVersion = 12, identity = 16, entryCount = 48, headerBytes = 52, pathBytes = 56
    }

    struct Entry {
        var type: Int32, rows: Int, columns: Int
        var source: UnsafeRawPointer
        var offset = 0, bytes = 0
    }

    /// Packs `matrices` (those sharing their bytes once). Never throws: a packed file that
    /// cannot be made leaves the kernels reading the model file.
    static func pack(_ matrices: [WeightTensor], source: MappedFile, options: WeightPackingOptions) -> PackedMatrices {
        guard options.enabled else { return PackedMatrices(packing: .disabled) }
        var entries: [Entry] = []
        var seen = Set<UnsafeRawPointer>()
        for t in matrices where !seen.contains(t.data) {
            let bytes = pk_pack_bytes(Int32(t.type.rawValue), Int64(t.rowCount), Int64(t.rowLength))
            guard bytes > 0 else { continue }
            seen.insert(t.data)
            entries.append(Entry(type: Int32(t.type.rawValue), rows: t.rowCount, columns: t.rowLength, source: t.data, bytes: bytes))
        }
        guard !entries.isEmpty else { return PackedMatrices(packing: .disabled) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        func roundUp(_ v: Int) -> Int { (v + page - 1) / page * page }
        let modelPath = source.url.resolvingSymlinksInPath().path
        let headerBytes = roundUp(64 + 40 * entries.count + modelPath.utf8.count)
        var at = headerBytes
        for i in entries.indices {
            entries[i].offset = at
            at = roundUp(at + entries[i].bytes)
        }
        let total = at
        let header = makeHeader(entries, identity: source.identity, modelPath: modelPath, headerBytes: headerBytes)
        let url = options.directory.appendingPathComponent(fileName(for: source.url))

        // Loads in one process (tests, several contexts) wait for one another rather than each
        // packing the same model; other processes at worst pack it twice, and the last rename wins.
        lock.lock()
        defer { lock.unlock() }
        var result: PackedMatrices
        if let f = mapExisting(url, expecting: header, total: total) {
            result = PackedMatrices(packing: .reused(url), file: f)
        } else {
            prune(options.directory)
            switch create(url, header: header, entries: entries, total: total) {
            case .success(let f): result = PackedMatrices(packing: .created(url), file: f)
            case .failure(let why): return PackedMatrices(packing: .unavailable(why.message))
            }
        }
        result.file!.adviseHugePages()
        for e in entries { result.address[e.source] = result.file!.base + e.offset }
        return result
    }

    /// The model file's name and a hash of its resolved path: one packed file per model file,
    /// replaced when the model file changes.
    static func fileName(for model: URL) -> String {
        let path = model.resolvingSymlinksInPath().path
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in path.utf8 { h = (h ^ UInt64(b)) &* 0x0100_0000_01b3 }
        var stem = model.deletingPathExtension().lastPathComponent
        if stem.isEmpty { stem = "model" }
        return stem + "-" + String(h, radix: 16) + ".pack"
    }

    /// Everything a valid file must agree on: formats, the model file's identity and path, and
    /// the shape and place of every packed matrix.
    static func makeHeader(_ entries: [Entry], identity: FileIdentity, modelPath: String, headerBytes: Int) -> [UInt8] {
        var h = [UInt8](repeating: 0, count: headerBytes)
        func put<T: FixedWidthInteger>(_ v: T, at o: Int) {
            withUnsafeBytes(of: v.littleEndian) { for (i, b) in $0.enumerated() { h[o + i] = b } }
        }
        for (i, b) in magic.enumerated() { h[i] = b }
        put(fileFormat, at: Field.format)
        put(UInt32(PK_PACK_VERSION), at: Field.packVersion)
        for (i, v) in [identity.size, UInt64(bitPattern: identity.modified), identity.inode, identity.device].enumerated() {
            put(v, at: Field.identity + 8 * i)
        }
        put(UInt32(entries.count), at: Field.entryCount)
        put(UInt32(headerBytes), at: Field.headerBytes)
        put(UInt32(modelPath.utf8.count), at: Field.pathBytes)
        for (i, e) in entries.enumerated() {
            let o = 64 + 40 * i
            put(UInt32(bitPattern: e.type), at: o)
            put(UInt64(e.rows), at: o + 8)
            put(UInt64(e.columns), at: o + 16)
            put(UInt64(e.offset), at: o + 24)
            put(UInt64(e.bytes), at: o + 32)
        }
        for (i, b) in modelPath.utf8.enumerated() { h[64 + 40 * entries.count + i] = b }
        return h
    }

    /// Deletes what `directory` holds that no load can use again, so that it does not grow with
    /// every model file ever loaded (a test's temporary copies, a model deleted or replaced):
    /// packed files whose model file is gone or has changed, those of an earlier format (this
    /// version remakes them), and partial files of processes no longer running. A file being
    /// deleted stays readable where it is mapped. Runs only before a packed file is made.
    static func prune(_ directory: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names {
            let path = directory.appendingPathComponent(name).path
            if name.hasPrefix("."), name.hasSuffix(".tmp") {
                // .STEM.pack.PID.RANDOM.tmp, as `create` names them; other programs' files stay.
                let parts = name.split(separator: ".")
                if parts.count >= 5, parts[parts.count - 4] == "pack", let pid = Int32(parts[parts.count - 3]),
                   kill(pid, 0) != 0, errno == ESRCH { unlink(path) }
            } else if name.hasSuffix(".pack"), isStale(path) {
                unlink(path)
            }
        }
    }

    /// Whether the packed file at `path` is of an earlier format, or records a model file that
    /// is gone or no longer the same; a file it cannot read, or of a later format, is kept.
    static func isStale(_ path: String) -> Bool {
        let fd = Glibc.open(path, O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var fixed = [UInt8](repeating: 0, count: 64)
        guard pread(fd, &fixed, 64, 0) == 64, Array(fixed.prefix(8)) == magic else { return false }
        func get<T: FixedWidthInteger>(_ o: Int, _: T.Type) -> T {
            T(littleEndian: fixed.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: o, as: T.self) })
        }
        let format = get(Field.format, UInt32.self)
        guard format == fileFormat else { return format < fileFormat }
        let pathAt = 64 + 40 * Int(get(Field.entryCount, UInt32.self)), pathBytes = Int(get(Field.pathBytes, UInt32.self))
        guard pathBytes > 0, pathBytes <= 65536 else { return false }
        var recorded = [UInt8](repeating: 0, count: pathBytes)
        guard pread(fd, &recorded, pathBytes, off_t(pathAt)) == pathBytes else { return false }
        let id = (0..<4).map { get(Field.identity + 8 * $0, UInt64.self) }
        let identity = FileIdentity(size: id[0], modified: Int64(bitPattern: id[1]), inode: id[2], device: id[3])
        return FileIdentity.of(path: String(decoding: recorded, as: UTF8.self)) != identity
    }

    /// Maps an existing file if it is exactly what this model needs.
    private static func mapExisting(_ url: URL, expecting header: [UInt8], total: Int) -> MappedFile? {
        guard let f = try? MappedFile(url: url), f.count == total, Array(f.bytes.prefix(header.count)) == header else { return nil }
        return f
    }

    struct Failure: Error { var message: String }

    /// Writes the file under a temporary name and renames it into place once it is complete and
    /// on disk, so no reader ever maps a partial file. The tiles are packed in memory and written
    /// in 2 MiB writes: the page cache keeps such writes in 2 MiB blocks, which the kernel maps
    /// with 2 MiB pages (decode streams the whole file every step; with 4 KiB pages, TLB misses
    /// cost it up to a fifth of its read bandwidth here).
    private static func create(_ url: URL, header: [UInt8], entries: [Entry], total: Int) -> Result<MappedFile, Failure> {
        let dir = url.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        } catch {
            return .failure(Failure(message: "cannot create \(dir.path): \(error.localizedDescription)"))
        }
        let tmp = dir.appendingPathComponent(".\(url.lastPathComponent).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp")
        func fail(_ what: String, _ err: Int32) -> Result<MappedFile, Failure> {
            unlink(tmp.path)
            return .failure(Failure(message: "\(what) \(tmp.path): \(String(cString: strerror(err)))"))
        }
        // Pages of a private anonymous mapping, not the heap: they go back whole at munmap.
        guard let p = mmap(nil, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), p != MAP_FAILED else {
            return fail("cannot allocate \(total) bytes to pack", errno)
        }
        defer { munmap(p, total) }
        header.withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: header.count) }
        for e in entries {
            _ = pk_pack(e.type, e.source, Int64(e.rows), Int64(e.columns), p + e.offset)
        }
        let fd = Glibc.open(tmp.path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { return fail("cannot create", errno) }
        defer { close(fd) }
        let chunk = 2 << 20
        var done = 0
        while done < total {
            let n = pwrite(fd, p + done, min(chunk, total - done), off_t(done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return fail("cannot write", n < 0 ? errno : EIO) }
            done += n
        }
        guard fsync(fd) == 0 else { return fail("cannot write", errno) }
        guard rename(tmp.path, url.path) == 0 else { return fail("cannot rename", errno) }
        do {
            return .success(try MappedFile(url: url))
        } catch {
            return .failure(Failure(message: "cannot map \(url.path): \(error)"))
        }
    }
}
