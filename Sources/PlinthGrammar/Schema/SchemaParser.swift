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
    let rootID: String?
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

    init(_ document: JSONValue) {
        self.document = document
        let schemaURI = document["$schema"]?.stringValue ?? ""
        draft7 = schemaURI.contains("draft-07") || schemaURI.contains("draft-06") || schemaURI.contains("draft-04")
        rootID = (document["$id"] ?? document["id"])?.stringValue
        targets[ExactString("#")] = document
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
            case "minLength": n.string.minLength = v.integerValue
            case "maxLength": n.string.maxLength = v.integerValue
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
            case "minItems": n.array.minItems = v.integerValue
            case "maxItems": n.array.maxItems = v.integerValue
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
            case "minProperties": n.object.minProperties = v.integerValue
            case "maxProperties":
                n.object.maxProperties = v.integerValue
                if let m = n.object.maxProperties, m < 0 { throw .invalidSchema(reason: "maxProperties must not be negative", pointer: kptr) }
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

    private func bound(_ v: JSONValue, _ ptr: String) throws(GrammarError) -> DecimalNumber? {
        if case .bool = v { return nil } // draft-04's flags sit under the same names
        guard let t = v.numberText, let d = DecimalNumber(t) else {
            throw .invalidSchema(reason: "\(lastComponent(ptr)) must be a number", pointer: ptr)
        }
        return d
    }

    // MARK: References

    /// The pointer a local reference names (`#`, `#/…`, an anchor, or the root `$id` with either).
    func resolve(_ ref: String, pointer ptr: String) throws(GrammarError) -> String {
        var r = ref
        if let id = rootID, r.hasPrefix(id) { r = String(r.dropFirst(id.count)) }
        if r.isEmpty { r = "#" }
        guard r.hasPrefix("#") else { throw .unresolvedReference(ref, pointer: ptr) }
        if targets[ExactString(r)] != nil { return r }
        if !r.hasPrefix("#/") {
            let name = String(r.dropFirst())
            guard let (v, p) = findAnchor(document, name, "#") else { throw .unresolvedReference(ref, pointer: ptr) }
            targets[ExactString(p)] = v
            return p
        }
        var cur = document
        for part in r.dropFirst(2).split(separator: "/", omittingEmptySubsequences: false) {
            let key = unescape(part)
            switch cur {
            case .object(let m):
                guard let v = m.first(where: { $0.key == key })?.value else { throw .unresolvedReference(ref, pointer: ptr) }
                cur = v
            case .array(let a):
                guard let i = Int(key), i >= 0, i < a.count else { throw .unresolvedReference(ref, pointer: ptr) }
                cur = a[i]
            default: throw .unresolvedReference(ref, pointer: ptr)
            }
        }
        targets[ExactString(r)] = cur
        return r
    }

    private func unescape(_ s: Substring) -> String {
        if !s.utf8.contains(where: { $0 == 0x7E || $0 == 0x25 }) { return String(s) }
        var r = String(s).replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
        if r.contains("%"), let dec = r.removingPercentEncoding { r = dec }
        return r
    }

    private func findAnchor(_ v: JSONValue, _ name: String, _ p: String) -> (JSONValue, String)? {
        switch v {
        case .object(let m):
            if m.contains(where: { ($0.key == "$anchor" && $0.value.stringValue == name) || ($0.key == "$id" && $0.value.stringValue == "#" + name) }) {
                return (v, p)
            }
            for (k, x) in m { if let f = findAnchor(x, name, p + "/" + k) { return f } }
        case .array(let a):
            for (i, x) in a.enumerated() { if let f = findAnchor(x, name, p + "/\(i)") { return f } }
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
