import SwiftDiagnostics
import SwiftSyntax

/// The problems the macros report, each saying what to do about it.
enum PlinthDiagnostic: DiagnosticMessage {
    case notStructOrEnum(kind: String)
    case missingTypeAnnotation(property: String)
    case unsupportedPropertyType(property: String, type: String, reason: String)
    case guideNotOnStoredProperty
    case guideOnStaticProperty
    case guideMismatch(guide: String, guides: String, property: String, type: String)
    case regexOnNonString(property: String, type: String)
    case negativeCount(guide: String)
    case invertedRange(guide: String)
    case emptyChoices
    case unsupportedEnumCase(name: String, reason: String)
    case sessionEntryNotStoredVar
    case missingEntryType(property: String)
    case missingEntryDefault(property: String)

    var message: String {
        switch self {
        case .notStructOrEnum(let kind):
            "@Generable can only be applied to a struct or an enum, not \(kind); use a struct to describe the generated value"
        case .missingTypeAnnotation(let property):
            "Property '\(property)' of a @Generable type needs an explicit type annotation, such as '\(property): String'"
        case .unsupportedPropertyType(let property, let type, let reason):
            "Property '\(property)' has type '\(type)', which is not Generable: \(reason)"
        case .guideNotOnStoredProperty:
            "@Guide can only be applied to a stored property of a @Generable type"
        case .guideOnStaticProperty:
            "@Guide can't be applied to a static property; only instance properties are generated"
        case .guideMismatch(let guide, let guides, let property, let type):
            "The guide '.\(guide)' applies to \(guides), but '\(property)' has type '\(type)'"
        case .regexOnNonString(let property, let type):
            "A Regex guide applies to String properties, but '\(property)' has type '\(type)'"
        case .negativeCount(let guide):
            "The count in '.\(guide)' can't be negative"
        case .invertedRange(let guide):
            "The range in '.\(guide)' is empty: its lower bound is greater than its upper bound"
        case .emptyChoices:
            "'.anyOf' needs at least one choice"
        case .unsupportedEnumCase(let name, let reason):
            "The case '\(name)' can't be generated: \(reason)"
        case .sessionEntryNotStoredVar:
            "@SessionPropertyEntry applies to one stored 'var' with a type and a default value, in an extension on SessionPropertyValues"
        case .missingEntryType(let property):
            "Session property '\(property)' needs an explicit type annotation, such as '\(property): Int = 0'"
        case .missingEntryDefault(let property):
            "Session property '\(property)' needs a default value, such as '\(property): Int = 0': a session starts with it"
        }
    }

    var diagnosticID: MessageID {
        let id: String = switch self {
        case .notStructOrEnum: "notStructOrEnum"
        case .missingTypeAnnotation: "missingTypeAnnotation"
        case .unsupportedPropertyType: "unsupportedPropertyType"
        case .guideNotOnStoredProperty: "guideNotOnStoredProperty"
        case .guideOnStaticProperty: "guideOnStaticProperty"
        case .guideMismatch: "guideMismatch"
        case .regexOnNonString: "regexOnNonString"
        case .negativeCount: "negativeCount"
        case .invertedRange: "invertedRange"
        case .emptyChoices: "emptyChoices"
        case .unsupportedEnumCase: "unsupportedEnumCase"
        case .sessionEntryNotStoredVar: "sessionEntryNotStoredVar"
        case .missingEntryType: "missingEntryType"
        case .missingEntryDefault: "missingEntryDefault"
        }
        return MessageID(domain: "PlinthMacros", id: id)
    }

    var severity: DiagnosticSeverity { .error }
}
