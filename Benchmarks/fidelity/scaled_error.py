#!/usr/bin/env python3
"""How much weight error a model stands: the perplexity of W + k * (Q(W) - W).

Every transformer-block matrix of the F32 base gets k times the error that a quantized file Q
made in it (k = 0 is the base, k = 1 is Q's error exactly, now run without activation
quantization); everything else stays the base's. The curve says how close to Q's error any
other quantizer must come to reach a given perplexity: issue 18's 2-bit target (PPL <= 25.2 at
<= 2.75 bits per weight) measured against the error of Q4_0 with an importance matrix.

    PYTHONPATH=path/to/llama.cpp/gguf-py python3 Benchmarks/fidelity/scaled_error.py \\
        --base SmolLM2-135M-Instruct.Q4_1.F32.gguf --quantized Q4_0-imatrix.gguf \\
        --text /usr/share/common-licenses/GPL-3 --scales 0 1 1.5 1.7 2 4
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def scaled_copy(base, quantized, k, out):
    """Writes base with every block matrix moved k times its quantization error in `quantized`."""
    shutil.copyfile(base, out)
    q = {t.name: t for t in GGUFReader(quantized).tensors}
    moved = 0
    for t in GGUFReader(out, "r+").tensors:
        if not t.name.startswith("blk.") or len(t.shape) < 2 or t.tensor_type.name != "F32":
            continue
        w = np.asarray(t.data)
        u = q[t.name]
        dq = dequantize(np.asarray(u.data), u.tensor_type).reshape(w.shape)
        w[...] = w + np.float32(k) * (dq - w)
        moved += 1
    return moved


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the F32 base (every tensor F32)")
    ap.add_argument("--quantized", required=True, help="a quantized file of the same model")
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--scales", nargs="+", type=float, default=[0, 1, 1.5, 1.7, 2, 4])
    ap.add_argument("--plinth", default=os.environ.get("PLINTH", ".build/release/plinth"))
    args = ap.parse_args()
    print("| error scale k | PPL |\n| ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for k in args.scales:
            path = os.path.join(tmp, f"scaled-{k}.gguf")
            scaled_copy(args.base, args.quantized, k, path)
            out = subprocess.run([args.plinth, "perplexity", "-m", path, "-f", args.text, "-c", "512"],
                                 capture_output=True, text=True, check=True).stdout
            ppl = re.search(r"Final estimate: PPL = ([\d.]+) \+/- ([\d.]+)", out)
            print(f"| {k:g} | {ppl.group(1)} ± {ppl.group(2)} |", flush=True)
            os.remove(path)


if __name__ == "__main__":
    main()
