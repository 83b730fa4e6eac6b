#!/usr/bin/env python3
"""Rewrites a llama-style GGUF with a different list of layers, for carrying a model to the
device machine under the device tool's 64 MiB limit.

    gguf_layers.py IN OUT --layers 0,1          keep layers 0 and 1 (block_count 2)
    gguf_layers.py IN OUT --repeat 30           layer i of OUT is layer i % n of IN (block_count 30)
    gguf_layers.py IN OUT --layers 0,1 --embedding q4_0
                                                also re-quantize token_embd (Q8_0/F32/F16 -> Q4_0; numpy)
    gguf_layers.py IN OUT --layers 0,1,0,1 --periodic 4096
                                                token_embd and output rows repeat the first 4096 rows:
                                                same types, shapes and bytes read per token, and with
                                                repeated layers the file xz-compresses to a few layers

Metadata (tokenizer, template, hyperparameters) is kept except `<arch>.block_count`. The tensor
bytes are copied unchanged (except a re-quantized embedding), so every layer of OUT is a real
layer of IN: a model made with --repeat has the real model's shapes and cost per token, but
repeats its weights (its text is not the original model's). Pure Python except --embedding.
"""
import argparse
import struct
import sys

# ggml type id -> (elements per block, bytes per block)
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
          10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}
SCALAR = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}


class Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, fmt):
        v = struct.unpack_from('<' + fmt, self.buf, self.pos)
        self.pos += struct.calcsize('<' + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take('Q')
        s = self.buf[self.pos:self.pos + n]
        self.pos += n
        return s.decode('utf-8')

    def skip_value(self, t):
        if t in SCALAR:
            self.pos += struct.calcsize('<' + SCALAR[t])
        elif t == 8:
            n = self.take('Q')
            self.pos += n
        elif t == 9:
            et, n = self.take('I'), self.take('Q')
            if et in SCALAR:
                self.pos += n * struct.calcsize('<' + SCALAR[et])
            else:
                for _ in range(n):
                    self.skip_value(et)
        else:
            raise ValueError(f'unknown GGUF value type {t}')


def pack_string(s):
    b = s.encode('utf-8')
    return struct.pack('<Q', len(b)) + b


def requantize_q4_0(data, type_id, rows, cols):
    import numpy as np
    if type_id == 8:
        blocks = np.frombuffer(data, dtype=np.uint8).reshape(-1, 34)
        d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
        q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
        x = q * d
    elif type_id == 0:
        x = np.frombuffer(data, dtype=np.float32).reshape(-1, 32)
    elif type_id == 1:
        x = np.frombuffer(data, dtype=np.float16).astype(np.float32).reshape(-1, 32)
    else:
        raise ValueError(f'cannot re-quantize type {type_id}')
    # Q4_0: d = signed max / -8, q = clamp(round(x / d + 8), 0, 15); element j in the low nibble
    # of byte j, element j + 16 in the high nibble.
    idx = np.argmax(np.abs(x), axis=1)
    mx = x[np.arange(x.shape[0]), idx]
    d = mx / -8.0
    inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0)
    q = np.clip(np.floor(x * inv[:, None] + 8.5), 0, 15).astype(np.uint8)
    packed = (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)
    out = np.concatenate([d.astype(np.float16).view(np.uint8).reshape(-1, 2), packed], axis=1)
    return out.tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('input')
    ap.add_argument('output')
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument('--layers', help='comma-separated source layers, in order')
    g.add_argument('--repeat', type=int, help='layer count of the output; layers cycle through the input')
    ap.add_argument('--embedding', choices=['q4_0'], help='re-quantize token_embd.weight')
    ap.add_argument('--periodic', type=int, help='rows of token_embd/output repeat the first N rows')
    a = ap.parse_args()

    with open(a.input, 'rb') as f:
        buf = f.read()
    r = Reader(buf)
    if buf[:4] != b'GGUF':
        sys.exit('not a GGUF file')
    r.pos = 4
    version, n_tensors, n_kv = r.take('I'), r.take('Q'), r.take('Q')
    kvs, arch, alignment, old_blocks = [], None, 32, None
    for _ in range(n_kv):
        start = r.pos
        key = r.string()
        t = r.take('I')
        vstart = r.pos
        if key == 'general.architecture':
            arch = r.string()
        elif key == 'general.alignment':
            alignment = r.take(SCALAR[t])
        elif key.endswith('.block_count'):
            old_blocks = r.take(SCALAR[t])
        else:
            r.skip_value(t)
        kvs.append((key, t, buf[start:r.pos], vstart))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take('I')
        dims = [r.take('Q') for _ in range(nd)]
        t, off = r.take('I'), r.take('Q')
        tensors.append([name, dims, t, off])
    data_start = (r.pos + alignment - 1) // alignment * alignment

    def nbytes(dims, t):
        n = 1
        for d in dims:
            n *= d
        be, bb = BLOCKS[t]
        return n // be * bb

    by_layer, others = {}, []
    for name, dims, t, off in tensors:
        blob = buf[data_start + off:data_start + off + nbytes(dims, t)]
        if name.startswith('blk.'):
            i, rest = name[4:].split('.', 1)
            by_layer.setdefault(int(i), []).append((rest, dims, t, blob))
        else:
            others.append((name, dims, t, blob))
    n_in = old_blocks if old_blocks is not None else len(by_layer)
    if a.layers:
        src = [int(s) for s in a.layers.split(',')]
    else:
        src = [i % n_in for i in range(a.repeat)]
    if any(s not in by_layer for s in src):
        sys.exit(f'layers must be in 0..{n_in - 1}')

    out_tensors = []
    for name, dims, t, blob in others:
        if name == 'token_embd.weight' and a.embedding == 'q4_0' and t != 2:
            blob, t = requantize_q4_0(blob, t, dims[1], dims[0]), 2
        if a.periodic and name in ('token_embd.weight', 'output.weight') and len(dims) == 2 and dims[1] > a.periodic:
            head_rows = blob[:nbytes([dims[0], a.periodic], t)]
            blob = (head_rows * (dims[1] // a.periodic + 1))[:len(blob)]
        out_tensors.append((name, dims, t, blob))
    for i, s in enumerate(src):
        for rest, dims, t, blob in by_layer[s]:
            out_tensors.append((f'blk.{i}.{rest}', dims, t, blob))

    head = bytearray(b'GGUF' + struct.pack('<IQQ', version, len(out_tensors), len(kvs)))
    for key, t, raw, vstart in kvs:
        if key == f'{arch}.block_count':
            head += pack_string(key) + struct.pack('<I', t) + struct.pack('<' + SCALAR[t], len(src))
        else:
            head += raw
    offset, infos = 0, bytearray()
    for name, dims, t, blob in out_tensors:
        infos += pack_string(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        infos += struct.pack('<IQ', t, offset)
        offset += (len(blob) + alignment - 1) // alignment * alignment
    head += infos
    head += b'\0' * ((-len(head)) % alignment)
    with open(a.output, 'wb') as f:
        f.write(head)
        for name, dims, t, blob in out_tensors:
            f.write(blob)
            f.write(b'\0' * ((-len(blob)) % alignment))
    print(f'{a.output}: {len(src)} layers (from {n_in}), {len(out_tensors)} tensors, {len(head) + offset} bytes')


if __name__ == '__main__':
    main()
