#!/usr/bin/env python3
"""Plinth against llama.cpp on the same GGUF files, side by side, in alternation.

For every model file and round, runs (order alternating between rounds, so that drift and
noise hit both sides alike):

  single   plinth bench -m F -p 512 -n 128 -t 2 -r 1 --json
           llama-bench  -m F -p 512 -n 128 -t 2 -r 1 -o json
  batched  plinth bench -m F --parallel 16 -p 128 -n 32 -t 2 -r 1 --json
           llama-batched-bench -m F -npp 128 -ntg 32 -npl 16 -t 2 -tb 2 -c 2560 --output-format jsonl

and prints, per file, the median tokens/s of each side over the rounds and their ratio
Plinth/llama.cpp for pp512, tg128 and batched decode (total generation tokens/s of 16
sequences), with the range of the per-round ratios, plus the peak RSS of both processes
(the kernel's ru_maxrss of each child: same file, same context per test).

llama.cpp comes from Benchmarks/build_llama_cpp.sh (a developer tool, never a dependency);
the SmolLM2 variants from Benchmarks/make_variants.sh. Build Plinth first:
`swift build -c release --product plinth`.

Usage: python3 Benchmarks/compare_llama_cpp.py [--rounds 5] [--models F.gguf ...] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOME = os.environ.get("PLINTH_HOME", os.path.expanduser("~/.cache/plinth"))


def default_models():
    files = [os.path.join(HOME, "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")]
    for t in ("Q8_0", "Q4_K_M", "Q2_K"):
        files.append(os.path.join(HOME, f"bench-models/SmolLM2-135M-Instruct.{t}.gguf"))
    files.append(os.path.join(HOME, "models/Qwen2.5-Coder-0.5B-Instruct/Qwen2.5-Coder-0.5B-Instruct.gguf"))
    return [f for f in files if os.path.exists(f)]


def run_rss(cmd, log):
    """Runs cmd and reaps it with os.wait4 for its own peak RSS (ru_maxrss).
    Returns (stdout, stderr, rss bytes); both outputs are appended to the log."""
    out_path, err_path = log + ".stdout", log + ".stderr"
    with open(out_path, "w") as out_f, open(err_path, "w") as err_f:
        p = subprocess.Popen(cmd, stdout=out_f, stderr=err_f)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path) as f:
        out = f.read()
    with open(err_path) as f:
        err = f.read()
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n" + err[-3000:] + out[-3000:] + "\n")
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {' '.join(cmd)} (see {log})")
    return out, err, usage.ru_maxrss * 1024


def plinth_single(a, model, log):
    out, err, rss = run_rss([a.plinth, "bench", "-m", model, "-p", str(a.pp), "-n", str(a.tg), "-t", str(a.threads),
                        "-r", "1", "--json"], log)
    r = {x["kind"]: x["median_ts"] for x in json.loads(out)["results"]}
    return {"pp": r["pp"], "tg": r["tg"]}, rss


def llama_single(a, model, log):
    out, err, rss = run_rss([os.path.join(a.llama_bin, "llama-bench"), "-m", model, "-p", str(a.pp), "-n", str(a.tg),
                        "-t", str(a.threads), "-r", "1", "-o", "json"], log)
    r = {}
    for x in json.loads(out):
        r["pp" if x["n_prompt"] > 0 else "tg"] = x["avg_ts"]
    return {"pp": r["pp"], "tg": r["tg"]}, rss


def plinth_batched(a, model, log):
    out, err, rss = run_rss([a.plinth, "bench", "-m", model, "--parallel", str(a.npl), "-p", str(a.npp), "-n", str(a.ntg),
                        "-t", str(a.threads), "-r", "1", "--json"], log)
    r = {x["kind"]: x["median_ts"] for x in json.loads(out)["results"]}
    return {"bpp": r["pp"], "btg": r["tg"]}, rss


def llama_batched(a, model, log):
    ctx = a.npl * (a.npp + a.ntg)
    out, err, rss = run_rss([os.path.join(a.llama_bin, "llama-batched-bench"), "-m", model, "-npp", str(a.npp),
                        "-ntg", str(a.ntg), "-npl", str(a.npl), "-t", str(a.threads), "-tb", str(a.threads),
                        "-c", str(ctx), "--output-format", "jsonl"], log)
    rows = [json.loads(l) for l in (out + "\n" + err).splitlines() if l.startswith("{") and '"speed_tg"' in l]
    if not rows:
        raise RuntimeError(f"no result line from llama-batched-bench (see {log})")
    return {"bpp": rows[-1]["speed_pp"], "btg": rows[-1]["speed_tg"]}, rss


def fmt_range(xs):
    return f"{min(xs):.2f}–{max(xs):.2f}" if len(xs) > 1 else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", help="GGUF files (default: the SmolLM2 Q4_1 file, its variants "
                                                "in $PLINTH_HOME/bench-models, and Qwen2.5-Coder-0.5B)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (samples per side)")
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--npp", type=int, default=128, help="batched: prompt tokens per sequence")
    ap.add_argument("--ntg", type=int, default=32, help="batched: generated tokens per sequence")
    ap.add_argument("--npl", type=int, default=16, help="batched: sequences")
    ap.add_argument("--no-batched", action="store_true")
    ap.add_argument("--no-single", action="store_true")
    ap.add_argument("--plinth", default=os.path.join(ROOT, ".build/release/plinth"))
    ap.add_argument("--llama-dir", default=os.environ.get("LLAMA_CPP_DIR", os.path.join(HOME, "llama.cpp")),
                    help="where build_llama_cpp.sh built llama.cpp (tools in DIR/build/bin)")
    ap.add_argument("--wait-idle", type=float, metavar="LOAD", default=0,
                    help="before each round, wait (up to 10 min) until the 1-minute load average is below LOAD")
    ap.add_argument("--json", metavar="FILE", help="write every sample and RSS to FILE")
    ap.add_argument("--log", default="/tmp/plinth-compare.log",
                    help="the tools' own output goes here; LOG.table holds the tables so far during a run")
    a = ap.parse_args()
    a.llama_bin = os.path.join(a.llama_dir, "build/bin")
    models = a.models or default_models()
    if not models:
        sys.exit("compare: no model files; see Benchmarks/README.md")
    for tool in [a.plinth, os.path.join(a.llama_bin, "llama-bench"), os.path.join(a.llama_bin, "llama-batched-bench")]:
        if not os.access(tool, os.X_OK):
            sys.exit(f"compare: {tool} missing (build Plinth, and llama.cpp with Benchmarks/build_llama_cpp.sh)")
    open(a.log, "w").close()

    pairs = []
    if not a.no_single:
        pairs.append((plinth_single, llama_single, "single"))
    if not a.no_batched:
        pairs.append((plinth_batched, llama_batched, "batched"))

    # data[model][side][metric] = [samples]; rss[model][side][mode] = [bytes]
    data = {m: {"plinth": {}, "llama": {}} for m in models}
    rss = {m: {"plinth": {}, "llama": {}} for m in models}
    started = time.time()
    loads = []
    names = {"pp": f"pp{a.pp}", "tg": f"tg{a.tg}", "bpp": f"batched pp{a.npp}x{a.npl}",
             "btg": f"batched tg{a.ntg}x{a.npl}"}

    def report(out):
        """The ratio and RSS tables (and the --json file) from the samples so far."""
        say = lambda s="": print(s, file=out)
        say(f"\nPlinth/llama.cpp, {a.threads} threads, {len(loads)} alternating rounds; medians in tokens/s "
            f"(batched: total over {a.npl} sequences); 1-minute load average at the rounds' starts: "
            f"{', '.join(f'{x:.1f}' for x in loads)} on {os.cpu_count()} cores\n")
        say("| model | test | Plinth t/s | llama.cpp t/s | ratio | per-round ratios |")
        say("| --- | --- | ---: | ---: | ---: | ---: |")
        summary = {}
        for m in models:
            base = os.path.basename(m)
            for k in ("pp", "tg", "bpp", "btg"):
                p, l = data[m]["plinth"].get(k), data[m]["llama"].get(k)
                if not p or not l:
                    continue
                n = min(len(p), len(l))
                ratio = statistics.median(p[:n]) / statistics.median(l[:n])
                per_round = [x / y for x, y in zip(p, l)]
                summary.setdefault(base, {})[names[k]] = ratio
                say(f"| {base} | {names[k]} | {statistics.median(p[:n]):.2f} | {statistics.median(l[:n]):.2f} | "
                    f"{ratio:.2f}× | {fmt_range(per_round)} |")
        say("\nPeak RSS (MiB, median over rounds; single: Plinth context max(p, n), llama-bench p and n per test; "
            "batched: both sequences × (npp + ntg))\n")
        say("| model | run | Plinth | llama.cpp | ratio |")
        say("| --- | --- | ---: | ---: | ---: |")
        for m in models:
            for mode in ("single", "batched"):
                p, l = rss[m]["plinth"].get(mode), rss[m]["llama"].get(mode)
                if not p or not l:
                    continue
                mp, ml = statistics.median(p) / 2**20, statistics.median(l) / 2**20
                say(f"| {os.path.basename(m)} | {mode} | {mp:.1f} | {ml:.1f} | {mp / ml:.2f}× |")
        say(f"\n{time.time() - started:.0f} s; tool output in {a.log}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"args": vars(a), "load": loads, "samples": data, "rss": rss, "ratios": summary},
                          f, indent=2)

    for rnd in range(a.rounds):
        deadline = time.time() + 600
        while a.wait_idle and os.getloadavg()[0] >= a.wait_idle and time.time() < deadline:
            time.sleep(10)
        loads.append(os.getloadavg()[0])
        for m in models:
            for plinth_fn, llama_fn, mode in pairs:
                order = [("plinth", plinth_fn), ("llama", llama_fn)]
                if rnd % 2:
                    order.reverse()
                for side, fn in order:
                    values, peak = fn(a, m, a.log)
                    for k, v in values.items():
                        data[m][side].setdefault(k, []).append(v)
                    rss[m][side].setdefault(mode, []).append(peak)
            print(f"compare: round {rnd + 1}/{a.rounds}: {os.path.basename(m)} done "
                  f"({time.time() - started:.0f} s)", file=sys.stderr)
            with open(a.log + ".table", "w") as f:  # the tables so far, should the run be cut short
                report(f)
    report(sys.stdout)


if __name__ == "__main__":
    main()
