#!/usr/bin/env python3
"""Quantizer quality: plinth quantize against llama-quantize, both with an importance matrix.

The base is SmolLM2's F32 dequantization (no higher-precision original is on PyPI). Each engine
makes its importance matrix from the same calibration text and chunks (plinth imatrix,
llama-imatrix), then quantizes the base to each type with it (and Plinth also by GPTQ on the
same calibration chunks); this prints the perplexity of every
file, measured by plinth perplexity on two evaluation texts other than the calibration text, and
bits per weight of the transformer blocks' matrices. Plinth's quantizer meets the target when
its PPL is <= llama-quantize's at every type.

    python3 Benchmarks/fidelity/compare_quantizers.py [--llama-bin DIR] [--json]
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_llama_perplexity import arguments, run as run_logged  # noqa: E402

HOME = os.environ.get("PLINTH_HOME", os.path.expanduser("~/.cache/plinth"))
MODEL = f"{HOME}/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
TYPES = ["Q8_0", "Q5_0", "Q4_1", "Q4_0"]


def run(cmd):
    return run_logged(cmd, os.devnull)


def ppl(plinth, model, text):
    out = run([plinth, "perplexity", "-m", model, "-f", text])
    return float(re.search(r"Final estimate: PPL = ([\d.]+)", out).group(1))


def block_bits(model):
    sys.path.insert(0, os.environ.get("GGUF_PY", ""))
    from gguf import GGUFReader
    bits = weights = 0
    for t in GGUFReader(model).tensors:
        if t.name.startswith("blk.") and len(t.shape) >= 2:
            bits += 8 * int(t.n_bytes)
            weights += int(t.n_elements)
    return bits / weights


def main():
    ap = arguments(__doc__)
    ap.add_argument("--calibration", default="/usr/share/perl/5.36/pod/perldiag.pod")
    ap.add_argument("--chunks", type=int, default=40, help="calibration chunks of 512 tokens")
    ap.add_argument("--texts", nargs="+", default=["/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/GFDL-1.3"])
    ap.add_argument("--work", default=f"{HOME}/fidelity")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda name: os.path.join(args.work, name)
    b = args.llama_bin
    f32 = w("SmolLM2-135M-Instruct.Q4_1.F32.gguf")
    if not os.path.exists(f32):
        run([f"{b}/llama-quantize", "--allow-requantize", MODEL, f32, "F32"])
    imatrix = {"plinth": w("smollm2.plinth-imatrix.gguf"), "llama": w("smollm2.llama-imatrix.gguf")}
    if not os.path.exists(imatrix["plinth"]):
        run([args.plinth, "imatrix", "-m", f32, "-f", args.calibration, "--chunks", str(args.chunks), "-o", imatrix["plinth"]])
    if not os.path.exists(imatrix["llama"]):
        run([f"{b}/llama-imatrix", "-m", f32, "-f", args.calibration, "--chunks", str(args.chunks), "-c", "512",
             "-t", str(os.cpu_count()), "-o", imatrix["llama"]])
    rows = [{"file": "F32 (base)", "bits": 32.0, "ppl": [ppl(args.plinth, f32, t) for t in args.texts]}]
    for t in TYPES:
        for engine in ("llama", "plinth", "plinth-gptq"):
            out = w(f"smollm2.{t}.{engine}.gguf")
            if engine == "llama":
                run([f"{b}/llama-quantize", "--imatrix", imatrix["llama"], f32, out, t])
            elif engine == "plinth":
                run([args.plinth, "quantize", "-m", f32, "-o", out, "--type", t, "--imatrix", imatrix["plinth"]])
            else:
                run([args.plinth, "quantize", "-m", f32, "-o", out, "--type", t, "--method", "gptq",
                     "--calibration", args.calibration, "--calibration-chunks", str(args.chunks)])
            rows.append({"file": f"{t} {engine}", "type": t, "engine": engine, "bits": block_bits(out),
                         "ppl": [ppl(args.plinth, out, x) for x in args.texts]})
            os.remove(out)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    names = " | ".join(os.path.basename(t) for t in args.texts)
    print(f"| file | bits/weight (block matrices) | PPL {names} |")
    print("| --- | --- | --- |")
    for r in rows:
        print(f"| {r['file']} | {r['bits']:.3f} | " + " | ".join(f"{p:.4f}" for p in r["ppl"]) + " |")


if __name__ == "__main__":
    main()
