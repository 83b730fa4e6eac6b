import Foundation

/// How much each input column of each matrix matters: the mean square of the activations that
/// meet it on a calibration text. llama.cpp's importance matrix, in its GGUF file format
/// (`general.type` "imatrix"; per matrix `NAME.in_sum2` [columns], the sums of squares, and `NAME.counts` [1],
/// the rows summed; `imatrix.datasets`, `imatrix.chunk_count`, `imatrix.chunk_size`), so that a
/// file made by either engine quantizes with either. llama-imatrix's older binary `.dat` files
/// (`--output-format dat`, and most published before 2025) are read too.
public struct ImportanceMatrix: Sendable {
    public struct Entry: Sendable, Equatable {
        public var sums: [Double]
        public var count: Int
    }

    public private(set) var entries: [String: Entry] = [:]
    public var datasets: [String] = []
    public var chunkCount = 0
    public var chunkSize = 0

    public init() {}

    /// Whether calibration statistics are collected for matrix `name`: like llama-imatrix, the
    /// transformer blocks' matrices, not the output projection.
    public static func collects(_ name: String) -> Bool { name.hasPrefix("blk.") }

    /// Adds `rows` activation rows of `width` that met the matrices `names` (those it ``collects(_:)``).
    public mutating func accumulate(_ names: [String], _ input: UnsafePointer<Float>, rows: Int, width: Int) {
        guard names.contains(where: Self.collects) else { return }
        var squares = [Double](repeating: 0, count: width)
        for r in 0..<rows {
            let row = input + r * width
            for j in 0..<width { squares[j] += Double(row[j] * row[j]) }
        }
        for name in names where Self.collects(name) {
            var e = entries[name] ?? Entry(sums: [Double](repeating: 0, count: width), count: 0)
            guard e.sums.count == width else { continue }
            for j in 0..<width { e.sums[j] += squares[j] }
            e.count += rows
            entries[name] = e
        }
    }

    /// The mean square per column of matrix `name`, or nil when it has no entry. An entry that
    /// saw no activations weighs every column 1, as llama-quantize reads it.
    public func importance(of name: String) -> [Float]? {
        guard let e = entries[name] else { return nil }
        guard e.count > 0 else { return Array(repeating: 1, count: e.sums.count) }
        return e.sums.map { Float($0 / Double(e.count)) }
    }

    public func write(to url: URL) throws {
        var tensors: [GGUFWriter.Tensor] = []
        for name in entries.keys.sorted() {
            let e = entries[name]!
            let sums = e.sums.map { Float($0) }
            tensors.append(GGUFWriter.Tensor(name: name + ".in_sum2", dimensions: [sums.count], type: .f32) { out in
                sums.withUnsafeBytes { out.copyMemory(from: $0) }
            })
            let count = [Float(e.count)]
            tensors.append(GGUFWriter.Tensor(name: name + ".counts", dimensions: [1], type: .f32) { out in
                count.withUnsafeBytes { out.copyMemory(from: $0) }
            })
        }
        try GGUFWriter(metadata: [
            ("general.type", .string("imatrix")),
            ("imatrix.datasets", .array(datasets.map { .string($0) })),
            ("imatrix.chunk_count", .uint32(UInt32(chunkCount))),
            ("imatrix.chunk_size", .uint32(UInt32(chunkSize))),
        ], tensors: tensors).write(to: url)
    }

    /// Reads an importance matrix: llama-imatrix's GGUF format (its default since 2025) or its
    /// legacy `.dat` one, told apart by the GGUF magic.
    public init(url: URL) throws {
        let head: Data
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            head = try handle.read(upToCount: 4) ?? Data()
        } catch {
            throw ImportanceMatrixError.notAnImportanceMatrix(path: url.path, reason: error.localizedDescription)
        }
        if head != Data("GGUF".utf8) {
            try self.init(legacy: url)
            return
        }
        self.init()
        let file: GGUFFile
        do { file = try GGUFFile(url: url) } catch {
            throw ImportanceMatrixError.notAnImportanceMatrix(path: url.path, reason: "\(error.localizedDescription)")
        }
        guard (try? file.string("general.type")) == "imatrix" else {
            throw ImportanceMatrixError.notAnImportanceMatrix(path: url.path, reason: "its general.type is not \"imatrix\"")
        }
        datasets = (try? file.stringArray("imatrix.datasets")) ?? []
        chunkCount = (try? file.int("imatrix.chunk_count")) ?? 0
        // Written back as a uint32 by the quantizer.
        guard (0...Int(UInt32.max)).contains(chunkCount) else {
            throw ImportanceMatrixError.notAnImportanceMatrix(path: url.path, reason: "its imatrix.chunk_count is \(chunkCount)")
        }
        chunkSize = (try? file.int("imatrix.chunk_size")) ?? 0
        for t in file.tensors where t.name.hasSuffix(".in_sum2") {
            let name = String(t.name.dropLast(".in_sum2".count))
            // ggml drops trailing sizes of 1: [columns] and [1] (one matrix; experts are not read).
            guard t.type == .f32, t.dimensions.dropFirst().allSatisfy({ $0 == 1 }),
                  let c = file.tensor(named: name + ".counts"), c.type == .f32, c.elementCount == 1 else {
                throw ImportanceMatrixError.malformed(path: url.path, entry: name)
            }
            let sums = UnsafeBufferPointer(start: file.data(of: t).assumingMemoryBound(to: Float.self), count: t.elementCount)
            let count = file.data(of: c).loadUnaligned(as: Float.self)
            // A count is a number of activations, far below 2^53 (NaN fails the comparison).
            guard count >= 0, count < 0x1p53, sums.allSatisfy({ $0 >= 0 && $0.isFinite }) else {
                throw ImportanceMatrixError.malformed(path: url.path, entry: name)
            }
            entries[name] = Entry(sums: sums.map(Double.init), count: Int(count))
        }
        guard !entries.isEmpty else { throw ImportanceMatrixError.notAnImportanceMatrix(path: url.path, reason: "it has no entries") }
    }
}

extension ImportanceMatrix {
    /// llama-imatrix's legacy binary format, little-endian: an int32 count of entries; per entry
    /// an int32 name length, the name, an int32 `ncall` (chunks), an int32 `nval` and `nval`
    /// float32s, each the column's mean square times `ncall`; then optionally the int32 chunk
    /// count and the calibration file's name (int32 length, bytes). llama-quantize divides by
    /// `ncall` (an entry with none is read as it is): here it is the entry's count.
    init(legacy url: URL) throws {
        let data: Data
        do { data = try Data(contentsOf: url, options: .mappedIfSafe) } catch {
            throw ImportanceMatrixError.notAnImportanceMatrix(path: url.path, reason: error.localizedDescription)
        }
        let bytes = [UInt8](data)
        var at = 0
        /// The little-endian word at `at`, moving past it (the caller has checked it is there).
        func word() -> UInt32 {
            defer { at += 4 }
            return UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
        }
        func int32() -> Int? { at + 4 <= bytes.count ? Int(Int32(bitPattern: word())) : nil }
        func text(_ count: Int) -> String? {
            guard count >= 0, count <= bytes.count - at else { return nil }
            defer { at += count }
            return String(validating: bytes[at..<at + count], as: UTF8.self)
        }
        let notOne = { (why: String) in ImportanceMatrixError.notAnImportanceMatrix(path: url.path, reason: why) }
        // Every entry takes at least 16 bytes, which bounds the count a file can hold.
        guard let n = int32(), n > 0, n <= (bytes.count - 4) / 16 else {
            throw notOne("it is neither GGUF nor llama-imatrix's legacy format (no entry count)")
        }
        self.init()
        for i in 0..<n {
            guard let length = int32(), length > 0, let name = text(length), !name.isEmpty else {
                throw notOne("entry \(i + 1) of \(n) has no readable name (legacy format)")
            }
            guard let ncall = int32(), let width = int32(), width > 0, width <= (bytes.count - at) / 4 else {
                throw ImportanceMatrixError.malformed(path: url.path, entry: name)
            }
            var sums = [Double](repeating: 0, count: width)
            for j in 0..<width {
                let v = Float(bitPattern: word())
                guard v >= 0, v.isFinite else { throw ImportanceMatrixError.malformed(path: url.path, entry: name) }
                sums[j] = Double(v)
            }
            guard entries[name] == nil else { throw ImportanceMatrixError.malformed(path: url.path, entry: name) }
            entries[name] = Entry(sums: sums, count: max(ncall, 1))
        }
        // The trailer, where the file has one: chunks, then the calibration file's name.
        if at < bytes.count {
            // The dataset's name is a path as the writer's system spelled it: read it lossily.
            guard let chunks = int32(), chunks >= 0, let length = int32(), length >= 0, length == bytes.count - at else {
                throw notOne("\(bytes.count - at) bytes after its entries are not a chunk count and a dataset name (legacy format)")
            }
            chunkCount = chunks
            if length > 0 { datasets = [String(decoding: bytes[at...], as: UTF8.self)] }
        }
    }
}

public enum ImportanceMatrixError: Error, LocalizedError, Equatable, Sendable {
    case notAnImportanceMatrix(path: String, reason: String)
    case malformed(path: String, entry: String)
    case wrongWidth(matrix: String, expected: Int, found: Int)

    public var errorDescription: String? {
        switch self {
        case .notAnImportanceMatrix(let p, let why): "\(p) is not an importance matrix: \(why)"
        case .malformed(let p, let e): "\(p): entry '\(e)' is malformed (expected F32 NAME.in_sum2 [columns] and NAME.counts [1] of one matrix, finite and non-negative)"
        case .wrongWidth(let m, let e, let f): "the importance matrix's entry for '\(m)' has \(f) columns; the matrix has \(e)"
        }
    }
}
