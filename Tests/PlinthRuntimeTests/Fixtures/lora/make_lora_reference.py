#!/usr/bin/env python3
"""Regenerate the LoRA reference fixtures in this folder (dev-time only; never run in CI).

What it writes, next to this script:
  peft-r2/adapter_config.json, peft-r2/adapter_model.safetensors
      A deterministic random PEFT LoRA adapter for SmolLM2-135M-Instruct: r=2, lora_alpha=4
      (scale alpha/r = 2), targets q,k,v,o,gate,up,down_proj in all 30 layers, stored as F16.
      Unlike PEFT's init, lora_B is not zero: A ~ N(0,1)/sqrt(in), B ~ N(0,1)*sigma_B with sigma_B
      chosen so that std(scale*B@A) ~= EPS * std(W) for each base matrix W (EPS = 0.05).
  lora-r2.f16.gguf
      The same adapter converted by llama.cpp's own convert_lora_to_gguf.py --outtype f16.
  base_logits_K.bin, lora_logits_K.bin  (K = 0, 1, 2)
      Last-position full-vocabulary logits (little-endian float32, raw) of the float32 base model
      (transformers' dequantization of the Q4_1 GGUF) and of base + PEFT adapter (unmerged).
  llama_base_logits_K.bin, llama_lora_logits_K.bin  (unless --skip-llama)
      The same from llama.cpp (CPU, the Q4_1 GGUF itself, lora-r2.f16.gguf applied at scale 1).
  reference.json
      Model sha256, adapter description, prompts (text, ids, per-position argmax), summary stats,
      the dequantization cross-check and facts about the GGUF LoRA layout.

Needs:
  - a venv with torch (CPU), transformers, peft, safetensors, numpy, sentencepiece and llama.cpp's
    gguf-py, e.g.
        python3 -m venv .venv-lora
        .venv-lora/bin/pip install "$TORCH_WHEEL"          # a CPU build of torch
        .venv-lora/bin/pip install transformers peft safetensors numpy sentencepiece
        .venv-lora/bin/pip install "$LLAMA_CPP_SRC/gguf-py"
  - the base model SmolLM2-135M-Instruct.Q4_1.gguf (default: Plinth's cache);
  - llama.cpp sources (for convert_lora_to_gguf.py and llama.h) and, for the llama.cpp referee,
    a CPU build of them with static libs (build/src/libllama.a, build/ggml/src/libggml*.a) and g++;
  - optionally a built `plinth` CLI for the token ids (otherwise transformers' tokenizer is used).
No network access is needed (the Hugging Face hub is forced offline).

Run (from the repository root, on a shared machine under nice):
    nice -n 19 .venv-lora/bin/python Tests/PlinthRuntimeTests/Fixtures/lora/make_lora_reference.py \
        [--model PATH.gguf] [--plinth .build/release/plinth] \
        [--llama-src $LLAMA_CPP_SRC] [--llama-build $LLAMA_CPP_SRC/build] [--skip-llama]
(--llama-src and --llama-build default to $LLAMA_CPP_SRC and $LLAMA_CPP_BUILD.)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]

SEED = 20240601
RANK = 2
ALPHA = 4
EPS = 0.05  # relative size of the adapter's delta per matrix: std(scale*B@A) ~= EPS*std(W)
TARGETS = [("self_attn", "q_proj"), ("self_attn", "k_proj"), ("self_attn", "v_proj"),
           ("self_attn", "o_proj"), ("mlp", "gate_proj"), ("mlp", "up_proj"), ("mlp", "down_proj")]
HF_BASE_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"

PROMPTS = [
    {"kind": "text",
     "text": "The quick brown fox jumps over the lazy dog. For decades, typists have used this sentence "
             "to test keyboards, because it contains every letter of the English alphabet at least once."},
    {"kind": "chat",
     "messages": [{"role": "user", "content": "Give me three tips for staying focused while studying."}]},
    {"kind": "text",
     "text": "Once upon a time, in a small village by the sea, there lived an old fisherman who told stories "
             "to the children every evening. One night, he began"},
]

DUMP_CPP = r"""
// Dumps llama.cpp's logits for every position of one prompt: dump MODEL IDS_FILE OUT_FILE [LORA]
#include "llama.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
static void quiet(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}
int main(int argc, char ** argv) {
    if (argc < 4) { fprintf(stderr, "usage: dump MODEL IDS OUT [LORA]\n"); return 2; }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "model load failed\n"); return 1; }
    std::vector<llama_token> ids;
    FILE * f = fopen(argv[2], "r"); int t;
    while (fscanf(f, "%d", &t) == 1) ids.push_back(t);
    fclose(f);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512; cp.n_batch = 512; cp.n_ubatch = 512; cp.n_threads = 2; cp.n_threads_batch = 2;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (argc > 4) {
        llama_adapter_lora * ad = llama_adapter_lora_init(model, argv[4]);
        if (!ad) { fprintf(stderr, "lora load failed\n"); return 1; }
        float scale = 1.0f;
        if (llama_set_adapters_lora(ctx, &ad, 1, &scale) != 0) { fprintf(stderr, "set lora failed\n"); return 1; }
    }
    const int n = (int) ids.size();
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        batch.token[i] = ids[i]; batch.pos[i] = i; batch.n_seq_id[i] = 1; batch.seq_id[i][0] = 0; batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    FILE * o = fopen(argv[3], "wb");
    for (int i = 0; i < n; i++) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), n_vocab, o);
    fclose(o);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
"""


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf's LlamaModel.permute (HF row order -> GGUF row order), n_head already n_kv for k."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama_unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name_to_gguf(hf: str) -> str:
    """model.layers.L.{self_attn,mlp}.X.weight -> blk.L.<gguf>.weight (only the names used here)."""
    m = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
         "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down",
         "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    parts = hf.split(".")
    return f"blk.{parts[2]}.{m[parts[-2]]}.weight"


def tokenize(plinth: Path | None, model_path: Path, text: str, tok) -> tuple[list[int], str]:
    if plinth is not None and plinth.exists():
        out = subprocess.run([str(plinth), "tokenize", "--no-fetch", "-m", str(model_path), "--ids-only", text],
                             check=True, capture_output=True, text=True).stdout
        return [int(x) for x in out.split()], "plinth tokenize"
    return tok(text, add_special_tokens=False)["input_ids"], "transformers tokenizer"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=Path.home() / ".cache/plinth/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--plinth", type=Path, default=REPO / ".build/release/plinth")
    ap.add_argument("--llama-src", type=Path, default=Path(os.environ.get("LLAMA_CPP_SRC", "../llama.cpp")))
    ap.add_argument("--llama-build", type=Path, default=Path(os.environ.get("LLAMA_CPP_BUILD", "../llama.cpp/build")))
    ap.add_argument("--skip-llama", action="store_true", help="skip the llama.cpp referee logits")
    args = ap.parse_args()

    import gguf
    import peft
    import safetensors
    import transformers
    from peft import LoraConfig, PeftModel
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(SEED)
    torch.set_grad_enabled(False)
    work = Path(tempfile.mkdtemp(prefix="plinth-lora-"))
    try:
        model_path = args.model.resolve()
        (work / "hf").mkdir()
        os.symlink(model_path, work / "hf" / model_path.name)
        print("loading base model through transformers' GGUF loader ...", flush=True)
        model = AutoModelForCausalLM.from_pretrained(work / "hf", gguf_file=model_path.name, dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(work / "hf", gguf_file=model_path.name)
        cfg = model.config
        n_head, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads

        # 1. transformers' dequantization vs gguf-py's (after undoing the q/k permutation)
        print("checking dequantization ...", flush=True)
        reader = gguf.GGUFReader(model_path)
        gt = {t.name: t for t in reader.tensors}
        sd = model.state_dict()
        deq = {"tensors_compared": 0, "bit_identical": 0, "max_abs_diff": 0.0, "types": {}, "examples": {}}
        for hf_name, w in sd.items():
            if hf_name == "lm_head.weight":
                continue  # tied to model.embed_tokens.weight (no output.weight in the GGUF)
            gname = hf_name_to_gguf(hf_name)
            t = gt[gname]
            ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(w.shape)
            if gname.endswith("attn_q.weight"):
                ref = llama_unpermute(ref, n_head)
            elif gname.endswith("attn_k.weight"):
                ref = llama_unpermute(ref, n_kv)
            d = float(np.abs(w.numpy() - ref).max())
            deq["tensors_compared"] += 1
            deq["bit_identical"] += int(np.array_equal(w.numpy(), ref))
            deq["max_abs_diff"] = max(deq["max_abs_diff"], d)
            deq["types"][t.tensor_type.name] = deq["types"].get(t.tensor_type.name, 0) + 1
            if gname in ("token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.29.ffn_down.weight"):
                ex = {"gguf_type": t.tensor_type.name, "max_abs_diff": d}
                if gname.endswith(("attn_q.weight", "attn_k.weight")):
                    raw = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(w.shape)
                    ex["max_abs_diff_without_unpermute"] = float(np.abs(w.numpy() - raw).max())
                deq["examples"][gname] = ex
        deq["tied_lm_head"] = bool(model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr())
        print(json.dumps(deq), flush=True)

        # 2. the adapter: random A and B, rounded to f16, written in PEFT's layout
        print("writing the PEFT adapter ...", flush=True)
        peft_dir = HERE / "peft-r2"
        if peft_dir.exists():
            shutil.rmtree(peft_dir)
        peft_dir.mkdir()
        scale = ALPHA / RANK
        gen = torch.Generator().manual_seed(SEED)
        tensors: dict[str, torch.Tensor] = {}
        for li, layer in enumerate(model.model.layers):
            for sub, proj in TARGETS:
                w = getattr(getattr(layer, sub), proj).weight
                n_out, n_in = w.shape
                w_std = float(f"{w.std().item():.3g}")
                sigma_b = EPS * w_std * math.sqrt(n_in / RANK) / scale
                a = torch.randn(RANK, n_in, generator=gen) / math.sqrt(n_in)
                b = torch.randn(n_out, RANK, generator=gen) * sigma_b
                key = f"base_model.model.model.layers.{li}.{sub}.{proj}"
                tensors[f"{key}.lora_A.weight"] = a.to(torch.float16).contiguous()
                tensors[f"{key}.lora_B.weight"] = b.to(torch.float16).contiguous()
        save_file(tensors, peft_dir / "adapter_model.safetensors", metadata={"format": "pt"})
        os.chmod(peft_dir / "adapter_model.safetensors", 0o644)
        lcfg = LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                          target_modules=[p for _, p in TARGETS], base_model_name_or_path=HF_BASE_ID,
                          inference_mode=True)
        lcfg.save_pretrained(peft_dir)
        # make adapter_config.json deterministic and tidy (sorted keys, sorted target list)
        cj = json.loads((peft_dir / "adapter_config.json").read_text())
        cj["target_modules"] = sorted(cj["target_modules"]) if isinstance(cj["target_modules"], list) else cj["target_modules"]
        (peft_dir / "adapter_config.json").write_text(json.dumps(cj, indent=2, sort_keys=True) + "\n")

        # 3. prompts -> ids
        plinth = args.plinth if args.plinth.exists() else None
        prompts = []
        for p in PROMPTS:
            if p["kind"] == "chat":
                text = tok.apply_chat_template(p["messages"], tokenize=False, add_generation_prompt=True)
            else:
                text = p["text"]
            ids, source = tokenize(plinth, model_path, text, tok)
            hf_ids = tok(text, add_special_tokens=False)["input_ids"]
            hf_ids_default = tok(text)["input_ids"]
            prompts.append({"kind": p["kind"], **({"messages": p["messages"]} if "messages" in p else {}),
                            "text": text, "ids": ids, "ids_source": source,
                            "transformers_ids_match": hf_ids == ids,
                            "transformers_ids_match_with_default_special_tokens": hf_ids_default == ids})

        # 4. float reference: base, then base + PEFT adapter reloaded from disk (unmerged), then merged
        print("running the float reference ...", flush=True)
        base_logits = [model(torch.tensor([p["ids"]])).logits[0].float() for p in prompts]
        pm = PeftModel.from_pretrained(model, peft_dir).eval()
        loaded = {k: v for k, v in pm.state_dict().items() if "lora_" in k}
        assert len(loaded) == len(tensors), (len(loaded), len(tensors))
        for k, v in tensors.items():
            lk = k.replace(".lora_A.weight", ".lora_A.default.weight").replace(".lora_B.weight", ".lora_B.default.weight")
            assert torch.equal(loaded[lk], v.float()), k
        lora_logits = [pm(torch.tensor([p["ids"]])).logits[0].float() for p in prompts]
        merged = pm.merge_and_unload()
        merged_logits = [merged(torch.tensor([p["ids"]])).logits[0].float() for p in prompts]

        # 5. GGUF LoRA with llama.cpp's converter
        print("converting to GGUF LoRA ...", flush=True)
        base_dir = work / "base-config"
        base_dir.mkdir()
        c = cfg.to_dict()
        c.pop("quantization_config", None)
        c["architectures"] = ["LlamaForCausalLM"]
        c["_name_or_path"] = HF_BASE_ID
        (base_dir / "config.json").write_text(json.dumps(c, indent=2, sort_keys=True))
        gguf_out = HERE / "lora-r2.f16.gguf"
        subprocess.run([sys.executable, str(args.llama_src / "convert_lora_to_gguf.py"), "--base", str(base_dir),
                        "--outtype", "f16", "--outfile", str(gguf_out), str(peft_dir)], check=True)
        lr = gguf.GGUFReader(gguf_out)
        kv = {k: lr.fields[k].contents() for k in lr.fields if not k.startswith("GGUF.")}
        assert kv["general.type"] == "adapter" and kv["adapter.type"] == "lora" and kv["adapter.lora.alpha"] == ALPHA, kv
        lt = {t.name: t for t in lr.tensors}
        assert len(lt) == 2 * len(TARGETS) * cfg.num_hidden_layers
        layout = {}
        for gname in ("blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
                      "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"):
            for ab in ("lora_a", "lora_b"):
                t = lt[f"{gname}.{ab}"]
                layout[f"{gname}.{ab}"] = {"type": t.tensor_type.name, "ne": [int(x) for x in t.shape]}
        # q/k permutation: lora_a is PEFT's A unchanged; lora_b is PEFT's B with LlamaModel.permute applied to its rows
        perm = {"lora_a_equals_peft_A": True, "lora_b_equals_permuted_peft_B_for_q_k": True,
                "lora_b_equals_peft_B_for_others": True, "lora_b_equals_unpermuted_peft_B_for_q_k": True}
        gmap = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
                "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
        for li in range(cfg.num_hidden_layers):
            for sub, proj in TARGETS:
                key = f"base_model.model.model.layers.{li}.{sub}.{proj}"
                a = tensors[f"{key}.lora_A.weight"].numpy()
                b = tensors[f"{key}.lora_B.weight"].numpy()
                ga = np.asarray(lt[f"blk.{li}.{gmap[proj]}.weight.lora_a"].data).reshape(a.shape)
                gb = np.asarray(lt[f"blk.{li}.{gmap[proj]}.weight.lora_b"].data).reshape(b.shape)
                perm["lora_a_equals_peft_A"] &= bool(np.array_equal(ga, a))
                if proj in ("q_proj", "k_proj"):
                    nh = n_head if proj == "q_proj" else n_kv
                    perm["lora_b_equals_permuted_peft_B_for_q_k"] &= bool(np.array_equal(gb, llama_permute(b, nh)))
                    perm["lora_b_equals_unpermuted_peft_B_for_q_k"] &= bool(np.array_equal(gb, b))
                else:
                    perm["lora_b_equals_peft_B_for_others"] &= bool(np.array_equal(gb, b))
        print(json.dumps(perm), flush=True)

        # 6. llama.cpp referee (optional)
        llama = None
        if not args.skip_llama:
            print("running llama.cpp ...", flush=True)
            (work / "dump.cpp").write_text(DUMP_CPP)
            bld = args.llama_build
            subprocess.run(["g++", "-O2", "-std=c++17", str(work / "dump.cpp"), "-o", str(work / "dump"),
                            "-I", str(args.llama_src / "include"), "-I", str(args.llama_src / "ggml/include"),
                            str(bld / "src/libllama.a"), str(bld / "ggml/src/libggml.a"),
                            str(bld / "ggml/src/libggml-cpu.a"), str(bld / "ggml/src/libggml-base.a"),
                            "-fopenmp", "-lpthread", "-ldl", "-lm"], check=True)
            llama = {"base": [], "lora": []}
            n_vocab = cfg.vocab_size
            for k, p in enumerate(prompts):
                (work / "ids.txt").write_text(" ".join(map(str, p["ids"])))
                for which, extra in (("base", []), ("lora", [str(gguf_out)])):
                    out = work / f"llama_{which}_{k}.f32"
                    subprocess.run([str(work / "dump"), str(model_path), str(work / "ids.txt"), str(out), *extra], check=True)
                    llama[which].append(torch.from_numpy(np.fromfile(out, dtype="<f4").reshape(len(p["ids"]), n_vocab).copy()))

        # 7. write logits and reference.json
        for f in HERE.glob("*logits_*.bin"):
            f.unlink()
        for k in range(len(prompts)):
            base_logits[k][-1].numpy().astype("<f4").tofile(HERE / f"base_logits_{k}.bin")
            lora_logits[k][-1].numpy().astype("<f4").tofile(HERE / f"lora_logits_{k}.bin")
            if llama is not None:
                llama["base"][k][-1].numpy().astype("<f4").tofile(HERE / f"llama_base_logits_{k}.bin")
                llama["lora"][k][-1].numpy().astype("<f4").tofile(HERE / f"llama_lora_logits_{k}.bin")

        n_pos = n_changed = 0
        max_last = 0.0
        max_merge = 0.0
        for k, p in enumerate(prompts):
            bl, ll = base_logits[k], lora_logits[k]
            p["base_argmax"] = bl.argmax(-1).tolist()
            p["lora_argmax"] = ll.argmax(-1).tolist()
            p["base_last_logits_range"] = float(bl[-1].max() - bl[-1].min())
            p["lora_last_logits_range"] = float(ll[-1].max() - ll[-1].min())
            p["argmax_changed_positions"] = int((bl.argmax(-1) != ll.argmax(-1)).sum())
            p["last_max_abs_base_minus_lora"] = float((bl[-1] - ll[-1]).abs().max())
            p["last_rms_base_minus_lora"] = float((bl[-1] - ll[-1]).pow(2).mean().sqrt())
            n_pos += len(p["ids"])
            n_changed += p["argmax_changed_positions"]
            max_last = max(max_last, p["last_max_abs_base_minus_lora"])
            max_merge = max(max_merge, float((merged_logits[k] - ll).abs().max()))
            if llama is not None:
                p["llama_base_argmax"] = llama["base"][k].argmax(-1).tolist()
                p["llama_lora_argmax"] = llama["lora"][k].argmax(-1).tolist()
                p["llama_last_max_abs_vs_float_base"] = float((llama["base"][k][-1] - bl[-1]).abs().max())
                p["llama_last_max_abs_vs_float_lora"] = float((llama["lora"][k][-1] - ll[-1]).abs().max())
                p["llama_all_positions_max_abs_vs_float_base"] = float((llama["base"][k] - bl).abs().max())
                p["llama_all_positions_max_abs_vs_float_lora"] = float((llama["lora"][k] - ll).abs().max())
                # does llama.cpp apply the same adapter? compare its lora-minus-base to the float one
                p["llama_last_delta_max_abs_vs_float_delta"] = float(((llama["lora"][k][-1] - llama["base"][k][-1]) - (ll[-1] - bl[-1])).abs().max())

        summary = {
            "positions": n_pos,
            "argmax_changed_positions": n_changed,
            "fraction_argmax_changed": n_changed / n_pos,
            "max_abs_base_minus_lora_last_logits": max_last,
            "max_abs_merged_minus_unmerged_all_positions": max_merge,
        }
        if llama is not None:
            summary["llama_max_abs_vs_float_base_last_logits"] = max(p["llama_last_max_abs_vs_float_base"] for p in prompts)
            summary["llama_max_abs_vs_float_lora_last_logits"] = max(p["llama_last_max_abs_vs_float_lora"] for p in prompts)
            summary["llama_last_delta_max_abs_vs_float_delta"] = max(p["llama_last_delta_max_abs_vs_float_delta"] for p in prompts)
            summary["llama_argmax_agree_base"] = sum(sum(a == b for a, b in zip(p["llama_base_argmax"], p["base_argmax"])) for p in prompts) / n_pos
            summary["llama_argmax_agree_lora"] = sum(sum(a == b for a, b in zip(p["llama_lora_argmax"], p["lora_argmax"])) for p in prompts) / n_pos

        ref = {
            "generator": "make_lora_reference.py",
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
                         "safetensors": safetensors.__version__, "numpy": np.__version__, "gguf": getattr(gguf, "__version__", "llama.cpp gguf-py"),
                         "llama_cpp_src": str(args.llama_src.name)},
            "model": {"file": model_path.name, "sha256": sha256(model_path), "n_vocab": cfg.vocab_size},
            "adapter": {"peft_dir": "peft-r2", "gguf": gguf_out.name, "gguf_sha256": sha256(gguf_out),
                        "safetensors_sha256": sha256(peft_dir / "adapter_model.safetensors"),
                        "rank": RANK, "alpha": ALPHA, "scale": scale, "targets": [p for _, p in TARGETS],
                        "layers": cfg.num_hidden_layers, "dtype": "F16", "seed": SEED, "eps": EPS,
                        "init": "A ~ N(0,1)/sqrt(in); B ~ N(0,1)*EPS*std3g(W)*sqrt(in/r)/scale; both rounded to f16"},
            "logits_files": "little-endian float32, n_vocab values, last position only",
            "float_reference": "transformers float32 (GGUF dequantized by transformers), PEFT unmerged, no dropout",
            "llama_reference": None if llama is None else "llama.cpp CPU on the Q4_1 GGUF (f16 KV cache), lora-r2.f16.gguf at scale 1, one batch of all positions",
            "dequant_check": deq,
            "gguf_lora": {"kv": kv, "tensor_count": len(lt), "layer0": layout, "permutation": perm},
            "prompts": prompts,
            "summary": summary,
        }
        (HERE / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")
        print(json.dumps(summary, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
