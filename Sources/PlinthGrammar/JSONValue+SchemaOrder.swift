extension JSONValue {
    /// This value with object members reordered the way the decoder generates them for
    /// `schema`: declared properties first, in declaration order (or `x-order`), then required
    /// but undeclared properties in `required` order, then any others in their original order.
    /// Under `anyOf`/`oneOf` the order is that of the first alternative the value fits, since
    /// the decoder generates each alternative in its own order. Useful to compare existing JSON
    /// with constrained output.
    public func reordered(forSchema schema: JSONValue) -> JSONValue {
        reordered(schema, root: schema, depth: 0)
    }

    private func reordered(_ schema: JSONValue, root: JSONValue, depth: Int) -> JSONValue {
        guard depth < 64 else { return self }
        let subs = JSONValue.applicable(self, schema, root: root)
        switch self {
        case .object(let members):
            var order: [String] = []
            var propSchemas: [String: [JSONValue]] = [:]
            var extra: [JSONValue] = []
            var patterns: [(regex: String, schema: JSONValue)] = []
            for s in subs {
                for (re, ps) in s["patternProperties"]?.objectMembers ?? [] { patterns.append((re, ps)) }
                var names = s["properties"]?.objectMembers?.map(\.key) ?? []
                if let xo = s["x-order"]?.arrayValue?.compactMap(\.stringValue) {
                    names.sort { (xo.firstIndex(of: $0) ?? Int.max) < (xo.firstIndex(of: $1) ?? Int.max) }
                }
                for n in names where !order.contains(n) { order.append(n) }
                for (k, v) in s["properties"]?.objectMembers ?? [] { propSchemas[k, default: []].append(v) }
                if let ap = s["additionalProperties"] { extra.append(ap) }
            }
            // Required names that no `properties` declares come next, as the object rule emits them.
            for s in subs {
                for n in s["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where !order.contains(n) { order.append(n) }
            }
            let sorted = members.enumerated().sorted { a, b in
                let x = order.firstIndex(of: a.element.key) ?? (order.count + a.offset)
                let y = order.firstIndex(of: b.element.key) ?? (order.count + b.offset)
                return x < y
            }.map(\.element)
            return .object(sorted.map { m in
                let matched = patterns.filter { (try? SchemaCompiler.matches(m.key, pattern: $0.regex)) == true }.map(\.schema)
                let cands = propSchemas[m.key] ?? (matched + extra)
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

    /// The subschemas that apply to `value` together with `s`: `$ref` targets and `allOf`
    /// members, plus, of each `anyOf`/`oneOf`, the first alternative that `value` fits (all of
    /// them when none visibly does).
    private static func applicable(_ value: JSONValue, _ s: JSONValue, root: JSONValue) -> [JSONValue] {
        for branch in branches(s, root: root, depth: 0) where branch.allSatisfy({ value.fits($0, root: root, depth: 0) }) {
            return branch
        }
        return flatten(s, root: root, depth: 0)
    }

    /// The ways `s` can be satisfied: each a list of subschemas that must hold together (at
    /// most 64; beyond that, one list with every subschema).
    private static func branches(_ s: JSONValue, root: JSONValue, depth: Int) -> [[JSONValue]] {
        var budget = 256
        return expand(s, root: root, depth: depth, budget: &budget) ?? [flatten(s, root: root, depth: depth)]
    }

    /// nil once the budget of visited subschemas is spent or the alternatives pass 64.
    private static func expand(_ s: JSONValue, root: JSONValue, depth: Int, budget: inout Int) -> [[JSONValue]]? {
        budget -= 1
        guard budget > 0 else { return nil }
        guard depth < 16, case .object = s else { return [[]] }
        var out: [[JSONValue]] = [[s]]
        func combine(_ alts: [[JSONValue]]) -> Bool {
            var next: [[JSONValue]] = []
            for x in out { for y in alts { next.append(x + y) } }
            out = next
            return out.count <= 64
        }
        if let r = s["$ref"]?.stringValue, let t = resolve(r, root: root) {
            guard let a = expand(t, root: root, depth: depth + 1, budget: &budget), combine(a) else { return nil }
        }
        for sub in s["allOf"]?.arrayValue ?? [] {
            guard let a = expand(sub, root: root, depth: depth + 1, budget: &budget), combine(a) else { return nil }
        }
        for k in ["anyOf", "oneOf"] {
            guard let alts = s[k]?.arrayValue, !alts.isEmpty else { continue }
            var all: [[JSONValue]] = []
            for alt in alts {
                guard let a = expand(alt, root: root, depth: depth + 1, budget: &budget) else { return nil }
                all += a
            }
            guard combine(all) else { return nil }
        }
        return out
    }

    private static func resolve(_ r: String, root: JSONValue) -> JSONValue? {
        guard r.hasPrefix("#") else { return nil }
        var cur: JSONValue? = root
        for part in r.dropFirst(2).split(separator: "/") where !r.dropFirst(2).isEmpty {
            let key = String(part).replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            if let c = cur, case .array(let a) = c, let i = Int(key), i < a.count { cur = a[i] } else { cur = cur?[key] }
        }
        return cur
    }

    /// A cheap, partial validity check (type, enum/const, required, closed objects, property
    /// values), enough to tell `anyOf`/`oneOf` alternatives apart. Unknown keywords pass.
    private func fits(_ s: JSONValue, root: JSONValue, depth: Int) -> Bool {
        guard depth < 8 else { return true }
        if case .bool(let b) = s { return b }
        guard case .object = s else { return true }
        if let r = s["$ref"]?.stringValue, let t = JSONValue.resolve(r, root: root), !fits(t, root: root, depth: depth + 1) { return false }
        if let t = s["type"] {
            let names = t.arrayValue?.compactMap(\.stringValue) ?? t.stringValue.map { [$0] } ?? []
            let mine = typeName
            if !names.isEmpty && !(names.contains(mine) || (mine == "integer" && names.contains("number"))) { return false }
        }
        if let e = s["enum"]?.arrayValue, !e.contains(self) { return false }
        if let c = s["const"], c != self { return false }
        for sub in s["allOf"]?.arrayValue ?? [] where !fits(sub, root: root, depth: depth + 1) { return false }
        for k in ["anyOf", "oneOf"] {
            if let alts = s[k]?.arrayValue, !alts.isEmpty, !alts.contains(where: { fits($0, root: root, depth: depth + 1) }) { return false }
        }
        if case .object(let members) = self {
            for r in s["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where !members.contains(where: { $0.key == r }) { return false }
            let props = s["properties"]?.objectMembers ?? []
            for (k, v) in members {
                if let ps = props.first(where: { $0.key == k })?.value {
                    if !v.fits(ps, root: root, depth: depth + 1) { return false }
                } else if s["patternProperties"] == nil, let ap = s["additionalProperties"], !v.fits(ap, root: root, depth: depth + 1) {
                    return false
                }
            }
        }
        return true
    }

    /// The schema and the subschemas that apply alongside it ($ref, allOf, anyOf, oneOf).
    private static func flatten(_ s: JSONValue, root: JSONValue, depth: Int) -> [JSONValue] {
        guard depth < 16, case .object = s else { return [] }
        var out = [s]
        if let r = s["$ref"]?.stringValue, let c = resolve(r, root: root) { out += flatten(c, root: root, depth: depth + 1) }
        for k in ["allOf", "anyOf", "oneOf"] {
            for sub in s[k]?.arrayValue ?? [] { out += flatten(sub, root: root, depth: depth + 1) }
        }
        return out
    }
}
