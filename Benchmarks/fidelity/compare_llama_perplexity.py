#!/usr/bin/env python3
"""Fidelity side by side: Plinth and llama.cpp against the same F32 reference, on the same text.

For each model file: its F32 dequantization (llama-quantize --allow-requantize FILE OUT F32) is
the reference; llama-perplexity writes the reference's log-probabilities (--kl-divergence-base),
then each engine runs the quantized file against that same base (--kl-divergence) and this prints
mean KLD, same-top %, RMS Δp and PPL of both, plus both engines' PPL of the F32 file (Plinth's
perplexity must be within 0.5 % of llama-perplexity's). Plinth is at least as faithful when its
KLD is <= llama.cpp's and its same-top % >= llama.cpp's.

Files: SmolLM2-135M Q4_1 (the catalog's), its Q8_0, "Q2_K" and IQ4_XS variants (Benchmarks/make_variants.sh),
Qwen2.5-Coder-0.5B and its IQ4_XS variant (MODEL=qwen Benchmarks/make_variants.sh IQ4_XS), and Gemma-3-270M. llama.cpp is a dev-time referee (Benchmarks/build_llama_cpp.sh with
LLAMA_TARGETS="llama-perplexity llama-quantize"), never a runtime or CI dependency.

    python3 Benchmarks/fidelity/compare_llama_perplexity.py [--llama-bin DIR] [--chunks 20] [--json]

Work files (F32 models of up to 2 GB, bases of 350 MB to 1 GB) go to --work
(default $PLINTH_HOME/fidelity) and are reused by later runs.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOME = os.environ.get("PLINTH_HOME", os.path.expanduser("~/.cache/plinth"))

FILES = [
    ("SmolLM2 Q4_1", f"{HOME}/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("SmolLM2 Q8_0", f"{HOME}/bench-models/SmolLM2-135M-Instruct.Q8_0.gguf"),
    ("SmolLM2 \"Q2_K\"", f"{HOME}/bench-models/SmolLM2-135M-Instruct.Q2_K.gguf"),
    ("SmolLM2 IQ4_XS", f"{HOME}/bench-models/SmolLM2-135M-Instruct.IQ4_XS.gguf"),
    ("Qwen2.5-Coder-0.5B", f"{HOME}/models/Qwen2.5-Coder-0.5B-Instruct/Qwen2.5-Coder-0.5B-Instruct.gguf"),
    ("Qwen2.5-Coder-0.5B IQ4_XS", f"{HOME}/bench-models/Qwen2.5-Coder-0.5B-Instruct.IQ4_XS.gguf"),
    ("Gemma-3-270M", f"{HOME}/models/Gemma-3-270M/gemma-3-270m-q4_k_m.gguf"),
]

PATTERNS = {
    "ppl": r"Mean PPL\(Q\)\s*:\s*([\d.]+)",
    "base_ppl": r"Mean PPL\(base\)\s*:\s*([\d.]+)",
    "kld": r"Mean\s+KLD:\s*([\d.]+)",
    "kld_max": r"Maximum KLD:\s*([\d.]+)",
    "kld_99": r"99\.0%\s+KLD:\s*([\d.]+)",
    "rms_dp": r"RMS Δp\s*:\s*([\d.]+)",
    "same_top": r"Same top p:\s*([\d.]+)",
    "final_ppl": r"Final estimate: PPL = ([\d.]+)",
}


def parse(text):
    out = {}
    for key, pattern in PATTERNS.items():
        m = re.search(pattern, text)
        if m:
            out[key] = float(m.group(1))
    return out


def run(cmd, log):
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        f.write(r.stdout)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}")
    return r.stdout


def arguments(description):
    """The options both fidelity scripts take: where llama.cpp's tools and plinth are."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    llama_dir = os.environ.get("LLAMA_CPP_DIR", f"{HOME}/llama.cpp")
    ap.add_argument("--llama-bin", default=f"{llama_dir}/build/bin")
    ap.add_argument("--plinth", default=f"{ROOT}/.build/release/plinth")
    return ap


def main():
    ap = arguments(__doc__)
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--work", default=f"{HOME}/fidelity")
    ap.add_argument("--only", help="run only the files whose label contains this")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    quantize, perplexity = f"{args.llama_bin}/llama-quantize", f"{args.llama_bin}/llama-perplexity"
    for tool in (quantize, perplexity, args.plinth):
        if not os.access(tool, os.X_OK):
            sys.exit(f"missing {tool}")
    common = ["-c", str(args.ctx), "--chunks", str(args.chunks), "-t", str(args.threads)]
    rows = []
    for label, path in FILES:
        if args.only and args.only.lower() not in label.lower():
            continue
        if not os.path.exists(path):
            print(f"skipping {label}: no {path} (Benchmarks/make_variants.sh makes the variants)", file=sys.stderr)
            continue
        stem = os.path.join(args.work, os.path.basename(path).removesuffix(".gguf"))
        f32, base = stem + ".F32.gguf", stem + f".c{args.ctx}.kld"
        if not os.path.exists(f32):
            run([quantize, "--allow-requantize", path, f32 + ".tmp", "F32"], stem + ".quantize.log")
            os.rename(f32 + ".tmp", f32)
        if not os.path.exists(base):
            run([perplexity, "-m", f32, "-f", args.text, *common, "--kl-divergence-base", base + ".tmp"], stem + ".base.log")
            os.rename(base + ".tmp", base)
        base_log = open(stem + ".base.log").read()
        print(f"{label}: comparing", file=sys.stderr)
        plinth_f32 = parse(run([args.plinth, "perplexity", "-m", f32, "-f", args.text, *common], stem + ".plinth-f32.log"))
        llama = parse(run([perplexity, "-m", path, "-t", str(args.threads), "--kl-divergence-base", base, "--kl-divergence"],
                          stem + ".llama-kld.log"))
        plinth = parse(run([args.plinth, "perplexity", "-m", path, "-t", str(args.threads), "--kl-divergence-base", base,
                            "--kl-divergence"], stem + ".plinth-kld.log"))
        row = {"file": label, "llama": llama, "plinth": plinth,
               "f32_ppl": {"llama": parse(base_log).get("final_ppl"), "plinth": plinth_f32.get("final_ppl")}}
        row["as_faithful"] = plinth["kld"] <= llama["kld"] and plinth["same_top"] >= llama["same_top"]
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"text: {args.text}, -c {args.ctx}, --chunks {args.chunks}; base: each file's F32 dequantization, written by llama-perplexity")
    print("| file | mean KLD (llama.cpp / Plinth) | same top % | RMS Δp % | PPL | F32 PPL (llama.cpp / Plinth) | Plinth as faithful |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        l, p, f = r["llama"], r["plinth"], r["f32_ppl"]
        diff = 100 * (f["plinth"] - f["llama"]) / f["llama"]
        print(f"| {r['file']} | {l['kld']:.6f} / {p['kld']:.6f} | {l['same_top']:.3f} / {p['same_top']:.3f} | "
              f"{l['rms_dp']:.3f} / {p['rms_dp']:.3f} | {l['ppl']:.4f} / {p['ppl']:.4f} | "
              f"{f['llama']:.4f} / {f['plinth']:.4f} ({diff:+.3f} %) | {'yes' if r['as_faithful'] else 'no'} |")


if __name__ == "__main__":
    main()
