#!/bin/sh
# llama-imatrix's two file formats of the same run, for ImportanceMatrix's reader: the tiny Qwen3
# of Fixtures/architectures on a fixed text of 400 words, 64-token chunks, written as GGUF and as
# the legacy .dat. Dev-time only: $1 is a folder of llama.cpp's tools (Benchmarks/build_llama_cpp.sh).
set -eu
bin=${1:?usage: make_imatrix_fixtures.sh LLAMA_BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
model=$here/../architectures/qwen3-tiny.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -c "
import random
random.seed(1)
words = 'the quick brown fox jumps over lazy dog then naps and runs far away from home into woods'.split()
print(' '.join(random.choice(words) for _ in range(400)))" > "$work/calibration.txt"
cd "$work"
"$bin/llama-imatrix" -m "$model" -f calibration.txt -c 64 -t 2 --no-ppl -o qwen3-tiny.imatrix.gguf >/dev/null 2>&1
"$bin/llama-imatrix" -m "$model" -f calibration.txt -c 64 -t 2 --no-ppl -o qwen3-tiny.imatrix.dat --output-format dat >/dev/null 2>&1
cp qwen3-tiny.imatrix.gguf qwen3-tiny.imatrix.dat "$here/"
echo "wrote $here/qwen3-tiny.imatrix.gguf and .dat"
