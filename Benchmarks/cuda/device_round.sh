#!/bin/bash
# The device side of the CUDA end-to-end round (the `device` tool), for a lease of 15 device
# minutes. The static plinth, the kernel tests, llama.cpp's CUDA tools and the models exceed one
# call's 64 MiB, so make_devround.sh cuts them into carries .devcarry/c1..cN, and each call is
#
#   bash Benchmarks/cuda/device_round.sh call K      (K = 1..N; then `call` alone until all is done)
#
# which stashes cK under /tmp/pd (kept while the machine stays warm, 30 s after a call), unpacks
# every carried file whose bytes have all arrived, and then runs the stages below that are ready,
# in order of what issue 25 needs most, until the call has used ROUND_CALL_SECONDS (default 420;
# a stage is not started when its estimate would pass that). Every call ends with the targets
# table (plinth against llama.cpp) of what has been measured so far, also written to
# $OUT/summary.txt, and the device time since the first call; the logs and JSON come back as
# $OUT/round.tar.xz.
#
# Stages, by priority (a stage runs once; `run STAGE` runs one again by hand):
#   kernels-quick    test_cuda --quick (every kernel, two shapes) and first-use NVRTC times; a launch
#                    saving whose tests fail is off for the rest of the round (fallbacks, below)
#   bench-M          plinth bench: tg128 and pp512 (-r 5), batched decode of 64 sequences
#   llama-M          llama-bench and llama-batched-bench (CUDA) on the same file
#   ablate-M         tg128 with graphs, the fused norm, the fused GLU, the side stream, dependent launch, the fused
#                    RoPE off; qwen-rep's also with its mixed q|k|v kept apart, and its batched decode without the
#                    f16 weight copies; pp512 and pp2048 with and without the prompt's attention on tensor cores
#   eval             plinth eval: 6,000 clauses at --parallel 256; sampled with and without top-k on the device
#   fidelity         SmolLM2 against its F32 reference (KL divergence), CPU and CUDA paths
#   agree            CUDA against CPU: greedy chat text (8 prompts), plinth eval's values (600 clauses)
#   attention        bench_cuda's attention (one layer; SmolLM2's, Qwen's and Gemma 3's heads): decode of 64
#                    sequences through the paged cache's page table against the slotted layout, and
#                    prefill chunks on the FMA kernel and on tensor cores
#   kernels-full     test_cuda on every shape
#   profile          ncu kernel durations of decode steps (where ncu can read counters)
# M is qwen-rep (Qwen2.5-Coder-0.5B's shape and types) or smollm2.
#
# ROUND_SMOKE=1 runs every stage at toy sizes: the rehearsal on the CPU emulator
# (Benchmarks/cuda/rehearse.sh), which checks every command line of the round without a device.
set -u
W=${ROUND_DIR:-/tmp/pd}
mkdir -p "$W/stash" "$W/got" "$W/bin/lib" "$W/home" "$W/done"
[ -f "$W/t0" ] || date +%s >"$W/t0"
# Everything a stage writes stays in $W/out (the device tool empties $OUT before each call);
# each call ends by packing it into $OUT/round.tar.xz (one file, under the tool's file limits).
RET="${OUT:-}"
OUT="$W/out"
mkdir -p "$OUT"
LOG="$OUT/round.log"
pack() {
    [ -n "$RET" ] && [ "$RET" != "$OUT" ] || return 0
    tar cf - -C "$W" out | xz -T4 -6 >"$RET/round.tar.xz"
    [ -f "$OUT/summary.txt" ] && cp "$OUT/summary.txt" "$RET/"
}
trap pack EXIT
export PLINTH_HOME="$W/home"
export LD_LIBRARY_PATH="$W/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
P="$W/bin/plinth"
say() { echo "== [+$(($(date +%s) - $(cat "$W/t0")))s] $*" | tee -a "$LOG"; }
model_file() { echo "$W/$1.gguf"; }
have_model() { [ -f "$W/$1.gguf" ]; }
models_here() { for m in qwen-rep smollm2; do have_model "$m" && echo "$m"; done; }

if [ -n "${ROUND_SMOKE:-}" ]; then
    PP=16 TG=4 REPS=1 BPAR=4 BPP=8 BTG=4 EVN=4 EVPAR=4 EVSWEEP=4 CTX=64 CHUNKS=1 GEN=8 PROMPTS=2
else
    PP=512 TG=128 REPS=5 BPAR=64 BPP=128 BTG=64 EVN=6000 EVPAR=256 EVSWEEP="256 64" CTX=512 CHUNKS=20 GEN=64 PROMPTS=8
fi

# The JSON of one result file, printed as one line per test.
show_bench() {
    python3 - "$1" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"  no result in {sys.argv[1]}: {e}")
for r in d["results"]:
    print("  %s  %-14s %10.1f t/s (min %.1f, max %.1f)" % (d["backend"], r["test"], r["median_ts"], r["min_ts"], r["max_ts"]))
EOF
}

bench() { # NAME ARGS...
    local name="$1"; shift
    say "plinth bench $name: $*"
    "$P" bench "$@" --json >"$OUT/plinth-$name.json" 2>>"$LOG" || say "exit $?"
    show_bench "$OUT/plinth-$name.json"
}

# --- carrying and unpacking -------------------------------------------------------------------

stash() { cp -r "${1:?stash DIR}"/. "$W/stash/" && say "stashed $1: $(du -sh "$1" | cut -f1)"; }

machine() {
    say "machine"
    { date -u; nproc; if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
      else echo "no nvidia-smi"; fi; } 2>&1 | tee -a "$LOG"
}

# The carried files arrive as one stream (pay.manifest: name, bytes, sha256, in stream order),
# cut into pay.part-NN across the carries; a file is taken out, checked and put to use once all
# its bytes are here, so each call's stages start on what has arrived.
unpack() {
    local have=0 f off=0 name size sum parts
    [ -f "$W/stash/pay.manifest" ] || { say "no pay.manifest stashed (the first call carries .devcarry/c1)"; return 0; }
    parts=$(ls "$W"/stash/pay.part-* 2>/dev/null | wc -l)
    # Calls run in order: a part missing before the last means a call was skipped.
    [ "$parts" -eq 0 ] || [ "$(ls "$W"/stash/pay.part-* | tail -n 1 | sed 's/.*part-0*//')" -eq "$parts" ] ||
        { say "parts missing: only $(ls "$W"/stash/pay.part-* | xargs -n 1 basename | tr '\n' ' ')"; return 0; }
    for f in "$W"/stash/pay.part-*; do [ -f "$f" ] && have=$((have + $(stat -c %s "$f"))); done
    while read -r name size sum; do
        if [ ! -f "$W/got/$name" ] && [ $((off + size)) -le "$have" ]; then
            cat "$W"/stash/pay.part-* | tail -c +$((off + 1)) | head -c "$size" >"$W/got/$name.tmp"
            if echo "$sum  $W/got/$name.tmp" | sha256sum -c --status; then
                mv "$W/got/$name.tmp" "$W/got/$name"
                put "$name"
            else
                say "$name: sha256 mismatch"; rm -f "$W/got/$name.tmp"
            fi
        fi
        off=$((off + size))
    done <"$W/stash/pay.manifest"
    say "here: $(ls "$W/got" | tr '\n' ' ')($((have / 1048576)) of $((off / 1048576)) MiB)"
    llama_check
}

put() { # NAME: a carried file, complete and checked, put where the stages use it
    case $1 in
        plinth.xz) xz -dc "$W/got/$1" >"$P.tmp" && chmod +x "$P.tmp" && mv "$P.tmp" "$P" ;;
        libs.tar.xz) tar xJf "$W/got/$1" -C "$W/bin/lib" ;;
        devbin.tar.xz) tar xJf "$W/got/$1" -C "$W" ;;
        lb.tar.xz) mkdir -p "$LB" && tar xJf "$W/got/$1" -C "$LB" ;;
        *.gguf.xz) xz -dc "$W/got/$1" >"$W/${1%.xz}.tmp" && mv "$W/${1%.xz}.tmp" "$W/${1%.xz}" ;;
    esac
    say "$1 arrived"
    if [ -x "$P" ] && [ -f "$W/got/libs.tar.xz" ] && [ ! -f "$W/plinth-ok" ]; then
        "$P" --help >/dev/null 2>&1 && touch "$W/plinth-ok" || say "plinth does not start: $(ldd "$P" 2>&1 | grep 'not found')"
    fi
}

# llama.cpp: the tools built by build_llama_cuda.sh (lb.tar.xz), checked by listing the devices;
# where they do not run here, its source (llama-src.tar.xz) built on this machine in the
# background (12 of the 16 cores), which the llama stages wait for.
LB="$W/llama/bin"
llama_env() {
    # cuBLAS for the tools built elsewhere: the toolkit's, else the Python wheels'.
    local d
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(ls -d /opt/*/.venv/lib/python3*/site-packages/nvidia/cu13/lib /usr/local/lib/python3*/dist-packages/nvidia/cu13/lib 2>/dev/null); do
        [ -e "$d/libcublas.so.13" ] && { echo "$LB:$d"; return; }
    done
    d=$(find /usr /opt -name libcublas.so.13 2>/dev/null | head -n 1)
    echo "$LB${d:+:$(dirname "$d")}"
}
llama_ready() { [ -x "$LB/llama-bench" ] && grep -q BUILD-OK "$W/llama-build.log" 2>/dev/null; }
llama_check() {
    [ -f "$W/llama-build.log" ] && return 0
    if [ -f "$W/got/lb.tar.xz" ] && [ ! -f "$W/llama-carried-failed" ]; then
        if LD_LIBRARY_PATH="$(llama_env):$LD_LIBRARY_PATH" "$LB/llama-bench" --list-devices >"$W/llama-devices.txt" 2>&1 &&
            { grep -q CUDA "$W/llama-devices.txt" || [ -n "${ROUND_SMOKE:-}" ]; }; then
            echo BUILD-OK >"$W/llama-build.log"
            say "llama.cpp (carried build): $(grep -A1 'Available devices' "$W/llama-devices.txt" | tail -n 1)"
            return 0
        fi
        touch "$W/llama-carried-failed"
        say "the carried llama.cpp build does not run here:"; tail -n 5 "$W/llama-devices.txt" | tee -a "$LOG"
    fi
    [ -f "$W/got/llama-src.tar.xz" ] || return 0
    # The carried tools come first in the stream: the source is built only once they have failed.
    if grep -q '^lb.tar.xz ' "$W/stash/pay.manifest" && [ ! -f "$W/llama-carried-failed" ]; then return 0; fi
    mkdir -p "$W/llama/src" "$LB" && tar xJf "$W/got/llama-src.tar.xz" -C "$W/llama/src"
    export CUDACXX="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
    setsid nohup bash -c "cmake -S '$W/llama/src/src' -B '$W/llama/build' -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON && cmake --build '$W/llama/build' -j 12 --target llama-bench llama-batched-bench \
        && cp -a '$W/llama/build/bin/.' '$LB/' && echo BUILD-OK" >"$W/llama-build.log" 2>&1 </dev/null &
    say "llama.cpp's CUDA build started here (the llama stages wait for it)"
}

# --- stages ---------------------------------------------------------------------------------

kernels() { # quick|full
    if [ "$1" = quick ]; then
        say "first-use NVRTC time per model's modules, on this machine's CPUs (compile_cuda)"
        for types in 3,8,0 6,8,12,14,0; do "$W/devbin/compile_cuda" --types "$types" "$(nproc)" 2>&1 | tee -a "$LOG"; done
    fi
    say "PlinthCUDA kernel tests ($1)"
    # As the code ships, whatever a fallback turned off.
    kernel_tests "$1" "$OUT/kernel-tests-$1.log" $(fallback_vars | sed 's/^/-u /')
    local st=$? n=0 again=0
    [ "$1" = quick ] || return 0
    fallbacks "$OUT/kernel-tests-quick.log"
    # A failed device call ends test_cuda (status 2) before the tests after it: they run again with
    # what failed turned off, while that turns more off.
    while [ $st -eq 2 ] && [ "$(fallback_vars | wc -l)" -gt $n ]; do
        n=$(fallback_vars | wc -l) again=$((again + 1))
        say "PlinthCUDA kernel tests (quick) again, with $(fallback_vars | tr '\n' ' ')at 0"
        kernel_tests quick "$OUT/kernel-tests-quick-$again.log"
        st=$?
        fallbacks "$OUT"/kernel-tests-quick*.log
    done
    return 0
}
kernel_tests() { # quick|full LOG [env OPTIONS]: test_cuda's lines other than PASS shown; its status returned
    local set=$1 log=$2 st
    shift 2
    # In plinth's own kernel cache, which the tests leave holding a good cubin: plinth need not compile again.
    # (The rehearsal runs the quick set for both: the whole one takes ~16 minutes emulated.)
    env "$@" "$W/devbin/test_cuda" "$PLINTH_HOME/cuda" $({ [ "$set" = quick ] || [ -n "${ROUND_SMOKE:-}" ]; } && echo --quick) \
        >"$log" 2>&1
    st=$?
    grep -v "^PASS" "$log" | tee -a "$LOG"
    return $st
}

# Each launch saving that has a switch, and the kernel tests' failures that turn it off (a regex
# on test_cuda's FAIL lines and the line of a device call that ended it). Code that first runs on
# a GPU in a round may fail there: its saving is then off (the switch at 0) for every later stage
# and call, and the summary says so, so that the round still measures the targets on what works,
# at the cost of that saving's figures. ROUND_FALLBACK=0 keeps everything on.
FALLBACK_RULES='PLINTH_CUDA_MMA_ATTN tensor cores|launch of attention_mma
PLINTH_CUDA_PDL ^FAIL dependent launch
PLINTH_CUDA_TOPK ^FAIL topk|launch of topk
PLINTH_CUDA_F16_WEIGHTS ^FAIL f16 weight copies
PLINTH_CUDA_GLU ^FAIL matmul_glu|launch of glu
PLINTH_CUDA_NORM_FUSED ^FAIL matmul_(add|post)_norm
PLINTH_CUDA_ROPE_FUSED ^FAIL matmul_runs_rope_store
PLINTH_CUDA_OVERLAP ^FAIL matmul_runs[ :]
PLINTH_CUDA_GRAPHS ^FAIL graph'
fallbacks() { # TEST_LOG...: writes $OUT/fallbacks.txt (each switch and why) and exports the switches
    [ "${ROUND_FALLBACK:-1}" = 0 ] && return 0
    local var pattern failures hits
    failures=$(cat "$@" | grep -E "^FAIL|: .* -> ")
    : >"$OUT/fallbacks.txt.tmp"
    while read -r var pattern; do
        hits=$(grep -E "$pattern" <<<"$failures") || continue
        echo "$var=0 ($(wc -l <<<"$hits") failed; the first: $(head -n 1 <<<"$hits" | sed 's/^FAIL //'))" >>"$OUT/fallbacks.txt.tmp"
    done <<<"$FALLBACK_RULES"
    if [ -s "$OUT/fallbacks.txt.tmp" ] && ! cmp -s "$OUT/fallbacks.txt.tmp" "$OUT/fallbacks.txt"; then
        say "off for the rest of the round, their kernel tests having failed here:"; tee -a "$LOG" <"$OUT/fallbacks.txt.tmp"
    fi
    mv "$OUT/fallbacks.txt.tmp" "$OUT/fallbacks.txt"
    load_fallbacks
}
fallback_vars() { [ -f "$OUT/fallbacks.txt" ] && cut -d= -f1 "$OUT/fallbacks.txt"; return 0; }
fallen() { fallback_vars | grep -qx "$1"; }
load_fallbacks() {
    [ "${ROUND_FALLBACK:-1}" = 0 ] && return 0
    local v
    for v in $(fallback_vars); do export "$v=0"; done
}

attention_stage() {
    say "attention, one layer: the paged cache against the slotted layout (bench_cuda)"
    # The emulator would take hours at these sizes: the rehearsal only checks the stage runs.
    if [ -n "${ROUND_SMOKE:-}" ]; then say "(skipped in the rehearsal)"; return 0; fi
    PKC_BENCH=attn "$W/devbin/bench_cuda" "$PLINTH_HOME/cuda" 2>&1 | tee "$OUT/attention.log" | tee -a "$LOG"
}

bench_model() { # M
    local m=$1 f; f=$(model_file "$1")
    bench "$m-single" -m "$f" --backend cuda -p $PP -n $TG -r $REPS
    bench "$m-batched64" -m "$f" --backend cuda --parallel $BPAR -p $BPP -n $BTG -r $((REPS > 3 ? 3 : REPS))
    # An unmerged adapter on every sequence (the content tagger, SmolLM2's): what it costs.
    [ "$m" = smollm2 ] && bench "$m-batched64-adapter" -m "$f" --backend cuda --parallel $BPAR -p $BPP -n $BTG \
        -r $((REPS > 3 ? 3 : REPS)) --adapter Adapters/content-tagger/content-tagger.gguf
    return 0
}

# bench NAME with the saving VAR off: skipped where a fallback already has it off for the round
# (it would be the shipped run again).
without() { # VAR NAME ARGS...
    local var=$1
    shift
    if fallen "$var"; then say "plinth bench $1: skipped ($var is off for this round)"; return 0; fi
    (export "$var=0" && bench "$@")
}

ablate_model() { # M: each launch-saving change off, one at a time: what it is worth on this machine
    local m=$1 f; f=$(model_file "$1")
    without PLINTH_CUDA_GRAPHS "$m-single-nographs" -m "$f" --backend cuda -p 0 -n $TG -r $REPS
    without PLINTH_CUDA_NORM_FUSED "$m-single-nonormfuse" -m "$f" --backend cuda -p 0 -n $TG -r $REPS
    without PLINTH_CUDA_GLU "$m-single-noglu" -m "$f" --backend cuda -p 0 -n $TG -r $REPS
    without PLINTH_CUDA_OVERLAP "$m-single-nooverlap" -m "$f" --backend cuda -p 0 -n $TG -r $REPS
    without PLINTH_CUDA_PDL "$m-single-nopdl" -m "$f" --backend cuda -p 0 -n $TG -r $REPS
    without PLINTH_CUDA_ROPE_FUSED "$m-single-norope" -m "$f" --backend cuda -p 0 -n $TG -r $REPS
    # q|k Q5_0 beside v Q8_0 (12 of its layers) as two launches, not rewritten as one Q8_0 run.
    [ "$m" = qwen-rep ] && without PLINTH_CUDA_UNIFY "$m-single-nounify" -m "$f" --backend cuda -p 0 -n $TG -r $REPS
    # The GEMM path (the batch's prompts and its 64-row decode) dequantizing every product's
    # weights at each step, as before the f16 copies (Qwen's shape only: the lease is short).
    [ "$m" = qwen-rep ] && without PLINTH_CUDA_F16_WEIGHTS "$m-batched64-nof16" -m "$f" --backend cuda --parallel $BPAR \
        -p $BPP -n $BTG -r $((REPS > 3 ? 3 : REPS))
    # A prompt's attention on tensor cores against pkc_attention's kernel, at PP and 4 PP positions.
    if fallen PLINTH_CUDA_MMA_ATTN; then
        say "plinth bench $m-prompt*: skipped (PLINTH_CUDA_MMA_ATTN is off for this round)"
    else
        for p in $PP $((4 * PP)); do
            bench "$m-prompt$p" -m "$f" --backend cuda -p $p -n 0 -r $REPS
            without PLINTH_CUDA_MMA_ATTN "$m-prompt$p-nomma" -m "$f" --backend cuda -p $p -n 0 -r $REPS
        done
    fi
    # And once more as it ships, last, so that drift over the stage shows.
    bench "$m-single-again" -m "$f" --backend cuda -p 0 -n $TG -r $REPS
}

llama_model() { # M
    local m=$1 f; f=$(model_file "$1")
    local env; env="$(llama_env):$LD_LIBRARY_PATH"
    say "llama-bench $m"
    LD_LIBRARY_PATH=$env "$LB/llama-bench" -m "$f" -ngl 99 -p $PP -n $TG -r $REPS -o json >"$OUT/llama-$m-single.json" 2>>"$LOG" || say "exit $?"
    python3 - "$OUT/llama-$m-single.json" <<'EOF' 2>&1 | tee -a "$LOG"
import json, statistics, sys
for r in json.load(open(sys.argv[1])):
    print("  llama.cpp n_prompt=%d n_gen=%d %.1f t/s (median %.1f)" % (r["n_prompt"], r["n_gen"], r["avg_ts"], statistics.median(r["samples_ts"])))
EOF
    say "llama-batched-bench $m"
    LD_LIBRARY_PATH=$env "$LB/llama-batched-bench" -m "$f" -ngl 99 -npp $BPP -ntg $BTG -npl $BPAR -c $(((BPP + BTG) * BPAR + 256)) \
        --output-format jsonl >"$OUT/llama-$m-batched64.txt" 2>>"$LOG" || say "exit $?"
    grep speed_tg "$OUT/llama-$m-batched64.txt" | tee -a "$LOG"
}

ev() { # NAME BACKEND PARALLEL INPUT [EXTRA EVAL OPTIONS...]
    local name=$1 backend=$2 parallel=$3 input=$4
    shift 4
    say "plinth eval $name: --backend $backend --parallel $parallel --input $input $*"
    PLINTH_BACKEND=$backend "$P" eval -m "$(model_file smollm2)" --schema Benchmarks/eval/policy_clauses.schema.json \
        --instructions-file Benchmarks/eval/policy_instructions.txt --input "$input" \
        --output "$OUT/eval-$name.jsonl" --restart --quiet --parallel "$parallel" --max-tokens 96 --label targetGroup \
        --label effectDirection --summary "$OUT/eval-$name.json" "$@" 2>>"$LOG" || say "exit $?"
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print({k: v for k, v in s.items() if not isinstance(v, (list, dict))})" \
        "$OUT/eval-$name.json" 2>&1 | tee -a "$LOG"
}

eval_stage() {
    # Policy clauses (Benchmarks/eval; the 2-core CPU figure is in Benchmarks/README.md): the same
    # generator's 6,000 (its first 600 are the 600-record file), so that loading the model (in the
    # timed run) is a small part. --parallel is the sequences decoding at once (before 2026-12-05
    # a GPU ran 64 whatever it said): 64 is the earlier rounds' sizing. EVAL_PARALLEL sweeps others.
    python3 Benchmarks/eval/make_workload.py --records $EVN --out "$W/clauses.jsonl"
    for n in ${EVAL_PARALLEL:-$EVSWEEP}; do ev cuda-$n cuda $n "$W/clauses.jsonl"; done
    # The scheduler advances a step's decoders on one thread (before 2026-12-05), not on all cores.
    PLINTH_SCHEDULER_THREADS=1 ev cuda-$EVPAR-onethread cuda $EVPAR "$W/clauses.jsonl"
    # Sampled decoding (top-k 40 at 0.8): rows reduced to their best tokens on the device, and not.
    ev cuda-sampled cuda $EVPAR "$W/clauses.jsonl" --temperature 0.8 --top-k 40 --seed 1
    PLINTH_CUDA_TOPK=0 ev cuda-sampled-fullrows cuda $EVPAR "$W/clauses.jsonl" --temperature 0.8 --top-k 40 --seed 1
    cmp -s "$OUT/eval-cuda-sampled.jsonl" "$OUT/eval-cuda-sampled-fullrows.jsonl" &&
        say "sampled eval: the same output with and without the top-k reduction" ||
        say "sampled eval: outputs differ with and without the top-k reduction"
}

fidelity_stage() {
    # The F32 reference is the file's own dequantization (plinth quantize --type F32, which is
    # llama-quantize's F32 byte for byte); its log-probabilities on the GPL-3 text (-c 512, 20
    # chunks at most) are the base each run is compared with.
    local TEXT=/usr/share/common-licenses/GPL-3 M; M=$(model_file smollm2)
    [ -f "$TEXT" ] || TEXT="$W/stash/GPL-3"
    say "fidelity: F32 reference of SmolLM2 and its log-probabilities (CPU)"
    [ -f "$W/smol-f32.gguf" ] || "$P" quantize -m "$M" --type F32 -o "$W/smol-f32.gguf" >>"$LOG" 2>&1 || say "exit $?"
    "$P" perplexity -m "$W/smol-f32.gguf" -f "$TEXT" -c $CTX --chunks $CHUNKS --backend cpu --kl-divergence-base "$W/smol-f32.kld" \
        2>&1 | grep -E "Final|error" | tee -a "$LOG"
    kld() { # NAME BACKEND BATCH [ENV...]
        local name="$1" b="$2" batch="$3"; shift 3
        say "fidelity $name: --backend $b -b $batch $*"
        env "$@" "$P" perplexity -m "$M" --kl-divergence --kl-divergence-base "$W/smol-f32.kld" --backend "$b" -b "$batch" \
            >"$OUT/kld-$name.txt" 2>&1 || say "exit $?"
        grep -E "Mean +KLD|Same top|RMS Δp|Mean PPL\(Q\)|error" "$OUT/kld-$name.txt" | tee -a "$LOG"
    }
    kld cpu cpu $CTX
    kld cuda-prefill cuda $CTX
    kld cuda-steps8 cuda 8
    kld cuda-steps8-float cuda 8 PLINTH_CUDA_INT8=0
    # Decoding's own paths: one and two rows a step run the fused launches (the norm and the GLU
    # inside the products), whose arithmetic differs from 3-8 rows'. The rehearsal runs one
    # (a step costs the emulator seconds whatever its rows).
    kld cuda-steps1 cuda 1
    [ -n "${ROUND_SMOKE:-}" ] || kld cuda-steps2 cuda 2
}

agree_stage() {
    local M; M=$(model_file smollm2)
    say "greedy generation, CPU vs CUDA (chat, $GEN tokens)"
    local same=0 total=0 prompt b r
    while IFS= read -r prompt; do
        for b in cpu cuda; do
            "$P" generate -m "$M" --backend $b --chat --greedy -n $GEN -p "$prompt" >"$W/gen-$b.txt" 2>"$W/gen-$b.err"
        done
        total=$((total + 1))
        if cmp -s "$W/gen-cpu.txt" "$W/gen-cuda.txt"; then same=$((same + 1)); r=same; else r=DIFFERENT; fi
        { echo "-- $prompt: $r ($(tail -n 1 "$W/gen-cuda.err"))"; echo "   cpu:  $(tr '\n' ' ' <"$W/gen-cpu.txt")"
          echo "   cuda: $(tr '\n' ' ' <"$W/gen-cuda.txt")"; } >>"$LOG"
    done < <(head -n $PROMPTS <<'EOF'
What is the capital of France?
Write a haiku about Linux.
Explain recursion in one sentence.
List three primary colors.
What is 12 times 12?
Give me a name for a pet turtle.
Why is the sky blue?
Translate 'good morning' into Spanish.
EOF
)
    say "greedy agreement: $same of $total identical"
    # plinth eval's values on the CPU (600 records; 16 threads) against CUDA's on the same records.
    head -n $((EVN < 600 ? EVN : 600)) Benchmarks/eval/policy_clauses.jsonl >"$W/clauses600.jsonl"
    ev cpu-16 cpu 16 "$W/clauses600.jsonl"
    [ -f "$OUT/eval-cuda-$EVPAR.jsonl" ] || ev cuda-$EVPAR cuda $EVPAR "$W/clauses600.jsonl"
    python3 - "$OUT/eval-cuda-$EVPAR.jsonl" "$OUT/eval-cpu-16.jsonl" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
a, b = ({r["id"]: r.get("value") for r in map(json.loads, open(p))} for p in sys.argv[1:3])
same = sum(a.get(i) == v for i, v in b.items())
print(f"plinth eval values, CUDA vs CPU (16 threads), the first {len(b)} records: {same} identical")
for i in [i for i, v in b.items() if a.get(i) != v][:10]: print(f"  {i}: cuda {a.get(i)}\n         cpu  {b[i]}")
EOF
}

profile_stage() {
    # Kernel durations of decode steps (ncu, one launch at a time, no graphs): where a token's
    # time goes, per kernel name, for each model; skips the load and the prompt.
    command -v ncu >/dev/null || { say "no ncu"; return 0; }
    local m
    for m in $(models_here); do
        say "ncu: decode kernels of $m"
        PLINTH_CUDA_GRAPHS=0 timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 3000 --launch-count 900 \
            "$P" bench -m "$(model_file "$m")" --backend cuda -p 16 -n 64 -r 1 --no-warmup >"$OUT/ncu-$m.csv" 2>>"$LOG" || say "exit $?"
        python3 - "$OUT/ncu-$m.csv" <<'EOF' 2>&1 | tee -a "$LOG"
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
EOF
    done
}

# The issue's targets from what has been measured so far. The eval target's base: plinth eval
# on the 2-core CPU, the 600 clauses at --parallel 16 (Benchmarks/README.md: 22.28 records/s on
# 2026-11-25; 26.91 on 2026-12-05, the highest of four runs).
summary() {
    python3 - "$OUT" "$PP" "$TG" "$BPAR" "${ROUND_CPU_EVAL_RPS:-26.91}" <<'EOF' 2>&1 | tee "$OUT/summary.txt"
import glob, json, os, re, statistics, sys
out, pp, tg, par, cpu_rps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def load(p):
    try: return json.load(open(os.path.join(out, p)))
    except Exception: return None
def plinth(m, kind, name="single"):
    d = load(f"plinth-{m}-{name}.json")
    for r in (d or {}).get("results", []):
        if r["kind"] == kind and (name != "single" or r["sequences"] == 1): return r["median_ts"]
def llama(m, kind):
    d = load(f"llama-{m}-single.json") or []
    for r in d:
        if (kind == "pp" and r["n_prompt"] == pp and r["n_gen"] == 0) or (kind == "tg" and r["n_gen"] == tg and r["n_prompt"] == 0):
            return r["avg_ts"]
def llama_batched(m):
    try:
        for line in open(os.path.join(out, f"llama-{m}-batched64.txt")):
            if '"speed_tg"' in line: return json.loads(line)["speed_tg"]
    except Exception: return None
rows = []
for m in ("smollm2", "qwen-rep"):
    for label, a, b, target in ((f"tg{tg}", plinth(m, "tg"), llama(m, "tg"), 1.2), (f"pp{pp}", plinth(m, "pp"), llama(m, "pp"), 1.0),
                                (f"batched decode x{par}", plinth(m, "tg", "batched64"), llama_batched(m), 1.5)):
        if a is None and b is None: continue
        ratio = a / b if a and b else None
        rows.append((m, label, a, b, ratio, target))
# A device call that ended test_cuda, without the call's argument list.
short = lambda line: re.sub(r"(\w+)\(.*\) -> ", r"\1(...) -> ", line)
try:
    for line in open(os.path.join(out, "fallbacks.txt")):
        print(f"OFF in this round's plinth runs (its kernel tests failed here): {short(line.strip())}")
except OSError: pass
print("| model | test | plinth t/s | llama.cpp t/s | ratio | target |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
f = lambda x, d=1: "—" if x is None else f"{x:,.{d}f}"
for m, label, a, b, r, t in rows:
    print(f"| {m} | {label} | {f(a)} | {f(b)} | {f(r, 2)}{'' if r is None else (' ✓' if r >= t else ' ✗')} | {t}× |")
for m in ("qwen-rep", "smollm2"):
    base = plinth(m, "tg", "single-again") or plinth(m, "tg")
    offs = [(n, plinth(m, "tg", f"single-no{n}")) for n in ("graphs", "normfuse", "glu", "overlap", "pdl", "rope", "unify")]
    offs = [(n, v) for n, v in offs if v]
    if base and offs:
        print(f"{m} tg{tg} with one launch saving off, against {base:,.1f} t/s as shipped: "
              + ", ".join(f"no{n} {v:,.1f} ({v / base:.2f}×)" for n, v in offs))
    pair = [(k, plinth(m, k, "batched64-nof16"), plinth(m, k, "batched64")) for k in ("pp", "tg")]
    if all(a and b for _, a, b in pair):
        print(f"{m} batched x{par} without the f16 weight copies: " + ", ".join(f"{k} {a:,.1f} t/s ({a / b:.2f}× with)" for k, a, b in pair))
    for p in (pp, 4 * pp):
        a, b = plinth(m, "pp", f"prompt{p}"), plinth(m, "pp", f"prompt{p}-nomma")
        if a and b: print(f"{m} pp{p}: {a:,.1f} t/s with the prompt's attention on tensor cores, {b:,.1f} without ({a / b:.2f}×)")
    d = load(f"plinth-{m}-single.json")
    k = re.search(r"(\d+) kernels a decode step", (d or {}).get("backend", ""))
    if k: print(f"{m}: {k.group(1)} kernels a decode step")
a, b = plinth("smollm2", "tg", "batched64-adapter"), plinth("smollm2", "tg", "batched64")
if a and b: print(f"smollm2 batched decode x{par} with an unmerged adapter on every sequence: {a:,.1f} t/s, {a / b:.2f}× without")
for p in sorted(glob.glob(os.path.join(out, "eval-*.json"))):
    name = os.path.basename(p)[5:-5]
    if name.endswith(".jsonl.run"): continue
    s = load(os.path.basename(p))
    if not s or "recordsPerSecond" not in s:
        print(f"eval {name}: no summary"); continue
    extra = f", {s['recordsPerSecond'] / float(cpu_rps):.1f}× the 2-core CPU's {cpu_rps}" if cpu_rps and name.startswith("cuda-") and name[5:].isdigit() else ""
    print(f"eval {name}: {s['recordsPerSecond']:.1f} records/s, {s['validValues']}/{s['records']} valid{extra}")
for p in sorted(glob.glob(os.path.join(out, "kld-*.txt"))):
    text = open(p).read(); k = re.search(r"Mean +KLD\s*:\s*([-0-9.e]+)", text); t = re.search(r"Same top p\s*:\s*([0-9.]+)", text)
    print(f"fidelity {os.path.basename(p)[4:-4]}: mean KLD {k.group(1) if k else '?'}, same top {t.group(1) if t else '?'} %")
for p in sorted(glob.glob(os.path.join(out, "kernel-tests-*.log"))):
    lines = open(p).read().strip().splitlines()
    print(f"{os.path.basename(p)[:-4]}: {short(lines[-1]) if lines else 'no output'}")
EOF
    say "device time so far: $(($(date +%s) - $(cat "$W/t0"))) s since the first call began"
}

# --- the call driver --------------------------------------------------------------------------

# NAME ESTIMATE(s, an H100's) NEEDS... in priority order.
STAGES="kernels-quick:90:devbin bench-qwen-rep:40:plinth,qwen-rep llama-qwen-rep:45:qwen-rep,llama
bench-smollm2:30:plinth,smollm2 llama-smollm2:35:smollm2,llama ablate-qwen-rep:80:plinth,qwen-rep eval:112:plinth,smollm2
fidelity:90:plinth,smollm2 agree:80:plinth,smollm2 ablate-smollm2:42:plinth,smollm2 attention:25:devbin kernels-full:200:devbin
profile:150:plinth,smollm2"
ready() { # NEEDS (comma-separated): 0 ready, 1 waits for a carry, 2 waits for llama.cpp's build
    local n w=0
    for n in $(echo "$1" | tr , ' '); do
        case $n in
            devbin) [ -x "$W/devbin/test_cuda" ] || return 1 ;;
            plinth) [ -f "$W/plinth-ok" ] || return 1 ;;
            llama) llama_ready || w=2 ;;
            *) have_model "$n" || return 1 ;;
        esac
    done
    return $w
}
run_stage() {
    local t=$(date +%s) st=$1
    case $st in
        kernels-quick) kernels quick ;;
        kernels-full) kernels full ;;
        bench-*) bench_model "${st#bench-}" ;;
        llama-*) llama_model "${st#llama-}" ;;
        ablate-*) ablate_model "${st#ablate-}" ;;
        eval) eval_stage ;;
        fidelity) fidelity_stage ;;
        agree) agree_stage ;;
        profile) profile_stage ;;
        attention) attention_stage ;;
        *) echo "no stage $st" >&2; return 2 ;;
    esac
    touch "$W/done/$st"
    say "stage $st took $(($(date +%s) - t)) s"
}

load_fallbacks
case "${1:-}" in
call)
    start=$(date +%s) budget=${ROUND_CALL_SECONDS:-420}
    [ -f "$W/machine-done" ] || { machine; touch "$W/machine-done"; }
    [ -n "${2:-}" ] && stash ".devcarry/c$2"
    unpack
    # A stage that waits for a carry holds back the stages after it (they would delay its bytes);
    # one that waits for llama.cpp's build does not.
    left="" held=""
    for entry in $STAGES; do
        IFS=: read -r st est needs <<<"$entry"
        [ -f "$W/done/$st" ] && continue
        ready "$needs"; r=$?
        if [ $r -eq 1 ]; then left="$left $st(waits)"; held=1; continue; fi
        if [ $r -eq 2 ]; then left="$left $st(waits for llama.cpp)"; continue; fi
        if [ -n "$held" ] || [ $(($(date +%s) - start + est)) -gt "$budget" ]; then left="$left $st"; continue; fi
        run_stage "$st"
    done
    summary
    say "left for later calls:${left:- nothing}" ;;
run)
    run_stage "${2:?run STAGE}" && summary ;;
stash) stash "${2:?stash DIR}" ;;
unpack) unpack ;;
summary) summary ;;
*)
    sed -n 2,27p "$0"; exit 2 ;;
esac
