#!/bin/sh
# The whole device side of the CUDA kernel checks, in one command, from the repository root on a
# machine with an NVIDIA GPU and driver (NVRTC and cuBLAS found on the loader's path, in
# /usr/local/cuda/lib64, or in $PLINTH_CUDA_LIB_DIR):
#
#   Benchmarks/cuda/device.sh [bin-dir] [out-dir] [quick]
#
# bin-dir holds test_cuda and bench_cuda as Benchmarks/cuda/build.sh made them here (default
# .devcarry); logs go to out-dir (default $OUT, else /tmp/plinth-cuda-out). Exits with the
# tests' status.
set -u
bin=${1:-.devcarry}
out=${2:-${OUT:-/tmp/plinth-cuda-out}}
quick=${3:-}
mkdir -p "$out"
cache=/tmp/plinth-cuda-cache
{
    echo "== machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
    uname -m
    echo "== CUDA libraries visible"
    ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvrtc\.so|libcublas\.so' | head
    ls /usr/local/cuda/lib64/libnvrtc.so* /usr/local/cuda/lib64/libcublas.so* 2>/dev/null | head
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
# Where NVRTC is neither on the loader's path nor in /usr/local/cuda/lib64, point the library at
# the first one found (a toolkit elsewhere, or the pip wheels' nvidia/*/lib).
if [ -z "${PLINTH_CUDA_LIB_DIR:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so' && [ ! -e /usr/local/cuda/lib64/libnvrtc.so ]; then
    found=$(find /usr/local /opt /usr/lib -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -n 1)
    [ -n "$found" ] && export PLINTH_CUDA_LIB_DIR=$(dirname "$found") && echo "PLINTH_CUDA_LIB_DIR=$PLINTH_CUDA_LIB_DIR"
fi
echo "== tests"
"$bin/test_cuda" "$cache" 2>&1 | tee "$out/test.log"
status=$(tail -n 1 "$out/test.log" | sed -n 's/^[0-9]* passed, \([0-9]*\) failed$/\1/p')
echo "== benchmarks"
"$bin/bench_cuda" "$cache" $quick 2>&1 | tee "$out/bench.log"
[ "$status" = "0" ]
