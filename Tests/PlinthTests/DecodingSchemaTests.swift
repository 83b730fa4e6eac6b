import Foundation
import FoundationModels
@testable import Plinth
import PlinthJSON
import Testing

@Generable
struct StarCount {
    var stars: Int
    @Guide(.range(1...5))
    var rating: Int
    @Guide(.minimum(0))
    var visible: Int
    @Guide(.pattern(/[A-Z]{2}/))
    var code: String
}

struct DecodingSchemaTests {
    @Test func openIntegerBoundsBecomeTheRangeThatDecodesExactly() throws {
        let schema = DecodingSchema.jsonSchema(for: StarCount.generationSchema)
        let properties = try #require(schema["properties"])
        let largest = JSONValue.integer(9_007_199_254_740_991)
        #expect(properties["stars"]?["minimum"] == .integer(-9_007_199_254_740_991))
        #expect(properties["stars"]?["maximum"] == largest)
        // A guide's bounds stay; only a missing one is added.
        #expect(properties["rating"]?["minimum"] == .integer(1))
        #expect(properties["rating"]?["maximum"] == .integer(5))
        #expect(properties["visible"]?["minimum"] == .integer(0))
        #expect(properties["visible"]?["maximum"] == largest)
        #expect(properties["code"]?["pattern"] == .string("^(?:[A-Z]{2})$"))
        // The largest bound survives the trip through Double and decodes into Int.
        #expect(try Int(GeneratedContent(json: largest.compactText)) == (1 << 53) - 1)
    }

    /// Under random sampling SmolLM2 once wrote 36- and 27-digit integers for unguided `Int`s
    /// (a rectangle's height, a delay in minutes), which can't decode into `Int`.
    @Test(.enabled(if: LocalTestModels.hasSmolLM2, LocalTestModels.smolLM2Missing))
    func unguidedIntegersDecode() async throws {
        let model = LocalLanguageModel(name: LocalTestModels.smolLM2)
        for (type, seed) in [("CorpusCanvas", UInt64(5)), ("CorpusFlight", 8)] {
            let corpusCase = try #require(GuidedCorpus.named(type))
            let (raw, _, violations) = try await corpusCase.generate(model, GuidedCorpus.options(seed: seed))
            #expect(violations.isEmpty, "\(raw)")
        }
    }
}
