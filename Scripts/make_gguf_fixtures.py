#!/usr/bin/env python3
"""Writes the GGUF reader fixture for Tests/PlinthRuntimeTests/GGUFReaderTests.swift.

The reference is gguf-py (`pip install gguf`), the Python GGUF reader maintained with
llama.cpp. For the default model (SmolLM2-135M-Instruct) it records what gguf-py reads:
the file version, the tensor and metadata counts, the data section offset, and for every
tensor its name, ggml type (name and id), shape (innermost dimension first, as GGUF stores
it), absolute byte offset of its data in the file, its size in bytes and its first 8 data
bytes (hex), plus the metadata keys in file order.

gguf-py lists three pseudo-fields (GGUF.version, GGUF.tensor_count, GGUF.kv_count) among
`reader.fields`; they are not metadata keys in the file and are left out of the key count.

Output: Tests/PlinthRuntimeTests/Fixtures/gguf/smollm2_tensors.json

Usage: python3 Scripts/make_gguf_fixtures.py [--models-dir ~/.cache/plinth/models]
Deterministic: re-running on the same file reproduces the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

from gguf import GGUFReader

MODEL = "SmolLM2-135M-Instruct"
PSEUDO_FIELDS = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main() -> None:
    default_home = os.environ.get("PLINTH_HOME") or str(Path.home() / ".cache/plinth")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", default=str(Path(default_home) / "models"))
    args = ap.parse_args()

    model_dir = Path(args.models_dir).expanduser() / MODEL
    path = sorted(model_dir.glob("*.gguf"))[0]
    reader = GGUFReader(str(path))

    version = int(reader.fields["GGUF.version"].parts[-1][0])
    keys = [k for k in reader.fields if k not in PSEUDO_FIELDS]
    tensors = [
        {
            "name": t.name,
            "type": t.tensor_type.name,
            "type_id": int(t.tensor_type.value),
            "shape": [int(d) for d in t.shape],
            "offset": int(t.data_offset),
            "n_bytes": int(t.n_bytes),
            "first_bytes": bytes(reader.data[t.data_offset : t.data_offset + 8]).hex(),
        }
        for t in reader.tensors
    ]
    out = {
        "reference": "gguf-py GGUFReader",
        "model": MODEL,
        "file": path.name,
        "sha256": sha256(path),
        "file_size": path.stat().st_size,
        "version": version,
        "alignment": int(reader.alignment),
        "data_offset": int(reader.data_offset),
        "kv_count": len(keys),
        "gguf_py_field_count": len(reader.fields),
        "tensor_count": len(tensors),
        "keys": keys,
        "tensors": tensors,
    }
    dest = Path(__file__).resolve().parent.parent / "Tests/PlinthRuntimeTests/Fixtures/gguf/smollm2_tensors.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    # One tensor per line keeps the fixture small and its diffs readable.
    head = {k: v for k, v in out.items() if k != "tensors"}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(' "tensors": [')
    lines += [f"  {json.dumps(t)}," for t in tensors]
    lines[-1] = lines[-1].rstrip(",")
    lines += [" ]", "}"]
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == out
    dest.write_text(text)
    print(f"wrote {dest}: {len(tensors)} tensors, {len(keys)} keys")


if __name__ == "__main__":
    main()
