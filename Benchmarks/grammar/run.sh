#!/usr/bin/env bash
# Side-by-side mask-time benchmark: Plinth's matcher vs llguidance on the schema corpus, both
# vocabularies (SmolLM2 49,152 and Qwen2.5 151,936), the same token walks, one run.
#   Benchmarks/grammar/run.sh [OUT_DIR]        (needs: pip install llguidance numpy)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-/tmp/plinth-grammar-bench}"
swift build -c release --scratch-path .build-grammar --product plinth-grammar-bench >/dev/null
# One process per vocabulary, as llguidance gets: each starts with cold caches (leaf automata
# are shared within a process, so a second vocabulary would reuse the first one's).
for v in smol qwen; do
  .build-grammar/release/plinth-grammar-bench --out "$OUT" --models "$v" >/dev/null
done
for v in smol qwen; do
  [ -f "$OUT/walks-$v.json" ] && python3 Benchmarks/grammar/llguidance_bench.py --out "$OUT" --vocab "$v" >/dev/null
done
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [("mask mean µs", "mask_mean_us"), ("mask p50 µs", "mask_p50_us"), ("mask p99 µs", "mask_p99_us"),
        ("compile p50 ms", "compile_p50_ms"), ("compile p99 ms", "compile_p99_ms"),
        ("compile CPU p50 ms", "compile_cpu_p50_ms"), ("compile CPU p99 ms", "compile_cpu_p99_ms"),
        ("+1st mask p50 ms", "compile_first_mask_p50_ms"), ("+1st mask p99 ms", "compile_first_mask_p99_ms"), ("schemas compiled", "compiled"),
        ("valid accepted", "valid_accepted"), ("valid rejected", "valid_rejected"),
        ("invalid rejected", "invalid_rejected"), ("invalid accepted", "invalid_accepted"), ("masks timed", "masks")]
for v, name in (("smol", "SmolLM2 49,152"), ("qwen", "Qwen2.5 151,936")):
    p, l = os.path.join(out, f"plinth-{v}.json"), os.path.join(out, f"llguidance-{v}.json")
    if not (os.path.exists(p) and os.path.exists(l)): continue
    P, L = json.load(open(p)), json.load(open(l))
    print(f"\n{name} vocabulary, {P['schemas']} schemas")
    print(f"| {'':18} | {'Plinth':>10} | {'llguidance':>10} |")
    print(f"|{'-'*20}|{'-'*12}|{'-'*12}|")
    for label, k in rows:
        a, b = P.get(k), L.get(k)
        fmt = (lambda x: f"{x:10.2f}") if isinstance(a, float) else (lambda x: f"{x:10}")
        print(f"| {label:18} | {fmt(a)} | {fmt(b)} |")
PY
