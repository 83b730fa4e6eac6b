// PlinthCUDA's device code: CUDA C++ compiled at run time by NVRTC (no headers, no host code).
// This file is the source of truth; pkc_kernels_src.c holds it as a C string (regenerate with
// Benchmarks/cuda/embed.sh; the build there checks they agree). It is not compiled by SwiftPM.
//
// Every weight format is read as "units" of 16 weights: four groups of 4 consecutive weights,
// each group under one scale and offset (w = sc * q + of). A row of k weights is k / 16 units;
// consecutive lanes take consecutive units, so a warp reads a row's bytes front to back
// (coalesced). Dequantization computes fmaf(sc, q, of), or sc * q for formats without an
// offset: sc * q is exact in f32 for every format here (f16 scale, small integer quants), so
// this is the CPU dequantizer's value bit for bit.
//
// The source is compiled as several modules (pk_cuda.c: load_modules): the core module without
// PKC_FORMAT (norms, RoPE, attention, argmax, ...), and one per weight format with
// -DPKC_FORMAT=<ggml type> (that format's dequantizers and products only), so that a model
// compiles only the formats it uses, and those in parallel.

#ifndef PKC_FORMAT
#define PKC_FORMAT -1
#endif

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;

#define PKC_INF __int_as_float(0x7f800000)

#ifdef PKC_EMULATOR // Benchmarks/cuda/emu: this source compiled as host C++, for the CPU emulator
__device__ __forceinline__ float h2f(u16 h) { return half_to_f32(h); }
__device__ __forceinline__ u16 f2h(float f) { return f32_to_half(f); }
#else
__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
#define PKC_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif
// Programmatic dependent launch (sm_90): pk_cuda.c may launch a kernel while the one before it
// in the stream is still running. So every kernel starts with PKC_DEPENDENT(): wait until that
// kernel has finished and its writes are visible (a no-op for a launch without the attribute),
// then let the next kernel's blocks be scheduled early, to wait likewise in spare slots (waiting
// first bounds it to two kernels at a time). It must come before any access to global memory:
// it is every kernel's first statement (Benchmarks/cuda/embed.sh --check holds to that).
#ifdef PKC_EMULATOR
#define PKC_DEPENDENT() pkc_emu::dependent_launch_point()
#elif __CUDA_ARCH__ >= 900
#define PKC_DEPENDENT() asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory")
#else
#define PKC_DEPENDENT() ((void)0)
#endif

__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((u32)h) << 16); }
// Two halves as one register, `lo` in its lower 16 bits.
__device__ __forceinline__ u32 pack_h2(u16 lo, u16 hi) { return (u32)lo | ((u32)hi << 16); }

// Blocks of 10, 18, 22, 34, 110 and 210 bytes are only 2-byte aligned: read them 16 bits at a time.
__device__ __forceinline__ u32 ld16(const u8 *p) { return *(const u16 *)p; }
__device__ __forceinline__ u32 ld32a(const u8 *p) { return *(const u32 *)p; }                     // 4-aligned
__device__ __forceinline__ u32 ld32u(const u8 *p) { return ld16(p) | (ld16(p + 2) << 16); }        // 2-aligned
__device__ __forceinline__ float f16at(const u8 *p) { return h2f(*(const u16 *)p); }
__device__ __forceinline__ int byte_of(u32 w, int i) { return (w >> (8 * i)) & 0xff; }

// Small non-negative integers to float without the quarter-rate I2F: the integer goes into the
// mantissa of 2^23 and 2^23 (+ bias) is subtracted, exactly (all values are far below 2^23).
#define PKC_MAGIC 8388608.0f
__device__ __forceinline__ float small_f(u32 v, float bias) { return __int_as_float(0x4B000000u | v) - (PKC_MAGIC + bias); }
// Byte j of w, the same way: one PRMT (byte j, two zero bytes, 0x4B) and one FADD.
__device__ __forceinline__ float byte_f(u32 w, int j, float bias) {
    return __int_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | (u32)j)) - (PKC_MAGIC + bias);
}

// ---- block formats ----------------------------------------------------------------------------
// Each format: BE weights and BB bytes per block, UPB units per block, OFF whether there is an
// offset; base(u, g) is group g's first weight within the block for unit u; unit() fills the 16
// quants (as floats) and the four groups' scales and offsets.

template <int T> struct Fmt;

// Legacy 32-weight blocks: unit u holds qs bytes 8u..8u+7: low nibbles are weights 8u.., high
// nibbles 16+8u.. .
__device__ __forceinline__ int legacy_base(int u, int g) { return ((g >> 1) << 4) + (u << 3) + ((g & 1) << 2); }

// A unit under one scale and offset: all four groups get them (legacy blocks, PQ2, plain floats).
__device__ __forceinline__ void one_scale(float d, float m, float *sc, float *of) {
#pragma unroll
    for (int g = 0; g < 4; g++) { sc[g] = d; of[g] = m; }
}

// The 16 quants of four words of byte-sized codes, word after word, each less `bias`.
__device__ __forceinline__ void bytes16(const u32 *w, float bias, float *q) {
#pragma unroll
    for (int g = 0; g < 4; g++)
#pragma unroll
        for (int j = 0; j < 4; j++) q[4 * g + j] = byte_f(w[g], j, bias);
}

// Quantized formats describe a unit as four words of byte codes (words()): word g holds group
// g's four weights, weight j in byte j, each worth sc[g] * (code - BIAS) + of[g]. unit() gives
// them as floats (the dequantizer's and the float GEMV's), iunit() as signed bytes code - BIAS
// (the int8 GEMV's dp4a operands; every format's codes less its bias fit in a signed byte).
template <class F> struct Codes {
    static __device__ __forceinline__ void unit(const u8 *b, int u, float *q, float *sc, float *of) {
        u32 w[4];
        F::words(b, u, w, sc, of);
        bytes16(w, (float)F::BIAS, q);
    }
    static __device__ __forceinline__ void iunit(const u8 *b, int u, int *q, float *sc, float *of) {
        u32 w[4];
        F::words(b, u, w, sc, of);
#pragma unroll
        for (int g = 0; g < 4; g++) q[g] = (int)__vsub4(w[g], (u32)F::BIAS * 0x01010101u);
    }
};

// The code words of two words of nibble bytes: low nibbles first (weights 0..7), then high.
__device__ __forceinline__ void nibble_words(u32 lo, u32 hi, u32 *w) {
    w[0] = lo & 0x0f0f0f0fu; w[1] = hi & 0x0f0f0f0fu; w[2] = (lo >> 4) & 0x0f0f0f0fu; w[3] = (hi >> 4) & 0x0f0f0f0fu;
}

// Bits b..b+3 of qh, each moved to bit 4 of its byte.
__device__ __forceinline__ u32 spread4(u32 qh, int b) {
    const u32 v = (qh >> b) & 15u;
    return ((v & 1u) << 4) | ((v & 2u) << 11) | ((v & 4u) << 18) | ((v & 8u) << 25);
}

// Q5_0 / Q5_1: nibbles plus bit 4 from qh (weight i of the block takes bit i).
__device__ __forceinline__ void nibble_words_high(u32 lo, u32 hi, u32 qh, int u, u32 *w) {
    nibble_words(lo, hi, w);
    w[0] |= spread4(qh, 8 * u); w[1] |= spread4(qh, 8 * u + 4);
    w[2] |= spread4(qh, 16 + 8 * u); w[3] |= spread4(qh, 20 + 8 * u);
}

template <> struct Fmt<2> : Codes<Fmt<2>> { // Q4_0: d, qs[16]; x = d * (q - 8)
    enum { BE = 32, BB = 18, UPB = 2, OFF = 0, BIAS = 8, UNIFORM = 1 };
    static __device__ __forceinline__ int base(int u, int g) { return legacy_base(u, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        nibble_words(ld32u(b + 2 + 8 * u), ld32u(b + 6 + 8 * u), w);
        const float d = f16at(b);
        one_scale(d, 0.0f, sc, of);
    }
};
template <> struct Fmt<3> : Codes<Fmt<3>> { // Q4_1: d, m, qs[16]; x = d * q + m
    enum { BE = 32, BB = 20, UPB = 2, OFF = 1, BIAS = 0, UNIFORM = 1 };
    static __device__ __forceinline__ int base(int u, int g) { return legacy_base(u, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        nibble_words(ld32a(b + 4 + 8 * u), ld32a(b + 8 + 8 * u), w);
        const float d = f16at(b), m = f16at(b + 2);
        one_scale(d, m, sc, of);
    }
};
template <> struct Fmt<6> : Codes<Fmt<6>> { // Q5_0: d, qh:u32, qs[16]; x = d * (q - 16)
    enum { BE = 32, BB = 22, UPB = 2, OFF = 0, BIAS = 16, UNIFORM = 1 };
    static __device__ __forceinline__ int base(int u, int g) { return legacy_base(u, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        nibble_words_high(ld32u(b + 6 + 8 * u), ld32u(b + 10 + 8 * u), ld32u(b + 2), u, w);
        const float d = f16at(b);
        one_scale(d, 0.0f, sc, of);
    }
};
template <> struct Fmt<7> : Codes<Fmt<7>> { // Q5_1: d, m, qh:u32, qs[16]; x = d * q + m
    enum { BE = 32, BB = 24, UPB = 2, OFF = 1, BIAS = 0, UNIFORM = 1 };
    static __device__ __forceinline__ int base(int u, int g) { return legacy_base(u, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        nibble_words_high(ld32a(b + 8 + 8 * u), ld32a(b + 12 + 8 * u), ld32a(b + 4), u, w);
        const float d = f16at(b), m = f16at(b + 2);
        one_scale(d, m, sc, of);
    }
};
template <> struct Fmt<8> : Codes<Fmt<8>> { // Q8_0: d, qs[32]:i8; unit u holds weights 16u..16u+15
    enum { BE = 32, BB = 34, UPB = 2, OFF = 0, BIAS = 128, UNIFORM = 1 };
    static __device__ __forceinline__ int base(int u, int g) { return (u << 4) + (g << 2); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        const u8 *p = b + 2 + 16 * u;
#pragma unroll
        for (int j = 0; j < 4; j++) w[j] = ld32u(p + 4 * j) ^ 0x80808080u; // signed bytes as codes + 128
        const float d = f16at(b);
        one_scale(d, 0.0f, sc, of);
    }
};

// IQ4 levels: each byte of v (an index 0..15) replaced by its level plus 128 (the code a BIAS of
// 128 reads as the level): bytes 0..7 and 8..15 of the table by two byte permutes, picked by
// the index's bit 3.
__device__ __forceinline__ u32 iq4_codes(u32 v) {
    const u32 sel = (v & 0x7u) | ((v >> 4) & 0x70u) | ((v >> 8) & 0x700u) | ((v >> 12) & 0x7000u);
    const u32 lo = __byte_perm(0x3F2D1801u, 0x766A5D4Fu, sel); // 1 24 45 63 79 93 106 118
    const u32 hi = __byte_perm(0xA6998D81u, 0xF1D9C5B5u, sel); // 129 141 153 166 181 197 217 241
    const u32 high = ((v >> 3) & 0x01010101u) * 0xffu;
    return (hi & high) | (lo & ~high);
}
__device__ __forceinline__ void iq4_levels(u32 *w) {
#pragma unroll
    for (int g = 0; g < 4; g++) w[g] = iq4_codes(w[g]);
}

// IQ4_NL: Q4_0's block, each nibble an index into the levels; x = d * V[q].
template <> struct Fmt<20> : Codes<Fmt<20>> {
    enum { BE = 32, BB = 18, UPB = 2, OFF = 0, BIAS = 128, UNIFORM = 1 };
    static __device__ __forceinline__ int base(int u, int g) { return legacy_base(u, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        Fmt<2>::words(b, u, w, sc, of);
        iq4_levels(w);
    }
};

// IQ4_XS: d, scales_h:u16, scales_l[4], qs[128]: eight IQ4_NL sub-blocks of 32 (16 bytes of qs
// each) at d * (s - 32), s six bits. Unit u is half u%2 of sub-block u/2, laid out as legacy.
template <> struct Fmt<23> : Codes<Fmt<23>> {
    enum { BE = 256, BB = 136, UPB = 16, OFF = 0, BIAS = 128, UNIFORM = 0 };
    static __device__ __forceinline__ int base(int u, int g) { return ((u >> 1) << 5) + legacy_base(u & 1, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        const int c = u >> 1;
        const u8 *q = b + 8 + 16 * c + 8 * (u & 1);
        nibble_words(ld32a(q), ld32a(q + 4), w);
        iq4_levels(w);
        const u32 head = ld32a(b);
        const int s = ((b[4 + (c >> 1)] >> (4 * (c & 1))) & 15) | ((int)((head >> (16 + 2 * c)) & 3u) << 4);
        one_scale(h2f((u16)(head & 0xffffu)) * (float)(s - 32), 0.0f, sc, of);
    }
};

// PQ2 (Plinth's 2-bit type, id 1024): d, qs[8]; x = d * (2c - 3), weight j's code c in bits
// 2(j/8) of byte j%8. Unit u holds weights 16u..16u+15: bit pairs 2u and 2u+1 of the 8 bytes.
template <> struct Fmt<1024> : Codes<Fmt<1024>> {
    enum { BE = 32, BB = 10, UPB = 2, OFF = 0, BIAS = 3, UNIFORM = 1 };
    static __device__ __forceinline__ int base(int u, int g) { return (u << 4) + (g << 2); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        const u32 lo = ld32u(b + 2), hi = ld32u(b + 6);
        const int s = 4 * u;
        // 2c per byte (c in bits s..s+1, then s+2..s+3), read as 2c - 3.
        w[0] = ((lo >> s) & 0x03030303u) << 1; w[1] = ((hi >> s) & 0x03030303u) << 1;
        w[2] = ((lo >> (s + 2)) & 0x03030303u) << 1; w[3] = ((hi >> (s + 2)) & 0x03030303u) << 1;
        const float d = f16at(b);
        one_scale(d, 0.0f, sc, of);
    }
};

// k-quants with 2-bit planes (Q2_K, Q3_K): unit u is half u/8, positions l0 = (u%8)*4 ..+3 of
// the half's 32 bytes; group g is the bit pair g of those bytes: weights half*128 + 32g + l0.. .
__device__ __forceinline__ int plane_base(int u, int g) { return ((u >> 3) << 7) + (g << 5) + ((u & 7) << 2); }

template <> struct Fmt<10> : Codes<Fmt<10>> { // Q2_K: scales[16], qs[64], d, dmin
    enum { BE = 256, BB = 84, UPB = 16, OFF = 1, BIAS = 0, UNIFORM = 0 };
    static __device__ __forceinline__ int base(int u, int g) { return plane_base(u, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *q, float *sc, float *of) {
        const int half = u >> 3, l0 = (u & 7) << 2;
        const u32 w = ld32a(b + 16 + half * 32 + l0);
        const float d = f16at(b + 80), dmin = f16at(b + 82);
#pragma unroll
        for (int g = 0; g < 4; g++) {
            q[g] = (w >> (2 * g)) & 0x03030303u;
            const int s = b[half * 8 + g * 2 + (l0 >> 4)];
            sc[g] = d * (float)(s & 15);
            of[g] = -(dmin * (float)(s >> 4));
        }
    }
};
template <> struct Fmt<11> : Codes<Fmt<11>> { // Q3_K: hmask[32], qs[64], scales[12], d
    enum { BE = 256, BB = 110, UPB = 16, OFF = 0, BIAS = 4, UNIFORM = 0 };
    static __device__ __forceinline__ int base(int u, int g) { return plane_base(u, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *q, float *sc, float *of) {
        const int half = u >> 3, l0 = (u & 7) << 2;
        const u32 w = ld32u(b + 32 + half * 32 + l0), hm = ld32u(b + l0);
        const u8 *packed = b + 96;
        const float d = f16at(b + 108);
#pragma unroll
        for (int g = 0; g < 4; g++) {
            const int bit = half * 4 + g; // hmask bit of weights 32*bit..
            // low + 4 * high_set - 4: the stored high bit is inverted
            q[g] = ((w >> (2 * g)) & 0x03030303u) | (((hm >> bit) & 0x01010101u) << 2);
            const int k = half * 8 + g * 2 + (l0 >> 4);
            const int lo = (k < 8) ? (packed[k] & 15) : (packed[k - 8] >> 4);
            const int hi = (packed[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
            sc[g] = d * (float)((lo | (hi << 4)) - 32);
            of[g] = 0.0f;
        }
    }
};

// Q4_K / Q5_K: unit u covers qs bytes 32c + l0 .. +7 (c = u/4, l0 = (u%4)*8): low nibbles are
// sub-block 2c, high nibbles sub-block 2c+1.
__device__ __forceinline__ int k4_base(int u, int g) { return ((u >> 2) << 6) + ((u & 3) << 3) + ((g & 1) << 2) + ((g >> 1) << 5); }

__device__ __forceinline__ void scale_min_k4(const u8 *packed, int j, int *scale, int *min) {
    if (j < 4) {
        *scale = packed[j] & 63;
        *min = packed[j + 4] & 63;
    } else {
        *scale = (packed[j + 4] & 15) | ((packed[j - 4] >> 6) << 4);
        *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    }
}

__device__ __forceinline__ void k4_scales(const u8 *b, int c, float *sc, float *of) {
    const float d = f16at(b), dmin = f16at(b + 2);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int s, m;
        scale_min_k4(b + 4, 2 * c + h, &s, &m);
        sc[2 * h] = sc[2 * h + 1] = d * (float)s;
        of[2 * h] = of[2 * h + 1] = -(dmin * (float)m);
    }
}

template <> struct Fmt<12> : Codes<Fmt<12>> { // Q4_K: d, dmin, scales[12], qs[128]
    enum { BE = 256, BB = 144, UPB = 16, OFF = 1, BIAS = 0, UNIFORM = 0 };
    static __device__ __forceinline__ int base(int u, int g) { return k4_base(u, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        const int c = u >> 2, l0 = (u & 3) << 3;
        nibble_words(ld32a(b + 16 + 32 * c + l0), ld32a(b + 20 + 32 * c + l0), w);
        k4_scales(b, c, sc, of);
    }
};
template <> struct Fmt<13> : Codes<Fmt<13>> { // Q5_K: d, dmin, scales[12], qh[32], qs[128]
    enum { BE = 256, BB = 176, UPB = 16, OFF = 1, BIAS = 0, UNIFORM = 0 };
    static __device__ __forceinline__ int base(int u, int g) { return k4_base(u, g); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *w, float *sc, float *of) {
        const int c = u >> 2, l0 = (u & 3) << 3;
        const u32 lo = ld32a(b + 48 + 32 * c + l0), hi = ld32a(b + 52 + 32 * c + l0);
        const u32 h0 = ld32a(b + 16 + l0), h1 = ld32a(b + 20 + l0);
        // bit s of qh[l] is bit 4 of sub-block s's weight l
        w[0] = (lo & 0x0f0f0f0fu) | (((h0 >> (2 * c)) & 0x01010101u) << 4);
        w[1] = (hi & 0x0f0f0f0fu) | (((h1 >> (2 * c)) & 0x01010101u) << 4);
        w[2] = ((lo >> 4) & 0x0f0f0f0fu) | (((h0 >> (2 * c + 1)) & 0x01010101u) << 4);
        w[3] = ((hi >> 4) & 0x0f0f0f0fu) | (((h1 >> (2 * c + 1)) & 0x01010101u) << 4);
        k4_scales(b, c, sc, of);
    }
};
template <> struct Fmt<14> : Codes<Fmt<14>> { // Q6_K: ql[128], qh[64], scales[16]:i8, d
    enum { BE = 256, BB = 210, UPB = 16, OFF = 0, BIAS = 32, UNIFORM = 0 };
    // unit u: half h = u/8, positions l0 = (u%8)*4 ..+3; group r is row h*4 + r: weights 32(h*4+r) + l0..
    static __device__ __forceinline__ int base(int u, int g) { return ((((u >> 3) << 2) + g) << 5) + ((u & 7) << 2); }
    static __device__ __forceinline__ void words(const u8 *b, int u, u32 *q, float *sc, float *of) {
        const int h = u >> 3, l0 = (u & 7) << 2;
        const u32 a = ld32u(b + h * 64 + l0), c = ld32u(b + h * 64 + 32 + l0), hi = ld32u(b + 128 + h * 32 + l0);
        const float d = f16at(b + 208);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const u32 lo = (r & 1) ? c : a;
            const int shift = (r >> 1) * 4;
            q[r] = ((lo >> shift) & 0x0f0f0f0fu) | (((hi >> (2 * r)) & 0x03030303u) << 4);
            sc[r] = d * (float)(i8)b[192 + (h * 4 + r) * 2 + (l0 >> 4)];
            of[r] = 0.0f;
        }
    }
};

// Float rows: a "block" of 16 weights, one unit, scale 1.
template <> struct Fmt<0> { // F32
    enum { BE = 16, BB = 64, UPB = 1, OFF = 0 };
    static __device__ __forceinline__ int base(int u, int g) { return g << 2; }
    static __device__ __forceinline__ void unit(const u8 *b, int u, float *q, float *sc, float *of) {
#pragma unroll
        for (int g = 0; g < 4; g++) {
            const float4 v = ((const float4 *)b)[g];
            q[4 * g] = v.x; q[4 * g + 1] = v.y; q[4 * g + 2] = v.z; q[4 * g + 3] = v.w;
            sc[g] = 1.0f; of[g] = 0.0f;
        }
    }
};
template <> struct Fmt<1> { // F16
    enum { BE = 16, BB = 32, UPB = 1, OFF = 0 };
    static __device__ __forceinline__ int base(int u, int g) { return g << 2; }
    static __device__ __forceinline__ void unit(const u8 *b, int u, float *q, float *sc, float *of) {
        const uint4 v0 = ((const uint4 *)b)[0], v1 = ((const uint4 *)b)[1];
        const u32 w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
        for (int j = 0; j < 8; j++) { q[2 * j] = h2f((u16)(w[j] & 0xffff)); q[2 * j + 1] = h2f((u16)(w[j] >> 16)); }
        one_scale(1.0f, 0.0f, sc, of);
    }
};
template <> struct Fmt<30> { // BF16
    enum { BE = 16, BB = 32, UPB = 1, OFF = 0 };
    static __device__ __forceinline__ int base(int u, int g) { return g << 2; }
    static __device__ __forceinline__ void unit(const u8 *b, int u, float *q, float *sc, float *of) {
        const uint4 v0 = ((const uint4 *)b)[0], v1 = ((const uint4 *)b)[1];
        const u32 w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
        for (int j = 0; j < 8; j++) { q[2 * j] = bf2f((u16)(w[j] & 0xffff)); q[2 * j + 1] = bf2f((u16)(w[j] >> 16)); }
        one_scale(1.0f, 0.0f, sc, of);
    }
};

template <int T> __device__ __forceinline__ float dq(float sc, float q, float of) {
    // sc * q is exact; one rounding, as the CPU's (sc * q) + of. No offset: no "+ 0" (keeps -0).
    return Fmt<T>::OFF ? fmaf(sc, q, of) : sc * q;
}

// ---- dequantization ---------------------------------------------------------------------------

// Unit u (16 weights) of row r of the output: f32 (dst row stride ldd) or f16 (OUT16), from
// source row r, or ids[r] (rows of zeros for ids outside [0, n_rows)).
template <int T, int OUT16>
__device__ __forceinline__ void dequant_unit(const u8 *src, i64 row_bytes, i64 r, int u, void *dst, i64 ldd, const int *ids,
                                             i64 n_rows) {
    typedef Fmt<T> F;
    const int blk = u / F::UPB, sub = u % F::UPB;
    i64 srow = r;
    bool zero = false;
    if (ids) {
        srow = ids[r];
        zero = srow < 0 || srow >= n_rows;
    }
    float q[16], sc[4], of[4];
    if (!zero) F::unit(src + srow * row_bytes + (i64)blk * F::BB, sub, q, sc, of);
#pragma unroll
    for (int g = 0; g < 4; g++) {
        const i64 o = r * ldd + (i64)blk * F::BE + F::base(sub, g);
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = zero ? 0.0f : dq<T>(sc[g], q[4 * g + j], of[g]);
        if (OUT16) {
            u16 *d = (u16 *)dst + o;
            uint2 packed;
            packed.x = pack_h2(f2h(v[0]), f2h(v[1]));
            packed.y = pack_h2(f2h(v[2]), f2h(v[3]));
            *(uint2 *)d = packed;
        } else {
            float *d = (float *)dst + o;
            d[0] = v[0]; d[1] = v[1]; d[2] = v[2]; d[3] = v[3];
        }
    }
}

// One thread per unit of n rows x k weights.
template <int T, int OUT16>
__device__ __forceinline__ void dequant_units(const u8 *src, i64 row_bytes, i64 n, int k, void *dst, i64 ldd,
                                              const int *ids, i64 n_rows) {
    const int units = k / 16;
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * units) return;
    const i64 r = idx / units;
    dequant_unit<T, OUT16>(src, row_bytes, r, (int)(idx - r * units), dst, ldd, ids, n_rows);
}

// ---- GEMV: y[t][r] = W[r] . x[t] for t < N ------------------------------------------------------
// A group of `lanes` lanes (8 to 128, chosen by the host so that each lane gets several units
// even for short rows, and so that matrices of few long rows still make enough warps) handles R
// consecutive rows. Each lane takes units sub, sub + lanes, ...; with R = 1 two at a time, both
// loaded before either is used, so that more bytes are in flight per lane; with R > 1 the unit
// of all R rows, which then share each load of x. A group wider than a warp sums its warps'
// parts in shared memory, in warp order.
//
// Two kinds of x. Floats (I8 = 0): per group of 4 it forms sc * (q . x) + of * sum(x), scale and
// offset applied once per group. Measured (ncu, H100, R = 1): on large matrices this is bound
// by L1 (98%), mostly the f32 x reads (4 bytes per weight, scattered over 8 lines per
// instruction), not by DRAM (25%). Int8 rows (I8 = 1, the quantized formats; rows made by
// q8_store): x is one byte per weight, the dot of a group of 4 one dp4a of the weights' codes
// (less their bias) with x's bytes, exact in integers, then scaled by the weights' and x's
// scales, as the CPU kernels and llama.cpp multiply. The rows are always Q8_0-style (a scale per
// 32): the CPU's own for Q4_0, Q5_0 and Q8_0 weights; for the others the CPU keeps its scale per
// 32 as an f32 (the k-quants) or an f16 d·sum (Q8_1, Q4_1/Q5_1), so there the sums differ slightly.

// ---- int8 activation rows -----------------------------------------------------------------------
// Called by a whole warp, lane l holding value i = 32 b + l of a row: writes its byte and (lane 0)
// the 32's scale into the row's int8 form (see gemv8_accumulate). The CPU's Q8_0 activation
// rounding (Kernels/matmul.c, quantize_row_q8_32) step for step: d = amax / 127 rounded to f16,
// the byte rint(v * (127 / amax)). Where 127 / amax overflows (amax below ~3.7e-37, d rounds to
// 0) the bytes are 0, as the CPU's conversion of infinities leaves them.
__device__ __forceinline__ void q8_store(float v, int i, i8 *qrow, int k) {
    float a = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    float id = a != 0.0f ? __fdiv_rn(127.0f, a) : 0.0f;
    id = id < PKC_INF ? id : 0.0f;
    qrow[i] = (i8)__float2int_rn(__fmul_rn(v, id));
    if ((i & 31) == 0) ((float *)(qrow + k))[i >> 5] = h2f(f2h(__fdiv_rn(a, 127.0f)));
}

// Value i of a product's input row in the form its product reads (pk_cuda.c picks by rows): the
// int8 row of the GEMV path (q8_store: a whole warp), or with f16 the f16 row of the GEMM path,
// as its conversion of the floats would round them.
__device__ __forceinline__ void input_store(float v, int i, i8 *qrow, int k, int f16) {
    if (f16) ((u16 *)qrow)[i] = f2h(v);
    else q8_store(v, i, qrow, k);
}

// ---- RMSNorm of a row by one block ----------------------------------------------------------------
// pkc_rms_norm's arithmetic bit for bit with a block of any whole number of warps: its sum of
// squares, in double as the CPU kernel accumulates it, is a tree over V = min(1024, k rounded up
// to 32) threads (thread v sums values v, v + V, ... in order, a butterfly per warp, one over the
// warps' partials, absent warps 0), which the block replays warp by warp. x is read through L2
// (__ldcg): in the products' norm tail it was written by other blocks. part: 32 doubles, shared.
__device__ __forceinline__ void rms_row(const float *xr, const float *w, float *yr, int k, float eps, i8 *qr, int qf16,
                                        double *part) {
    const int V = k >= 1024 ? 1024 : (k + 31) / 32 * 32, lane = threadIdx.x & 31;
    for (int vw = threadIdx.x >> 5; vw < V / 32; vw += blockDim.x >> 5) {
        double s = 0.0;
        for (int i = vw * 32 + lane; i < k; i += V) {
            const float v = __ldcg(xr + i);
            s += (double)__fmul_rn(v, v);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) part[vw] = s;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        double v = threadIdx.x < V / 32 ? part[threadIdx.x] : 0.0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) part[0] = v;
    }
    __syncthreads();
    const float mean = (float)(part[0] / (double)k);
    const float scale = 1.0f / sqrtf(mean + eps);
    __syncthreads(); // part is free again
    for (int i = threadIdx.x; i < k; i += blockDim.x) { // whole warps when q is given (k a multiple of 32)
        const float v = __fmul_rn(__fmul_rn(__ldcg(xr + i), scale), w[i]);
        yr[i] = v;
        if (qr) input_store(v, i, qr, k, qf16);
    }
}

// Pair i of a head: a rotated one as pk_rope takes it (neox: i and i + pairs, else 2i and 2i + 1),
// otherwise the head two by two.
__device__ __forceinline__ void pair_index(bool rot, int neox, int i, int pairs, int &ia, int &ib) {
    ia = rot && neox ? i : 2 * i;
    ib = rot && neox ? i + pairs : 2 * i + 1;
}

// (x0, x1) rotated by pair i of row t of a RoPE table (pkc_rope_table): pk_rope's arithmetic.
__device__ __forceinline__ void rotate(const float *table, i64 t, int pairs, int i, float &x0, float &x1) {
    const float c = table[t * 2 * pairs + 2 * i], s = table[t * 2 * pairs + 2 * i + 1];
    const float r0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    x1 = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
    x0 = r0;
}

// A layer's KV cache as the kernels address it (pk_cuda.c's kv_layout, from a pkc_kv). Slotted
// (pages null): row (slot, p) at slot * slot_stride + p * kv_dim halves. Paged: at page
// pages[slot * max_pages + p / page_len], row p % page_len of it, a page being page_len rows.
struct KVCache {
    u16 *k, *v;
    const int *pages;
    i64 slot_stride;
    int kv_dim, page_shift, max_pages, unused;
};

// A row of kv_len `len`'s first position under a sliding window of `window` (0: none): its last
// `window` positions, its own included.
__device__ __forceinline__ int window_start(int len, int window) { return window > 0 && len > window ? len - window : 0; }

// Where row (slot, p) of a layer's keys (and of its values) starts, in halves.
__device__ __forceinline__ i64 kv_row(const KVCache &kv, int slot, int p) {
    if (!kv.pages) return (i64)slot * kv.slot_stride + (i64)p * kv.kv_dim;
    const i64 page = kv.pages[(i64)slot * kv.max_pages + (p >> kv.page_shift)];
    return ((page << kv.page_shift) + (p & ((1 << kv.page_shift) - 1))) * kv.kv_dim;
}

// Where head h of a q | k | v row (a key or value head: h >= q_heads) goes in the cache, for the
// row's slot and position (pkc_store_kv's layout).
__device__ __forceinline__ u16 *cache_head(int h, int q_heads, int kv_heads, int head_dim, const KVCache &kv, int slot,
                                          int position) {
    const bool is_k = h - q_heads < kv_heads;
    const int kh = is_k ? h - q_heads : h - q_heads - kv_heads;
    return (is_k ? kv.k : kv.v) + kv_row(kv, slot, position) + (i64)kh * head_dim;
}

// Pair i of head h of q | k | v row t (xr: the row): the bias added (when given: one vector over
// the whole row), rotated (q and k heads, i < pairs), written back, and k and v rounded into the
// cache: pkc_qkv_rope_store's work on one pair. Loads through L2 (in a product's tail, other
// blocks wrote the row).
__device__ __forceinline__ void qkv_pair(float *xr, int t, int h, int i, int q_heads, int kv_heads, int head_dim, int pairs,
                                         const float *table, int neox, const float *bias, const KVCache &kv,
                                         const int *slots, const int *positions) {
    float *v = xr + (i64)h * head_dim;
    const float *b = bias ? bias + (i64)h * head_dim : nullptr;
    const bool rot = h < q_heads + kv_heads && i < pairs;
    int ia, ib;
    pair_index(rot, neox, i, pairs, ia, ib);
    float x0 = __ldcg(v + ia), x1 = __ldcg(v + ib);
    if (b) { x0 = __fadd_rn(x0, b[ia]); x1 = __fadd_rn(x1, b[ib]); }
    if (rot) rotate(table, t, pairs, i, x0, x1);
    v[ia] = x0;
    v[ib] = x1;
    if (h < q_heads) return;
    u16 *cache = cache_head(h, q_heads, kv_heads, head_dim, kv, slots[t], positions[t]);
    cache[ia] = f2h(x0);
    cache[ib] = f2h(x1);
}

// A product into the residual rows that then normalizes them (pkc_matmul_add_norm): g is the
// norm's weights (nullptr: no norm), h and q its float and int8 rows (q optional), counter a
// zeroed word in device memory. With post (pkc_matmul_post_norm), the product's rows are first
// normalized in place by post's weights and added to the residual rows r, which g then
// normalizes (Gemma's norm after attention and after the feed-forward). Laid out as pk_cuda.c's
// norm_out.
struct NormOut {
    const float *g;
    float *h;
    i8 *q;
    unsigned *counter;
    const float *post;
    float *r;
    i64 ldh, ldq, ldr;
    float eps, post_eps;
};

// The ticket of a "last block" merge, called by every thread of each of `blocks` blocks after
// its stores: true in the block that counts in last, which then sees every other block's stores
// (read them through L2: __ldcg). Every thread fences its own stores before the barrier, and one
// thread per block counts. The caller puts the counter back to 0 for the next launch (a graph
// replays the same word).
__device__ __forceinline__ bool last_block(unsigned *counter, unsigned blocks) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == blocks - 1;
    __syncthreads();
    if (last) __threadfence();
    return last;
}

// The last block of the launch to finish (last_block) normalizes the n rows of y (m values
// each) and puts the counter back; with no.post, it first normalizes y's rows in place and adds
// them to the residual rows, the ones it then normalizes (the arithmetic of pkc_rms_norm, pkc_add
// and pkc_rms_norm_q8 one after another). Compiled into the GEMVs of 1 and 2 rows of x only
// (NORM_MAX_ROWS; pk_cuda.c launches the norms after the others): each copy costs compile time,
// and decoding one or two sequences is where a launch weighs most.
#define NORM_MAX_ROWS 2
template <int N>
__device__ __forceinline__ void norm_tail(const NormOut &no, float *y, i64 ldy, int m) {
    __shared__ double part[32];
    if (!last_block(no.counter, gridDim.x)) return;
#pragma unroll 1
    for (int t = 0; t < N; t++) {
        const float *src = y + t * ldy;
        if (no.post) {
            float *yr = y + t * ldy, *rr = no.r + t * no.ldr;
            rms_row(yr, no.post, yr, m, no.post_eps, nullptr, 0, part);
            __syncthreads(); // the row's normed values, written by every thread
            for (int i = threadIdx.x; i < m; i += blockDim.x) rr[i] = __fadd_rn(__ldcg(rr + i), __ldcg(yr + i));
            __syncthreads();
            src = rr;
        }
        if (no.g) rms_row(src, no.g, no.h + t * no.ldh, m, no.eps, no.q ? no.q + t * no.ldq : nullptr, 0, part);
    }
    if (threadIdx.x == 0) *no.counter = 0;
}

// A q | k | v product's tail (pkc_matmul_runs_rope_store): the last block of the product's
// launches (each run's: `blocks` in all, counted on one word) does pkc_qkv_rope_store's work on
// the rows of x (stride floats; nullptr: no tail), or with a query or key norm (qn, kn; then no
// bias) pkc_qkv_norm_rope_store's: each such head normalized first (rms_row: the same bits at
// any block size). Laid out as pk_cuda.c's rope_out.
struct RopeOut {
    float *x;
    const float *table, *bias;
    const int *slots, *positions;
    unsigned *counter;
    const float *qn, *kn;
    KVCache kv;
    i64 stride;
    int q_heads, kv_heads, head_dim, pairs, neox;
    unsigned blocks;
    float eps;
    int unused;
};

template <int N>
__device__ __forceinline__ void rope_tail(const RopeOut &ro) {
    __shared__ double part[32];
    if (!last_block(ro.counter, ro.blocks)) return;
    const int half = ro.head_dim >> 1, pairs = (ro.q_heads + 2 * ro.kv_heads) * half;
#pragma unroll 1
    for (int t = 0; t < N; t++) {
        if (ro.qn || ro.kn) {
            for (int h = 0; h < ro.q_heads + ro.kv_heads; h++) {
                const float *g = h < ro.q_heads ? ro.qn : ro.kn;
                if (!g) continue; // the same for the whole block
                float *v = ro.x + t * ro.stride + (i64)h * ro.head_dim;
                rms_row(v, g, v, ro.head_dim, ro.eps, nullptr, 0, part);
            }
            __syncthreads(); // the pairs below are other threads' values
        }
        for (int j = threadIdx.x; j < pairs; j += blockDim.x)
            qkv_pair(ro.x + t * ro.stride, t, j / half, j % half, ro.q_heads, ro.kv_heads, ro.head_dim, ro.pairs, ro.table, ro.neox,
                     ro.bias, ro.kv, ro.slots, ro.positions);
    }
    if (threadIdx.x == 0) *ro.counter = 0;
}

#define GEMV_WARPS 4

// kexp.h's e^x, step for step (the same bits as the CPU's).
__device__ __forceinline__ float kexp(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float n = rintf(__fmul_rn(x, 1.44269504088896341f));
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    const float yv = __fadd_rn(fmaf(p, __fmul_rn(r, r), r), 1.0f);
    return __fmul_rn(yv, __int_as_float(((int)n + 127) << 23));
}

// silu(g) * u: pk_swiglu's arithmetic, bit for bit.
__device__ __forceinline__ float silu_mul(float g, float u) { return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, kexp(-g))), u); }
// gelu(g) * u in gelu's tanh form, as Kernels/ops.c's gated_span: 0.5 (1 + tanh v) = sigmoid(2v)
// with 2v = 2 sqrt(2/pi) (g + 0.044715 g^3), op by op.
__device__ __forceinline__ float gelu_mul(float g, float u) {
    const float x = __fmul_rn(1.5957691216057308f, __fadd_rn(g, __fmul_rn(0.044715f, __fmul_rn(__fmul_rn(g, g), g))));
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, kexp(-x))), u);
}

template <int T, int N, int R>
__device__ __forceinline__ void gemv_accumulate(int u, const float (*q)[16], const float (*sc)[4], const float (*of)[4],
                                                const float *x, i64 ldx, float (*acc)[R]) {
    typedef Fmt<T> F;
    const int blk = u / F::UPB, sub = u % F::UPB;
    const int xo = blk * F::BE;
#pragma unroll
    for (int g = 0; g < 4; g++) {
        const int o = xo + F::base(sub, g);
#pragma unroll
        for (int t = 0; t < N; t++) {
            const float4 xv = *(const float4 *)(x + t * ldx + o);
            const float sx = F::OFF ? (xv.x + xv.y) + (xv.z + xv.w) : 0.0f;
#pragma unroll
            for (int r = 0; r < R; r++) {
                float s = q[r][4 * g] * xv.x;
                s = fmaf(q[r][4 * g + 1], xv.y, s);
                s = fmaf(q[r][4 * g + 2], xv.z, s);
                s = fmaf(q[r][4 * g + 3], xv.w, s);
                acc[t][r] = F::OFF ? fmaf(of[r][g], sx, fmaf(sc[r][g], s, acc[t][r])) : fmaf(sc[r][g], s, acc[t][r]);
            }
        }
    }
}

// The int8 rows: row t at xq + t * ldq holds k bytes (x rounded to int8 by 32s), then the k / 32
// float scales d (x ~ d * byte).
template <int T, int N, int R>
__device__ __forceinline__ void gemv8_accumulate(int u, const int (*q)[4], const float (*sc)[4], const float (*of)[4],
                                                 const i8 *xq, i64 ldq, int k, float (*acc)[R]) {
    typedef Fmt<T> F;
    const int blk = u / F::UPB, sub = u % F::UPB;
    const int xo = blk * F::BE;
#pragma unroll
    for (int t = 0; t < N; t++) {
        const i8 *xr = xq + t * ldq;
        const float *xd = (const float *)(xr + k);
        if constexpr (F::UNIFORM) {
            // One scale and offset for the unit, and its 16 weights in one 32 of x: one float step.
            int xv[4];
#pragma unroll
            for (int g = 0; g < 4; g++) xv[g] = *(const int *)(xr + xo + F::base(sub, g));
            const float d = xd[(xo + F::base(sub, 0)) >> 5];
            int xs = 0;
            if (F::OFF) {
#pragma unroll
                for (int g = 0; g < 4; g++) xs = __dp4a(xv[g], 0x01010101, xs);
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                int s = 0;
#pragma unroll
                for (int g = 0; g < 4; g++) s = __dp4a(q[r][g], xv[g], s);
                acc[t][r] = F::OFF ? fmaf(d * of[r][0], (float)xs, fmaf(d * sc[r][0], (float)s, acc[t][r]))
                                   : fmaf(d * sc[r][0], (float)s, acc[t][r]);
            }
        } else {
#pragma unroll
            for (int g = 0; g < 4; g++) {
                const int o = xo + F::base(sub, g);
                const int xv = *(const int *)(xr + o);
                const float d = xd[o >> 5];
                const int xs = F::OFF ? __dp4a(xv, 0x01010101, 0) : 0;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const int s = __dp4a(q[r][g], xv, 0);
                    acc[t][r] = F::OFF ? fmaf(d * of[r][g], (float)xs, fmaf(d * sc[r][g], (float)s, acc[t][r]))
                                       : fmaf(d * sc[r][g], (float)s, acc[t][r]);
                }
            }
        }
    }
}

// One unit of R rows into the sums: loaded (floats or signed bytes) then accumulated.
template <int T, int N, int R, int I8>
__device__ __forceinline__ void gemv_units(const u8 *const *wr, int u, const void *x, i64 ldx, int k, float (*acc)[R]) {
    typedef Fmt<T> F;
    float sc[R][4], of[R][4];
    if constexpr (I8) {
        int q[R][4];
#pragma unroll
        for (int r = 0; r < R; r++) F::iunit(wr[r] + (i64)(u / F::UPB) * F::BB, u % F::UPB, q[r], sc[r], of[r]);
        gemv8_accumulate<T, N, R>(u, q, sc, of, (const i8 *)x, ldx, k, acc);
    } else {
        float q[R][16];
#pragma unroll
        for (int r = 0; r < R; r++) F::unit(wr[r] + (i64)(u / F::UPB) * F::BB, u % F::UPB, q[r], sc[r], of[r]);
        gemv_accumulate<T, N, R>(u, q, sc, of, (const float *)x, ldx, acc);
    }
}

// GLU = 1 (R = 2): W is 2m rows, gate rows then up rows; the group of pair p takes rows p and
// m + p and writes silu(gate) * up to y[p] (pkc_swiglu's arithmetic on the same sums), or with
// mode 1 gelu(gate) * up (pkc_geglu's). Without GLU, mode 1 adds the sums to y.
template <int T, int N, int R, int I8, int GLU = 0>
__device__ __forceinline__ void gemv_body(const u8 *w, int m, int k, i64 row_bytes, const void *x, i64 ldx, float *y,
                                          i64 ldy, int lanes_log2, int mode, const NormOut &no, const RopeOut &ro) {
    typedef Fmt<T> F;
    static_assert(!GLU || R == 2, "a gated pair is two rows");
    const int lanes = 1 << lanes_log2;
    const int sub = threadIdx.x & (lanes - 1);
    const int group = (blockIdx.x * (GEMV_WARPS * 32) + threadIdx.x) >> lanes_log2;
    const int row0 = GLU ? group : group * R;
    // No early return: the whole warp takes part in the shuffles. Rows past m read row 0.
    const int units = row0 < m ? k / 16 : 0;
    const u8 *wr[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int row = GLU ? row0 + r * m : row0 + r;
        wr[r] = w + (i64)(GLU ? (row0 < m ? row : 0) : (row < m ? row : 0)) * row_bytes;
    }
    float acc[N][R];
#pragma unroll
    for (int t = 0; t < N; t++)
#pragma unroll
        for (int r = 0; r < R; r++) acc[t][r] = 0.0f;
    int u = sub;
    if constexpr (R == 1) {
        // Two units in flight: both loaded before either is used.
        for (; u + lanes < units; u += 2 * lanes) {
            const int u1 = u + lanes;
            if constexpr (I8) {
                int q[2][4];
                float sc[2][4], of[2][4];
                F::iunit(wr[0] + (i64)(u / F::UPB) * F::BB, u % F::UPB, q[0], sc[0], of[0]);
                F::iunit(wr[0] + (i64)(u1 / F::UPB) * F::BB, u1 % F::UPB, q[1], sc[1], of[1]);
                gemv8_accumulate<T, N, R>(u, q, sc, of, (const i8 *)x, ldx, k, acc);
                gemv8_accumulate<T, N, R>(u1, q + 1, sc + 1, of + 1, (const i8 *)x, ldx, k, acc);
            } else {
                float q[2][16], sc[2][4], of[2][4];
                F::unit(wr[0] + (i64)(u / F::UPB) * F::BB, u % F::UPB, q[0], sc[0], of[0]);
                F::unit(wr[0] + (i64)(u1 / F::UPB) * F::BB, u1 % F::UPB, q[1], sc[1], of[1]);
                gemv_accumulate<T, N, R>(u, q, sc, of, (const float *)x, ldx, acc);
                gemv_accumulate<T, N, R>(u1, q + 1, sc + 1, of + 1, (const float *)x, ldx, acc);
            }
        }
    }
    for (; u < units; u += lanes) gemv_units<T, N, R, I8>(wr, u, x, ldx, k, acc);
    const int warp_lanes = lanes < 32 ? lanes : 32;
#pragma unroll
    for (int t = 0; t < N; t++)
#pragma unroll
        for (int r = 0; r < R; r++)
            for (int o = warp_lanes >> 1; o > 0; o >>= 1) acc[t][r] += __shfl_xor_sync(0xffffffffu, acc[t][r], o);
    if (lanes > 32) {
        // The group's warps meet in shared memory; its first lane adds them in warp order.
        __shared__ float part[GEMV_WARPS][N][R];
        const int warp = threadIdx.x >> 5;
        if ((threadIdx.x & 31) == 0) {
#pragma unroll
            for (int t = 0; t < N; t++)
#pragma unroll
                for (int r = 0; r < R; r++) part[warp][t][r] = acc[t][r];
        }
        __syncthreads();
        if (sub == 0) {
#pragma unroll
            for (int t = 0; t < N; t++)
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float s = part[warp][t][r];
                    for (int j = 1; j < (lanes >> 5); j++) s += part[warp + j][t][r];
                    acc[t][r] = s;
                }
        }
    }
    if constexpr (GLU) {
        if (sub == 0 && row0 < m) {
#pragma unroll
            for (int t = 0; t < N; t++) y[t * ldy + row0] = mode ? gelu_mul(acc[t][0], acc[t][1]) : silu_mul(acc[t][0], acc[t][1]);
        }
    } else if (sub == 0) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (row0 + r >= m) break;
#pragma unroll
            for (int t = 0; t < N; t++) {
                float *yp = y + t * ldy + row0 + r;
                *yp = mode ? *yp + acc[t][r] : acc[t][r];
            }
        }
    }
    if constexpr (!GLU && N <= NORM_MAX_ROWS) {
        if (no.g || no.post) norm_tail<N>(no, y, ldy, m);
        else if (ro.x) rope_tail<N>(ro);
    }
}

// A RoPE table to fill (nullptr: none) and its frequencies: the angle step between pairs (the
// host's powf), the linear scale (1: none) and per-pair factors (Llama 3.1's; nullptr: none).
// pk_cuda.c's rope_freqs is the same layout.
struct RopeFreqs {
    float *table;
    const float *factors;
    float theta_scale, freq_scale;
};

// Entry (t, i) of a RoPE table: the angle of pair i advances by repeated multiplication from the
// position, then is divided by the pair's factor and scaled, as pk_rope_table does (so the
// angles are the CPU's bits; only cos/sin may differ by an ulp or two).
__device__ __forceinline__ void rope_entry(const int *positions, int t, int i, int pairs, const RopeFreqs &f) {
    float theta = (float)positions[t];
    for (int j = 0; j < i; j++) theta = __fmul_rn(theta, f.theta_scale);
    const float angle = __fmul_rn(f.freq_scale, f.factors ? __fdiv_rn(theta, f.factors[i]) : theta);
    float s, c;
    sincosf(angle, &s, &c);
    f.table[(i64)t * 2 * pairs + 2 * i] = c;
    f.table[(i64)t * 2 * pairs + 2 * i + 1] = s;
}

// The step's first launches in one (pkc_embed_norm_rope): block t gathers row ids[t] of the
// table into x (pkc_get_rows), scales it unless scale is 1 (pkc_scale), fills row t of each RoPE
// table (pkc_rope_table; nullptr: none), then normalizes its row into y and the input row q
// (pkc_rms_norm_q8), bit for bit.
template <int T>
__device__ __forceinline__ void embed_norm_rope(const u8 *src, i64 row_bytes, i64 n_rows, int k, const int *ids, float *x,
                                                i64 ldx, float scale, const float *w, float *y, i64 ldy, float eps, i8 *q,
                                                i64 ldq, int qf16, const int *positions, int pairs, const RopeFreqs &r1,
                                                const RopeFreqs &r2) {
    __shared__ double part[32];
    const int t = blockIdx.x;
    for (int u = threadIdx.x; u < k / 16; u += blockDim.x) dequant_unit<T, 0>(src, row_bytes, t, u, x, ldx, ids, n_rows);
    if (r1.table)
        for (int i = threadIdx.x; i < pairs; i += blockDim.x) rope_entry(positions, t, i, pairs, r1);
    if (r2.table)
        for (int i = threadIdx.x; i < pairs; i += blockDim.x) rope_entry(positions, t, i, pairs, r2);
    __syncthreads(); // the row, written by every thread
    if (scale != 1.0f) {
        float *xr = x + (i64)t * ldx;
        for (int i = threadIdx.x; i < k; i += blockDim.x) xr[i] = __fmul_rn(xr[i], scale);
        __syncthreads();
    }
    rms_row(x + (i64)t * ldx, w, y + (i64)t * ldy, k, eps, q ? q + (i64)t * ldq : nullptr, qf16, part);
}

// ---- the core module: everything that is not per format -----------------------------------------

#if PKC_FORMAT < 0

// Rows of floats to int8 rows (k a multiple of 32): a thread per value.
extern "C" __global__ void pkc_quantize_q8(const float *x, i64 ldx, int n, int k, i8 *q, i64 ldq) {
    PKC_DEPENDENT();
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (i64)n * k) return; // whole warps: n * k is a multiple of 32
    const i64 t = idx / k;
    const int i = (int)(idx - t * k);
    q8_store(x[t * ldx + i], i, q + t * ldq, k);
}

// ---- elementwise ------------------------------------------------------------------------------

// RMSNorm: one block per row; the sum of squares in double, as the CPU kernel accumulates it.
// With q, the normed row also goes to row blockIdx.x of q: an int8 row (k a multiple of 32) or,
// with qf16, an f16 row (input_store). With heads
// > 1 each row of x (and y) is that many rows of k side by side (a row's query or key heads,
// Gemma's per-head norm): block b takes row b / heads, head b % heads; q is then not given.
// Launched with up to 1024 threads (pk_cuda.c), hence the bounds.
extern "C" __global__ void __launch_bounds__(1024) pkc_rms_norm(const float *x, i64 ldx, const float *w, float *y, i64 ldy,
                                                                int k, float eps, i8 *q, i64 ldq, int heads, int qf16) {
    PKC_DEPENDENT();
    __shared__ double part[32];
    const i64 t = blockIdx.x / heads, hk = (i64)(blockIdx.x - t * heads) * k;
    rms_row(x + t * ldx + hk, w, y + t * ldy + hk, k, eps, q ? q + t * ldq : nullptr, qf16, part);
}

extern "C" __global__ void pkc_rope_table(const int *positions, int n, int pairs, const RopeFreqs f) {
    PKC_DEPENDENT();
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * pairs) return;
    const int t = idx / pairs;
    rope_entry(positions, t, idx - t * pairs, pairs, f);
}

extern "C" __global__ void pkc_rope(float *x, int n, i64 stride, int heads, int head_dim, int pairs, const float *table,
                                    int neox) {
    PKC_DEPENDENT();
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (i64)n * heads * pairs) return;
    const int i = (int)(idx % pairs);
    const i64 th = idx / pairs;
    const int h = (int)(th % heads);
    const i64 t = th / heads;
    float *v = x + t * stride + (i64)h * head_dim;
    int ia, ib;
    pair_index(true, neox, i, pairs, ia, ib);
    float x0 = v[ia], x1 = v[ib];
    rotate(table, t, pairs, i, x0, x1);
    v[ia] = x0;
    v[ib] = x1;
}

// With q, the results also go to input rows (input_store: int8 rows, k a multiple of 32, or with
// qf16 f16 rows). gelu: GEGLU instead of SwiGLU.
extern "C" __global__ void pkc_swiglu(float *gate, i64 ldg, const float *up, i64 ldu, int n, int k, i8 *q, i64 ldq,
                                      int gelu, int qf16) {
    PKC_DEPENDENT();
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (i64)n * k) return; // whole warps when q is given: n * k is a multiple of 32
    const i64 t = idx / k, i = idx - t * k;
    const float g = gate[t * ldg + i];
    const float v = gelu ? gelu_mul(g, up[t * ldu + i]) : silu_mul(g, up[t * ldu + i]);
    gate[t * ldg + i] = v;
    if (q) input_store(v, (int)i, q + t * ldq, k, qf16);
}

extern "C" __global__ void pkc_add(float *y, const float *x, i64 count) {
    PKC_DEPENDENT();
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < count) y[idx] = __fadd_rn(y[idx], x[idx]);
}

// y *= s (Gemma's embedding scale), or with cap > 0 y = cap tanh(y / cap) (a final logit softcap).
extern "C" __global__ void pkc_scale(float *y, i64 count, float s, float cap) {
    PKC_DEPENDENT();
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= count) return;
    y[idx] = cap > 0.0f ? __fmul_rn(cap, tanhf(__fdiv_rn(y[idx], cap))) : __fmul_rn(y[idx], s);
}

// A layer's q | k | v rows after their product, in one launch: the bias added (when given, one
// vector over the whole row), q's and k's heads rotated, k and v rounded into the cache; the
// same arithmetic as pkc_add_bias, pkc_rope and pkc_store_kv one after another. One thread per
// pair of a head: (q heads + kv heads) rotate, the v heads only store.
extern "C" __global__ void pkc_qkv_rope_store(float *x, int n, i64 stride, int q_heads, int kv_heads, int head_dim,
                                              int pairs, const float *table, int neox, const float *bias, KVCache kv,
                                              const int *slots, const int *positions) {
    PKC_DEPENDENT();
    const int half = head_dim >> 1, heads = q_heads + 2 * kv_heads;
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (i64)n * heads * half) return;
    const int i = (int)(idx % half);
    const i64 th = idx / half;
    const int h = (int)(th % heads);
    const int t = (int)(th / heads);
    qkv_pair(x + t * stride, t, h, i, q_heads, kv_heads, head_dim, pairs, table, neox, bias, kv, slots, positions);
}
// pkc_qkv_rope_store's work after each query head normalized by qn and each key head by kn (a
// per-head RMSNorm, Gemma's; either may be absent), as pkc_rms_norm_heads, pkc_rope and
// pkc_store_kv one after another, bit for bit; no bias. A block per head of a row (rms_row's
// whole warps), its threads over the head's pairs.
extern "C" __global__ void __launch_bounds__(1024) pkc_qkv_norm_rope_store(float *x, i64 stride, int q_heads, int kv_heads,
                                                                           int head_dim, int pairs, const float *table,
                                                                           int neox, const float *qn, const float *kn,
                                                                           float eps, KVCache kv, const int *slots,
                                                                           const int *positions) {
    PKC_DEPENDENT();
    __shared__ double part[32];
    const int heads = q_heads + 2 * kv_heads, t = blockIdx.x / heads, h = blockIdx.x - t * heads;
    float *v = x + (i64)t * stride + (i64)h * head_dim;
    const float *g = h < q_heads ? qn : h < q_heads + kv_heads ? kn : nullptr;
    if (g) { // the same for the whole block
        rms_row(v, g, v, head_dim, eps, nullptr, 0, part);
        __syncthreads(); // the pairs below are other threads' values
    }
    for (int i = threadIdx.x; i < head_dim >> 1; i += blockDim.x)
        qkv_pair(x + (i64)t * stride, t, h, i, q_heads, kv_heads, head_dim, pairs, table, neox, nullptr, kv, slots, positions);
}
extern "C" __global__ void pkc_add_bias(float *y, i64 ldy, const float *bias, int n, int m) {
    PKC_DEPENDENT();
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (i64)n * m) return;
    const i64 t = idx / m, i = idx - t * m;
    y[t * ldy + i] = __fadd_rn(y[t * ldy + i], bias[i]);
}

// Rows to f16 (the GEMM path's activations).
extern "C" __global__ void pkc_to_f16(const float *x, i64 ldx, u16 *y, int n, int k) {
    PKC_DEPENDENT();
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (i64)n * k) return;
    const i64 t = idx / k, i = idx - t * k;
    y[t * k + i] = f2h(x[t * ldx + i]);
}

// Argmax: one block per row; the best (value, lowest index) pair wins, NaN never does.
// Row t's argmax. Without a mask (masks NULL or mask_rows[t] < 0): pk_argmax's rule, the lowest
// index among equals, NaN never wins, 0 when nothing is above -infinity. With one (bit i % 32 of
// word i / 32 of mask row mask_rows[t] allows token i): the greedy choice of the CPU sampler over
// the allowed tokens visited in order: the first allowed token unless a later one is strictly
// greater (so a NaN first one stays, and among equals the lowest wins); 0 when none is allowed.
// Greedy choice over a row, optionally limited to a token mask: (best value, its lowest index,
// the first allowed index) merged across lanes; NaN never wins.
struct ArgBest {
    float v;
    int i, first;
};
__device__ __forceinline__ void arg_take(ArgBest &a, float v, int i, int f) {
    if (v > a.v || (v == a.v && i < a.i)) { a.v = v; a.i = i; }
    a.first = min(a.first, f);
}
__device__ __forceinline__ void arg_warp(ArgBest &a) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        arg_take(a, __shfl_xor_sync(0xffffffffu, a.v, o), __shfl_xor_sync(0xffffffffu, a.i, o),
                 __shfl_xor_sync(0xffffffffu, a.first, o));
}
// The whole block's merge, in lane 0 of warp 0 (blockDim.x a multiple of 32, at most 1024).
__device__ __forceinline__ ArgBest arg_block(ArgBest a) {
    __shared__ float bv[32];
    __shared__ int bi[32], bf[32];
    arg_warp(a);
    if ((threadIdx.x & 31) == 0) { bv[threadIdx.x >> 5] = a.v; bi[threadIdx.x >> 5] = a.i; bf[threadIdx.x >> 5] = a.first; }
    __syncthreads();
    if (threadIdx.x < 32) {
        const bool live = threadIdx.x < (blockDim.x >> 5);
        a.v = live ? bv[threadIdx.x] : -PKC_INF;
        a.i = live ? bi[threadIdx.x] : 0x7fffffff;
        a.first = live ? bf[threadIdx.x] : 0x7fffffff;
        arg_warp(a);
    }
    return a;
}

// Row blockIdx.y of x (`width` values), limited to its token mask when it has one (mask_rows[row]
// >= 0 names a row of `masks`; the mask's words may cover fewer values than width), split over
// gridDim.x blocks: this block's chunk [lo, hi), whole 32s.
struct RowPart {
    const float *row;
    const unsigned *mask;
    int lo, hi;
    __device__ __forceinline__ bool allowed(int i) const { return !mask || ((mask[i >> 5] >> (i & 31)) & 1u); }
};

__device__ __forceinline__ RowPart row_part(const float *x, i64 ld, int width, const unsigned *masks, i64 mask_words,
                                            const int *mask_rows) {
    const int r = blockIdx.y, nb = gridDim.x;
    const int mrow = masks ? mask_rows[r] : -1;
    const unsigned *mask = mrow >= 0 ? masks + (i64)mrow * mask_words : nullptr;
    const int n = mask ? (int)min((i64)width, mask_words * 32) : width;
    const int chunk = ((n + nb - 1) / nb + 31) & ~31;
    const int lo = blockIdx.x * chunk;
    return {x + r * ld, mask, lo, min(n, lo + chunk)};
}

// Rows of `width` split over gridDim.x blocks each (blockIdx.y: the row, row_part): every block merges its
// part into part[row][block]; the last block of a row to finish merges the parts and writes
// ids[row], then zeroes the row's counter for the next launch (graphs replay it). A single
// block over a 152k vocabulary took ~4% of a Qwen2.5 decode step.
extern "C" __global__ void pkc_argmax(const float *x, i64 ld, int width, const unsigned *masks, i64 mask_words,
                                      const int *mask_rows, int *ids, ArgBest *part, unsigned *counters) {
    PKC_DEPENDENT();
    const int r = blockIdx.y, nb = gridDim.x;
    const RowPart p = row_part(x, ld, width, masks, mask_words, mask_rows);
    ArgBest a = {-PKC_INF, 0x7fffffff, 0x7fffffff};
    for (int i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
        if (!p.allowed(i)) continue;
        if (a.first == 0x7fffffff) a.first = i;
        const float v = p.row[i];
        // i rises per thread: a later equal never replaces; -infinity counts once something is allowed
        if (v == v && (a.i == 0x7fffffff || v > a.v)) { a.v = v; a.i = i; }
    }
    a = arg_block(a);
    if (threadIdx.x == 0) part[(i64)r * nb + blockIdx.x] = a;
    if (!last_block(&counters[r], nb)) return;
    a = {-PKC_INF, 0x7fffffff, 0x7fffffff};
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
        const volatile ArgBest *pb = part + (i64)r * nb + b;
        arg_take(a, pb->v, pb->i, pb->first);
    }
    a = arg_block(a);
    if (threadIdx.x == 0) {
        int out;
        if (!p.mask) out = (a.i == 0x7fffffff || a.v == -PKC_INF) ? 0 : a.i;
        else if (a.first == 0x7fffffff) out = 0;
        else if (p.row[a.first] != p.row[a.first] || a.i == 0x7fffffff) out = a.first;
        else out = a.i;
        ids[r] = out;
        counters[r] = 0;
    }
}

// ---- the k best tokens, for sampling ---------------------------------------------------------------

#define TOPK_MAX 64
#define TOPK_THREADS 256
#define TOPK_BLOCKS 32

// a ranks before b: the larger value, then the lower id (the CPU sampler's order)
__device__ __forceinline__ bool ranks_before(float av, int ai, float bv, int bi) { return av > bv || (av == bv && ai < bi); }

// One round of a warp's merge: every lane offers its list's head (v, i; an empty list offers
// (-infinity, no id), which every real entry ranks before); all lanes learn the best, the lane
// that offered it advances its head. Gives the best as (id, value bits), id -1 when none.
__device__ __forceinline__ int2 topk_pick(float v, int i, int *head) {
    const int own = i;
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, s);
        const int oi = __shfl_xor_sync(0xffffffffu, i, s);
        if (ranks_before(ov, oi, v, i)) { v = ov; i = oi; }
    }
    if (i == 0x7fffffff) return make_int2(-1, 0);
    if (own == i) ++*head; // ids are distinct: only the offering lane matches
    return make_int2(i, __float_as_int(v));
}

// By one whole warp: the best k of up to 32 sorted lists (lane l takes list l; entries (id, value
// bits), an id of -1 ending a list) into dst, best first, id -1 past the lists' entries.
__device__ __forceinline__ void topk_merge(const int2 (*lists)[TOPK_MAX], int count, int k, int2 *dst) {
    const int lane = threadIdx.x & 31;
    int head = 0;
    for (int j = 0; j < k; j++) {
        const int2 h = lane < count && head < k ? lists[lane][head] : make_int2(-1, 0);
        const int2 e = topk_pick(h.x >= 0 ? __int_as_float(h.y) : -PKC_INF, h.x >= 0 ? h.x : 0x7fffffff, &head);
        if (lane == 0) dst[j] = e;
    }
}

// Row r's k = min(ks[r], TOPK_MAX) best allowed values (k 0: the row is skipped), best first, to
// out[r * TOPK_MAX + j] as (id, value bits); the slots past the row's count get id -1. A row's
// mask as pkc_argmax's. NaN values are skipped; -infinity ones count. Up to TOPK_BLOCKS blocks per
// row (grid: blocks x rows), each over a chunk of the row: every thread keeps the best k of the
// ids it scans, in rising order (so an equal value never displaces a kept one); the warps merge
// their lanes' lists, the first warp the warps', into the block's list in part; the row's last
// block to finish (last_block) merges the blocks' lists and puts the counter back.
extern "C" __global__ void __launch_bounds__(TOPK_THREADS) pkc_topk(const float *x, i64 ld, int width, const int *ks,
                                                                    const unsigned *masks, i64 mask_words,
                                                                    const int *mask_rows, int2 *out, int2 *part,
                                                                    unsigned *counters) {
    PKC_DEPENDENT();
    const int r = blockIdx.y, nb = gridDim.x;
    const int k = min(ks[r], TOPK_MAX);
    if (k <= 0) return;
    const RowPart p = row_part(x, ld, width, masks, mask_words, mask_rows);
    float lv[TOPK_MAX];
    int li[TOPK_MAX];
    int count = 0;
    for (int i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
        if (!p.allowed(i)) continue;
        const float v = p.row[i];
        if (v != v || (count == k && !(v > lv[k - 1]))) continue;
        int j = count < k ? count++ : k - 1;
        for (; j > 0 && v > lv[j - 1]; j--) {
            lv[j] = lv[j - 1];
            li[j] = li[j - 1];
        }
        lv[j] = v;
        li[j] = i;
    }
    __shared__ int2 lists[TOPK_BLOCKS > TOPK_THREADS / 32 ? TOPK_BLOCKS : TOPK_THREADS / 32][TOPK_MAX];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    int head = 0;
    for (int j = 0; j < k; j++) {
        const int2 e = topk_pick(head < count ? lv[head] : -PKC_INF, head < count ? li[head] : 0x7fffffff, &head);
        if (lane == 0) lists[warp][j] = e;
    }
    __syncthreads();
    int2 *mine = part + ((i64)r * nb + blockIdx.x) * TOPK_MAX;
    if (warp == 0) topk_merge(lists, warps, k, mine);
    if (!last_block(&counters[r], nb)) return;
    for (int e = threadIdx.x; e < nb * k; e += blockDim.x) {
        const int b = e / k, j = e - b * k;
        const int2 *src = part + ((i64)r * nb + b) * TOPK_MAX + j;
        lists[b][j] = make_int2(__ldcg(&src->x), __ldcg(&src->y));
    }
    __syncthreads();
    int2 *o = out + (i64)r * TOPK_MAX;
    if (warp == 0) {
        topk_merge(lists, nb, k, o);
        for (int e = k + lane; e < TOPK_MAX; e += 32) o[e] = make_int2(-1, 0);
        if (lane == 0) counters[r] = 0;
    }
}

// ---- KV cache and attention -------------------------------------------------------------------

extern "C" __global__ void pkc_store_kv(KVCache kv, const float *k, i64 ldk, const float *v, i64 ldv, int n,
                                        const int *slots, const int *positions) {
    PKC_DEPENDENT();
    const int kv_dim = kv.kv_dim;
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (i64)n * kv_dim) return;
    const int t = (int)(idx / kv_dim), i = (int)(idx - (i64)t * kv_dim);
    const i64 o = kv_row(kv, slots[t], positions[t]) + i;
    kv.k[o] = f2h(k[t * ldk + i]);
    kv.v[o] = f2h(v[t * ldv + i]);
}

// pkc_copy_kv: up to KV_COPIES copies of runs of halves in every layer's keys and values, one
// launch. Block row y is (copy, layer, keys or values); the x blocks stride over the run, 16
// bytes a thread (the host checks every run is 16-byte aligned, a multiple of 8 halves long).
#define KV_COPIES 16
struct KVCopy {
    i64 src, dst, count; // halves from a layer's start
};
struct KVCopies {
    KVCopy op[KV_COPIES];
    i64 layer_stride, layers;
};

extern "C" __global__ void pkc_copy_kv(u16 *k, u16 *v, const KVCopies cs) {
    PKC_DEPENDENT();
    const i64 y = blockIdx.y, per_copy = 2 * cs.layers;
    const KVCopy op = cs.op[y / per_copy];
    u16 *base = ((y & 1) ? v : k) + ((y % per_copy) >> 1) * cs.layer_stride;
    const uint4 *src = (const uint4 *)(base + op.src);
    uint4 *dst = (uint4 *)(base + op.dst);
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < op.count / 8; i += (i64)gridDim.x * blockDim.x) dst[i] = src[i];
}

// Attention: a block per (row, G query heads, split). With G = n_head / n_kv_head the heads that
// share a kv head are done together, so each key and value row is read once for all of them;
// with G = 1 (few rows: the host's choice) each head is a block of its own, G times the blocks
// and a G times shorter chain of work per block, the shared rows read again from L2.
// Positions go by tiles of ATT_TILE: one thread scores one position for all G heads (its key
// row read with 16-byte loads), an online softmax per head (one warp per head), then threads
// accumulate outputs (head, dim) over the tile's values, reading value rows coalesced.
// With several splits, each writes its unnormalized output with its max and sum, and
// pkc_attention_combine merges them (long contexts with few rows: flash-decoding). With rows
// (the GEMM path's f16 input rows of the output product, row stride ldr bytes), each output
// also goes there, as the product's conversion of the floats would round it.
#define ATT_THREADS 128
#define ATT_TILE 128
#define ATT_MAXG 8
#define ATT_MAXHD 256

template <int G>
__device__ __forceinline__ void attention_body(const KVCache &kv, const float *q, i64 ldq, int n_head, int n_kv_head, int hd,
                                               const int *slots, const int *kv_len, float scale, int split_len, float *out,
                                               i64 ldo, float *partial, int window, i8 *rows, i64 ldr) {
    PKC_DYNAMIC_SHARED(float, smem);
    float *qs = smem;                          // G * hd
    float *ps = qs + G * hd;                   // G * ATT_TILE
    float *stat = ps + G * ATT_TILE;           // per head: alpha of this tile, running max, running sum (4G)
    const int hblocks = n_head / G;
    const int t = blockIdx.x / hblocks, head0 = (blockIdx.x - t * hblocks) * G;
    const int kvh = head0 / (n_head / n_kv_head);
    const int split = blockIdx.y, splits = gridDim.y;
    const int len = kv_len[t];
    const int p_begin = window_start(len, window) + split * split_len;
    const int p_end = min(len, p_begin + split_len);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int slot = slots[t];
    // Row p's key head at kb + kv_row(p) (a page table read per row where the cache is paged).
    const u16 *kb = kv.k + (i64)kvh * hd, *vb = kv.v + (i64)kvh * hd;

    for (int i = tid; i < G * hd; i += ATT_THREADS)
        qs[i] = h2f(f2h(q[(i64)t * ldq + (i64)head0 * hd + i]));
    if (tid < G) { stat[tid] = 0.0f; stat[G + tid] = -PKC_INF; stat[2 * G + tid] = 0.0f; }
    // outputs: index o = tid + ATT_THREADS * j -> head o / hd, dim o % hd
    const int outs = G * hd;
    // Values: a thread holds 8 dims (one 16-byte piece of a value row) of all G heads, for the
    // positions of its group (hd a power of two, so pieces x groups = ATT_THREADS).
    const int pieces = hd >> 3, groups = ATT_THREADS / pieces;
    const int piece = tid & (pieces - 1), pgroup = tid / pieces;
    float acc[G][8];
#pragma unroll
    for (int c = 0; c < G; c++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[c][j] = 0.0f;
    __syncthreads();

    for (int p0 = p_begin; p0 < p_end; p0 += ATT_TILE) {
        const int count = min(ATT_TILE, p_end - p0);
        // scores
        if (tid < count) {
            const u16 *kr = kb + kv_row(kv, slot, p0 + tid);
            float s[G];
#pragma unroll
            for (int c = 0; c < G; c++) s[c] = 0.0f;
            for (int d = 0; d < hd; d += 8) {
                const uint4 key = *(const uint4 *)(kr + d);
                const u32 w[4] = {key.x, key.y, key.z, key.w};
                float kf[8];
#pragma unroll
                for (int j = 0; j < 4; j++) { kf[2 * j] = h2f((u16)(w[j] & 0xffff)); kf[2 * j + 1] = h2f((u16)(w[j] >> 16)); }
#pragma unroll
                for (int c = 0; c < G; c++) {
#pragma unroll
                    for (int j = 0; j < 8; j++) s[c] = fmaf(qs[c * hd + d + j], kf[j], s[c]);
                }
            }
#pragma unroll
            for (int c = 0; c < G; c++) ps[c * ATT_TILE + tid] = s[c] * scale;
        }
        __syncthreads();
        // online softmax: warp w takes heads w, w + 4, ...
        for (int c = warp; c < G; c += ATT_THREADS / 32) {
            float mx = -PKC_INF;
            for (int i = lane; i < count; i += 32) mx = fmaxf(mx, ps[c * ATT_TILE + i]);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float prev = stat[G + c]; // running max of head c (stats live in shared memory)
            float sum = 0.0f;
            const float nm = fmaxf(prev, mx);
            for (int i = lane; i < count; i += 32) {
                const float e = expf(ps[c * ATT_TILE + i] - nm);
                ps[c * ATT_TILE + i] = e;
                sum += e;
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            const float alpha = prev == -PKC_INF ? 0.0f : expf(prev - nm);
            __syncwarp();
            if (lane == 0) {
                stat[c] = alpha;
                stat[G + c] = nm;
                stat[2 * G + c] = stat[2 * G + c] * alpha + sum;
            }
        }
        __syncthreads();
        // values: rescale by this tile's alpha, then accumulate the group's positions
#pragma unroll
        for (int c = 0; c < G; c++) {
            const float al = stat[c];
#pragma unroll
            for (int j = 0; j < 8; j++) acc[c][j] *= al;
        }
        for (int i = pgroup; i < count; i += groups) {
            const uint4 raw = *(const uint4 *)(vb + kv_row(kv, slot, p0 + i) + piece * 8);
            const u32 w[4] = {raw.x, raw.y, raw.z, raw.w};
            float v[8];
#pragma unroll
            for (int j = 0; j < 4; j++) { v[2 * j] = h2f((u16)(w[j] & 0xffff)); v[2 * j + 1] = h2f((u16)(w[j] >> 16)); }
#pragma unroll
            for (int c = 0; c < G; c++) {
                const float pc = ps[c * ATT_TILE + i];
#pragma unroll
                for (int j = 0; j < 8; j++) acc[c][j] = fmaf(pc, v[j], acc[c][j]);
            }
        }
        __syncthreads();
    }
    // the groups' partial sums meet in shared memory
    float *red = stat + 4 * G; // groups * G * hd
#pragma unroll
    for (int c = 0; c < G; c++)
#pragma unroll
        for (int j = 0; j < 8; j++) red[(pgroup * G + c) * hd + piece * 8 + j] = acc[c][j];
    __syncthreads();
    for (int o = tid; o < outs; o += ATT_THREADS) {
        const int c = o / hd, d = o - c * hd;
        float a = 0.0f;
        for (int g = 0; g < groups; g++) a += red[(g * G + c) * hd + d];
        if (splits == 1) {
            const float l = stat[2 * G + c], v = l > 0.0f ? a / l : 0.0f;
            out[(i64)t * ldo + (i64)head0 * hd + o] = v;
            if (rows) ((u16 *)(rows + t * ldr))[head0 * hd + o] = f2h(v);
        } else {
            // partial[((t * n_head + head) * splits + split) * (hd + 2)]: acc, max, sum
            float *pp = partial + (((i64)t * n_head + head0 + c) * splits + split) * (hd + 2);
            pp[d] = a;
            if (d == 0) { pp[hd] = stat[G + c]; pp[hd + 1] = stat[2 * G + c]; }
        }
    }
}

#define ATT_KERNEL(G)                                                                                        \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS) pkc_attention_g##G(                            \
        KVCache kv, const float *q, i64 ldq, int n_head, int n_kv_head, int hd, const int *slots,             \
        const int *kv_len, float scale, int split_len, float *out, i64 ldo, float *partial, int window,       \
        i8 *rows, i64 ldr) {                                                                                  \
        PKC_DEPENDENT();                                                                                      \
        attention_body<G>(kv, q, ldq, n_head, n_kv_head, hd, slots, kv_len, scale, split_len, out, ldo,      \
                          partial, window, rows, ldr);                                                        \
    }
ATT_KERNEL(1)
ATT_KERNEL(2)
ATT_KERNEL(3)
ATT_KERNEL(4)
ATT_KERNEL(5)
ATT_KERNEL(6)
ATT_KERNEL(7)
ATT_KERNEL(8)

// Merges the splits of one (row, head): block per (row, head), a thread per dim.
extern "C" __global__ void pkc_attention_combine(const float *partial, int n_head, int hd, int splits, float *out,
                                                 i64 ldo, i8 *rows, i64 ldr) {
    PKC_DEPENDENT();
    const int th = blockIdx.x;
    const int t = th / n_head, h = th - t * n_head;
    const float *pp = partial + (i64)th * splits * (hd + 2);
    float mx = -PKC_INF;
    for (int s = 0; s < splits; s++) mx = fmaxf(mx, pp[(i64)s * (hd + 2) + hd]);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float num = 0.0f, den = 0.0f;
        if (mx != -PKC_INF) {
            for (int s = 0; s < splits; s++) {
                const float *ps = pp + (i64)s * (hd + 2);
                const float m = ps[hd];
                if (m == -PKC_INF) continue;
                const float wgt = expf(m - mx);
                num = fmaf(wgt, ps[d], num);
                den = fmaf(wgt, ps[hd + 1], den);
            }
        }
        const float v = den > 0.0f ? num / den : 0.0f;
        out[(i64)t * ldo + (i64)h * hd + d] = v;
        if (rows) ((u16 *)(rows + t * ldr))[h * hd + d] = f2h(v);
    }
}

// ---- Attention on tensor cores: a prompt's rows ------------------------------------------------

// d += a·b on a warp's tensor cores (mma.sync m16n8k16: A 16x16 and B 16x8 in f16, d in f32),
// fragments in the PTX ISA's layouts, with lane = 4g + t: a = A's (g, 2t..2t+1), (g+8, 2t..),
// (g, 2t+8..), (g+8, 2t+8..); b = B's (2t..2t+1, g), (2t+8.., g); d = (g, 2t), (g, 2t+1),
// (g+8, 2t), (g+8, 2t+1). Each register's lower half is the lower column (A) or row (B). sm_80
// and newer: the host launches its callers nowhere else (elsewhere it traps).
__device__ __forceinline__ void mma16816(float d[4], const u32 a[4], const u32 b[2]) {
#ifdef PKC_EMULATOR
    pkc_emu::mma_m16n8k16(d, a, b);
#elif __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();
#endif
}

// pkc_attention's outputs for rows [from, n) on tensor cores. A warp takes 16 consecutive rows
// and one query head (a block: 4 warps, 64 rows), and OD of the head's HD output dims: all of
// them at heads of 64 and 128; at 256 (Gemma 3) half, the two halves' warps each scoring the same
// keys (Q and the outputs of all 256 would not fit a lane's registers). Rows of one slot whose
// positions follow each other (a prompt's chunk) share their keys: the warp scores them all
// against KEYS keys at a time (tiles of 8 for the scores, chunks of 16 for the values),
// Q·K^T and P·V as m16n8k16 products, with an online softmax per row (the four lanes of a row's
// quad holding its running max; sums per lane, added at the end). Rows of several slots (where a
// sequence's rows end, or decode rows) take one pass per slot, the other rows' scores masked:
// any rows give pkc_attention's outputs within rounding, but only runs get the speed.
// The products' k index runs over the head's dims (Q·K^T) and n over them (P·V) in an order of
// their own, so that a lane's key and value pieces are whole 16-byte loads: Q·K^T chunk c's k for
// lane t are dims HD/4 t + 4c + (0, 1 | 2, 3) (a lane reads its quarter of a key row), and P·V's
// tile j column n is dim OD/8 n + j of the warp's OD (a lane reads its eighth of those of a
// value row). A dot product's terms are the same in any order; outputs go back to their dims.
// Arithmetic: queries rounded to f16 as pkc_attention's; keys and values are the cache's f16;
// products exact, sums in f32 on the tensor cores; probabilities go in as two f16 parts (p's
// rounding and the rounding of the rest), so P·V keeps ~22 bits of each p. A tile's values are
// multiplied by every row's p, 0 where a row does not attend: values are taken to be finite (an
// overflowing f16 store is infinite for every kernel alike, but here it also reaches the rows
// beside it).
template <int HD, int OD, int KEYS>
__device__ __forceinline__ void attention_mma_body(const KVCache &kv, const float *q, i64 ldq, int n_head, int n_kv_head,
                                                   const int *slots, const int *kv_len, float scale, float *out, i64 ldo,
                                                   int window, i8 *rows, i64 ldr, int from, int n) {
    const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    const int t0 = from + (int)blockIdx.x * 64 + (int)(threadIdx.x >> 5) * 16;
    if (t0 >= n) return; // the whole warp
    const int head = blockIdx.y / (HD / OD), part = blockIdx.y % (HD / OD), kvh = head / (n_head / n_kv_head);
    const u16 *kb = kv.k + (i64)kvh * HD, *vb = kv.v + (i64)kvh * HD + part * OD;
    // This lane's two rows: r[0] = t0 + g, r[1] = t0 + g + 8 (past n: none).
    int slot[2], len[2], start[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int t = t0 + g + 8 * i;
        slot[i] = t < n ? slots[t] : -1;
        len[i] = t < n ? kv_len[t] : 0;
        start[i] = window_start(len[i], window);
    }
    // Q as A fragments, HD / 16 chunks of 16 dims (in the keys' order, above).
    u32 qa[HD / 16][4];
#pragma unroll
    for (int c = 0; c < HD / 16; c++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int i = j & 1, t = t0 + g + 8 * i, d = HD / 4 * tq + 4 * c + 2 * (j >> 1);
            const float *qr = q + (i64)t * ldq + (i64)head * HD + d;
            qa[c][j] = t < n ? pack_h2(f2h(qr[0]), f2h(qr[1])) : 0u;
        }
    float o[OD / 8][4];
#pragma unroll
    for (int j = 0; j < OD / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float mx[2] = {-PKC_INF, -PKC_INF}, sum[2] = {0.0f, 0.0f};
    const int rows_here = min(16, n - t0);
    unsigned done = 0; // rows of the 16 already attended (the same in every lane)
    while (true) {
        // The next pass: the first row not done, and every row of its slot (read by every lane).
        int first = 0;
        while (first < rows_here && ((done >> first) & 1)) first++;
        if (first == rows_here) break;
        const int s = slots[t0 + first];
        int kbeg = 0x7fffffff, kend = 0;
        for (int i = first; i < rows_here; i++) {
            if (((done >> i) & 1) || slots[t0 + i] != s) continue;
            done |= 1u << i;
            const int l = kv_len[t0 + i];
            kbeg = min(kbeg, window_start(l, window));
            kend = max(kend, l);
        }
        const bool in[2] = {slot[0] == s, slot[1] == s};
        for (int k0 = kbeg; k0 < kend; k0 += KEYS) {
            // Scores: tile j holds keys k0 + 8j + (0..7); this lane's key row for B is k0 + 8j + g,
            // its quarter of it 16 bytes (chunks 2u and 2u + 1) a load.
            float sc[KEYS / 8][4];
#pragma unroll
            for (int j = 0; j < KEYS / 8; j++) {
                sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
                const int p = k0 + 8 * j + g;
                const uint4 *kr = p < kend ? (const uint4 *)(kb + kv_row(kv, s, p) + HD / 4 * tq) : nullptr;
#pragma unroll
                for (int u = 0; u < HD / 32; u++) {
                    const uint4 x = kr ? kr[u] : uint4{0u, 0u, 0u, 0u};
                    const u32 b0[2] = {x.x, x.y}, b1[2] = {x.z, x.w};
                    mma16816(sc[j], qa[2 * u], b0);
                    mma16816(sc[j], qa[2 * u + 1], b1);
                }
            }
            // Mask and scale; each row's max over the tile (its quad's four lanes).
            float tmax[2] = {-PKC_INF, -PKC_INF};
#pragma unroll
            for (int j = 0; j < KEYS / 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = e >> 1, p = k0 + 8 * j + 2 * tq + (e & 1);
                    const bool ok = in[i] && p >= start[i] && p < len[i];
                    sc[j][e] = ok ? sc[j][e] * scale : -PKC_INF;
                    tmax[i] = fmaxf(tmax[i], sc[j][e]);
                }
            float alpha[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 1));
                tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 2));
                const float nm = fmaxf(mx[i], tmax[i]);
                alpha[i] = mx[i] == -PKC_INF ? 0.0f : expf(mx[i] - nm);
                mx[i] = nm;
                sum[i] *= alpha[i];
            }
#pragma unroll
            for (int j = 0; j < OD / 8; j++) { o[j][0] *= alpha[0]; o[j][1] *= alpha[0]; o[j][2] *= alpha[1]; o[j][3] *= alpha[1]; }
            // Probabilities, as A fragments of P (16 rows x 16 keys a chunk) in two f16 parts.
            u32 phi[KEYS / 16][4], plo[KEYS / 16][4];
#pragma unroll
            for (int j = 0; j < KEYS / 8; j++) {
                u16 hi[4], lo[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = e >> 1;
                    const float pr = sc[j][e] == -PKC_INF ? 0.0f : expf(sc[j][e] - mx[i]);
                    sum[i] += pr;
                    hi[e] = f2h(pr);
                    lo[e] = f2h(pr - h2f(hi[e]));
                }
                // tile j is chunk j / 2's keys 0..7 (registers 0, 1) or 8..15 (registers 2, 3)
                const int c = j >> 1, r = (j & 1) * 2;
                phi[c][r] = pack_h2(hi[0], hi[1]);
                phi[c][r + 1] = pack_h2(hi[2], hi[3]);
                plo[c][r] = pack_h2(lo[0], lo[1]);
                plo[c][r + 1] = pack_h2(lo[2], lo[3]);
            }
            // Values: chunk c's B is keys k0 + 16c + (2t, 2t+1 | 2t+8, 2t+9) x tile j's column g,
            // dim OD/8 g + j: this lane's eighth of each of the four value rows, 8 dims a load.
#pragma unroll
            for (int c = 0; c < KEYS / 16; c++) {
                const uint4 *vr[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int p = k0 + 16 * c + 2 * tq + (e & 1) + 8 * (e >> 1);
                    vr[e] = p < kend ? (const uint4 *)(vb + kv_row(kv, s, p) + OD / 8 * g) : nullptr;
                }
#pragma unroll
                for (int u = 0; u < OD / 64; u++) {
                    uint4 x[4];
#pragma unroll
                    for (int e = 0; e < 4; e++) x[e] = vr[e] ? vr[e][u] : uint4{0u, 0u, 0u, 0u};
#pragma unroll
                    for (int h = 0; h < 8; h++) {
                        // dims OD/8 g + 8u + h of the four keys, two to a register
                        const u32 *a0 = &x[0].x, *a1 = &x[1].x, *a2 = &x[2].x, *a3 = &x[3].x;
                        const int wi = h >> 1, sh = 16 * (h & 1);
                        const u32 b[2] = {pack_h2((u16)(a0[wi] >> sh), (u16)(a1[wi] >> sh)), pack_h2((u16)(a2[wi] >> sh), (u16)(a3[wi] >> sh))};
                        mma16816(o[8 * u + h], phi[c], b);
                        mma16816(o[8 * u + h], plo[c], b);
                    }
                }
            }
        }
    }
    // Each row's sum over its quad, then the outputs: this lane's columns 2t, 2t + 1 of every tile.
#pragma unroll
    for (int i = 0; i < 2; i++) {
        sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 1);
        sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int t = t0 + g + 8 * i;
        if (t >= n) continue;
        float *orow = out + (i64)t * ldo + (i64)head * HD;
        u16 *rrow = rows ? (u16 *)(rows + (i64)t * ldr) + head * HD : nullptr;
#pragma unroll
        for (int j = 0; j < OD / 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float v = sum[i] > 0.0f ? o[j][2 * i + e] / sum[i] : 0.0f;
                const int d = part * OD + OD / 8 * (2 * tq + e) + j; // tile j's column 2t + e
                orow[d] = v;
                if (rrow) rrow[d] = f2h(v);
            }
    }
}

// The grid: x the row tiles of 64, y each query head's HD / OD parts.
#define ATT_MMA_KERNEL(HD, OD, KEYS)                                                                              \
    extern "C" __global__ void __launch_bounds__(128) pkc_attention_mma_h##HD(                                    \
        KVCache kv, const float *q, i64 ldq, int n_head, int n_kv_head, const int *slots, const int *kv_len,      \
        float scale, float *out, i64 ldo, int window, i8 *rows, i64 ldr, int from, int n) {                        \
        PKC_DEPENDENT();                                                                                          \
        attention_mma_body<HD, OD, KEYS>(kv, q, ldq, n_head, n_kv_head, slots, kv_len, scale, out, ldo, window,   \
                                         rows, ldr, from, n);                                                     \
    }
ATT_MMA_KERNEL(64, 64, 64)
ATT_MMA_KERNEL(128, 128, 64)
ATT_MMA_KERNEL(256, 128, 32) // 32 keys a step: the scores' registers make room for Q's

// ---- LoRA: hot-swapped adapters' low-rank products --------------------------------------------

// pk_lora_apply's arithmetic (Kernels/lora.c), bit for bit: for each row of each op,
// t[r] = (A row r . x) * a_scale[r] * bt_scale[r], the dot as 16 partial sums of every 16th
// element halved pairwise (a half-warp here, 16 lanes there); then every output
// y[j] = fmaf(scale, s, y[j]) with s the fmaf chain of t[r] * bt[r][j] over r in order. A block
// takes one row of one op and up to LORA_COLS of its outputs, recomputing t (rank x k
// multiply-adds, small beside the outputs' rank x LORA_COLS), so a decode row spreads over
// m / LORA_COLS blocks. Ops are passed by value (a captured graph keeps them); the host splits
// longer lists into launches of PKC_LORA_OPS. LoraOp's layout is pk_cuda.c's lora_arg.
#define PKC_LORA_OPS 8
#define LORA_COLS 1024
#define LORA_THREADS 256
#define LORA_MAX_RANK 1024
struct LoraOp {
    const i8 *a, *bt;
    const float *a_scale, *bt_scale;
    float *y;
    const int *rows;
    i64 ldy, rank, m, n, first_block, col_blocks;
    float scale, unused;
};
struct LoraOps {
    LoraOp op[PKC_LORA_OPS];
    i64 count;
};

extern "C" __global__ void __launch_bounds__(LORA_THREADS) pkc_lora(const LoraOps ops, const float *x, i64 ldx, int k) {
    PKC_DEPENDENT();
    __shared__ float t[LORA_MAX_RANK];
    int o = 0;
    while (o + 1 < ops.count && (i64)blockIdx.x >= ops.op[o + 1].first_block) o++;
    const LoraOp &op = ops.op[o];
    const i64 local = (i64)blockIdx.x - op.first_block;
    const i64 i = local / op.col_blocks;
    const i64 c0 = (local - i * op.col_blocks) * LORA_COLS;
    const int row = op.rows[i], rank = (int)op.rank, lane = threadIdx.x & 15;
    const float *xr = x + (i64)row * ldx;
    // Every lane runs every round (the shuffles take the whole warp); lanes past the rank add zeros.
    for (int r0 = 0; r0 < rank; r0 += LORA_THREADS / 16) {
        const int r = r0 + (int)(threadIdx.x >> 4);
        float acc = 0.0f;
        if (r < rank) {
            const i8 *a = op.a + (i64)r * k;
            for (int e = lane; e < k; e += 16) acc = fmaf(xr[e], (float)a[e], acc);
        }
        for (int w = 8; w > 0; w >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, w, 16));
        if (r < rank && lane == 0) t[r] = __fmul_rn(__fmul_rn(acc, op.a_scale[r]), op.bt_scale[r]);
    }
    __syncthreads();
    const i64 c1 = min(c0 + LORA_COLS, op.m);
    float *y = op.y + (i64)row * op.ldy;
    for (i64 j = c0 + threadIdx.x; j < c1; j += LORA_THREADS) {
        float s = 0.0f;
        for (int r = 0; r < rank; r++) s = fmaf(t[r], (float)op.bt[(i64)r * op.m + j], s);
        y[j] = fmaf(op.scale, s, y[j]);
    }
}

// The token embedding's adapter delta (LoRAPair.addDelta's arithmetic, bit for bit): row rows[b]
// of x, token ids[rows[b]], gets (scale * bt[r][token]) * a[r][j] added to each value j, r in
// order, with separate roundings. a: rank x e floats; bt: rank x vocab floats. A block per row.
extern "C" __global__ void pkc_lora_embed(const float *a, const float *bt, int rank, i64 vocab, float scale, const int *rows,
                                          const int *ids, float *x, i64 ldx, int e) {
    PKC_DEPENDENT();
    const int row = rows[blockIdx.x];
    const i64 token = ids[row];
    float *xr = x + (i64)row * ldx;
    for (int j = threadIdx.x; j < e; j += blockDim.x) {
        float v = xr[j];
        for (int r = 0; r < rank; r++) v = __fadd_rn(v, __fmul_rn(__fmul_rn(scale, bt[(i64)r * vocab + token]), a[(i64)r * e + j]));
        xr[j] = v;
    }
}

#endif // PKC_FORMAT < 0

// ---- per-format entry points --------------------------------------------------------------------

#define FORMAT_KERNELS(T, NAME)                                                                              \
    extern "C" __global__ void pkc_dequant_f32_##NAME(const u8 *src, i64 row_bytes, i64 n, int k, float *dst,  \
                                                      i64 ldd) {                                             \
        PKC_DEPENDENT();                                                                                     \
        dequant_units<T, 0>(src, row_bytes, n, k, dst, ldd, 0, 0);                                          \
    }                                                                                                        \
    extern "C" __global__ void pkc_dequant_f16_##NAME(const u8 *src, i64 row_bytes, i64 n, int k, u16 *dst,    \
                                                      i64 ldd) {                                             \
        PKC_DEPENDENT();                                                                                     \
        dequant_units<T, 1>(src, row_bytes, n, k, dst, ldd, 0, 0);                                          \
    }                                                                                                        \
    extern "C" __global__ void pkc_get_rows_##NAME(const u8 *src, i64 row_bytes, i64 n_rows, int k, const int *ids, \
                                                   i64 n, float *dst, i64 ldd) {                             \
        PKC_DEPENDENT();                                                                                     \
        dequant_units<T, 0>(src, row_bytes, n, k, dst, ldd, ids, n_rows);                                   \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(1024) pkc_embed_norm_rope_##NAME(                             \
        const u8 *src, i64 row_bytes, i64 n_rows, int k, const int *ids, float *x, i64 ldx, float scale,         \
        const float *w, float *y, i64 ldy, float eps, i8 *q, i64 ldq, int qf16, const int *positions, int pairs,  \
        const RopeFreqs r1, const RopeFreqs r2) {                                                            \
        PKC_DEPENDENT();                                                                                     \
        embed_norm_rope<T>(src, row_bytes, n_rows, k, ids, x, ldx, scale, w, y, ldy, eps, q, ldq, qf16,          \
                           positions, pairs, r1, r2);                                                        \
    }                                                                                                        \
    GEMV_ALL(T, NAME, gemv, 0)

// The quantized formats also multiply int8 rows of x (pkc_gemv8_*).
#define QUANT_KERNELS(T, NAME) FORMAT_KERNELS(T, NAME) GEMV_ALL(T, NAME, gemv8, 1)

#define GEMV_ALL(T, NAME, KIND, I8)                                                                          \
    GEMV_N(T, NAME, KIND, I8, 1, 1) GEMV_N(T, NAME, KIND, I8, 2, 1) GEMV_N(T, NAME, KIND, I8, 3, 1)          \
    GEMV_N(T, NAME, KIND, I8, 4, 1) GEMV_N(T, NAME, KIND, I8, 5, 1) GEMV_N(T, NAME, KIND, I8, 6, 1)          \
    GEMV_N(T, NAME, KIND, I8, 7, 1) GEMV_N(T, NAME, KIND, I8, 8, 1) GEMV_N(T, NAME, KIND, I8, 1, 2)          \
    GEMV_N(T, NAME, KIND, I8, 2, 2) GEMV_GLU(T, NAME, KIND, I8, 1) GEMV_GLU(T, NAME, KIND, I8, 2)

// pkc_<gemv|gemv8>_<format>_<N>_glu: the gate|up product and silu(gate) * up (gelu 1: gelu(gate)
// * up) in one launch.
#define GEMV_GLU(T, NAME, KIND, I8, N)                                                                       \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) pkc_##KIND##_##NAME##_##N##_glu(           \
        const u8 *w, int m, int k, i64 row_bytes, const void *x, i64 ldx, float *y, i64 ldy, int lanes_log2,    \
        int gelu) {                                                                                          \
        PKC_DEPENDENT();                                                                                     \
        gemv_body<T, N, 2, I8, 1>(w, m, k, row_bytes, x, ldx, y, ldy, lanes_log2, gelu, NormOut{}, RopeOut{}); \
    }

// pkc_<gemv|gemv8>_<format>_<N>_r<R>: N rows of x, R rows of W per lane group (pk_cuda.c:
// gemv_rows_per_group); x is floats (gemv, ldx in floats) or int8 rows (gemv8, ldx in bytes).
#define GEMV_N(T, NAME, KIND, I8, N, R)                                                                      \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32) pkc_##KIND##_##NAME##_##N##_r##R(          \
        const u8 *w, int m, int k, i64 row_bytes, const void *x, i64 ldx, float *y, i64 ldy, int lanes_log2,    \
        int add, NormOut no, RopeOut ro) {                                                                   \
        PKC_DEPENDENT();                                                                                     \
        gemv_body<T, N, R, I8>(w, m, k, row_bytes, x, ldx, y, ldy, lanes_log2, add, no, ro);                 \
    }

#if PKC_FORMAT == 0
FORMAT_KERNELS(0, f32)
#endif
#if PKC_FORMAT == 1
FORMAT_KERNELS(1, f16)
#endif
#if PKC_FORMAT == 30
FORMAT_KERNELS(30, bf16)
#endif
#if PKC_FORMAT == 2
QUANT_KERNELS(2, q4_0)
#endif
#if PKC_FORMAT == 3
QUANT_KERNELS(3, q4_1)
#endif
#if PKC_FORMAT == 6
QUANT_KERNELS(6, q5_0)
#endif
#if PKC_FORMAT == 7
QUANT_KERNELS(7, q5_1)
#endif
#if PKC_FORMAT == 8
QUANT_KERNELS(8, q8_0)
#endif
#if PKC_FORMAT == 10
QUANT_KERNELS(10, q2_k)
#endif
#if PKC_FORMAT == 11
QUANT_KERNELS(11, q3_k)
#endif
#if PKC_FORMAT == 12
QUANT_KERNELS(12, q4_k)
#endif
#if PKC_FORMAT == 13
QUANT_KERNELS(13, q5_k)
#endif
#if PKC_FORMAT == 14
QUANT_KERNELS(14, q6_k)
#endif
#if PKC_FORMAT == 20
QUANT_KERNELS(20, iq4_nl)
#endif
#if PKC_FORMAT == 23
QUANT_KERNELS(23, iq4_xs)
#endif
#if PKC_FORMAT == 1024
QUANT_KERNELS(1024, pq2)
#endif
