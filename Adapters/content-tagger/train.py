#!/usr/bin/env python3
"""Trains the content-tagging LoRA adapter for SmolLM2-135M-Instruct on the CPU.

- Base: the Q4_1 GGUF Plinth runs, read by transformers (dequantized to float32); nothing is
  downloaded.
- Data: train.jsonl (make_data.py). Each example is the prompt exactly as `plinth eval` renders
  it (common.render_prompt) followed by the answer exactly as Plinth's constrained decoder writes
  it (common.render_answer: compact JSON in schema order) and <|im_end|>. Prompt and answer are
  tokenized separately, as Plinth encodes the prompt and then appends generated tokens. The loss
  is on the answer tokens (and <|im_end|>) only.
- Prompt variants (common.variants): half the batches use the shipped schema.json +
  instructions.txt, the rest other schemas/instructions (subsets and orders of the fields, no
  instructions), so the adapter follows the schema it is shown.
- Speed: the examples of a batch share their prompt's prefix (system message + schema). The
  prefix's keys and values are computed once per batch without gradient, with the current
  adapter, and the batch continues from them with gradient: the forward pass is exact, only the
  gradient through the shared prefix is dropped. Logits are computed at the answer positions only.
- LoRA: rank 8, alpha 16, no dropout, on q/k/v/o/gate/up/down of all 30 layers; AdamW, linear
  warmup and decay, fixed seed, 2 threads. A wall-clock guard stops early (and still saves) if the
  run would pass --time-limit. OMP_WAIT_POLICY=PASSIVE (see below).
- Output: peft/ (adapter_config.json + adapter_model.safetensors, F16) and content-tagger.gguf
  (F16, by llama.cpp's convert_lora_to_gguf.py with a local base config: no hub access).

    nice -n 19 python train.py              # the full run
    nice -n 19 python train.py --smoke      # 6 steps, to /tmp/content-tagger-smoke
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# OpenMP threads that sleep instead of spinning at barriers: on a shared machine (a compiler
# running beside the niced training) spinning threads made steps 4x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch
from safetensors.torch import load_file, save_file

import common

CONVERTER = os.path.join(common.LLAMA_CPP_SRC, "convert_lora_to_gguf.py")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def build_batches(records, tok, batch_size, seed, epochs):
    """Batches of (prompt ids, answer ids), each with one prompt variant."""
    variants = common.variants()
    weights = [w for _, w, _, _ in variants]
    rng = random.Random(seed)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    batches = []
    for _ in range(epochs):
        order = list(range(len(records)))
        rng.shuffle(order)
        for b in range(0, len(order) - batch_size + 1, batch_size):
            name, _, ins, sch = variants[rng.choices(range(len(variants)), weights)[0]]
            items = []
            for i in order[b:b + batch_size]:
                r = records[i]
                p = tok(common.render_prompt(ins, sch, r["text"]), add_special_tokens=False).input_ids
                a = tok(common.render_answer(sch, r), add_special_tokens=False).input_ids + [end]
                items.append((p, a))
            batches.append((name, items))
    return batches


def common_prefix(seqs):
    n = min(map(len, seqs))
    for k in range(n):
        if any(s[k] != seqs[0][k] for s in seqs):
            return k
    return n


def expand_cache(prefix_cache, batch, num_layers):
    from transformers import DynamicCache
    cache = DynamicCache()
    for layer in range(num_layers):
        k, v = prefix_cache.layers[layer].keys, prefix_cache.layers[layer].values
        cache.update(k.expand(batch, -1, -1, -1).contiguous(), v.expand(batch, -1, -1, -1).contiguous(), layer)
    return cache


def batch_loss(lm, items, pad_id):
    """Mean cross-entropy over the answer tokens of a batch; the shared prefix runs without grad."""
    full = [p + a for p, a in items]
    # Keep at least one prompt token outside the prefix so every sequence has a first input.
    k = min(common_prefix([p for p, _ in items]), min(len(p) for p, _ in items) - 1)
    B = len(items)
    lm.eval()  # no LoRA dropout on the shared prefix
    with torch.no_grad():
        pre = lm.model(input_ids=torch.tensor([full[0][:k]]), use_cache=True)
    lm.train()
    cache = expand_cache(pre.past_key_values, B, lm.config.num_hidden_layers)
    rest = [s[k:] for s in full]
    S = max(map(len, rest))
    ids = torch.full((B, S), pad_id, dtype=torch.long)
    mask = torch.zeros((B, k + S), dtype=torch.long)
    mask[:, :k] = 1
    targets = torch.full((B, S), -100, dtype=torch.long)
    for i, ((p, a), r) in enumerate(zip(items, rest)):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, k:k + len(r)] = 1
        # position j predicts r[j+1]; the answer starts at index len(p)-k of r
        start = len(p) - k
        targets[i, start - 1:len(r) - 1] = torch.tensor(r[start:])
    pos = torch.arange(k, k + S).unsqueeze(0).expand(B, -1)
    h = lm.model(input_ids=ids, attention_mask=mask, past_key_values=cache, position_ids=pos, use_cache=True).last_hidden_state
    sel = targets != -100
    logits = lm.lm_head(h[sel])
    return torch.nn.functional.cross_entropy(logits.float(), targets[sel]), int(sel.sum())


def save_peft(model, out_dir):
    model.save_pretrained(out_dir)
    path = os.path.join(out_dir, "adapter_model.safetensors")
    tensors = {k: v.to(torch.float16).contiguous() for k, v in load_file(path).items()}
    save_file(tensors, path, metadata={"format": "pt"})
    cfg_path = os.path.join(out_dir, "adapter_config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["base_model_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct"
    cfg["target_modules"] = sorted(cfg["target_modules"])  # a set in PEFT: its order varies run to run
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    readme = os.path.join(out_dir, "README.md")
    if os.path.exists(readme):
        os.remove(readme)  # PEFT's model-card template; the folder's README documents the adapter


def convert_gguf(peft_dir, base_config, out_file):
    base_dir = os.path.join(os.path.dirname(out_file) or ".", "base-config")
    os.makedirs(base_dir, exist_ok=True)
    with open(os.path.join(base_dir, "config.json"), "w") as f:
        json.dump(base_config, f, indent=2)
    cmd = [sys.executable, CONVERTER, "--base", base_dir, "--outtype", "f16", "--outfile", out_file, peft_dir]
    log("+", " ".join(cmd))
    subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def base_config(model):
    """The base model's Hugging Face config (for the GGUF converter), as a plain config.json."""
    cfg = model.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "transformers_version", "dtype", "torch_dtype"):
        cfg.pop(key, None)
    cfg["architectures"] = ["LlamaForCausalLM"]
    cfg["_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct"
    cfg["torch_dtype"] = "float32"
    rope = cfg.get("rope_parameters") or {}
    cfg.setdefault("rope_theta", rope.get("rope_theta", 100000.0))
    return cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(common.HERE, "train.jsonl"))
    ap.add_argument("--out", default=common.HERE)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=27 * 60, help="seconds of training before stopping early")
    ap.add_argument("--smoke", action="store_true", help="6 steps, output to /tmp/content-tagger-smoke")
    a = ap.parse_args()
    if a.smoke:
        a.out = "/tmp/content-tagger-smoke"
    os.makedirs(a.out, exist_ok=True)
    t_start = time.time()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(common.MODEL_DIR, gguf_file=common.MODEL_FILE)
    model = AutoModelForCausalLM.from_pretrained(common.MODEL_DIR, gguf_file=common.MODEL_FILE, dtype=torch.float32)
    bcfg = base_config(model)
    model.config.use_cache = True
    model = get_peft_model(model, LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=a.dropout, target_modules=TARGETS,
                                             bias="none", task_type="CAUSAL_LM"))
    model.print_trainable_parameters()
    lm = model.base_model.model  # LlamaForCausalLM with LoRA layers injected

    with open(a.data) as f:
        records = [json.loads(line) for line in f]
    batches = build_batches(records, tok, a.batch, a.seed, a.epochs)
    if a.smoke:
        batches = batches[:6]
    steps = len(batches)
    log(f"{len(records)} records, {steps} steps of {a.batch}, load+tokenize {time.time() - t_start:.0f} s")

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0, betas=(0.9, 0.999))

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        return a.lr * max(0.05, 1 - (step - a.warmup) / max(1, steps - a.warmup))

    model.train()
    history, t_train, ema = [], time.time(), None
    for step, (variant, items) in enumerate(batches):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss, n = batch_loss(lm, items, tok.pad_token_id or 2)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        ema = loss.item() if ema is None else 0.9 * ema + 0.1 * loss.item()
        history.append({"step": step + 1, "variant": variant, "loss": round(loss.item(), 4), "tokens": n})
        elapsed = time.time() - t_train
        if (step + 1) % 10 == 0 or step == 0 or step + 1 == steps:
            log(f"step {step + 1}/{steps}  loss {loss.item():.4f}  ema {ema:.4f}  lr {lr_at(step):.2e}  "
                f"{elapsed:.0f} s ({elapsed / (step + 1):.2f} s/step)")
        if elapsed > a.time_limit and step + 1 < steps:
            log(f"time limit reached after {step + 1} steps; stopping early")
            break

    train_seconds = time.time() - t_train
    model.eval()
    peft_dir = os.path.join(a.out, "peft")
    save_peft(model, peft_dir)
    gguf_file = os.path.join(a.out, "content-tagger.gguf")
    convert_gguf(peft_dir, bcfg, gguf_file)
    total = time.time() - t_start
    summary = {"steps": len(history), "planned_steps": steps, "batch": a.batch, "epochs": a.epochs, "rank": a.rank,
               "alpha": a.alpha, "dropout": a.dropout, "lr": a.lr, "seed": a.seed, "threads": a.threads,
               "train_seconds": round(train_seconds, 1), "total_seconds": round(total, 1),
               "first_loss": history[0]["loss"], "final_loss_ema": round(ema, 4),
               "final_loss_last10": round(sum(h["loss"] for h in history[-10:]) / min(10, len(history)), 4)}
    with open(os.path.join(a.out, "train_log.json"), "w") as f:
        json.dump({"summary": summary, "history": history}, f, indent=1)
    log(json.dumps(summary))


if __name__ == "__main__":
    main()
