#!/bin/sh
# The CUDA backend's checks that need no GPU (CI runs them):
# 1. the device tools (test_cuda, bench_cuda, compile_cuda) build against the current kernels
#    and headers;
# 2. test_cuda --quick passes on the CPU emulator of a CUDA device (Benchmarks/cuda/emu): every
#    kernel against the CPU kernels, the host code's launches, graphs, streams and caches; the
#    emulator built with UBSan's alignment check, so a misaligned vector load fails as on a device;
# 3. the Swift CUDA backend tests pass on the emulator (SmolLM2's: greedy text against
#    llama.cpp's fixtures, CPU agreement at many rows and at one or two, the device's masked
#    argmax and top-k, unmerged adapters on tiny models and SmolLM2, a tiny Gemma 3's planned
#    launches, a tiny Qwen3 against llama.cpp, scaled RoPE (fused and recorded) against the
#    naive pass, Gemma 2 refused (soft-capped attention) and run by auto on the CPU, Llama's layers through the same plan against the fused step, launches counted, a
#    Q5_0/Q8_0 q|k|v as one run, `plinth eval --backend cuda` end to end against the CPU's values,
#    20 masked sequences at once (their masks built on threads), a model too large for the
#    device's memory, a prefix copy the device fails, admission by pages to a paged KV cache short of them), where the test build
#    is there (.ci/run has built it); Qwen2.5-Coder's and Gemma 3 270M's reference tests take
#    ~13 and ~7 minutes emulated: not here;
# 4. every kernel module compiles with NVRTC 12.9 and 13.0 (the device rounds' release) for sm_90
#    (the H100 of the device rounds) and sm_80 (the first with the tensor-core attention, before
#    dependent launch), with 12.9 for sm_70 (the oldest the backend opens: neither; 13.0 builds
#    nothing before sm_75), ~30 s each on 2 cores, and as PTX for compute_90 (what a device newer
#    than NVRTC gets);
# 5. every kernel launch of steps 2 and 3 fits what an sm_90 gives a block: its registers (each
#    release's ptxas's counts from its PTX), threads (its __launch_bounds__) and shared memory, static and dynamic
#    (launch_resources.py; the emulator, which has no registers, would run a launch a GPU refuses).
# NVRTC and ptxas come from PyPI (nvidia-cuda-nvrtc-cu12 and nvidia-cuda-nvcc-cu12; 13.0's
# nvidia-cuda-nvrtc and nvidia-cuda-nvcc) into a venv per release under ~/.cache/plinth, once;
# where they cannot be installed steps 4 and 5 are skipped with a line saying so.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=${TMPDIR:-/tmp}
out=$tmp/plinth-cuda-tools
"$here/build.sh" "$out"

emu=$tmp/plinth-cuda-emu
# Vector loads (uint4, float4, uint2) at an address their size does not divide fault on a device
# (CUDA_ERROR_MISALIGNED_ADDRESS), not on x86: UBSan's alignment check stops the emulated run there.
PKC_EMU_CXXFLAGS="${PKC_EMU_CXXFLAGS:--fsanitize=alignment -fno-sanitize-recover=alignment}" "$here/emu/build.sh" "$emu"
# Every kernel's largest launch, from the tests below, for step 5.
launches=$tmp/plinth-cuda-launches.txt
rm -f "$launches"
export PKC_EMU_LAUNCH_LOG=$launches
LD_LIBRARY_PATH=$emu PLINTH_CUDA_LIB_DIR=$emu "$out/test_cuda" "$tmp/plinth-cuda-emu-cache" --quick --require-device
if [ -e "$root/.build/release/PlinthPackageTests.xctest" ]; then
    log=$tmp/plinth-cuda-emu-swift.log
    # A test skipped here (no device opened, no model) would pass vacuously: that is a failure.
    tests="autoPicksCUDA smolLM2Reference cpuAgreement topCandidates decodeAgreement adapters peftAdapter tinyGemma tinyQwen3 scaledRoPE gemma2OnTheCPU recordedMatchesFused launchesPerStep unifiedRuns evalAgainstCPU manyMaskedRows outOfDeviceMemory failedPrefixCopy pagedSharingIsExact pagedAdmission"
    if ! (cd "$root" && LD_LIBRARY_PATH=$emu PLINTH_CUDA_LIB_DIR=$emu swift test -c release -Xswiftc -enable-testing \
        --skip-build --filter "CUDABackendTests/($(echo $tests | tr ' ' '|'))") >"$log" 2>&1 ||
        grep -q ' skipped' "$log" || [ "$(grep -c '✔ Test "' "$log")" -ne "$(echo $tests | wc -w)" ]; then
        cat "$log"
        echo "ci_check: the Swift CUDA tests on the emulator failed, or did not all run" >&2
        exit 1
    fi
    grep -E '^\[|✔ Test "' "$log"
else
    echo "ci_check: no test build in .build/release; the Swift CUDA tests on the emulator are skipped" >&2
fi

# NVRTC and ptxas of one release (the PTX NVRTC writes is of a version its ptxas reads), in a
# venv of their own per release; the check of step 5 uses that release's registers.
# $1: the release's name; $2: its pip packages; $3: the folder of its libraries and ptxas under
# site-packages/nvidia; the rest: compile_cuda's architectures.
nvrtc_checks() {
    release=$1 packages=$2 dir=$3
    shift 3
    venv=${XDG_CACHE_HOME:-$HOME/.cache}/plinth/nvrtc-$release-venv
    find_tools() {
        lib=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/$dir/lib 2>/dev/null | head -n 1 || true)
        ptxas=$(ls "$venv"/lib/python3*/site-packages/nvidia/*/bin/ptxas 2>/dev/null | head -n 1 || true)
    }
    find_tools
    if [ -z "$lib" ] || [ -z "$ptxas" ]; then
        python3 -m venv "$venv" >/dev/null 2>&1 && "$venv/bin/pip" install -q $packages >/dev/null 2>&1 || true
        find_tools
    fi
    if [ -z "$lib" ]; then
        echo "ci_check: NVRTC $release could not be installed from PyPI; its kernel compile and launch checks are skipped" >&2
        return 0
    fi
    ptx=$tmp/plinth-cuda-ptx-$release
    rm -rf "$ptx" && mkdir -p "$ptx"
    # NVRTC opens its builtins library by name, from the loader's path.
    for build in "$@" "90 --ptx --save $ptx"; do
        LD_LIBRARY_PATH=$lib PLINTH_CUDA_LIB_DIR=$lib "$out/compile_cuda" --arch $build 2
    done
    if [ -z "$ptxas" ]; then
        echo "ci_check: ptxas $release could not be installed from PyPI; its launch check is skipped" >&2
        return 0
    fi
    python3 "$here/launch_resources.py" --ptx "$ptx" --launches "$launches" --ptxas "$ptxas" --arch 90
}
# 12.9: sm_70 is the oldest the backend opens (CUDA 13 builds none before sm_75).
nvrtc_checks 12 "nvidia-cuda-nvrtc-cu12 nvidia-cuda-nvcc-cu12" cuda_nvrtc 90 80 70
# 13.0: the device rounds' driver and NVRTC.
nvrtc_checks 13 "nvidia-cuda-nvrtc==13.0.* nvidia-cuda-nvcc==13.0.*" cu13 90 80
