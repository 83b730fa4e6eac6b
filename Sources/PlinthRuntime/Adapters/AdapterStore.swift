import Foundation

/// Where adapters are found by name: each directory holds an adapter as a folder `NAME/` (a
/// PEFT adapter, or a folder with one in `peft/` or a GGUF LoRA `NAME.gguf`) or a file
/// `NAME.gguf`.
public struct AdapterStore: Sendable {
    public var directories: [URL]

    public init(directories: [URL]) { self.directories = directories }

    /// `$PLINTH_ADAPTERS` (a colon-separated list), `$PLINTH_HOME/adapters`, then the adapters
    /// this package ships (its `Adapters/` folder).
    public static var `default`: AdapterStore {
        var dirs: [URL] = []
        if let list = ProcessInfo.processInfo.environment["PLINTH_ADAPTERS"] {
            dirs += list.split(separator: ":").map { URL(fileURLWithPath: String($0)) }
        }
        dirs.append(ModelStore.defaultHome.appendingPathComponent("adapters"))
        dirs.append(shippedDirectory)
        return AdapterStore(directories: dirs)
    }

    /// The package's `Adapters/` folder (found from this source file's place in the package).
    public static var shippedDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()  // Adapters
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()  // the package
            .appendingPathComponent("Adapters")
    }

    /// The adapter `nameOrPath` means: an existing path as is, else a name looked up in the
    /// directories, first match wins.
    public func resolve(_ nameOrPath: String) throws(AdapterError) -> URL {
        let fm = FileManager.default
        if nameOrPath.contains("/") || nameOrPath.hasSuffix(".gguf") || fm.fileExists(atPath: nameOrPath) {
            let url = URL(fileURLWithPath: nameOrPath)
            guard fm.fileExists(atPath: url.path) else { throw .notFound(url.path) }
            return Self.adapterIn(url) ?? url
        }
        for dir in directories {
            let folder = dir.appendingPathComponent(nameOrPath)
            if let found = Self.adapterIn(folder) { return found }
            let file = dir.appendingPathComponent(nameOrPath + ".gguf")
            if fm.fileExists(atPath: file.path) { return file }
        }
        throw .unknownName(nameOrPath, searched: directories.map(\.path))
    }

    /// The names of the adapters in the directories, sorted, without repeats.
    public func names() -> [String] {
        var names = Set<String>()
        for dir in directories {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [] where !entry.hasPrefix(".") {
                let url = dir.appendingPathComponent(entry)
                if entry.hasSuffix(".gguf") { names.insert(String(entry.dropLast(5))) } else if Self.adapterIn(url) != nil { names.insert(entry) }
            }
        }
        return names.sorted()
    }

    /// The adapter a folder holds: itself (PEFT), its `peft/` folder, or its `NAME.gguf`.
    static func adapterIn(_ folder: URL) -> URL? {
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        guard fm.fileExists(atPath: folder.path, isDirectory: &isDirectory) else { return nil }
        guard isDirectory.boolValue else { return folder }
        if fm.fileExists(atPath: folder.appendingPathComponent("adapter_config.json").path) { return folder }
        let peft = folder.appendingPathComponent("peft")
        if fm.fileExists(atPath: peft.appendingPathComponent("adapter_config.json").path) { return peft }
        let gguf = folder.appendingPathComponent(folder.lastPathComponent + ".gguf")
        if fm.fileExists(atPath: gguf.path) { return gguf }
        return nil
    }
}
