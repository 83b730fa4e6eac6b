#!/usr/bin/env python3
"""Walks the same token sequences as plinth-grammar-bench through llguidance and times each mask.

Reads the vocabulary (token bytes, EOS, special ids) and walks that plinth-grammar-bench exported,
so both engines see exactly the same bytes and tokens. Prints a JSON summary.

    python3 Benchmarks/grammar/llguidance_bench.py --out /tmp/plinth-grammar-bench --vocab smol
"""
import argparse, json, os, sys, time

import llguidance
import numpy as np


class RawTokenizer:
    """The minimal tokenizer object llguidance.LLTokenizer accepts (token bytes only)."""

    calls = 0

    def __init__(self, tokens, eos, special):
        self.tokens = tokens
        skip = set(special) | ({eos} if isinstance(eos, int) else set(eos))
        self.lookup = {t: i for i, t in enumerate(tokens) if t and i not in skip}
        self.maxlen = max(len(t) for t in self.lookup)
        self.memo = {}
        self.eos_token_id = eos
        self.bos_token_id = None
        self.special_token_ids = special
        self.is_tokenizer_wrapper = True

    def __call__(self, s):
        """Greedy longest-match tokenization (llguidance calls this during some masks; memoized
        so that the Python callback costs as little as possible)."""
        RawTokenizer.calls += 1
        b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
        hit = self.memo.get(b)
        if hit is not None:
            return hit
        self.memo[b] = r = self._greedy(b)
        return r

    def _greedy(self, b):
        out, i = [], 0
        while i < len(b):
            for n in range(min(self.maxlen, len(b) - i), 0, -1):
                t = self.lookup.get(b[i:i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:
                i += 1
        return out


def percentile(xs, p):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round((len(s) - 1) * p)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/plinth-grammar-bench")
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--vocab", default="smol")
    args = ap.parse_args()
    corpus = args.corpus
    if corpus is None:
        here = os.path.dirname(os.path.abspath(__file__))
        c = os.path.normpath(os.path.join(here, "../../../shared/schema-corpus"))
        if os.path.isdir(c):
            corpus = c
    v = json.load(open(os.path.join(args.out, f"vocab-{args.vocab}.json")))
    tokens = [bytes.fromhex(t) for t in v["tokens"]]
    special = v["special"]
    tok = llguidance.LLTokenizer(RawTokenizer(tokens, v["eos"][0], special), eos_token=v["eos"])
    walks = json.load(open(os.path.join(args.out, f"walks-{args.vocab}.json")))
    by_schema = {}
    for w in walks:
        by_schema.setdefault(w["schema"], []).append(w)
    opts = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
    nwords = (tok.vocab_size + 31) // 32
    buf = np.zeros(nwords, dtype=np.int32)
    ptr, nbytes = buf.ctypes.data, buf.nbytes
    compile_ms, compile_cpu_ms, compile_first_mask_ms, mask_us = [], [], [], []
    compiled = 0
    errors = {}
    va = vr = ir = ia = 0
    for name in sorted(by_schema):
        schema = json.load(open(os.path.join(corpus, name)))["schema"]
        t0, c0 = time.perf_counter_ns(), time.process_time_ns()
        grm = llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=opts)
        m0 = llguidance.LLMatcher(tok, grm, log_level=0)
        t1, c1 = time.perf_counter_ns(), time.process_time_ns()
        if m0.is_error():
            err = m0.get_error().split("\n")[0][:80]
            errors[err] = errors.get(err, 0) + 1
            continue
        compile_ms.append((t1 - t0) / 1e6)
        compile_cpu_ms.append((c1 - c0) / 1e6)
        compiled += 1
        first_mask_pending = True
        for w in by_schema[name]:
            m = m0.deep_copy()
            ok = True
            for t in w["tokens"]:
                s = time.perf_counter_ns()
                m.unsafe_compute_mask_ptr(ptr, nbytes)
                e = time.perf_counter_ns()
                if w["valid"]:
                    mask_us.append((e - s) / 1e3)
                if first_mask_pending:
                    compile_first_mask_ms.append((t1 - t0 + e - s) / 1e6)
                    first_mask_pending = False
                if not m.consume_token(t):
                    ok = False
                    break
            if ok:
                s = time.perf_counter_ns()
                m.unsafe_compute_mask_ptr(ptr, nbytes)
                if w["valid"]:
                    mask_us.append((time.perf_counter_ns() - s) / 1e3)
                ok = m.is_accepting()
            if w["valid"]:
                va += ok
                vr += not ok
            else:
                ir += not ok
                ia += ok
    res = {
        "engine": "llguidance " + getattr(llguidance, "__version__", ""), "vocab": args.vocab, "vocab_size": tok.vocab_size,
        "schemas": len(by_schema), "compiled": compiled, "compile_errors": errors,
        "compile_p50_ms": percentile(compile_ms, 0.5), "compile_p99_ms": percentile(compile_ms, 0.99),
        "compile_cpu_p50_ms": percentile(compile_cpu_ms, 0.5), "compile_cpu_p99_ms": percentile(compile_cpu_ms, 0.99),
        "compile_first_mask_p50_ms": percentile(compile_first_mask_ms, 0.5),
        "compile_first_mask_p99_ms": percentile(compile_first_mask_ms, 0.99),
        "mask_mean_us": sum(mask_us) / max(len(mask_us), 1), "mask_p50_us": percentile(mask_us, 0.5),
        "mask_p99_us": percentile(mask_us, 0.99), "mask_max_us": max(mask_us) if mask_us else 0, "masks": len(mask_us),
        "tokenizer_calls": RawTokenizer.calls, "valid_accepted": va, "valid_rejected": vr, "invalid_rejected": ir, "invalid_accepted": ia,
    }
    json.dump(res, open(os.path.join(args.out, f"llguidance-{args.vocab}.json"), "w"), indent=1, sort_keys=True)
    print(json.dumps(res, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
