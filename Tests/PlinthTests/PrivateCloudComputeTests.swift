import Foundation
import Testing
import FoundationModels

/// Private Cloud Compute has no counterpart on Linux: code written for Apple's framework
/// compiles, sees the model unavailable, and takes its fallback path; a request made anyway
/// fails with the service's own error, saying why.
@Suite struct PrivateCloudComputeTests {
    @Test func reportsItselfUnavailable() {
        let pcc = PrivateCloudComputeLanguageModel()
        #expect(pcc.availability == .unavailable(.deviceNotEligible))
        #expect(!pcc.isAvailable)
        #expect(pcc.supportedLanguages.isEmpty && !pcc.supportsLocale())
        #expect(!pcc.quotaUsage.isLimitReached && pcc.quotaUsage.resetDate == nil && pcc.quotaUsage.limitIncreaseSuggestion == nil)
        // Apple's sample: describe availability and quota as an app's settings screen does.
        let text: String = switch pcc.availability {
        case .available: "available"
        case .unavailable(.deviceNotEligible): "device not eligible"
        case .unavailable(.systemNotReady): "system not ready"
        }
        #expect(text == "device not eligible")
        if case .belowLimit(let info) = pcc.quotaUsage.status { #expect(!info.isApproachingLimit) } else { Issue.record("quota status") }
    }

    @Test func aRequestFailsWithServiceUnavailable() async throws {
        let session = LanguageModelSession(model: PrivateCloudComputeLanguageModel())
        do {
            _ = try await session.respond(to: "Analyze this document...")
            Issue.record("expected an error")
        } catch let error as PrivateCloudComputeLanguageModel.Error {
            guard case .serviceUnavailable(let info) = error else { Issue.record("\(error)"); return }
            #expect(info.debugDescription.contains("not available on Linux"))
            #expect(error.errorDescription == info.debugDescription)
        }
        await #expect(throws: PrivateCloudComputeLanguageModel.Error.self) { _ = try await PrivateCloudComputeLanguageModel().contextSize }
    }

    @Test func errorsCarryTheirDetails() {
        let reset = Date(timeIntervalSince1970: 1_800_000_000)
        let quota = PrivateCloudComputeLanguageModel.Error.quotaLimitReached(.init(resetDate: reset, debugDescription: "daily limit"))
        #expect(quota.debugDescription == "daily limit")
        if case .quotaLimitReached(let q) = quota { #expect(q.resetDate == reset && q.limitIncreaseSuggestion == nil) }
        #expect(PrivateCloudComputeLanguageModel.Error.networkFailure(.init(debugDescription: "offline")).errorDescription == "offline")
    }
}
