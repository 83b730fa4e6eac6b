#!/usr/bin/env python3
"""`plinth serve` against llama-server: the same GGUF file, the same HTTP clients, one run each.

Two workloads, each sent by N concurrent clients (default 16) over loopback:

  chat   short chat requests, greedy, max_tokens 64, streamed: total generated tokens per second
         (usage of each request / wall time) and the median time to first content token.
  clause the eval issue's policy clauses (Benchmarks/eval/policy_clauses.jsonl) with its
         instructions and `response_format` json_schema, greedy: requests per second, and every
         output checked against the schema (jsonschema).

llama-server runs with -np N -t THREADS (default 2) and N × 1024 tokens of context, Plinth with
--parallel N; the two servers run one after the other, never at once. llama-server is a dev-time
reference (Benchmarks/build_llama_cpp.sh with LLAMA_TARGETS=llama-server); pass its path with
--llama-server or LLAMA_SERVER.

    python3 Benchmarks/serve/compare_llama_server.py --llama-server /path/to/llama-server [-m qwen]
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "Benchmarks"))
from compare_llama_server import free_port, post, wait_ready  # noqa: E402

CHAT_PROMPTS = [
    "Write a short story about a lighthouse keeper.", "Explain how a bicycle works.", "Describe a walk in a forest.",
    "Write a letter to a friend about a trip to the sea.", "Explain why the sky is blue.", "Describe your favourite meal.",
    "Write a poem about autumn rain.", "Explain how bread is made.", "Describe a busy train station.",
    "Write a short story about a lost cat.", "Explain what a computer does.", "Describe a winter morning in a village.",
    "Write a story about a robot learning to paint.", "Explain how plants grow.", "Describe a market on a Sunday.",
    "Write a diary entry of a sailor.",
]


def stream_chat(url, body, timeout=600):
    """Streams a chat request; returns (seconds to first content, completion tokens, text)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    start = time.time()
    first, tokens, pieces, chunks = None, None, [], 0
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
            for c in event.get("choices", []):
                piece = (c.get("delta") or {}).get("content") or ""
                if piece:
                    chunks += 1
                    if first is None:
                        first = time.time() - start
                    pieces.append(piece)
    return first, tokens if tokens is not None else chunks, "".join(pieces)


def chat_workload(url, model, clients, rounds, max_tokens):
    jobs = [CHAT_PROMPTS[(i + r) % len(CHAT_PROMPTS)] for r in range(rounds) for i in range(clients)]

    def one(prompt):
        return stream_chat(url, {"model": model, "temperature": 0, "max_tokens": max_tokens,
                                 "messages": [{"role": "user", "content": prompt}]})

    one(CHAT_PROMPTS[0])  # warm-up
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(one, jobs))
    elapsed = time.time() - t0
    tokens = sum(r[1] for r in results)
    ttfts = [r[0] for r in results if r[0] is not None]
    return {"requests": len(jobs), "seconds": elapsed, "tokens": tokens, "tokens_per_second": tokens / elapsed,
            "mean_tokens": tokens / len(jobs), "ttft_p50": statistics.median(ttfts), "ttft_p90": sorted(ttfts)[int(0.9 * len(ttfts))]}


def clause_workload(url, model, clients, records, schema, instructions, max_tokens):
    import jsonschema

    fmt = {"type": "json_schema", "json_schema": {"name": "clause", "schema": schema, "strict": True}}

    def one(rec):
        body = {"model": model, "temperature": 0, "max_tokens": max_tokens, "response_format": fmt,
                "messages": [{"role": "system", "content": instructions}, {"role": "user", "content": rec["text"]}]}
        return post(url, body)["choices"][0]["message"]["content"]

    one(records[0])
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        outputs = list(pool.map(one, records))
    elapsed = time.time() - t0
    valid = 0
    for o in outputs:
        try:
            jsonschema.validate(json.loads(o), schema)
            valid += 1
        except (ValueError, jsonschema.ValidationError):
            pass
    return {"requests": len(records), "seconds": elapsed, "requests_per_second": len(records) / elapsed, "valid": valid, "outputs": outputs}


def serve(cmd, port):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, proc)
    return proc


def stop(proc):
    proc.terminate()
    proc.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plinth", default=os.path.join(ROOT, ".build/release/plinth"))
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"), required=os.environ.get("LLAMA_SERVER") is None)
    ap.add_argument("-m", "--model", default="smollm2")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4, help="chat requests per client")
    ap.add_argument("--chat-tokens", type=int, default=64)
    ap.add_argument("--records", type=int, default=200, help="clause records (of 600)")
    ap.add_argument("--clause-tokens", type=int, default=256)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()

    eval_dir = os.path.join(ROOT, "Benchmarks/eval")
    records = [json.loads(l) for l in open(os.path.join(eval_dir, "policy_clauses.jsonl")) if l.strip()][: args.records]
    schema = json.load(open(os.path.join(eval_dir, "policy_clauses.schema.json")))
    instructions = open(os.path.join(eval_dir, "policy_instructions.txt")).read().strip()
    model_path = subprocess.check_output([args.plinth, "models", "path", args.model]).decode().strip()

    results = {}
    for name in ("plinth", "llama-server"):
        port = free_port()
        if name == "plinth":
            cmd = [args.plinth, "serve", "-m", args.model, "--port", str(port), "--parallel", str(args.clients)]
            env_threads = {"PLINTH_THREADS": str(args.threads)}
            os.environ.update(env_threads)
        else:
            cmd = [args.llama_server, "-m", model_path, "-np", str(args.clients), "-c", str(1024 * args.clients),
                   "-t", str(args.threads), "--host", "127.0.0.1", "--port", str(port), "--no-webui"]
        proc = serve(cmd, port)
        try:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            results[name] = {
                "chat": chat_workload(url, args.model, args.clients, args.rounds, args.chat_tokens),
                "clause": clause_workload(url, args.model, args.clients, records, schema, instructions, args.clause_tokens),
            }
        finally:
            stop(proc)

    p, l = results["plinth"], results["llama-server"]
    same = sum(1 for a, b in zip(p["clause"]["outputs"], l["clause"]["outputs"]) if a == b)
    summary = {
        "model": os.path.basename(model_path), "clients": args.clients, "threads": args.threads,
        "chat": {k: {m: round(v, 4) for m, v in r["chat"].items()} for k, r in results.items()},
        "clause": {k: {m: (round(v, 4) if isinstance(v, float) else v) for m, v in r["clause"].items() if m != "outputs"}
                   for k, r in results.items()},
        "chat_tokens_per_second_ratio": p["chat"]["tokens_per_second"] / l["chat"]["tokens_per_second"],
        "ttft_p50_ratio": p["chat"]["ttft_p50"] / l["chat"]["ttft_p50"],
        "clause_requests_per_second_ratio": p["clause"]["requests_per_second"] / l["clause"]["requests_per_second"],
        "clause_outputs_equal": same,
    }
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(f"model {summary['model']}, {args.clients} concurrent clients, {args.threads} threads, loopback")
    for k in ("plinth", "llama-server"):
        c, q = results[k]["chat"], results[k]["clause"]
        print(f"{k:>12}: chat {c['tokens_per_second']:.1f} generated tok/s ({c['requests']} requests, {c['mean_tokens']:.1f} tokens each), "
              f"TTFT p50 {c['ttft_p50'] * 1000:.0f} ms p90 {c['ttft_p90'] * 1000:.0f} ms; "
              f"clauses {q['requests_per_second']:.2f} req/s, {q['valid']}/{q['requests']} valid")
    print(f"chat tokens/s: {summary['chat_tokens_per_second_ratio']:.2f}x llama-server; TTFT p50 ratio (plinth/llama) "
          f"{summary['ttft_p50_ratio']:.2f}; clause req/s: {summary['clause_requests_per_second_ratio']:.2f}x; "
          f"{same}/{len(records)} clause outputs identical")


if __name__ == "__main__":
    sys.exit(main())
