import Foundation

// Entry points for the code the `@Generable` macro writes. They are public because that code
// lives in your module; their names start with an underscore because you don't call them
// yourself.

extension GeneratedContent {
    /// An object of the properties in order; `nil` optionals are left out unless they are
    /// represented explicitly, as `null`.
    public static func _object(_ properties: [(String, any ConvertibleToGeneratedContent)],
                               representNilExplicitly: Bool) -> GeneratedContent {
        var dict: [String: GeneratedContent] = [:]
        var keys: [String] = []
        for (key, value) in properties {
            let content = value.generatedContent
            if case .null = content.kind, !representNilExplicitly { continue }
            if dict[key] == nil { keys.append(key) }
            dict[key] = content
        }
        return GeneratedContent(kind: .structure(properties: dict, orderedKeys: keys))
    }

    /// The value of a property of partially generated content, or `nil` when it is missing or
    /// can't be read yet.
    public func _partialValue<Value>(_ type: Value.Type, forProperty property: String) -> Value?
    where Value: ConvertibleFromGeneratedContent {
        guard case .structure(let properties, _) = kind, let value = properties[property] else { return nil }
        if case .null = value.kind { return nil }
        return try? Value(value)
    }

    /// The case of an enumeration: a string names a case without associated values; an
    /// object with one property names a case and holds its associated values.
    public func _enumerationCase() throws -> (name: String, payload: GeneratedContent?) {
        switch kind {
        case .string(let name):
            return (name, nil)
        case .structure(let properties, let keys) where keys.count == 1:
            return (keys[0], properties[keys[0]])
        default:
            throw Self.decodingFailure("Expected an enumeration case: a string, or an object with one property; found \(kindName).")
        }
    }

    /// The associated values of an enumeration case.
    public static func _payload(_ payload: GeneratedContent?, forCase name: String) throws -> GeneratedContent {
        guard let payload else {
            throw decodingFailure("The case '\(name)' needs its associated values.")
        }
        return payload
    }

    /// The content of an enumeration case with associated values.
    public static func _enumerationCase(_ name: String, _ values: [(String, any ConvertibleToGeneratedContent)]) -> GeneratedContent {
        GeneratedContent(kind: .structure(properties: [name: _object(values, representNilExplicitly: false)],
                                          orderedKeys: [name]))
    }

    /// The error for a case name that the enumeration doesn't have.
    public static func _unknownCase(_ name: String, of type: Any.Type) -> any Error {
        decodingFailure("'\(name)' is not a case of \(type).")
    }
}

extension GenerationSchema {
    /// The schema with its root type named as you choose.
    public func _named(_ name: String) -> GenerationSchema {
        var copy = self
        switch copy.root {
        case .object(var o):
            o.name = name
            copy.root = .object(o)
        case .anyOf(var a):
            a.name = name
            copy.root = .anyOf(a)
        case .string(var s):
            s.name = name
            copy.root = .string(s)
        default: break
        }
        return copy
    }
}
