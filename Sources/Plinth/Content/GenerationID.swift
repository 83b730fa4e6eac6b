import Foundation

/// A unique identifier that stays stable across the snapshots of one generated value.
///
/// The framework gives every value it generates an identifier. When you stream a response, each
/// snapshot of the same value carries the same `GenerationID`, so that you can use it as the
/// identity of the value in a list while it's being generated.
public struct GenerationID: Sendable, Hashable {
    let value: UUID

    /// Creates a new, unique generation identifier.
    public init() {
        value = UUID()
    }

    init(value: UUID) {
        self.value = value
    }
}
