/// Chat templates for architectures whose model files often carry none (`templates/`, compiled
/// in): a file's own `tokenizer.chat_template` always wins.
public enum BuiltinChatTemplates {
    /// The template for models of `architecture` (`general.architecture`), or nil.
    public static func source(forArchitecture architecture: String) -> String? {
        switch architecture {
        case "gemma3": String(decoding: PackageResources.gemma3_jinja, as: UTF8.self)
        default: nil
        }
    }
}
