import Foundation

/// Reads a JSON Schema document (draft 2020-12, or draft-07 and earlier) into typed
/// ``Schema``s: keyword shapes are checked here (errors carry the JSON pointer of the bad
/// keyword), local `$ref`s are resolved to pointers, and keywords the decoder cannot enforce are
/// kept on the node for the compiler to refuse (or find vacuous).
///
/// Subschemas under a reference are read when the reference is first followed, once each.
final class SchemaParser {
    let document: JSONValue
    /// Draft-07 and earlier: `$ref` replaces its siblings instead of joining them.
    let draft7: Bool
    /// Every subschema read through a reference, by resolved pointer.
    private var byPointer: [ExactString: Schema] = [:]
    /// The values references resolved to, by pointer.
    private var targets: [ExactString: JSONValue] = [:]

    /// Keywords that only annotate.
    static let annotations: Set<String> = [
        "title", "description", "default", "examples", "example", "$comment", "$schema", "$id", "id", "$anchor",
        "$dynamicAnchor", "$recursiveAnchor", "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
        "contentMediaType", "contentEncoding", "contentSchema", "x-order", "$vocabulary", "discriminator", "nullable",
    ]
    /// Assertions the decoder does not enforce (``SchemaNode/unenforced``).
    static let unenforced: Set<String> = [
        "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
        "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains",
        "$dynamicRef", "$recursiveRef",
    ]

    /// Schema resources (the root, and subschemas with an `$id` of their own): absolute URI and
    /// pointer, the root first. References inside one resolve against its URI.
    private var resources: [(uri: String, pointer: String)] = []
    /// Whether the document says it is draft 2019-09 or later, where `$ref`'s siblings apply.
    private let refSiblingsApply: Bool
    /// The base a root without an `$id` has, so that relative `$id`s resolve against something.
    static let defaultBase = "https://plinth.invalid/schema.json"

    init(_ document: JSONValue) {
        self.document = document
        let schemaURI = document["$schema"]?.stringValue ?? ""
        draft7 = schemaURI.contains("draft-07") || schemaURI.contains("draft-06") || schemaURI.contains("draft-04")
        targets[ExactString("#")] = document
        refSiblingsApply = schemaURI.contains("2020-12") || schemaURI.contains("2019-09")
        collectResources(document, "#", base: Self.defaultBase)
    }

    /// Records every `$id` that names a resource (not a plain-name fragment), resolved against
    /// its parent's, skipping values that are data rather than schemas.
    private func collectResources(_ v: JSONValue, _ ptr: String, base: String) {
        switch v {
        case .object(let m):
            var base = base
            // Up to draft-07 `$ref` makes its siblings, `$id` too, ignored: so too (for `$id`)
            // where the document doesn't say it is 2019-09 or later. The root's `$id` (or
            // draft-04's `id`) is the document's base in every draft.
            let root = ptr == "#"
            if root || !(!refSiblingsApply && m.contains { $0.key == "$ref" }),
               let id = (m.first { $0.key == "$id" } ?? (draft7 || root ? m.first { $0.key == "id" } : nil))?.value.stringValue,
               !id.hasPrefix("#"), let uri = URL(string: id, relativeTo: URL(string: base))?.absoluteString {
                base = Self.withoutFragment(uri)
                resources.append((base, ptr))
            } else if root {
                // No URI names this root: its made-up base must not match a nested `$id`.
                resources.append(("", ptr))
            }
            for (k, x) in m where !["enum", "const", "default", "examples", "example"].contains(k) {
                collectResources(x, ptr + "/" + escapePointer(k), base: base)
            }
        case .array(let a):
            for (i, x) in a.enumerated() { collectResources(x, ptr + "/\(i)", base: base) }
        default: break
        }
    }

    private static func withoutFragment(_ uri: String) -> String {
        uri.firstIndex(of: "#").map { String(uri[..<$0]) } ?? uri
    }

    /// The resource a pointer lies in: the one with the longest pointer that contains it.
    private func resource(containing ptr: String) -> (uri: String, pointer: String) {
        resources.filter { ptr == $0.pointer || ptr.hasPrefix($0.pointer + "/") }.max { $0.pointer.count < $1.pointer.count }
            ?? ("", "#")
    }

    /// The base URI references in a resource resolve against (a root without `$id` has a
    /// made-up one).
    private func base(of resource: (uri: String, pointer: String)) -> String {
        resource.uri.isEmpty ? Self.defaultBase : resource.uri
    }

    /// A JSON pointer fragment spelled one way: `%24defs` and `$defs` name one member.
    private func canonicalPointer(_ fragment: String) -> String {
        fragment.split(separator: "/", omittingEmptySubsequences: false).map { escapePointer(unescape($0)) }.joined(separator: "/")
    }

    /// The document's root schema.
    func root() throws(GrammarError) -> Schema { try schema(at: "#") }

    /// The subschema at a pointer that ``resolve(_:pointer:)`` returned.
    func schema(at pointer: String) throws(GrammarError) -> Schema {
        if let s = byPointer[ExactString(pointer)] { return s }
        guard let value = targets[ExactString(pointer)] else { throw .unresolvedReference(pointer, pointer: pointer) }
        let s = try parse(value, pointer)
        byPointer[ExactString(pointer)] = s
        return s
    }

    // MARK: Subschemas

    func parse(_ value: JSONValue, _ ptr: String) throws(GrammarError) -> Schema {
        switch value {
        case .bool(true): return .any
        case .bool(false): return .never
        case .object(let members):
            guard let ref = members.first(where: { $0.key == "$ref" })?.value else { return .node(try node(members, ptr)) }
            guard case .string(let r) = ref else { throw .invalidSchema(reason: "$ref must be a string", pointer: ptr + "/$ref") }
            let target = try resolve(r, pointer: ptr + "/$ref")
            if draft7 { return .ref(target) }
            // 2020-12: the reference is one more conjunct beside its siblings, first of them.
            var n = try node(members.filter { $0.key != "$ref" }, ptr)
            if !n.hasAssertions { return .ref(target) }
            n.allOf.insert(.ref(target), at: 0)
            return .node(n)
        default:
            throw .invalidSchema(reason: "a schema must be an object or a boolean", pointer: ptr)
        }
    }

    private func subschemas(_ v: JSONValue, _ ptr: String, nonEmpty: Bool) throws(GrammarError) -> [Schema] {
        guard case .array(let xs) = v, !(nonEmpty && xs.isEmpty) else {
            throw .invalidSchema(reason: "\(lastComponent(ptr)) must be a\(nonEmpty ? " non-empty" : "n") array", pointer: ptr)
        }
        var out: [Schema] = []
        out.reserveCapacity(xs.count)
        for (i, x) in xs.enumerated() { out.append(try parse(x, ptr + "/\(i)")) }
        return out
    }

    private func namedSubschemas(_ v: JSONValue, _ ptr: String) throws(GrammarError) -> [ObjectFacet.Property] {
        guard case .object(let m) = v else { throw .invalidSchema(reason: "\(lastComponent(ptr)) must be an object", pointer: ptr) }
        var out: [ObjectFacet.Property] = []
        out.reserveCapacity(m.count)
        for (k, x) in m { out.append(.init(name: k, schema: try parse(x, ptr + "/" + escapePointer(k)))) }
        return out
    }

    private func lastComponent(_ ptr: String) -> Substring { ptr[ptr.index(after: ptr.lastIndex(of: "/") ?? ptr.startIndex)...] }

    /// A schema object's keywords (other than `$ref`) as a node.
    func node(_ members: [(key: String, value: JSONValue)], _ ptr: String) throws(GrammarError) -> SchemaNode {
        var n = SchemaNode()
        var enumValues: [JSONValue]?, constValue: JSONValue?
        var minimum: DecimalNumber?, maximum: DecimalNumber?, exclusiveMinimum: DecimalNumber?, exclusiveMaximum: DecimalNumber?
        var minimumIsExclusive = false, maximumIsExclusive = false
        var tupleItems: [Schema]?, itemsSchema: Schema?, additionalItems: Schema?, prefixItems: [Schema]?
        for (k, v) in members {
            let kptr = ptr + "/" + k
            switch k {
            case "type": n.types = try types(v, kptr)
            case "enum":
                guard case .array(let xs) = v else { throw .invalidSchema(reason: "enum must be an array", pointer: kptr) }
                enumValues = xs
            case "const": constValue = v
            case "allOf": n.allOf = try subschemas(v, kptr, nonEmpty: true)
            case "anyOf": n.anyOf = try subschemas(v, kptr, nonEmpty: true)
            case "oneOf": n.oneOf = try subschemas(v, kptr, nonEmpty: true)
            // Strings
            case "minLength": n.string.minLength = try count(v, kptr, least: true)
            case "maxLength": n.string.maxLength = try count(v, kptr, least: false)
            case "pattern":
                guard case .string(let p) = v else { throw .invalidSchema(reason: "pattern must be a string", pointer: kptr) }
                n.string.patterns = [p]
            case "format":
                if case .string(let f) = v, !f.isEmpty { n.string.format = f }
            // Numbers
            case "minimum": minimum = try bound(v, kptr)
            case "maximum": maximum = try bound(v, kptr)
            // Draft-04's boolean forms make `minimum`/`maximum` exclusive.
            case "exclusiveMinimum": if case .bool(let b) = v { minimumIsExclusive = b } else { exclusiveMinimum = try bound(v, kptr) }
            case "exclusiveMaximum": if case .bool(let b) = v { maximumIsExclusive = b } else { exclusiveMaximum = try bound(v, kptr) }
            case "multipleOf":
                guard let m = try bound(v, kptr), !m.isZero, !m.negative else {
                    throw .invalidSchema(reason: "multipleOf must be positive", pointer: kptr)
                }
                n.number.multipleOf = m
            // Arrays
            case "prefixItems": prefixItems = try subschemas(v, kptr, nonEmpty: false)
            case "items":
                if case .array = v { tupleItems = try subschemas(v, kptr, nonEmpty: false) } else { itemsSchema = try parse(v, kptr) }
            case "additionalItems": additionalItems = try parse(v, kptr)
            case "minItems": n.array.minItems = try count(v, kptr, least: true)
            case "maxItems": n.array.maxItems = try count(v, kptr, least: false)
            case "uniqueItems": n.array.uniqueItems = v == .bool(true)
            // Objects
            case "properties": n.object.properties = try namedSubschemas(v, kptr)
            case "patternProperties": n.object.patternProperties = try namedSubschemas(v, kptr)
            case "additionalProperties": n.object.additionalProperties = try parse(v, kptr)
            case "required":
                guard case .array(let xs) = v else { throw .invalidSchema(reason: "required must be an array", pointer: kptr) }
                var names: [String] = []
                for x in xs { if let s = x.stringValue, !names.contains(s) { names.append(s) } }
                n.object.required = names
            case "propertyNames": n.object.propertyNames = try parse(v, kptr)
            case "minProperties": n.object.minProperties = try count(v, kptr, least: true)
            case "maxProperties": n.object.maxProperties = try count(v, kptr, least: false)
            case "x-order": n.object.order = v.arrayValue?.compactMap(\.stringValue)
            default:
                if SchemaParser.unenforced.contains(k) { n.unenforced.append(.init(name: k, value: v)) }
            }
        }
        typealias Bound = NumberFacet.Bound
        n.number.lower = NumberFacet.tighter(minimum.map { Bound(value: $0, exclusive: minimumIsExclusive) },
                                             exclusiveMinimum.map { Bound(value: $0, exclusive: true) }, lower: true)
        n.number.upper = NumberFacet.tighter(maximum.map { Bound(value: $0, exclusive: maximumIsExclusive) },
                                             exclusiveMaximum.map { Bound(value: $0, exclusive: true) }, lower: false)
        if let c = constValue { n.literals = enumValues.map { e in e.contains(c) ? [c] : [] } ?? [c] } else { n.literals = enumValues }
        // Positions: `prefixItems`, or draft-07's array `items` with `additionalItems` for the rest.
        n.array.isPositional = tupleItems != nil || itemsSchema != nil || additionalItems != nil || prefixItems != nil
        if let tuple = tupleItems {
            n.array.prefixItems = tuple
            n.array.items = additionalItems
            n.array.itemsIsAdditional = true
        } else {
            n.array.items = itemsSchema
        }
        if let p = prefixItems { n.array.prefixItems = p }
        return n
    }

    private func types(_ v: JSONValue, _ ptr: String) throws(GrammarError) -> JSONTypes {
        guard let entries = v.stringValue.map({ [JSONValue.string($0)] }) ?? v.arrayValue else {
            throw .invalidSchema(reason: "type must be a string or an array", pointer: ptr)
        }
        var t: JSONTypes = []
        for x in entries {
            guard let name = x.stringValue else { throw .invalidSchema(reason: "type entries must be strings", pointer: ptr) }
            guard let one = JSONTypes.names[name] else { throw .invalidSchema(reason: "unknown type '\(name)'", pointer: ptr) }
            t.insert(one)
        }
        if t.contains(.number) { t.remove(.integer) }
        return t
    }

    /// A length or count keyword's value. One past what an integer holds is no bound as a
    /// maximum and more than any output as a minimum (it was dropped, unenforced).
    private func count(_ v: JSONValue, _ ptr: String, least: Bool) throws(GrammarError) -> Int? {
        guard let t = v.numberText, let d = DecimalNumber(t), d.isInteger, !d.negative || d.isZero else {
            throw .invalidSchema(reason: "\(lastComponent(ptr)) must be a non-negative integer", pointer: ptr)
        }
        if let n = d.intValue { return n }
        if !least { return nil }
        throw .budgetExceeded("\(lastComponent(ptr)) at \(ptr) is \(t), more than any generated value can hold")
    }

    private func bound(_ v: JSONValue, _ ptr: String) throws(GrammarError) -> DecimalNumber? {
        if case .bool = v { return nil } // draft-04's flags sit under the same names
        guard let t = v.numberText, let d = DecimalNumber(t) else {
            throw .invalidSchema(reason: "\(lastComponent(ptr)) must be a number", pointer: ptr)
        }
        return d
    }

    // MARK: References

    /// The pointer a reference names. A fragment alone (`#`, `#/…`, `#anchor`) stays in the
    /// reference's resource, read as written (spaces and all); anything else is a URI resolved
    /// against that resource's, naming the root or a subschema with an `$id` of its own.
    func resolve(_ ref: String, pointer ptr: String) throws(GrammarError) -> String {
        var target = resource(containing: ptr), fragment = String(ref.dropFirst())
        if !ref.isEmpty && !ref.hasPrefix("#") {
            guard let uri = URL(string: ref, relativeTo: URL(string: base(of: target)))?.absoluteString,
                  let named = resources.first(where: { !$0.uri.isEmpty && $0.uri == Self.withoutFragment(uri) }) else {
                throw .unresolvedReference(ref, pointer: ptr)
            }
            target = named
            fragment = uri.firstIndex(of: "#").map { String(uri[uri.index(after: $0)...]) } ?? ""
        }
        if !fragment.isEmpty && !fragment.hasPrefix("/") {
            // An anchor, in its own resource.
            guard let at = value(at: target.pointer),
                  let (v, p) = findAnchor(at, unescape(Substring(fragment)), target.pointer, resource: target.pointer) else {
                throw .unresolvedReference(ref, pointer: ptr)
            }
            targets[ExactString(p)] = v
            return p
        }
        let r = target.pointer + canonicalPointer(fragment)
        if targets[ExactString(r)] != nil { return r }
        guard let cur = value(at: r) else { throw .unresolvedReference(ref, pointer: ptr) }
        targets[ExactString(r)] = cur
        return r
    }

    /// The document's value at a pointer (`#/…`), if there is one.
    private func value(at pointer: String) -> JSONValue? {
        var cur = document
        guard pointer != "#" else { return cur }
        for part in pointer.dropFirst(2).split(separator: "/", omittingEmptySubsequences: false) {
            let key = unescape(part)
            switch cur {
            case .object(let m):
                guard let v = m.first(where: { $0.key == key })?.value else { return nil }
                cur = v
            case .array(let a):
                guard let i = Int(key), i >= 0, i < a.count else { return nil }
                cur = a[i]
            default: return nil
            }
        }
        return cur
    }

    private func unescape(_ s: Substring) -> String {
        if !s.utf8.contains(where: { $0 == 0x7E || $0 == 0x25 }) { return String(s) }
        var r = String(s).replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
        if r.contains("%"), let dec = r.removingPercentEncoding { r = dec }
        return r
    }

    /// `resource`: the pointer of the resource searched, whose subschemas that are resources of
    /// their own are left out (the same anchor may name another schema there).
    private func findAnchor(_ v: JSONValue, _ name: String, _ p: String, resource: String) -> (JSONValue, String)? {
        switch v {
        case .object(let m):
            if p != resource, resources.contains(where: { $0.pointer == p }) { return nil }
            if m.contains(where: { ($0.key == "$anchor" && $0.value.stringValue == name) || ($0.key == "$id" && $0.value.stringValue == "#" + name) }) {
                return (v, p)
            }
            for (k, x) in m { if let f = findAnchor(x, name, p + "/" + escapePointer(k), resource: resource) { return f } }
        case .array(let a):
            for (i, x) in a.enumerated() { if let f = findAnchor(x, name, p + "/\(i)", resource: resource) { return f } }
        default: break
        }
        return nil
    }
}

/// A property name as a JSON pointer component (RFC 6901).
func escapePointer(_ s: String) -> String {
    if !s.utf8.contains(where: { $0 == 0x7E || $0 == 0x2F }) { return s }
    return s.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
}
