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
#include "half.h"
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

static inline uint16_t load_u16(const uint8_t *p) {
    return (uint16_t)((uint16_t)p[0] | (uint16_t)((uint16_t)p[1] << 8));
}

float pk_f16_to_f32(uint16_t h) { return half_to_f32(h); }

uint16_t pk_f32_to_f16(float f) { return f32_to_half(f); }

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

// The weight formats whose blocks are 32 weights d * q, the f16 d first, codes within int8: a
// Q8_0 block with the same d bytes holds the same values.
static int exact_q8_0(int type) { return type == PK_Q4_0 || type == PK_Q5_0 || type == PK_Q8_0 || type == PK_IQ4_NL || type == PK_PQ2; }

int pk_type_info_of(int type, pk_type_info *info) {
    const qt_type *ty = qt_type_of(type);
    if (!ty) return -1;
    *info = (pk_type_info){ty->name, ty->elements, ty->bytes, ty->to_float || ty->unpack, ty->to_float || ty->tile.sub,
                           ty->quantize != NULL, ty->grid != NULL, ty->quantize_weighted != NULL, exact_q8_0(type)};
    return 0;
}

int pk_to_q8_0(int type, const void *src, void *dst, int64_t n) {
    const qt_type *ty = qt_type_of(type);
    if (!ty || !exact_q8_0(type) || n < 0 || n % 32 != 0) return -1;
    const qt_type *q8 = qt_type_of(PK_Q8_0);
    const uint8_t *p = (const uint8_t *)src;
    uint8_t *out = (uint8_t *)dst;
    for (int64_t i = 0; i < n / 32; i++) {
        int8_t q[32];
        float sc[2], of[2];
        const uint8_t *src_block = p + (size_t)i * ty->bytes;
        ty->unpack(src_block, q, sc, of);
        uint8_t *b = out + (size_t)i * q8->bytes;
        memcpy(b, src_block, 2); // d's bytes as they are (a signalling NaN stays one)
        memcpy(b + 2, q, 32);
    }
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
