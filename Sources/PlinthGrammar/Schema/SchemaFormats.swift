import Foundation

/// The `format`s the decoder enforces, each as an exact regular expression over the whole
/// string (matched with ``StringAutomata/matches(_:pattern:fullMatch:)``'s full-match mode),
/// written from the grammar of the RFC that defines it.
enum SchemaFormats {
    /// The expression for a format name, or nil for a format the decoder does not know.
    static func pattern(_ name: String) -> String? { patterns[name] }

    /// The most characters a format allows where its expression leaves them unbounded: a host
    /// name has at most 253 (RFC 1034; its labels' 63 are in the expression), a bound kept as a
    /// length so that it is counted rather than multiplied into the states.
    static func longest(_ name: String) -> Int? { name == "hostname" || name == "host-name" ? 253 : nil }

    /// Whether a known format's expression admits every string the format allows (so that its
    /// complement holds only strings the format refuses). Not so for `time` and `date-time`
    /// (leap seconds at other offsets), `email` (IPv6 literals), `regex` (a subset) and `url`
    /// (http(s) and ftp only).
    static func admitsEveryValidString(_ name: String) -> Bool {
        pattern(name) != nil && !["time", "date-time", "email", "regex", "url"].contains(name)
    }

    static let patterns: [String: String] = {
        // RFC 3339 full-date, calendar-exact: day ranges per month, 29 February only in Gregorian
        // leap years (divisible by 4, centuries only when divisible by 400).
        let leap = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
        let date = "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))|\(leap)-02-29)"
        // RFC 3339 time. A leap second (60) is valid only where the time is 23:59 in UTC; an
        // exact automaton needs a state per local minute (27,000 states), so the second 60 is
        // allowed at 23:59 with a zero offset only: never an invalid time, but valid leap
        // seconds written with other offsets are refused.
        let offset = "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
        let time = "(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?\(offset)|23:59:60(\\.[0-9]+)?([Zz]|[+-]00:00))"
        // RFC 3339 appendix A: units in order, weeks alone, no fractions.
        let n = "[0-9]+"
        let durTime = "T(\(n)H(\(n)M(\(n)S)?)?|\(n)M(\(n)S)?|\(n)S)"
        let durDate = "(\(n)D|\(n)M(\(n)D)?|\(n)Y(\(n)M(\(n)D)?)?)(\(durTime))?"
        let duration = "P(\(durDate)|\(durTime)|\(n)W)"
        let octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
        let ipv4 = "\(octet)\\.\(octet)\\.\(octet)\\.\(octet)"
        let hex = "[0-9a-fA-F]"
        // RFC 3986 IPv6address: eight 16-bit pieces, one run of zero pieces shortened to "::",
        // the last two pieces possibly an IPv4 address.
        let h16 = "\(hex){1,4}", ls32 = "(\(h16):\(h16)|\(ipv4))"
        func before(_ k: Int) -> String { k < 0 ? "" : "((\(h16):){0,\(k)}\(h16))?" }
        let ipv6 = "(" + [
            "(\(h16):){6}\(ls32)", "::(\(h16):){5}\(ls32)", "\(before(0))::(\(h16):){4}\(ls32)",
            "\(before(1))::(\(h16):){3}\(ls32)", "\(before(2))::(\(h16):){2}\(ls32)", "\(before(3))::\(h16):\(ls32)",
            "\(before(4))::\(ls32)", "\(before(5))::\(h16)", "\(before(6))::",
        ].joined(separator: "|") + ")"
        let label = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
        let hostname = "\(label)(\\.\(label))*"
        // RFC 3986 URI and relative reference; RFC 3987's IRIs add non-ASCII characters
        // (`ucschar`) where URIs allow unreserved ones, and private-use ones in the query.
        let ascii = "A-Za-z0-9._~\\-", subDelims = "!$&'()*+,;=", pct = "%\(hex){2}"
        let ipLiteral = "\\[(\(ipv6)|[vV]\(hex)+\\.[\(ascii)\(subDelims):]+)\\]"
        func references(_ unreserved: String, query extra: String) -> (absolute: String, relative: String, web: String) {
            /// One unreserved character, sub-delimiter, `more`, or percent-encoded octet.
            func char(_ more: String) -> String { "([\(unreserved)\(subDelims)\(more)]|\(pct))" }
            let pchar = char(":@"), segments = "(/\(pchar)*)*", segmentNZ = "\(pchar)+"
            let userinfo = "(\(char(":"))*@)?", port = "(:[0-9]*)?"
            let authority = "\(userinfo)(\(ipLiteral)|\(ipv4)|\(char(""))*)\(port)"
            let absolute = "/(\(segmentNZ)\(segments))?"
            let rest = "(\\?(\(pchar)|[/?\(extra)])*)?(#(\(pchar)|[/?])*)?"
            // A web address: an http(s) or ftp URI with a host that isn't empty.
            let web = "([Hh][Tt][Tt][Pp][Ss]?|[Ff][Tt][Pp])://\(userinfo)(\(ipLiteral)|\(char(""))+)\(port)\(segments)" + rest
            return ("[A-Za-z][A-Za-z0-9+.-]*:(//\(authority)\(segments)|\(absolute)|\(segmentNZ)\(segments))?" + rest,
                    "(//\(authority)\(segments)|\(absolute)|\(char("@"))+\(segments))?" + rest, web)
        }
        let (uri, relative, url) = references(ascii, query: "")
        let ucschar = "\\u{A0}-\\u{D7FF}\\u{F900}-\\u{FDCF}\\u{FDF0}-\\u{FFEF}" + (1...13).map { p in
            String(format: "\\u{%X0000}-\\u{%XFFFD}", p, p)
        }.joined() + "\\u{E1000}-\\u{EFFFD}"
        let iprivate = "\\u{E000}-\\u{F8FF}\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}"
        let (iri, irelative, _) = references(ascii + ucschar, query: iprivate)
        // RFC 5321 mailbox: a dot-string or quoted local part; a domain (labels not bounded to
        // 63 characters, which would multiply a length-bounded email's states by 63) or an IPv4
        // address literal (IPv6 literals are left out for the same reason).
        let atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
        let local = "(\(atext)+(\\.\(atext)+)*|\"([ !#-\\[\\]-~]|\\\\[ -~])*\")"
        let domainLabel = "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
        let email = "\(local)@(\(domainLabel)(\\.\(domainLabel))*|\\[\(ipv4)\\])"
        // ECMA-262 regular expressions, as a subset valid with and without the `u` flag and in
        // Python's `re`, with groups nested at most three deep (nesting has no regular
        // expression): no named groups, backreferences, `\c`, `\0`, property escapes or literal
        // `]{}`; `{n,m}` with one-digit bounds in order; class ranges within digits, lower- or
        // upper-case letters, in order; `^` and `|` in a class only escaped, and no `&` or `~` there
        // (Python reserves doubled ones for set operations); lookaheads unquantified.
        // Valid regexes outside it are refused.
        let digitsAndLetters = ["0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
        let ordered = digitsAndLetters.flatMap { run in run.indices.map { i in "\(run[i])-[\(run[i])-\(run.last!)]" } }
        func escape(_ extra: String) -> String { #"\\([tnrvfdDwWsS]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[\^$\\.*+?()\[\]{}|/"# + extra + "])" }
        let classItem = "(" + ordered.joined(separator: "|") + #"|[^\]\\\[\-\^|&~]|"# + escape(#"\-"#) + ")"
        let quantifier = #"([*+?]|\{([0-9]{1,4},?|"# + (0...9).map { "\($0),[\($0)-9]" }.joined(separator: "|") + #")\})\??"#
        func alternatives(_ depth: Int) -> String {
            var atom = #"[^\^$\\.*+?()\[\]{}|]|"# + escape("") + #"|\[\^?-?"# + classItem + #"+-?\]"#
            var lookahead = ""
            if depth > 0 {
                let inner = alternatives(depth - 1)
                atom += #"|\((\?:)?"# + inner + #"\)"#
                lookahead = #"|\(\?[=!]"# + inner + #"\)"#
            }
            return #"(\^|\$|\||\\[bB]"# + lookahead + "|(" + atom + ")(" + quantifier + ")?)*"
        }
        let regex = alternatives(3)
        return [
            "regex": regex,
            // OpenAPI's `byte`: base64 (RFC 4648, standard alphabet, padded).
            "byte": "([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?",
            "date": date,
            "time": time,
            "date-time": date + "[Tt]" + time,
            "duration": duration,
            "uuid": "\(hex){8}-\(hex){4}-\(hex){4}-\(hex){4}-\(hex){12}",
            "email": email,
            "ipv4": ipv4,
            "ipv6": ipv6,
            "hostname": hostname,
            "uri": uri,
            "uri-reference": "(\(uri)|\(relative))",
            "iri": iri,
            "iri-reference": "(\(iri)|\(irelative))",
            // Not in the specification, common elsewhere: a web URL (ajv-formats' `url` is
            // http(s) and ftp); an IPv4 or IPv6 network in CIDR notation (RFC 4632, RFC 4291).
            "url": url,
            "cidr": "(\(ipv4)/(3[0-2]|[12]?[0-9])|\(ipv6)/(12[0-8]|1[01][0-9]|[1-9]?[0-9]))",
            // Draft-03's names.
            "host-name": hostname,
            "ip-address": ipv4,
        ]
    }()
}
