#!/usr/bin/env python3
"""Concurrent clause classification: Plinth's scheduler against llama-server, same model, same records.

Runs `plinth bench-concurrent --json` (sequential vs concurrent sessions, decode and first-token
checks), then starts llama-server with -np N slots on the same GGUF file and sends the same
records from the same number of concurrent clients, each a chat request with the same
instructions, `response_format` json_schema (the @Generable type's schema, from
`plinth bench-concurrent --print-schema`) and temperature 0. Prints records/s of each and the
ratios. llama-server is a dev-time reference (build it from the llama-cpp-python sdist:
vendor/llama.cpp, `cmake --build build --target llama-server`); pass its path with
--llama-server or LLAMA_SERVER.

    python3 Benchmarks/compare_llama_server.py --llama-server /path/to/llama-server
"""
import argparse
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_ready(port, proc, limit=120):
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited early")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.5)
    raise RuntimeError("the server did not become ready")


def run_llama_server(args, model, schema, records, instructions):
    port = free_port()
    cmd = [args.llama_server, "-m", model, "-np", str(args.slots), "-c", str(1024 * args.slots),
           "-t", str(args.threads), "--host", "127.0.0.1", "--port", str(port), "--no-webui"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"

        def classify(rec):
            body = {"messages": [{"role": "system", "content": instructions}, {"role": "user", "content": rec["text"]}],
                    "temperature": 0, "max_tokens": args.max_tokens,
                    "response_format": {"type": "json_schema", "json_schema": {"name": "clause", "schema": schema, "strict": True}}}
            return post(url, body)["choices"][0]["message"]["content"]

        classify(records[0])  # warm-up
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
            outputs = list(pool.map(classify, records))
        elapsed = time.time() - t0
        valid = 0
        for o in outputs:
            try:
                json.loads(o)
                valid += 1
            except ValueError:
                pass
        return len(records) / elapsed, valid, outputs
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plinth", default=os.path.join(ROOT, ".build/release/plinth"))
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"), required=os.environ.get("LLAMA_SERVER") is None)
    ap.add_argument("-m", "--model", default="smollm2")
    ap.add_argument("--input", default=os.path.join(ROOT, "Benchmarks/workloads/clauses.jsonl"))
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--slots", type=int, default=8, help="llama-server -np")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    records = [json.loads(l) for l in open(args.input) if l.strip()]
    schema = json.loads(subprocess.check_output([args.plinth, "bench-concurrent", "--print-schema"]))
    instructions = subprocess.check_output(
        [args.plinth, "bench-concurrent", "--print-instructions"]).decode().strip()
    model = subprocess.check_output([args.plinth, "models", "path", args.model]).decode().strip()

    plinth = json.loads(subprocess.check_output(
        [args.plinth, "bench-concurrent", "-m", args.model, "--input", args.input, "--concurrency", str(args.concurrency),
         "--max-tokens", str(args.max_tokens), "--rounds", str(args.rounds), "--json"]))
    llama_rate, llama_valid, llama_outputs = run_llama_server(args, model, schema, records, instructions)

    p_seq, p_con = plinth["sequential_records_per_second"], plinth["concurrent_records_per_second"]
    same = sum(1 for a, b in zip(plinth["outputs"], llama_outputs) if json.loads(a) == json.loads(b))
    print(f"model: {plinth['model']}, {len(records)} records, {args.concurrency} concurrent clients")
    print(f"plinth one after another: {p_seq:.2f} records/s")
    print(f"plinth {args.concurrency} concurrent sessions: {p_con:.2f} records/s ({p_con / p_seq:.2f}x sequential; "
          f"{plinth['mismatched_records']} outputs differ from the sequential run)")
    print(f"llama-server -np {args.slots}: {llama_rate:.2f} records/s ({llama_valid}/{len(records)} valid JSON; "
          f"{same} outputs equal to Plinth's)")
    print(f"plinth concurrent / llama-server: {p_con / llama_rate:.2f}x")
    print(f"single-stream decode through the scheduler / raw runtime: {plinth['decode_ratio']:.3f}")
    print(f"first token with {args.concurrency - 1} others decoding / idle: {plinth['ttft_ratio']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
