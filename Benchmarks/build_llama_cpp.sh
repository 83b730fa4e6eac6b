#!/usr/bin/env bash
# Builds llama.cpp's reference tools — llama-bench, llama-batched-bench, llama-quantize and
# llama-completion (the plain text CLI; this llama.cpp builds llama-cli only with its server) —
# from the llama.cpp sources that the llama-cpp-python sdist on PyPI vendors (vendor/llama.cpp),
# natively optimised (-DGGML_NATIVE=ON), Release.
#
# A developer tool for Benchmarks/ (side-by-side ratios, benchmark model variants): never a
# runtime or CI dependency of Plinth, and never committed. Needs PyPI and apt only.
#
# Usage: Benchmarks/build_llama_cpp.sh [DIR]
#   DIR   where to download, extract and build (default: $LLAMA_CPP_DIR, else
#         $PLINTH_HOME/llama.cpp, else ~/.cache/plinth/llama.cpp). Must be outside the repo.
#   LLAMA_CPP_PYTHON_VERSION   the sdist version (default 0.3.36)
#   JOBS                       parallel compile jobs (default: all cores)
#   LLAMA_TARGETS              the tools to build (default: the four above; llama-server for the
#                              eval and concurrency comparisons)
# The tools end up in DIR/build/bin; the other Benchmarks/ scripts look there via LLAMA_CPP_DIR.
# Running it again reuses what is already downloaded and built.
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
dir="${1:-${LLAMA_CPP_DIR:-${PLINTH_HOME:-$HOME/.cache/plinth}/llama.cpp}}"
jobs="${JOBS:-$(nproc)}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# cmake and a C/C++ compiler from apt when missing.
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "build_llama_cpp: installing ${need[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
fi

# 1. Download the sdist (source only for this package; its build tools may come as wheels).
sdist="$dir/llama_cpp_python-$version.tar.gz"
if [ ! -f "$sdist" ]; then
    echo "build_llama_cpp: downloading llama-cpp-python==$version (sdist) from PyPI" >&2
    python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$version" -d "$dir"
fi

# 2. Extract vendor/llama.cpp.
src="$dir/src-$version"
if [ ! -f "$src/CMakeLists.txt" ]; then
    rm -rf "$src" "$dir/extract"
    mkdir -p "$dir/extract"
    tar -xzf "$sdist" -C "$dir/extract"
    mv "$dir/extract/llama_cpp_python-$version/vendor/llama.cpp" "$src"
    rm -rf "$dir/extract"
fi

# 3. Configure and build the tools.
build="$dir/build"
read -r -a targets <<<"${LLAMA_TARGETS:-llama-bench llama-batched-bench llama-quantize llama-completion}"
server=OFF
[[ " ${targets[*]} " == *" llama-server "* ]] && server=ON
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=$server >&2
cmake --build "$build" --config Release -j "$jobs" --target "${targets[@]}" >&2

for t in "${targets[@]}"; do
    [ -x "$build/bin/$t" ] || { echo "build_llama_cpp: $t was not built" >&2; exit 1; }
done
echo "build_llama_cpp: built ${targets[*]} in $build/bin (llama.cpp from llama-cpp-python $version)" >&2
echo "$build/bin"
