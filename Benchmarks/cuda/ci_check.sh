#!/bin/sh
# The CUDA backend's checks that need no GPU (CI runs them):
# 1. the device tools (test_cuda, bench_cuda, compile_cuda) build against the current kernels
#    and headers;
# 2. test_cuda --quick passes on the CPU emulator of a CUDA device (Benchmarks/cuda/emu): every
#    kernel against the CPU kernels, the host code's launches, graphs, streams and caches;
# 3. every kernel module compiles with NVRTC for sm_90 (the H100 of the device rounds). NVRTC
#    comes from PyPI (nvidia-cuda-nvrtc-cu12) into a venv under ~/.cache/plinth, once; where it
#    cannot be installed this step is skipped with a line saying so.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=${TMPDIR:-/tmp}
out=$tmp/plinth-cuda-tools
"$here/build.sh" "$out"

emu=$tmp/plinth-cuda-emu
"$here/emu/build.sh" "$emu"
LD_LIBRARY_PATH=$emu PLINTH_CUDA_LIB_DIR=$emu "$out/test_cuda" "$tmp/plinth-cuda-emu-cache" --quick --require-device

venv=${XDG_CACHE_HOME:-$HOME/.cache}/plinth/nvrtc-venv
lib=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib 2>/dev/null | head -n 1 || true)
if [ -z "$lib" ]; then
    if python3 -m venv "$venv" >/dev/null 2>&1 && "$venv/bin/pip" install -q nvidia-cuda-nvrtc-cu12 >/dev/null 2>&1; then
        lib=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib | head -n 1)
    else
        echo "ci_check: NVRTC could not be installed from PyPI; the kernel compile check is skipped" >&2
        exit 0
    fi
fi
PLINTH_CUDA_LIB_DIR=$lib "$out/compile_cuda" --arch 90 2
