#!/usr/bin/env bash
# Builds llama.cpp's llama-bench and llama-batched-bench with CUDA for sm_90 here, on a machine
# with no GPU, so that a device round spends none of its minutes compiling llama.cpp: nvcc, the
# CUDA runtime, CCCL and cuBLAS come from PyPI's CUDA 13.0 wheels (the device rounds' driver is
# CUDA 13.0), llama.cpp from the llama-cpp-python sdist (as Benchmarks/build_llama_cpp.sh). The
# driver library is linked against a stub of the calls ggml-cuda makes (the device's own
# libcuda.so.1 is loaded where it runs); cuBLAS is the device's (device_round.sh finds it).
#
#   Benchmarks/cuda/build_llama_cuda.sh [DIR]     (default $PLINTH_HOME/llama-cuda, else ~/.cache/plinth/llama-cuda)
#
# Writes DIR/lb.tar.xz (the two tools and their shared libraries) for make_devround.sh
# --llama-bin, and DIR/llama-src.tar.xz (the same source, trimmed to what a CUDA build reads)
# for --llama-src, the fallback build on the device. A developer tool: never a dependency of
# Plinth. ~1 GB of wheels; on 2 cores the build takes about an hour.
set -euo pipefail
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cuda="${CUDA_WHEELS_VERSION:-13.0}"
dir="${1:-${PLINTH_HOME:-$HOME/.cache/plinth}/llama-cuda}"
jobs="${JOBS:-$(nproc)}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
here=$(cd "$(dirname "$0")" && pwd)

command -v cmake >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >&2; }

# 1. A CUDA toolkit tree from the wheels: nvidia/cu13/{bin,nvvm,include,lib}.
tk="$dir/cuda/nvidia/cu13"
if [ ! -x "$tk/bin/nvcc" ]; then
    mkdir -p "$dir/wheels" "$dir/cuda"
    for p in nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-runtime nvidia-cuda-cccl nvidia-cuda-crt nvidia-cublas; do
        python3 -m pip download -q --no-deps --only-binary=:all: -d "$dir/wheels" "$p==$cuda.*"
    done
    for w in "$dir"/wheels/*.whl; do (cd "$dir/cuda" && unzip -q -o "$w" 'nvidia/cu13/*'); done
    ln -sfn lib "$tk/lib64"
    mkdir -p "$tk/targets/x86_64-linux" "$tk/lib/stubs"
    ln -sfn ../../include "$tk/targets/x86_64-linux/include"
    ln -sfn ../../lib "$tk/targets/x86_64-linux/lib"
    for l in cudart cublas cublasLt; do ln -sfn "lib$l.so.13" "$tk/lib/lib$l.so"; done
fi
# The driver calls ggml-cuda makes directly (its VMM pool), for the link only.
cc -shared -fPIC -Wall -Werror -I"$tk/include" -Wl,-soname,libcuda.so.1 -o "$tk/lib/stubs/libcuda.so" "$here/cuda_driver_stub.c"
ln -sfn libcuda.so "$tk/lib/stubs/libcuda.so.1"   # the name the tools' link looks for (-rpath-link)

# 2. The source.
if [ ! -f "$dir/src/CMakeLists.txt" ]; then
    # pip prepares an sdist's metadata (installing its build tools) even to download it: once.
    [ -f "$dir/llama_cpp_python-$version.tar.gz" ] ||
        python3 -m pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" -d "$dir"
    rm -rf "$dir/extract" "$dir/src" && mkdir -p "$dir/extract"
    tar -xzf "$dir/llama_cpp_python-$version.tar.gz" -C "$dir/extract"
    mv "$dir/extract/llama_cpp_python-$version/vendor/llama.cpp" "$dir/src" && rm -rf "$dir/extract"
fi

# 3. Build: the device's CPUs are not this machine's, so the CPU backend is built for AVX2
# (not -march=native); the products run on the GPU (-ngl 99). 90-real: sm_90 machine code
# only, the code a device build of "90" runs on an H100/H200, without the PTX beside it that
# doubles what travels (xz: 0.33 MB against 0.65 MB for one mmq instance).
export PATH="$tk/bin:$PATH"
cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real \
    -DCMAKE_CUDA_COMPILER="$tk/bin/nvcc" -DCUDAToolkit_ROOT="$tk" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON \
    -DGGML_F16C=ON -DGGML_BMI2=ON "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$tk/lib -Wl,-rpath-link,$tk/lib/stubs" >&2
cmake --build "$dir/build" -j "$jobs" --target llama-bench llama-batched-bench >&2

# 4. What travels: the tools and the libraries they load (not cuBLAS: the device has it).
bin="$dir/build/bin"
(cd "$bin" && tar cf - llama-bench llama-batched-bench $(ls | grep '\.so')) | xz -T0 -9 >"$dir/lb.tar.xz"
# The fallback: the source without what a CUDA build does not read (models, docs, the other backends).
tar cf - -C "$dir" --exclude=src/models --exclude=src/docs --exclude=src/media --exclude=src/examples \
    --exclude=src/gguf-py --exclude=src/tools/server/public --exclude=src/tests \
    $(cd "$dir" && find src/ggml/src -mindepth 1 -maxdepth 1 -type d -name 'ggml-*' | grep -vE 'ggml-(cpu|cuda)$' | sed 's/^/--exclude=/') src |
    xz -T0 -9 >"$dir/llama-src.tar.xz"
ls -la "$dir/lb.tar.xz" "$dir/llama-src.tar.xz" >&2
echo "$dir"
