import Foundation
import Synchronization

/// Turns text into token ids and token ids back into text, exactly as llama.cpp does for the same
/// GGUF file.
///
/// Build one from a model file with ``init(gguf:)``, then call
/// ``encode(_:addSpecial:parseSpecial:)`` for prompts and ``decode(_:renderSpecial:)`` or a
/// ``StreamingDetokenizer`` for generated tokens. A tokenizer is immutable apart from an internal
/// word cache, and safe to share between tasks.
///
/// Supported: byte-level BPE (`tokenizer.ggml.model = gpt2`) with the pre-tokenizers of the
/// GPT-2 family (`gpt-2`, `mpt`, `olmo`, …), the StarCoder family (`smollm`, `starcoder`,
/// `command-r`, …), the Llama 3 family (`llama3`, `llama-bpe`, `dbrx`, …), `qwen2` and its aliases,
/// and `qwen35`; and SentencePiece BPE (`tokenizer.ggml.model = llama`: Gemma, Llama 2, Mistral),
/// with its scores, `<0xXX>` byte fallback and `▁` for spaces. Other types throw
/// ``TokenizerError/unsupportedModel(_:)`` or ``TokenizerError/unsupportedPreTokenizer(_:)``.
public final class Tokenizer: Sendable {
    /// Everything a tokenizer is made from: the `tokenizer.ggml.*` metadata of a GGUF file, or a
    /// synthetic vocabulary in tests.
    public struct Configuration: Sendable {
        /// `tokenizer.ggml.model`.
        public var model: String
        /// `tokenizer.ggml.pre`.
        public var preTokenizer: String
        /// `tokenizer.ggml.tokens`: the text of each token (byte-level characters for BPE).
        public var tokens: [String]
        /// `tokenizer.ggml.token_type`; nil makes every token ``TokenType/normal``.
        public var tokenTypes: [Int]?
        /// `tokenizer.ggml.merges`: `"left right"` rules, best first (byte-level BPE).
        public var merges: [String]
        /// `tokenizer.ggml.scores`: each token's merge priority (SentencePiece).
        public var scores: [Float]?
        /// `tokenizer.ggml.add_space_prefix`: a space before the text and after each special token
        /// (SentencePiece; nil means true, llama.cpp's default).
        public var addSpacePrefix: Bool?
        /// Special token ids (`tokenizer.ggml.*_token_id`); ids outside the vocabulary are ignored.
        public var bosID: Int?
        public var eosID: Int?
        public var eotID: Int?
        public var eomID: Int?
        public var unknownID: Int?
        public var separatorID: Int?
        public var paddingID: Int?
        public var maskID: Int?
        public var fimPrefixID: Int?
        public var fimSuffixID: Int?
        public var fimMiddleID: Int?
        public var fimPadID: Int?
        public var fimRepoID: Int?
        public var fimSeparatorID: Int?
        /// `tokenizer.ggml.add_bos_token`; nil uses the pre-tokenizer's default.
        public var addBOS: Bool?
        /// `tokenizer.ggml.add_eos_token`; nil means false.
        public var addEOS: Bool?
        /// `general.name`: llama.cpp gives some models' special tokens attributes by it (Phi-3's
        /// eat the whitespace after them).
        public var modelName: String?

        public init(model: String = "gpt2", preTokenizer: String, tokens: [String], tokenTypes: [Int]? = nil,
                    merges: [String], bosID: Int? = nil, eosID: Int? = nil, eotID: Int? = nil,
                    eomID: Int? = nil, unknownID: Int? = nil, separatorID: Int? = nil,
                    paddingID: Int? = nil, maskID: Int? = nil, fimPrefixID: Int? = nil,
                    fimSuffixID: Int? = nil, fimMiddleID: Int? = nil, fimPadID: Int? = nil,
                    fimRepoID: Int? = nil, fimSeparatorID: Int? = nil,
                    addBOS: Bool? = nil, addEOS: Bool? = nil, scores: [Float]? = nil, addSpacePrefix: Bool? = nil,
                    modelName: String? = nil) {
            self.model = model
            self.modelName = modelName
            self.scores = scores
            self.addSpacePrefix = addSpacePrefix
            self.preTokenizer = preTokenizer
            self.tokens = tokens
            self.tokenTypes = tokenTypes
            self.merges = merges
            self.bosID = bosID
            self.eosID = eosID
            self.eotID = eotID
            self.eomID = eomID
            self.unknownID = unknownID
            self.separatorID = separatorID
            self.paddingID = paddingID
            self.maskID = maskID
            self.fimPrefixID = fimPrefixID
            self.fimSuffixID = fimSuffixID
            self.fimMiddleID = fimMiddleID
            self.fimPadID = fimPadID
            self.fimRepoID = fimRepoID
            self.fimSeparatorID = fimSeparatorID
            self.addBOS = addBOS
            self.addEOS = addEOS
        }
    }

    // MARK: Public facts

    /// Number of tokens in the vocabulary.
    public let vocabularySize: Int
    /// `tokenizer.ggml.model`.
    public let modelName: String
    /// `tokenizer.ggml.pre`.
    public let preTokenizerName: String
    /// Beginning-of-sequence token.
    public let bosID: Int32?
    /// End-of-sequence token.
    public let eosID: Int32?
    /// End-of-turn token: from the metadata, or found by its text (`<|im_end|>`, `<|eot_id|>`, …).
    public let eotID: Int32?
    /// End-of-message token (`<|eom_id|>`).
    public let eomID: Int32?
    /// Padding token (`tokenizer.ggml.padding_token_id`).
    public let paddingID: Int32?
    /// Unknown-token marker (unused by byte-level BPE, which can spell any byte).
    public let unknownID: Int32?
    /// Separator token (`tokenizer.ggml.seperator_token_id`, spelled as in the GGUF spec).
    public let separatorID: Int32?
    /// Fill-in-the-middle tokens: from the metadata, or found by their text (`<|fim_prefix|>`, …).
    public let fimPrefixID: Int32?
    public let fimSuffixID: Int32?
    public let fimMiddleID: Int32?
    public let fimPadID: Int32?
    public let fimRepoID: Int32?
    public let fimSeparatorID: Int32?
    /// Whether ``encode(_:addSpecial:parseSpecial:)`` with `addSpecial` puts ``bosID`` first.
    public let addsBOS: Bool
    /// Whether ``encode(_:addSpecial:parseSpecial:)`` with `addSpecial` puts ``eosID`` last.
    public let addsEOS: Bool
    /// The tokens that end generation, in increasing order (llama.cpp's EOG set).
    public let endOfGenerationIDs: [Int32]

    // MARK: Storage

    private let texts: [String]
    /// Token text → id, compared byte for byte (as llama.cpp does; Swift's `String` equality
    /// would treat canonically equivalent spellings as one).
    private let textToID: [WordKey: Int32]
    private let types: [TokenType]
    private let attrs: [TokenAttributes]
    private let eogSet: Set<Int32>
    /// Control, user-defined and unknown tokens, longest text first: split out of text before BPE.
    private let specials: [SpecialToken]
    /// Bytes that begin some special token.
    private let specialFirstBytes: [Bool]
    /// Every token's piece (as rendered with special tokens shown), concatenated.
    private let pieceBytes: [UInt8]
    private let pieceStarts: [Int32]
    private let merges: BPEMerges
    private let pre: PreTokenizer
    /// The SentencePiece vocabulary (`model = llama`), or nil for byte-level BPE.
    private let sentencePiece: SentencePiece?
    /// Whether SentencePiece text gets a leading space (``Configuration/addSpacePrefix``).
    let addSpacePrefix: Bool
    /// Whole words that are tokens (only for pre-tokenizers that skip merging for those).
    private let wholeWords: [WordKey: Int32]
    private let cache = Mutex<[WordKey: [Int32]]>([:])
    /// Whether ``decode(_:renderSpecial:)`` removes spaces before punctuation (llama.cpp `clean_spaces`).
    let cleanSpaces: Bool

    private struct SpecialToken: Sendable {
        var id: Int32
        var bytes: [UInt8]
        var attributes: TokenAttributes
    }

    // MARK: Construction

    /// Builds the tokenizer of a GGUF model from its `tokenizer.ggml.*` metadata.
    public convenience init(gguf: GGUFFile) throws(TokenizerError) {
        func get<T>(_ body: () throws(GGUFError) -> T) throws(TokenizerError) -> T {
            do { return try body() } catch { throw .metadata(error) }
        }
        guard let model = try get({ () throws(GGUFError) in try gguf.string("tokenizer.ggml.model") }) else {
            throw .missingMetadata("tokenizer.ggml.model")
        }
        guard model == "gpt2" || model == "llama" else { throw .unsupportedModel(model) }
        guard let tokens = try get({ () throws(GGUFError) in try gguf.stringArray("tokenizer.ggml.tokens") }) else {
            throw .missingMetadata("tokenizer.ggml.tokens")
        }
        var merges: [String] = [], scores: [Float]? = nil
        if model == "gpt2" {
            guard let m = try get({ () throws(GGUFError) in try gguf.stringArray("tokenizer.ggml.merges") }) else {
                throw .missingMetadata("tokenizer.ggml.merges")
            }
            merges = m
        } else {
            guard let s = try get({ () throws(GGUFError) in try gguf.doubleArray("tokenizer.ggml.scores") }) else {
                throw .missingMetadata("tokenizer.ggml.scores")
            }
            scores = s.map { Float($0) }
        }
        let pre = try get { () throws(GGUFError) in try gguf.string("tokenizer.ggml.pre") }
        let types = try get { () throws(GGUFError) in try gguf.intArray("tokenizer.ggml.token_type") }
        func id(_ key: String) throws(TokenizerError) -> Int? {
            try get { () throws(GGUFError) in try gguf.int("tokenizer.ggml.\(key)") }
        }
        func flag(_ key: String) throws(TokenizerError) -> Bool? {
            try get { () throws(GGUFError) in try gguf.bool("tokenizer.ggml.\(key)") }
        }
        let n = tokens.count
        // the deprecated prefix/suffix/middle keys override the fim_* ones when valid, as in llama.cpp
        func fim(_ key: String, _ deprecated: String) throws(TokenizerError) -> Int? {
            if let d = try id(deprecated), d >= 0, d < n { return d }
            return try id(key)
        }
        let config = Configuration(
            model: model, preTokenizer: pre ?? "default", tokens: tokens, tokenTypes: types, merges: merges,
            bosID: try id("bos_token_id"), eosID: try id("eos_token_id"), eotID: try id("eot_token_id"),
            eomID: try id("eom_token_id"), unknownID: try id("unknown_token_id"),
            separatorID: try id("seperator_token_id"), paddingID: try id("padding_token_id"),
            maskID: try id("mask_token_id"),
            fimPrefixID: try fim("fim_pre_token_id", "prefix_token_id"),
            fimSuffixID: try fim("fim_suf_token_id", "suffix_token_id"),
            fimMiddleID: try fim("fim_mid_token_id", "middle_token_id"),
            fimPadID: try id("fim_pad_token_id"), fimRepoID: try id("fim_rep_token_id"),
            fimSeparatorID: try id("fim_sep_token_id"),
            addBOS: try flag("add_bos_token"), addEOS: try flag("add_eos_token"),
            scores: scores, addSpacePrefix: try flag("add_space_prefix"),
            modelName: try get { () throws(GGUFError) in try gguf.string("general.name") })
        try self.init(configuration: config)
    }

    /// Builds a tokenizer from explicit vocabulary data (synthetic vocabularies, other file formats).
    public init(configuration c: Configuration) throws(TokenizerError) {
        guard c.model == "gpt2" || c.model == "llama" else { throw .unsupportedModel(c.model) }
        let spm = c.model == "llama"
        // SentencePiece has no pre-tokenizer (llama.cpp ignores `tokenizer.ggml.pre` for it).
        let pre = spm ? PreTokenizer.sentencePiece : try PreTokenizer(name: c.preTokenizer)
        let n = c.tokens.count
        if spm && (c.scores?.count ?? 0) < n {
            throw .invalidMetadata(key: "tokenizer.ggml.scores", reason: "\(c.scores?.count ?? 0) scores for \(n) tokens")
        }
        guard n > 0 else { throw .invalidMetadata(key: "tokenizer.ggml.tokens", reason: "the vocabulary is empty") }
        guard n < Int(Int32.max) else { throw .invalidMetadata(key: "tokenizer.ggml.tokens", reason: "too many tokens") }
        if let t = c.tokenTypes, t.count < n {
            throw .invalidMetadata(key: "tokenizer.ggml.token_type",
                                   reason: "\(t.count) types for \(n) tokens")
        }
        self.pre = pre
        self.vocabularySize = n
        self.modelName = c.model
        self.preTokenizerName = c.preTokenizer
        self.cleanSpaces = pre.cleanSpaces

        // Texts and ids. An empty entry gets a placeholder text, as in llama.cpp.
        var texts = c.tokens
        var textToID: [WordKey: Int32] = [:]
        textToID.reserveCapacity(n)
        for i in 0..<n {
            if texts[i].isEmpty { texts[i] = "[EMPTY_\(i)]" }
            textToID[WordKey(Array(texts[i].utf8))] = Int32(i)
        }
        func lookup(_ text: String) -> Int32? { textToID[WordKey(Array(text.utf8))] }
        guard textToID.count == n else {
            throw .invalidMetadata(key: "tokenizer.ggml.tokens", reason: "the vocabulary has duplicate entries")
        }

        var types = [TokenType](repeating: .normal, count: n)
        var attrs = [TokenAttributes](repeating: .normal, count: n)
        if let raw = c.tokenTypes {
            for i in 0..<n {
                let t = TokenType(rawValue: Int32(clamping: raw[i])) ?? .undefined
                types[i] = t
                attrs[i] = TokenAttributes(type: t)
            }
        }

        // Special ids: defaults for byte-level BPE are 11 for BOS and EOS (GPT-2's), for
        // SentencePiece 1 and 2 (and unknown 0), then the metadata; an id past the vocabulary
        // keeps the default.
        func resolve(_ value: Int?, default d: Int? = nil) -> Int32? {
            var id: Int32? = nil
            if let d, d >= 0, d < n { id = Int32(d) }
            if let v = value, v >= 0, v < n { id = Int32(v) }
            return id
        }
        let bos = resolve(c.bosID, default: spm ? 1 : 11)
        let eos = resolve(c.eosID, default: spm ? 2 : 11)
        let unknown = resolve(c.unknownID, default: spm ? 0 : nil)
        var eot = resolve(c.eotID)
        var eom = resolve(c.eomID)
        var fimPre = resolve(c.fimPrefixID)
        var fimSuf = resolve(c.fimSuffixID)
        var fimMid = resolve(c.fimMiddleID)
        var fimPad = resolve(c.fimPadID)
        var fimRep = resolve(c.fimRepoID)
        var fimSep = resolve(c.fimSeparatorID)

        let addBOS = c.addBOS ?? pre.defaultAddBOS
        let addEOS = c.addEOS ?? false
        if addBOS && bos == nil {
            throw .invalidMetadata(key: "tokenizer.ggml.add_bos_token", reason: "it asks for a BOS token but the vocabulary has none")
        }
        if addEOS && eos == nil {
            throw .invalidMetadata(key: "tokenizer.ggml.add_eos_token", reason: "it asks for an EOS token but the vocabulary has none")
        }

        // Special tokens found by their text and marked as control (llama.cpp's workaround for
        // converters that do not record them). When several texts match, llama.cpp takes the first
        // one its hash map yields, which depends on the C++ library; Plinth takes the first in the
        // order of these lists, so that a ChatML model's end of turn is `<|im_end|>`.
        func detect(_ current: Int32?, _ candidates: [String]) -> Int32? {
            if let current { return current }
            for text in candidates {
                if let id = lookup(text) {
                    attrs[Int(id)].insert(.control)
                    return id
                }
            }
            return nil
        }
        eot = detect(eot, SpecialTexts.endOfTurn)
        eom = detect(eom, ["<|eom_id|>"])
        fimPre = detect(fimPre, SpecialTexts.fimPrefix)
        fimSuf = detect(fimSuf, SpecialTexts.fimSuffix)
        fimMid = detect(fimMid, SpecialTexts.fimMiddle)
        fimPad = detect(fimPad, SpecialTexts.fimPad)
        fimRep = detect(fimRep, SpecialTexts.fimRepo)
        fimSep = detect(fimSep, ["<|file_sep|>"])
        // Control tokens named "unused" are unused.
        for i in 0..<n where attrs[i].contains(.control) && Tokenizer.containsBytes(texts[i], "unused") {
            attrs[i].insert(.unused)
        }
        // The end-of-generation set.
        var eog = Set<Int32>()
        for id in [fimPad, fimRep, fimSep] { if let id { eog.insert(id) } }
        for text in SpecialTexts.endOfGeneration {
            guard let id = lookup(text) else { continue }
            eog.insert(id)
            attrs[Int(id)].insert(.control)
        }
        for text in SpecialTexts.alwaysRendered {
            if let id = lookup(text) { attrs[Int(id)] = .userDefined }
        }
        for id in [eos, eot, eom] { if let id { eog.insert(id) } }
        // With <|return|> and <|call|> (or <|calls|> and <|flush|>), <|end|> does not end generation.
        do {
            let eogTexts = Set(eog.map { texts[Int($0)] })
            let hasCall = eogTexts.contains("<|call|>") || eogTexts.contains("<|calls|>")
            if let end = eog.first(where: { texts[Int($0)] == "<|end|>" }),
               hasCall && (eogTexts.contains("<|return|>") || eogTexts.contains("<|flush|>")) {
                eog.remove(end)
                attrs[Int(end)] = .userDefined
            }
            if eogTexts.contains("<|tool_response>") || eogTexts.contains("<|plamo:eos|>"),
               let s = eog.first(where: { texts[Int($0)] == "</s>" }) {
                eog.remove(s)
                attrs[Int(s)] = .normal
            }
        }

        // Attributes llama.cpp gives by model: jina-v2's <mask> takes the whitespace before it;
        // Phi-3's special tokens (but <unk>, <s>, <|endoftext|>) and </s> the whitespace after
        // them, as their Hugging Face tokenizer's lstrip/rstrip do.
        let name = (c.modelName ?? "").lowercased()
        if ["jina-v2-de", "jina-v2-es", "jina-v2-code"].contains(where: { c.preTokenizer.contains($0) }) {
            if let id = lookup("<mask>") { attrs[Int(id)].insert(.lstrip) }
        } else if name.contains("phi-3") || name.contains("phi3") {
            for i in 0..<n where !attrs[i].isDisjoint(with: [.control, .userDefined, .unknown]) { attrs[i].insert(.rstrip) }
            if let id = lookup("</s>") { attrs[Int(id)].insert(.rstrip) }
            for text in ["<unk>", "<s>", "<|endoftext|>"] {
                if let id = lookup(text) { attrs[Int(id)].remove(.rstrip) }
            }
        }

        // Special tokens, longest first (ties by id, for determinism).
        var specials: [SpecialToken] = []
        for i in 0..<n where !attrs[i].isDisjoint(with: [.control, .userDefined, .unknown]) {
            specials.append(SpecialToken(id: Int32(i), bytes: Array(texts[i].utf8), attributes: attrs[i]))
        }
        specials.sort { $0.bytes.count != $1.bytes.count ? $0.bytes.count > $1.bytes.count : $0.id < $1.id }
        var firstBytes = [Bool](repeating: false, count: 256)
        for s in specials { if let b = s.bytes.first { firstBytes[Int(b)] = true } }

        // Pieces.
        var pieceBytes: [UInt8] = []
        var pieceStarts: [Int32] = [0]
        pieceStarts.reserveCapacity(n + 1)
        for i in 0..<n {
            Tokenizer.appendPiece(text: texts[i], attributes: attrs[i], sentencePiece: spm, to: &pieceBytes)
            pieceStarts.append(Int32(pieceBytes.count))
        }

        var wholeWords: [WordKey: Int32] = [:]
        if pre.ignoreMerges {
            for i in 0..<n {
                if let bytes = ByteLevel.decode(texts[i]) { wholeWords[WordKey(bytes)] = Int32(i) }
            }
        }

        self.merges = BPEMerges(tokenIDs: textToID, vocabularySize: n, merges: c.merges)
        self.sentencePiece = spm ? SentencePiece(texts: texts, scores: Array(c.scores!.prefix(n)), unknownID: unknown) : nil
        self.addSpacePrefix = spm && (c.addSpacePrefix ?? true)
        self.texts = texts
        self.textToID = textToID
        self.types = types
        self.attrs = attrs
        self.specials = specials
        self.specialFirstBytes = firstBytes
        self.pieceBytes = pieceBytes
        self.pieceStarts = pieceStarts
        self.wholeWords = wholeWords
        self.bosID = bos
        self.eosID = eos
        self.eotID = eot
        self.eomID = eom
        self.paddingID = resolve(c.paddingID)
        self.unknownID = unknown
        self.separatorID = resolve(c.separatorID)
        self.fimPrefixID = fimPre
        self.fimSuffixID = fimSuf
        self.fimMiddleID = fimMid
        self.fimPadID = fimPad
        self.fimRepoID = fimRep
        self.fimSeparatorID = fimSep
        self.addsBOS = addBOS
        self.addsEOS = addEOS
        self.eogSet = eog
        self.endOfGenerationIDs = eog.sorted()
    }

    /// The piece of one token with special tokens shown (llama.cpp `token_to_piece(special: true)`).
    private static func appendPiece(text: String, attributes a: TokenAttributes, sentencePiece: Bool, to out: inout [UInt8]) {
        if !a.isDisjoint(with: [.unknown, .control, .userDefined]) {
            out.append(contentsOf: text.utf8)
        } else if a.contains(.normal) && sentencePiece {
            // `▁` is a space.
            let u = Array(text.utf8)
            var i = 0
            while i < u.count {
                if SentencePiece.isSpace(u, at: i) {
                    out.append(0x20)
                    i += 3
                } else {
                    out.append(u[i])
                    i += 1
                }
            }
        } else if a.contains(.normal) {
            for s in text.unicodeScalars {
                let v = s.value
                if v < 0x144, ByteLevel.byteForScalar[Int(v)] >= 0 {
                    out.append(UInt8(ByteLevel.byteForScalar[Int(v)]))
                } else {
                    // llama.cpp marks characters outside the byte alphabet this way
                    out.append(contentsOf: "[UNK_BYTE_0x".utf8)
                    for b in String(s).utf8 { out.append(contentsOf: hex2(b).utf8) }
                    out.append(contentsOf: text.utf8)
                    out.append(UInt8(ascii: "]"))
                }
            }
        } else if a.contains(.byte) {
            out.append(ByteToken.value(text))
        }
    }

    private static func containsBytes(_ text: String, _ needle: String) -> Bool {
        let h = Array(text.utf8), n = Array(needle.utf8)
        guard h.count >= n.count else { return false }
        return (0...(h.count - n.count)).contains { i in h[i..<(i + n.count)].elementsEqual(n) }
    }

    private static func hex2(_ b: UInt8) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: [digits[Int(b >> 4)], digits[Int(b & 15)]], as: UTF8.self)
    }

    // MARK: Token facts

    /// The vocabulary text of a token: byte-level characters for ordinary tokens (`"Ġthe"`), the
    /// literal text for special tokens (`"<|im_end|>"`); empty for an id outside the vocabulary.
    public func tokenText(_ id: Int32) -> String {
        guard id >= 0, Int(id) < vocabularySize else { return "" }
        return texts[Int(id)]
    }

    /// The token whose vocabulary text is exactly `text` (e.g. `"<|im_end|>"`), or nil.
    public func id(forText text: String) -> Int32? { textToID[WordKey(Array(text.utf8))] }

    /// The type recorded in `tokenizer.ggml.token_type` (``TokenType/undefined`` for a bad id).
    public func tokenType(_ id: Int32) -> TokenType {
        guard id >= 0, Int(id) < vocabularySize else { return .undefined }
        return types[Int(id)]
    }

    /// The attributes the tokenizer acts on: the type plus llama.cpp's corrections.
    public func attributes(_ id: Int32) -> TokenAttributes {
        guard id >= 0, Int(id) < vocabularySize else { return .undefined }
        return attrs[Int(id)]
    }

    /// Whether a token is a control token (rendered only on request).
    public func isControl(_ id: Int32) -> Bool { attributes(id).contains(.control) }

    /// Whether generating this token ends the turn (EOS, EOT, `<|im_end|>`, `<|endoftext|>`, …).
    public func isEndOfGeneration(_ id: Int32) -> Bool { eogSet.contains(id) }

    /// The bytes a token stands for, with control tokens written as their text. This is what
    /// `tokenPiece(id, renderSpecial: true)` gives; a constrained decoder reads it for every token.
    public func tokenBytes(_ id: Int32) -> [UInt8] {
        withTokenBytes(id) { Array($0) }
    }

    /// Calls `body` with the bytes of a token (see ``tokenBytes(_:)``) without copying them.
    public func withTokenBytes<R>(_ id: Int32, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        guard id >= 0, Int(id) < vocabularySize else {
            return try body(UnsafeBufferPointer(start: nil, count: 0))
        }
        let start = Int(pieceStarts[Int(id)]), end = Int(pieceStarts[Int(id) + 1])
        return try pieceBytes.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[start..<end])) }
    }

    /// The bytes a token contributes to decoded text. Control and unknown tokens contribute nothing
    /// unless `renderSpecial` is true (llama.cpp `token_to_piece(…, special)`).
    public func tokenPiece(_ id: Int32, renderSpecial: Bool = false) -> [UInt8] {
        if !renderSpecial && !attributes(id).isDisjoint(with: [.control, .unknown]) { return [] }
        return tokenBytes(id)
    }

    // MARK: Decoding

    /// The bytes of a token sequence, as llama.cpp's `llama_detokenize` gives them (including its
    /// space clean-up for the pre-tokenizers that ask for it).
    public func decodeBytes(_ ids: [Int32], renderSpecial: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        pieceBytes.withUnsafeBufferPointer { pb in
            for (k, id) in ids.enumerated() {
                guard id >= 0, Int(id) < vocabularySize else { continue }
                if !renderSpecial && !attrs[Int(id)].isDisjoint(with: [.control, .unknown]) { continue }
                var start = Int(pieceStarts[Int(id)])
                let end = Int(pieceStarts[Int(id) + 1])
                // The space SentencePiece put before the text (llama.cpp's `remove_space`).
                if k == 0 && addSpacePrefix && start < end && pb[start] == 0x20 { start += 1 }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: pb[start..<end]))
            }
        }
        if cleanSpaces { Tokenizer.cleanUpSpaces(&out) }
        return out
    }

    /// The text of a token sequence; bytes that are not valid UTF-8 become U+FFFD.
    public func decode(_ ids: [Int32], renderSpecial: Bool = false) -> String {
        String(decoding: decodeBytes(ids, renderSpecial: renderSpecial), as: UTF8.self)
    }

    /// llama.cpp's `clean_spaces`: drop the space before `? ! . ,`, in " ' ", and before the
    /// contractions 's 'm 're 've.
    static func cleanUpSpaces(_ t: inout [UInt8]) {
        let space = UInt8(ascii: " "), quote = UInt8(ascii: "'")
        // pass 1
        var total = t.isEmpty ? 0 : 1
        let n1 = t.count
        if n1 > 1 {
            for i in 1..<n1 {
                let x = t[i]
                if t[i - 1] == space && (x == UInt8(ascii: "?") || x == UInt8(ascii: "!") || x == UInt8(ascii: ".") || x == UInt8(ascii: ",")) {
                    total -= 1
                }
                t[total] = x
                total += 1
            }
        }
        t.removeLast(t.count - total)
        // pass 2
        let n2 = t.count
        total = n2 == 0 ? 0 : 1
        var i = 1
        while i < n2 {
            let x = t[i]
            if x == quote && i + 1 < n2 && t[i - 1] == space && t[i + 1] == space {
                total -= 1
                i += 1
                t[i] = 0
            }
            t[total] = x
            total += 1
            i += 1
        }
        t.removeLast(t.count - total)
        // pass 3
        let n3 = t.count
        total = n3 == 0 ? 0 : 1
        i = 1
        while i < n3 {
            let x = t[i]
            if t[i - 1] == space && x == quote && i + 1 < n3 {
                let x1 = t[i + 1]
                if x1 == UInt8(ascii: "s") || x1 == UInt8(ascii: "m") {
                    total -= 1
                } else if i + 2 < n3 {
                    let x2 = t[i + 2]
                    if (x1 == UInt8(ascii: "r") || x1 == UInt8(ascii: "v")) && x2 == UInt8(ascii: "e") {
                        total -= 1
                    }
                }
            }
            t[total] = x
            total += 1
            i += 1
        }
        t.removeLast(t.count - total)
    }

    // MARK: Encoding

    /// A prompt a chat template rendered: the control tokens it writes as text parsed into ids,
    /// and BOS first once. A template that writes `bos_token` itself (Gemma's) gets no second
    /// one, as in llama.cpp's chat path and Hugging Face's (`add_special_tokens=False`).
    public func encodeRendered(_ text: String) -> [Int32] {
        var ids = encode(text, addSpecial: true, parseSpecial: true)
        if addsBOS, let bos = bosID, ids.count >= 2, ids[0] == bos, ids[1] == bos { ids.removeFirst() }
        return ids
    }

    /// Encodes text, mirroring llama.cpp's `llama_tokenize(text, add_special, parse_special)`.
    ///
    /// - Parameters:
    ///   - addSpecial: put BOS first / EOS last when the model asks for them
    ///     (`tokenizer.ggml.add_bos_token`, `add_eos_token`).
    ///   - parseSpecial: text that spells a control token (like `<|im_start|>`) becomes that token;
    ///     otherwise it is tokenized as plain text. User-defined tokens are always matched.
    public func encode(_ text: String, addSpecial: Bool = true, parseSpecial: Bool = false) -> [Int32] {
        var text = text
        return text.withUTF8 { encodeValid($0, addSpecial: addSpecial, parseSpecial: parseSpecial) }
    }

    /// Encodes UTF-8 bytes, checking them first (see ``encode(_:addSpecial:parseSpecial:)``).
    ///
    /// - Throws: ``TokenizerError/invalidUTF8(offset:)`` naming the first ill-formed byte.
    public func encode(bytes: [UInt8], addSpecial: Bool = true, parseSpecial: Bool = false) throws(TokenizerError) -> [Int32] {
        let invalid = bytes.withUnsafeBufferPointer { UTF8Scan.firstInvalidOffset($0) }
        if let invalid { throw .invalidUTF8(offset: invalid) }
        return bytes.withUnsafeBufferPointer { encodeValid($0, addSpecial: addSpecial, parseSpecial: parseSpecial) }
    }

    /// Checks that bytes are UTF-8 and returns them as a string.
    ///
    /// - Throws: ``TokenizerError/invalidUTF8(offset:)`` naming the first ill-formed byte.
    /// The length of the longest prefix of `bytes[..<n]` that doesn't end inside a UTF-8 sequence.
    public static func completeUTF8Length(_ bytes: [UInt8], upTo n: Int) -> Int {
        var i = n - 1
        while i >= 0 && i >= n - 4 && bytes[i] & 0xC0 == 0x80 { i -= 1 }
        guard i >= 0 && i < n else { return n }
        let lead = bytes[i]
        let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
        return n - i < length ? i : n
    }

    public static func validatedText(_ bytes: [UInt8]) throws(TokenizerError) -> String {
        let invalid = bytes.withUnsafeBufferPointer { UTF8Scan.firstInvalidOffset($0) }
        if let invalid { throw .invalidUTF8(offset: invalid) }
        return String(decoding: bytes, as: UTF8.self)
    }

    private enum Fragment {
        case text(Int, Int)
        case token(Int32)
    }

    private func encodeValid(_ bytes: UnsafeBufferPointer<UInt8>, addSpecial: Bool, parseSpecial: Bool) -> [Int32] {
        var out: [Int32] = []
        out.reserveCapacity(bytes.count / 3 + 4)
        if addSpecial && addsBOS, let bos = bosID { out.append(bos) }
        if bytes.count > 0 {
            let fragments = partition(bytes, parseSpecial: parseSpecial)
            if let spm = sentencePiece {
                encodeSentencePiece(bytes, fragments, spm, into: &out)
            } else {
                var session = EncodeSession()
                for f in fragments {
                    switch f {
                    case .token(let id): out.append(id)
                    case .text(let s, let e): session.encode(UnsafeBufferPointer(rebasing: bytes[s..<e]), with: self, into: &out)
                    }
                }
            }
        }
        if addSpecial && addsEOS, let eos = eosID { out.append(eos) }
        return out
    }

    /// SentencePiece over each text fragment, its spaces written as `▁`, with a space first where
    /// the model asks for one (at the start and after a special token, as llama.cpp does).
    private func encodeSentencePiece(_ bytes: UnsafeBufferPointer<UInt8>, _ fragments: [Fragment], _ spm: SentencePiece,
                                     into out: inout [Int32]) {
        var workspace = SentencePieceWorkspace()
        var escaped: [UInt8] = []
        var afterSpecial = true
        for f in fragments {
            switch f {
            case .token(let id):
                out.append(id)
                afterSpecial = true
            case .text(let s, let e):
                escaped.removeAll(keepingCapacity: true)
                if addSpacePrefix && afterSpecial { escaped.append(contentsOf: SentencePiece.space) }
                for b in bytes[s..<e] {
                    if b == 0x20 { escaped.append(contentsOf: SentencePiece.space) } else { escaped.append(b) }
                }
                escaped.withUnsafeBufferPointer { text in
                    spm.forEachSegment(text) { segment in
                        guard segment.count > 1 else { spm.encode(segment, into: &out, workspace: &workspace); return }
                        appendCached(WordKey(Array(segment)), into: &out) { spm.encode(segment, into: &$0, workspace: &workspace) }
                    }
                }
                afterSpecial = false
            }
        }
    }

    /// Appends the tokens of a word (its bytes as `key`): from the word cache, or made by `encode`
    /// (which appends them) and cached when the word is at most 256 bytes. The cache is emptied
    /// when it holds 65,536 words.
    private func appendCached(_ key: WordKey, into out: inout [Int32], _ encode: (inout [Int32]) -> Void) {
        if let hit = cache.withLock({ $0[key] }) {
            out.append(contentsOf: hit)
            return
        }
        let first = out.count
        encode(&out)
        guard key.bytes.count <= 256 else { return }
        let ids = Array(out[first...])
        cache.withLock { c in
            if c.count >= 1 << 16 { c.removeAll(keepingCapacity: true) }
            c[key] = ids
        }
    }

    /// Splits special-token text out of the input, one special token at a time, longest first,
    /// leftmost occurrences first (llama.cpp's `tokenizer_st_partition`).
    private func partition(_ bytes: UnsafeBufferPointer<UInt8>, parseSpecial: Bool) -> [Fragment] {
        var fragments: [Fragment] = [.text(0, bytes.count)]
        guard !specials.isEmpty else { return fragments }
        // positions where some special token could start
        var candidates: [Int] = []
        for i in 0..<bytes.count where specialFirstBytes[Int(bytes[i])] { candidates.append(i) }
        guard !candidates.isEmpty else { return fragments }

        @inline(__always) func isCSpace(_ b: UInt8) -> Bool { b == 0x20 || (b >= 0x09 && b <= 0x0D) }

        for special in specials {
            if !parseSpecial && !special.attributes.isDisjoint(with: [.control, .unknown]) { continue }
            let pattern = special.bytes
            let m = pattern.count
            guard m > 0, m <= bytes.count else { continue }
            var next: [Fragment] = []
            var changed = false
            for f in fragments {
                guard case .text(let s, let e) = f, e - s >= m else { next.append(f); continue }
                var cursor = s
                // first candidate at or after s
                var lo = 0, hi = candidates.count
                while lo < hi { let mid = (lo + hi) / 2; if candidates[mid] < s { lo = mid + 1 } else { hi = mid } }
                var ci = lo
                while ci < candidates.count {
                    let p = candidates[ci]
                    if p + m > e { break }
                    ci += 1
                    if p < cursor || bytes[p] != pattern[0] { continue }
                    var match = true
                    for j in 1..<m where bytes[p + j] != pattern[j] { match = false; break }
                    if !match { continue }
                    changed = true
                    var leftEnd = p
                    if special.attributes.contains(.lstrip) {
                        while leftEnd > cursor && isCSpace(bytes[leftEnd - 1]) { leftEnd -= 1 }
                    }
                    if leftEnd > cursor { next.append(.text(cursor, leftEnd)) }
                    next.append(.token(special.id))
                    cursor = p + m
                    if special.attributes.contains(.rstrip) {
                        while cursor < e && isCSpace(bytes[cursor]) { cursor += 1 }
                    }
                }
                if cursor < e { next.append(.text(cursor, e)) }
            }
            if changed { fragments = next }
        }
        return fragments
    }

    /// Buffers reused across the words of one `encode` call.
    private struct EncodeSession {
        var cps: [UInt32] = []
        var classes: [UInt8] = []
        var offsets: [Int32] = []
        var ends: [Int32] = []
        var workspace = BPEWorkspace()

        mutating func encode(_ text: UnsafeBufferPointer<UInt8>, with tok: Tokenizer, into out: inout [Int32]) {
            let n = text.count
            // buffers only grow; `count` code points are in use
            if cps.count < n + 1 {
                let size = max(n + 1, 2 * cps.count)
                cps = [UInt32](repeating: 0, count: size)
                classes = [UInt8](repeating: 0, count: size)
                offsets = [Int32](repeating: 0, count: size)
            }
            ends.removeAll(keepingCapacity: true)
            var count = 0
            cps.withUnsafeMutableBufferPointer { cp in
                classes.withUnsafeMutableBufferPointer { cl in
                    offsets.withUnsafeMutableBufferPointer { of in
                        UnicodeClass.table.withUnsafeBufferPointer { table in
                            var i = 0
                            while i < n {
                                let b0 = text[i]
                                let c: UInt32
                                let len: Int
                                if b0 < 0x80 {
                                    c = UInt32(b0); len = 1
                                } else if b0 < 0xE0 {
                                    c = UInt32(b0 & 0x1F) << 6 | UInt32(text[i + 1] & 0x3F); len = 2
                                } else if b0 < 0xF0 {
                                    c = UInt32(b0 & 0x0F) << 12 | UInt32(text[i + 1] & 0x3F) << 6
                                        | UInt32(text[i + 2] & 0x3F); len = 3
                                } else {
                                    c = UInt32(b0 & 0x07) << 18 | UInt32(text[i + 1] & 0x3F) << 12
                                        | UInt32(text[i + 2] & 0x3F) << 6 | UInt32(text[i + 3] & 0x3F); len = 4
                                }
                                cp[count] = c
                                cl[count] = table[Int(c)]
                                of[count] = Int32(i)
                                count += 1
                                i += len
                            }
                            of[count] = Int32(n)
                        }
                    }
                }
            }
            cps.withUnsafeBufferPointer { cp in
                classes.withUnsafeBufferPointer { cl in
                    tok.pre.split(cp.baseAddress!, cl.baseAddress!, count: count, into: &ends)
                }
            }
            var wordStart = 0
            for e in ends {
                let b0 = Int(offsets[wordStart]), b1 = Int(offsets[Int(e)])
                encodeWord(UnsafeBufferPointer(rebasing: text[b0..<b1]), tok, &out)
                wordStart = Int(e)
            }
        }

        @inline(__always)
        mutating func encodeWord(_ word: UnsafeBufferPointer<UInt8>, _ tok: Tokenizer, _ out: inout [Int32]) {
            if word.count == 1 {
                workspace.encode(word, merges: tok.merges, into: &out)
                return
            }
            let key = WordKey(Array(word))
            if tok.pre.ignoreMerges, let id = tok.wholeWords[key] {
                out.append(id)
                return
            }
            tok.appendCached(key, into: &out) { workspace.encode(word, merges: tok.merges, into: &$0) }
        }
    }
}

/// A word's raw bytes as a dictionary key, hashed in one call.
struct WordKey: Hashable, Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
    static func == (a: WordKey, b: WordKey) -> Bool { a.bytes == b.bytes }
}

/// Token texts that llama.cpp recognizes by name.
enum SpecialTexts {
    static let endOfTurn: [String] = [
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<EOT>", "_<EOT>", "[EOT]",
        "<end_of_utterance>", "<｜end▁of▁sentence｜>", "<|end_of_text|>", "<|endoftext|>",
    ]
    static let fimPrefix: [String] = [
        "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
        "<|code_prefix|>", "<|prefix|>",
    ]
    static let fimSuffix: [String] = [
        "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
        "<|code_suffix|>", "<|suffix|>",
    ]
    static let fimMiddle: [String] = [
        "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
        "<|code_middle|>", "<|middle|>",
    ]
    static let fimPad: [String] = ["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"]
    static let fimRepo: [String] = ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"]
    static let endOfGeneration: [String] = [
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
        "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<｜end▁of▁sentence｜>", "[e~[",
    ]
    /// gpt-oss tokens that llama.cpp always renders.
    static let alwaysRendered: [String] = ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"]
}
