import PlinthJSON

extension JinjaValue {
    /// Reads JSON as Python's `json.loads` does: keys keep their order, a repeated key keeps its
    /// first position and last value, integers stay integers, `NaN` and `Infinity` are numbers.
    struct Builder: JSONTreeBuilder {
        /// Python's `json` gives up at about this nesting depth (its recursion limit).
        static let options = JSONReaderOptions(maxDepth: 1000, allowNonFiniteNumbers: true)

        func scalar(_ scalar: JSONScalar, complete: Bool) -> JinjaValue {
            switch scalar {
            case .null: return .null
            case .bool(let b): return .bool(b)
            case .string(let s): return .string(s)
            case .number(let text):
                if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" || $0.isLetter }), let n = Int(text) {
                    return .int(n)
                }
                return .double(Double(text) ?? .nan)
            }
        }

        func array(_ elements: [JinjaValue], complete: Bool) -> JinjaValue { .array(elements) }

        func object(_ members: [(key: String, value: JinjaValue)], complete: Bool) -> JinjaValue {
            .object(JinjaObject(members.map { ($0.key, $0.value) }))
        }
    }
}

extension Jinja {
    /// Serializes template values exactly as Python's `json.dumps` does, with its `indent`,
    /// `separators`, `sort_keys` and `ensure_ascii` options: this is how HuggingFace's `tojson`
    /// filter prints tool definitions and tool-call arguments. The layout is the shared JSON
    /// writer's; what is Python's here is which values serialize, how keys and floats print,
    /// and the key order.
    struct JSONDumper {
        let format: JSONFormat
        let sortKeys: Bool

        init(indent: String?, separators: (String, String)?, sortKeys: Bool, ensureASCII: Bool) {
            format = .python(indent: indent, separators: separators.map { (item: $0.0, key: $0.1) }, ensureASCII: ensureASCII)
            self.sortKeys = sortKeys
        }

        func dump(_ value: Value, at loc: TemplateSourceLocation) throws(ChatTemplateError) -> String {
            var writer = JSONWriter(format: format)
            try write(value, to: &writer, loc)
            return writer.text
        }

        private func write(_ value: Value, to w: inout JSONWriter, _ loc: TemplateSourceLocation) throws(ChatTemplateError) {
            switch value {
            case .none: w.null()
            case .bool(let b): w.bool(b)
            case .int(let i): w.number(String(i))
            case .double(let d): w.number(JSONDumper.float(d))
            case .string(let s), .markup(let s): w.string(s)
            case .array(let items), .tuple(let items):
                w.beginArray()
                for item in items { try write(item, to: &w, loc) }
                w.endArray()
            case .dict(let d):
                var entries: [(String, Value)] = []
                var originalKeys: [Value] = []
                for (k, v) in d.entries {
                    let key: String
                    switch k {
                    case .string(let s), .markup(let s): key = s
                    case .int(let i): key = String(i)
                    case .double(let x): key = JSONDumper.float(x)
                    case .bool(let b): key = b ? "true" : "false"
                    case .none: key = "null"
                    default:
                        throw .invalidOperation("keys must be str, int, float, bool or None, not \(k.typeName)", at: loc)
                    }
                    entries.append((key, v))
                    originalKeys.append(k)
                }
                if sortKeys {
                    let order = try sortedIndices(originalKeys, loc)
                    entries = order.map { entries[$0] }
                }
                w.beginObject()
                for (key, v) in entries {
                    w.key(key)
                    try write(v, to: &w, loc)
                }
                w.endObject()
            default:
                throw .invalidOperation("Object of type \(value.typeName) is not JSON serializable", at: loc)
            }
        }

        private func sortedIndices(_ keys: [Value], _ loc: TemplateSourceLocation) throws(ChatTemplateError) -> [Int] {
            var indices = Array(keys.indices)
            try Sorting.stableSort(&indices) { (a, b) throws(ChatTemplateError) in
                try Operators.order(keys[a], keys[b], "<", loc) < 0
            }
            return indices
        }

        static func float(_ d: Double) -> String {
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
            return PythonText.floatRepr(d)
        }
    }
    /// A stable merge sort whose comparison may throw (Python's sort is stable, and comparing
    /// values of different types is an error there).
    enum Sorting {
        static func stableSort<T>(_ items: inout [T], by less: (T, T) throws(ChatTemplateError) -> Bool) throws(ChatTemplateError) {
            guard items.count > 1 else { return }
            var buffer = items
            var width = 1
            while width < items.count {
                var start = 0
                while start < items.count {
                    let mid = min(start + width, items.count)
                    let end = min(start + 2 * width, items.count)
                    var i = start, j = mid, k = start
                    while i < mid && j < end {
                        if try less(items[j], items[i]) {
                            buffer[k] = items[j]; j += 1
                        } else {
                            buffer[k] = items[i]; i += 1
                        }
                        k += 1
                    }
                    while i < mid { buffer[k] = items[i]; i += 1; k += 1 }
                    while j < end { buffer[k] = items[j]; j += 1; k += 1 }
                    start += 2 * width
                }
                swap(&items, &buffer)
                width *= 2
            }
        }
    }
}
