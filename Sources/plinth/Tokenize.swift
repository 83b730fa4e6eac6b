import ArgumentParser
import Foundation
import PlinthRuntime

struct Tokenize: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show how a model's tokenizer splits text: one token per line, id and piece."
    )

    @OptionGroup var modelOptions: ModelOptions

    @Argument(help: "The text to tokenize.")
    var text: String

    @Flag(help: "Treat special-token text such as <|im_start|> as plain text.")
    var noParseSpecial = false

    @Flag(help: "Add the model's BOS/EOS tokens where its metadata asks for them.")
    var addSpecial = false

    @Flag(help: "Print only the ids, space-separated, on one line.")
    var idsOnly = false

    func run() throws {
        try reportingErrors {
            let url = try modelOptions.url()
            let tokenizer = try loadingModelFile(url) { try Tokenizer(gguf: GGUFFile(url: url)) }
            let ids = tokenizer.encode(text, addSpecial: addSpecial, parseSpecial: !noParseSpecial)
            if idsOnly {
                try Output.line(ids.map(String.init).joined(separator: " "))
                return
            }
            var lines = ""
            for id in ids {
                let piece = String(decoding: tokenizer.tokenBytes(id), as: UTF8.self)
                lines += "\(id)\t\(piece.debugDescription)\n"
            }
            try Output.write(lines)
            Diagnostics.note("\(ids.count) tokens")
        }
    }
}
