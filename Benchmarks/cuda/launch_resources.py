#!/usr/bin/env python3
"""Holds every kernel launch the emulated runs made against what a device gives a block.

A launch a device cannot run (more registers or shared memory than a block may have, or more
threads than the kernel was built for) fails on a GPU with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES or
an invalid value, and not on the CPU emulator, which knows nothing of registers. This joins

  - ptxas's counts for each kernel of each module (`ptxas -v` on the PTX that
    `compile_cuda --ptx --save DIR` keeps): registers, spills, static shared memory, and the
    PTX's `.maxntid` (a kernel's __launch_bounds__);
  - each kernel's largest block and dynamic shared memory over emulated runs (the emulator's
    PKC_EMU_LAUNCH_LOG file; several runs may append to it),

and checks, for the architecture the PTX is assembled for:
  - threads <= .maxntid where the kernel has one;
  - the block's registers: warps x (registers x 32 rounded up to the 256 a warp is given at a
    time) <= 65,536;
  - static + dynamic shared memory <= 48 KiB, or <= the opt-in cuFuncSetAttribute allowed and
    the architecture's most a block may have.

  launch_resources.py --ptx DIR --launches FILE [--ptxas PATH] [--arch 90] [--all]

Prints one line a launched kernel (--all: also those no run launched) and exits 1 on any launch
a device would refuse (2 on bad input).
"""
import argparse
import collections
import math
import os
import re
import subprocess
import sys

REGISTERS_PER_BLOCK = 65536
WARP_ALLOCATION = 256  # registers a warp is given at a time (sm_70 to sm_90)
DEFAULT_SHARED = 48 * 1024
# The most shared memory one block may have, with the opt-in (CUDA's programming guide, compute
# capabilities table).
MAX_SHARED = {70: 96 * 1024, 75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024,
              90: 227 * 1024, 100: 227 * 1024, 120: 99 * 1024}


def module_of(path):
    """pkc-core.ptx -> -1; pkc-8-q8_0.ptx -> 8 (the emulator's module numbers)."""
    name = os.path.basename(path)
    if name == "pkc-core.ptx":
        return -1, "core"
    m = re.fullmatch(r"pkc-(\d+)-(\w+)\.ptx", name)
    if not m:
        sys.exit(f"launch_resources: {path}: not a module file of compile_cuda --save")
    return int(m.group(1)), m.group(2)


def max_threads(ptx_text):
    """Each entry's .maxntid product (None where it has none)."""
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(", ptx_text):
        body_start = ptx_text.find("{", m.end())
        head = ptx_text[m.end():body_start]
        n = re.search(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", head)
        out[m.group(1)] = math.prod(int(x) for x in n.groups() if x) if n else None
    return out


def ptxas_counts(ptxas, arch, path):
    run = subprocess.run([ptxas, f"-arch=sm_{arch}", "-v", path, "-o", os.devnull], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"launch_resources: ptxas failed on {path}:\n{run.stderr[-2000:]}")
    counts, name = {}, None
    for line in run.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
            counts[name] = {"registers": 0, "spill": 0, "smem": 0}
            continue
        if name is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            counts[name]["spill"] = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            counts[name]["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            counts[name]["smem"] = int(s.group(1)) if s else 0
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ptx", required=True, help="compile_cuda --ptx --save's directory")
    ap.add_argument("--launches", required=True, help="PKC_EMU_LAUNCH_LOG's file")
    ap.add_argument("--ptxas", default="ptxas")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--all", action="store_true", help="also list kernels no run launched")
    a = ap.parse_args()
    if a.arch not in MAX_SHARED:
        sys.exit(f"launch_resources: no shared memory limit known for sm_{a.arch}")

    launched = {}  # (module, kernel) -> [threads, dynamic shared, opt-in, launches], the largest of each
    try:
        for n, line in enumerate(open(a.launches), 1):
            f = line.split()
            if len(f) != 6:
                print(f"launch_resources: {a.launches}:{n}: not MODULE KERNEL THREADS SHARED OPT_IN LAUNCHES", file=sys.stderr)
                return 2
            key, v = (int(f[0]), f[1]), [int(x) for x in f[2:]]
            old = launched.get(key, [0, 0, 0, 0])
            launched[key] = [max(old[0], v[0]), max(old[1], v[1]), max(old[2], v[2]), old[3] + v[3]]
    except OSError as e:
        print(f"launch_resources: {e}", file=sys.stderr)
        return 2

    files = sorted(os.path.join(a.ptx, p) for p in os.listdir(a.ptx) if p.endswith(".ptx"))
    if not files:
        print(f"launch_resources: no .ptx files in {a.ptx}", file=sys.stderr)
        return 2
    bad, seen, unlaunched, spills = [], set(), collections.defaultdict(list), []
    print(f"sm_{a.arch}: module kernel: registers, static shared; largest launch: threads (of .maxntid), dynamic shared; "
          "blocks an SM's registers hold")
    for path in files:
        module, mname = module_of(path)
        bounds = max_threads(open(path).read())
        for kernel, c in sorted(ptxas_counts(a.ptxas, a.arch, path).items()):
            if c["spill"]:
                spills.append(f"{mname} {kernel}: {c['spill']} bytes of spills")
            shape = launched.get((module, kernel))
            if shape is None:
                unlaunched[mname].append(kernel)
                if a.all:
                    print(f"  {mname:6} {kernel:36} {c['registers']:3} regs, {c['smem']:6} B static; not launched")
                continue
            seen.add((module, kernel))
            threads, dynamic, opt_in, count = shape
            warps = (threads + 31) // 32
            per_warp = math.ceil(c["registers"] * 32 / WARP_ALLOCATION) * WARP_ALLOCATION
            block_regs = warps * per_warp
            shared = c["smem"] + dynamic
            limit = min(max(opt_in, DEFAULT_SHARED), MAX_SHARED[a.arch]) if opt_in else DEFAULT_SHARED
            why = []
            if bounds.get(kernel) is not None and threads > bounds[kernel]:
                why.append(f"{threads} threads past its .maxntid {bounds[kernel]}")
            if block_regs > REGISTERS_PER_BLOCK:
                why.append(f"{block_regs} registers a block, past {REGISTERS_PER_BLOCK}")
            if shared > limit:
                why.append(f"{shared} bytes of shared memory ({c['smem']} static), past {limit}")
            if opt_in and c["smem"] + opt_in > MAX_SHARED[a.arch]:
                why.append(f"an opt-in of {opt_in} with {c['smem']} static, past sm_{a.arch}'s {MAX_SHARED[a.arch]}")
            resident = REGISTERS_PER_BLOCK // block_regs if block_regs else 0
            print(f"  {mname:6} {kernel:36} {c['registers']:3} regs, {c['smem']:6} B static; {threads:4} threads"
                  f"{'' if bounds.get(kernel) is None else f' (of {bounds[kernel]})'}, {dynamic:6} B dynamic"
                  f"{f' (opt-in {opt_in})' if opt_in else ''}; {resident} a SM; {count} launches{'  REFUSED: ' + '; '.join(why) if why else ''}")
            if why:
                bad.append(f"{mname} {kernel}: " + "; ".join(why))
    missing = sorted(set(launched) - seen)
    for module, kernel in missing:
        bad.append(f"module {module} {kernel}: launched in the emulated runs, but not in the PTX")
    print(f"{len(seen)} launched kernels checked; {sum(map(len, unlaunched.values()))} compiled kernels no run launched"
          + "".join(f"\n  {m}: {' '.join(ks)}" for m, ks in sorted(unlaunched.items())))
    print(f"spills: {'none' if not spills else '; '.join(spills)}")
    if bad:
        print("launches a device would refuse:\n  " + "\n  ".join(bad))
        return 1
    print("every launch fits the device's limits for a block")
    return 0


if __name__ == "__main__":
    sys.exit(main())
