// Scalar reference dequantizers for the ggml formats that GGUF files carry. The block
// layouts themselves live in blocks.h, shared with the matmul kernels.
//
// Blocks are read byte by byte (little-endian, no alignment assumed) and the float
// arithmetic runs in the same order, with the same intermediate roundings, as the format's
// definition: a scale is formed first in float (e.g. d * sc), then applied
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
#include "types.h"

#include <string.h>

// a * b + c must round twice (as the reference does), never fuse into one FMA.
#pragma STDC FP_CONTRACT OFF

#define PK_QK_K 256  // weights per super-block of the k-quants: the largest block

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
// Plain number types, element by element
// ---------------------------------------------------------------------------------------

void qt_f32_to_float(const uint8_t *src, float *dst, int64_t n) {
    if (n > 0) memcpy(dst, src, (size_t)n * sizeof(float));
}

void qt_f16_to_float(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = pk_f16_to_f32(load_u16(src + 2 * i));
}

void qt_bf16_to_float(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = pk_bf16_to_f32(load_u16(src + 2 * i));
}

// ---------------------------------------------------------------------------------------
// Block formats: blocks.h unpacks them to w = scale * q + offset; this applies it in float.
// ---------------------------------------------------------------------------------------

static void dequant_block(const qt_type *ty, const uint8_t *b, float *y) {
    int8_t q[PK_QK_K];
    float sc[PK_QK_K / 16], of[PK_QK_K / 16];
    ty->unpack(b, q, sc, of);
    if (ty->tile.offsets) {
        for (int64_t i = 0; i < ty->elements; i++) {
            const float p = sc[i / 16] * (float)q[i];
            y[i] = p + of[i / 16];
        }
    } else {
        for (int64_t i = 0; i < ty->elements; i++) y[i] = sc[i / 16] * (float)q[i];
    }
}

int pk_type_info_of(int type, pk_type_info *info) {
    const qt_type *ty = qt_type_of(type);
    if (!ty) return -1;
    *info = (pk_type_info){ty->name, ty->elements, ty->bytes, ty->to_float || ty->unpack, ty->to_float || ty->tile.sub,
                           ty->quantize != NULL, ty->grid != NULL, ty->quantize_weighted != NULL};
    return 0;
}

int pk_dequantize(int type, const void *src, float *dst, int64_t n) {
    const qt_type *ty = qt_type_of(type);
    if (!ty || !(ty->to_float || ty->unpack) || n < 0 || n % ty->elements != 0) return -1;
    const uint8_t *p = (const uint8_t *)src;
    if (ty->to_float) {
        ty->to_float(p, dst, n);
        return 0;
    }
    for (int64_t i = 0; i < n / ty->elements; i++) dequant_block(ty, p + (size_t)i * ty->bytes, dst + i * ty->elements);
    return 0;
}
