#!/bin/bash
# Rehearses a device round here, without a GPU: the calls that make_devround.sh prints, each run
# as the device tool runs it (from the repository root, $OUT an empty folder), one after another,
# on the CPU emulator of a CUDA device (emu/) and at toy sizes (ROUND_SMOKE=1). Every stage's
# command lines, the carries' unpacking, the models' assembly and the summary run as they will on
# the device; a mistake found here costs no device minutes. llama.cpp's carried CUDA build runs on
# the CPU here (it finds no device: the emulator is not a driver it can use).
#
#   Benchmarks/cuda/rehearse.sh        (after make_devround.sh; ~20 min on 2 cores)
#
# Fails if a call fails or a stage is left undone; the last call's summary.txt is printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=${TMPDIR:-/tmp}
emu=$tmp/plinth-cuda-emu
Benchmarks/cuda/emu/build.sh "$emu" >/dev/null
# No call budget: the emulator's times are not a device's.
export LD_LIBRARY_PATH=$emu PLINTH_CUDA_LIB_DIR=$emu ROUND_SMOKE=1 ROUND_DIR=$tmp/pd-rehearsal ROUND_CALL_SECONDS=100000
# The carried llama.cpp tools load the CUDA runtime and cuBLAS, from build_llama_cuda.sh's wheels here.
wheels=${PLINTH_HOME:-$HOME/.cache/plinth}/llama-cuda/cuda/nvidia/cu13/lib
[ -d "$wheels" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$wheels
rm -rf "$ROUND_DIR"
n=$(ls -d .devcarry/c* | wc -l)
[ "$n" -gt 0 ] || { echo "rehearse: no .devcarry/c1 (run make_devround.sh first)" >&2; exit 1; }
out=$tmp/pd-rehearsal-out
for k in $(seq 1 "$n") "" ""; do
    rm -rf "$out" && mkdir -p "$out"
    echo "--- call $k"
    OUT=$out bash Benchmarks/cuda/device_round.sh call $k 2>&1 | tail -n 30
    [ -f "$out/round.tar.xz" ] && [ -f "$out/summary.txt" ] || { echo "rehearse: call $k brought nothing back" >&2; exit 1; }
done
cat "$out/summary.txt"
missing=$(for st in kernels-quick bench-qwen-rep llama-qwen-rep bench-smollm2 llama-smollm2 ablate-qwen-rep eval fidelity agree ablate-smollm2 kernels-full; do
    [ -f "$ROUND_DIR/done/$st" ] || echo "$st"; done)
[ -z "$missing" ] || { echo "rehearse: stages not done: $missing" >&2; exit 1; }
# Every stage wrote what the summary reads.
grep -q "qwen-rep | tg" "$out/summary.txt" && grep -q "smollm2 | batched" "$out/summary.txt" &&
    grep -q "^eval cuda-" "$out/summary.txt" && grep -q "^fidelity cuda-steps8:" "$out/summary.txt" ||
    { echo "rehearse: the summary lacks a stage's figures" >&2; exit 1; }
# Guided generation is valid by construction: every eval record a value, every value valid.
python3 - "$ROUND_DIR"/out/eval-*.json <<'EOF' || { echo "rehearse: an eval run has errors or invalid values" >&2; exit 1; }
import json, sys
bad = [p for p in sys.argv[1:] if not p.endswith(".run.json") and json.load(open(p))["validValues"] != json.load(open(p))["records"]]
print("\n".join(bad)); sys.exit(1 if bad else 0)
EOF
if grep -E "exit [0-9]+|No such file|command not found|Traceback|unrecognized|Error:" "$ROUND_DIR/out/round.log"; then
    echo "rehearse: the round's log has errors (above)" >&2; exit 1
fi
echo "rehearse: every call and stage ran"
