/// The `format`s the decoder enforces, each as an exact regular expression over the whole
/// string (matched with ``StringAutomata/matches(_:pattern:fullMatch:)``'s full-match mode).
enum SchemaFormats {
    /// The expression for a format name, or nil for a format the decoder does not know.
    static func pattern(_ name: String) -> String? { patterns[name] }

    static let patterns: [String: String] = {
        // Calendar-exact (RFC 3339 full-date): day ranges per month, 29 February only in
        // Gregorian leap years (divisible by 4, centuries only when divisible by 400).
        let leap = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
        let date = "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))|\(leap)-02-29)"
        let time = "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
        let octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
        let hex = "[0-9a-fA-F]"
        return [
            "date": date,
            "time": time,
            "date-time": date + "[Tt]" + time,
            "uuid": "\(hex){8}-\(hex){4}-\(hex){4}-\(hex){4}-\(hex){12}",
            "email": "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*",
            "ipv4": "\(octet)\\.\(octet)\\.\(octet)\\.\(octet)",
            "hostname": "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*",
            "uri": "[A-Za-z][A-Za-z0-9+.-]*:[^\\s\"<>\\\\^`{|}]*",
            "duration": "P(([0-9]+Y)?([0-9]+M)?([0-9]+W)?([0-9]+D)?(T([0-9]+H)?([0-9]+M)?([0-9]+(\\.[0-9]+)?S)?)?)",
        ]
    }()
}
