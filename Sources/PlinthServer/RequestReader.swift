import Foundation
import PlinthGrammar

/// Reads the fields of a JSON request object, each typed and range-checked, with errors that
/// name the field (`param`) as OpenAI's do.
struct RequestReader {
    let value: JSONValue
    /// Where this object is in the request (`messages[2]`), for error messages; empty at the root.
    let path: String

    init(_ value: JSONValue, path: String = "") throws {
        guard case .object = value else {
            throw APIError.invalid(path.isEmpty ? "body" : path, "\(path.isEmpty ? "The request body" : "`\(path)`") must be a JSON object.",
                                   code: "invalid_type")
        }
        self.value = value
        self.path = path
    }

    /// Parses a request body.
    init(body: Data) throws {
        let json: JSONValue
        do {
            json = try JSONValue(parsing: body)
        } catch {
            throw APIError(400, "invalid_request_error", code: "invalid_json", "The request body is not valid JSON: \(error).")
        }
        try self.init(json)
    }

    func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The member, with JSON null read as absent.
    func raw(_ key: String) -> JSONValue? {
        guard let v = value[key], v != .null else { return nil }
        return v
    }

    private func wrongType(_ key: String, _ expected: String) -> APIError {
        APIError.invalid(name(key), "`\(name(key))` must be \(expected), not \(raw(key)?.typeName ?? "null").", code: "invalid_type")
    }

    func string(_ key: String) throws -> String? {
        guard let v = raw(key) else { return nil }
        guard let s = v.stringValue else { throw wrongType(key, "a string") }
        return s
    }

    func requiredString(_ key: String) throws -> String {
        guard let s = try string(key) else { throw APIError.invalid(name(key), "`\(name(key))` is required.", code: "missing_required_parameter") }
        return s
    }

    func bool(_ key: String) throws -> Bool? {
        guard let v = raw(key) else { return nil }
        guard let b = v.boolValue else { throw wrongType(key, "a boolean") }
        return b
    }

    func number(_ key: String, in range: ClosedRange<Double>) throws -> Double? {
        guard let v = raw(key) else { return nil }
        guard let d = v.doubleValue else { throw wrongType(key, "a number") }
        guard range.contains(d) else {
            throw APIError.invalid(name(key), "`\(name(key))` must be between \(Self.plain(range.lowerBound)) and \(Self.plain(range.upperBound)), not \(Self.plain(d)).")
        }
        return d
    }

    /// A number as written in a message: whole ones without ".0", others in full (2.0000001).
    private static func plain(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : String(d)
    }

    func integer(_ key: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let v = raw(key) else { return nil }
        func outOfRange(_ text: String) -> APIError {
            APIError.invalid(name(key), "`\(name(key))` must be between \(range.lowerBound) and \(range.upperBound), not \(text).")
        }
        guard let i = v.integerValue else {
            // An integer too large for any range here (1e30) is out of range, not of the wrong type.
            if case .number(let text) = v, v.typeName == "integer" { throw outOfRange(text) }
            throw wrongType(key, "an integer")
        }
        guard range.contains(i) else { throw outOfRange(String(i)) }
        return i
    }

    /// A seed: any integer, negative ones taken as their 64-bit pattern.
    func seed(_ key: String) throws -> UInt64? {
        guard let v = raw(key) else { return nil }
        guard case .number(let text) = v else { throw wrongType(key, "an integer") }
        if let u = UInt64(text) { return u }
        if let i = Int64(text) { return UInt64(bitPattern: i) }
        if v.typeName == "integer" {
            throw APIError.invalid(name(key), "`\(name(key))` must be an integer within 64 bits, written without a fraction or exponent, not \(text).")
        }
        throw wrongType(key, "an integer")
    }

    /// Token ids, each below `vocabularySize`; `param` names the array in the error.
    static func tokenIDs(_ items: [JSONValue], param: String, vocabularySize: Int) throws -> [Int32] {
        try items.map {
            guard let i = $0.integerValue, i >= 0, i < vocabularySize else {
                throw APIError.invalid(param, "`\(param)` must hold token ids below \(vocabularySize).")
            }
            return Int32(i)
        }
    }

    func array(_ key: String) throws -> [JSONValue]? {
        guard let v = raw(key) else { return nil }
        guard let a = v.arrayValue else { throw wrongType(key, "an array") }
        return a
    }

    func object(_ key: String) throws -> RequestReader? {
        guard let v = raw(key) else { return nil }
        return try RequestReader(v, path: name(key))
    }

    /// `stop`: a string or an array of at most 4 strings.
    func stopSequences(_ key: String = "stop") throws -> [String] {
        guard let v = raw(key) else { return [] }
        if let s = v.stringValue { return s.isEmpty ? [] : [s] }
        guard let items = v.arrayValue else { throw wrongType(key, "a string or an array of strings") }
        guard items.count <= 4 else { throw APIError.invalid(name(key), "`\(name(key))` may hold at most 4 sequences, not \(items.count).") }
        return try items.enumerated().compactMap { i, item in
            guard let s = item.stringValue else { throw APIError.invalid("\(name(key))[\(i)]", "`\(name(key))[\(i)]` must be a string.", code: "invalid_type") }
            return s.isEmpty ? nil : s
        }
    }
}
