import Foundation
import Observation
import Synchronization

/// A macro for defining a custom key.
///
/// When you need session-scoped properties apply the ``SessionPropertyEntry()``
/// macro to a stored property in an extension on ``SessionPropertyValues``:
///
/// ```swift
/// extension SessionPropertyValues {
///     @SessionPropertyEntry
///     var activatedSkills: [String: Bool] = [:]
/// }
/// ```
///
/// Read the shared session state for the custom value by using
/// ``LanguageModelSession/SessionProperty``:
///
/// ```swift
/// @SessionProperty(\.activatedSkills)
/// var activatedSkills
/// ```
@attached(accessor) @attached(peer, names: prefixed(__Key_))
public macro SessionPropertyEntry() = #externalMacro(module: "PlinthMacros", type: "SessionPropertyEntryMacro")

/// A protocol for defining a custom session property key.
public protocol SessionPropertyKey: SendableMetatype {
    /// The type of value that represent this property key.
    associatedtype Value
    /// The default value of the property key.
    static var defaultValue: Value { get }
}

/// A container for property values.
///
/// Use session property values across your session. To help manage the context window,
/// access ``SessionPropertyValues/history`` to modify the transcript for the session:
///
/// ```swift
/// struct CompactingProfile: LanguageModelSession.DynamicProfile {
///     @SessionProperty(\.history)
///     var history
///
///     var body: some LanguageModelSession.DynamicProfile {
///         Profile {
///             Instructions("You are a helpful assistant.")
///         }
///         .onResponse { _ in
///             if history.count > 100 {
///                 history = history.suffix(50)
///             }
///         }
///     }
/// }
/// ```
///
/// The history is read-only while dynamic instructions are evaluated and while tools run (model
/// output decides what they see); a write there is ignored. Profile callbacks may write it;
/// other code may while the session isn't responding, as with its transcript.
/// Use ``SessionPropertyEntry()`` to create custom session properties.
public final class SessionPropertyValues: Sendable {
    private struct State {
        weak var session: LanguageModelSession?
        /// The history of values that belong to no session (a property read outside one).
        var detachedHistory: ArraySlice<Transcript.Entry> = []
        var custom: [ObjectIdentifier: UncheckedValue] = [:]
    }

    /// A stored custom value: its type is the key's `Value`, which need not be `Sendable`; the
    /// mutex orders every access.
    private struct UncheckedValue: @unchecked Sendable { var value: Any }

    private let state = Mutex(State())
    private let registrar = ObservationRegistrar()

    init() {}

    /// Makes these the values of `session`: the history is its transcript's.
    func attach(to session: LanguageModelSession) {
        state.withLock { $0.session = session }
    }

    /// The values the current task works with: the session's while it evaluates a profile, runs
    /// a callback or a tool.
    @TaskLocal static var current: Binding?

    /// The values in scope, and whether their history may be written there.
    struct Binding: Sendable {
        let values: SessionPropertyValues
        let historyIsWritable: Bool
    }

    /// The history portion of the session's transcript: its entries after the leading
    /// instructions.
    public var history: ArraySlice<Transcript.Entry> {
        get {
            registrar.access(self, keyPath: \.history)
            let (session, detached) = state.withLock { ($0.session, $0.detachedHistory) }
            return session?.transcript.history ?? detached
        }
        set {
            let binding = Self.current.flatMap { $0.values === self ? $0 : nil }
            if let binding, !binding.historyIsWritable { return }
            registrar.withMutation(of: self, keyPath: \.history) {
                let session = state.withLock { s -> LanguageModelSession? in
                    if s.session == nil { s.detachedHistory = newValue }
                    return s.session
                }
                // As with the session's transcript: a write from outside the request under way
                // stops it; the request's own profile callbacks may write.
                session?.updateTranscript(fromOutside: binding == nil) { $0.history = newValue }
            }
        }
    }

    /// The value of a custom key, or its default value when none was set.
    public subscript<K>(key: K.Type) -> K.Value where K: SessionPropertyKey {
        get {
            state.withLock { $0.custom[ObjectIdentifier(key)]?.value as? K.Value } ?? K.defaultValue
        }
        set {
            state.withLock { $0.custom[ObjectIdentifier(key)] = UncheckedValue(value: newValue) }
        }
    }
}

extension SessionPropertyValues: Observable {}

extension LanguageModelSession {
    /// A property wrapper that provides access to properties from within profiles, dynamic
    /// instructions, and tools.
    ///
    /// Use this to access properties across a language model session, like to access the
    /// session history:
    ///
    /// ```swift
    /// @SessionProperty(\.history)
    /// var history
    /// ```
    ///
    /// The property reads the values of the session that is evaluating the profile, running the
    /// callback or calling the tool. Outside a session it reads values of its own, which start
    /// at their defaults.
    ///
    /// To create a custom session property, use ``SessionPropertyEntry()`` to define a custom
    /// key that you access with ``LanguageModelSession/SessionProperty``.
    @propertyWrapper
    public struct SessionProperty<Value> {
        private let keyPath: ReferenceWritableKeyPath<SessionPropertyValues, Value>
        private let detached: SessionPropertyValues

        /// Creates a session property with the specified key path.
        ///
        /// - Parameter keyPath: The key path to the property.
        public init(_ keyPath: ReferenceWritableKeyPath<SessionPropertyValues, Value>) {
            self.keyPath = keyPath
            self.detached = SessionPropertyValues()
        }

        private var values: SessionPropertyValues { SessionPropertyValues.current?.values ?? detached }

        /// The wrapped value of this property wrapper.
        public var wrappedValue: Value {
            get { values[keyPath: keyPath] }
            nonmutating set { values[keyPath: keyPath] = newValue }
        }
    }
}

extension LanguageModelSession.SessionProperty: @unchecked Sendable where Value: Sendable {}

extension Tool {
    public typealias SessionProperty = LanguageModelSession.SessionProperty
}
