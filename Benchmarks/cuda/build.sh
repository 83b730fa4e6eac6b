#!/bin/sh
# Builds test_cuda, bench_cuda and compile_cuda (x86-64 Linux) into $1 (default .devcarry/, git-ignored): the CPU
# kernels (Kernels/*.c) and PlinthCUDA compiled directly, OpenBLAS linked statically, so the
# binaries need only libc, libm, libdl and libpthread where they run. No CUDA is needed to build.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/.devcarry}
CC=${CC:-$(command -v clang || echo cc)}
obj=${TMPDIR:-/tmp}/plinth-cuda-obj
mkdir -p "$out" "$obj"
"$here/embed.sh" --check
# The library's own warning gate: C11, every warning an error, no CUDA headers anywhere.
for f in "$root"/Sources/PlinthCUDA/*.c; do
    "$CC" -std=c11 -Wall -Wextra -Werror -O2 -fPIC -I"$root/Sources/PlinthCUDA/include" -c "$f" -o "$obj/$(basename "$f" .c).o"
done
rm -f "$obj/libpk.a"
for f in "$root"/Kernels/*.c; do
    "$CC" -std=gnu11 -O2 -D_GNU_SOURCE -w -I"$root/Kernels/include" -I/usr/include/x86_64-linux-gnu/openblas-pthread \
        -c "$f" -o "$obj/k_$(basename "$f" .c).o"
done
# An archive, so that each program takes only the kernels it uses (the benchmark needs no BLAS).
ar rcs "$obj/libpk.a" "$obj"/k_*.o
blas=
for f in /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.a \
    /usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.a /usr/lib/x86_64-linux-gnu/libopenblas.a; do
    [ -f "$f" ] && { blas=$f; break; }
done
[ -n "$blas" ] || { echo "build.sh: no static OpenBLAS (libopenblas.a; Scripts/bootstrap installs libopenblas-dev)" >&2; exit 1; }
for prog in test_cuda bench_cuda compile_cuda; do
    "$CC" -std=gnu11 -O2 -Wall -Wextra -Werror -Wno-unused-function -I"$root/Sources/PlinthCUDA/include" -I"$root/Kernels/include" \
        -s -o "$out/$prog" "$here/$prog.c" "$obj"/pk_cuda.o "$obj"/pkc_kernels_src.o "$obj/libpk.a" "$blas" \
        -lm -ldl -lpthread
done
echo "built $out/test_cuda, $out/bench_cuda and $out/compile_cuda"
