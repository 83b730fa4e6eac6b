import Foundation

/// Conforms a type to ``Generable`` protocol.
///
/// This macro synthesizes a memberwise initializer and `init(_ content: GeneratedContent)`
/// initializer for the annotated type, the type's ``Generable/generationSchema``, its
/// ``ConvertibleToGeneratedContent/generatedContent``, and a `PartiallyGenerated` type whose
/// properties are all optional, for streaming.
///
/// ```swift
/// @Generable(description: "A fictional character")
/// struct Character {
///     @Guide(description: "The character's name")
///     var name: String
///     @Guide(.range(1...100))
///     var level: Int
/// }
/// ```
///
/// Apply it to structures and enumerations. Properties keep their declaration order in the
/// schema. Enumeration cases without associated values are generated as their names; cases with
/// associated values as an object with one property, named after the case, that holds the
/// associated values (by label, or `_0`, `_1`, … when unlabeled).
@attached(extension, conformances: Generable, names: named(init(_:)), named(generatedContent))
@attached(member, names: arbitrary)
public macro Generable(description: String? = nil) = #externalMacro(module: "PlinthMacros", type: "GenerableMacro")

/// Conforms a type to ``Generable`` protocol, choosing whether `nil` values are written as
/// `null` in generated content.
@attached(extension, conformances: Generable, names: named(init(_:)), named(generatedContent))
@attached(member, names: arbitrary)
public macro Generable(description: String? = nil, representNilExplicitlyInGeneratedContent: Bool) =
    #externalMacro(module: "PlinthMacros", type: "GenerableMacro")

/// Conforms a type to ``Generable`` protocol with the schema name you choose.
@attached(extension, conformances: Generable, names: named(init(_:)), named(generatedContent))
@attached(member, names: arbitrary)
public macro Generable(name: String, description: String? = nil, representNilExplicitlyInGeneratedContent: Bool = false) =
    #externalMacro(module: "PlinthMacros", type: "GenerableMacro")

/// Allows for influencing the allowed values of properties of a generable type.
///
/// ```swift
/// @Guide(description: "Three search terms", .count(3))
/// var searchTerms: [String]
/// ```
@attached(peer)
public macro Guide<T>(description: String? = nil, _ guides: GenerationGuide<T>...) =
    #externalMacro(module: "PlinthMacros", type: "GuideMacro") where T: Generable

/// Allows for influencing the allowed values of properties of a generable type with a regular
/// expression.
///
/// ```swift
/// @Guide(description: "A product code", /[A-Z]{3}-\d{4}/)
/// var code: String
/// ```
@attached(peer)
public macro Guide<RegexOutput>(description: String? = nil, _ guides: Regex<RegexOutput>) =
    #externalMacro(module: "PlinthMacros", type: "GuideMacro")

/// Allows for influencing the allowed values of properties of a generable type with a
/// description.
@attached(peer)
public macro Guide(description: String) = #externalMacro(module: "PlinthMacros", type: "GuideMacro")
