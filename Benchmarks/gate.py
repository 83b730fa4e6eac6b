#!/usr/bin/env python3
"""Benchmark regression gate: instruction counts of fixed workloads under callgrind.

Wall-clock times on shared 2-core machines swing by ±20–30%; the number of instructions a
fixed, single-threaded workload executes does not (it repeats to within a few instructions in
a billion). Each workload is one `plinth bench` run (threads 1, fixed seed, one repetition, no
warm-up) under `valgrind --tool=callgrind`; the gate reads the inclusive instruction count
(Ir) of each measured phase — the functions `benchPhasePrompt`, `benchPhaseGeneration`,
`benchPhaseBatchedPrompt`, `benchPhaseBatchedGeneration` in Sources/plinth/Bench.swift — and
of everything else in the process ("load": start-up and model loading).

  record  measure the workloads named in the baseline file (or the default ones when it does
          not exist yet) and write their counts into it
  check   measure them again; print measured against baseline; exit 1 when any count grew by
          more than the tolerance (default: the baseline's, 3%)

Usually run through Benchmarks/gate.sh, which builds the binary the way CI does.
What the counts do not see: memory bandwidth and cache misses, threading, and the AVX-512
paths (valgrind has no AVX-512, so the AVX2 paths run). Speed claims come from
Benchmarks/compare_llama_cpp.py; this gate catches "more work per token".
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

BASELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline.json")

DEFAULT_TOLERANCE = 3.0
DEFAULT_WORKLOADS = [
    {"name": "smollm2", "model": "SmolLM2-135M-Instruct", "args": ["-p", "32", "-n", "8"]},
    {"name": "smollm2-batched", "model": "SmolLM2-135M-Instruct", "args": ["--parallel", "4", "-p", "8", "-n", "4"]},
    {"name": "qwen2.5-coder", "model": "Qwen2.5-Coder-0.5B-Instruct", "args": ["-p", "16", "-n", "4"]},
]
# Arguments every workload gets: deterministic and single-threaded.
FIXED_ARGS = ["-t", "1", "-r", "1", "--no-warmup", "--seed", "1", "--no-fetch"]
ENVIRONMENT = {
    "PLINTH_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    # One OpenBLAS kernel set whatever the host CPU (AVX2; valgrind has no AVX-512 anyway).
    "OPENBLAS_CORETYPE": "Haswell",
    # Swift seeds its hash tables randomly per process; fixed seeding keeps Dictionary work fixed.
    "SWIFT_DETERMINISTIC_HASHING": "1",
}
# Phase function -> the phase name in the report (prefix of the test name, e.g. pp32, tg8).
PHASES = {
    "benchPhasePrompt": "pp",
    "benchPhaseGeneration": "tg",
    "benchPhaseBatchedPrompt": "pp",
    "benchPhaseBatchedGeneration": "tg",
}
TOP_FUNCTIONS = 12


def parse_callgrind(path):
    """Self and inclusive Ir per function name, and the program total, from a callgrind file."""
    names = {}

    def resolve(kind, rest):
        m = re.match(r"\((\d+)\)(?: (.*))?$", rest)
        if not m:
            return rest
        key = (kind, m.group(1))
        if m.group(2) is not None:
            names[key] = m.group(2)
        return names.get(key, rest)

    self_ir, inclusive_ir = Counter(), Counter()
    fn, after_call, total = None, False, None
    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in ("+", "-", "*"):
                parts = line.split()
                if len(parts) < 2:
                    continue
                ir = int(parts[1])
                inclusive_ir[fn] += ir  # a cost line after calls= is the callee's inclusive cost
                if after_call:
                    after_call = False
                else:
                    self_ir[fn] += ir
            elif line.startswith("fn="):
                fn = resolve("fn", line[3:].rstrip("\n"))
            elif line.startswith("cfn="):
                resolve("fn", line[4:].rstrip("\n"))
            elif line.startswith("calls="):
                after_call = True
            elif line.startswith("summary:") or line.startswith("totals:"):
                total = int(line.split()[1])
    if total is None:
        total = sum(self_ir.values())
    return self_ir, inclusive_ir, total


def phase_counts(inclusive_ir, args):
    """{'pp32': Ir, 'tg8': Ir} for one workload, from the inclusive counts of the phase functions."""
    found = {}
    for function, phase in PHASES.items():
        token = f"{len(function)}{function}"  # Swift mangling: the identifier with its length
        matches = [ir for name, ir in inclusive_ir.items() if name and token in name]
        if matches:
            found[function] = max(matches)  # the function itself, not a closure nested in it
    prompt = value_of(args, "-p", "--prompt", 512)
    gen = value_of(args, "-n", "--gen", 128)
    parallel = value_of(args, None, "--parallel", None)
    suffix = f"x{parallel}" if parallel else ""
    counts = {}
    for function, ir in found.items():
        phase = PHASES[function]
        counts[f"{phase}{prompt if phase == 'pp' else gen}{suffix}"] = ir
    return counts


def value_of(args, short, long, default):
    for i, a in enumerate(args[:-1]):
        if a in (short, long):
            return int(args[i + 1])
    return default


def demangle(names):
    swift = shutil.which("swift")
    if not swift or not names:
        return {n: n for n in names}
    try:
        out = subprocess.run([swift, "demangle", "--simplified", "--compact"], input="\n".join(names),
                             capture_output=True, text=True, timeout=60).stdout.splitlines()
        if len(out) == len(names):
            return {n: (d if len(d) <= 90 else d[:87] + "...") for n, d in zip(names, out)}
    except (OSError, subprocess.SubprocessError):
        pass
    return dict(zip(names, names))


def workload_env(workdir, home):
    env = dict(os.environ, **ENVIRONMENT)
    if home:
        env["PLINTH_HOME"] = home
    # The packed weights are made before measuring (see pack_models), so "load" always counts
    # opening them, never making them.
    env["PLINTH_PACK_DIR"] = os.path.join(workdir, "packed")
    env.pop("PLINTH_PACK", None)
    return env


def pack_models(workloads, plinth, workdir, home):
    """Makes each model's packed weights once, natively, before the measured runs."""
    for model in sorted({w["model"] for w in workloads}):
        cmd = [plinth, "bench", "-m", model, "-p", "1", "-n", "0", *FIXED_ARGS]
        r = subprocess.run(cmd, capture_output=True, text=True, env=workload_env(workdir, home))
        if r.returncode != 0:
            raise RuntimeError(f"packing {model} failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")


def run_workload(workload, plinth, workdir, home):
    out = os.path.join(workdir, f"callgrind.{workload['name']}.out")
    log = os.path.join(workdir, f"valgrind.{workload['name']}.log")
    env = workload_env(workdir, home)
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", plinth, "bench",
           "-m", workload["model"], *workload["args"], *FIXED_ARGS]
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=f, env=env).returncode
    if rc != 0:
        with open(log) as f:
            tail = "".join(f.readlines()[-15:])
        raise RuntimeError(f"workload {workload['name']} failed (exit {rc}): {' '.join(cmd)}\n{tail}")
    self_ir, inclusive_ir, total = parse_callgrind(out)
    phases = phase_counts(inclusive_ir, workload["args"])
    if not phases:
        raise RuntimeError(f"workload {workload['name']}: no benchPhase* function in {out}; "
                           "were they renamed in Sources/plinth/Bench.swift?")
    counts = dict(phases)
    counts["load"] = total - sum(phases.values())
    top = dict(self_ir.most_common(TOP_FUNCTIONS))
    return {"counts": counts, "total": total, "functions": top}


def environment_facts():
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "unknown"
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "unknown")
    except OSError:
        pass
    return {
        "valgrind": first_line(["valgrind", "--version"]),
        "swift": first_line(["swift", "--version"]),
        "cpu": cpu,
        "machine": platform.machine(),
    }


def measure(workloads, plinth, jobs, home, keep):
    workdir = keep or tempfile.mkdtemp(prefix="plinth-gate-")
    os.makedirs(workdir, exist_ok=True)
    results = {}
    try:
        pack_models(workloads, plinth, workdir, home)
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {w["name"]: pool.submit(run_workload, w, plinth, workdir, home) for w in workloads}
            for name, fut in futures.items():
                results[name] = fut.result()
                print(f"gate: measured {name}", file=sys.stderr)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return results


def fmt(n):
    return f"{n:,}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["record", "check"])
    ap.add_argument("--plinth", required=True, help="the plinth binary to measure (without DWARF 5 debug info)")
    ap.add_argument("--baseline", default=BASELINE, help="baseline file (default: Benchmarks/baseline.json)")
    ap.add_argument("--tolerance", type=float, help="allowed growth in percent (check: default the baseline's; "
                                                       f"record: stored, default {DEFAULT_TOLERANCE})")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workloads run side by side")
    ap.add_argument("--keep", metavar="DIR", help="keep the callgrind files in DIR (for callgrind_annotate)")
    ap.add_argument("--verbose", action="store_true", help="check: list the heaviest functions of every workload")
    ap.add_argument("--plinth-home", help="model cache (default: $PLINTH_HOME or ~/.cache/plinth)")
    args = ap.parse_args()

    baseline = None
    if os.path.exists(args.baseline):
        with open(args.baseline) as f:
            baseline = json.load(f)
    elif args.mode == "check":
        sys.exit(f"gate: no baseline at {args.baseline}; run `Benchmarks/gate.sh record` first")
    workloads = (baseline or {}).get("workloads") or DEFAULT_WORKLOADS

    started = datetime.datetime.now()
    results = measure(workloads, args.plinth, max(1, args.jobs), args.plinth_home, args.keep)
    seconds = (datetime.datetime.now() - started).total_seconds()
    env = environment_facts()

    if args.mode == "record":
        tolerance = args.tolerance if args.tolerance is not None else (baseline or {}).get("tolerance_percent", DEFAULT_TOLERANCE)
        doc = {
            "about": "Instruction counts (callgrind Ir) of the regression-gate workloads. "
                     "Re-record with `Benchmarks/gate.sh record`; see Benchmarks/README.md.",
            "tolerance_percent": tolerance,
            "recorded": started.strftime("%Y-%m-%d"),
            "environment": env,
            "fixed_args": FIXED_ARGS,
            "fixed_env": ENVIRONMENT,
            "workloads": workloads,
            "results": results,
        }
        with open(args.baseline, "w") as f:
            json.dump(doc, f, indent=2, sort_keys=False)
            f.write("\n")
        for name, r in results.items():
            for phase, ir in r["counts"].items():
                print(f"{name:18} {phase:10} {fmt(ir):>18} Ir")
        print(f"gate: recorded {args.baseline} in {seconds:.0f} s (tolerance {tolerance}%)")
        return 0

    tolerance = args.tolerance if args.tolerance is not None else baseline.get("tolerance_percent", DEFAULT_TOLERANCE)
    for key in ("valgrind", "cpu"):
        old = baseline.get("environment", {}).get(key)
        if old and old != env[key]:
            print(f"gate: warning: baseline {key} was '{old}', this machine has '{env[key]}'; counts may differ "
                  "for that reason alone", file=sys.stderr)
    failed = []
    print(f"{'workload':18} {'phase':10} {'baseline Ir':>18} {'measured Ir':>18} {'change':>8}")
    for w in workloads:
        name = w["name"]
        base = baseline["results"].get(name, {}).get("counts", {})
        now = results[name]["counts"]
        for phase in sorted(set(base) | set(now), key=lambda p: (p == "load", p)):
            if phase not in now:
                print(f"{name:18} {phase:10} {fmt(base[phase]):>18} {'missing':>18}")
                failed.append(f"{name}/{phase} missing")
                continue
            if phase not in base:
                print(f"{name:18} {phase:10} {'-':>18} {fmt(now[phase]):>18}   (new; record to gate it)")
                continue
            change = 100.0 * (now[phase] - base[phase]) / max(base[phase], 1)
            verdict = "REGRESSION" if change > tolerance else ("faster" if change < -tolerance else "ok")
            print(f"{name:18} {phase:10} {fmt(base[phase]):>18} {fmt(now[phase]):>18} {change:+7.2f}%  {verdict}")
            if change > tolerance:
                failed.append(f"{name}/{phase} {change:+.2f}%")
        # Where the instructions went: the heaviest functions against the baseline's, when a phase
        # moved beyond the tolerance or when asked (information only; kernel names come and go).
        moved = any(abs(now[p] - base[p]) > tolerance / 100.0 * base[p] for p in now if p in base)
        if args.verbose or moved:
            old_fns = baseline["results"].get(name, {}).get("functions", {})
            new_fns = results[name]["functions"]
            names = demangle(list(new_fns) + [f for f in old_fns if f not in new_fns])
            print(f"{'':18}   heaviest functions (self Ir):")
            for fn, ir in new_fns.items():
                was = old_fns.get(fn)
                delta = f"{100.0 * (ir - was) / max(was, 1):+7.2f}%" if was else "    new"
                print(f"{'':18}   {fmt(ir):>18} {delta}  {names[fn]}")
            for fn, was in old_fns.items():
                if fn not in new_fns:
                    print(f"{'':18}   {fmt(was):>18}    gone  {names[fn]} (baseline)")
    print(f"gate: {len(workloads)} workloads in {seconds:.0f} s, tolerance +{tolerance}%")
    if failed:
        print("gate: FAILED: " + "; ".join(failed))
        print("gate: if the extra work is intended, re-record: Benchmarks/gate.sh record (and commit Benchmarks/baseline.json)")
        return 1
    print("gate: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
