#!/usr/bin/env python3
"""Reference bytes for the k-quant quantizers (QuantizerTests): what llama-quantize wrote for rows
of real weights. gguf-py has no k-quant quantizer, so the bytes come from llama-quantize's files:
SmolLM2's F32 dequantization (llama-quantize --allow-requantize SmolLM2-135M-Instruct.Q4_1.gguf
BASE F32) quantized with --pure to Q2_K, Q3_K_S, Q4_K_S, Q5_K_S and Q6_K, once without and once
with --imatrix (llama-imatrix's file for the base); k-quant blocks are independent, so a row's
bytes in the file are the bytes of quantizing that row alone. Two rows of blk.0.ffn_down and two
of blk.15.ffn_down (1536 columns: 6 super-blocks each); for the weighted files, each row's
importance as llama-quantize computes it (in_sum2 / counts, in float).

    llama-imatrix -m BASE -f /usr/share/perl/5.36/pod/perldiag.pod -o IMATRIX --chunks 8 -c 512
    for t in Q2_K Q3_K_S Q4_K_S Q5_K_S Q6_K; do
        llama-quantize --pure BASE plain-$t.gguf $t
        llama-quantize --pure --imatrix IMATRIX BASE weighted-$t.gguf $t
    done
    PYTHONPATH=path/to/llama.cpp/gguf-py python3 make_kquant_reference.py BASE IMATRIX \\
        --plain plain-*.gguf --weighted weighted-*.gguf > kquant_reference.json
"""
import argparse
import json

import numpy as np
from gguf import GGUFReader

parser = argparse.ArgumentParser()
parser.add_argument("base")
parser.add_argument("imatrix")
parser.add_argument("--plain", nargs="+", required=True)
parser.add_argument("--weighted", nargs="+", required=True)
args = parser.parse_args()

picks = [("blk.0.ffn_down.weight", 0), ("blk.0.ffn_down.weight", 1), ("blk.15.ffn_down.weight", 7),
         ("blk.15.ffn_down.weight", 300)]


def tensor(reader, name):
    return next(t for t in reader.tensors if t.name == name)


def row_bytes(path):
    r = GGUFReader(path)
    return tensor(r, picks[0][0]).tensor_type.name, b"".join(np.asarray(tensor(r, name).data)[row].tobytes() for name, row in picks)


def by_type(paths):
    return dict(row_bytes(p) for p in paths)


b = GGUFReader(args.base)
rows = [np.asarray(tensor(b, name).data, dtype=np.float32)[row] for name, row in picks]
out = {"rows": len(rows), "columns": int(rows[0].size), "input": [float(v) for r in rows for v in r]}
out["types"] = {k: v.hex() for k, v in by_type(args.plain).items()}
im = GGUFReader(args.imatrix)
importance = []
for name, _ in picks:
    sums = np.asarray(tensor(im, name + ".in_sum2").data, dtype=np.float32)
    count = np.float32(np.asarray(tensor(im, name + ".counts").data, dtype=np.float32)[0])
    importance += [float(v) for v in sums / count]
out["weighted"] = {"importance": importance, "types": {k: v.hex() for k, v in by_type(args.weighted).items()}}
print(json.dumps(out, indent=1))
