#!/usr/bin/env python3
"""Reference bytes for the quantizers (QuantizerTests): gguf-py's quantizers, which mirror ggml's
reference (round-to-nearest) ones, on fixed rows: Gaussian values, a zero block, a block with one
outlier, a constant block, and a block of exact half steps (ties).

    PYTHONPATH=path/to/llama.cpp/gguf-py python3 make_reference.py > reference.json
"""
import json
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

rng = np.random.default_rng(7)
rows = [
    rng.normal(0, 0.05, 64),
    np.concatenate([np.zeros(32), rng.normal(0, 1, 32)]),
    np.concatenate([rng.normal(0, 0.02, 31), [3.5], rng.uniform(-1, 1, 32)]),
    np.concatenate([np.full(32, 0.25), np.arange(-16, 16) * 0.125 + 0.0625]),
]
x = np.stack(rows).astype(np.float32)
out = {"rows": 4, "columns": 64, "input": [float(v) for v in x.ravel()], "types": {}}
for name in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16"]:
    out["types"][name] = quantize(x, T[name]).tobytes().hex()
out["types"]["F16"] = x.astype(np.float16).tobytes().hex()
print(json.dumps(out, indent=1))
