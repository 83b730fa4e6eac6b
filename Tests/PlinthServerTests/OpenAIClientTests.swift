import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// `plinth serve` as a process, driven by the real `openai` Python client (installed into a
/// virtual environment under .build the first time): chat, streaming, json_schema, tools with
/// Qwen2.5, errors, and a bounded load test of 64 concurrent clients; then SIGTERM must end it
/// cleanly.
@Suite(.serialized)
struct OpenAIClientTests {
    /// The `plinth` executable beside the test bundle (`.build/<triple>/<config>/plinth`).
    static let binary: URL? = {
        let dir = Bundle.main.bundleURL.pathExtension == "xctest"
            ? Bundle.main.bundleURL.deletingLastPathComponent() : Bundle.main.bundleURL
        for candidate in [dir, URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()] {
            let url = candidate.appendingPathComponent("plinth")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return nil
    }()

    /// The pinned client version the check was written against.
    static let openAIPackage = "openai==3.57.0"
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("openai_client_check.py")

    static let ready = binary != nil && TestServer.has(TestServer.smolLM2) && TestServer.has(TestServer.qwen)

    /// A venv with the openai package, made once under .build (next to the binary's folder).
    static func python() throws -> URL {
        let venv = binary!.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("openai-venv")
        let python = venv.appendingPathComponent("bin/python")
        let stamp = venv.appendingPathComponent("plinth-package")
        if (try? String(contentsOf: stamp, encoding: .utf8)) == openAIPackage { return python }
        try run("/usr/bin/env", ["python3", "-m", "venv", "--clear", venv.path])
        try run(python.path, ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", openAIPackage])
        try openAIPackage.write(to: stamp, atomically: true, encoding: .utf8)
        return python
    }

    struct Failed: Error, CustomStringConvertible { var description: String }

    /// Runs a process with its output going to a log file; the output, or an error with it when
    /// the process failed.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-openai-\(UUID().uuidString).log")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: log) }
        let handle = try FileHandle(forWritingTo: log)
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        p.waitUntilExit()
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        guard p.terminationStatus == 0 else {
            throw Failed(description: "\(executable) \(arguments.joined(separator: " ")) exited \(p.terminationStatus):\n\(text.suffix(4000))")
        }
        return text
    }

    @Test(.enabled(if: ready, "needs the plinth executable and both catalog models (run `plinth models fetch --all`)"))
    func theOpenAIClientWorksAgainstTheServer() async throws {
        let python = try Self.python()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plinth-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("stdout"), err = dir.appendingPathComponent("stderr")
        FileManager.default.createFile(atPath: out.path, contents: nil)
        FileManager.default.createFile(atPath: err.path, contents: nil)
        let server = Process()
        server.executableURL = Self.binary!
        server.arguments = ["serve", "--port", "0", "-m", "smollm2", "-m", "qwen", "--parallel", "16"]
        server.standardOutput = try FileHandle(forWritingTo: out)
        server.standardError = try FileHandle(forWritingTo: err)
        try server.run()
        defer { if server.isRunning { server.terminate() } }
        var port: Int?
        for _ in 0..<300 where port == nil {
            let line = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
            if let r = line.range(of: "listening on http://127.0.0.1:") {
                port = Int(line[r.upperBound...].prefix { $0.isNumber })
            } else {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        let bound = try #require(port, "the server never said where it listens")
        let report = try Self.run(python.path, [Self.script.path, "http://127.0.0.1:\(bound)", String(server.processIdentifier)])
        #expect(report.contains(#""ok": true"#), "\(report.suffix(2000))")
        // SIGTERM with a request in flight: it is finished, new connections are refused, and
        // the process exits 0. One Python process sends the request, waits until /metrics shows
        // it in a step and then signals the server: polled from this test, on the cooperative
        // pool that the other suites keep busy on 2 cores, the whole request could pass unseen.
        let finished = try Self.run("/usr/bin/env", ["python3", "-c", """
                import json, os, signal, sys, threading, time, urllib.request
                base, pid, result = sys.argv[1], int(sys.argv[2]), {}
                def complete():
                    body = json.dumps({"model": "smollm2", "temperature": 0, "max_tokens": 1000,
                                       "prompt": "1, 2, 3, 4, 5, 6, 7, 8,"}).encode()
                    try:
                        r = urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", data=body,
                                                   headers={"Content-Type": "application/json"}), timeout=600)
                        result["answer"] = "%d %d" % (r.status, json.loads(r.read())["usage"]["completion_tokens"])
                    except Exception as e:
                        result["answer"] = repr(e)
                client = threading.Thread(target=complete, daemon=True)
                client.start()
                seen, deadline = "", time.time() + 300
                while client.is_alive() and time.time() < deadline:
                    try:
                        text = urllib.request.urlopen(base + "/metrics", timeout=60).read().decode()
                        seen = "; ".join(l for l in text.splitlines() if l.startswith("plinth_running_sequences{"))
                    except Exception as e:
                        seen = repr(e)
                    if any(not l.endswith(" 0") for l in seen.split("; ") if l.startswith("plinth_running")):
                        os.kill(pid, signal.SIGTERM)
                        break
                    time.sleep(0.02)
                else:
                    sys.exit("the request was never seen in a step: %s; the request: %s" % (seen, result.get("answer", "still waiting")))
                client.join()
                print(result["answer"])
                """, "http://127.0.0.1:\(bound)", String(server.processIdentifier)])
        #expect(finished == "200 1000\n", "the request in flight at SIGTERM: \(finished)")
        server.waitUntilExit()
        #expect(server.terminationStatus == 0, "\((try? String(contentsOf: err, encoding: .utf8))?.suffix(2000) ?? "")")
        #expect(throws: (any Error).self) {
            try Self.run("/usr/bin/env", ["python3", "-c", "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)",
                                          "http://127.0.0.1:\(bound)/health"])
        }
    }
}
