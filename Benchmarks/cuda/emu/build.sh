#!/bin/sh
# Builds the CPU emulator of a CUDA device into $1 (default: $TMPDIR/plinth-cuda-emu): one
# library, libpkcemu.so, linked as libcuda.so.1, libnvrtc.so and libcublas.so, so that
#   LD_LIBRARY_PATH=$1 PLINTH_CUDA_LIB_DIR=$1 <program>
# runs PlinthCUDA (test_cuda, plinth --backend cuda, the Swift tests) on the CPU. Each kernel
# module of pkc_kernels.cu is compiled as host C++ (emu_module.cpp) twice: once to list its
# kernels (nm), once with that list registered. Needs g++ (or $CXX) and OpenBLAS's headers.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-${TMPDIR:-/tmp}/plinth-cuda-emu}
CXX=${CXX:-$(command -v g++ || command -v clang++ || echo c++)}
obj=$out/obj
mkdir -p "$out" "$obj"
src=$root/Sources/PlinthCUDA
"$root/Benchmarks/cuda/embed.sh" --check
blas_inc=
for d in /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/x86_64-linux-gnu/openblas-openmp \
    /usr/include/x86_64-linux-gnu/openblas-serial /usr/include/openblas /usr/include; do
    [ -f "$d/cblas.h" ] && { blas_inc=$d; break; }
done
[ -n "$blas_inc" ] || { echo "emu/build.sh: no cblas.h (apt install libopenblas-dev)" >&2; exit 1; }
# -ffp-contract=off: the device's __fmul_rn/__fadd_rn are single roundings, never fused.
flags="-std=c++17 -O2 -g0 ${PKC_EMU_CXXFLAGS:-} -fPIC -ffp-contract=off -fno-strict-aliasing -Wall -Wno-unused-function -Wno-unused-variable -Wno-unused-but-set-variable -Wno-unknown-pragmas -Wno-sign-compare -I$here -I$src -I$root/Kernels -I$blas_inc"
# The modules: the core one (-1) and one per format the source has.
formats="-1 $(sed -n 's/^#if PKC_FORMAT == \([0-9]*\)$/\1/p' "$src/pkc_kernels.cu" | tr '\n' ' ')"
module() {
    f=$1
    tag=m$(echo "$f" | tr -- '-' 'n')
    $CXX $flags -O0 -DPKC_FORMAT="$f" -DPKC_EMU_NS="$tag" -c "$here/emu_module.cpp" -o "$obj/$tag.list.o"
    nm --defined-only "$obj/$tag.list.o" | sed -n 's/^[0-9a-f]* T \(pkc_[A-Za-z0-9_]*\)$/K(\1)/p' >"$obj/$tag.inc"
    [ -s "$obj/$tag.inc" ] || { echo "emu/build.sh: module $f has no kernels" >&2; return 1; }
    # -fdata-sections: each static __shared__ in a section of its own, for shared.ld to gather.
    $CXX $flags -fdata-sections -DPKC_FORMAT="$f" -DPKC_EMU_NS="$tag" -DPKC_EMU_KERNELS="\"$obj/$tag.inc\"" -c "$here/emu_module.cpp" -o "$obj/module-$tag.o"
}
jobs=$(nproc 2>/dev/null || echo 2)
pids=
for f in $formats; do
    module "$f" &
    pids="$pids $!"
    # at most $jobs compilers at once
    while [ "$(jobs -p | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
done
status=0
for p in $pids; do wait "$p" || status=1; done
[ $status -eq 0 ] || { echo "emu/build.sh: a module failed to compile" >&2; exit 1; }
$CXX $flags -c "$here/emu_runtime.cpp" -o "$obj/runtime.o"
objs=$obj/runtime.o
for f in $formats; do objs="$objs $obj/module-m$(echo "$f" | tr -- '-' 'n').o"; done
# -Bsymbolic: the kernels are extern "C" and share their names with PlinthCUDA's host functions
# (pkc_rope_table is both); a program that exports its own (plinth built with
# --static-swift-stdlib does) would otherwise be handed those as the kernels.
# shellcheck disable=SC2086
# shared.ld: the static __shared__ variables in one section (emu_runtime.cpp fills it at each block).
$CXX ${PKC_EMU_CXXFLAGS:-} -shared -Wl,-Bsymbolic -Wl,-soname,libpkcemu.so -Wl,-T,"$here/shared.ld" -o "$out/libpkcemu.so" $objs -lopenblas -lpthread
for name in libcuda.so.1 libcuda.so libnvrtc.so libcublas.so; do ln -sf libpkcemu.so "$out/$name"; done
echo "built $out/libpkcemu.so ($(echo $formats | wc -w) modules); run with LD_LIBRARY_PATH=$out PLINTH_CUDA_LIB_DIR=$out"
