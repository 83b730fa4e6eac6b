#!/usr/bin/env python3
"""Two Plinth binaries side by side on the same GGUF files, in alternation (a change's A/B).

For every model file and round, runs (order alternating between rounds, so that drift and the
neighbours' load hit both builds alike):

  single   BIN bench -m F -p 512 -n 128 -t 2 -r 1 --json
  batched  BIN bench -m F --parallel 16 -p 128 -n 32 -t 2 -r 1 --json   (unless --no-batched)

and prints, per file and test, the median tokens/s of each build over the rounds, their ratio
new/base, and the range of the per-round ratios. Keep a copy of the base binary before
rebuilding (cp .build/release/plinth /tmp/plinth-base).

Usage: python3 Benchmarks/compare_builds.py --base /tmp/plinth-base [--new .build/release/plinth]
           [--rounds 6] [--models F.gguf ...] [--no-batched] [--no-single]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_llama_cpp import default_models, fmt_range, plinth_batched, plinth_single  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the binary before the change")
    ap.add_argument("--new", default=os.path.join(ROOT, ".build/release/plinth"), help="the binary after it")
    ap.add_argument("--models", nargs="+", default=None)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--npp", type=int, default=128)
    ap.add_argument("--ntg", type=int, default=32)
    ap.add_argument("--npl", type=int, default=16)
    ap.add_argument("--no-batched", action="store_true")
    ap.add_argument("--no-single", action="store_true")
    ap.add_argument("--log", default="/tmp/plinth-compare-builds.log")
    a = ap.parse_args()
    models = a.models or default_models()
    open(a.log, "w").close()
    tests = ([] if a.no_single else ["pp", "tg"]) + ([] if a.no_batched else ["bpp", "btg"])
    samples = {m: {b: {t: [] for t in tests} for b in ("base", "new")} for m in models}
    start = time.time()
    for r in range(a.rounds):
        for m in models:
            order = ("base", "new") if r % 2 == 0 else ("new", "base")
            for build in order:
                a.plinth = a.base if build == "base" else a.new
                got = {}
                if not a.no_single:
                    got.update(plinth_single(a, m, a.log)[0])
                if not a.no_batched:
                    got.update(plinth_batched(a, m, a.log)[0])
                for t in tests:
                    samples[m][build][t].append(got[t])
            print(f"compare-builds: round {r + 1}/{a.rounds}: {os.path.basename(m)} done ({time.time() - start:.0f} s)",
                  file=sys.stderr, flush=True)
    names = {"pp": f"pp{a.pp}", "tg": f"tg{a.tg}", "bpp": f"batched pp{a.npp}x{a.npl}", "btg": f"batched tg{a.ntg}x{a.npl}"}
    print(f"\nnew/base, {a.threads} threads, {a.rounds} alternating rounds; medians in tokens/s\n")
    print("| model | test | base t/s | new t/s | ratio | per-round ratios |\n| --- | --- | ---: | ---: | ---: | ---: |")
    for m in models:
        for t in tests:
            b, n = samples[m]["base"][t], samples[m]["new"][t]
            ratios = [y / x for x, y in zip(b, n)]
            print(f"| {os.path.basename(m)} | {names[t]} | {statistics.median(b):.2f} | {statistics.median(n):.2f} | "
                  f"{statistics.median(n) / statistics.median(b):.3f}× | {fmt_range(ratios)} |")


if __name__ == "__main__":
    main()
