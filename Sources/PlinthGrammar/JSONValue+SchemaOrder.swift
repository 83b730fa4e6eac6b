extension JSONValue {
    /// This value with object members reordered the way the decoder generates them for
    /// `schema`: declared properties first, in declaration order (or `x-order`), then required
    /// but undeclared properties in `required` order, then any others in their original order.
    /// Under `anyOf`/`oneOf` the order is that of the first alternative the value fits, since
    /// the decoder generates each alternative in its own order. Useful to compare existing JSON
    /// with constrained output.
    public func reordered(forSchema schema: JSONValue) -> JSONValue {
        let parser = SchemaParser(schema)
        guard let root = try? parser.root() else { return self }
        return reordered(root, SchemaAlgebra(parser: parser, options: GrammarOptions(lenient: true, additionalPropertiesByDefault: true)), depth: 0)
    }

    private func reordered(_ schema: Schema, _ algebra: SchemaAlgebra, depth: Int) -> JSONValue {
        guard depth < 64, let n = algebra.generated(schema, for: self) else { return self }
        func sub(_ v: JSONValue, _ s: Schema?) -> JSONValue { s.map { v.reordered($0, algebra, depth: depth + 1) } ?? v }
        switch self {
        case .object(let members):
            let f = n.object
            var order = f.orderedProperties.map(\.name)
            for name in f.required ?? [] where !order.contains(name) { order.append(name) }
            func rank(_ m: (offset: Int, element: (key: String, value: JSONValue))) -> Int { order.firstIndex(of: m.element.key) ?? order.count + m.offset }
            return .object(members.enumerated().sorted { rank($0) < rank($1) }.map { _, m in
                let pattern = f.patternProperties?.first { (try? StringAutomata.matches(m.key, pattern: $0.name)) == true }
                return (m.key, sub(m.value, f.property(m.key) ?? pattern?.schema ?? f.additionalProperties))
            })
        case .array(let items):
            let a = n.array
            return .array(items.enumerated().map { i, v in sub(v, i < a.prefixItems.count ? a.prefixItems[i] : a.items) })
        default:
            return self
        }
    }
}
