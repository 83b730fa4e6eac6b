#!/usr/bin/env python3
"""Writes the dequantization fixtures for Tests/PlinthRuntimeTests/DequantizeTests.swift.

The reference is gguf-py (`pip install gguf`), the numpy dequantizers maintained with
llama.cpp; Plinth's C kernels must match it bit for bit.

Synthetic fixtures (Tests/PlinthRuntimeTests/Fixtures/dequant/):
  <TYPE>.<case>.blocks  raw block bytes as a GGUF file stores them
  <TYPE>.<case>.f32     the expected float32 output, little-endian
  manifest.json         one entry per (type, case): file names, element count, reference

  case "random": random bytes with every f16/f32 scale field replaced by a finite,
                 moderate value, so all outputs are finite.
  case "edge":   scale fields set to signed zeros, subnormals, the largest finite value,
                 infinities and NaN, with quant bytes all-zero, all-one and random.
                 Outputs may be infinite or NaN.

Real-tensor fixture (Fixtures/dequant/real_tensors.json): for each model file and each
tensor type in it, one tensor (the first of that type with at most MAX_REAL_ELEMENTS
weights, else the first of that type), with its absolute byte offset in the file, its
element count, the sha256 of its dequantized float32 little-endian bytes, and a few sampled
values (as bit patterns).

Q8_1 and Q8_K have no dequantizer in gguf-py (ggml never stores them in files; they are
dot-product intermediates). Their expected output is computed here with numpy from the
ggml layouts (x = d * q in float32), and the manifest says so.

Usage: python3 Scripts/make_dequant_fixtures.py [--models-dir ~/.cache/plinth/models]
Deterministic: a fixed seed, so re-running reproduces the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "Tests" / "PlinthRuntimeTests" / "Fixtures" / "dequant"
SEED = 20240611
MAX_REAL_ELEMENTS = 8 << 20

# Byte layout per type: (block elements, block bytes, [(offset, kind)] of scale fields),
# kind "f16" or "f32". ggml's layouts (ggml-common.h); Q8_1 is 36 bytes there (gguf-py's
# size table says 40, a leftover from when d and s were f32).
LAYOUTS: dict[str, tuple[int, int, list[tuple[int, str]]]] = {
    "Q4_0": (32, 18, [(0, "f16")]),
    "Q4_1": (32, 20, [(0, "f16"), (2, "f16")]),
    "Q5_0": (32, 22, [(0, "f16")]),
    "Q5_1": (32, 24, [(0, "f16"), (2, "f16")]),
    "Q8_0": (32, 34, [(0, "f16")]),
    "Q8_1": (32, 36, [(0, "f16"), (2, "f16")]),
    "Q2_K": (256, 84, [(80, "f16"), (82, "f16")]),
    "Q3_K": (256, 110, [(108, "f16")]),
    "Q4_K": (256, 144, [(0, "f16"), (2, "f16")]),
    "Q5_K": (256, 176, [(0, "f16"), (2, "f16")]),
    "Q6_K": (256, 210, [(208, "f16")]),
    "Q8_K": (256, 292, [(0, "f32")]),
    "IQ4_NL": (32, 18, [(0, "f16")]),
    "IQ4_XS": (256, 136, [(0, "f16")]),
}

RANDOM_BLOCKS = {32: 48, 256: 12}

F16_SPECIALS = [
    0x0000,  # +0
    0x8000,  # -0
    0x0001,  # smallest subnormal
    0x83FF,  # largest subnormal, negative
    0x0400,  # smallest normal
    0x7BFF,  # largest finite
    0xFBFF,  # most negative finite
    0x7C00,  # +inf
    0xFC00,  # -inf
    0x7E00,  # quiet NaN
]
F32_SPECIALS = [
    0x00000000, 0x80000000, 0x00000001, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
    0x7F800000, 0xFF800000, 0x7FC00000,
]


def sane_f16(rng: np.random.Generator, n: int) -> np.ndarray:
    """Finite f16 scale values of either sign, magnitudes 2^-14 .. 2^1."""
    mag = np.exp2(rng.uniform(-14.0, 1.0, size=n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(np.float16)


def sane_f32(rng: np.random.Generator, n: int) -> np.ndarray:
    mag = np.exp2(rng.uniform(-20.0, 1.0, size=n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(np.float32)


def put_scale(block: np.ndarray, offset: int, kind: str, bits: int) -> None:
    width = 2 if kind == "f16" else 4
    block[offset:offset + width] = np.frombuffer(int(bits).to_bytes(width, "little"), dtype=np.uint8)


def random_scale_bits(rng: np.random.Generator, kind: str) -> int:
    if kind == "f16":
        return int(sane_f16(rng, 1).view(np.uint16)[0])
    return int(sane_f32(rng, 1).view(np.uint32)[0])


def random_blocks(rng: np.random.Generator, name: str, count: int) -> np.ndarray:
    elements, nbytes, fields = LAYOUTS[name]
    blocks = rng.integers(0, 256, size=(count, nbytes), dtype=np.uint8)
    for b in range(count):
        for offset, kind in fields:
            put_scale(blocks[b], offset, kind, random_scale_bits(rng, kind))
    return blocks


def edge_blocks(rng: np.random.Generator, name: str) -> np.ndarray:
    elements, nbytes, fields = LAYOUTS[name]
    out = []
    patterns = [lambda: np.zeros(nbytes, np.uint8), lambda: np.full(nbytes, 0xFF, np.uint8),
                lambda: rng.integers(0, 256, size=nbytes, dtype=np.uint8)]
    i = 0
    for field_index, (offset, kind) in enumerate(fields):
        specials = F16_SPECIALS if kind == "f16" else F32_SPECIALS
        for bits in specials:
            block = patterns[i % len(patterns)]()
            i += 1
            for o, k in fields:  # every other scale field gets a sane value
                put_scale(block, o, k, random_scale_bits(rng, k))
            put_scale(block, offset, kind, bits)
            out.append(block)
    return np.stack(out)


def reference_dequantize(name: str, blocks: np.ndarray) -> tuple[np.ndarray, str]:
    """Expected float32 output and which reference produced it."""
    raw = blocks.reshape(-1)
    with np.errstate(all="ignore"):
        if name == "Q8_1":
            d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
            q = blocks[:, 4:36].copy().view(np.int8).astype(np.float32)
            return (d * q).reshape(-1), "numpy (no gguf-py dequantizer): d * q"
        if name == "Q8_K":
            d = blocks[:, 0:4].copy().view(np.float32)
            q = blocks[:, 4:260].copy().view(np.int8).astype(np.float32)
            return (d * q).reshape(-1), "numpy (no gguf-py dequantizer): d * q"
        out = dequantize(raw, T[name])
    return np.ascontiguousarray(out, dtype=np.float32).reshape(-1), f"gguf-py {gguf_version()}"


def gguf_version() -> str:
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # pragma: no cover
        return "unknown"


def float_inputs(rng: np.random.Generator) -> dict[str, dict[str, np.ndarray]]:
    """Raw inputs for the plain float types: every exponent-0 and exponent-max pattern
    (zeros, subnormals, infinities, NaNs with payloads) plus random finite values."""
    all16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    f16_exp = (all16 >> 10) & 0x1F
    f16_special = all16[(f16_exp == 0) | (f16_exp == 0x1F)]
    f16_random = rng.choice(all16[(f16_exp != 0) & (f16_exp != 0x1F)], size=2048, replace=False)
    bf16_exp = (all16 >> 7) & 0xFF
    bf16_special = all16[(bf16_exp == 0) | (bf16_exp == 0xFF)]
    bf16_random = rng.choice(all16[(bf16_exp != 0) & (bf16_exp != 0xFF)], size=2048, replace=False)
    f32_special = np.array(F32_SPECIALS + [0x7F800001, 0xFFBFFFFF, 0x807FFFFF, 0x3F800000], dtype=np.uint32)
    f32_random = rng.integers(0, 1 << 32, size=1024, dtype=np.uint64).astype(np.uint32)
    return {
        "F16": {"edge": f16_special, "random": np.sort(f16_random)},
        "BF16": {"edge": bf16_special, "random": np.sort(bf16_random)},
        "F32": {"edge": f32_special, "random": f32_random},
    }


def write_pair(stem: str, raw: bytes, expected: np.ndarray) -> dict:
    (OUT / f"{stem}.blocks").write_bytes(raw)
    (OUT / f"{stem}.f32").write_bytes(expected.astype("<f4").tobytes())
    return {"blocks": f"{stem}.blocks", "expected": f"{stem}.f32"}


def make_synthetic(rng: np.random.Generator) -> list[dict]:
    entries = []
    for name, cases in float_inputs(rng).items():
        for case, values in cases.items():
            raw = values.astype(values.dtype.newbyteorder("<")).tobytes()
            expected = np.ascontiguousarray(dequantize(np.frombuffer(raw, dtype=np.uint8), T[name]),
                                            dtype=np.float32).reshape(-1)
            assert expected.size == values.size
            entry = {"type": name, "id": int(T[name]), "case": case, "elements": int(values.size),
                     "reference": f"gguf-py {gguf_version()}"}
            entry.update(write_pair(f"{name}.{case}", raw, expected))
            entries.append(entry)
    for name, (elements, nbytes, _) in LAYOUTS.items():
        for case in ("random", "edge"):
            blocks = random_blocks(rng, name, RANDOM_BLOCKS[elements]) if case == "random" else edge_blocks(rng, name)
            expected, reference = reference_dequantize(name, blocks)
            assert expected.size == blocks.shape[0] * elements
            if case == "random":
                assert np.isfinite(expected).all(), name
            entry = {"type": name, "id": int(T[name]), "case": case, "elements": int(expected.size),
                     "reference": reference}
            entry.update(write_pair(f"{name}.{case}", blocks.tobytes(), expected))
            entries.append(entry)
    return entries


def make_real(models_dir: Path, rng: np.random.Generator) -> list[dict]:
    models = [
        ("SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        ("Qwen2.5-Coder-0.5B-Instruct", "Qwen2.5-Coder-0.5B-Instruct.gguf"),
    ]
    out = []
    for model, file in models:
        path = models_dir / model / file
        if not path.exists():
            sys.exit(f"missing {path}: run `plinth models fetch` first")
        reader = gguf.GGUFReader(str(path))
        chosen: dict[str, object] = {}
        for t in reader.tensors:  # file order
            name = t.tensor_type.name
            if name not in chosen:
                chosen[name] = t
            elif chosen[name].n_elements > MAX_REAL_ELEMENTS and t.n_elements <= MAX_REAL_ELEMENTS:
                chosen[name] = t
        for type_name, t in chosen.items():
            values = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)
            n = int(t.n_elements)
            assert values.size == n
            raw = values.astype("<f4").tobytes()
            picks = sorted({0, 1, n // 3, n // 2, n - 1} | set(int(i) for i in rng.integers(0, n, size=5)))
            bits = values.view(np.uint32)
            out.append({
                "model": model,
                "file": file,
                "tensor": t.name,
                "type": type_name,
                "id": int(t.tensor_type),
                "offset": int(t.data_offset),
                "bytes": int(t.n_bytes),
                "elements": n,
                "shape": [int(x) for x in t.shape],
                "sha256": hashlib.sha256(raw).hexdigest(),
                "samples": [{"index": i, "bits": f"{int(bits[i]):08x}", "value": float(values[i])} for i in picks],
            })
            print(f"  {model}: {type_name:5} {t.name} ({n} weights)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_home = Path(os.environ.get("PLINTH_HOME") or Path.home() / ".cache" / "plinth")
    parser.add_argument("--models-dir", type=Path, default=default_home / "models")
    args = parser.parse_args()

    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        if old.suffix in (".blocks", ".f32", ".json"):
            old.unlink()
    rng = np.random.default_rng(SEED)
    entries = make_synthetic(rng)
    (OUT / "manifest.json").write_text(json.dumps({
        "generator": "Scripts/make_dequant_fixtures.py",
        "reference": f"gguf-py {gguf_version()}, numpy {np.__version__}",
        "seed": SEED,
        # gguf-py's own table of type ids and block layouts, for checking GGMLType against it.
        "types": [{"name": t.name, "id": int(t), "block_elements": gguf.GGML_QUANT_SIZES[t][0],
                   "block_bytes": gguf.GGML_QUANT_SIZES[t][1]} for t in T if t in gguf.GGML_QUANT_SIZES],
        "fixtures": entries,
    }, indent=1) + "\n")
    real = make_real(args.models_dir, rng)
    (OUT / "real_tensors.json").write_text(json.dumps({
        "generator": "Scripts/make_dequant_fixtures.py",
        "reference": f"gguf-py {gguf_version()}, numpy {np.__version__}",
        "tensors": real,
    }, indent=1) + "\n")
    total = sum(f.stat().st_size for f in OUT.iterdir())
    print(f"wrote {len(entries)} synthetic fixtures and {len(real)} real-tensor records "
          f"to {OUT.relative_to(ROOT)} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
