import Foundation
import FoundationModels
@testable import Plinth
import PlinthRuntime
import Testing

/// Apple's adapter API over Plinth's LoRA adapters: the random rank-2 fixture adapter of the
/// runtime's tests, and the content-tagging adapter Plinth ships.
@Suite("SystemLanguageModel.Adapter", .serialized)
struct AdapterTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("PlinthRuntimeTests/Fixtures/lora")

    @Test func adaptersFromFilesRoundTrip() async throws {
        let peft = try SystemLanguageModel.Adapter(fileURL: Self.fixture.appendingPathComponent("peft-r2"))
        let gguf = try SystemLanguageModel.Adapter(fileURL: Self.fixture.appendingPathComponent("lora-r2.f16.gguf"))
        #expect(peft.name == "peft-r2" && gguf.name == "lora-r2.f16")
        #expect(peft != gguf)
        let model = SystemLanguageModel(adapter: peft)
        #expect(model.adapterURL == peft.url)
        #expect(model.executorConfiguration != SystemLanguageModel.default.executorConfiguration)
        #expect(model.executorConfiguration != SystemLanguageModel(adapter: gguf).executorConfiguration)
        #expect(peft.creatorDefinedMetadata.isEmpty)
        guard SystemLanguageModel.default.isAvailable else { return }
        try await peft.compile()
        try await gguf.compile()
        // The adapter changes what the model says, greedily. (The random rank-2 adapter moves the
        // logits by a few percent: an open prompt, whose first tokens are close calls, shows it;
        // "Name three colors." came out the same with and without it.)
        let base = LanguageModelSession(model: SystemLanguageModel.default)
        let adapted = LanguageModelSession(model: model)
        let prompt = "Write a short poem about the sea."
        let options = GenerationOptions(sampling: .greedy, maximumResponseTokens: 12)
        let a = try await base.respond(to: prompt, options: options).content
        let b = try await adapted.respond(to: prompt, options: options).content
        #expect(a != b)
    }

    /// An adapter for the default model is compatible; one that names another base model, and a
    /// file that is no adapter, are not.
    @Test func compatibilityIsCheckedAgainstTheModel() async throws {
        guard SystemLanguageModel.default.isAvailable else { return }
        let peft = Self.fixture.appendingPathComponent("peft-r2")
        #expect(SystemLanguageModel.Adapter.isCompatible(peft))
        #expect(SystemLanguageModel.Adapter.isCompatible(Self.fixture.appendingPathComponent("lora-r2.f16.gguf")))
        #expect(!SystemLanguageModel.Adapter.isCompatible(Self.fixture.appendingPathComponent("reference.json")))
        #expect(!SystemLanguageModel.Adapter.isCompatible(URL(fileURLWithPath: "/nonexistent/adapter")))
        let other = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-other-base-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: peft, to: other)
        defer { try? FileManager.default.removeItem(at: other) }
        let config = other.appendingPathComponent("adapter_config.json")
        let text = try String(contentsOf: config, encoding: .utf8)
        try text.replacingOccurrences(of: "HuggingFaceTB/SmolLM2-135M-Instruct", with: "meta-llama/Llama-3.2-1B")
            .write(to: config, atomically: true, encoding: .utf8)
        #expect(!SystemLanguageModel.Adapter.isCompatible(other))
        // Nor does the system model run it (a LocalLanguageModel would, with a note).
        let adapter = try SystemLanguageModel.Adapter(fileURL: other)
        await #expect(throws: SystemLanguageModel.Adapter.AssetError.self) { try await adapter.compile() }
        let session = LanguageModelSession(model: SystemLanguageModel(adapter: adapter))
        await #expect(throws: (any Error).self) {
            try await session.respond(to: "Hi", options: GenerationOptions(maximumResponseTokens: 2))
        }
    }

    @Test func badAdaptersThrowAssetErrors() async throws {
        #expect(throws: SystemLanguageModel.Adapter.AssetError.self) {
            try SystemLanguageModel.Adapter(fileURL: URL(fileURLWithPath: "/nonexistent/adapter"))
        }
        // A model file is not an adapter.
        let notAdapter = Self.fixture.appendingPathComponent("reference.json")
        #expect(throws: SystemLanguageModel.Adapter.AssetError.self) { try SystemLanguageModel.Adapter(fileURL: notAdapter) }
        for name in ["", "a/b", ".."] {
            do {
                _ = try SystemLanguageModel.Adapter(name: name)
                Issue.record("'\(name)' should be refused")
            } catch SystemLanguageModel.Adapter.AssetError.invalidAdapterName(let c) {
                #expect(!c.debugDescription.isEmpty)
            }
        }
        do {
            _ = try SystemLanguageModel.Adapter(name: "no-such-adapter-anywhere")
            Issue.record("a missing adapter should not be found")
        } catch SystemLanguageModel.Adapter.AssetError.compatibleAdapterNotFound(let c) {
            #expect(c.debugDescription.contains("no-such-adapter-anywhere"))
        }
        #expect(SystemLanguageModel.Adapter.compatibleAdapterIdentifiers(name: "no-such-adapter-anywhere").isEmpty)
        let error = SystemLanguageModel.Adapter.AssetError.invalidAsset(.init(debugDescription: "x"))
        #expect(error.errorDescription?.contains("x") == true && error.recoverySuggestion != nil)
    }

    /// `.contentTagging` runs the content-tagging adapter Plinth ships in `Adapters/`.
    @Test func contentTaggingUsesTheShippedAdapter() throws {
        let shipped = try #require(try? AdapterStore.default.resolve("content-tagger"), "Adapters/content-tagger is missing")
        let tagging = SystemLanguageModel(useCase: .contentTagging)
        #expect(tagging.adapterURL == shipped)
        #expect(SystemLanguageModel.default.adapterURL == nil)
        let byName = try SystemLanguageModel.Adapter(name: "content-tagger")
        #expect(byName.url == shipped)
        #expect(SystemLanguageModel.Adapter.compatibleAdapterIdentifiers(name: "content-tagger") == ["content-tagger"])
    }
}
