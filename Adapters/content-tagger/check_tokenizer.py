#!/usr/bin/env python3
"""Checks that the token ids train.py trains on are the ids Plinth uses.

For each record (train and held-out; --limit N for a sample), the full training sequence (the
prompt as Plinth renders it for every prompt variant used in training, plus the answer and
<|im_end|>) and the bare text are tokenized by the transformers tokenizer read from the GGUF and by
`plinth tokenize --ids-only` (control tokens parsed, no BOS: as Plinth encodes prompts). With
--plinth-eval OUT.jsonl, also checks that the rendered prompt's token count equals the
`promptTokens` plinth eval reported for each record.

    python check_tokenizer.py [--limit N] [--plinth-eval /tmp/base.jsonl]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import common

PLINTH = common.PLINTH


def plinth_ids(text, tries=5):
    for attempt in range(tries):  # the binary may be mid-rebuild (exit 126/127): wait and retry
        p = subprocess.run(["nice", "-n", "19", PLINTH, "tokenize", "--ids-only", "--", text], capture_output=True, text=True)
        if p.returncode == 0:
            return [int(x) for x in p.stdout.split()]
        time.sleep(10)
    raise RuntimeError(f"plinth tokenize failed ({p.returncode}): {p.stderr[-500:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0, help="records per split (0: all)")
    ap.add_argument("--plinth-eval", help="a plinth eval output of heldout.jsonl with schema.json/instructions.txt")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(common.MODEL_DIR, gguf_file=common.MODEL_FILE)
    variants = common.variants()
    checked = mismatched = 0
    examples = []
    for split in ("train", "heldout"):
        with open(os.path.join(common.HERE, f"{split}.jsonl")) as f:
            recs = [json.loads(l) for l in f]
        if a.limit:
            recs = recs[:a.limit]
        for i, r in enumerate(recs):
            _, _, ins, sch = variants[i % len(variants)]
            full = common.render_prompt(ins, sch, r["text"]) + common.render_answer(sch, r) + "<|im_end|>"
            for text in (full, r["text"]):
                hf = tok(text, add_special_tokens=False).input_ids
                pl = plinth_ids(text)
                checked += 1
                if hf != pl:
                    mismatched += 1
                    if len(examples) < 5:
                        k = next((j for j, (x, y) in enumerate(zip(hf, pl)) if x != y), min(len(hf), len(pl)))
                        examples.append({"id": r["id"], "at": k, "hf": hf[max(0, k - 3):k + 5], "plinth": pl[max(0, k - 3):k + 5],
                                         "hf_pieces": tok.convert_ids_to_tokens(hf[max(0, k - 3):k + 5])})
            if (i + 1) % 200 == 0:
                print(f"  {split}: {i + 1} records, {mismatched} of {checked} sequences differ", file=sys.stderr)
    print(json.dumps({"sequences": checked, "differ": mismatched, "examples": examples}, indent=1))
    if a.plinth_eval:
        instructions, schema = common.load_main()
        with open(os.path.join(common.HERE, "heldout.jsonl")) as f:
            held = [json.loads(l) for l in f]
        with open(a.plinth_eval) as f:
            out = {r["line"]: r for r in map(json.loads, f)}
        bad = [r["id"] for i, r in enumerate(held)
               if len(tok(common.render_prompt(instructions, schema, r["text"]), add_special_tokens=False).input_ids)
               != out[i + 1]["promptTokens"]]
        print(json.dumps({"prompt_token_counts_checked": len(held), "differ_from_plinth_eval": len(bad), "ids": bad[:10]}))


if __name__ == "__main__":
    main()
