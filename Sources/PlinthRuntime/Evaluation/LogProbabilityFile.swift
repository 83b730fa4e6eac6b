import Foundation

/// llama-perplexity's file of a base model's log-probabilities (`--kl-divergence-base`), so that a
/// base written by either engine is compared by either engine.
///
/// Layout (little-endian): the 8 bytes `_logits_`; the context length as UInt32; the vocabulary
/// size and the chunk count as Int32; the tokens of every chunk as Int32 (context × chunks); then
/// per chunk, one record per scored position (the second half of the chunk but its last token):
/// ``recordWords(vocabularySize:)`` UInt16 words, the first four holding two Float32s (scale and
/// the smallest log-probability kept, `lo`), then per token `q` with log p ≈ scale·q + lo.
public enum LogProbabilityFile {
    static let magic = Array("_logits_".utf8)
    /// Bytes before the tokens.
    static let headerBytes = 8 + 4 + 4 + 4

    /// UInt16 words per record: the vocabulary rounded up to even, plus the two floats.
    public static func recordWords(vocabularySize: Int) -> Int { 2 * ((vocabularySize + 1) / 2) + 4 }

    /// Positions scored per chunk of `context` tokens: from `context / 2` to `context - 2` (each
    /// predicts the next token).
    public static func scoredPositions(context: Int) -> Int { context - 1 - context / 2 }

    /// The header of a file: what it was computed over.
    public struct Header: Equatable, Sendable {
        public var context: Int
        public var vocabularySize: Int
        public var chunkCount: Int
        /// context × chunkCount tokens: chunk c is `tokens[c*context ..< (c+1)*context]`.
        public var tokens: [Int32]

        public init(context: Int, vocabularySize: Int, chunkCount: Int, tokens: [Int32]) {
            self.context = context
            self.vocabularySize = vocabularySize
            self.chunkCount = chunkCount
            self.tokens = tokens
        }
    }

    /// Reads a file chunk by chunk; one record set in memory at a time.
    public final class Reader {
        public let header: Header
        private let handle: FileHandle
        private let path: String
        private var chunksRead = 0

        public init(url: URL) throws(PerplexityError) {
            path = url.path
            guard let handle = try? FileHandle(forReadingFrom: url) else { throw .cannotRead(path: url.path) }
            self.handle = handle
            let head = (try? handle.read(upToCount: headerBytes)) ?? Data()
            guard head.count == headerBytes, Array(head.prefix(8)) == magic else { throw .notALogProbabilityFile(path: path) }
            let bytes = [UInt8](head)
            let context = Int(readUInt32(bytes, at: 8))
            let vocabulary = Int(Int32(bitPattern: readUInt32(bytes, at: 12)))
            let chunks = Int(Int32(bitPattern: readUInt32(bytes, at: 16)))
            guard context >= 4, context <= 1 << 20 else {
                throw .malformedLogProbabilityFile(path: path, reason: "its context length is \(context)")
            }
            guard vocabulary > 0, vocabulary <= 1 << 24 else {
                throw .malformedLogProbabilityFile(path: path, reason: "its vocabulary size is \(vocabulary)")
            }
            guard chunks > 0, chunks <= (1 << 30) / context else {
                throw .malformedLogProbabilityFile(path: path, reason: "its chunk count is \(chunks)")
            }
            let tokenBytes = context * chunks * 4
            // The length the header implies, checked whole: a header edited or written for other
            // sizes would otherwise read as records out of step, and give numbers, not an error.
            let chunkBytes = scoredPositions(context: context) * recordWords(vocabularySize: vocabulary) * 2
            let expected = headerBytes + tokenBytes + chunks * chunkBytes
            // The open file's own length (a link's target's), where it is a file (a pipe streams).
            var st = stat()
            if fstat(handle.fileDescriptor, &st) == 0, st.st_mode & S_IFMT == S_IFREG, Int(st.st_size) != expected {
                let size = Int(st.st_size)
                if size < expected && size >= headerBytes + tokenBytes {
                    throw .truncatedLogProbabilityFile(path: path, what: "the log-probabilities of chunk \((size - headerBytes - tokenBytes) / chunkBytes + 1)")
                }
                throw .malformedLogProbabilityFile(path: path, reason: "it is \(size) bytes, where \(chunks) chunks of \(context) tokens over a vocabulary of \(vocabulary) take \(expected)")
            }
            guard let data = try? handle.read(upToCount: tokenBytes), data.count == tokenBytes else {
                throw .truncatedLogProbabilityFile(path: path, what: "the tokens of \(chunks) chunks")
            }
            let tokens = data.withUnsafeBytes { raw in (0..<context * chunks).map { raw.loadUnaligned(fromByteOffset: 4 * $0, as: Int32.self) } }
            if let bad = tokens.firstIndex(where: { $0 < 0 || Int($0) >= vocabulary }) {
                throw .malformedLogProbabilityFile(path: path, reason: "token \(bad) is \(tokens[bad]), outside its vocabulary of \(vocabulary)")
            }
            header = Header(context: context, vocabularySize: vocabulary, chunkCount: chunks, tokens: tokens)
        }

        deinit { try? handle.close() }

        /// The next chunk's records: ``scoredPositions(context:)`` × ``recordWords(vocabularySize:)`` words.
        public func nextChunk() throws(PerplexityError) -> [UInt16] {
            let words = scoredPositions(context: header.context) * recordWords(vocabularySize: header.vocabularySize)
            guard chunksRead < header.chunkCount,
                  let data = try? handle.read(upToCount: words * 2), data.count == words * 2 else {
                throw .truncatedLogProbabilityFile(path: path, what: "the log-probabilities of chunk \(chunksRead + 1)")
            }
            chunksRead += 1
            return data.withUnsafeBytes { raw in
                (0..<words).map { UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self)) }
            }
        }
    }

    /// Writes a file beside FILE (a ``PartialFile``), renamed to FILE by ``finish()`` only: a run that stops
    /// early leaves no file that looks whole.
    public final class Writer {
        private let url: URL
        private let file: PartialFile

        public init(url: URL, header: Header) throws(PerplexityError) {
            self.url = url
            do { file = try PartialFile(url) } catch { throw .cannotWrite(path: url.path, reason: error.reason) }
            var bytes = magic
            appendUInt32(&bytes, UInt32(header.context))
            appendUInt32(&bytes, UInt32(bitPattern: Int32(header.vocabularySize)))
            appendUInt32(&bytes, UInt32(bitPattern: Int32(header.chunkCount)))
            for t in header.tokens { appendUInt32(&bytes, UInt32(bitPattern: t)) }
            try write(Data(bytes))
        }

        /// Appends one chunk's records.
        public func append(_ records: [UInt16]) throws(PerplexityError) {
            try write(records.withUnsafeBufferPointer { Data(buffer: $0) })
        }

        public func finish() throws(PerplexityError) {
            do { try file.commit() } catch { throw .cannotWrite(path: url.path, reason: error.reason) }
        }

        private func write(_ data: Data) throws(PerplexityError) {
            do { try file.write(data) } catch { throw .cannotWrite(path: url.path, reason: error.reason) }
        }
    }
}

private func readUInt32(_ b: [UInt8], at i: Int) -> UInt32 {
    UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
}

private func appendUInt32(_ b: inout [UInt8], _ v: UInt32) {
    b += [UInt8(v & 0xff), UInt8(v >> 8 & 0xff), UInt8(v >> 16 & 0xff), UInt8(v >> 24)]
}

/// What went wrong measuring perplexity or divergence, naming the file or the numbers.
public enum PerplexityError: Error, LocalizedError, Equatable, Sendable {
    case textTooShort(tokens: Int, needed: Int, context: Int)
    case cannotRead(path: String)
    case cannotWrite(path: String, reason: String)
    case notALogProbabilityFile(path: String)
    case malformedLogProbabilityFile(path: String, reason: String)
    case truncatedLogProbabilityFile(path: String, what: String)
    case vocabularyMismatch(path: String, file: Int, model: Int)
    case contextTooLong(path: String, file: Int, model: Int)

    public var errorDescription: String? {
        switch self {
        case .textTooShort(let n, let needed, let c):
            "the text tokenizes to \(n) tokens; a context of \(c) needs at least \(needed)"
        case .cannotRead(let p): "cannot open \(p)"
        case .cannotWrite(let p, let why): "cannot write \(p): \(why)"
        case .notALogProbabilityFile(let p): "\(p) is not a file of log-probabilities (it does not start with _logits_)"
        case .malformedLogProbabilityFile(let p, let why): "\(p) is malformed: \(why)"
        case .truncatedLogProbabilityFile(let p, let what): "\(p) ends before \(what)"
        case .vocabularyMismatch(let p, let f, let m):
            "\(p) was computed with a vocabulary of \(f) tokens; this model has \(m)"
        case .contextTooLong(let p, let f, let m):
            "\(p) was computed with a context of \(f) tokens; this model holds at most \(m)"
        }
    }
}
