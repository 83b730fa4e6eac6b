// Scalar reference dequantizers for the ggml block formats that GGUF files carry.
//
// Every routine reads its block byte by byte (little-endian, no alignment assumed) and
// evaluates the float arithmetic in the same order, with the same intermediate roundings,
// as the format's definition: a scale is formed first in float (e.g. d * sc), then applied
// to the integer quant, then the offset is subtracted or added. With FP contraction off,
// the results are bit-identical to any IEEE-754 single-precision implementation that
// follows the same order (the gguf-py numpy dequantizers are the test oracle).
//
// A fact worth knowing for the SIMD paths: with an f16 scale (11 significant bits), every
// product here is exact in float32 (scale * sub-scale * quant needs at most 23 bits, e.g.
// Q6_K: 11 + 7 + 5), so multiplication order and fused multiply-add cannot change a result;
// the only rounding is the final subtraction/addition of the min. Q8_K (an f32 scale) is
// the exception: its single product d * q rounds.
//
// F32 is copied as is, so this assumes a little-endian host (as every GGUF file is).
//
// This file is the reference that SIMD paths are checked against: keep it simple.

#include "pk_quants.h"

#include <string.h>

// a * b + c must round twice (as the reference does), never fuse into one FMA.
#pragma STDC FP_CONTRACT OFF

#define PK_QK 32     // weights per block of the legacy formats (Q4_0 ... Q8_1)
#define PK_QK_K 256  // weights per super-block of the k-quants

// ---------------------------------------------------------------------------------------
// Scalar conversions
// ---------------------------------------------------------------------------------------

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t bits_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline uint16_t load_u16(const uint8_t *p) {
    return (uint16_t)((uint16_t)p[0] | (uint16_t)((uint16_t)p[1] << 8));
}

static inline uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline float load_f16(const uint8_t *p) { return pk_f16_to_f32(load_u16(p)); }

float pk_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;

    if (exponent == 0x1fu) {
        // Infinity or NaN: keep the payload (and a signalling NaN stays signalling).
        return f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
    }
    if (exponent == 0) {
        if (mantissa == 0) return f32_from_bits(sign);  // signed zero
        // Subnormal: mantissa * 2^-24. Shift the leading one up to bit 10; every shift
        // halves the exponent, starting from 2^-14 (biased 113 in single precision).
        uint32_t biased = 113;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            biased -= 1;
        }
        return f32_from_bits(sign | (biased << 23) | ((mantissa & 0x3ffu) << 13));
    }
    return f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Rounds `value >> shift` to nearest, ties to even (shift >= 1).
static inline uint32_t shift_round_even(uint32_t value, uint32_t shift) {
    const uint32_t kept = value >> shift;
    const uint32_t rest = value & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (kept & 1u))) return kept + 1u;
    return kept;
}

uint16_t pk_f32_to_f16(float f) {
    const uint32_t x = bits_from_f32(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t exponent = (x >> 23) & 0xffu;
    const uint32_t mantissa = x & 0x7fffffu;

    if (exponent == 0xffu) {
        if (mantissa == 0) return (uint16_t)(sign | 0x7c00u);  // infinity
        // NaN: keep the sign and the top payload bits, and make it quiet.
        return (uint16_t)(sign | 0x7e00u | (mantissa >> 13));
    }
    // Half-precision biased exponent of this value (may be out of range).
    const int e = (int)exponent - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);  // overflow
    if (e <= 0) {
        // Half subnormal (or zero): count units of 2^-24. Anything below 2^-25 is zero;
        // exactly 2^-25 is a tie that rounds to even (zero).
        if (e < -10) return sign;
        const uint32_t significand = mantissa | 0x800000u;
        return (uint16_t)(sign | shift_round_even(significand, (uint32_t)(14 - e)));
    }
    // Normal: a carry out of the mantissa correctly bumps the exponent (up to infinity).
    const uint32_t rounded = shift_round_even(((uint32_t)e << 23) | mantissa, 13);
    return (uint16_t)(sign | rounded);
}

float pk_bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

// ---------------------------------------------------------------------------------------
// Block layouts (bytes; all multi-byte fields little-endian)
// ---------------------------------------------------------------------------------------
//
// Q4_0  (18): d:f16, qs[16]               x = d * (q - 8)        q: low nibbles are weights
//                                                                 0..15, high nibbles 16..31
// Q4_1  (20): d:f16, m:f16, qs[16]        x = d * q + m
// Q5_0  (22): d:f16, qh:u32, qs[16]       x = d * (q - 16)       bit i of qh is bit 4 of q_i
// Q5_1  (24): d:f16, m:f16, qh:u32, qs[16] x = d * q + m
// Q8_0  (34): d:f16, qs[32]:i8            x = d * q
// Q8_1  (36): d:f16, s:f16, qs[32]:i8     x = d * q              (s = d * sum q, unused)
// Q2_K  (84): scales[16], qs[64], d:f16, dmin:f16
// Q3_K (110): hmask[32], qs[64], scales[12], d:f16
// Q4_K (144): d:f16, dmin:f16, scales[12], qs[128]
// Q5_K (176): d:f16, dmin:f16, scales[12], qh[32], qs[128]
// Q6_K (210): ql[128], qh[64], scales[16]:i8, d:f16
// Q8_K (292): d:f32, qs[256]:i8, bsums[16]:i16 (unused)

static void dequant_q4_0(const uint8_t *b, float *y) {
    const float d = load_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < PK_QK / 2; j++) {
        y[j] = d * (float)((int)(qs[j] & 0x0f) - 8);
        y[j + PK_QK / 2] = d * (float)((int)(qs[j] >> 4) - 8);
    }
}

static void dequant_q4_1(const uint8_t *b, float *y) {
    const float d = load_f16(b);
    const float m = load_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < PK_QK / 2; j++) {
        const float lo = d * (float)(qs[j] & 0x0f);
        const float hi = d * (float)(qs[j] >> 4);
        y[j] = lo + m;
        y[j + PK_QK / 2] = hi + m;
    }
}

static void dequant_q5_0(const uint8_t *b, float *y) {
    const float d = load_f16(b);
    const uint32_t qh = load_u32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < PK_QK / 2; j++) {
        const int lo = (int)((qs[j] & 0x0fu) | (((qh >> j) & 1u) << 4));
        const int hi = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
        y[j] = d * (float)(lo - 16);
        y[j + PK_QK / 2] = d * (float)(hi - 16);
    }
}

static void dequant_q5_1(const uint8_t *b, float *y) {
    const float d = load_f16(b);
    const float m = load_f16(b + 2);
    const uint32_t qh = load_u32(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < PK_QK / 2; j++) {
        const uint32_t lo = (qs[j] & 0x0fu) | (((qh >> j) & 1u) << 4);
        const uint32_t hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
        const float plo = d * (float)lo;
        const float phi = d * (float)hi;
        y[j] = plo + m;
        y[j + PK_QK / 2] = phi + m;
    }
}

static void dequant_q8_0(const uint8_t *b, float *y) {
    const float d = load_f16(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < PK_QK; j++) y[j] = d * (float)qs[j];
}

static void dequant_q8_1(const uint8_t *b, float *y) {
    const float d = load_f16(b);
    const int8_t *qs = (const int8_t *)(b + 4);
    for (int j = 0; j < PK_QK; j++) y[j] = d * (float)qs[j];
}

static void dequant_q2_k(const uint8_t *b, float *y) {
    const uint8_t *scales = b;
    const uint8_t *qs = b + 16;
    const float d = load_f16(b + 80);
    const float dmin = load_f16(b + 82);
    // Two halves of 128 weights; each reads 32 bytes of qs four times, two bits at a time.
    for (int half = 0; half < 2; half++) {
        for (int shift = 0; shift < 4; shift++) {
            for (int l = 0; l < 32; l++) {
                const int i = half * 128 + shift * 32 + l;
                const uint8_t sc = scales[i / 16];
                const float dl = d * (float)(sc & 0x0f);
                const float ml = dmin * (float)(sc >> 4);
                const int q = (qs[half * 32 + l] >> (2 * shift)) & 3;
                const float p = dl * (float)q;
                y[i] = p - ml;
            }
        }
    }
}

// The 16 six-bit scales of Q3_K: low four bits from bytes 0..7 (low nibbles give scales
// 0..7, high nibbles 8..15), high two bits from bytes 8..11 (two bits per scale, scale k
// taking bits 2*(k/4) of byte 8 + k%4).
static void q3_k_scales(const uint8_t *packed, int out[16]) {
    for (int k = 0; k < 16; k++) {
        const int low = (k < 8) ? (packed[k] & 0x0f) : (packed[k - 8] >> 4);
        const int high = (packed[8 + (k % 4)] >> (2 * (k / 4))) & 3;
        out[k] = (low | (high << 4)) - 32;
    }
}

static void dequant_q3_k(const uint8_t *b, float *y) {
    const uint8_t *hmask = b;
    const uint8_t *qs = b + 32;
    int scales[16];
    q3_k_scales(b + 96, scales);
    const float d = load_f16(b + 108);
    for (int half = 0; half < 2; half++) {
        for (int shift = 0; shift < 4; shift++) {
            for (int l = 0; l < 32; l++) {
                const int i = half * 128 + shift * 32 + l;
                const float dl = d * (float)scales[i / 16];
                const int low = (qs[half * 32 + l] >> (2 * shift)) & 3;
                // The high bit is stored inverted: set means "no offset", clear means -4.
                const int high_set = (hmask[i % 32] >> (i / 32)) & 1;
                const int q = low - (high_set ? 0 : 4);
                y[i] = dl * (float)q;
            }
        }
    }
}

// Six-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K. Sub-blocks 0..3 keep them in
// the low six bits of bytes j and j+4; sub-blocks 4..7 take their low four bits from the
// nibbles of byte j+8 and their top two bits from the spare top bits of bytes j-4, j.
static void k_scale_min(const uint8_t *packed, int j, int *scale, int *min) {
    if (j < 4) {
        *scale = packed[j] & 63;
        *min = packed[j + 4] & 63;
    } else {
        *scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
        *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    }
}

static void dequant_q4_k(const uint8_t *b, float *y) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    const uint8_t *packed = b + 4;
    const uint8_t *qs = b + 16;
    // Eight sub-blocks of 32: sub-block s reads 32 bytes of qs at (s/2)*32, nibble s%2.
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        k_scale_min(packed, s, &sc, &mn);
        const float dl = d * (float)sc;
        const float ml = dmin * (float)mn;
        const uint8_t *q = qs + (s / 2) * 32;
        const int shift = 4 * (s % 2);
        for (int l = 0; l < 32; l++) {
            const float p = dl * (float)((q[l] >> shift) & 0x0f);
            y[s * 32 + l] = p - ml;
        }
    }
}

static void dequant_q5_k(const uint8_t *b, float *y) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    const uint8_t *packed = b + 4;
    const uint8_t *qh = b + 16;
    const uint8_t *qs = b + 48;
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        k_scale_min(packed, s, &sc, &mn);
        const float dl = d * (float)sc;
        const float ml = dmin * (float)mn;
        const uint8_t *q = qs + (s / 2) * 32;
        const int shift = 4 * (s % 2);
        for (int l = 0; l < 32; l++) {
            const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> s) & 1) << 4);
            const float p = dl * (float)v;
            y[s * 32 + l] = p - ml;
        }
    }
}

static void dequant_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b;
    const uint8_t *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    const float d = load_f16(b + 208);
    // Eight rows of 32: row r lives in half r/4 (64 bytes of ql, 32 of qh); its low four
    // bits come from ql byte (r%2)*32 + l, nibble (r/2)%2, its top two bits from qh byte l,
    // bit pair r%4.
    for (int r = 0; r < 8; r++) {
        const int half = r / 4;
        const uint8_t *lo = ql + half * 64 + (r % 2) * 32;
        const int lo_shift = 4 * ((r / 2) % 2);
        const uint8_t *hi = qh + half * 32;
        const int hi_shift = 2 * (r % 4);
        for (int l = 0; l < 32; l++) {
            const int i = r * 32 + l;
            const int q = (((lo[l] >> lo_shift) & 0x0f) | (((hi[l] >> hi_shift) & 3) << 4)) - 32;
            const float dl = d * (float)scales[i / 16];
            y[i] = dl * (float)q;
        }
    }
}

static void dequant_q8_k(const uint8_t *b, float *y) {
    const float d = f32_from_bits(load_u32(b));
    const int8_t *qs = (const int8_t *)(b + 4);
    for (int j = 0; j < PK_QK_K; j++) y[j] = d * (float)qs[j];
}

// ---------------------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------------------

typedef void (*block_fn)(const uint8_t *block, float *out);

typedef struct {
    int64_t elements;
    size_t bytes;
    block_fn fn;  // NULL for the plain float types, handled element-wise
} type_traits;

static int traits_of(int type, type_traits *t) {
    switch (type) {
    case PK_F32: *t = (type_traits){1, 4, NULL}; return 1;
    case PK_F16: *t = (type_traits){1, 2, NULL}; return 1;
    case PK_BF16: *t = (type_traits){1, 2, NULL}; return 1;
    case PK_Q4_0: *t = (type_traits){PK_QK, 18, dequant_q4_0}; return 1;
    case PK_Q4_1: *t = (type_traits){PK_QK, 20, dequant_q4_1}; return 1;
    case PK_Q5_0: *t = (type_traits){PK_QK, 22, dequant_q5_0}; return 1;
    case PK_Q5_1: *t = (type_traits){PK_QK, 24, dequant_q5_1}; return 1;
    case PK_Q8_0: *t = (type_traits){PK_QK, 34, dequant_q8_0}; return 1;
    case PK_Q8_1: *t = (type_traits){PK_QK, 36, dequant_q8_1}; return 1;
    case PK_Q2_K: *t = (type_traits){PK_QK_K, 84, dequant_q2_k}; return 1;
    case PK_Q3_K: *t = (type_traits){PK_QK_K, 110, dequant_q3_k}; return 1;
    case PK_Q4_K: *t = (type_traits){PK_QK_K, 144, dequant_q4_k}; return 1;
    case PK_Q5_K: *t = (type_traits){PK_QK_K, 176, dequant_q5_k}; return 1;
    case PK_Q6_K: *t = (type_traits){PK_QK_K, 210, dequant_q6_k}; return 1;
    case PK_Q8_K: *t = (type_traits){PK_QK_K, 292, dequant_q8_k}; return 1;
    default: return 0;
    }
}

int64_t pk_block_elements(int type) {
    type_traits t;
    return traits_of(type, &t) ? t.elements : 0;
}

size_t pk_block_bytes(int type) {
    type_traits t;
    return traits_of(type, &t) ? t.bytes : 0;
}

int pk_dequantize(int type, const void *src, float *dst, int64_t n) {
    type_traits t;
    if (!traits_of(type, &t) || n < 0 || n % t.elements != 0) return -1;
    const uint8_t *p = (const uint8_t *)src;

    switch (type) {
    case PK_F32:
        if (n > 0) memcpy(dst, p, (size_t)n * sizeof(float));
        return 0;
    case PK_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = pk_f16_to_f32(load_u16(p + 2 * i));
        return 0;
    case PK_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = pk_bf16_to_f32(load_u16(p + 2 * i));
        return 0;
    default:
        break;
    }

    const int64_t blocks = n / t.elements;
    for (int64_t i = 0; i < blocks; i++) {
        t.fn(p + (size_t)i * t.bytes, dst + i * t.elements);
    }
    return 0;
}
