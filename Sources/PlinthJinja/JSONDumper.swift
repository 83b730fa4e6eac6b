extension Jinja {
    /// Serializes template values exactly as Python's `json.dumps` does, with its `indent`,
    /// `separators`, `sort_keys` and `ensure_ascii` options: this is how HuggingFace's `tojson`
    /// filter prints tool definitions and tool-call arguments.
    struct JSONDumper {
        /// The indentation unit; nil for a single line.
        let indent: String?
        let itemSeparator: String
        let keySeparator: String
        let sortKeys: Bool
        let ensureASCII: Bool

        init(indent: String?, separators: (String, String)?, sortKeys: Bool, ensureASCII: Bool) {
            self.indent = indent
            if let separators {
                (itemSeparator, keySeparator) = separators
            } else {
                itemSeparator = indent == nil ? ", " : ","
                keySeparator = ": "
            }
            self.sortKeys = sortKeys
            self.ensureASCII = ensureASCII
        }

        func dump(_ value: Value, at loc: TemplateSourceLocation) throws(ChatTemplateError) -> String {
            var out = ""
            try write(value, level: 0, into: &out, loc)
            return out
        }

        private func write(_ value: Value, level: Int, into out: inout String, _ loc: TemplateSourceLocation) throws(ChatTemplateError) {
            switch value {
            case .none: out += "null"
            case .bool(let b): out += b ? "true" : "false"
            case .int(let i): out += String(i)
            case .double(let d): out += JSONDumper.float(d)
            case .string(let s): out += quote(s)
            case .array(let items), .tuple(let items):
                if items.isEmpty { out += "[]"; return }
                out += "["
                for (n, item) in items.enumerated() {
                    if n > 0 { out += itemSeparator }
                    newline(level + 1, &out)
                    try write(item, level: level + 1, into: &out, loc)
                }
                newline(level, &out)
                out += "]"
            case .dict(let d):
                if d.isEmpty { out += "{}"; return }
                var entries: [(String, Value)] = []
                var originalKeys: [Value] = []
                for (k, v) in d.entries {
                    let key: String
                    switch k {
                    case .string(let s): key = s
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
                out += "{"
                for (n, (key, v)) in entries.enumerated() {
                    if n > 0 { out += itemSeparator }
                    newline(level + 1, &out)
                    out += quote(key)
                    out += keySeparator
                    try write(v, level: level + 1, into: &out, loc)
                }
                newline(level, &out)
                out += "}"
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

        private func newline(_ level: Int, _ out: inout String) {
            guard let indent else { return }
            out += "\n"
            for _ in 0..<level { out += indent }
        }

        static func float(_ d: Double) -> String {
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
            return PythonText.floatRepr(d)
        }

        private func quote(_ s: String) -> String {
            var out = ""
            JSONString.append(s, to: &out, asciiOnly: ensureASCII)
            return out
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
