#!/usr/bin/env python3
"""Prints the tensor-type mix of GGUF files (gguf-py): per type, tensors and share of the bytes.

Usage: python3 Benchmarks/gguf_types.py FILE.gguf ...
"""
import os
import sys
from collections import Counter

from gguf import GGUFReader


def mix(path):
    reader = GGUFReader(path)
    count, size = Counter(), Counter()
    for t in reader.tensors:
        name = t.tensor_type.name
        count[name] += 1
        size[name] += int(t.n_bytes)
    return count, size


def main(paths):
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        count, size = mix(path)
        total = sum(size.values()) or 1
        parts = ", ".join(f"{k} {count[k]} tensors {100 * size[k] / total:.1f}%"
                          for k, _ in size.most_common())
        print(f"{os.path.basename(path)} ({os.path.getsize(path) / 2**20:.1f} MiB): {parts}")


if __name__ == "__main__":
    main(sys.argv[1:])
