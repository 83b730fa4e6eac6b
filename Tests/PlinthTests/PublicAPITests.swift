import Foundation
import Testing

/// Compares Plinth's public declarations (from its symbol graph, committed in
/// PublicAPI/plinth-public-api.txt) with Apple's (PublicAPI/apple-api.txt): every Apple
/// declaration is provided or listed, with a reason, in PublicAPI/apple-not-covered.txt.
/// PublicAPI/public_api.py regenerates the lists.
@Suite struct PublicAPITests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("PublicAPI")

    static func lines(_ name: String) throws -> [String] {
        try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
            .split(separator: "\n").map(String.init)
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    @Test func everyAppleDeclarationIsProvidedOrExplained() throws {
        let apple = try Self.lines("apple-api.txt")
        let plinth = Set(try Self.lines("plinth-public-api.txt"))
        let explained = Set(try Self.lines("apple-not-covered.txt"))
        #expect(apple.count > 700)
        let missing = apple.filter { !plinth.contains($0) && !explained.contains($0) }
        #expect(missing.isEmpty, "Apple declarations Plinth lacks, not listed in apple-not-covered.txt: \(missing)")
        let stale = explained.filter { plinth.contains($0) }
        #expect(stale.isEmpty, "Listed as not covered, but provided: \(stale.sorted())")
        let unknown = explained.filter { !apple.contains($0) }
        #expect(unknown.isEmpty, "Listed as not covered, but not Apple declarations: \(unknown.sorted())")
        let covered = apple.filter { plinth.contains($0) }.count
        #expect(covered + explained.count == apple.count)
    }

    @Test func theSymbolListIsSortedAndCoversTheCoreTypes() throws {
        let plinth = try Self.lines("plinth-public-api.txt")
        #expect(plinth == plinth.sorted())
        for name in ["LanguageModelSession", "Transcript", "GenerationSchema", "DynamicGenerationSchema", "GeneratedContent",
                     "Tool", "SystemLanguageModel", "LanguageModel", "LanguageModelExecutor", "Generable(description:)",
                     "Guide(description:_:)"] {
            #expect(plinth.contains(name), "\(name)")
        }
    }
}
