import Foundation
import Observation

/// Apple's server model for Apple Intelligence (Xcode 27).
///
/// Private Cloud Compute runs on Apple's servers for Apple devices, so there is no counterpart on
/// Linux. The type is here so that code written for Apple's framework compiles and takes its
/// fallback path: ``availability`` is always `.unavailable(.deviceNotEligible)`, and a request
/// throws ``Error/serviceUnavailable(_:)`` saying why.
///
/// ```swift
/// let pcc = PrivateCloudComputeLanguageModel()
/// let session = pcc.isAvailable
///     ? LanguageModelSession(model: pcc)
///     : LanguageModelSession(model: SystemLanguageModel.default)
/// ```
public final class PrivateCloudComputeLanguageModel: Sendable {
    /// Creates a new Private Cloud Compute language model instance.
    public convenience init() { self.init(platform: ()) }

    init(platform: Void) {}

    /// What every request throws here.
    static let unavailable = Error.serviceUnavailable(.init(debugDescription:
        "Private Cloud Compute is Apple's server model for Apple devices; it is not available on Linux. Use SystemLanguageModel or LocalLanguageModel."))

    /// The availability of the language model: on Linux, never available.
    public var availability: Availability { .unavailable(.deviceNotEligible) }

    /// The usage quota for this model: below the limit, with nothing known about it.
    public var quotaUsage: QuotaUsage {
        QuotaUsage(status: .belowLimit(.init(isApproachingLimit: false)), limitIncreaseSuggestion: nil, resetDate: nil)
    }

    /// A convenience getter to check if the system is entirely ready.
    public var isAvailable: Bool { availability == .available }

    /// The maximum context size in tokens.
    ///
    /// - Throws: ``Error/serviceUnavailable(_:)``: the service doesn't exist on this platform.
    public var contextSize: Int {
        get async throws { throw Self.unavailable }
    }

    /// Languages that the model supports: none on this platform.
    public var supportedLanguages: Set<Locale.Language> { [] }

    /// Whether the given locale is supported by the model: never on this platform.
    public func supportsLocale(_ locale: Locale = Locale.current) -> Bool { false }

    /// The availability status of the model.
    public enum Availability: Equatable, Sendable {
        /// The system is ready for making requests.
        case available
        /// The system isn't ready for requests.
        case unavailable(UnavailableReason)

        /// Why the model is unavailable.
        public enum UnavailableReason: Equatable, Sendable, Hashable {
            /// The device does not support Apple Intelligence (on Linux: always).
            case deviceNotEligible
            /// The system is not yet ready to serve requests.
            case systemNotReady
        }
    }

    /// Errors that may occur when using Private Cloud Compute.
    public enum Error: Swift.Error, LocalizedError, CustomDebugStringConvertible {
        /// A network is available, but the service is not reachable.
        case networkFailure(NetworkFailure)
        /// The allotted usage quota has been reached.
        case quotaLimitReached(QuotaLimitReached)
        /// Services are unavailable (on Linux: always).
        case serviceUnavailable(ServiceUnavailable)

        public struct NetworkFailure: Sendable {
            public var debugDescription: String
            public init(debugDescription: String) { self.debugDescription = debugDescription }
        }

        /// Information about reaching a usage limit.
        public struct QuotaLimitReached: Sendable {
            /// A suggestion to increase the usage limit, if one exists.
            public var limitIncreaseSuggestion: QuotaUsage.LimitIncreaseSuggestion?
            /// The date that the usage limit will reset.
            public var resetDate: Date?
            /// A debug description of the usage limit.
            public var debugDescription: String

            public init(limitIncreaseSuggestion: QuotaUsage.LimitIncreaseSuggestion? = nil, resetDate: Date? = nil, debugDescription: String) {
                self.limitIncreaseSuggestion = limitIncreaseSuggestion
                self.resetDate = resetDate
                self.debugDescription = debugDescription
            }
        }

        public struct ServiceUnavailable: Sendable {
            public var debugDescription: String
            public init(debugDescription: String) { self.debugDescription = debugDescription }
        }

        /// A localized message describing what error occurred.
        public var errorDescription: String? { debugDescription }

        public var debugDescription: String {
            switch self {
            case .networkFailure(let f): f.debugDescription
            case .quotaLimitReached(let q): q.debugDescription
            case .serviceUnavailable(let s): s.debugDescription
            }
        }
    }

    /// The usage quota state for the model. Quotas are orthogonal to availability.
    public struct QuotaUsage: Sendable {
        /// The current quota status.
        public var status: Status
        /// A suggestion the user can act on to increase their quota; nil when none is offered.
        public var limitIncreaseSuggestion: LimitIncreaseSuggestion?
        /// The date at which the quota will refresh, when known.
        public var resetDate: Date?

        /// Whether the usage limit has been reached.
        public var isLimitReached: Bool {
            if case .limitReached = status { return true }
            return false
        }

        /// The quota status of a language model.
        public enum Status: Sendable {
            case belowLimit(BelowLimit)
            case limitReached(LimitReached)

            public struct BelowLimit: Sendable {
                public var isApproachingLimit: Bool
            }

            public struct LimitReached: Sendable {}
        }

        /// An offer that a user can act on to increase their quota.
        public struct LimitIncreaseSuggestion: Sendable {
            /// Presents the limit increase flow to the user: there is none on Linux.
            public func show() {}
        }
    }
}

extension PrivateCloudComputeLanguageModel: Observable {}

extension PrivateCloudComputeLanguageModel: LanguageModel {
    /// The capabilities of this language model: none on this platform.
    public var capabilities: LanguageModelCapabilities { LanguageModelCapabilities([]) }

    /// A configuration for an executor capable of running this model.
    public var executorConfiguration: Executor.Configuration { Executor.Configuration() }

    /// The executor, which on Linux refuses every request.
    public struct Executor: LanguageModelExecutor {
        public typealias Model = PrivateCloudComputeLanguageModel

        public struct Configuration: Hashable & Sendable {}

        /// Creates an executor from a configuration.
        public init(configuration: Configuration) {}

        /// Does nothing: there is nothing to load.
        public func prewarm(model: PrivateCloudComputeLanguageModel, transcript: Transcript) {}

        /// - Throws: ``PrivateCloudComputeLanguageModel/Error/serviceUnavailable(_:)``, always.
        nonisolated(nonsending) public func respond(to request: LanguageModelExecutorGenerationRequest, model: PrivateCloudComputeLanguageModel,
                                                    streamingInto channel: LanguageModelExecutorGenerationChannel) async throws {
            throw PrivateCloudComputeLanguageModel.unavailable
        }
    }
}
