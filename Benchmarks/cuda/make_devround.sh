#!/bin/sh
# Fills .devcarry/c1, c2, ... (git-ignored) for Benchmarks/cuda/device_round.sh: each folder is
# one `device` call's carry, under the tool's 64 MiB together with the working tree (which
# travels with every call), so the number of folders follows the tree's size. Prints the calls.
#
#   sh Benchmarks/cuda/make_devround.sh [--llama DIR] [--no-llama-src]
#
# Everything travels as one stream of files, cut into pay.part-NN (one per carry), in the order
# the device needs them, so that each call's stages can start on what has arrived:
#   plinth.xz          the static plinth, stripped
#   libs.tar.xz        its libraries beyond glibc/libstdc++ (OpenBLAS, LAPACKE and theirs)
#   devbin.tar.xz      test_cuda, bench_cuda, compile_cuda (Benchmarks/cuda/build.sh)
#   GPL-3              the fidelity stage's text
#   lb.tar.xz          llama-bench and llama-batched-bench built with CUDA here, and
#   llama-src.tar.xz   their source, built on the device only if the carried tools do not run
#                      there (--no-llama-src leaves it out): both from DIR, the folder of
#                      Benchmarks/cuda/build_llama_cuda.sh (default $PLINTH_HOME/llama-cuda, else
#                      ~/.cache/plinth/llama-cuda)
#   qwen-rep.gguf.xz   Qwen2.5-Coder-0.5B's shape and types: layers 0 and 4 (ffn_down Q6_K/attn_v
#                      Q8_0 and Q4_K/Q5_0, as the real model mixes them) alternating 24 deep,
#                      token_embd/output rows repeating their first 2048 (the same bytes read per
#                      token; xz finds the repeats)
#   smollm2.gguf.xz    SmolLM2 Q4_1 (the catalog file)
# c1 also holds pay.manifest: one line per file, in stream order: name, bytes, sha256.
#
# Needs: the static build (swift build -c release --static-swift-stdlib --scratch-path
# .build-static --product plinth), both catalog models fetched, xz.
set -eu
cd "$(dirname "$0")/../.."
llama=${PLINTH_HOME:-$HOME/.cache/plinth}/llama-cuda
src=1
while [ $# -gt 0 ]; do
    case $1 in
        --llama) llama=$2; shift 2 ;;
        --no-llama-src) src=; shift ;;
        *) sed -n 2,31p "$0"; exit 2 ;;
    esac
done
[ -f "$llama/lb.tar.xz" ] || [ -f "$llama/llama-src.tar.xz" ] ||
    { echo "no llama.cpp in $llama (run Benchmarks/cuda/build_llama_cuda.sh)" >&2; exit 1; }
D=.devcarry
T=${TMPDIR:-/tmp}/plinth-devround
# xz -9 of the models takes minutes on 2 cores: kept by content, for the next time.
cache=${PLINTH_HOME:-$HOME/.cache/plinth}/devround
rm -rf "$D" "$T"
mkdir -p "$D/c1" "$T/items" "$T/lib" "$cache"
I=$T/items

cp .build-static/release/plinth "$T/plinth" && strip "$T/plinth"
xz -T2 -9 -c "$T/plinth" >"$I/plinth.xz"
for lib in $(ldd "$T/plinth" | awk '/=>/ {print $3}'); do
    case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
        *) cp -L "$lib" "$T/lib/" ;;
    esac
done
tar cf - -C "$T/lib" . | xz -T2 -9 >"$I/libs.tar.xz"
sh Benchmarks/cuda/build.sh "$T/devbin" >/dev/null
tar cf - -C "$T" devbin | xz -T2 -9 >"$I/devbin.tar.xz"
cp /usr/share/common-licenses/GPL-3 "$I/"
[ -f "$llama/lb.tar.xz" ] && cp "$llama/lb.tar.xz" "$I/"
[ -n "$src" ] && [ -f "$llama/llama-src.tar.xz" ] && cp "$llama/llama-src.tar.xz" "$I/"

PLINTH=.build-static/release/plinth
python3 Benchmarks/cuda/gguf_layers.py "$($PLINTH models path qwen2.5-coder)" "$T/qwen-rep.gguf" \
    --layers "$(python3 -c "print(','.join(['0,4'] * 12))")" --periodic 2048
for m in qwen-rep smollm2; do
    f=$T/$m.gguf; [ "$m" = smollm2 ] && f=$($PLINTH models path smollm2)
    sum=$(sha256sum "$f" | cut -d' ' -f1)
    [ -f "$cache/$sum.xz" ] || { xz -T2 -9 -c "$f" >"$cache/$sum.xz.tmp" && mv "$cache/$sum.xz.tmp" "$cache/$sum.xz"; }
    ln -s "$cache/$sum.xz" "$I/$m.gguf.xz"
done

: >"$D/c1/pay.manifest"
for name in plinth.xz libs.tar.xz devbin.tar.xz GPL-3 lb.tar.xz llama-src.tar.xz qwen-rep.gguf.xz smollm2.gguf.xz; do
    [ -e "$I/$name" ] || continue
    echo "$name $(stat -L -c %s "$I/$name") $(sha256sum "$I/$name" | cut -d' ' -f1)" >>"$D/c1/pay.manifest"
    cat "$I/$name" >>"$T/pay.bin"
done

# The stream in pieces that fill each carry: what the folder already holds plus its piece stays
# under the call's limit with the tree (apparent sizes, as the tool counts them).
tree=$(git ls-files -z -co --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s}')
room=$((67108864 - tree - 1000000))
total=$(stat -c %s "$T/pay.bin")
offset=0 i=1
while [ "$offset" -lt "$total" ]; do
    mkdir -p "$D/c$i"
    used=$(du -cb "$D/c$i" | tail -n 1 | cut -f1)
    take=$((room - used))
    tail -c +$((offset + 1)) "$T/pay.bin" | head -c "$take" >"$D/c$i/pay.part-$(printf %02d "$i")"
    offset=$((offset + take)) i=$((i + 1))
done
n=$((i - 1))
rm -f "$T/pay.bin"

# Which call completes which file (what the stages can start on).
awk -v room="$room" '{ end += $2; c = int((end + room - 1) / room); printf "  %-18s %6.1f MB  complete after call %d\n", $1, $2 / 1e6, c }' "$D/c1/pay.manifest"
echo "tree $tree bytes; each call carries at most $room bytes; $total bytes in $n carries"
echo "The calls (the device tool's run), back to back, each within the 30 s the machine stays warm:"
for k in $(seq 1 "$n"); do
    echo "  command: bash Benchmarks/cuda/device_round.sh call $k    carry: [\".devcarry/c$k\"]    timeout_s: 600"
done
echo "  command: bash Benchmarks/cuda/device_round.sh call    (no carry; again while its last line names stages left)"
echo "then give_back at once."
