import ArgumentParser
import Foundation
import Plinth
import Synchronization

struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Talk with a model: an interactive, streaming, multi-turn session.",
        discussion: """
            Each line you type is a prompt; the reply streams to standard output, then its speed \
            goes to standard error. Turns share one LanguageModelSession, so each only prefills \
            what is new since the last (the KV cache keeps the conversation). Ctrl-C stops a \
            reply that is being written; Ctrl-D or /quit leaves.

            A prompt of several lines: paste it (a terminal's pasted text is one prompt), or \
            write it between two lines of \"\"\".

            Commands: /reset starts a new conversation (same instructions); /transcript prints \
            the conversation; /save FILE writes it as JSON (the Transcript's Codable form). A \
            line whose first word is no command is a prompt; start a line with // to send one \
            that begins with a command's name.
            """
    )

    @OptionGroup var options: SessionOptions

    @Flag(help: "Do not print speeds to stderr.")
    var quiet = false

    func run() async throws {
        try await reportingErrors {
            let model = try options.localModel()
            var session = options.session(model)
            let interactive = isatty(STDIN_FILENO) != 0
            // The terminal marks pasted text, so that a pasted paragraph is one prompt.
            let pastes = interactive && isatty(STDERR_FILENO) != 0
            let interrupt = InterruptForwarder(onExit: { if pastes { Diagnostics.write(PromptReader.pasteModeOff) } })
            if pastes { Diagnostics.write(PromptReader.pasteModeOn) }
            defer { if pastes { Diagnostics.write(PromptReader.pasteModeOff) } }
            if interactive {
                Diagnostics.note("Chatting with \(options.modelOptions.model). /reset, /transcript, /save FILE, /quit.")
            }
            var reader = PromptReader()
            var prompts = 0, failed = 0
            while true {
                if interactive { Diagnostics.write("> ") }
                guard let entry = reader.next() else { break }
                switch entry {
                case .prompt(let prompt):
                    prompts += 1
                    if try await !turn(prompt, session: session, interrupt: interrupt) { failed += 1 }
                case .command(let input):
                    switch try command(input, session: session) {
                    case .quit: return
                    case .reset:
                        session = options.session(model)
                        Diagnostics.note("(new conversation)")
                    case .done: break
                    }
                }
            }
            // A script feeding prompts learns that some failed (each was said as it failed).
            if !interactive && failed > 0 { throw CLIError("\(failed) of \(prompts) prompts failed") }
        }
    }

    enum CommandResult { case done, reset, quit }

    func command(_ input: String, session: LanguageModelSession) throws -> CommandResult {
        let parts = input.split(separator: " ", maxSplits: 1).map(String.init)
        switch parts[0] {
        case "/quit", "/exit":
            return .quit
        case "/reset":
            return .reset
        case "/transcript":
            // Through the same unbuffered stream as the replies, so that it comes in order.
            let output = StandardOutput()
            for entry in session.transcript { try output.write("\(entry)\n") }
        case "/save":
            guard parts.count == 2 else {
                Diagnostics.error("/save needs a file name")
                return .done
            }
            do {
                try FileChecks.requireWritable(parts[1], what: "file")
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted]
                let data = try encoder.encode(session.transcript)
                try FileChecks.writing(parts[1]) { try data.write(to: URL(fileURLWithPath: parts[1]), options: .atomic) }
                Diagnostics.note("saved \(session.transcript.count) entries to \(parts[1])")
            } catch {
                Diagnostics.error("/save: \(error.localizedDescription)")
            }
        default:
            Diagnostics.error("unknown command \(parts[0]); the commands are /reset, /transcript, /save FILE, /quit (start a line with // to send it as a prompt)")
        }
        return .done
    }

    /// One prompt and its streamed reply. An error ends the turn, not the chat: the session
    /// leaves a failed turn out of its transcript. Returns whether the turn succeeded (one
    /// stopped with Ctrl-C did); throws when standard output can't be written (the chat ends).
    func turn(_ prompt: String, session: LanguageModelSession, interrupt: InterruptForwarder) async throws -> Bool {
        let options = options.generationOptions
        let quiet = quiet
        // Whether the reply's line was begun: a failure ends it; with nothing printed, no blank line.
        let begun = Mutex(false)
        let task = Task {
            let output = StandardOutput()
            let responses = session.streamResponse(to: prompt, options: options)
            for try await snapshot in responses {
                try output.extend(to: snapshot.content)
                if !output.isEmpty { begun.withLock { $0 = true } }
            }
            let response = try await responses.collect()
            try output.extend(to: response.content)
            try output.write("\n")
            begun.withLock { $0 = false }
            if !quiet { Diagnostics.note("(" + speedNote(session.transcript, usage: response.usage) + ")") }
        }
        interrupt.forward(to: task)
        defer { interrupt.forward(to: nil) }
        do {
            try await task.value
            return true
        } catch is CancellationError {
            if begun.withLock({ $0 }) { try StandardOutput().write("\n") }
            Diagnostics.note("(stopped)")
            return true
        } catch let error as Output.Failure {
            throw error
        } catch {
            if begun.withLock({ $0 }) { try StandardOutput().write("\n") }
            _ = reported(error)
            if Self.isContextFull(error) {
                Diagnostics.note("(the conversation fills the model's context: /reset starts a new one; -c sets a larger context)")
            }
            return false
        }
    }
}

extension Chat {
    /// Whether a request failed because the context is full (the session's error for a transcript
    /// past it, or the model's for a response that reached its end).
    static func isContextFull(_ error: any Error) -> Bool {
        if case LanguageModelSession.GenerationError.exceededContextWindowSize = error { return true }
        if case LanguageModelError.contextSizeExceeded = error { return true }
        return false
    }
}

/// What the chat reads: prompts, each of one line or several, and commands.
struct PromptReader {
    enum Entry: Equatable {
        case prompt(String)
        case command(String)
    }

    static let commands: Set<String> = ["/quit", "/exit", "/reset", "/transcript", "/save"]
    /// Bracketed paste (xterm's, which terminals share): pasted text comes between two markers.
    static let pasteModeOn = "\u{1B}[?2004h", pasteModeOff = "\u{1B}[?2004l"
    static let pasteStart = "\u{1B}[200~", pasteEnd = "\u{1B}[201~"

    /// The lines to read (standard input's by default).
    var readLine: () -> String? = { PromptReader.standardInputLine() }

    /// A line of standard input without its line end. A line that isn't UTF-8 is said and left
    /// out (Swift's `readLine` would replace its bytes, and the model read other text than given).
    static func standardInputLine() -> String? {
        while let bytes = try? standardInput.next() {
            if let line = String(validating: bytes, as: UTF8.self) { return line }
            Diagnostics.error("a line of input is not UTF-8 text: left out")
        }
        return nil
    }

    /// Standard input, read by the chat's reader alone.
    nonisolated(unsafe) static let standardInput = LineReader()

    /// The next prompt or command; nil at the end of the input.
    mutating func next() -> Entry? {
        while let line = readLine() {
            if line.hasPrefix(Self.pasteStart) {
                // Pasted text, up to its end marker, is one prompt (commands in it too).
                var text = String(line.dropFirst(Self.pasteStart.count))
                while !text.contains(Self.pasteEnd), let more = readLine() { text += "\n" + more }
                text = text.replacingOccurrences(of: Self.pasteEnd, with: "")
                let prompt = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if !prompt.isEmpty { return .prompt(prompt) }
                continue
            }
            let input = line.trimmingCharacters(in: .whitespaces)
            if input.isEmpty { continue }
            if input.hasPrefix("\"\"\"") {
                // A block: from """ to the line that ends with """ (the same line, too).
                var text = String(input.dropFirst(3))
                while !text.hasSuffix("\"\"\""), let more = readLine() { text += "\n" + more }
                if text.hasSuffix("\"\"\"") { text.removeLast(3) }
                let prompt = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if !prompt.isEmpty { return .prompt(prompt) }
                continue
            }
            if input.hasPrefix("//") { return .prompt(String(input.dropFirst())) }
            if input.hasPrefix("/") {
                let word = String(input.prefix { !$0.isWhitespace })
                // A known command, or one word that looks like a mistyped one; else a prompt
                // that starts with a path ("/etc/hosts: what is this?").
                if Self.commands.contains(word) || (word == input && !word.dropFirst().contains("/")) { return .command(input) }
            }
            return .prompt(input)
        }
        return nil
    }
}

/// Turns Ctrl-C into cancelling the reply being written; with no reply running it exits
/// (after `onExit`).
final class InterruptForwarder {
    /// The reply being written, shared with the signal handler.
    private final class Current: Sendable {
        let task = Mutex<Task<Void, any Error>?>(nil)
    }
    private let current = Current()
    private let source: any DispatchSourceSignal

    init(onExit: @escaping @Sendable () -> Void = {}) {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { [current] in
            guard let task = current.task.withLock({ $0 }) else {
                onExit()
                Foundation.exit(130)
            }
            task.cancel()
        }
        source.resume()
    }

    func forward(to task: Task<Void, any Error>?) {
        current.task.withLock { $0 = task }
    }
}
