import ArgumentParser
import Foundation
import PlinthRuntime

struct Tokenize: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show how a model's tokenizer splits text: one token per line, id and piece."
    )

    @OptionGroup var modelOptions: ModelOptions

    @Argument(help: "The text to tokenize (put -- before a text that starts with '-').")
    var text: String?

    @Option(name: [.short, .long], help: "Tokenize the text of this file instead ('-' for standard input).")
    var file: String?

    @Flag(help: "Treat special-token text such as <|im_start|> as plain text.")
    var noParseSpecial = false

    @Flag(help: "Add the model's BOS/EOS tokens where its metadata asks for them.")
    var addSpecial = false

    @Flag(help: "Print only the ids, space-separated, on one line.")
    var idsOnly = false

    func validate() throws {
        guard (text == nil) != (file == nil) else { throw ValidationError("give exactly one of <text> and --file") }
    }

    func run() throws {
        try reportingErrors {
            let text = try text ?? FileChecks.readText(file!, what: "file")
            let url = try modelOptions.url()
            let tokenizer = try loadingModelFile(url) { try Tokenizer(gguf: GGUFFile(url: url)) }
            let ids = tokenizer.encode(text, addSpecial: addSpecial, parseSpecial: !noParseSpecial)
            if idsOnly {
                try Output.line(ids.map(String.init).joined(separator: " "))
                return
            }
            var lines = ""
            for id in ids { lines += "\(id)\t\(Self.quoted(tokenizer.tokenBytes(id)))\n" }
            try Output.write(lines)
            Diagnostics.note("\(ids.count) tokens")
        }
    }

    /// A piece in quotes: its text where it is whole UTF-8, else its bytes, those outside
    /// printable ASCII as `\xHH` (as llama-tokenize shows part of a character).
    static func quoted(_ bytes: [UInt8]) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text.debugDescription }
        return "\"" + bytes.map { b in
            switch b {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): "\\" + String(UnicodeScalar(b))
            case 0x20..<0x7F: String(UnicodeScalar(b))
            default: String(format: "\\x%02x", b)
            }
        }.joined() + "\""
    }
}
