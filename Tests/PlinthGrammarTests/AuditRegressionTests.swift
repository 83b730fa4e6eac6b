import Foundation
import Testing
@testable import PlinthGrammar

/// Schemas an audit of the decoder found mishandled (December 2026): each either compiled to a
/// grammar that admits invalid values, trapped, or failed with a message that misled.
@Suite("Decoder audit regressions")
struct AuditRegressionTests {
    func error(_ schema: String, _ options: GrammarOptions = GrammarOptions()) -> GrammarError? {
        do {
            _ = try TestVocab.grammar(schema, options)
            return nil
        } catch {
            return error as? GrammarError
        }
    }

    /// `oneOf` is judged by validators, whose objects are open: a generated `{"a":5}` satisfies
    /// `{properties:{b}, minProperties:1}` too, so the branches are not disjoint.
    @Test func oneOfOverObjectsIsProvedWithOpenObjects() throws {
        let schema = ##"{"oneOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"integer"}},"minProperties":1}]}"##
        guard case .unsupportedKeyword(let keyword, _)? = error(schema) else { Issue.record("compiled: \(String(describing: error(schema)))"); return }
        #expect(keyword == "oneOf")
        // Closed by the schema itself, the branches do exclude each other.
        let closed = ##"{"oneOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false},{"type":"object","properties":{"b":{"type":"integer"}},"required":["b"],"additionalProperties":false}]}"##
        let g = try TestVocab.grammar(closed)
        #expect(TestVocab.accepts(g, ##"{"a":5}"##) && TestVocab.accepts(g, ##"{"b":5}"##))
        // Each side requiring a key the other doesn't generate is exclusive as generated.
        let both = try TestVocab.grammar(##"{"oneOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"integer"}},"required":["b"]}]}"##)
        #expect(TestVocab.accepts(both, ##"{"a":1}"##) && TestVocab.accepts(both, ##"{"b":2}"##))
        #expect(!TestVocab.accepts(both, ##"{"a":1,"b":2}"##))
    }

    /// A reference inside a resource with its own `$id` resolves against that resource.
    @Test func referencesResolveInTheirOwnResource() throws {
        let body = ##""type":"object","properties":{"v":{"$ref":"#/$defs/A"}},"required":["v"],"$defs":{"t":{"type":"integer"},"A":{"$id":"http://example.com/a.json","$ref":"#/$defs/t","$defs":{"t":{"type":"string"}}}}}"##
        let g = try TestVocab.grammar(##"{"$schema":"https://json-schema.org/draft/2020-12/schema","## + body)
        #expect(TestVocab.accepts(g, ##"{"v":"x"}"##))
        #expect(!TestVocab.accepts(g, ##"{"v":5}"##))
        // Up to draft-07, and where the document names no draft, `$ref` makes a sibling `$id` void.
        let old = try TestVocab.grammar("{" + body)
        #expect(TestVocab.accepts(old, ##"{"v":5}"##) && !TestVocab.accepts(old, ##"{"v":"x"}"##))
        // By URI, relative to the root's `$id`, and to an anchor in another resource.
        let byURI = ##"{"$id":"http://example.com/root.json","properties":{"p":{"$ref":"b.json#/$defs/s"},"q":{"$ref":"b.json#num"}},"required":["p","q"],"$defs":{"B":{"$id":"b.json","$defs":{"s":{"type":"string"},"n":{"$anchor":"num","type":"number"}}}}}"##
        let h = try TestVocab.grammar(byURI)
        #expect(TestVocab.accepts(h, ##"{"p":"x","q":1}"##))
        #expect(!TestVocab.accepts(h, ##"{"p":1,"q":1}"##) && !TestVocab.accepts(h, ##"{"p":"x","q":"y"}"##))
        // `%24defs` is `$defs`: the reference is still inside A's resource.
        let encoded = try TestVocab.grammar(##"{"$schema":"https://json-schema.org/draft/2020-12/schema","## + body.replacingOccurrences(of: ##""#/$defs/A""##, with: ##""#/%24defs/A""##))
        #expect(TestVocab.accepts(encoded, ##"{"v":"x"}"##) && !TestVocab.accepts(encoded, ##"{"v":5}"##))
        // A nested `$id` that spells what a root without one is called internally is still its own.
        let named = try TestVocab.grammar(##"{"$defs":{"S":{"$id":"schema.json","type":"string"}},"type":"object","properties":{"a":{"$ref":"schema.json"}},"required":["a"]}"##)
        #expect(TestVocab.accepts(named, ##"{"a":"x"}"##) && !TestVocab.accepts(named, ##"{"a":{}}"##))
        // The root's own `$id` names it beside nested resources (beside `$ref`, and as draft-04's `id`).
        for id in ["$id", "id"] {
            let root = try TestVocab.grammar(##"{""## + id + ##"":"http://example.com/root.json","$ref":"#/definitions/o","definitions":{"o":{"type":"object","properties":{"p":{"$ref":"http://example.com/root.json#/definitions/s"}},"required":["p"]},"s":{"type":"string"},"n":{"$id":"n.json","type":"null"}}}"##)
            #expect(TestVocab.accepts(root, ##"{"p":"x"}"##) && !TestVocab.accepts(root, ##"{"p":1}"##), "\(id)")
        }
        guard case .unresolvedReference? = error(##"{"$defs":{"A":{"$id":"http://example.com/a.json"}},"$ref":"http://example.com/other.json"}"##) else {
            Issue.record("a resource the document lacks resolved"); return
        }
    }

    /// Counts past an integer: a minimum was dropped (short strings for minLength 1e30), a
    /// maximum bounds nothing.
    @Test func countsPastAnIntegerAreNotDropped() throws {
        guard case .budgetExceeded(let what)? = error(##"{"type":"string","minLength":1e30}"##) else { Issue.record("minLength 1e30 compiled"); return }
        #expect(what.contains("minLength"))
        guard case .budgetExceeded? = error(##"{"type":"object","minProperties":1e20}"##) else { Issue.record("minProperties 1e20 compiled"); return }
        let g = try TestVocab.grammar(##"{"type":"array","items":{"type":"integer"},"maxItems":1e20}"##)
        #expect(TestVocab.accepts(g, "[1,2,3]"))
        for bad in [##"{"minLength":-1}"##, ##"{"maxItems":1.5}"##, ##"{"maxProperties":"3"}"##] {
            guard case .invalidSchema? = error(bad) else { Issue.record("\(bad) compiled"); continue }
        }
    }

    /// A chain of references a thousand long overflowed the stack; it is refused by depth.
    @Test func deepReferenceChainsAreRefused() throws {
        func chain(_ n: Int) -> String {
            let defs = (0..<n).map { i in
                i == n - 1 ? ##""\##(i)":{"type":"integer"}"## : ##""\##(i)":{"type":"object","properties":{"n":{"$ref":"#/$defs/\##(i + 1)"}},"required":["n"]}"##
            }
            return ##"{"$defs":{"## + defs.joined(separator: ",") + ##"},"$ref":"#/$defs/0"}"##
        }
        guard case .budgetExceeded(let what)? = error(chain(1000)) else { Issue.record("a 1000-deep chain compiled"); return }
        #expect(what.contains("nest"))
        _ = try TestVocab.grammar(chain(100))
    }

    /// Host names have at most 253 characters.
    @Test func hostNamesAreAtMost253Characters() throws {
        let g = try TestVocab.grammar(##"{"type":"string","format":"hostname"}"##)
        let label = String(repeating: "a", count: 63)
        let long = [label, label, label, label].joined(separator: ".") // 255
        #expect(!TestVocab.accepts(g, "\"" + long + "\""))
        #expect(TestVocab.accepts(g, "\"" + long.dropFirst(2) + "\""))
        #expect(TestVocab.accepts(g, ##""example.com""##))
    }

    /// `\s` matches only what ECMA-262 and Python's `re` both call space; `\S` and `[^\s]`
    /// leave out what either does.
    @Test func whitespaceClassesHoldUnderEveryValidator() throws {
        let space = try TestVocab.grammar(##"{"type":"string","pattern":"^\\s$"}"##)
        let nonSpace = try TestVocab.grammar(##"{"type":"string","pattern":"^\\S$"}"##)
        let negated = try TestVocab.grammar(##"{"type":"string","pattern":"^[^\\s]$"}"##)
        let oneCharacter = try TestVocab.grammar(##"{"type":"string","minLength":1,"maxLength":1}"##)
        // Controls as JSON escapes, the others as themselves.
        for c in ["\\u001c", "\\u001f", "\u{85}", "\u{FEFF}"] {
            #expect(TestVocab.accepts(oneCharacter, "\"\(c)\""), "the string \(c) is not one character")
            #expect(!TestVocab.accepts(space, "\"\(c)\""), "\\s took \(c)")
            #expect(!TestVocab.accepts(nonSpace, "\"\(c)\""), "\\S took \(c)")
            #expect(!TestVocab.accepts(negated, "\"\(c)\""), "[^\\s] took \(c)")
        }
        #expect(TestVocab.accepts(space, ##"" ""##) && TestVocab.accepts(space, ##""\t""##) && TestVocab.accepts(space, "\"\u{3000}\""))
        #expect(TestVocab.accepts(nonSpace, ##""x""##) && TestVocab.accepts(negated, ##""x""##))
    }

    /// Bounds past what generated numbers can spell are said to be so, not "admits no value".
    @Test func boundsPastGeneratedNumbersSaySo() throws {
        let generated = GrammarOptions(generatedNumbers: true)
        for schema in [##"{"type":"integer","minimum":1e16}"##, ##"{"type":"number","exclusiveMinimum":0,"maximum":1e-20}"##] {
            guard case .numbersOutOfReach? = error(schema, generated) else { Issue.record("\(schema): \(String(describing: error(schema, generated)))"); continue }
            // Validating (every spelling) they are fine.
            #expect(error(schema) == nil)
        }
        guard case .emptyLanguage? = error(##"{"type":"integer","minimum":5,"maximum":4}"##, generated) else { Issue.record("min > max"); return }
        guard case .unsupportedKeyword(let k, _)? = error(##"{"type":"number","maximum":1e500}"##) else { Issue.record("1e500"); return }
        #expect(k == "maximum")
    }

    /// allOf nested past the limit is depth, not self-reference; a long alias chain likewise.
    @Test func deepAllOfIsNotCalledSelfReference() throws {
        var nested = ##"{"type":"integer"}"##
        for _ in 0..<70 { nested = ##"{"allOf":["## + nested + "]}" }
        guard case .budgetExceeded? = error(nested) else { Issue.record("\(String(describing: error(nested)))"); return }
        let aliases = (0..<40).map { i in i == 39 ? ##""d39":{"type":"integer"}"## : ##""d\##(i)":{"$ref":"#/$defs/d\##(i + 1)"}"## }
        let chain = ##"{"$defs":{"## + aliases.joined(separator: ",") + ##"},"allOf":[{"$ref":"#/$defs/d0"}]}"##
        guard case .budgetExceeded? = error(chain) else { Issue.record("\(String(describing: error(chain)))"); return }
    }
}
