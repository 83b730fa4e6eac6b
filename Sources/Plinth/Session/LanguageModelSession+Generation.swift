import Foundation
import Synchronization

/// What one turn of the executor produced.
struct TurnOutput {
    var responseID: String?
    var segmentOrder: [String] = []
    var texts: [String: String] = [:]
    var customSegments: [any Transcript.CustomSegment] = []
    var attachments: [Transcript.AttachmentSegment] = []
    var responseMetadata: Metadata.Values = [:]

    var reasoningID: String?
    var reasoningOrder: [String] = []
    var reasoningTexts: [String: String] = [:]
    var reasoningSignature: Data?
    var reasoningMetadata: Metadata.Values = [:]

    var toolCallsID: String?
    var callOrder: [String] = []
    var callNames: [String: String] = [:]
    var callArguments: [String: String] = [:]
    var callMetadata: [String: Metadata.Values] = [:]

    var usage: LanguageModelExecutorGenerationChannel.Usage?

    /// The response text, its segments joined.
    var responseText: String {
        segmentOrder.map { texts[$0] ?? "" }.joined()
    }

    var hasReasoning: Bool { !reasoningOrder.isEmpty || reasoningSignature != nil }

    /// Applies an event; returns whether the response text changed.
    mutating func apply(_ event: any LanguageModelExecutorGenerationChannel.Event) -> Bool {
        typealias Channel = LanguageModelExecutorGenerationChannel
        if let event = event as? Channel.Response {
            if let id = event.entryID { responseID = id }
            switch event.action {
            case .appendText(let fragment):
                let key = fragment.segmentID ?? ""
                if texts[key] == nil { segmentOrder.append(key) }
                texts[key, default: ""] += fragment.content
                return true
            case .replaceTextSegment(let replacement):
                let key = replacement.segmentID ?? ""
                if texts[key] == nil { segmentOrder.append(key) }
                texts[key] = replacement.content
                return true
            case .updateCustomSegment(let segment):
                if let i = customSegments.firstIndex(where: { $0.id == segment.id }) {
                    customSegments[i] = segment
                } else {
                    customSegments.append(segment)
                }
            case .addAttachmentSegment(let segment):
                if let i = attachments.firstIndex(where: { $0.id == segment.id }) {
                    attachments[i] = segment
                } else {
                    attachments.append(segment)
                }
            case .removeAttachmentSegment(let id): attachments.removeAll { $0.id == id }
            case .updateMetadata(let metadata): responseMetadata.merge(metadata.values) { $1 }
            case .updateUsage(let u): usage = u
            }
        } else if let event = event as? Channel.Reasoning {
            if let id = event.entryID { reasoningID = id }
            switch event.action {
            case .appendText(let fragment):
                let key = fragment.segmentID ?? ""
                if reasoningTexts[key] == nil { reasoningOrder.append(key) }
                reasoningTexts[key, default: ""] += fragment.content
            case .replaceTextSegment(let replacement):
                let key = replacement.segmentID ?? ""
                if reasoningTexts[key] == nil { reasoningOrder.append(key) }
                reasoningTexts[key] = replacement.content
            case .updateSignature(let signature): reasoningSignature = signature.signature
            case .updateMetadata(let metadata): reasoningMetadata.merge(metadata.values) { $1 }
            case .updateUsage(let u): usage = u
            }
        } else if let event = event as? Channel.ToolCalls {
            if let id = event.entryID { toolCallsID = id }
            switch event.action {
            case .toolCall(let call):
                if callNames[call.id] == nil { callOrder.append(call.id) }
                callNames[call.id] = call.name
                switch call.action {
                case .appendArguments(let fragment): callArguments[call.id, default: ""] += fragment.content
                case .updateMetadata(let metadata): callMetadata[call.id, default: [:]].merge(metadata.values) { $1 }
                }
            case .removeToolCall(let id):
                callOrder.removeAll { $0 == id }
                callNames[id] = nil
                callArguments[id] = nil
                callMetadata[id] = nil
            case .updateMetadata: break
            case .updateUsage(let u): usage = u
            }
        }
        return false
    }

    var sessionUsage: LanguageModelSession.Usage {
        guard let usage else { return .zero }
        return LanguageModelSession.Usage(
            input: .init(totalTokenCount: usage.input.totalTokenCount, cachedTokenCount: usage.input.cachedTokenCount),
            output: .init(totalTokenCount: usage.output.totalTokenCount, reasoningTokenCount: usage.output.reasoningTokenCount))
    }
}

extension LanguageModelSession {
    /// Runs a request: the prompt, rounds of tool calls, and the response.
    ///
    /// - Parameter snapshot: Receives the content generated so far, as the response streams.
    func generate(prompt: Prompt, schema: GenerationSchema?, options: GenerationOptions, contextOptions: ContextOptions,
                  metadata: Metadata.Values, validate: (any ConvertibleFromGeneratedContent.Type)? = nil,
                  snapshot: (@Sendable (RawResult) -> Void)? = nil) async throws -> RawResult {
        // The request's number once it has begun, and whether its task was cancelled: a cancel
        // that comes while it waits or begins is marked as soon as the number is known.
        let mine = Mutex<(number: UInt64?, cancelled: Bool)>((nil, false))
        return try await withTaskCancellationHandler {
            let before = try await beginRequest(mine)
            defer { endResponding() }
            return try await runRequest(after: before, prompt: prompt, schema: schema, options: options, contextOptions: contextOptions,
                                        metadata: metadata, validate: validate, snapshot: snapshot)
        } onCancel: {
            state.withLock { s in
                mine.withLock { m in
                    m.cancelled = true
                    if let n = m.number, s.requestNumber == n { s.requestCancelled = true }
                }
            }
        }
    }

    /// Marks the session responding and gives the transcript before the request (its number
    /// goes into `mine`). While another request runs it throws ``GenerationError/concurrentRequests(_:)``,
    /// unless that request was cancelled: then it waits for it to end (a stream dropped after
    /// `break` ends its request, and the next request shouldn't fail for it). A cancelled
    /// task doesn't wait: it throws `CancellationError` (a tool of a cancelled request calling
    /// its own session would otherwise wait for itself).
    private func beginRequest(_ mine: borrowing Mutex<(number: UInt64?, cancelled: Bool)>) async throws -> Transcript {
        while true {
            let begun: Transcript? = try registrar.withMutation(of: self, keyPath: \.isResponding) {
                try state.withLock { s in
                    if s.isResponding {
                        if s.requestCancelled { return nil }
                        throw GenerationError.concurrentRequests(.init(
                            debugDescription: "The session is still responding to another request."))
                    }
                    s.isResponding = true
                    s.mutatedWhileResponding = false
                    s.requestNumber += 1
                    s.requestCancelled = mine.withLock { m in
                        m.number = s.requestNumber
                        return m.cancelled
                    }
                    return s.transcript
                }
            }
            if let begun { return begun }
            try Task.checkCancellation()
            let waiter = state.withLock { s in
                s.nextWaiter += 1
                return s.nextWaiter
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    // Waits only for a cancelled request still ending (another may have begun
                    // since: the loop then throws), and not once this task is cancelled.
                    let waits = state.withLock { s in
                        guard s.isResponding && s.requestCancelled && !s.cancelledWaiters.contains(waiter) else { return false }
                        s.idleWaiters.append((waiter, continuation))
                        return true
                    }
                    if !waits { continuation.resume() }
                }
            } onCancel: {
                let continuation = state.withLock { s in
                    guard let i = s.idleWaiters.firstIndex(where: { $0.id == waiter }) else {
                        s.cancelledWaiters.insert(waiter)
                        return CheckedContinuation<Void, Never>?.none
                    }
                    return s.idleWaiters.remove(at: i).continuation
                }
                continuation?.resume()
            }
            state.withLock { _ = $0.cancelledWaiters.remove(waiter) }
            try Task.checkCancellation()
        }
    }

    /// The request, once ``beginRequest()`` has begun it.
    private func runRequest(after before: Transcript, prompt: Prompt, schema: GenerationSchema?, options: GenerationOptions,
                            contextOptions: ContextOptions, metadata: Metadata.Values,
                            validate: (any ConvertibleFromGeneratedContent.Type)?,
                            snapshot: (@Sendable (RawResult) -> Void)?) async throws -> RawResult {
        // The profile's error policy, when it sets one; the session's is read when a request fails.
        var profilePolicy: TranscriptErrorHandlingPolicy?
        var requestModel = model

        do {
            try Task.checkCancellation()
            if let schema, let guide = schema.resolved.unsupportedGuides.first {
                throw GenerationError.unsupportedGuide(.init(debugDescription: "The schema '\(schema.name)' uses \(guide)."))
            }
            // The request's configuration (its profile's, when it has one), whose model must be
            // able to serve the request.
            func resolveConfiguration() async throws -> RequestConfiguration {
                let resolved = try await requestConfiguration()
                requestModel = resolved.model
                profilePolicy = resolved.resolution?.transcriptErrorHandlingPolicy
                try Self.checkCapabilities(resolved, options: options, schema: schema)
                return resolved
            }
            // Checked before the prompt is added, so a request the model can't serve leaves no trace.
            var configuration = try await resolveConfiguration()
            let promptEntry = Transcript.Prompt(
                metadata: metadata, segments: prompt.segments, options: options,
                responseFormat: schema.map { Transcript.ResponseFormat(schema: $0) }, contextOptions: contextOptions)
            try updateRequestTranscript { $0.append(.prompt(promptEntry)) }
            var appended: Set<String> = [promptEntry.id]
            // Callbacks may change what the profile resolves to; without any, it is as resolved.
            var resolved = true
            if let resolution = configuration.resolution, !resolution.onPrompt.isEmpty {
                try await runCallbacks(resolution.onPrompt, promptEntry)
                resolved = false
            }

            let streamID = GenerationID()
            var lastSnapshot: GeneratedContent?
            var total = Usage.zero
            var rounds = 0
            while true {
                if profile != nil && !resolved {
                    // The profile sees what the callbacks and tools changed since it was last resolved.
                    configuration = try await resolveConfiguration()
                }
                resolved = false
                let model = configuration.model, tools = configuration.tools
                let merged = configuration.options(options)
                let turnContext = configuration.contextOptions(contextOptions)
                let toolsEnabled = !tools.isEmpty && merged.toolCallingMode != .disallowed
                    && rounds < Self.maximumToolRounds
                var turnOptions = merged
                if !tools.isEmpty && !toolsEnabled { turnOptions.toolCallingMode = .disallowed }
                let current = transcript
                let request = LanguageModelExecutorGenerationRequest(
                    id: UUID(), transcript: configuration.requestTranscript(current),
                    enabledTools: toolsEnabled ? configuration.toolDefinitions : [],
                    schema: schema, generationOptions: turnOptions, contextOptions: turnContext, metadata: metadata)
                let entriesSoFar = Self.requestEntries(current, promptID: promptEntry.id, appended: appended)
                let usageSoFar = total
                // Snapshots of structured content come from a reader that keeps its state
                // between pieces: each piece of text is read once, not the whole text each time.
                var reader: GeneratedContent.StreamReader? = GeneratedContent.StreamReader(builder: .init())
                var readBytes = 0
                let turn = try await runTurn(request, model: model) { text in
                    guard let snapshot else { return }
                    let content: GeneratedContent
                    if schema != nil {
                        do { try reader?.append(text.utf8.dropFirst(readBytes)) } catch { reader = nil }
                        readBytes = text.utf8.count
                        guard var parsed = reader?.snapshot else { return }
                        parsed.id = streamID
                        content = parsed
                    } else {
                        content = GeneratedContent(storage: .string(text), id: streamID, complete: false)
                    }
                    lastSnapshot = content
                    snapshot(RawResult(content: content, entries: entriesSoFar, usage: usageSoFar))
                }
                total = total + turn.sessionUsage
                try Task.checkCancellation()

                if turn.hasReasoning {
                    let segments = turn.reasoningOrder.map { Transcript.Segment.text(.init(content: turn.reasoningTexts[$0] ?? "")) }
                    let reasoning = Transcript.Reasoning(id: turn.reasoningID ?? UUID().uuidString, metadata: turn.reasoningMetadata,
                                                         segments: segments, signature: turn.reasoningSignature)
                    try updateRequestTranscript { $0.append(.reasoning(reasoning)) }
                    appended.insert(reasoning.id)
                    try await runCallbacks(configuration.resolution?.onReasoning ?? [], reasoning)
                }

                if !turn.callOrder.isEmpty {
                    var calls: [Transcript.ToolCall] = []
                    for id in turn.callOrder {
                        let name = turn.callNames[id] ?? ""
                        guard toolsEnabled, tools.contains(where: { $0.name == name }) else {
                            throw GenerationError.decodingFailure(.init(
                                debugDescription: "The model called a tool named '\(name)', which isn't available."))
                        }
                        let text = turn.callArguments[id] ?? ""
                        let arguments: GeneratedContent
                        do {
                            arguments = try GeneratedContent.parse(text.isEmpty ? "{}" : text)
                            guard arguments.isComplete else { throw GeneratedContent.ParsingError(rawContent: text, debugDescription: "incomplete") }
                        } catch {
                            throw GenerationError.decodingFailure(.init(
                                debugDescription: "The arguments of the call to '\(name)' aren't complete JSON: \(text)",
                                underlyingError: error))
                        }
                        calls.append(Transcript.ToolCall(id: id, metadata: turn.callMetadata[id] ?? [:], toolName: name,
                                                         arguments: arguments))
                    }
                    for call in calls { try await runCallbacks(configuration.resolution?.onToolCall ?? [], call) }
                    let outputs = try await withToolBinding { try await Self.callTools(calls, tools: tools) }
                    try Task.checkCancellation()
                    let callsEntry = Transcript.ToolCalls(id: turn.toolCallsID ?? UUID().uuidString, calls)
                    try updateRequestTranscript { t in
                        t.append(.toolCalls(callsEntry))
                        for output in outputs { t.append(.toolOutput(output)) }
                    }
                    appended.insert(callsEntry.id)
                    appended.formUnion(outputs.map(\.id))
                    for (call, output) in zip(calls, outputs) {
                        try await runCallbacks(configuration.resolution?.onToolOutput ?? [], (call, output))
                    }
                    rounds += 1
                    continue
                }

                let text = turn.responseText
                var content: GeneratedContent
                var segments: [Transcript.Segment]
                if let schema {
                    do {
                        content = try GeneratedContent.parse(text)
                    } catch {
                        throw GenerationError.decodingFailure(.init(
                            debugDescription: "The response isn't JSON: \(text)", underlyingError: error))
                    }
                    guard content.isComplete else {
                        // The decoder steers every value to its end within the budget; one whose
                        // shortest valid value is longer than that budget still runs out.
                        let used = turn.sessionUsage.output.totalTokenCount
                        let budget = options.maximumResponseTokens.flatMap { used >= $0 ? $0 : nil }
                        throw GenerationError.decodingFailure(.init(
                            debugDescription: "The response ended before its JSON value was complete"
                                + (budget.map { " (its \($0)-token budget, maximumResponseTokens, ran out: the schema's shortest value may not fit in it)" } ?? "")
                                + ": \(text)"))
                    }
                    content.id = streamID
                    segments = [.structure(.init(source: schema.name, content: content))]
                } else {
                    content = GeneratedContent(storage: .string(text), id: streamID, complete: true)
                    segments = [.text(.init(content: text))]
                }
                if let validate {
                    // A response that can't be read as the requested type isn't added to the transcript.
                    do {
                        _ = try validate.init(content)
                    } catch {
                        throw Self.decodingError(error, type: validate)
                    }
                }
                segments += turn.customSegments.map { .custom($0) } + turn.attachments.map { .attachment($0) }
                let response = Transcript.Response(id: turn.responseID ?? UUID().uuidString, metadata: turn.responseMetadata,
                                                   segments: segments)
                try updateRequestTranscript { $0.append(.response(response)) }
                appended.insert(response.id)
                try await runCallbacks(configuration.resolution?.onResponse ?? [], response)
                // A write from outside up to here (the callbacks' time included) fails the request.
                try checkTranscriptUnchangedByOthers()
                let entries = Self.requestEntries(transcript, promptID: promptEntry.id, appended: appended)
                addUsage(total)
                let result = RawResult(content: content, entries: entries, usage: total)
                // The last snapshot holds the complete content (unless the one before it already did).
                if lastSnapshot?.isComplete != true || lastSnapshot != content { snapshot?(result) }
                return result
            }
        } catch {
            let preserve = (profilePolicy ?? transcriptErrorHandlingPolicy)?.preserves ?? false
            let settled = settleFailedRequest { t in
                if preserve {
                    // Keep complete entries only: tool calls are always followed by their outputs.
                    if case .toolCalls? = t.last { t.removeLast() }
                } else {
                    t = before
                }
            }
            // The transcript someone else wrote during the request stays as they wrote it.
            guard settled else { throw Error.transcriptMutationWhileResponding }
            throw Self.sessionError(error, model: requestModel)
        }
    }

    /// The entries of the request under way: from its prompt (by its own id), or, when profile
    /// callbacks removed the prompt, the entries it added at the end of the transcript. (Entry
    /// ids from a model may repeat across requests; the prompt's never does.)
    static func requestEntries(_ transcript: Transcript, promptID: String, appended: Set<String>) -> [Transcript.Entry] {
        if let i = transcript.lastIndex(where: { if case .prompt(let p) = $0 { p.id == promptID } else { false } }) {
            return Array(transcript[i...])
        }
        var start = transcript.endIndex
        while start > transcript.startIndex, appended.contains(transcript[start - 1].id) { start -= 1 }
        return Array(transcript[start...])
    }

    /// Throws when the configuration's model lacks a capability the request needs.
    static func checkCapabilities(_ configuration: RequestConfiguration, options: GenerationOptions,
                                  schema: GenerationSchema?) throws {
        let model = configuration.model
        let hasTools = !configuration.tools.isEmpty && configuration.options(options).toolCallingMode != .disallowed
        if schema != nil && !model.capabilities.contains(.guidedGeneration) {
            throw LanguageModelError.unsupportedCapability(.init(
                capability: .guidedGeneration,
                debugDescription: "The model doesn't declare guided generation, which a response with a schema needs."))
        }
        if hasTools && !model.capabilities.contains(.toolCalling) {
            throw LanguageModelError.unsupportedCapability(.init(
                capability: .toolCalling, debugDescription: "The session has tools, but the model doesn't declare tool calling."))
        }
    }

    /// Runs one turn on the executor and collects its events.
    private func runTurn(_ request: LanguageModelExecutorGenerationRequest, model: any LanguageModel,
                         onText: (String) -> Void) async throws -> TurnOutput {
        let channel = LanguageModelExecutorGenerationChannel()
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { channel.finish() }
                try await ExecutorCache.respond(model, to: request, streamingInto: channel)
            }
            var turn = TurnOutput()
            for try await event in channel {
                // Leaving the loop cancels the model's task.
                try checkTranscriptUnchangedByOthers()
                if turn.apply(event) { onText(turn.responseText) }
            }
            try await group.waitForAll()
            return turn
        }
    }

    /// Calls tools concurrently; the outputs are in the order of the calls.
    private static func callTools(_ calls: [Transcript.ToolCall], tools: [any Tool]) async throws -> [Transcript.ToolOutput] {
        return try await withThrowingTaskGroup(of: (Int, Transcript.ToolOutput).self) { group in
            for (index, call) in calls.enumerated() {
                guard let tool = tools.first(where: { $0.name == call.toolName }) else { continue }
                group.addTask {
                    (index, try await Self.call(tool, with: call))
                }
            }
            var outputs: [(Int, Transcript.ToolOutput)] = []
            for try await output in group { outputs.append(output) }
            return outputs.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    private static func call<T: Tool>(_ tool: T, with call: Transcript.ToolCall) async throws -> Transcript.ToolOutput {
        let arguments: T.Arguments
        do {
            arguments = try T.Arguments(call.arguments)
        } catch {
            throw ToolCallError(tool: tool, underlyingError: error)
        }
        let output: T.Output
        do {
            output = try await tool.call(arguments: arguments)
        } catch let error as CancellationError {
            throw error
        } catch {
            throw ToolCallError(tool: tool, underlyingError: error)
        }
        return Transcript.ToolOutput(id: call.id, toolName: call.toolName, segments: output.promptRepresentation.segments)
    }

    /// The error a request throws. A session on ``SystemLanguageModel`` reports its executor's
    /// errors as Xcode 26's ``GenerationError`` where there is one, as code written for Xcode 26
    /// catches them; a session on a model of your own (Xcode 27's provider API, where
    /// `GenerationError` is deprecated) throws its ``LanguageModelError`` as it is.
    static func sessionError(_ error: any Swift.Error, model: any LanguageModel) -> any Swift.Error {
        if model is SystemLanguageModel, let error = error as? LanguageModelError {
            let context = GenerationError.Context(debugDescription: error.debugDescription, underlyingError: error)
            switch error {
            case .contextSizeExceeded(let c):
                return GenerationError.exceededContextWindowSize(.init(
                    debugDescription: "The request needs \(c.tokenCount) tokens; the context holds \(c.contextSize). \(c.debugDescription)",
                    underlyingError: error))
            case .rateLimited: return GenerationError.rateLimited(context)
            case .guardrailViolation: return GenerationError.guardrailViolation(context)
            case .refusal(let r):
                let entry = Transcript.Entry.response(Transcript.Response(segments: [.text(.init(content: r.explanationText))]))
                return GenerationError.refusal(.init(transcriptEntries: [entry]), context)
            case .unsupportedGenerationGuide: return GenerationError.unsupportedGuide(context)
            case .unsupportedLanguageOrLocale: return GenerationError.unsupportedLanguageOrLocale(context)
            case .unsupportedCapability, .unsupportedTranscriptContent, .timeout: return error
            }
        }
        if let error = error as? SystemLanguageModel.Error {
            return GenerationError.assetsUnavailable(.init(debugDescription: error.debugDescription, underlyingError: error))
        }
        return error
    }

    static func decodingError(_ error: any Swift.Error, type: Any.Type) -> any Swift.Error {
        if let error = error as? GenerationError { return error }
        return GenerationError.decodingFailure(.init(
            debugDescription: "The response can't be read as \(type): \(error)", underlyingError: error))
    }

    /// Reads a request's result as the requested type.
    static func typedResponse<Content: Generable>(_ raw: RawResult, as type: Content.Type) throws -> Response<Content> {
        let content: Content
        do {
            content = try Content(raw.content)
        } catch {
            throw decodingError(error, type: Content.self)
        }
        return Response(content: content, rawContent: raw.content, transcriptEntries: ArraySlice(raw.entries), usage: raw.usage)
    }
}
