import Foundation

/// Guides that control how values are generated.
///
/// Use guides in the `@Guide` macro, or with `GenerationSchema.Property`, to constrain the
/// values the model generates for a property: a set of strings, a numeric range, a number of
/// array elements. Plinth enforces every guide while decoding, so a response always satisfies
/// them.
public struct GenerationGuide<Value> {
    let kinds: [GuideKind]

    init(_ kind: GuideKind) {
        kinds = [kind]
    }

    init(kinds: [GuideKind]) {
        self.kinds = kinds
    }
}

extension GenerationGuide: Sendable {}

/// The type-erased form of a guide, applied to a schema node.
enum GuideKind: Sendable, Equatable {
    case constant(String)
    case anyOf([String])
    /// The pattern of a regular expression, or `nil` when the expression has no pattern text
    /// that Plinth can compile (one built from a `RegexComponent` that isn't a literal).
    case pattern(String?)
    case minimum(Double)
    case maximum(Double)
    case minimumCount(Int)
    case maximumCount(Int)
    case element([GuideKind])
}

extension GenerationGuide where Value == String {
    /// Enforces that the string be precisely the given value.
    public static func constant(_ value: String) -> GenerationGuide<String> { .init(.constant(value)) }

    /// Enforces that the string be one of the provided values.
    public static func anyOf(_ values: [String]) -> GenerationGuide<String> { .init(.anyOf(values)) }

    /// Enforces that the string follows the pattern.
    ///
    /// ```swift
    /// @Guide(description: "A US phone number", .pattern(/\d{3}-\d{3}-\d{4}/))
    /// var phone: String
    /// ```
    public static func pattern<Output>(_ regex: Regex<Output>) -> GenerationGuide<String> {
        .init(.pattern(regex._literalPattern))
    }
}

extension GenerationGuide where Value == Int {
    /// Enforces a minimum value.
    ///
    /// The bound is inclusive.
    public static func minimum(_ value: Int) -> GenerationGuide<Int> { .init(.minimum(Double(value))) }

    /// Enforces a maximum value.
    ///
    /// The bound is inclusive.
    public static func maximum(_ value: Int) -> GenerationGuide<Int> { .init(.maximum(Double(value))) }

    /// Enforces values fall within a range.
    public static func range(_ range: ClosedRange<Int>) -> GenerationGuide<Int> {
        GenerationGuide(kinds: [.minimum(Double(range.lowerBound)), .maximum(Double(range.upperBound))])
    }
}

extension GenerationGuide where Value == Float {
    /// Enforces a minimum value.
    ///
    /// The bound is inclusive.
    public static func minimum(_ value: Float) -> GenerationGuide<Float> { .init(.minimum(Double(value))) }

    /// Enforces a maximum value.
    ///
    /// The bound is inclusive.
    public static func maximum(_ value: Float) -> GenerationGuide<Float> { .init(.maximum(Double(value))) }

    /// Enforces values fall within a range.
    public static func range(_ range: ClosedRange<Float>) -> GenerationGuide<Float> {
        GenerationGuide(kinds: [.minimum(Double(range.lowerBound)), .maximum(Double(range.upperBound))])
    }
}

extension GenerationGuide where Value == Decimal {
    /// Enforces a minimum value.
    ///
    /// The bound is inclusive.
    public static func minimum(_ value: Decimal) -> GenerationGuide<Decimal> { .init(.minimum(value.doubleValue)) }

    /// Enforces a maximum value.
    ///
    /// The bound is inclusive.
    public static func maximum(_ value: Decimal) -> GenerationGuide<Decimal> { .init(.maximum(value.doubleValue)) }

    /// Enforces values fall within a range.
    public static func range(_ range: ClosedRange<Decimal>) -> GenerationGuide<Decimal> {
        GenerationGuide(kinds: [.minimum(range.lowerBound.doubleValue), .maximum(range.upperBound.doubleValue)])
    }
}

extension GenerationGuide where Value == Double {
    /// Enforces a minimum value.
    ///
    /// The bound is inclusive.
    public static func minimum(_ value: Double) -> GenerationGuide<Double> { .init(.minimum(value)) }

    /// Enforces a maximum value.
    ///
    /// The bound is inclusive.
    public static func maximum(_ value: Double) -> GenerationGuide<Double> { .init(.maximum(value)) }

    /// Enforces values fall within a range.
    public static func range(_ range: ClosedRange<Double>) -> GenerationGuide<Double> {
        GenerationGuide(kinds: [.minimum(range.lowerBound), .maximum(range.upperBound)])
    }
}

extension GenerationGuide {
    /// Enforces a minimum number of elements in the array.
    ///
    /// The bound is inclusive.
    public static func minimumCount<Element>(_ count: Int) -> GenerationGuide<[Element]> where Value == [Element] {
        .init(.minimumCount(count))
    }

    /// Enforces a maximum number of elements in the array.
    ///
    /// The bound is inclusive.
    public static func maximumCount<Element>(_ count: Int) -> GenerationGuide<[Element]> where Value == [Element] {
        .init(.maximumCount(count))
    }

    /// Enforces that the number of elements in the array fall within a closed range.
    public static func count<Element>(_ range: ClosedRange<Int>) -> GenerationGuide<[Element]> where Value == [Element] {
        GenerationGuide<[Element]>(kinds: [.minimumCount(range.lowerBound), .maximumCount(range.upperBound)])
    }

    /// Enforces that the array has exactly a certain number of elements.
    public static func count<Element>(_ count: Int) -> GenerationGuide<[Element]> where Value == [Element] {
        GenerationGuide<[Element]>(kinds: [.minimumCount(count), .maximumCount(count)])
    }

    /// Enforces a guide on the elements within the array.
    public static func element<Element>(_ guide: GenerationGuide<Element>) -> GenerationGuide<[Element]>
    where Value == [Element] {
        .init(.element(guide.kinds))
    }
}

extension GenerationGuide where Value == [Never] {
    /// Enforces a minimum number of elements in the array.
    public static func minimumCount(_ count: Int) -> GenerationGuide<Value> { .init(.minimumCount(count)) }

    /// Enforces a maximum number of elements in the array.
    public static func maximumCount(_ count: Int) -> GenerationGuide<Value> { .init(.maximumCount(count)) }

    /// Enforces that the number of elements in the array fall within a closed range.
    public static func count(_ range: ClosedRange<Int>) -> GenerationGuide<Value> {
        GenerationGuide(kinds: [.minimumCount(range.lowerBound), .maximumCount(range.upperBound)])
    }

    /// Enforces that the array has exactly a certain number of elements.
    public static func count(_ count: Int) -> GenerationGuide<Value> {
        GenerationGuide(kinds: [.minimumCount(count), .maximumCount(count)])
    }
}

extension Decimal {
    var doubleValue: Double { NSDecimalNumber(decimal: self).doubleValue }
}
