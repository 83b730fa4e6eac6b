#!/bin/bash
# The device side of the CUDA end-to-end round (the `device` tool), in stages, because the
# models, the static plinth and llama.cpp's source together exceed one call's 64 MiB carry: each
# call stashes what it carried under /tmp/pd (kept while the machine stays warm) and runs a stage.
#
#   bash Benchmarks/cuda/device_round.sh stash DIR     copy DIR's files to /tmp/pd/stash
#   bash Benchmarks/cuda/device_round.sh setup         unpack plinth, its libraries and the kernel tests;
#                                                      with llama-src.tar.xz stashed, start llama.cpp's
#                                                      CUDA build in the background; with lb.tar.xz, unpack it
#   bash Benchmarks/cuda/device_round.sh llamabuild    only that: llama.cpp's build (or its binaries)
#   bash Benchmarks/cuda/device_round.sh kernels       PlinthCUDA's kernel tests (devbin/test_cuda)
#   bash Benchmarks/cuda/device_round.sh llamabin      unpack llama.cpp binaries built earlier (lb.tar.xz)
#   bash Benchmarks/cuda/device_round.sh models        assemble the models (pay.part-* -> smollm2.gguf,
#                                                      sha256-checked, and qwen-rep.gguf)
#   bash Benchmarks/cuda/device_round.sh plinth        plinth: bench (single, batched 64) per model,
#                                                      greedy CPU vs CUDA, guided output, the clause workload
#   bash Benchmarks/cuda/device_round.sh eval          plinth eval (600 clauses) on CUDA and CPU; the clause
#                                                      workload on CUDA at 16 and 64 sessions
#   bash Benchmarks/cuda/device_round.sh fidelity      SmolLM2 against its F32 reference (KL divergence, as
#                                                      Benchmarks/README.md measures the CPU): CPU, CUDA at
#                                                      prefill batches (GEMM), CUDA at 8-token steps (the
#                                                      decode GEMV, int8 rows and float rows)
#   bash Benchmarks/cuda/device_round.sh profile       ncu: kernel durations of decode steps per model
#   bash Benchmarks/cuda/device_round.sh llama         llama-bench and llama-batched-bench (CUDA) per model
#
# Made here by Benchmarks/cuda/make_devround.sh. Logs and JSON: $OUT/round.tar.xz.
set -u
W=/tmp/pd
mkdir -p "$W/stash" "$W/bin/lib" "$W/home"
# Everything a stage writes stays in $W/out (the device tool empties $OUT before each call);
# each stage ends by packing it into $OUT/round.tar.xz (one file, under the tool's file limits).
RET="${OUT:-}"
OUT="$W/out"
mkdir -p "$OUT"
LOG="$OUT/round.log"
pack() { [ -n "$RET" ] && [ "$RET" != "$OUT" ] && tar cf - -C "$W" out | xz -T4 -6 >"$RET/round.tar.xz"; }
trap pack EXIT
export PLINTH_HOME="$W/home"
export LD_LIBRARY_PATH="$W/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
P="$W/bin/plinth"
say() { echo "== $*" | tee -a "$LOG"; }
models() { for m in smollm2 qwen-rep; do [ -f "$W/$m.gguf" ] && echo "$m"; done; }

case "${1:-}" in
stash)
    cp -r "${2:?stash DIR}"/. "$W/stash/" && ls -la "$W/stash" ;;
setup)
    say "machine"
    { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; nproc; } 2>&1 | tee -a "$LOG"
    xz -dc "$W/stash/plinth.xz" >"$P" && chmod +x "$P"
    for f in "$W"/stash/lib/*.xz; do xz -dc "$f" >"$W/bin/lib/$(basename "$f" .xz)"; done
    ldd "$P" | tee -a "$LOG"
    [ -f "$W/stash/devbin.tar.xz" ] && tar xJf "$W/stash/devbin.tar.xz" -C "$W"
    [ -f "$W/stash/lb.tar.xz" ] && exec bash "$0" llamabin
    [ -f "$W/stash/llama-src.tar.xz" ] && exec bash "$0" llamabuild
    exit 0 ;;
llamabuild)
    [ -f "$W/stash/lb.tar.xz" ] && exec bash "$0" llamabin
    mkdir -p "$W/llama" && tar xJf "$W/stash/llama-src.tar.xz" -C "$W/llama"
    export CUDACXX="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
    # Built beside the plinth runs, on 12 of the 16 cores; `llama` waits for it.
    setsid nohup bash -c "cd $W/llama/llama.cpp && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON && cmake --build build -j 12 --target llama-bench llama-batched-bench \
        && echo BUILD-OK" >"$W/llama-build.log" 2>&1 </dev/null &
    sleep 2; say "llama.cpp build started" ;;
kernels)
    say "first-use NVRTC time per model's modules, on this machine's CPUs (compile_cuda)"
    for types in 3,8,0 6,8,12,14,0; do "$W/devbin/compile_cuda" --types "$types" "$(nproc)" 2>&1 | tee -a "$LOG"; done
    "$W/devbin/compile_cuda" "$(nproc)" 2>&1 | tee -a "$LOG"
    say "PlinthCUDA kernel tests"
    # In plinth's own kernel cache, which the tests leave holding a good cubin: plinth need not compile again.
    "$W/devbin/test_cuda" "$PLINTH_HOME/cuda" >"$OUT/kernel-tests.log" 2>&1
    grep -v "^PASS" "$OUT/kernel-tests.log" | tee -a "$LOG" ;;
llamabin)
    # llama.cpp's binaries from an earlier round's build (tar of build/bin), where the build put them.
    mkdir -p "$W/llama/llama.cpp/build/bin" && tar xJf "$W/stash/lb.tar.xz" -C "$W/llama/llama.cpp/build/bin"
    echo BUILD-OK >"$W/llama-build.log" ;;
models)
    # The payload's pieces (pay.part-NN, in order) make one tar of xz'd models.
    cat "$W"/stash/pay.part-* | tar xf - -C "$W/stash"
    xz -dc "$W/stash/smollm2.gguf.xz" >"$W/smollm2.gguf"
    echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $W/smollm2.gguf" | sha256sum -c | tee -a "$LOG"
    [ -f "$W/stash/qwen-rep.gguf.xz" ] && xz -dc "$W/stash/qwen-rep.gguf.xz" >"$W/qwen-rep.gguf"
    ls -la "$W"/*.gguf | tee -a "$LOG" ;;
plinth)
    bench() { # NAME ARGS...
        local name="$1"; shift
        say "plinth bench $name: $*"
        "$P" bench "$@" --json >"$OUT/plinth-$name.json" 2>>"$LOG" || say "exit $?"
        python3 - "$OUT/plinth-$name.json" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print("  %s  %-14s %10.1f t/s (min %.1f, max %.1f)" % (d["backend"], r["test"], r["median_ts"], r["min_ts"], r["max_ts"]))
EOF
    }
    for m in $(models); do
        bench "$m-single" -m "$W/$m.gguf" --backend cuda -p 512 -n 128 -r 5
        PLINTH_CUDA_GRAPHS=0 bench "$m-single-nographs" -m "$W/$m.gguf" --backend cuda -p 0 -n 128 -r 3
        # Each launch-saving change off, one at a time: what it is worth on this machine.
        PLINTH_CUDA_NORM_FUSED=0 bench "$m-single-nonormfuse" -m "$W/$m.gguf" --backend cuda -p 0 -n 128 -r 5
        PLINTH_CUDA_GLU=0 bench "$m-single-noglu" -m "$W/$m.gguf" --backend cuda -p 0 -n 128 -r 5
        PLINTH_CUDA_OVERLAP=0 bench "$m-single-nooverlap" -m "$W/$m.gguf" --backend cuda -p 0 -n 128 -r 5
        bench "$m-batched64" -m "$W/$m.gguf" --backend cuda --parallel 64 -p 128 -n 64 -r 3
    done
    if [ -f "$W/smollm2.gguf" ]; then
        M="$W/smollm2.gguf"
        say "greedy generation, CPU vs CUDA (chat, 64 tokens)"
        same=0; total=0
        while IFS= read -r prompt; do
            for b in cpu cuda; do
                "$P" generate -m "$M" --backend $b --chat --greedy -n 64 -p "$prompt" >"$W/gen-$b.txt" 2>"$W/gen-$b.err"
            done
            total=$((total + 1))
            if cmp -s "$W/gen-cpu.txt" "$W/gen-cuda.txt"; then same=$((same + 1)); r=same; else r=DIFFERENT; fi
            { echo "-- $prompt: $r ($(tail -n 1 "$W/gen-cuda.err"))"; echo "   cpu:  $(tr '\n' ' ' <"$W/gen-cpu.txt")"
              echo "   cuda: $(tr '\n' ' ' <"$W/gen-cuda.txt")"; } >>"$LOG"
        done <<'EOF'
What is the capital of France?
Write a haiku about Linux.
Explain recursion in one sentence.
List three primary colors.
What is 12 times 12?
Give me a name for a pet turtle.
Why is the sky blue?
Translate 'good morning' into Spanish.
EOF
        say "greedy agreement: $same of $total identical"
        say "clause workload (bench-concurrent), CUDA then CPU (16 threads)"
        for b in cuda cpu; do
            PLINTH_BACKEND=$b "$P" bench-concurrent -m "$M" --input Benchmarks/workloads/clauses.jsonl -r 2 --json \
                >"$OUT/concurrent-$b.json" 2>>"$LOG" || say "exit $?"
        done
        python3 - "$OUT/concurrent-cuda.json" "$OUT/concurrent-cpu.json" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
for p in sys.argv[1:]:
    try:
        d = json.load(open(p))
    except Exception as e:
        print(p, "no result", e); continue
    print(p, {k: v for k, v in d.items() if not isinstance(v, (list, dict))})
try:
    a, b = (json.load(open(p))["outputs"] for p in sys.argv[1:3])
    same = sum(x == y for x, y in zip(a, b))
    print(f"clause outputs, CUDA vs CPU: {same} of {len(a)} identical")
    for x, y in zip(a, b):
        if x != y: print("  cuda:", x, "\n  cpu: ", y)
except Exception as e:
    print("no output comparison:", e)
EOF
    fi ;;
eval)
    # plinth eval over policy clauses (Benchmarks/eval; the 2-core CPU figure, 600 clauses, is in
    # Benchmarks/README.md): CUDA over 6,000 (the same generator; its first 600 are the 600-record
    # file) at --parallel 64, 128 and 256, so that loading the model (in the timed run) is a small
    # part; and the device's CPU (16 threads) over the 600 at 16, for the outputs' comparison.
    python3 Benchmarks/eval/make_workload.py --records 6000 --out "$W/clauses6000.jsonl"
    ev() { # NAME BACKEND PARALLEL INPUT [EXTRA EVAL OPTIONS...]
        local name=$1 backend=$2 parallel=$3 input=$4
        shift 4
        say "plinth eval $name: --backend $backend --parallel $parallel --input $input $*"
        PLINTH_BACKEND=$backend "$P" eval -m "$W/smollm2.gguf" --schema Benchmarks/eval/policy_clauses.schema.json \
            --instructions-file Benchmarks/eval/policy_instructions.txt --input "$input" \
            --output "$OUT/eval-$name.jsonl" --restart --quiet --parallel "$parallel" --max-tokens 96 --label targetGroup \
            --label effectDirection --summary "$OUT/eval-$name.json" "$@" 2>>"$LOG" || say "exit $?"
        python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print({k: v for k, v in s.items() if not isinstance(v, (list, dict))})" \
            "$OUT/eval-$1.json" 2>&1 | tee -a "$LOG"
    }
    for n in ${EVAL_PARALLEL:-64 128 256}; do ev cuda-$n cuda $n "$W/clauses6000.jsonl"; done
    ev cpu-16 cpu 16 Benchmarks/eval/policy_clauses.jsonl
    # Sampled decoding (top-k 40 at 0.8): rows reduced to their best tokens on the device, and not.
    ev cuda-128-sampled cuda 128 "$W/clauses6000.jsonl" --temperature 0.8 --top-k 40 --seed 1
    PLINTH_CUDA_TOPK=0 ev cuda-128-sampled-fullrows cuda 128 "$W/clauses6000.jsonl" --temperature 0.8 --top-k 40 --seed 1
    python3 - "$OUT/eval-cuda-128.jsonl" "$OUT/eval-cpu-16.jsonl" <<'EOF2' 2>&1 | tee -a "$LOG"
import json, sys
a, b = ([json.loads(l).get("value") for l in open(p)] for p in sys.argv[1:3])
a = a[:len(b)]
same = sum(x == y for x, y in zip(a, b))
print(f"plinth eval values, CUDA (128) vs CPU (16), first {len(b)} records: {same} identical")
diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
for i in diff[:10]: print(f"  record {i}: cuda {a[i]}\n             cpu  {b[i]}")
EOF2
    # The clause workload at several concurrencies on CUDA (EVAL_CONCURRENCY, default "16 64").
    for n in ${EVAL_CONCURRENCY:-16 64}; do
        say "clause workload on CUDA, $n concurrent sessions"
        PLINTH_BACKEND=cuda "$P" bench-concurrent -m "$W/smollm2.gguf" --input Benchmarks/workloads/clauses.jsonl -r 2 \
            --concurrency "$n" --json >"$OUT/concurrent-cuda-$n.json" 2>>"$LOG" || say "exit $?"
        python3 - "$OUT/concurrent-cuda-$n.json" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
d = json.load(open(sys.argv[1]))
print({k: v for k, v in d.items() if not isinstance(v, (list, dict))})
EOF
    done ;;
fidelity)
    # The F32 reference is the file's own dequantization (plinth quantize --type F32, which is
    # llama-quantize's F32 byte for byte); its log-probabilities on the GPL-3 text (-c 512, 14
    # chunks) are the base each run is compared with.
    TEXT=/usr/share/common-licenses/GPL-3
    [ -f "$TEXT" ] || TEXT="$W/stash/GPL-3"
    M="$W/smollm2.gguf"
    say "fidelity: F32 reference of SmolLM2 and its log-probabilities (CPU, 16 threads)"
    [ -f "$W/smol-f32.gguf" ] || "$P" quantize -m "$M" --type F32 -o "$W/smol-f32.gguf" >>"$LOG" 2>&1 || say "exit $?"
    "$P" perplexity -m "$W/smol-f32.gguf" -f "$TEXT" -c 512 --chunks 20 --backend cpu --kl-divergence-base "$W/smol-f32.kld" \
        2>&1 | grep -E "Final|error" | tee -a "$LOG"
    kld() { # NAME BACKEND BATCH [ENV...]
        local name="$1" b="$2" batch="$3"; shift 3
        say "fidelity $name: --backend $b -b $batch $*"
        env "$@" "$P" perplexity -m "$M" --kl-divergence --kl-divergence-base "$W/smol-f32.kld" --backend "$b" -b "$batch" \
            >"$OUT/kld-$name.txt" 2>&1 || say "exit $?"
        grep -E "Mean +KLD|Same top|RMS Δp|Mean PPL\(Q\)|error" "$OUT/kld-$name.txt" | tee -a "$LOG"
    }
    kld cpu cpu 512
    kld cuda-prefill cuda 512
    kld cuda-steps8 cuda 8
    kld cuda-steps8-float cuda 8 PLINTH_CUDA_INT8=0 ;;
profile)
    # Kernel durations of decode steps (ncu, one launch at a time, no graphs): where a token's
    # time goes, per kernel name, for each model; skips the load and the prompt.
    for m in $(models); do
        say "ncu: decode kernels of $m"
        PLINTH_CUDA_GRAPHS=0 timeout 240 ncu --metrics gpu__time_duration.sum --csv --launch-skip 3000 --launch-count 900 \
            "$P" bench -m "$W/$m.gguf" --backend cuda -p 16 -n 64 -r 1 --no-warmup >"$OUT/ncu-$m.csv" 2>>"$LOG" || say "exit $?"
        python3 - "$OUT/ncu-$m.csv" <<'EOF2' 2>&1 | tee -a "$LOG"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value"); u = head.index("Metric Unit")
t = collections.defaultdict(float); n = collections.Counter()
for r in rows[1:]:
    try: x = float(r[v].replace(",", ""))
    except ValueError: continue
    x *= {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(r[u], 1.0)
    t[r[k]] += x; n[r[k]] += 1
total = sum(t.values())
print(f"  {sum(n.values())} kernels, {total:.0f} us")
for name, x in sorted(t.items(), key=lambda p: -p[1])[:25]:
    print(f"  {x:9.1f} us {100 * x / total:5.1f}%  {n[name]:5d} x {x / n[name]:7.2f} us  {name}")
EOF2
    done ;;
llama)
    for i in $(seq 1 100); do grep -q BUILD-OK "$W/llama-build.log" && break; grep -qi "error" "$W/llama-build.log" && break; sleep 5; done
    tail -n 5 "$W/llama-build.log" | tee -a "$LOG"
    B="$W/llama/llama.cpp/build/bin"
    export LD_LIBRARY_PATH="$B:$LD_LIBRARY_PATH"
    for m in $(models); do
        say "llama-bench $m"
        "$B/llama-bench" -m "$W/$m.gguf" -ngl 99 -p 512 -n 128 -r 5 -o json >"$OUT/llama-$m-single.json" 2>>"$LOG"
        python3 - "$OUT/llama-$m-single.json" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
for r in json.load(open(sys.argv[1])):
    print("  llama.cpp n_prompt=%d n_gen=%d %.1f t/s" % (r["n_prompt"], r["n_gen"], r["avg_ts"]))
EOF
        say "llama-batched-bench $m"
        "$B/llama-batched-bench" -m "$W/$m.gguf" -ngl 99 -npp 128 -ntg 64 -npl 64 -c 12400 --output-format jsonl \
            >"$OUT/llama-$m-batched64.txt" 2>>"$LOG"
        grep speed_tg "$OUT/llama-$m-batched64.txt" | tee -a "$LOG"
    done ;;
*)
    sed -n 2,17p "$0"; exit 2 ;;
esac
