#!/bin/sh
# Fills .devcarry/c1, c2, ... (git-ignored) for Benchmarks/cuda/device_round.sh: each folder is one
# `device` call's carry, under the tool's 64 MiB together with the working tree (which travels
# with every call), so the number of folders follows the tree's size.
#
#   sh Benchmarks/cuda/make_devround.sh [LLAMA]
#
#   c1  plinth.xz (static, stripped), lib/*.xz (its libraries beyond glibc/libstdc++),
#       devbin.tar.xz (test_cuda, bench_cuda, compile_cuda), GPL-3 (the fidelity stage's text), then the first
#       part of the models
#   c2  LLAMA, then the next part of the models
#   c3… the rest of the models: pay.part-NN, pieces of one tar of
#         smollm2.gguf.xz   SmolLM2 Q4_1 (the catalog file)
#         qwen-rep.gguf.xz  Qwen2.5-Coder-0.5B's shape and types: layers 0 and 4 (ffn_down
#                           Q6_K/attn_v Q8_0 and Q4_K/Q5_0, as the real model mixes them)
#                           alternating 24 deep, token_embd/output rows repeating their first
#                           2048 (the same bytes read per token; xz finds the repeats)
#   LLAMA: llama-src.tar.xz (llama.cpp's source from the llama-cpp-python sdist, without its
#   models/, docs/ and the ggml backends other than CPU and CUDA) or lb.tar.xz (its build/bin
#   from an earlier round: `tar cf - llama-bench llama-batched-bench *.so*`). In c2, so that
#   llama.cpp's CUDA build runs in the background while plinth's stages run.
#
# Calls, one after another within the machine's 30 s warm window:
#   c1: stash .devcarry/c1 && setup && kernels
#   c2: stash .devcarry/c2 && setup                 (setup starts llama.cpp's build, or unpacks lb.tar.xz)
#   c3…: stash .devcarry/cN                         the last one then: models && plinth; then eval, fidelity, llama
# Needs: the static build (swift build -c release --static-swift-stdlib --scratch-path .build-static
# --product plinth), both catalog models fetched, xz.
set -eu
cd "$(dirname "$0")/../.."
D=.devcarry
T=${TMPDIR:-/tmp}/plinth-devround
rm -rf "$D" "$T"
mkdir -p "$D/c1/lib" "$D/c2" "$T/pay"
cp .build-static/release/plinth "$T/plinth" && strip "$T/plinth"
xz -T2 -6 -c "$T/plinth" >"$D/c1/plinth.xz"
for lib in $(ldd "$T/plinth" | awk '/=>/ {print $3}'); do
    case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
        *) xz -T2 -6 -c "$lib" >"$D/c1/lib/$(basename "$lib").xz" ;;
    esac
done
sh Benchmarks/cuda/build.sh "$T/devbin" >/dev/null
tar cf - -C "$T" devbin | xz -T2 -6 >"$D/c1/devbin.tar.xz"
cp /usr/share/common-licenses/GPL-3 "$D/c1/"
if [ -n "${1:-}" ]; then cp "$1" "$D/c2/"; fi

PLINTH=.build-static/release/plinth
xz -T2 -9 -c "$($PLINTH models path smollm2)" >"$T/pay/smollm2.gguf.xz"
QWEN="$($PLINTH models path qwen2.5-coder)"
python3 Benchmarks/cuda/gguf_layers.py "$QWEN" "$T/qwen-rep.gguf" \
    --layers "$(python3 -c "print(','.join(['0,4'] * 12))")" --periodic 2048
xz -T2 -9 -c "$T/qwen-rep.gguf" >"$T/pay/qwen-rep.gguf.xz"
tar cf "$T/pay.tar" -C "$T/pay" .

# The payload in pieces that fill each carry: what the folder already holds plus its piece stays
# under the call's limit with the tree.
tree=$(git ls-files -z -co --exclude-standard | xargs -0 du -cb | tail -n 1 | cut -f1)
room=$((67108864 - tree - 1000000))
total=$(stat -c %s "$T/pay.tar")
offset=0 i=1
while [ "$offset" -lt "$total" ]; do
    mkdir -p "$D/c$i"
    used=$(du -cb "$D/c$i" | tail -n 1 | cut -f1)
    take=$((room - used))
    [ "$take" -gt 0 ] || { echo "c$i is already over its room ($used of $room bytes)" >&2; exit 1; }
    tail -c +$((offset + 1)) "$T/pay.tar" | head -c "$take" >"$D/c$i/pay.part-$(printf %02d "$i")"
    offset=$((offset + take)) i=$((i + 1))
done

du -sb "$D"/c*
echo "tree $tree bytes; each call carries at most $((67108864 - tree)) bytes; $((i - 1)) calls"
