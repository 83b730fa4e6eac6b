import Foundation
internal import PlinthGrammar
internal import PlinthRuntime

/// The constraint of one local turn: the response schema's grammar (with jump-forward), the
/// tool-call router, or both. Free text runs unconstrained until the model writes
/// `<tool_call>`; the call's JSON object is then held to the tools' grammar, and after the
/// closing tag the model may open another call or end its turn (see ``ToolCallFormat``).
final class TurnConstraint: Constraint {
    private let tokenizer: Tokenizer
    private let response: GrammarMatcher?
    private let tools: LocalToolCalling?
    /// Whether a call cut short by the token limit fails the turn (a session's) or is dropped,
    /// the turn ending at the limit with the text before it (the HTTP API's "length").
    private let failsOnCutCall: Bool

    /// Where the decoder is: the answer (free text or the response schema), inside a call's
    /// JSON object, or after a call (another call or the end of the turn).
    private enum Phase { case answer, call(GrammarMatcher), betweenCalls(written: Int) }
    private var phase = Phase.answer
    /// Tokens this turn has added (taken-back ones not counted).
    private var generated = 0
    /// Free text with tools is held back while it could be the start of `<tool_call>`.
    private let holdsText: Bool
    private var held: [UInt8] = []
    private var heldTokens = 0
    private var textEmitted = false
    private var answerStarted = false
    private var callsMade = Set<String>()
    /// Where the current call's text began (tags included), to take back a repeated call.
    private var callStart = 0
    /// Where the tags of the call being opened began.
    private var openedAt: Int?
    private var callBytes: [UInt8] = []
    private var callTokens = 0
    /// After a call was taken back, the model answers in text and calls no more.
    private var toolsBarred = false
    /// Whether the answer written since tools were barred is blank so far.
    private var barredAnswerBlank = true
    /// Tokens whose first non-blank byte is `{`: barred while the answer is blank once tools
    /// are barred, so that the call isn't written again without its tags. (A model set on
    /// calling may still write it as text in other ways: Qwen2.5-0.5B opens with `(` then.)
    private lazy var untaggedOpeningTokens: [Int32] = (0..<Int32(tokenizer.vocabularySize)).filter {
        tokenizer.tokenBytes($0).first { !Self.isBlank($0) } == UInt8(ascii: "{")
    }

    static func isBlank(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }

    init(tokenizer: Tokenizer, grammar: CompiledGrammar?, tools: LocalToolCalling?, failsOnCutCall: Bool = true) {
        self.tokenizer = tokenizer
        response = grammar?.makeMatcher()
        self.tools = tools
        self.failsOnCutCall = failsOnCutCall
        holdsText = tools != nil && grammar == nil
    }

    private enum Route { case text, call, markup }

    @discardableResult
    private func push(_ token: Int32, _ route: Route, _ out: inout ConstraintOutput) -> Bool {
        let visible = route == .text && !holdsText
        guard out.append(token, visible: visible) else { return false }
        generated += 1
        switch route {
        case .text where holdsText:
            heldTokens += 1
            held += tokenizer.tokenBytes(token)
        case .text:
            break
        case .call:
            callTokens += 1
            callBytes += tokenizer.tokenBytes(token)
        case .markup:
            callTokens += 1
        }
        return true
    }

    /// Emits held text that can no longer turn into `<tool_call>` (all of it when `all`).
    private func releaseHeld(all: Bool, _ out: inout ConstraintOutput) {
        var n = held.count
        if !all {
            let marker = LocalToolCalling.openingBytes
            var keep = min(held.count, marker.count - 1)
            while keep > 0 && !held.suffix(keep).elementsEqual(marker.prefix(keep)) { keep -= 1 }
            n = Tokenizer.completeUTF8Length(held, upTo: held.count - keep)
        }
        guard n > 0 else { return }
        textEmitted = true
        out.emitText(String(decoding: held[..<n], as: UTF8.self), tokenCount: heldTokens)
        heldTokens = 0
        held.removeSubrange(..<n)
    }

    /// Jump-forward: text the grammar allows in one way only (keys, punctuation) is taken
    /// without sampling; its tokens go through the model together.
    private func forceGrammar(_ matcher: GrammarMatcher, _ route: Route, _ out: inout ConstraintOutput) {
        let forced = matcher.forcedTokens { [tokenizer] bytes in
            (try? tokenizer.encode(bytes: bytes, addSpecial: false, parseSpecial: false)) ?? []
        }
        for token in forced.prefix(out.remaining) {
            guard matcher.accept(token) else { break }
            push(token, route, &out)
        }
    }

    /// Writes fixed text (tool-call tags) without sampling.
    private func forceMarkup(_ bytes: ArraySlice<UInt8>, _ out: inout ConstraintOutput) {
        guard !bytes.isEmpty else { return }
        let tokens = (try? tokenizer.encode(bytes: Array(bytes), addSpecial: false, parseSpecial: true)) ?? []
        for token in tokens { push(token, .markup, &out) }
    }

    /// Starts decoding a call's JSON object; `leading` is text after `<tool_call>` the model
    /// already wrote.
    private func beginCall(leading: ArraySlice<UInt8>, _ out: inout ConstraintOutput) throws {
        guard let tools else { return }
        let matcher = tools.grammar.makeMatcher()
        phase = .call(matcher)
        callBytes = []
        callStart = openedAt ?? generated
        openedAt = nil
        var rest = leading
        if rest.first == UInt8(ascii: "\n") { rest = rest.dropFirst() } else if rest.isEmpty { forceMarkup([UInt8(ascii: "\n")], &out) }
        if !rest.isEmpty {
            guard matcher.accept(bytes: Array(rest)) else {
                throw LanguageModelSession.GenerationError.decodingFailure(.init(
                    debugDescription: "The model began a tool call with text that isn't a call: \(String(decoding: rest, as: UTF8.self))"))
            }
            callBytes += rest
        }
        forceGrammar(matcher, .call, &out)
        // A tool without arguments is written whole by jump-forward.
        if matcher.isComplete { endCall(&out) }
    }

    /// Ends a complete call: reports it and writes the closing tag.
    private func endCall(_ out: inout ConstraintOutput) {
        let call = String(decoding: callBytes, as: UTF8.self)
        let key = (try? JSONValue(parsing: call))?.compactText ?? call
        // Small models fall into repeating a call. A call answered in an earlier round is
        // taken back and the model answers instead; the same call twice in a turn ends it.
        if tools?.answeredCalls.contains(key) == true {
            generated = callStart
            callTokens = 0
            toolsBarred = true
            phase = .answer
            out.rewind(toGenerated: callStart)
            return
        }
        if !callsMade.insert(key).inserted {
            out.finish()
            return
        }
        out.emitToolCall(call, tokenCount: callTokens)
        callTokens = 0
        phase = .betweenCalls(written: 0)
        forceMarkup(ArraySlice(Array(("\n" + ToolCallFormat.closing).utf8)), &out)
    }

    // MARK: Constraint

    func begin(_ out: inout ConstraintOutput) throws {
        if tools?.required == true {
            openedAt = generated
            forceMarkup(ArraySlice(LocalToolCalling.openingBytes), &out)
            try beginCall(leading: [], &out)
        } else if tools == nil, let response {
            forceGrammar(response, .text, &out)
        }
    }

    func fillAllowed(_ mask: UnsafeMutableBufferPointer<UInt32>) -> Bool {
        func allow(_ tokens: some Sequence<Int32>) {
            for t in tokens { mask[Int(t) >> 5] |= 1 << (UInt32(t) & 31) }
        }
        switch phase {
        case .call(let matcher):
            matcher.fillAllowedTokens(mask)
        case .betweenCalls(let written):
            // After a newline the model may still end its turn.
            mask.update(repeating: 0)
            allow(tokenizer.endOfGenerationIDs)
            allow((written == 0 ? tools?.separatorTokens : tools?.openingTokens) ?? [])
        case .answer:
            if let response {
                response.fillAllowedTokens(mask)
                if tools != nil && !answerStarted { allow(tools?.openingTokens ?? []) }
            } else if toolsBarred, let tools {
                mask.update(repeating: ~0)
                let n = tokenizer.vocabularySize
                if n % 32 != 0 { mask[mask.count - 1] = (1 << UInt32(n % 32)) - 1 }
                func bar(_ t: Int32) { mask[Int(t) >> 5] &= ~(1 << (UInt32(t) & 31)) }
                tools.openingTokens.forEach(bar)
                if barredAnswerBlank { untaggedOpeningTokens.forEach(bar) }
            } else {
                return false
            }
        }
        return true
    }

    func fits(_ token: Int32, remaining: Int) -> Bool {
        switch phase {
        case .call(let matcher):
            // The closing tag follows the arguments: its tokens are kept back.
            return matcher.fits(token, remaining: remaining - closingTokenCount)
        case .answer:
            guard let response else { return true }
            if tools != nil && !answerStarted, tools?.openingTokens.contains(token) == true { return true }
            return response.fits(token, remaining: remaining)
        case .betweenCalls:
            return true
        }
    }

    /// The tokens of the markup that closes a call.
    private lazy var closingTokenCount: Int =
        (try? tokenizer.encode(bytes: Array(("\n" + ToolCallFormat.closing).utf8), addSpecial: false, parseSpecial: true).count) ?? 0

    func accept(_ token: Int32, _ out: inout ConstraintOutput) throws {
        switch phase {
        case .call(let matcher):
            guard matcher.accept(token), !tokenizer.isEndOfGeneration(token) else {
                throw LocalLanguageModelError.inferenceFailed("the sampler chose token \(token), which the tool-call grammar forbids")
            }
            push(token, .call, &out)
            forceGrammar(matcher, .call, &out)
            if matcher.isComplete { endCall(&out) }
        case .betweenCalls(let written):
            if tokenizer.isEndOfGeneration(token) { out.finish(); return }
            openedAt = openedAt ?? generated
            push(token, .markup, &out)
            let bytes = tokenizer.tokenBytes(token)
            if written == 0 && bytes == [UInt8(ascii: "\n")] {
                phase = .betweenCalls(written: 1)
                return
            }
            let separator = LocalToolCalling.separatorBytes
            forceMarkup(separator[min(written + bytes.count, separator.count)...], &out)
            try beginCall(leading: [], &out)
        case .answer:
            if let response {
                if tools != nil && !answerStarted, tools?.openingTokens.contains(token) == true {
                    openedAt = generated
                    push(token, .markup, &out)
                    let written = tokenizer.tokenBytes(token).count
                    forceMarkup(LocalToolCalling.openingBytes[written...], &out)
                    try beginCall(leading: [], &out)
                    return
                }
                guard response.accept(token) else {
                    throw LocalLanguageModelError.inferenceFailed("the sampler chose token \(token), which the grammar forbids")
                }
                if response.isTerminated { out.finish(); return }
                answerStarted = true
                push(token, .text, &out)
                forceGrammar(response, .text, &out)
            } else {
                if tokenizer.isEndOfGeneration(token) { out.finish(); return }
                push(token, .text, &out)
                guard holdsText else { return }
                // Barred from calling, the model can't write the tag's first byte: nothing to hold.
                if toolsBarred {
                    if held.contains(where: { !Self.isBlank($0) }) { barredAnswerBlank = false }
                    releaseHeld(all: true, &out)
                    return
                }
                let marker = LocalToolCalling.openingBytes
                let opening = textEmitted ? .none : tools.map { Self.untaggedCall(in: held, grammar: $0.grammar) } ?? .none
                if case .call(let object) = opening {
                    // A turn that opens with a call's JSON object, bare or in a Markdown fence, is
                    // a call without its tags (Qwen2.5 writes ```json fences when tools are offered).
                    openedAt = generated - heldTokens
                    held = []
                    heldTokens = 0
                    try beginCall(leading: ArraySlice([UInt8(ascii: "\n")] + object), &out)
                } else if case .undecided = opening {
                    return
                } else if let at = Self.firstRange(of: marker, in: held) {
                    let after = held[(at + marker.count)...]
                    held.removeSubrange(at...)
                    heldTokens = max(heldTokens - 1, 0)
                    releaseHeld(all: true, &out)
                    openedAt = generated - 1
                    try beginCall(leading: after, &out)
                } else {
                    releaseHeld(all: false, &out)
                }
            }
        }
    }

    func end(_ reason: FinishReason, _ out: inout ConstraintOutput) throws {
        if holdsText { releaseHeld(all: true, &out) }
        if case .call = phase, reason != .cancelled, failsOnCutCall {
            throw LanguageModelSession.GenerationError.decodingFailure(.init(
                debugDescription: "The response token limit ended a tool call before its arguments were complete."))
        }
    }

    enum UntaggedCall: Equatable { case call([UInt8]), undecided, none }

    /// The Markdown fences a call's JSON object may open in.
    private static let fences = ["```json\n", "```\n"].map { Array($0.utf8) }

    /// Whether the first text of a turn is a call written without its tags: after blanks and
    /// maybe a fence (```` ```json ```` and a newline), a JSON object whose first member is
    /// `"name"` with a declared tool's name. A call gives the object's text so far with its runs
    /// of blanks made one (as the call grammar has them); `.undecided` while the text could
    /// still become one. Anything else (a JSON answer among them) is text.
    static func untaggedCall(in text: [UInt8], grammar: CompiledGrammar) -> UntaggedCall {
        guard let start = text.firstIndex(where: { !Self.isBlank($0) }) else { return .undecided }
        var brace = start
        if text[start] != UInt8(ascii: "{") {
            var open: Int?, undecided = false
            for fence in fences {
                let written = text[start...]
                guard written.prefix(fence.count).elementsEqual(fence.prefix(written.count)) else { continue }
                guard written.count > fence.count,
                      let i = text[(start + fence.count)...].firstIndex(where: { !Self.isBlank($0) }) else {
                    undecided = true
                    continue
                }
                if text[i] == UInt8(ascii: "{") { open = i }
            }
            guard let open else { return undecided ? .undecided : .none }
            brace = open
        }
        let object = collapsingBlanks(text[brace...])
        // The object's start up to the name's closing quote: `{"name":"` (a blank allowed
        // between tokens), then the name.
        let head = Array(#"{"name":""#.utf8)
        var i = 0, h = 0
        while h < head.count {
            guard i < object.count else { break }
            if Self.isBlank(object[i]) && (h == 1 || h == 7 || h == 8) { i += 1; continue }
            guard object[i] == head[h] else { return .none }
            i += 1
            h += 1
        }
        let nameEnded = h == head.count && object[i...].contains(UInt8(ascii: "\""))
        // The call grammar admits only declared names (and no escapes in them).
        guard grammar.makeMatcher().accept(bytes: object) else { return .none }
        return nameEnded ? .call(object) : .undecided
    }

    /// JSON text with each run of blanks outside strings cut to its first character.
    static func collapsingBlanks(_ text: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = [], inString = false, escaped = false, lastBlank = false
        out.reserveCapacity(text.count)
        for b in text {
            if inString {
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
                out.append(b)
                continue
            }
            let blank = isBlank(b)
            if blank && lastBlank { continue }
            lastBlank = blank
            if b == UInt8(ascii: "\"") { inString = true }
            out.append(b)
        }
        return out
    }

    /// Where `needle` first occurs in `haystack`.
    static func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
        return nil
    }
}
