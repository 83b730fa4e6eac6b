import Foundation
@testable import PlinthGrammar

/// Small synthetic vocabularies and helpers shared by the grammar tests.
enum TestVocab {
    /// Every single byte, plus multi-byte tokens typical of JSON output, plus EOS (last id).
    static let tokens: [[UInt8]] = {
        var t: [[UInt8]] = (0..<256).map { [UInt8($0)] }
        let extra = ["{\"", "\":", "\":\"", "\",\"", "\"}", "},", "}}", "[{", "}]", "\",", ",\"", "true", "false", "null",
                     "name", "age", "12", "00", "0.", ".5", "-1", "e+", "ab", "abc", "\\n", "\\\"", "\"a", "\":[", "],",
                     "\u{e9}", "\u{4e2d}\u{6587}", "20", "-0", "1.0", "\"\"", "[]", "{}", " \"", ": ", ", ", "\n  "]
        t += extra.map { Array($0.utf8) }
        t.append(Array("<|eos|>".utf8))
        return t
    }()
    static var eos: Int32 { Int32(tokens.count - 1) }
    static let vocabulary: TokenVocabulary = try! TokenVocabulary(tokens: tokens, endOfSequence: [eos])
    static let compiler = GrammarCompiler(vocabulary: vocabulary)

    static func grammar(_ schema: String, _ options: GrammarOptions = GrammarOptions()) throws -> CompiledGrammar {
        try compiler.compile(jsonSchema: schema, options: options)
    }

    /// Whether `text`, fed byte by byte, is accepted and complete.
    static func accepts(_ g: CompiledGrammar, _ text: String) -> Bool {
        let m = g.makeMatcher()
        for b in text.utf8 { if !m.accept(Int32(b)) { return false } }
        return m.isComplete
    }

    static func isAllowed(_ mask: [UInt32], _ token: Int32) -> Bool {
        mask[Int(token) >> 5] & (1 << (UInt32(token) & 31)) != 0
    }
}

/// A deterministic random number generator for reproducible property tests.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }
}

/// Where `../shared` lives (beside the repository), or nil in a user's clone.
enum SharedData {
    static var root: URL? {
        var dir = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { dir.deleteLastPathComponent() }
        let shared = dir.deletingLastPathComponent().appendingPathComponent("shared")
        return FileManager.default.fileExists(atPath: shared.path) ? shared : nil
    }
}
