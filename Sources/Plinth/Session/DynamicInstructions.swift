import Foundation

/// A type that represents dynamic instructions.
///
/// Dynamic instructions declare the instructions and tools a session's model sees. Their
/// `body` is evaluated again before every model request, so the model always sees a snapshot
/// of your app's current state:
///
/// ```swift
/// struct PresentationInstructions: DynamicInstructions {
///     var isEditingImage = true
///
///     var body: some DynamicInstructions {
///         Instructions {
///             "Help people improve their presentation."
///         }
///         ListPhotosTool()
///         if isEditingImage {
///             ImageEditingInstructions()
///         }
///     }
/// }
/// ```
///
/// The instructions of the body become the session's instructions entry, in order, and its
/// tools the tools the model may call.
public protocol DynamicInstructions {
    /// The type of dynamic instructions that represent these instructions.
    associatedtype Body: DynamicInstructions

    /// The content of the dynamic instructions.
    @DynamicInstructionsBuilder var body: Body { get }
}

extension DynamicInstructions {
    public typealias ForEach = DynamicInstructionsForEach
    public typealias SessionProperty = LanguageModelSession.SessionProperty
}

/// What dynamic instructions evaluate to: instruction segments and tools, in order.
struct InstructionsContent {
    var segments: [[Transcript.Segment]] = []
    var tools: [any Tool] = []

    /// Adds `instructions` and everything in their body.
    mutating func add(_ instructions: some DynamicInstructions) {
        if let leaf = instructions as? any InstructionsLeaf {
            leaf.addContent(to: &self)
        } else {
            add(instructions.body)
        }
    }

    var instructions: Instructions { Instructions(segments: Transcript.Segment.joined(segments)) }
}

/// Dynamic instructions that hold their content themselves instead of in a body.
protocol InstructionsLeaf {
    func addContent(to content: inout InstructionsContent)
}

extension Instructions: DynamicInstructions {
    /// The content of the dynamic instructions: these instructions.
    public var body: some DynamicInstructions { InstructionsSegments(segments: segments) }
}

/// The segments of an ``Instructions`` value, as dynamic instructions.
struct InstructionsSegments: DynamicInstructions, InstructionsLeaf {
    let segments: [Transcript.Segment]
    var body: Never { Never.unreachableBody(Self.self) }
    func addContent(to content: inout InstructionsContent) { content.segments.append(segments) }
}

/// Tools, as dynamic instructions: they add no text, only what the model may call.
struct ToolInstructions: DynamicInstructions, InstructionsLeaf {
    let tools: [any Tool]
    var body: Never { Never.unreachableBody(Self.self) }
    func addContent(to content: inout InstructionsContent) { content.tools += tools }
}

extension Never {
    /// The body of a type whose content the framework reads directly; it's never asked for.
    static func unreachableBody(_ type: Any.Type) -> Never {
        preconditionFailure("\(type) holds its content itself and has no body")
    }
}

/// A type-erased dynamic instructions.
public struct AnyDynamicInstructions: DynamicInstructions, InstructionsLeaf {
    private let add: (inout InstructionsContent) -> Void

    /// Creates an instance from the dynamic instructions you specify.
    public init(_ dynamicInstructions: any DynamicInstructions) {
        add = { $0.add(dynamicInstructions) }
    }

    /// Creates an instance from the dynamic instructions you specify.
    public init(erasing dynamicInstructions: some DynamicInstructions) {
        add = { $0.add(dynamicInstructions) }
    }

    public typealias Body = Never
    /// The content of the dynamic instructions.
    public var body: Never { Never.unreachableBody(Self.self) }

    func addContent(to content: inout InstructionsContent) { add(&content) }
}

/// A dynamic instructions type that conditionally selects between two conditions.
public struct ConditionalDynamicInstructions<TrueContent, FalseContent>: DynamicInstructions, InstructionsLeaf
where TrueContent: DynamicInstructions, FalseContent: DynamicInstructions {
    /// The branch that's selected.
    public enum Branch {
        case trueContent(TrueContent)
        case falseContent(FalseContent)
    }

    let branch: Branch

    /// Creates conditional dynamic instructions from the selected branch.
    public init(_ branch: ConditionalDynamicInstructions<TrueContent, FalseContent>.Branch) {
        self.branch = branch
    }

    public typealias Body = Never
    /// The content of the dynamic instructions.
    public var body: Never { Never.unreachableBody(Self.self) }

    func addContent(to content: inout InstructionsContent) {
        switch branch {
        case .trueContent(let c): content.add(c)
        case .falseContent(let c): content.add(c)
        }
    }
}

/// Dynamic instructions with no content.
public struct EmptyDynamicInstructions: DynamicInstructions, Sendable, InstructionsLeaf {
    /// Creates empty dynamic instructions.
    public init() {}

    public typealias Body = Never
    /// The content of the dynamic instructions.
    public var body: Never { Never.unreachableBody(Self.self) }

    func addContent(to content: inout InstructionsContent) {}
}

/// A dynamic instructions type that represents a tuple.
public struct TupleDynamicInstructions<each Content>: DynamicInstructions, InstructionsLeaf
where repeat each Content: DynamicInstructions {
    let contents: (repeat each Content)

    /// Creates a dynamic instructions instance that represents a tuple.
    ///
    /// - Parameter contents: The elements of the tuple.
    public init(_ contents: repeat each Content) {
        self.contents = (repeat each contents)
    }

    public typealias Body = Never
    /// The content of the dynamic instructions.
    public var body: Never { Never.unreachableBody(Self.self) }

    func addContent(to content: inout InstructionsContent) {
        for element in repeat each contents {
            content.add(element)
        }
    }
}

/// Dynamic instructions computed from each element of a collection.
///
/// ```swift
/// DynamicInstructions.ForEach(skills, id: \.name) { skill in
///     Instructions("Skill: \(skill.name)")
/// }
/// ```
public struct DynamicInstructionsForEach<Data, ID, Content>: DynamicInstructions, InstructionsLeaf
where Data: RandomAccessCollection, ID: Hashable, Content: DynamicInstructions {
    let data: Data
    let content: (Data.Element) -> Content

    /// Creates dynamic instructions from each element of `data`, identified by `id`.
    public init(_ data: Data, id: KeyPath<Data.Element, ID>,
                @DynamicInstructionsBuilder content: @escaping (Data.Element) -> Content) {
        self.data = data
        self.content = content
    }

    public typealias Body = Never
    /// The content of the dynamic instructions.
    public var body: Never { Never.unreachableBody(Self.self) }

    func addContent(to content: inout InstructionsContent) {
        for element in data { content.add(self.content(element)) }
    }
}

extension DynamicInstructionsForEach where ID == Data.Element.ID, Data.Element: Identifiable {
    /// Creates dynamic instructions from each element of a collection of identifiable elements.
    public init(_ data: Data, @DynamicInstructionsBuilder content: @escaping (Data.Element) -> Content) {
        self.init(data, id: \.id, content: content)
    }
}

extension Optional: DynamicInstructions where Wrapped: DynamicInstructions {
    public typealias Body = Never
    /// The content of the dynamic instructions.
    public var body: Never { Never.unreachableBody(Self.self) }
}

extension Optional: InstructionsLeaf where Wrapped: DynamicInstructions {
    func addContent(to content: inout InstructionsContent) {
        if let wrapped = self { content.add(wrapped) }
    }
}

extension Never: DynamicInstructions {
    public typealias Body = Never
    /// The content of the dynamic instructions.
    public var body: Never { self }
}

/// A result builder for dynamic instructions: ``Instructions``, tools and other dynamic
/// instructions, with `if`, `switch` and `if #available`.
@resultBuilder
public struct DynamicInstructionsBuilder {
    /// A tool the model may call.
    public static func buildExpression<T>(_ expression: T) -> some DynamicInstructions where T: Tool {
        ToolInstructions(tools: [expression])
    }

    public static func buildExpression<T>(_ expression: T) -> T where T: DynamicInstructions {
        expression
    }

    /// Tools the model may call.
    public static func buildExpression(_ tools: [any Tool]) -> some DynamicInstructions {
        ToolInstructions(tools: tools)
    }

    public static func buildBlock<each Content>(_ contents: repeat each Content) -> TupleDynamicInstructions<repeat each Content>
    where repeat each Content: DynamicInstructions {
        TupleDynamicInstructions(repeat each contents)
    }

    public static func buildBlock<T>(_ content: T) -> T where T: DynamicInstructions {
        content
    }

    public static func buildBlock() -> EmptyDynamicInstructions {
        EmptyDynamicInstructions()
    }

    public static func buildEither<TrueContent, FalseContent>(first content: TrueContent)
    -> ConditionalDynamicInstructions<TrueContent, FalseContent>
    where TrueContent: DynamicInstructions, FalseContent: DynamicInstructions {
        ConditionalDynamicInstructions(.trueContent(content))
    }

    public static func buildEither<TrueContent, FalseContent>(second content: FalseContent)
    -> ConditionalDynamicInstructions<TrueContent, FalseContent>
    where TrueContent: DynamicInstructions, FalseContent: DynamicInstructions {
        ConditionalDynamicInstructions(.falseContent(content))
    }

    public static func buildOptional<Content>(_ content: Content?) -> Content? where Content: DynamicInstructions {
        content
    }

    public static func buildLimitedAvailability(_ content: some DynamicInstructions) -> AnyDynamicInstructions {
        AnyDynamicInstructions(erasing: content)
    }
}
