import SwiftSyntax

/// What kind of value a property type holds, read from its syntax.
enum TypeCategory: Equatable {
    case string
    case integer
    case floating
    case bool
    case array
    case other

    var guideFamily: String {
        switch self {
        case .string: "String"
        case .integer, .floating: "numbers"
        case .array: "arrays"
        case .bool: "Bool"
        case .other: "this type"
        }
    }
}

enum TypeAnalysis {
    /// The wrapped type of an optional, and whether the type was optional.
    static func unwrapOptional(_ type: TypeSyntax) -> (TypeSyntax, Bool) {
        if let optional = type.as(OptionalTypeSyntax.self) { return (optional.wrappedType.trimmed, true) }
        if let iuo = type.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) { return (iuo.wrappedType.trimmed, true) }
        if let identifier = type.as(IdentifierTypeSyntax.self), identifier.name.text == "Optional",
           let argument = identifier.genericArgumentClause?.arguments.first,
           case .type(let wrapped) = argument.argument {
            return (wrapped.trimmed, true)
        }
        if let member = type.as(MemberTypeSyntax.self), member.name.text == "Optional",
           member.baseType.trimmedDescription == "Swift",
           let argument = member.genericArgumentClause?.arguments.first,
           case .type(let wrapped) = argument.argument {
            return (wrapped.trimmed, true)
        }
        return (type.trimmed, false)
    }

    /// The element type of an array type, if it is one.
    static func arrayElement(_ type: TypeSyntax) -> TypeSyntax? {
        if let array = type.as(ArrayTypeSyntax.self) { return array.element.trimmed }
        if let identifier = type.as(IdentifierTypeSyntax.self), identifier.name.text == "Array",
           let argument = identifier.genericArgumentClause?.arguments.first,
           case .type(let element) = argument.argument {
            return element.trimmed
        }
        return nil
    }

    static func simpleName(_ type: TypeSyntax) -> String? {
        if let identifier = type.as(IdentifierTypeSyntax.self), identifier.genericArgumentClause == nil {
            return identifier.name.text
        }
        if let member = type.as(MemberTypeSyntax.self), member.baseType.trimmedDescription == "Swift"
            || member.baseType.trimmedDescription == "Foundation" {
            return member.name.text
        }
        return nil
    }

    static func category(_ type: TypeSyntax) -> TypeCategory {
        if arrayElement(type) != nil { return .array }
        switch simpleName(type) {
        case "String": return .string
        case "Int": return .integer
        case "Float", "Double", "Decimal": return .floating
        case "Bool": return .bool
        default: return .other
        }
    }

    // Only names a program is unlikely to declare itself: a property of a type named `Date` or
    // `Character` may well be the program's own @Generable type, so those are left to the
    // compiler, which reports that the type doesn't conform to Generable.
    private static let unsupportedNames: [String: String] = [
        "Int8": "use Int with a .range guide", "Int16": "use Int with a .range guide",
        "Int32": "use Int with a .range guide", "Int64": "use Int with a .range guide",
        "UInt": "use Int with a .minimum guide", "UInt8": "use Int with a .range guide",
        "UInt16": "use Int with a .range guide", "UInt32": "use Int with a .range guide",
        "UInt64": "use Int with a .minimum guide",
        "CGFloat": "use Double", "Float16": "use Float", "Float80": "use Double",
        "Any": "use a concrete Generable type", "AnyObject": "use a concrete Generable type",
    ]

    /// Generic standard types that aren't Generable, when written with their arguments.
    private static let unsupportedGenerics: [String: String] = [
        "Dictionary": "use an array of a @Generable struct with key and value properties",
        "Set": "use an array",
    ]

    /// Why a type can't be generated, when its syntax alone tells.
    static func unsupportedReason(_ type: TypeSyntax) -> String? {
        let (base, _) = unwrapOptional(type)
        if let element = arrayElement(base) { return unsupportedReason(element) }
        if base.is(DictionaryTypeSyntax.self) {
            return "dictionaries can't be generated; use an array of a @Generable struct with key and value properties"
        }
        if let tuple = base.as(TupleTypeSyntax.self) {
            if tuple.elements.count == 1, let only = tuple.elements.first { return unsupportedReason(only.type) }
            return "tuples can't be generated; use a @Generable struct"
        }
        if base.is(FunctionTypeSyntax.self) || base.is(AttributedTypeSyntax.self) {
            return "functions can't be generated"
        }
        if base.is(SomeOrAnyTypeSyntax.self) || base.is(CompositionTypeSyntax.self) {
            return "opaque and existential types can't be generated; use a concrete @Generable type"
        }
        if base.is(MetatypeTypeSyntax.self) { return "metatypes can't be generated" }
        if let identifier = base.as(IdentifierTypeSyntax.self) {
            if identifier.genericArgumentClause != nil, let reason = unsupportedGenerics[identifier.name.text] {
                return "\(identifier.name.text) isn't Generable; \(reason)"
            }
            if identifier.genericArgumentClause == nil, let reason = unsupportedNames[identifier.name.text] {
                return "\(identifier.name.text) isn't Generable; \(reason)"
            }
            if identifier.name.text == "Optional" || identifier.name.text == "Array" { return nil }
        }
        if let name = simpleName(base), let reason = unsupportedNames[name] {
            return "\(name) isn't Generable; \(reason)"
        }
        return nil
    }

    /// An identifier as it is written in JSON (without backticks).
    static func plainName(_ token: TokenSyntax) -> String {
        var text = token.text
        if text.hasPrefix("`"), text.hasSuffix("`"), text.count >= 2 {
            text = String(text.dropFirst().dropLast())
        }
        return text
    }
}
