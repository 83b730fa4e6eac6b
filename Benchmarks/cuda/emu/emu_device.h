// The CUDA device-side vocabulary that pkc_kernels.cu uses, for compiling it as host C++ in the
// CPU emulator (Benchmarks/cuda/emu). Threads are fibers that switch only at barriers and
// shuffles (emu_runtime.cpp); blocks run one after another, so __shared__ variables are
// function statics (gathered by shared.ld and filled before each block, as a device's shared
// memory is unset) and atomics need no hardware support. Arithmetic follows the device's where
// that is specified (the _rn intrinsics, fmaf, f16 conversions); expf and sincosf are glibc's,
// which differ from the device's approximations in the last bits.
#pragma once
#include <math.h>
#include <cstdint>
#include <cstring>

#include "half.h" // Kernels/: the f16 conversions (the device's cvt.rn, exactly)

struct pkc_emu_uint3 {
    unsigned x, y, z;
};

namespace pkc_emu {
struct Fiber;
extern Fiber *current;
extern pkc_emu_uint3 block_index, block_dim, grid_dim;
extern unsigned char *dynamic_shared;
// The running fiber's threadIdx: its first member (emu_runtime.cpp).
inline const pkc_emu_uint3 &thread_index() { return *reinterpret_cast<const pkc_emu_uint3 *>(current); }
void sync_block();
void sync_warp();
// PKC_DEPENDENT(): griddepcontrol.wait then launch_dependents. Launches run one after another
// here, so there is nothing to wait for; the emulator checks that every thread gets there
// before any barrier or shuffle and before it ends.
void dependent_launch_point();
// __shfl_xor_sync's exchange: every lane of the warp puts `bits` in and gets back those of lane
// (its lane ^ lane_mask), or its own where that lane is past the caller's segment of `width`.
uint64_t exchange_xor(uint64_t bits, int lane_mask, int width);
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (d += a b), fragments as the PTX ISA lays
// them out: every lane of the warp takes part; the products are exact and each output's sum is
// rounded once (the device's order and rounding of the sum are not specified).
void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2]);
[[noreturn]] void fail(const char *what);
} // namespace pkc_emu

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define PKC_DYNAMIC_SHARED(type, name) type *name = reinterpret_cast<type *>(pkc_emu::dynamic_shared)
#define threadIdx (pkc_emu::thread_index())
#define blockIdx (pkc_emu::block_index)
#define blockDim (pkc_emu::block_dim)
#define gridDim (pkc_emu::grid_dim)

struct alignas(8) int2 { int x, y; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
inline int2 make_int2(int x, int y) { return int2{x, y}; }

inline void __syncthreads() { pkc_emu::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    if (mask != 0xffffffffu) pkc_emu::fail("__syncwarp with a partial mask is not emulated");
    pkc_emu::sync_warp();
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    static_assert(sizeof(T) <= 8, "shuffled values are at most 8 bytes");
    if (mask != 0xffffffffu) pkc_emu::fail("__shfl_xor_sync with a partial mask is not emulated");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    bits = pkc_emu::exchange_xor(bits, lane_mask, width);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned *p, unsigned v) {
    const unsigned old = *p;
    *p = old + v;
    return old;
}
template <class T> inline T __ldcg(const T *p) { return *p; }

inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline float __uint_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, 4); return v; }
// The build compiles with -ffp-contract=off, so these are single IEEE operations as on the device.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
// cvt.rni.s32.f32: saturating, NaN to 0.
inline int __float2int_rn(float f) {
    if (f != f) return 0;
    const float r = std::nearbyint(f);
    return r >= 2147483648.0f ? 2147483647 : r < -2147483648.0f ? (-2147483647 - 1) : (int)r;
}

inline int __dp4a(int a, int b, int c) { // wraps as the device's 32-bit add does
    unsigned r = (unsigned)c;
    for (int i = 0; i < 4; i++) r += (unsigned)((int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i)));
    return (int)r;
}
inline unsigned __vsub4(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= ((((a >> (8 * i)) & 0xff) - ((b >> (8 * i)) & 0xff)) & 0xff) << (8 * i);
    return r;
}
// Byte n of the result is byte (s >> 4n) & 7 of the eight bytes y:x. (Bit 3 of a selector nibble
// is not part of __byte_perm's contract.)
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    if (s & 0x8888u) pkc_emu::fail("__byte_perm with bit 3 of a selector set is not emulated");
    const uint64_t both = ((uint64_t)y << 32) | x;
    unsigned r = 0;
    for (int n = 0; n < 4; n++) r |= (unsigned)((both >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return r;
}

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }

