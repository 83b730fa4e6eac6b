import Foundation
@testable import Plinth
import PlinthJSON
import Testing

/// Streamed generated content: after every piece, the reader's snapshot is the one reading the
/// text so far at once gives, completeness included, and it fails where that read fails; the
/// snapshots' JSON prefixes stream the final text exactly.
struct StreamedContentTests {
    /// The content with every value's completeness marked (`~` for incomplete).
    static func shape(_ c: GeneratedContent) -> String {
        let mark = c.isComplete ? "" : "~"
        switch c.kind {
        case .structure(let properties, let keys):
            return mark + "{" + keys.map { "\($0):" + shape(properties[$0]!) }.joined(separator: ",") + "}"
        case .array(let elements): return mark + "[" + elements.map(shape).joined(separator: ",") + "]"
        default: return mark + c.jsonString
        }
    }

    /// Feeds `text` in pieces cut at the given character offsets and compares after each.
    static func check(_ text: String, cuts: [Int]) {
        var reader = GeneratedContent.StreamReader(builder: .init())
        var failed = false
        var start = text.startIndex
        for cut in cuts.sorted() + [text.count] {
            let end = text.index(text.startIndex, offsetBy: min(cut, text.count))
            guard end >= start else { continue }
            let prefix = String(text[..<end])
            let expected = Result {
                var whole = GeneratedContent.StreamReader(builder: .init())
                try whole.append(prefix.utf8)
                return whole.snapshot
            }
            if !failed {
                do { try reader.append(text[start..<end].utf8) } catch { failed = true }
            }
            start = end
            switch expected {
            case .success(let value):
                #expect(!failed, "the reader failed on \(prefix)")
                if !failed {
                    #expect(reader.snapshot.map(shape) == value.map(shape), "after \(prefix)")
                }
            case .failure:
                #expect(failed, "the reader accepted \(prefix)")
            }
        }
    }

    @Test(arguments: [
        #"{"name":"Zoë \"Z\" Ångström","tags":["a","b\\c"],"n":-12.50e1,"ok":true,"none":null}"#,
        #"{ "nested" : { "x" : [ 1 , [ 2 , 3.25 ] , { } ] , "y" : "\u00e9\ud83c\udf89\n" } , "e" : [ ] }"#,
        #"[[],{},[{"a":[]}],"",0,-1.5,false,1e-3]"#,
        #""a string 🎉 with \t escapes""#,
        "123.5",
        #"{"a":1,"a":2}"#,
    ])
    func everyCutMatchesAFullParse(json: String) {
        // Byte by byte (every character a piece), then in pieces of a few characters.
        Self.check(json, cuts: Array(0...json.count))
        Self.check(json, cuts: Array(stride(from: 0, to: json.count, by: 3)))
    }

    @Test(arguments: [
        #"{"a":1,}"#, #"[1,]"#, #"{"a" 1}"#, #"{"a":tru}"#, #"[1 2]"#, #"{"a":"\x"}"#, #""\ud83c x""#, "1 2", "-x", #"{1:2}"#,
    ])
    func invalidTextFailsWhereAFullParseFails(json: String) {
        Self.check(json, cuts: Array(0...json.count))
        var reader = GeneratedContent.StreamReader(builder: .init())
        #expect(throws: JSONSyntaxError.self) { try reader.append((json + "]]]]}}}}").utf8) }
        #expect(throws: GeneratedContent.ParsingError.self) { try GeneratedContent(json: json) }
    }

    /// Every cut of a JSON text read as a streaming snapshot: each snapshot's `jsonPrefix`
    /// extends the one before, and the last is the final `jsonString`, so printing the new ends
    /// streams it exactly.
    @Test(arguments: [
        #"{"name":"Zoë \"Z\" Ångström","tags":["a","b\\c"],"n":-12.50e1,"ok":true,"none":null,"nested":{"x":[1,[2,3.25]],"y":"é\u00e9\n"}}"#,
        #"[[],{},[{"a":[]}],"",0,-1.5,false,10]"#,
        #""just a string with \t and 🎉""#,
        #"{ "spaced" : [ 1 , 2 ] , "k" : { } }"#,
    ])
    func jsonPrefixOfEverySnapshotExtendsTheLast(json: String) throws {
        let final = try GeneratedContent(json: json).jsonString
        var reader = GeneratedContent.StreamReader(builder: .init())
        var previous: [UInt8] = []
        for character in json {
            try reader.append(String(character).utf8)
            guard let snapshot = reader.snapshot else { continue }
            let prefix = Array(snapshot.jsonPrefix.utf8)
            #expect(prefix.starts(with: previous), "\(String(decoding: previous, as: UTF8.self)) -> \(snapshot.jsonPrefix)")
            #expect(Array(final.utf8).starts(with: prefix), "\(snapshot.jsonPrefix) is not a prefix of \(final)")
            previous = prefix
        }
        #expect(String(decoding: previous, as: UTF8.self) == final)
    }

    @Test func randomDocumentsInRandomPieces() {
        var rng = SystemRandomNumberGenerator()
        func value(_ depth: Int) -> String {
            switch Int.random(in: 0..<(depth > 3 ? 4 : 7), using: &rng) {
            case 0: return ["\"\"", "\"x\"", "\"é\\\"\\n\"", "\"🎉 ok\""].randomElement(using: &rng)!
            case 1: return ["0", "-1", "2.5", "1e3", "-0.25E-2"].randomElement(using: &rng)!
            case 2: return ["true", "false"].randomElement(using: &rng)!
            case 3: return "null"
            case 4, 5:
                let members = (0..<Int.random(in: 0...3, using: &rng)).map { "\"k\($0)\": \(value(depth + 1))" }
                return "{" + members.joined(separator: ", ") + "}"
            default:
                return "[" + (0..<Int.random(in: 0...3, using: &rng)).map { _ in value(depth + 1) }.joined(separator: ",") + "]"
            }
        }
        for _ in 0..<200 {
            let json = value(0)
            let cuts = (0..<Int.random(in: 1...8, using: &rng)).map { _ in Int.random(in: 0...json.count, using: &rng) }
            Self.check(json, cuts: cuts)
        }
    }
}
