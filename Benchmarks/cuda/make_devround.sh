#!/bin/sh
# Fills .devcarry/c1 ... c3 (git-ignored) for Benchmarks/cuda/device_round.sh: each folder is one
# `device` call's carry, under the tool's 64 MiB with the working tree (~17 MB).
#
#   sh Benchmarks/cuda/make_devround.sh [LLAMA]
#
#   c1  plinth.xz (static, stripped), lib/*.xz (its libraries beyond glibc/libstdc++),
#       devbin.tar.xz (test_cuda, bench_cuda), LLAMA, smol.part-1
#   c2  smol.part-2                    SmolLM2 Q4_1 (the catalog file), xz'd and split
#   c3  smol.part-3, qwen-rep.gguf.xz  Qwen2.5-Coder-0.5B's shape and types: layers 0 and 4 (ffn_down
#                                      Q6_K/attn_v Q8_0 and Q4_K/Q5_0, as the real model mixes them)
#                                      alternating 24 deep, token_embd/output rows repeating their
#                                      first 2048 (the same bytes read per token; xz finds the repeats)
#   LLAMA: llama-src.tar.xz (llama.cpp's source from the llama-cpp-python sdist, trimmed: see
#   Benchmarks/cuda/README.md) or lb.tar.xz (its build/bin from an earlier round:
#   `tar cf - llama-bench llama-batched-bench *.so*`). In c1, so that llama.cpp's CUDA build runs
#   in the background while plinth's stages run.
#
# Calls, one after another within the machine's 30 s warm window:
#   c1: stash .devcarry/c1 && setup && kernels      (setup starts llama.cpp's build, or unpacks lb.tar.xz)
#   c2: stash .devcarry/c2
#   c3: stash .devcarry/c3 && models && plinth      then: eval && llama
# Needs: the static build (swift build -c release --static-swift-stdlib --scratch-path .build-static
# --product plinth), both catalog models fetched, xz.
set -eu
cd "$(dirname "$0")/../.."
D=.devcarry
T=${TMPDIR:-/tmp}/plinth-devround
rm -rf "$D" "$T"
mkdir -p "$D/c1/lib" "$D/c2" "$D/c3" "$T"
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
if [ -n "${1:-}" ]; then cp "$1" "$D/c1/"; fi

PLINTH=.build-static/release/plinth
xz -T1 -9 -c "$($PLINTH models path smollm2)" >"$T/smol.xz"
QWEN="$($PLINTH models path qwen2.5-coder)"
python3 Benchmarks/cuda/gguf_layers.py "$QWEN" "$T/qwen-rep.gguf" \
    --layers "$(python3 -c "print(','.join(['0,4'] * 12))")" --periodic 2048
xz -T1 -9 -c "$T/qwen-rep.gguf" >"$D/c3/qwen-rep.gguf.xz"

# smol.xz split so that c1 and c2 fill their carries (50 MB each at most with the tree).
tree=$(git ls-files -z -co --exclude-standard | xargs -0 du -cb | tail -n 1 | cut -f1)
room=$((67108864 - tree - 500000))
c1=$(du -cb "$D/c1" | tail -n 1 | cut -f1)
first=$((room - c1))
head -c "$first" "$T/smol.xz" >"$D/c1/smol.part-1"
tail -c +$((first + 1)) "$T/smol.xz" | head -c "$room" >"$D/c2/smol.part-2"
tail -c +$((first + room + 1)) "$T/smol.xz" >"$D/c3/smol.part-3"

du -sb "$D"/c*
echo "tree $tree bytes; each call carries at most $((67108864 - tree)) bytes"
