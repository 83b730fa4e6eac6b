#!/usr/bin/env python3
"""Writes random PEFT LoRA adapters for SmolLM2-135M (llama: 30 layers, hidden 576, kv 192,
ffn 1536) for the hot-swap and merge benchmarks: rank R on all seven matrices of every layer,
A ~ N(0, 1/in), B ~ N(0, 0.02), F16. Numbers only matter for speed, not for what they say.

    python3 make_random_adapters.py OUT_DIR [--count 4] [--rank 16]

Needs numpy only (the safetensors file is written by hand: 8-byte header length, JSON, data).
"""
import argparse, json, os, struct
import numpy as np

SHAPES = {  # module: (in, out)
    "self_attn.q_proj": (576, 576), "self_attn.k_proj": (576, 192), "self_attn.v_proj": (576, 192),
    "self_attn.o_proj": (576, 576), "mlp.gate_proj": (576, 1536), "mlp.up_proj": (576, 1536),
    "mlp.down_proj": (1536, 576),
}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors:
        data = array.astype("<f2").tobytes()
        header[name] = {"dtype": "F16", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--count", type=int, default=4)
    p.add_argument("--rank", type=int, default=16)
    args = p.parse_args()
    for i in range(args.count):
        rng = np.random.default_rng(1000 + i)
        folder = os.path.join(args.out, f"random-r{args.rank}-{i}")
        os.makedirs(folder, exist_ok=True)
        tensors = []
        for layer in range(30):
            for module, (n_in, n_out) in SHAPES.items():
                key = f"base_model.model.model.layers.{layer}.{module}"
                tensors.append((key + ".lora_A.weight", rng.normal(0, n_in ** -0.5, (args.rank, n_in))))
                tensors.append((key + ".lora_B.weight", rng.normal(0, 0.02, (n_out, args.rank))))
        write_safetensors(os.path.join(folder, "adapter_model.safetensors"), tensors)
        config = {"peft_type": "LORA", "r": args.rank, "lora_alpha": 2 * args.rank, "bias": "none",
                  "base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct",
                  "target_modules": sorted({m.split(".")[1] for m in SHAPES})}
        with open(os.path.join(folder, "adapter_config.json"), "w") as f:
            json.dump(config, f, indent=1)
        print(folder)


if __name__ == "__main__":
    main()
