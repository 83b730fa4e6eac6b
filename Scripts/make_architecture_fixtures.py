#!/usr/bin/env python3
"""Tiny random-weight models of the architectures no catalog model covers, with llama.cpp's
logits on them: the referee for an architecture added without a real model on PyPI.

For each family: a GGUF file of F32 weights (two layers, a byte-level BPE vocabulary of 300
tokens) written with gguf-py, then llama.cpp (llama-cpp-python) tokenizes a text and returns
the logits of every position of one prefill. Both go to
Tests/PlinthRuntimeTests/Fixtures/architectures/: <family>-tiny.gguf and <family>.json
{"file", "text", "tokens", "vocabulary", "logits": [[float]]}.

Dev-time only: `pip install llama-cpp-python gguf numpy`.
Usage: python3 Scripts/make_architecture_fixtures.py [qwen3 ...]
"""
import json, os, sys
import numpy as np
import gguf
import llama_cpp

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "PlinthRuntimeTests", "Fixtures", "architectures")
TEXT = "The quick brown fox jumps over the lazy dog, then naps."


def byte_symbols():
    """GPT-2's byte-to-character map: printable bytes stand for themselves, the others are
    shifted past 255."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def vocabulary():
    """256 byte tokens, merges of frequent English pairs, then the specials."""
    sym = byte_symbols()
    tokens = list(sym)
    merges = []
    space = sym[ord(" ")]
    for a, b in [("t", "h"), ("th", "e"), (space, "th"), (space, "the"), ("o", "v"), ("ov", "e"), ("e", "r"), ("i", "n"),
                 (space, "f"), ("o", "x"), (space, "l"), ("a", "z"), (space, "d"), ("o", "g"), ("u", "m"), ("j", "um"),
                 (space, "jum"), ("p", "s"), ("q", "u"), ("qu", "i"), ("c", "k"), (space, "b"), ("r", "o"), ("w", "n")]:
        merges.append(f"{a} {b}")
        tokens.append(a + b)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    while len(tokens) + len(specials) < 300:
        tokens.append(f"<|unused{len(tokens)}|>")
    types = [gguf.TokenType.NORMAL] * len(tokens) + [gguf.TokenType.CONTROL] * len(specials)
    for i, t in enumerate(tokens):
        if t.startswith("<|unused"):
            types[i] = gguf.TokenType.UNUSED
    return tokens + specials, types, merges


def tiny_writer(path, arch, rng, e, heads, kv_heads, hd, ff, layers, base):
    """A writer with the shared hyperparameters and the byte-level vocabulary, and the helpers
    for random matrices and norm vectors."""
    tokens, types, merges = vocabulary()
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(layers)
    w.add_context_length(256)
    w.add_embedding_length(e)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(base)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(len(tokens) - 1)
    w.add_bos_token_id(len(tokens) - 3)
    w.add_add_bos_token(False)

    def mat(rows, cols, gain=1.0):
        # GGUF order: a tensor of numpy shape (rows, cols) has rows of `cols` values.
        return (rng.standard_normal((rows, cols)) * gain / np.sqrt(cols)).astype(np.float32)

    def vec(n, spread, centre):
        return (centre + spread * rng.standard_normal(n)).astype(np.float32)

    return w, len(tokens), mat, vec


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gemma2(path):
    """Gemma 2's block: two layers (the first local, with a window of 6 positions), 4 query heads
    and 2 kv heads of 16, post-norms, GeGLU, the embedding scaled by sqrt(32), attention scores
    capped at 4 and the logits at 12 (low caps, so that both bite), tied embeddings."""
    rng = np.random.default_rng(11)
    e, heads, kv_heads, hd, ff, layers = 32, 4, 2, 16, 64, 2
    w, n_vocab, mat, vec = tiny_writer(path, "gemma2", rng, e, heads, kv_heads, hd, ff, layers, 10000.0)
    w.add_sliding_window(6)
    w.add_float32("gemma2.attn_logit_softcapping", 4.0)
    w.add_float32("gemma2.final_logit_softcapping", 12.0)
    w.add_tensor("token_embd.weight", (rng.standard_normal((n_vocab, e)) * 0.3).astype(np.float32))
    for l in range(layers):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", vec(e, 0.2, 1.0))
        w.add_tensor(p + "attn_q.weight", mat(heads * hd, e, 3.0))
        w.add_tensor(p + "attn_k.weight", mat(kv_heads * hd, e, 3.0))
        w.add_tensor(p + "attn_v.weight", mat(kv_heads * hd, e))
        w.add_tensor(p + "attn_output.weight", mat(e, heads * hd, 1.5))
        w.add_tensor(p + "post_attention_norm.weight", vec(e, 0.2, 0.5))
        w.add_tensor(p + "ffn_norm.weight", vec(e, 0.2, 1.0))
        w.add_tensor(p + "ffn_gate.weight", mat(ff, e, 2.0))
        w.add_tensor(p + "ffn_up.weight", mat(ff, e, 2.0))
        w.add_tensor(p + "ffn_down.weight", mat(e, ff, 1.5))
        w.add_tensor(p + "post_ffw_norm.weight", vec(e, 0.2, 0.5))
    w.add_tensor("output_norm.weight", vec(e, 0.2, 1.0))
    finish(w)


def qwen3(path):
    """Qwen3's block: two layers, 4 query heads and 2 kv heads of 16 (wider than the
    embedding's 32 over 4), QK norms, tied embeddings."""
    rng = np.random.default_rng(7)
    e, heads, kv_heads, hd, ff, layers = 32, 4, 2, 16, 64, 2
    w, n_vocab, mat, vec = tiny_writer(path, "qwen3", rng, e, heads, kv_heads, hd, ff, layers, 1000.0)
    w.add_tensor("token_embd.weight", (rng.standard_normal((n_vocab, e)) * 0.5).astype(np.float32))
    for l in range(layers):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", vec(e, 0.2, 1.0))
        w.add_tensor(p + "attn_q.weight", mat(heads * hd, e, 2.0))
        w.add_tensor(p + "attn_k.weight", mat(kv_heads * hd, e, 2.0))
        w.add_tensor(p + "attn_v.weight", mat(kv_heads * hd, e))
        w.add_tensor(p + "attn_q_norm.weight", vec(hd, 0.5, 1.5))
        w.add_tensor(p + "attn_k_norm.weight", vec(hd, 0.5, 1.5))
        w.add_tensor(p + "attn_output.weight", mat(e, heads * hd, 1.5))
        w.add_tensor(p + "ffn_norm.weight", vec(e, 0.2, 1.0))
        w.add_tensor(p + "ffn_gate.weight", mat(ff, e, 2.0))
        w.add_tensor(p + "ffn_up.weight", mat(ff, e, 2.0))
        w.add_tensor(p + "ffn_down.weight", mat(e, ff, 1.5))
    w.add_tensor("output_norm.weight", vec(e, 0.2, 1.0))
    finish(w)


FAMILIES = {"qwen3": qwen3, "gemma2": gemma2}


def main(names):
    os.makedirs(OUT, exist_ok=True)
    for name in names or FAMILIES:
        path = os.path.join(OUT, f"{name}-tiny.gguf")
        FAMILIES[name](path)
        llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_batch=64, logits_all=True, n_threads=2, verbose=False)
        ids = llm.tokenize(TEXT.encode(), add_bos=False, special=False)
        llm.eval(ids)
        logits = np.array(llm.scores[: len(ids)], dtype=np.float32)
        spread = float(logits.max() - logits.min())
        with open(os.path.join(OUT, f"{name}.json"), "w") as f:
            json.dump({"file": os.path.basename(path), "text": TEXT, "tokens": ids, "vocabulary": llm.n_vocab(),
                       "llama_cpp_python": llama_cpp.__version__,
                       "logits": [[round(float(x), 5) for x in row] for row in logits]}, f)
            f.write("\n")
        print(f"{name}: {len(ids)} tokens, logit spread {spread:.3f}, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
