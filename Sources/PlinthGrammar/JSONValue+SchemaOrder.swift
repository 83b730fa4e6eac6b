extension JSONValue {
    /// This value with object members reordered the way the decoder generates them for
    /// `schema`: declared properties first, in declaration order (or `x-order`), then any others
    /// in their original order. Useful to compare existing JSON with constrained output.
    public func reordered(forSchema schema: JSONValue) -> JSONValue {
        reordered(schema, root: schema, depth: 0)
    }

    private func reordered(_ schema: JSONValue, root: JSONValue, depth: Int) -> JSONValue {
        guard depth < 64 else { return self }
        let subs = JSONValue.flatten(schema, root: root, depth: 0)
        switch self {
        case .object(let members):
            var order: [String] = []
            var propSchemas: [String: [JSONValue]] = [:]
            var extra: [JSONValue] = []
            for s in subs {
                var names = s["properties"]?.objectMembers?.map(\.key) ?? []
                if let xo = s["x-order"]?.arrayValue?.compactMap(\.stringValue) {
                    names.sort { (xo.firstIndex(of: $0) ?? Int.max) < (xo.firstIndex(of: $1) ?? Int.max) }
                }
                for n in names where !order.contains(n) { order.append(n) }
                for (k, v) in s["properties"]?.objectMembers ?? [] { propSchemas[k, default: []].append(v) }
                if let ap = s["additionalProperties"] { extra.append(ap) }
            }
            let sorted = members.enumerated().sorted { a, b in
                let x = order.firstIndex(of: a.element.key) ?? (order.count + a.offset)
                let y = order.firstIndex(of: b.element.key) ?? (order.count + b.offset)
                return x < y
            }.map(\.element)
            return .object(sorted.map { m in
                let cands = propSchemas[m.key] ?? extra
                return (m.key, cands.first.map { m.value.reordered($0, root: root, depth: depth + 1) } ?? m.value)
            })
        case .array(let items):
            var prefix: [JSONValue] = []
            var rest: JSONValue? = nil
            for s in subs {
                if let p = s["prefixItems"]?.arrayValue { prefix = p }
                if let i = s["items"] { if let t = i.arrayValue { prefix = t } else { rest = i } }
            }
            return .array(items.enumerated().map { i, v in
                let s = i < prefix.count ? prefix[i] : rest
                return s.map { v.reordered($0, root: root, depth: depth + 1) } ?? v
            })
        default:
            return self
        }
    }

    /// The schema and the subschemas that apply alongside it ($ref, allOf, anyOf, oneOf).
    private static func flatten(_ s: JSONValue, root: JSONValue, depth: Int) -> [JSONValue] {
        guard depth < 16, case .object = s else { return [] }
        var out = [s]
        if let r = s["$ref"]?.stringValue, r.hasPrefix("#") {
            var cur: JSONValue? = root
            for part in r.dropFirst(2).split(separator: "/") where !r.dropFirst(2).isEmpty {
                let key = String(part).replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
                if let c = cur, case .array(let a) = c, let i = Int(key), i < a.count { cur = a[i] } else { cur = cur?[key] }
            }
            if let c = cur { out += flatten(c, root: root, depth: depth + 1) }
        }
        for k in ["allOf", "anyOf", "oneOf"] {
            for sub in s[k]?.arrayValue ?? [] { out += flatten(sub, root: root, depth: depth + 1) }
        }
        return out
    }
}
