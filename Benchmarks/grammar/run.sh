#!/usr/bin/env bash
# Side-by-side mask-time benchmark: Plinth's matcher vs llguidance on the schema corpus, both
# vocabularies (SmolLM2 49,152 and Qwen2.5 151,936), the same token walks.
#   Benchmarks/grammar/run.sh [OUT_DIR] [RUNS]     (needs: pip install llguidance numpy)
#   VOCABS="smol qwen gemma" Benchmarks/grammar/run.sh ...   (default smol qwen; gemma: Gemma 3's 262,144)
# Each run measures both engines on both vocabularies, one after the other; with RUNS > 1 the
# table gives each figure's median over the runs (these shared machines change speed between
# runs, by 2x at times, so one run decides little) and every run's results stay in OUT_DIR/run-N.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-/tmp/plinth-grammar-bench}"
RUNS="${2:-1}"
swift build -c release --scratch-path .build-grammar --product plinth-grammar-bench >/dev/null
for run in $(seq 1 "$RUNS"); do
  dir="$OUT/run-$run"
  mkdir -p "$dir"
  # One process per vocabulary, as llguidance gets: each starts with cold caches (leaf automata
  # are shared within a process, so a second vocabulary would reuse the first one's).
  for v in ${VOCABS:-smol qwen}; do
    .build-grammar/release/plinth-grammar-bench --out "$dir" --models "$v" >/dev/null
    [ -f "$dir/walks-$v.json" ] && python3 Benchmarks/grammar/llguidance_bench.py --out "$dir" --vocab "$v" >/dev/null
  done
done
python3 - "$OUT" "$RUNS" <<'PY'
import json, os, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
rows = [("mask mean µs", "mask_mean_us"), ("mask p50 µs", "mask_p50_us"), ("mask p99 µs", "mask_p99_us"),
        ("compile p50 ms", "compile_p50_ms"), ("compile p99 ms", "compile_p99_ms"),
        ("compile CPU p50 ms", "compile_cpu_p50_ms"), ("compile CPU p99 ms", "compile_cpu_p99_ms"),
        ("+1st mask p50 ms", "compile_first_mask_p50_ms"), ("+1st mask p99 ms", "compile_first_mask_p99_ms"), ("schemas compiled", "compiled"),
        ("valid accepted", "valid_accepted"), ("valid rejected", "valid_rejected"),
        ("invalid rejected", "invalid_rejected"), ("invalid accepted", "invalid_accepted"), ("masks timed", "masks")]
for v, name in (("smol", "SmolLM2 49,152"), ("qwen", "Qwen2.5 151,936"), ("gemma", "Gemma 3 262,144")):
    P, L = [], []
    for run in range(1, runs + 1):
        p, l = os.path.join(out, f"run-{run}", f"plinth-{v}.json"), os.path.join(out, f"run-{run}", f"llguidance-{v}.json")
        if os.path.exists(p) and os.path.exists(l):
            P.append(json.load(open(p))); L.append(json.load(open(l)))
    if not P: continue
    print(f"\n{name} vocabulary, {P[0]['schemas']} schemas" + (f", medians of {len(P)} runs" if len(P) > 1 else ""))
    print(f"| {'':18} | {'Plinth':>10} | {'llguidance':>10} |")
    print(f"|{'-'*20}|{'-'*12}|{'-'*12}|")
    for label, k in rows:
        a, b = statistics.median(x[k] for x in P), statistics.median(x[k] for x in L)
        fmt = (lambda x: f"{x:10.2f}") if isinstance(P[0][k], float) else (lambda x: f"{x:10g}")
        print(f"| {label:18} | {fmt(a)} | {fmt(b)} |")
    if len(P) > 1:
        for label, k in (("compile p99 ms", "compile_p99_ms"), ("mask p99 µs", "mask_p99_us")):
            print(f"{label} per run (Plinth/llguidance): " + ", ".join(f"{p[k]:.2f}/{l[k]:.2f}" for p, l in zip(P, L)))
PY
