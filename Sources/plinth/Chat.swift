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

            Commands: /reset starts a new conversation (same instructions); /transcript prints \
            the conversation; /save FILE writes it as JSON (the Transcript's Codable form).
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
            let interrupt = InterruptForwarder()
            if interactive {
                Diagnostics.note("Chatting with \(options.modelOptions.model). /reset, /transcript, /save FILE, /quit.")
            }
            while true {
                if interactive { Diagnostics.write("> ") }
                guard let line = readLine(strippingNewline: true) else { break }
                let input = line.trimmingCharacters(in: .whitespaces)
                if input.isEmpty { continue }
                if input.hasPrefix("/") {
                    switch try command(input, session: session) {
                    case .quit: return
                    case .reset:
                        session = options.session(model)
                        Diagnostics.note("(new conversation)")
                    case .done: break
                    }
                    continue
                }
                try await turn(input, session: session, interrupt: interrupt)
            }
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
            for entry in session.transcript { print(entry) }
        case "/save":
            guard parts.count == 2 else {
                Diagnostics.error("/save needs a file name")
                return .done
            }
            do {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted]
                try encoder.encode(session.transcript).write(to: URL(fileURLWithPath: parts[1]), options: .atomic)
                Diagnostics.note("saved \(session.transcript.count) entries to \(parts[1])")
            } catch {
                Diagnostics.error("cannot save to \(parts[1]): \(error.localizedDescription)")
            }
        default:
            Diagnostics.error("unknown command \(parts[0]); the commands are /reset, /transcript, /save FILE, /quit")
        }
        return .done
    }

    /// One prompt and its streamed reply. An error ends the turn, not the chat: the session
    /// leaves a failed turn out of its transcript.
    func turn(_ prompt: String, session: LanguageModelSession, interrupt: InterruptForwarder) async throws {
        let options = options.generationOptions
        let quiet = quiet
        let task = Task {
            let output = StandardOutput()
            let responses = session.streamResponse(to: prompt, options: options)
            for try await snapshot in responses { try output.extend(to: snapshot.content) }
            let response = try await responses.collect()
            try output.extend(to: response.content)
            output.write("\n")
            if !quiet { Diagnostics.note("(" + speedNote(session.transcript, usage: response.usage) + ")") }
        }
        interrupt.forward(to: task)
        defer { interrupt.forward(to: nil) }
        do {
            try await task.value
        } catch is CancellationError {
            print()
            Diagnostics.note("(stopped)")
        } catch {
            print()
            _ = reported(error)
        }
    }
}

/// Turns Ctrl-C into cancelling the reply being written; with no reply running it exits.
final class InterruptForwarder {
    /// The reply being written, shared with the signal handler.
    private final class Current: Sendable {
        let task = Mutex<Task<Void, any Error>?>(nil)
    }
    private let current = Current()
    private let source: any DispatchSourceSignal

    init() {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { [current] in
            guard let task = current.task.withLock({ $0 }) else { Foundation.exit(130) }
            task.cancel()
        }
        source.resume()
    }

    func forward(to task: Task<Void, any Error>?) {
        current.task.withLock { $0 = task }
    }
}
