import Foundation
@testable import PlinthRuntime
import Testing

/// The file of a base model's log-probabilities: written through a partial file, read back, and
/// refused when its length is not the one its header implies.
struct LogProbabilityFileTests {
    static func write(to url: URL) throws -> [UInt16] {
        let header = LogProbabilityFile.Header(context: 8, vocabularySize: 5, chunkCount: 2, tokens: (0..<16).map { Int32($0 % 5) })
        let writer = try LogProbabilityFile.Writer(url: url, header: header)
        let words = LogProbabilityFile.scoredPositions(context: 8) * LogProbabilityFile.recordWords(vocabularySize: 5)
        let records = (0..<words).map { UInt16($0 * 7 % 65_536) }
        try writer.append(records)
        try writer.append(records.reversed())
        #expect(!FileManager.default.fileExists(atPath: url.path), "the file appears only when finished")
        try writer.finish()
        return records
    }

    @Test func aFileReadsBackAndAnEditedHeaderIsRefused() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-kld-\(UUID().uuidString).bin")
        defer { try? FileManager.default.removeItem(at: url) }
        let records = try Self.write(to: url)
        let reader = try LogProbabilityFile.Reader(url: url)
        #expect(reader.header.context == 8 && reader.header.chunkCount == 2)
        #expect(try reader.nextChunk() == records)
        #expect(try reader.nextChunk() == records.reversed())

        // The context field edited from 8 to 7: the tokens and records no longer line up.
        var bytes = try Data(contentsOf: url)
        bytes[8] = 7
        try bytes.write(to: url)
        #expect {
            _ = try LogProbabilityFile.Reader(url: url)
        } throws: { error in
            guard case PerplexityError.malformedLogProbabilityFile(_, let reason) = error else { return false }
            return reason.contains("bytes")
        }
        // A file cut short is refused the same way, before any chunk is read.
        bytes[8] = 8
        try bytes.prefix(bytes.count - 2).write(to: url)
        #expect(throws: PerplexityError.self) { _ = try LogProbabilityFile.Reader(url: url) }
    }
}
