#!/usr/bin/env python3
"""Scores content tagging on the held-out split.

Through Plinth (the figure that counts): runs `plinth eval` with schema.json and instructions.txt
(greedy, schema-constrained), optionally with `--adapter PATH` passed through, then scores it:

    python evaluate.py --out /tmp/base.jsonl
    python evaluate.py --adapter content-tagger.gguf --out /tmp/adapter.jsonl

Through `plinth respond` (interim, while `plinth eval --adapter` is missing): one `plinth respond
--greedy -n 256 --schema schema.json --instructions "$(cat instructions.txt)" [--adapter PATH]`
per record: the same session, prompt, budget (eval's 256) and constrained greedy decoding as
`plinth eval`, one process per record:

    python evaluate.py --respond --adapter content-tagger.gguf --out /tmp/respond-adapter.jsonl

Through transformers (interim, until `plinth eval --adapter` exists): the same prompts, greedy,
unconstrained, the first JSON object of the answer parsed (a record that doesn't parse predicts
nothing):

    python evaluate.py --python [--peft peft/] --out /tmp/py-adapter.jsonl

Metric (common.score): exact-set F1 per field (topics, emotions, actions, entities) and micro-F1
over all four: tags are lowercased, whitespace collapsed, surrounding quotes and . , ; : ! ?
stripped; per record and field the tags form sets; TP/FP/FN summed over records.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import common

PLINTH = common.PLINTH


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def first_json_object(text):
    start = text.find("{")
    while start >= 0:
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            c = text[i]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    try:
                        v = json.loads(text[start:i + 1])
                        return v if isinstance(v, dict) else None
                    except json.JSONDecodeError:
                        break
        start = text.find("{", start + 1)
    return None


def run_plinth(a):
    cmd = [a.plinth, "eval", "--schema", os.path.join(common.HERE, "schema.json"),
           "--instructions-file", os.path.join(common.HERE, "instructions.txt"),
           "--input", a.input, "--output", a.out, "--parallel", str(a.parallel), "--restart"]
    if a.model:
        cmd += ["-m", a.model]
    if a.adapter:
        cmd += ["--adapter", a.adapter]
    print("+ nice -n 19 " + " ".join(cmd), file=sys.stderr)
    subprocess.run(["nice", "-n", "19"] + cmd, check=True)
    out = read_jsonl(a.out)
    preds = {r["line"]: r.get("value") for r in out}
    return [preds.get(i + 1) for i in range(len(read_jsonl(a.input)))], out


def run_respond(a, records):
    with open(os.path.join(common.HERE, "instructions.txt"), encoding="utf-8") as f:
        instructions = f.read()
    base = [a.plinth, "respond", "--greedy", "-n", "256", "--schema", os.path.join(common.HERE, "schema.json"),
            "--instructions", instructions]
    if a.model:
        base += ["-m", a.model]
    if a.adapter:
        base += ["--adapter", a.adapter]
    preds, t0 = [], time.time()
    with open(a.out, "w") as out:
        for i, r in enumerate(records):
            for attempt in range(6):  # the binary may be mid-rebuild ("Text file busy", 126/127): wait, retry
                p = subprocess.run(["nice", "-n", "19"] + base + ["--", r["text"]], capture_output=True, text=True)
                if p.returncode == 0 or not (p.returncode in (126, 127) or "Text file busy" in p.stderr):
                    break
                time.sleep(10)
            try:
                value = json.loads(p.stdout) if p.returncode == 0 else None
            except json.JSONDecodeError:
                value = None
            preds.append(value)
            row = {"line": i + 1, "id": r["id"], "value": value}
            if value is None:
                row["error"] = (p.stderr or p.stdout)[-300:]
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            if (i + 1) % 20 == 0:
                print(f"  {i + 1}/{len(records)} records, {time.time() - t0:.0f} s", file=sys.stderr)
    return preds


def run_python(a, records):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see train.py
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(common.MODEL_DIR, gguf_file=common.MODEL_FILE)
    model = AutoModelForCausalLM.from_pretrained(common.MODEL_DIR, gguf_file=common.MODEL_FILE, dtype=torch.float32)
    if a.peft:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, a.peft)
        model = model.merge_and_unload()
    model.eval()
    instructions, schema = common.load_main()
    end = tok.convert_tokens_to_ids("<|im_end|>")
    preds, rows = [], []
    t0 = time.time()
    for b in range(0, len(records), a.batch):
        chunk = records[b:b + a.batch]
        ids = [tok(common.render_prompt(instructions, schema, r["text"]), add_special_tokens=False).input_ids for r in chunk]
        n = max(map(len, ids))
        input_ids = torch.tensor([[tok.pad_token_id or 2] * (n - len(x)) + x for x in ids])
        mask = torch.tensor([[0] * (n - len(x)) + [1] * len(x) for x in ids])
        with torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=a.max_tokens, do_sample=False,
                                 eos_token_id=[end, 2], pad_token_id=tok.pad_token_id or 2)
        for r, seq in zip(chunk, out[:, n:].tolist()):
            if end in seq:
                seq = seq[:seq.index(end)]
            text = tok.decode(seq, skip_special_tokens=True)
            value = first_json_object(text)
            preds.append(value)
            rows.append({"id": r["id"], "raw": text, "value": value})
        print(f"  {len(preds)}/{len(records)} records, {time.time() - t0:.0f} s", file=sys.stderr)
    with open(a.out, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return preds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=os.path.join(common.HERE, "heldout.jsonl"))
    ap.add_argument("--out", default="/tmp/content-tagger-eval.jsonl")
    ap.add_argument("--adapter", help="passed to plinth eval as --adapter PATH")
    ap.add_argument("--plinth", default=PLINTH)
    ap.add_argument("--model", help="passed to plinth eval as -m (default: its default, SmolLM2-135M-Instruct)")
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--score-only", action="store_true", help="score an existing --out (plinth eval output) without running")
    ap.add_argument("--respond", action="store_true", help="one `plinth respond` per record instead of plinth eval (interim)")
    ap.add_argument("--python", action="store_true", help="generate with transformers instead of plinth (interim)")
    ap.add_argument("--peft", help="with --python: a PEFT adapter folder")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--summary", help="write the scores as JSON here")
    a = ap.parse_args()

    records = read_jsonl(a.input)
    if a.python:
        preds = run_python(a, records)
    elif a.respond:
        preds = run_respond(a, records)
    elif a.score_only:
        preds = {r["line"]: r.get("value") for r in read_jsonl(a.out)}
        preds = [preds.get(i + 1) for i in range(len(records))]
    else:
        preds, _ = run_plinth(a)
    result = common.score(records, preds)
    result["records"] = len(records)
    result["parsed"] = sum(p is not None for p in preds)
    result["source"] = "python" if a.python else "plinth respond" if a.respond else "plinth eval"
    result["adapter"] = a.peft if a.python else a.adapter
    print(json.dumps(result, indent=1))
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
