#!/usr/bin/env python3
"""`plinth eval` against llama-server on the same records, model, schema and instructions.

For each model: `plinth eval` over the workload (Benchmarks/eval/policy_clauses.jsonl, 600 policy
clauses; make it with make_workload.py), greedy, --parallel 16, from a fresh output; then
llama-server (-np 8, the schema as response_format json_schema, temperature 0) on the same
records from 16 client threads. Prints records/s of each, their ratio, the share of valid
values and each side's label accuracy. llama-server is a dev-time reference built from the
llama-cpp-python sdist (Benchmarks/build_llama_cpp.sh builds it with LLAMA_TARGETS=llama-server).

    LLAMA_SERVER=/path/to/llama-server python3 Benchmarks/eval/compare_llama_server.py [--models smollm2 qwen2.5-coder]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from compare_llama_server import run_llama_server  # noqa: E402  (the same client as bench-concurrent's)


def accuracy(records, values, field):
    pairs = [(r.get(field), v.get(field) if isinstance(v, dict) else None) for r, v in zip(records, values) if field in r]
    return sum(1 for a, b in pairs if a == b) / max(1, len(pairs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plinth", default=os.path.join(ROOT, ".build/release/plinth"))
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"))
    ap.add_argument("--models", nargs="+", default=["smollm2"])
    ap.add_argument("--input", default=os.path.join(HERE, "policy_clauses.jsonl"))
    ap.add_argument("--records", type=int, default=0, help="only the first N records (0: all)")
    ap.add_argument("--parallel", type=int, default=16, help="plinth eval --parallel")
    ap.add_argument("--concurrency", type=int, default=16, help="llama-server client threads")
    ap.add_argument("--slots", type=int, default=8, help="llama-server -np")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()

    schema_path = os.path.join(HERE, "policy_clauses.schema.json")
    schema = json.load(open(schema_path))
    instructions = open(os.path.join(HERE, "policy_instructions.txt")).read().strip()
    records = [json.loads(l) for l in open(args.input) if l.strip()]
    if args.records:
        records = records[:args.records]
    work = tempfile.mkdtemp(prefix="plinth-eval-bench-")
    data = os.path.join(work, "in.jsonl")
    with open(data, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")

    for model in args.models:
        out, summary = os.path.join(work, f"{model}.jsonl"), os.path.join(work, f"{model}.summary.json")
        subprocess.run([args.plinth, "eval", "-m", model, "--schema", schema_path, "--instructions", instructions,
                        "--input", data, "--output", out, "--restart", "--quiet", "--parallel", str(args.parallel),
                        "--max-tokens", str(args.max_tokens), "--label", "targetGroup", "--label", "effectDirection",
                        "--summary", summary], check=True)
        s = json.load(open(summary))
        plinth_values = [json.loads(l).get("value") for l in open(out)]
        print(f"model {model}: {len(records)} records")
        print(f"  plinth eval --parallel {args.parallel}: {s['recordsPerSecond']:.2f} records/s, "
              f"{s['generatedTokensPerSecond']:.0f} generated tok/s, {s['validValues']}/{s['records']} valid, "
              f"{s['truncatedByBudget']} ended by the budget; accuracy targetGroup "
              f"{s['labels']['targetGroup']['accuracy']:.3f}, effectDirection {s['labels']['effectDirection']['accuracy']:.3f}")
        if not args.llama_server:
            print("  (no llama-server: pass --llama-server or LLAMA_SERVER for the ratio)")
            continue
        path = subprocess.check_output([args.plinth, "models", "path", model]).decode().strip()
        rate, valid, outputs = run_llama_server(args, path, schema, records, instructions)
        llama_values = []
        for o in outputs:
            try:
                llama_values.append(json.loads(o))
            except ValueError:
                llama_values.append(None)
        same = sum(1 for a, b in zip(plinth_values, llama_values) if a == b)
        print(f"  llama-server -np {args.slots}: {rate:.2f} records/s, {valid}/{len(records)} valid JSON; accuracy "
              f"targetGroup {accuracy(records, llama_values, 'targetGroup'):.3f}, "
              f"effectDirection {accuracy(records, llama_values, 'effectDirection'):.3f}; {same} values equal to Plinth's")
        print(f"  plinth eval / llama-server: {s['recordsPerSecond'] / rate:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
