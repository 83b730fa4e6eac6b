#!/usr/bin/env bash
# The benchmark regression gate (see Benchmarks/README.md): instruction counts of fixed
# workloads under callgrind, against the baseline committed in Benchmarks/baseline.json.
#
# Usage: Benchmarks/gate.sh check  [--tolerance PCT] [--baseline FILE] [--keep DIR] [--jobs N]
#        Benchmarks/gate.sh record [--tolerance PCT] [--baseline FILE]
#   check   exit 1 when a workload phase executes more instructions than the baseline + tolerance
#   record  measure and (re)write the baseline; commit it with the change that explains it
# GATE_SCRATCH_PATH   build directory (swift build --scratch-path), default .build
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
case "$mode" in
    record|check) shift ;;
    *) echo "usage: Benchmarks/gate.sh record|check [options]  (Benchmarks/gate.py --help)" >&2; exit 2 ;;
esac

command -v valgrind >/dev/null && command -v strip >/dev/null || Scripts/bootstrap --gate

# The same build as CI's (.ci/run): the counts depend on the compiler flags, so always this one.
flags=(-c release -Xswiftc -enable-testing)
[ -z "${GATE_SCRATCH_PATH:-}" ] || flags+=(--scratch-path "$GATE_SCRATCH_PATH")
swift build "${flags[@]}" --product plinth >&2
bin="$(swift build "${flags[@]}" --show-bin-path)/plinth"
"$bin" models fetch --all >&2

# valgrind 3.19 cannot read the DWARF 5 debug info that clang writes for the C kernels: measure a
# copy without debug info (the symbol table stays, so functions keep their names).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
strip --strip-debug -o "$tmp/plinth" "$bin"

python3 Benchmarks/gate.py "$mode" --plinth "$tmp/plinth" "$@"
