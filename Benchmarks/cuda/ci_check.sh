#!/bin/sh
# The CUDA backend's checks that need no GPU (CI runs them): the device tools (test_cuda,
# bench_cuda, compile_cuda) build against the current kernels and headers, and every kernel
# module compiles with NVRTC for sm_90 (the H100 of the device rounds). NVRTC comes from PyPI
# (nvidia-cuda-nvrtc-cu12) into a venv under ~/.cache/plinth, once; where it cannot be
# installed the compile check is skipped with a line saying so.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${TMPDIR:-/tmp}/plinth-cuda-tools
"$here/build.sh" "$out"
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
