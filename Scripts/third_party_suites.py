#!/usr/bin/env python3
"""Builds and runs another package's test suites on Linux against Plinth's FoundationModels.

A dev-time check (never a CI or runtime dependency; nothing of the other package is copied into
this repository). Given a checkout of a Swift package written for Apple's Foundation Models, it:

1. copies the package into a work folder (a git directory without a work tree, such as a
   `fetch` mirror, is read at --rev with `git archive`);
2. patches the package's own Package.swift (its settings kept): this repository as a path
   dependency, and its `FoundationModels` product added to each target that imports
   FoundationModels. Executables and examples are left out; they are not tests;
3. applies the only patches allowed, for code that is Apple-platform-only, each printed:
   - an import of a framework Linux lacks (CoreGraphics, ImageIO, Security, …) goes under
     `#if canImport(…)`;
   - a file that uses URLSession gets `FoundationNetworking` (where Linux's Foundation keeps it);
   - a target that calls `URLSession.bytes(for:)` (Apple's `AsyncBytes`, which Linux's
     Foundation lacks) gets a file defining it over `data(for:)`, the body delivered whole.
   - `import CryptoKit` falls back to swift-crypto's `Crypto` (the same API, Apple's own
     package for Linux), which the importing target then depends on;
   - the package-specific patches of PACKAGE_PATCHES, each with its reason;
   - a test file gated whole by `#if canImport(Darwin)` is opened to Linux
     (`#if canImport(Darwin) || os(Linux)`): its tests then run here, and fail here if they
     need Darwin after all.
   Code that then still needs Apple's frameworks stays as it is and is reported as not
   compiling, with the compiler's reasons;
4. builds each test target on its own, then runs the ones that compiled, and prints, per test
   target: compiled or not (errors, grouped by message), tests passed and failed (by name).

Usage:
    Scripts/third_party_suites.py CHECKOUT [--rev REV] [--work DIR] [--plinth DIR] [--jobs N]

Exit status 0 whenever the report was made (failures are what it reports), 2 on bad usage.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

APPLE_ONLY = ["AppKit", "UIKit", "CoreGraphics", "CoreImage", "ImageIO", "UniformTypeIdentifiers", "Security",
              "Network", "DeviceCheck", "AuthenticationServices", "SwiftUI", "os"]
IMPORT = re.compile(r"^\s*(?:@testable\s+|@_exported\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)
ERROR = re.compile(r"^(/[^:\n]+\.swift):(\d+):(\d+): error: (.*)$", re.M)


def run(cmd, cwd, log=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    if log:
        with open(log, "w") as f:
            f.write(p.stdout)
    return p.returncode, p.stdout


def materialize(checkout, rev, dest):
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    bare = not os.path.exists(os.path.join(checkout, "Package.swift")) and os.path.exists(os.path.join(checkout, "HEAD"))
    if bare:
        os.makedirs(dest)
        archive = subprocess.run(["git", "--git-dir", checkout, "archive", rev or "HEAD"], stdout=subprocess.PIPE,
                                 check=True).stdout
        subprocess.run(["tar", "xf", "-", "-C", dest], input=archive, check=True)
    else:
        shutil.copytree(checkout, dest, ignore=shutil.ignore_patterns(".build", ".git"))


def swift_files(folder):
    for root, _, names in os.walk(folder):
        for n in sorted(names):
            if n.endswith(".swift"):
                yield os.path.join(root, n)


DARWIN_GATE = re.compile(r"\A((?:\s*//[^\n]*\n)*\s*)#if canImport\(Darwin\)[ \t]*\n")


def patch(path, log, is_test):
    """The Apple-platform-only patches of one file (module docstring, step 3), each noted in `log`."""
    text = open(path, encoding="utf-8").read()
    done = []
    if is_test and DARWIN_GATE.match(text):
        text = DARWIN_GATE.sub(lambda m: m.group(1) + "#if canImport(Darwin) || os(Linux)\n", text, count=1)
        done.append("#if canImport(Darwin) around the whole file opened to Linux")
    out, depth = [], 0
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#if"):
            depth += 1
        elif stripped.startswith("#endif"):
            depth -= 1
        m = IMPORT.match(line)
        if m and m.group(1) == "CryptoKit" and depth == 0:
            out += ["#if canImport(CryptoKit)", line, "#else", line.replace("CryptoKit", "Crypto"), "#endif"]
            done.append("import CryptoKit, or swift-crypto's Crypto where there is no CryptoKit")
            continue
        if m and m.group(1) in APPLE_ONLY and depth == 0:
            out += [f"#if canImport({m.group(1)})", line, "#endif"]
            done.append(f"import {m.group(1)} under #if canImport")
            continue
        out.append(line)
    text = "\n".join(out)
    if re.search(r"\bURL(Session|Request|Response)\b|\bHTTPURLResponse\b", text) and "FoundationNetworking" not in text:
        text = re.sub(r"^(\s*(?:(?:public|internal|package)\s+)?import Foundation\s*)$",
                      r"\1\n#if canImport(FoundationNetworking)\nimport FoundationNetworking\n#endif", text, count=1, flags=re.M)
        done.append("FoundationNetworking imported (URLSession)")
    if done:
        open(path, "w", encoding="utf-8").write(text)
        for d in done:
            log.append(f"{path}: {d}")


# URLSession.bytes(for:) for Linux: Apple's AsyncBytes streams the body; this delivers it whole
# (enough for code that iterates the bytes; a stubbed transport never reaches it).
BYTES_SHIM = """// Added by Plinth's Scripts/third_party_suites.py: Linux's Foundation has no URLSession.bytes(for:).
#if canImport(FoundationNetworking)
import Foundation
import FoundationNetworking

extension URLSession {
    func bytes(for request: URLRequest) async throws -> (AsyncThrowingStream<UInt8, Error>, URLResponse) {
        let (data, response) = try await data(for: request)
        return (AsyncThrowingStream { c in
            for b in data { c.yield(b) }
            c.finish()
        }, response)
    }
}
#endif
"""


def add_bytes_shim(folder, log):
    uses = any(re.search(r"\.bytes\(\s*for:", open(f, encoding="utf-8").read()) for f in swift_files(folder))
    if uses:
        with open(os.path.join(folder, "PlinthLinuxURLSessionBytes.swift"), "w") as f:
            f.write(BYTES_SHIM)
        log.append(f"{folder}: URLSession.bytes(for:) defined over data(for:) (PlinthLinuxURLSessionBytes.swift)")


# swift-crypto, as Plinth itself depends on it (so it resolves from the same place).
CRYPTO_PACKAGE = '.package(url: "https://github.com/apple/swift-crypto", from: "3.12.3")'
CRYPTO_PRODUCT = '.product(name: "Crypto", package: "swift-crypto")'

CLAUDE_LINUX_SHIM = """// Added by Plinth's Scripts/third_party_suites.py, for Linux (see PACKAGE_PATCHES there).
import ClaudeAPI
import Foundation
import FoundationModels

/// Linux has no CoreGraphics to encode a transcript's image with: the request is refused.
func plinthLinuxImageBlock(_ image: Transcript.ImageAttachment) throws -> ContentBlock {
  throw LanguageModelError.unsupportedTranscriptContent(.init(
    unsupportedContent: [], debugDescription: "Image attachments need CoreGraphics, which Linux lacks."))
}

#if !canImport(Security)
import Synchronization

/// Linux has no Keychain: App Attest's default store keeps its values in memory.
struct KeychainAppAttestStore: AppAttestStore {
  static let defaultService = "com.anthropic.claude-foundation-models.app-attest"
  private static let values = Mutex<[String: Data]>([:])
  private let service: String

  init(service: String = Self.defaultService, accessGroup: String? = nil) { self.service = service }

  private func get(_ key: String) -> Data? { Self.values.withLock { $0[service + "/" + key] } }
  private func set(_ key: String, _ value: Data?) { Self.values.withLock { $0[service + "/" + key] = value } }

  func keyID(for clientID: String) throws -> String? { get(clientID + "#keyID").map { String(decoding: $0, as: UTF8.self) } }
  func setKeyID(_ keyID: String, for clientID: String) throws { set(clientID + "#keyID", Data(keyID.utf8)) }
  func token(for clientID: String) throws -> StoredToken? {
    try get(clientID + "#token").map { try JSONDecoder().decode(StoredToken.self, from: $0) }
  }
  func setToken(_ token: StoredToken, for clientID: String) throws { set(clientID + "#token", try JSONEncoder().encode(token)) }
  func deleteToken(for clientID: String) throws { set(clientID + "#token", nil) }
}

/// The Keychain's error, which the in-memory store never throws.
struct KeychainError: LocalizedError, Sendable {
  let status: Int32
}
#endif
"""

# Patches of particular packages, for code that is Apple-platform-only; each is printed with its
# reason. (package name part, file, action, argument, reason); actions: "gate" wraps the whole
# file in #if canImport(argument); "gate-from" wraps from the line starting with argument[0] up to
# the line starting with argument[1] (the end when None) in #if canImport(argument[2]);
# "replace" swaps argument[0] for argument[1]; "add" writes a new file.
PACKAGE_PATCHES = [
    ("ClaudeForFoundationModels", "Sources/ClaudeForFoundationModels/ClaudeImage.swift", "gate-from",
     ("  /// Decodes `data` in any format `ImageIO` reads", "}", "CoreGraphics"),
     "image decoding and encoding with CoreGraphics and ImageIO (the type, its limits and errors stay)"),
    ("ClaudeForFoundationModels", "Sources/ClaudeForFoundationModels/RequestBuilder.swift", "replace",
     ("[try ClaudeImage(cgImage: image.cgImage, orientation: image.orientation).contentBlock]",
      "[try plinthLinuxImageBlock(image)]"),
     "an image attachment is read as a CGImage; on Linux the request is refused instead"),
    ("ClaudeForFoundationModels", "Sources/ClaudeForFoundationModels/AppAttestStore.swift", "gate-from",
     ("/// Keychain-backed store.", None, "Security"), "the Keychain-backed App Attest store"),
    ("ClaudeForFoundationModels", "Sources/ClaudeForFoundationModels/PlinthLinux.swift", "add", CLAUDE_LINUX_SHIM,
     "Linux stand-ins: an image attachment throws unsupportedTranscriptContent; App Attest's default store is in memory"),
    ("ClaudeForFoundationModels", "Tests/ClaudeForFoundationModelsTests/ClaudeImageTests.swift", "gate", "CoreGraphics",
     "tests of CoreGraphics/ImageIO image encoding"),
    ("ClaudeForFoundationModels", "Tests/ClaudeForFoundationModelsTests/Support.swift", "gate-from",
     ("/// A small solid-red image", "extension LanguageModelExecutorGenerationRequest {", "CoreGraphics"), "the tests' image maker, which draws with CoreGraphics"),
    ("ClaudeForFoundationModels", "Tests/ClaudeForFoundationModelsTests/RequestBuilderTests.swift", "gate-from",
     ("  @Test func `prompt images in history become image blocks`", "  @Test func `maximumResponseTokens maps to max_tokens`",
      "CoreGraphics"), "two tests of CGImage attachments"),
    ("ClaudeForFoundationModels", "Tests/ClaudeForFoundationModelsTests/AppAttestStoreTests.swift", "gate", "Security",
     "tests of the Keychain store"),
    ("ClaudeForFoundationModels", "Tests/ClaudeForFoundationModelsTests/WireLevelSessionTests.swift", "gate", "Network",
     "a local HTTP server on Network.framework's NWListener"),
]


def package_patches(name, src, log):
    """Applies PACKAGE_PATCHES for a package whose name contains the entry's name part."""
    for part, rel, action, arg, why in PACKAGE_PATCHES:
        if part not in name:
            continue
        path = os.path.join(src, rel)
        if action == "add":
            open(path, "w", encoding="utf-8").write(arg)
            log.append(f"{path}: {why} (new file)")
            continue
        if not os.path.exists(path):
            log.append(f"{path}: NOT APPLIED, no such file ({why})")
            continue
        text = open(path, encoding="utf-8").read()
        if action == "gate":
            text = f"#if canImport({arg})\n{text}\n#endif\n"
        elif action == "gate-from" and ("\n" + arg[0]) in text and (arg[1] is None or "\n" + arg[1] in text):
            at = text.index("\n" + arg[0]) + 1
            end = text.index("\n" + arg[1], at) + 1 if arg[1] else len(text)
            text = text[:at] + f"#if canImport({arg[2]})\n" + text[at:end] + "\n#endif\n" + text[end:]
        elif action == "replace" and arg[0] in text:
            text = text.replace(arg[0], arg[1])
        else:
            log.append(f"{path}: NOT APPLIED, text not found ({why})")
            continue
        open(path, "w", encoding="utf-8").write(text)
        how = "replaced" if action == "replace" else f"under #if canImport({arg if action == 'gate' else arg[2]})"
        log.append(f"{path}: {why} ({how})")


# ---- the package's own manifest, patched ---------------------------------------------------------

def blocks(text, pattern):
    """(start, end) of each call `pattern(` ... `)` in the manifest, by balanced parentheses."""
    found = []
    for m in re.finditer(pattern, text):
        depth, i, quote = 0, m.end() - 1, False
        while i < len(text):
            c = text[i]
            if c == '"' and text[i - 1] != "\\":
                quote = not quote
            elif not quote and c == "(":
                depth += 1
            elif not quote and c == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        found.append((m.start(), i + 1))
    return found


def targets(text, src):
    """{name: (kind, (start, end) in the manifest, imported modules, source folder)}"""
    found = {}
    for start, end in blocks(text, r"\.(target|testTarget|executableTarget)\("):
        body = text[start:end]
        kind = re.match(r"\.(\w+)", body).group(1)
        name = re.search(r'name:\s*"([^"]+)"', body).group(1)
        path = re.search(r'path:\s*"([^"]+)"', body)
        folder = os.path.join(src, path.group(1) if path else ("Tests" if kind == "testTarget" else "Sources") + "/" + name)
        mods = set()
        for f in swift_files(folder):
            mods.update(IMPORT.findall(open(f, encoding="utf-8").read()))
        found[name] = (kind, (start, end), mods, folder)
    return found


def past_separators(text, end):
    """Where the next list element starts after a call ending at `end` (its comma and spacing)."""
    while end < len(text) and text[end] in " \t,\n":
        end += 1
    return end


def manifest(text, found, include, plinth):
    """The package's manifest with Plinth as a dependency, FoundationModels as a product dependency
    of the targets that import it, and only the targets in `include` (executables and their
    products left out)."""
    product = f'.product(name: "FoundationModels", package: "{os.path.basename(os.path.normpath(plinth)).lower()}")'
    edits, uses_crypto = [], False
    for name, (kind, (start, end), mods, _) in found.items():
        body = text[start:end]
        if name not in include:
            edits.append((start, past_separators(text, end), ""))
            continue
        added = [p for module, p in ((("FoundationModels", product), ("Crypto", CRYPTO_PRODUCT))) if module in mods]
        if added:
            if re.search(r"dependencies:\s*\[", body):
                body = re.sub(r"dependencies:\s*\[", lambda m: m.group(0) + ", ".join(added) + ", ", body, count=1)
            else:
                body = re.sub(r'(name:\s*"[^"]+")', lambda m: m.group(1) + f", dependencies: [{', '.join(added)}]", body, count=1)
            edits.append((start, end, body))
            uses_crypto = uses_crypto or "Crypto" in mods
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    # No products: nothing depends on this package, and a product would name targets left out.
    for start, end in sorted(blocks(text, r"\.(library|executable|plugin)\("), reverse=True):
        text = text[:start] + text[past_separators(text, end):]
    # The dependency on Plinth, beside any the package has: Package(...)'s own argument.
    # swift-crypto once: a package that already depends on it keeps its own declaration.
    needs_crypto = uses_crypto and not re.search(r'\.package\([^)]*swift-crypto', text)
    packages = f'.package(path: "{plinth}")' + (", " + CRYPTO_PACKAGE if needs_crypto else "")
    label = top_level(text, "dependencies")
    if label is not None:
        at = text.index("[", label) + 1
        text = text[:at] + packages + ", " + text[at:]
    else:
        at = top_level(text, "targets")
        text = text[:at] + f'dependencies: [{packages}],\n  ' + text[at:]
    return text


def top_level(text, label):
    """Where `label:` starts as an argument of Package(...) itself (not of a product or target)."""
    start = text.index("Package(") + len("Package(")
    depth, quote = 0, False
    for i in range(start, len(text)):
        c = text[i]
        if c == '"':
            quote = not quote
        elif quote:
            continue
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and text.startswith(label, i) and re.match(r"\s*:", text[i + len(label):]) and not text[i - 1].isalnum():
            return i
    return None


def closure(found, name):
    """A target and the package's targets it imports, transitively."""
    need, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in need:
            continue
        need.add(n)
        todo += [m for m in found[n][2] if m in found]
    return need


def grouped_errors(output, limit=8):
    errs = sorted(set(ERROR.findall(output)))  # each place once (batch mode repeats them)
    by = collections.Counter(re.sub(r"'[^']*'", "'…'", e[3]) for e in errs)
    first = {}
    for path, line, _, msg in errs:
        first.setdefault(re.sub(r"'[^']*'", "'…'", msg), f"{os.path.basename(path)}:{line}: {msg}")
    return len(errs), [(n, first[m]) for m, n in by.most_common(limit)]


def parse_tests(output):
    passed, failed = set(), set()
    for m in re.finditer(r"^Test Case '-\[\S+ (\S+)\]' (passed|failed)", output, re.M):      # XCTest
        (passed if m.group(2) == "passed" else failed).add(m.group(1))
    for m in re.finditer(r"^Test Case '(\S+)' (passed|failed)", output, re.M):                 # XCTest on Linux
        (passed if m.group(2) == "passed" else failed).add(m.group(1))
    name = r"^\S+ Test (\"[^\"]*\"|[^\s\"]\S*?(?:\(.*?\))?)"                                      # swift-testing
    for m in re.finditer(name + r" (passed|failed)", output, re.M):
        (passed if m.group(2) == "passed" else failed).add(m.group(1))
    for m in re.finditer(name + r" recorded an issue", output, re.M):
        failed.add(m.group(1))
    return passed - failed, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkout")
    ap.add_argument("--rev", help="the commit or tag, for a git directory without a work tree")
    ap.add_argument("--work", help="work folder (default /tmp/plinth-3p/<checkout name>)")
    ap.add_argument("--plinth", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    a = ap.parse_args()
    if not os.path.isdir(a.checkout):
        print(f"third_party_suites: {a.checkout} is not a folder", file=sys.stderr)
        return 2
    name = os.path.basename(os.path.normpath(a.checkout)).replace("+", "-")
    if name in ("repo", ".git"):
        name = os.path.basename(os.path.dirname(os.path.normpath(a.checkout))).replace("+", "-")
    work = os.path.abspath(a.work or os.path.join("/tmp/plinth-3p", name))
    src = os.path.join(work, "package")
    materialize(os.path.abspath(a.checkout), a.rev, src)
    original = open(os.path.join(src, "Package.swift"), encoding="utf-8").read()
    patches = []
    for part in ("Sources", "Tests"):
        for f in swift_files(os.path.join(src, part)):
            patch(f, patches, is_test=part == "Tests")
    package_patches(name, src, patches)
    found = targets(original, src)
    for kind, _, _, folder in found.values():
        if kind == "target" and os.path.isdir(folder):
            add_bytes_shim(folder, patches)
    tests = [n for n, t in found.items() if t[0] == "testTarget"]
    print(f"== {name}{' at ' + a.rev if a.rev else ''}: {len(found) - len(tests)} other targets, {len(tests)} test targets")
    print(f"== patches (Apple-platform-only code): {len(patches)}")
    for p in patches:
        print("   " + os.path.relpath(p.split(": ")[0], src) + ": " + p.split(": ", 1)[1])
    scratch = os.path.join(work, "build")
    build = ["swift", "build", "--scratch-path", scratch, "-j", str(a.jobs)]

    def write(include):
        with open(os.path.join(src, "Package.swift"), "w", encoding="utf-8") as f:
            f.write(manifest(original, found, include, a.plinth))

    # Each test target with what it imports, alone; then the run with those that compiled.
    compiled = []
    for t in tests:
        write(closure(found, t))
        rc, out = run(build + ["--target", t], src, os.path.join(work, f"build-{t}.log"))
        if rc == 0:
            compiled.append(t)
            print(f"== {t}: compiled")
        else:
            n, top = grouped_errors(out)
            print(f"== {t}: NOT COMPILED, {n} errors (log: {work}/build-{t}.log)")
            for count, first in top:
                print(f"   {count:4d} x  {first}")
            if n == 0:
                print("\n".join("   " + l for l in out.splitlines()[-8:]))

    totals = collections.Counter()
    if compiled:
        write(set().union(*(closure(found, t) for t in compiled)))
        rc, out = run(["swift", "test", "--scratch-path", scratch, "-j", str(a.jobs)], src, os.path.join(work, "test.log"))
        passed, failed = parse_tests(out)
        totals.update(passed=len(passed), failed=len(failed))
        print(f"== tests of {', '.join(compiled)}: {len(passed)} passed, {len(failed)} failed (log: {work}/test.log)")
        for f in sorted(failed):
            print(f"   FAILED {f}")
        if not passed and not failed:
            print("   no test results parsed; the run said:\n" + "\n".join("   " + l for l in out.splitlines()[-15:]))
    print(f"== {name}: {len(compiled)} of {len(tests)} test targets compiled; tests {totals['passed']} passed, {totals['failed']} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
