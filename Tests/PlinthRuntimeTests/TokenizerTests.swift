import Foundation
import Testing

@testable import PlinthRuntime

// MARK: - A synthetic byte-level vocabulary

/// A tiny byte-level BPE vocabulary: the 256 byte characters (token id = byte value), a few
/// merges, and some special tokens.
private enum Synthetic {
    static let byteTokens: [String] = (0..<256).map { String(Unicode.Scalar(ByteLevel.scalarForByte[$0])!) }

    static let merges: [String] = [
        "h e", "l l", "he ll", "hell o", "Ġ w", "Ġw o", "r l", "Ġwo rl", "Ġworl d",
        "ð Ł", "ðŁ ĺ", "ðŁĺ Ģ",   // 😀 = F0 9F 98 80
    ]
    static let merged: [String] = ["he", "ll", "hell", "hello", "Ġw", "Ġwo", "rl", "Ġworl", "Ġworld",
                                   "ðŁ", "ðŁĺ", "ðŁĺĢ"]
    static let specials: [(String, Int)] = [
        ("<|im_start|>", 3), ("<|im_end|>", 3), ("<|endoftext|>", 3), ("<tool>", 4),
        ("<|x|>", 3), ("<|x|>y", 3),
    ]

    static func configuration(pre: String = "qwen2", merges: [String] = Synthetic.merges,
                              addBOS: Bool? = nil, addEOS: Bool? = nil,
                              endAsNormal: Bool = false) -> Tokenizer.Configuration {
        var tokens = byteTokens + merged
        var types = [Int](repeating: 1, count: tokens.count)
        for (text, type) in specials {
            tokens.append(text)
            types.append(endAsNormal && text == "<|im_end|>" ? 1 : type)
        }
        return Tokenizer.Configuration(preTokenizer: pre, tokens: tokens, tokenTypes: types, merges: merges,
                                       bosID: tokens.firstIndex(of: "<|endoftext|>"),
                                       eosID: tokens.firstIndex(of: "<|im_end|>"),
                                       addBOS: addBOS, addEOS: addEOS)
    }

    static func make(pre: String = "qwen2", merges: [String] = Synthetic.merges,
                     addBOS: Bool? = nil, addEOS: Bool? = nil, endAsNormal: Bool = false) throws -> Tokenizer {
        try Tokenizer(configuration: configuration(pre: pre, merges: merges, addBOS: addBOS, addEOS: addEOS,
                                                   endAsNormal: endAsNormal))
    }
}

/// Splits text with a pre-tokenizer and returns the words.
private func words(_ pre: String, _ text: String) throws -> [String] {
    let p = try PreTokenizer(name: pre)
    let cps = text.unicodeScalars.map(\.value)
    let classes = cps.map { UnicodeClass.of($0) }
    var ends: [Int32] = []
    cps.withUnsafeBufferPointer { c in
        classes.withUnsafeBufferPointer { k in
            if let cb = c.baseAddress, let kb = k.baseAddress {
                p.split(cb, kb, count: cps.count, into: &ends)
            }
        }
    }
    var out: [String] = []
    var start = 0
    let scalars = Array(text.unicodeScalars)
    for e in ends {
        var s = String.UnicodeScalarView()
        s.append(contentsOf: scalars[start..<Int(e)])
        out.append(String(s))
        start = Int(e)
    }
    return out
}

@Suite("Tokenizer: synthetic vocabulary")
struct TokenizerSyntheticTests {
    @Test("merges apply by rank and produce the merged tokens")
    func mergesByRank() throws {
        let t = try Synthetic.make()
        let hello = try #require(t.id(forText: "hello"))
        let world = try #require(t.id(forText: "Ġworld"))
        #expect(t.encode("hello world", addSpecial: false) == [hello, world])
        #expect(t.encode("hellohello", addSpecial: false) == [hello, hello])
        // "hel": only "h e" applies; "ell": only "l l"
        #expect(t.encode("hel", addSpecial: false) == [t.id(forText: "he")!, Int32(UInt8(ascii: "l"))])
        #expect(t.encode("ell", addSpecial: false) == [Int32(UInt8(ascii: "e")), t.id(forText: "ll")!])
    }

    @Test("the lower-ranked merge wins, whatever the order of pairs in the word")
    func rankOrder() throws {
        // "e l" before "l l": "ell" → "el" + "l"; the other order gives "e" + "ll"
        var c = Synthetic.configuration(merges: ["e l", "l l"])
        c.tokens += ["el"]
        c.tokenTypes! += [1]
        let a = try Tokenizer(configuration: c)
        #expect(a.encode("ell", addSpecial: false) == [a.id(forText: "el")!, Int32(UInt8(ascii: "l"))])
        c.merges = ["l l", "e l"]
        let b = try Tokenizer(configuration: c)
        #expect(b.encode("ell", addSpecial: false) == [Int32(UInt8(ascii: "e")), b.id(forText: "ll")!])
    }

    @Test("a merge result that is not a token falls back to single-character tokens")
    func mergeResultNotInVocabulary() throws {
        // "a b" merges to "ab", which is not a token: llama.cpp emits the ASCII bytes one by one
        let c = Synthetic.configuration(merges: ["a b"])
        let t = try Tokenizer(configuration: c)
        #expect(t.encode("ab", addSpecial: false) == [Int32(UInt8(ascii: "a")), Int32(UInt8(ascii: "b"))])
    }

    @Test("every byte maps to its byte-level character and back")
    func byteLevelMapping() throws {
        let t = try Synthetic.make(merges: [])
        for b in 0..<256 {
            #expect(t.tokenBytes(Int32(b)) == [UInt8(b)], "byte \(b)")
        }
        #expect(t.tokenText(32) == "Ġ")
        #expect(t.tokenText(10) == "Ċ")
        #expect(ByteLevel.decode("Ġhello") == Array(" hello".utf8))
        #expect(ByteLevel.encode(Array(" \n".utf8)) == "ĠĊ")
        // without merges every UTF-8 byte is one token
        #expect(t.encode("é", addSpecial: false) == [0xC3, 0xA9])
        #expect(t.decode([0xC3, 0xA9]) == "é")
        #expect(t.tokenBytes(Int32(t.vocabularySize)) == [])
    }

    /// llama.cpp's per-model attributes: Phi-3's special tokens take the whitespace after them,
    /// but not <s>, <unk> or <|endoftext|> (checked against llama.cpp on its ggml-vocab-phi-3.gguf:
    /// "<|end|> x" → [32007, 921], "<s> x" keeps its space).
    @Test func phi3SpecialTokensEatTheWhitespaceAfterThem() throws {
        var c = Synthetic.configuration()
        let plain = try Tokenizer(configuration: c)
        c.modelName = "Phi-3-mini-4k-instruct"
        let phi3 = try Tokenizer(configuration: c)
        let end = try #require(plain.id(forText: "<|im_end|>")), text = try #require(plain.id(forText: "<|endoftext|>"))
        #expect(plain.encode("<|im_end|> world", addSpecial: false, parseSpecial: true) == [end] + plain.encode(" world", addSpecial: false))
        #expect(phi3.encode("<|im_end|> \n world", addSpecial: false, parseSpecial: true) == [end] + plain.encode("world", addSpecial: false))
        #expect(phi3.encode("<|endoftext|> world", addSpecial: false, parseSpecial: true) == [text] + plain.encode(" world", addSpecial: false))
        // As plain text, nothing is special and nothing is stripped.
        #expect(phi3.encode("<|im_end|> world", addSpecial: false) == plain.encode("<|im_end|> world", addSpecial: false))
    }

    @Test("the streaming decoder holds back a character split across tokens")
    func streamingSplitCharacter() throws {
        let t = try Synthetic.make(merges: [])
        var s = StreamingDetokenizer(tokenizer: t)
        #expect(s.append(Int32(UInt8(ascii: "a"))) == "a")
        #expect(s.append(0xF0) == "")
        #expect(s.append(0x9F) == "")
        #expect(s.append(0x98) == "")
        #expect(s.hasPendingBytes)
        #expect(s.append(0x80) == "😀")
        #expect(!s.hasPendingBytes)
        // é split in two
        #expect(s.append(0xC3) == "")
        #expect(s.append(0xA9) == "é")
        #expect(s.finish() == "")
    }

    @Test("the streaming decoder replaces bytes that can never form a character")
    func streamingInvalidBytes() throws {
        let t = try Synthetic.make(merges: [])
        var s = StreamingDetokenizer(tokenizer: t)
        #expect(s.append(0xFF) == "\u{FFFD}")
        #expect(s.append(0xE2) == "")
        #expect(s.append(0x41) == "\u{FFFD}A")          // E2 then 'A': E2 is ill-formed
        #expect(s.append(0xF0) == "")
        #expect(s.append(0x9F) == "")
        #expect(s.finish() == "\u{FFFD}")                // cut short at the end
        #expect(s.finish() == "")
        // E0 80 can never start a character (overlong): not held back
        #expect(s.append(0xE0) == "")
        #expect(s.append(0x80).unicodeScalars.allSatisfy { $0 == "\u{FFFD}" })
    }

    @Test("a merged emoji token streams whole, and two-token emoji wait for the second")
    func streamingMergedTokens() throws {
        let t = try Synthetic.make()
        let ids = t.encode("😀😀", addSpecial: false)
        #expect(ids == [t.id(forText: "ðŁĺĢ")!, t.id(forText: "ðŁĺĢ")!])
        var s = StreamingDetokenizer(tokenizer: t)
        #expect(s.append(t.id(forText: "ðŁĺ")!) == "")
        #expect(s.append(0x80) == "😀")
        #expect(s.append(contentsOf: ids) == "😀😀")
    }

    @Test("special-token text is split out when parseSpecial is true, longest token first")
    func specialPartition() throws {
        let t = try Synthetic.make()
        let start = try #require(t.id(forText: "<|im_start|>"))
        let end = try #require(t.id(forText: "<|im_end|>"))
        let ids = t.encode("<|im_start|>hello<|im_end|>", addSpecial: false, parseSpecial: true)
        #expect(ids == [start, t.id(forText: "hello")!, end])
        // as plain text: no special ids, and it decodes back to the same text
        let plain = t.encode("<|im_start|>hello<|im_end|>", addSpecial: false, parseSpecial: false)
        #expect(!plain.contains(start) && !plain.contains(end))
        #expect(t.decode(plain) == "<|im_start|>hello<|im_end|>")
        // longest first: "<|x|>y" wins over "<|x|>"
        let xy = try #require(t.id(forText: "<|x|>y"))
        let x = try #require(t.id(forText: "<|x|>"))
        #expect(t.encode("<|x|>y<|x|>", addSpecial: false, parseSpecial: true) == [xy, x])
        // adjacent and repeated
        #expect(t.encode("<|im_end|><|im_end|>", addSpecial: false, parseSpecial: true) == [end, end])
        // partial special text stays text
        #expect(!t.encode("<|im_start", addSpecial: false, parseSpecial: true).contains(start))
    }

    @Test("user-defined tokens are matched even when parseSpecial is false")
    func userDefinedAlwaysMatched() throws {
        let t = try Synthetic.make()
        let tool = try #require(t.id(forText: "<tool>"))
        #expect(t.encode("a<tool>b", addSpecial: false, parseSpecial: false) == [0x61, tool, 0x62])
        #expect(t.tokenType(tool) == .userDefined)
        // user-defined tokens render even without renderSpecial; control tokens only with it
        #expect(t.decode([tool]) == "<tool>")
        let start = t.id(forText: "<|im_start|>")!
        #expect(t.decode([start]) == "")
        #expect(t.decode([start], renderSpecial: true) == "<|im_start|>")
        #expect(t.tokenPiece(start) == [])
        #expect(t.tokenBytes(start) == Array("<|im_start|>".utf8))
    }

    @Test("BOS and EOS are added only with addSpecial and only when the model asks")
    func bosEos() throws {
        let plain = try Synthetic.make()
        #expect(plain.addsBOS == false)
        #expect(plain.encode("hello", addSpecial: true) == [plain.id(forText: "hello")!])
        let t = try Synthetic.make(addBOS: true, addEOS: true)
        let bos = try #require(t.bosID)
        let eos = try #require(t.eosID)
        #expect(t.encode("hello", addSpecial: true) == [bos, t.id(forText: "hello")!, eos])
        #expect(t.encode("hello", addSpecial: false) == [t.id(forText: "hello")!])
        #expect(t.encode("", addSpecial: true) == [bos, eos])
        #expect(t.encode("", addSpecial: false) == [])
        // llama3 defaults to adding BOS
        let l3 = try Synthetic.make(pre: "llama3")
        #expect(l3.addsBOS)
    }

    @Test("end-of-generation tokens include EOS and tokens found by their text")
    func endOfGeneration() throws {
        let t = try Synthetic.make(endAsNormal: true)
        let end = try #require(t.id(forText: "<|im_end|>"))
        let eot = try #require(t.id(forText: "<|endoftext|>"))
        #expect(t.isEndOfGeneration(end))
        #expect(t.isEndOfGeneration(eot))
        #expect(!t.isEndOfGeneration(t.id(forText: "<|im_start|>")!))
        #expect(!t.isEndOfGeneration(0x61))
        // the file said normal; llama.cpp treats it as control anyway
        #expect(t.tokenType(end) == .normal)
        #expect(t.attributes(end).contains(.control))
        #expect(t.eotID != nil)
    }

    @Test("invalid UTF-8 is rejected with the offset of the first bad byte")
    func invalidUTF8() throws {
        let t = try Synthetic.make()
        #expect(throws: TokenizerError.invalidUTF8(offset: 3)) { try t.encode(bytes: [0x61, 0x62, 0x63, 0xFF]) }
        #expect(throws: TokenizerError.invalidUTF8(offset: 0)) { try t.encode(bytes: [0xC0, 0x80]) }          // overlong
        #expect(throws: TokenizerError.invalidUTF8(offset: 1)) { try t.encode(bytes: [0x61, 0xE2, 0x82]) }    // cut short
        #expect(throws: TokenizerError.invalidUTF8(offset: 0)) { try t.encode(bytes: [0xED, 0xA0, 0x80]) }    // surrogate
        #expect(throws: TokenizerError.invalidUTF8(offset: 2)) { try t.encode(bytes: [0x61, 0x62, 0x80]) }    // stray continuation
        #expect(throws: TokenizerError.invalidUTF8(offset: 0)) { try t.encode(bytes: [0xF4, 0x90, 0x80, 0x80]) } // > U+10FFFF
        #expect(try t.encode(bytes: Array("héllo 😀".utf8), addSpecial: false) == t.encode("héllo 😀", addSpecial: false))
        #expect(throws: TokenizerError.invalidUTF8(offset: 1)) { try Tokenizer.validatedText([0x41, 0xFE]) }
        let message = TokenizerError.invalidUTF8(offset: 3).errorDescription ?? ""
        #expect(message.contains("byte 3"))
    }

    @Test("unsupported tokenizer and pre-tokenizer types are named in the error")
    func unsupportedTypes() throws {
        var c = Synthetic.configuration()
        c.model = "t5"
        #expect(throws: TokenizerError.unsupportedModel("t5")) { try Tokenizer(configuration: c) }
        c.model = "llama"  // SentencePiece needs its scores
        #expect(throws: TokenizerError.self) { try Tokenizer(configuration: c) }
        c = Synthetic.configuration(pre: "deepseek-coder")
        #expect(throws: TokenizerError.unsupportedPreTokenizer("deepseek-coder")) { try Tokenizer(configuration: c) }
        #expect(TokenizerError.unsupportedPreTokenizer("xyz").errorDescription!.contains("xyz"))
        #expect(TokenizerError.unsupportedModel("t5").errorDescription!.contains("t5"))
    }

    @Test("bad vocabulary metadata is rejected")
    func badMetadata() throws {
        var c = Synthetic.configuration()
        c.tokenTypes = [1, 1]
        #expect(throws: TokenizerError.self) { try Tokenizer(configuration: c) }
        c = Synthetic.configuration()
        c.tokens.append("a")  // duplicate of byte token 'a'
        c.tokenTypes!.append(1)
        #expect(throws: TokenizerError.self) { try Tokenizer(configuration: c) }
        // add_bos_token without any BOS token (a vocabulary too small for GPT-2's default id 11)
        let tiny = Tokenizer.Configuration(preTokenizer: "qwen2", tokens: ["a", "b"], merges: [], addBOS: true)
        #expect(throws: TokenizerError.self) { try Tokenizer(configuration: tiny) }
        let empty = Tokenizer.Configuration(preTokenizer: "qwen2", tokens: [], merges: [])
        #expect(throws: TokenizerError.self) { try Tokenizer(configuration: empty) }
    }

    @Test("a tokenizer read from GGUF metadata matches one built from the same arrays")
    func fromGGUF() throws {
        let c = Synthetic.configuration(addBOS: true)
        var w = GGUFBuilder()
        w.add("tokenizer.ggml.model", .string("gpt2"))
        w.add("tokenizer.ggml.pre", .string("qwen2"))
        w.add("tokenizer.ggml.tokens", .array(c.tokens.map { .string($0) }))
        w.add("tokenizer.ggml.token_type", .array(c.tokenTypes!.map { .int32(Int32($0)) }))
        w.add("tokenizer.ggml.merges", .array(c.merges.map { .string($0) }))
        w.add("tokenizer.ggml.bos_token_id", .uint32(UInt32(c.bosID!)))
        w.add("tokenizer.ggml.eos_token_id", .uint32(UInt32(c.eosID!)))
        w.add("tokenizer.ggml.add_bos_token", .bool(true))
        let fromFile = try withTemporaryFile(w.bytes()) { try Tokenizer(gguf: GGUFFile(url: $0)) }
        let fromArrays = try Tokenizer(configuration: c)
        let text = "<|im_start|>hello world 😀<|im_end|>"
        #expect(fromFile.encode(text, parseSpecial: true) == fromArrays.encode(text, parseSpecial: true))
        #expect(fromFile.encode("x").first == fromFile.bosID)
        #expect(fromFile.vocabularySize == c.tokens.count)
    }

    @Test("missing or unsupported GGUF tokenizer metadata gives a typed error")
    func ggufErrors() throws {
        func open(_ edit: (inout GGUFBuilder) -> Void) throws -> Result<Tokenizer, TokenizerError> {
            var w = GGUFBuilder()
            edit(&w)
            return try withTemporaryFile(w.bytes()) { url in
                let file = try GGUFFile(url: url)
                do throws(TokenizerError) { return .success(try Tokenizer(gguf: file)) } catch { return .failure(error) }
            }
        }
        let tokens = GGUFValue.array(Synthetic.byteTokens.map { .string($0) })
        #expect(try open { _ in }.failure == .missingMetadata("tokenizer.ggml.model"))
        #expect(try open { $0.add("tokenizer.ggml.model", .string("t5")) }.failure == .unsupportedModel("t5"))
        // SentencePiece needs its scores.
        #expect(try open {
            $0.add("tokenizer.ggml.model", .string("llama"))
            $0.add("tokenizer.ggml.tokens", tokens)
        }.failure == .missingMetadata("tokenizer.ggml.scores"))
        #expect(try open { $0.add("tokenizer.ggml.model", .string("gpt2")) }.failure == .missingMetadata("tokenizer.ggml.tokens"))
        let wrongType = try open {
            $0.add("tokenizer.ggml.model", .string("gpt2"))
            $0.add("tokenizer.ggml.tokens", .string("not an array"))
        }
        guard case .failure(.metadata(.wrongValueType(let key, _, _))) = wrongType else {
            Issue.record("expected a wrong-type error, got \(wrongType)")
            return
        }
        #expect(key == "tokenizer.ggml.tokens")
        let noPre = try open {
            $0.add("tokenizer.ggml.model", .string("gpt2"))
            $0.add("tokenizer.ggml.tokens", tokens)
            $0.add("tokenizer.ggml.merges", .array([]))
        }
        #expect(noPre.failure == .unsupportedPreTokenizer("default"))
    }

    @Test("llama.cpp's space clean-up for the pre-tokenizers that use it")
    func cleanSpaces() {
        var t = Array("Hello , world ! it 's a ' test ' we 're done .".utf8)
        Tokenizer.cleanUpSpaces(&t)
        #expect(String(decoding: t, as: UTF8.self) == "Hello, world! it's a'test'we're done.")
    }
}

@Suite("Pre-tokenizer scanners")
struct PreTokenizerTests {
    @Test("gpt2: contractions, optional leading space, whitespace look-ahead")
    func gpt2() throws {
        #expect(try words("gpt-2", "Hello world's  end") == ["Hello", " world", "'s", " ", " end"])
        #expect(try words("gpt-2", "I'M here") == ["I", "'", "M", " here"])
        #expect(try words("gpt-2", "a1234 !!x") == ["a", "1234", " !!", "x"])
        #expect(try words("gpt-2", "x   ") == ["x", "   "])
        #expect(try words("gpt-2", "a\n\nb") == ["a", "\n", "\n", "b"])
    }

    @Test("smollm: every digit alone, then gpt2 inside each piece")
    func smollm() throws {
        #expect(try words("smollm", "abc 123") == ["abc", " ", "1", "2", "3"])
        #expect(try words("smollm", "x²") == ["x", "²"])
        // the digit ends the piece, so the spaces before it see "end of text"
        #expect(try words("smollm", "a   5") == ["a", "   ", "5"])
    }

    @Test("qwen2: single digits, case-insensitive contractions, newline runs")
    func qwen2() throws {
        #expect(try words("qwen2", "Hello world123") == ["Hello", " world", "1", "2", "3"])
        #expect(try words("qwen2", "IT'S it's") == ["IT", "'S", " it", "'s"])
        #expect(try words("qwen2", "a  \n\n b") == ["a", "  \n\n", " b"])
        #expect(try words("qwen2", "x!!\n\ny") == ["x", "!!\n\n", "y"])
        #expect(try words("qwen2", "(hello)") == ["(hello", ")"])
        #expect(try words("qwen2", "a\t\tb") == ["a", "\t", "\tb"])
    }

    @Test("llama3: digits in groups of three")
    func llama3() throws {
        #expect(try words("llama3", "1234567") == ["123", "456", "7"])
        #expect(try words("llama3", "x 12") == ["x", " ", "12"])
    }

    @Test("character classes follow Unicode 15.1, as llama.cpp's tables do")
    func classes() {
        #expect(UnicodeClass.isLetter(UnicodeClass.of(0x41)))
        #expect(UnicodeClass.isNumber(UnicodeClass.of(0x0663)))     // Arabic-Indic three
        #expect(UnicodeClass.isNumber(UnicodeClass.of(0x00B2)))     // superscript two
        #expect(UnicodeClass.isMark(UnicodeClass.of(0x0301)))
        #expect(UnicodeClass.isWhitespace(UnicodeClass.of(0x3000)))
        #expect(!UnicodeClass.isWhitespace(UnicodeClass.of(0x1C)))  // Python's isspace says yes; llama.cpp no
        #expect(!UnicodeClass.isWhitespace(UnicodeClass.of(0x200B)))
        // U+1FAE9 (Unicode 16 emoji) is unassigned for llama.cpp
        #expect(UnicodeClass.of(0x1FAE9) == UnicodeClass.undefined)
        #expect(UnicodeClass.of(0xD800) == UnicodeClass.control)
    }
}

// MARK: - Fixtures from llama.cpp

/// Fixtures/tokenizer/<model>.json, written by Scripts/make_tokenizer_fixtures.py.
private struct TokenizerFixture: Decodable {
    struct Case: Decodable {
        let text: String
        let special: Bool
        let add_special: Bool?
        let ids: [Int32]
        let detok: String?
    }
    struct Piece: Decodable {
        let id: Int32
        let plain: String
        let special: String
    }
    let model: String
    let llama_cpp_python: String
    let vocabulary_size: Int
    let bos: Int32?
    let eos: Int32?
    let eot: Int32?
    let pad: Int32?
    let add_bos: Bool
    let add_eos: Bool
    let eog: [Int32]
    let control: [Int32]
    let cases: [Case]
    let pieces: [Piece]

    static func load(_ name: String) throws -> TokenizerFixture {
        try TestModels.fixture("tokenizer/\(name).json")
    }
}

/// The real models' tokenizers, loaded once for all tests.
private enum LoadedTokenizers {
    static let smolLM2 = load(TestModels.smolLM2)
    static let qwen25Coder = load(TestModels.qwen25Coder)
    static let gemma3 = load(TestModels.gemma3)

    static func load(_ model: String) -> Result<Tokenizer, any Error> {
        Result {
            guard let url = TestModels.path(model) else { throw TokenizerError.missingMetadata("model \(model) not fetched") }
            return try Tokenizer(gguf: GGUFFile(url: url))
        }
    }

    static func get(_ model: String) throws -> Tokenizer {
        switch model {
        case TestModels.smolLM2: try smolLM2.get()
        case TestModels.gemma3: try gemma3.get()
        default: try qwen25Coder.get()
        }
    }
}

private func hexBytes(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var it = s.utf8.makeIterator()
    while let a = it.next(), let b = it.next() {
        out.append(UInt8(String(decoding: [a, b], as: UTF8.self), radix: 16)!)
    }
    return out
}

private func describe(_ s: String) -> String {
    let shown = s.count > 80 ? String(s.prefix(80)) + "…(\(s.utf8.count) bytes)" : s
    return shown.debugDescription
}

/// Compares every fixture case; returns one line per mismatch.
private func mismatches(_ tokenizer: Tokenizer, _ fixture: TokenizerFixture) -> [String] {
    var out: [String] = []
    for c in fixture.cases {
        let ids = tokenizer.encode(c.text, addSpecial: c.add_special ?? false, parseSpecial: c.special)
        if ids != c.ids {
            out.append("\(describe(c.text)) special=\(c.special): expected \(c.ids.prefix(40)) got \(ids.prefix(40))")
        }
    }
    return out
}

private func checkFixture(model: String, fixture name: String) throws {
    let fixture = try TokenizerFixture.load(name)
    let tokenizer = try LoadedTokenizers.get(model)
    #expect(tokenizer.vocabularySize == fixture.vocabulary_size)
    #expect(fixture.cases.count >= 600)

    let bad = mismatches(tokenizer, fixture)
    let strings = Set(fixture.cases.map(\.text)).count
    #expect(bad.isEmpty, "\(bad.count) of \(fixture.cases.count) cases (\(strings) strings) differ from llama.cpp \(fixture.llama_cpp_python):\n\(bad.prefix(20).joined(separator: "\n"))")
}

@Suite("Tokenizer: llama.cpp fixtures")
struct TokenizerFixtureTests {
    @Test("SmolLM2: ids identical to llama.cpp", .enabled(if: TestModels.path(TestModels.smolLM2) != nil, "model not fetched; run plinth models fetch"))
    func smolLM2Ids() throws {
        try checkFixture(model: TestModels.smolLM2, fixture: "smollm2")
    }

    @Test("Qwen2.5-Coder: ids identical to llama.cpp", .enabled(if: TestModels.path(TestModels.qwen25Coder) != nil, "model not fetched; run plinth models fetch"))
    func qwenIds() throws {
        try checkFixture(model: TestModels.qwen25Coder, fixture: "qwen25")
    }

    @Test("Gemma 3 (SentencePiece): ids identical to llama.cpp", .enabled(if: TestModels.path(TestModels.gemma3) != nil, "model not fetched; run plinth models fetch gemma3"))
    func gemmaIds() throws {
        try checkFixture(model: TestModels.gemma3, fixture: "gemma3")
    }

    static let allFetched = [TestModels.smolLM2, TestModels.qwen25Coder, TestModels.gemma3].allSatisfy { TestModels.path($0) != nil }

    @Test("decode matches llama.cpp and round-trips the text",
          .enabled(if: allFetched, "models not fetched; run plinth models fetch --all"),
          arguments: [(TestModels.smolLM2, "smollm2"), (TestModels.qwen25Coder, "qwen25"), (TestModels.gemma3, "gemma3")])
    func decodeRoundTrip(model: String, fixture name: String) throws {
        let fixture = try TokenizerFixture.load(name)
        let t = try LoadedTokenizers.get(model)
        var failures: [String] = []
        var roundTrips = 0
        for c in fixture.cases where c.add_special == nil {
            // llama.cpp's detokenization of its own ids
            let expected = c.detok.map(hexBytes) ?? Array(c.text.utf8)
            let got = t.decodeBytes(c.ids, renderSpecial: c.special)
            if got != expected { failures.append("decode \(describe(c.text)) special=\(c.special)") }
            // our own round trip, byte for byte (String == would compare canonical equivalence);
            // it gives the text back unless the vocabulary lacks a byte (then llama.cpp drops it too)
            if !c.special {
                let back = t.decodeBytes(t.encode(c.text, addSpecial: false, parseSpecial: false))
                if back != expected { failures.append("round trip \(describe(c.text))") }
                if c.detok == nil { roundTrips += 1 }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failures:\n\(failures.prefix(20).joined(separator: "\n"))")
        #expect(roundTrips >= 470)

        // streaming gives the same text as decoding at once
        for c in fixture.cases where !c.special && c.add_special == nil {
            var s = StreamingDetokenizer(tokenizer: t)
            var text = ""
            for id in c.ids { text += s.append(id) }
            text += s.finish()
            #expect(Array(text.utf8) == Array(t.decode(c.ids).utf8), "streaming \(describe(c.text))")
        }
    }

    @Test("token pieces and special ids match llama.cpp",
          .enabled(if: allFetched, "models not fetched; run plinth models fetch --all"),
          arguments: [(TestModels.smolLM2, "smollm2", "<|im_end|>"), (TestModels.qwen25Coder, "qwen25", "<|im_end|>"),
                      (TestModels.gemma3, "gemma3", "<end_of_turn>")])
    func piecesAndSpecials(model: String, fixture name: String, endOfTurn: String) throws {
        let fixture = try TokenizerFixture.load(name)
        let t = try LoadedTokenizers.get(model)
        var bad: [String] = []
        for p in fixture.pieces {
            if t.tokenPiece(p.id, renderSpecial: false) != hexBytes(p.plain) { bad.append("\(p.id) plain") }
            if t.tokenPiece(p.id, renderSpecial: true) != hexBytes(p.special) { bad.append("\(p.id) special") }
        }
        #expect(bad.isEmpty, "pieces differ: \(bad.prefix(20))")
        #expect(t.bosID == fixture.bos)
        #expect(t.eosID == fixture.eos)
        // llama.cpp picks the end-of-turn token by hash-map order when the file does not name it
        // (SmolLM2: <|endoftext|>, Qwen: <|im_end|> with libstdc++); Plinth prefers <|im_end|>.
        #expect(t.eotID == t.id(forText: endOfTurn))
        if let eot = fixture.eot { #expect(t.isEndOfGeneration(eot)) }
        #expect(t.paddingID == fixture.pad)
        #expect(t.addsBOS == fixture.add_bos)
        #expect(t.addsEOS == fixture.add_eos)
        #expect(t.endOfGenerationIDs == fixture.eog)
        let control = (0..<Int32(t.vocabularySize)).filter { t.isControl($0) }
        #expect(control == fixture.control)
    }

    /// Prints encoding throughput; it asserts only that the output is sane, never a speed. For the
    /// release figure: `swift test -c release -Xswiftc -enable-testing --filter tokenizerSpeed`.
    @Test("TokenizerSpeed: encoding throughput (printed, not asserted)",
          .enabled(if: TestModels.path(TestModels.smolLM2) != nil, "model not fetched; run plinth models fetch"))
    func tokenizerSpeed() throws {
        try measureSpeed(TestModels.smolLM2)
        // SentencePiece: no pre-tokenizer, so no word cache; the merges run over the whole text.
        if TestModels.path(TestModels.gemma3) != nil { try measureSpeed(TestModels.gemma3) }
    }

    func measureSpeed(_ model: String) throws {
        let t = try LoadedTokenizers.get(model)
        #if DEBUG
        let text = englishLikeText(bytes: 256 << 10)  // debug builds are about 15 times slower
        #else
        let text = englishLikeText(bytes: 4 << 20)
        #endif
        let clock = ContinuousClock()
        _ = t.encode(String(text.prefix(10_000)), addSpecial: false)
        var ids: [Int32] = []
        let elapsed = clock.measure { ids = t.encode(text, addSpecial: false) }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        let mb = Double(text.utf8.count) / 1e6
        print(String(format: "TokenizerSpeed %@: %.1f MB in %.3f s = %.1f MB/s, %d tokens (%.2f bytes/token)",
                     model, mb, seconds, mb / seconds, ids.count, Double(text.utf8.count) / Double(ids.count)))
        #expect(ids.count > text.utf8.count / 8)
        #expect(t.decode(ids) == text)
    }
}

/// Deterministic English-like prose: common words, capitals, punctuation, numbers, and some
/// rare made-up words so that not every word is a cache hit.
private func englishLikeText(bytes: Int) -> String {
    let common = """
    the of and to in is you that it he was for on are as with his they at be this have from or one \
    had by word but not what all were we when your can said there use an each which she do how their \
    if will up other about out many then them these so some her would make like him into time has look \
    two more write go see number no way could people my than first water been call who oil its now find \
    long down day did get come made may part government language system between however children \
    important something different following without development information international
    """.split(separator: " ").map(String.init)
    var rng = SplitMix64(seed: 42)
    var out = ""
    out.reserveCapacity(bytes + 64)
    var sentenceStart = true
    let letters = Array("abcdefghijklmnopqrstuvwxyz")
    while out.utf8.count < bytes {
        var w: String
        let r = rng.next() % 100
        if r < 6 {
            w = String((0..<(3 + Int(rng.next() % 9))).map { _ in letters[Int(rng.next() % 26)] })
        } else if r < 8 {
            w = String(rng.next() % 100_000)
        } else {
            w = common[Int(rng.next() % UInt64(common.count))]
        }
        if sentenceStart { w = w.prefix(1).uppercased() + w.dropFirst() }
        out += w
        let p = rng.next() % 100
        if p < 6 { out += ". "; sentenceStart = true }
        else if p < 10 { out += ", "; sentenceStart = false }
        else if p < 11 { out += ".\n\n"; sentenceStart = true }
        else if p < 12 { out += "'s "; sentenceStart = false }
        else { out += " "; sentenceStart = false }
    }
    return out
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}


@Suite("Tokenizer: SentencePiece, synthetic vocabulary")
struct SentencePieceTests {
    static func tokenizer(addSpacePrefix: Bool = true) throws -> Tokenizer {
        var tokens = ["<unk>", "<s>", "</s>"], types = [2, 3, 3], scores: [Float] = [0, 0, 0]
        for b in 0..<256 {
            tokens.append(String(format: "<0x%02X>", b)); types.append(6); scores.append(0)
        }
        for (t, s) in [("▁", -1), ("a", -2), ("b", -2), ("aa", -3), ("ab", -1.5), ("▁a", -1), ("▁ab", -0.5), ("c", -2)] as [(String, Float)] {
            tokens.append(t); types.append(1); scores.append(s)
        }
        return try Tokenizer(configuration: .init(model: "llama", preTokenizer: "default", tokens: tokens, tokenTypes: types, merges: [],
                                                  bosID: 1, eosID: 2, unknownID: 0, scores: scores, addSpacePrefix: addSpacePrefix))
    }

    func ids(_ t: Tokenizer, _ texts: [String]) -> [Int32] { texts.map { t.id(forText: $0)! } }

    @Test func highestScoreMergesFirst() throws {
        let t = try Self.tokenizer()
        // ▁ab▁ab: ▁+a (-1) before a+b (-1.5), then ▁a+b (-0.5)
        #expect(t.encode("ab ab", addSpecial: false) == ids(t, ["▁ab", "▁ab"]))
        #expect(t.encode("ab ab") == [1] + ids(t, ["▁ab", "▁ab"]))
        #expect(t.decode(t.encode("ab ab", addSpecial: false)) == "ab ab")
    }

    @Test func equalScoresMergeLeftmostFirst() throws {
        let t = try Self.tokenizer(addSpacePrefix: false)
        #expect(t.encode("aaa", addSpecial: false) == ids(t, ["aa", "a"]))
    }

    @Test func unknownCharactersFallBackToBytes() throws {
        let t = try Self.tokenizer(addSpacePrefix: false)
        #expect(t.encode("é", addSpecial: false) == ids(t, ["<0xC3>", "<0xA9>"]))
        #expect(t.decode(t.encode("cé", addSpecial: false)) == "cé")
        #expect(try Self.tokenizer().encode("é", addSpecial: false) == ids(t, ["▁", "<0xC3>", "<0xA9>"]))
    }

    @Test func scoresMustCoverTheVocabulary() throws {
        let c = Tokenizer.Configuration(model: "llama", preTokenizer: "default", tokens: ["<unk>", "a"], merges: [], scores: [0])
        #expect(throws: TokenizerError.self) { try Tokenizer(configuration: c) }
    }
}
