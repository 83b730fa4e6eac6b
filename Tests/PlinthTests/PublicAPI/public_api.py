#!/usr/bin/env python3
"""Lists public declarations as dotted paths (`Type.member(label:)`), one per line, sorted.

  public_api.py plinth SYMBOLGRAPH_DIR   > plinth-public-api.txt   (Plinth's, from its symbol graph)
  public_api.py apple  SWIFTINTERFACE    > apple-api.txt           (Apple's, from a .swiftinterface text)
  public_api.py count  SWIFTINTERFACE SYMBOLGRAPH_DIR               (overloads counted apart: how many
      of Apple's declarations that aren't deprecated Plinth has, and the paths it lacks some of)

Make Plinth's symbol graph after a debug build with:
  swift symbolgraph-extract -module-name Plinth -I .build-api/debug/Modules \
    -Xcc -fmodule-map-file=.build-api/x86_64-unknown-linux-gnu/debug/PlinthKernels.build/module.modulemap \
    -Xcc -I -Xcc Kernels/include -I Sources/COpenBLAS -target x86_64-unknown-linux-gnu \
    -minimum-access-level public -output-dir /tmp/sg
Apple's list was made from the Xcode 27 beta 4 FoundationModels interface quoted in
rudrankriyam/Foundation-Models-Framework-Lab:fmf.md (its "Raw Swift Interface Reference").
"""
import collections, json, os, re, sys

SKIP_NAMES = {"==", "hash(into:)", "hashValue", "!=", "~="}


def plinth(directory, counts=False):
    paths, symbols = set(), collections.defaultdict(set)
    for name in os.listdir(directory):
        graph = json.load(open(os.path.join(directory, name)))
        for symbol in graph["symbols"]:
            location = symbol.get("location", {}).get("uri", "")
            if "/Sources/Plinth/" not in location:
                continue
            if symbol["kind"]["identifier"] in ("swift.typealias", "swift.subscript", "swift.associatedtype"):
                continue
            components = symbol["pathComponents"]
            if any(c.startswith("_") for c in components) or components[-1] in SKIP_NAMES:
                continue
            paths.add(".".join(components))
            symbols[".".join(components)].add(symbol["identifier"]["precise"])
    return collections.Counter({p: len(ids) for p, ids in symbols.items()}) if counts else paths


def split_params(text):
    depth, current, parts = 0, "", []
    for ch in text:
        if ch in "([<{":
            depth += 1
        elif ch in ")]>}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return parts


def params_of(text, start):
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    return ""


def labels(params, is_case=False):
    result = []
    for p in split_params(params):
        p = p.strip()
        p = re.sub(r"^@\w+(\([^)]*\))?\s+", "", p)
        head = p.split(":")[0].strip() if ":" in p else None
        if is_case:
            result.append(head.split()[0] if head and not head.startswith(("(", "[")) and " " not in head.strip() and re.match(r"^\w+$", head) else "_")
            continue
        names = head.split() if head else ["_"]
        result.append(names[0])
    return "".join(l + ":" for l in result)


class Found:
    """Apple's declarations by path, with how many that aren't deprecated each has (a member of
    a deprecated type or extension is deprecated too)."""
    def __init__(self):
        self.all, self.current = set(), collections.Counter()
        self.deprecated, self.line_deprecated, self.scopes = False, False, []

    def add(self, path):
        self.all.add(path)
        if not self.line_deprecated and not any(self.scopes):
            self.current[path] += 1


def apple(path, counts=False):
    text = open(path).read()
    start = text.find("## Raw Swift Interface Reference")
    lines = [l for l in text[start:].split("\n")]
    stack, paths = [], Found()
    for raw in lines:
        line = raw.strip()
        if line.startswith("@available") and re.search(r"\bdeprecated\b", line):
            paths.deprecated = True
        if not line or line.startswith("///") or line.startswith("//") or line.startswith("@available") or line.startswith("import"):
            continue
        if line.startswith("}"):
            if stack:
                stack.pop()
                paths.scopes.pop()
            paths.deprecated = False
            continue
        # This line declares something: the @available lines before it were its own.
        paths.line_deprecated, paths.deprecated = paths.deprecated, False
        decl = re.sub(r"^(@[\w]+(\([^)]*\))?\s+)+", "", line)
        decl = re.sub(r"\b(nonisolated\(nonsending\)|nonisolated|final|@discardableResult|@export\(implementation\)|@backDeployed\([^)]*\))\s+", "", decl)
        m = re.match(r"^(?:public\s+)?(?:indirect\s+)?(struct|enum|class|protocol|actor|extension)\s+([\w.]+)", decl)
        if m and line.endswith("{"):
            name = m.group(2)
            full = name if m.group(1) == "extension" or not stack else stack[-1] + "." + name
            if m.group(1) != "extension":
                paths.add(full)
            stack.append(full)
            paths.scopes.append(paths.line_deprecated)
            continue
        if line.endswith("{") and not m:
            stack.append(stack[-1] if stack else "")
            paths.scopes.append(paths.line_deprecated)
        context = stack[-1] if stack else ""
        prefix = context + "." if context else ""
        if "public macro " in line:
            mm = re.search(r"public macro (\w+)(?:<[^>]*>)?\(", line)
            paths.add(mm.group(1) + "(" + labels(params_of(line, mm.end() - 1)) + ")")
            continue
        mm = re.match(r"^(?:public\s+)?(?:static\s+|mutating\s+|class\s+|convenience\s+|required\s+)*func\s+([^\s(<]+)(<[^(]*>)?\(", decl)
        if mm:
            name = mm.group(1)
            sig = name + "(" + labels(params_of(decl, mm.end() - 1)) + ")"
            if sig not in SKIP_NAMES and name not in SKIP_NAMES:
                paths.add(prefix + sig)
            continue
        mm = re.match(r"^(?:public\s+)?(?:convenience\s+|required\s+)*init[?!]?(<[^(]*>)?\(", decl)
        if mm:
            paths.add(prefix + "init(" + labels(params_of(decl, mm.end() - 1)) + ")")
            continue
        mm = re.match(r"^(?:public\s+)?(?:static\s+|class\s+)*(?:var|let)\s+`?(\w+)`?", decl)
        if mm:
            if mm.group(1) not in SKIP_NAMES:
                paths.add(prefix + mm.group(1))
            continue
        mm = re.match(r"^case\s+(\w+)(\()?", decl)
        if mm:
            if mm.group(2):
                paths.add(prefix + mm.group(1) + "(" + labels(params_of(decl, mm.end() - 1), is_case=True) + ")")
            else:
                for name in re.findall(r"\w+", decl[5:]):
                    paths.add(prefix + name)
            continue
    return paths.current if counts else paths.all


def count(interface, graph):
    """Apple's declarations that aren't deprecated, overloads apart, and how many Plinth has."""
    theirs, ours = apple(interface, counts=True), plinth(graph, counts=True)
    have = sum(min(n, ours[p]) for p, n in theirs.items())
    total = sum(theirs.values())
    print(f"{have} of {total} declarations ({100 * have / total:.1f} %); paths with fewer than Apple's:")
    for p, n in sorted(theirs.items()):
        if ours[p] < n:
            print(f"  {p}: {ours[p]} of {n}")


if __name__ == "__main__":
    mode, source = sys.argv[1], sys.argv[2]
    if mode == "count":
        count(source, sys.argv[3])
        sys.exit(0)
    result = plinth(source) if mode == "plinth" else apple(source)
    print("\n".join(sorted(result)))
