// The ggml block layouts, in one place: every block format unpacked to integer quants with a
// scale and an offset per 16 weights, so that w[i] = scale[i/16] * q[i] + offset[i/16].
// quants.c turns this into floats (the dequantizers); the matmul tiles multiply the integers
// directly (their SIMD unpackers are in qtile_simd.h). The type table (types.h) names each
// unpacker in its type's row. Internal to the kernels.
//
// Layouts (bytes; all multi-byte fields little-endian):
// Q4_0  (18): d:f16, qs[16]                x = d * (q - 8)   low nibbles are weights 0..15,
//                                                              high nibbles 16..31
// Q4_1  (20): d:f16, m:f16, qs[16]         x = d * q + m
// Q5_0  (22): d:f16, qh:u32, qs[16]        x = d * (q - 16)  bit i of qh is bit 4 of q_i
// Q5_1  (24): d:f16, m:f16, qh:u32, qs[16] x = d * q + m
// Q8_0  (34): d:f16, qs[32]:i8             x = d * q
// Q8_1  (36): d:f16, s:f16, qs[32]:i8      x = d * q          (s = d * sum q)
// Q2_K  (84): scales[16], qs[64], d:f16, dmin:f16
// Q3_K (110): hmask[32], qs[64], scales[12], d:f16
// Q4_K (144): d:f16, dmin:f16, scales[12], qs[128]
// Q5_K (176): d:f16, dmin:f16, scales[12], qh[32], qs[128]
// Q6_K (210): ql[128], qh[64], scales[16]:i8, d:f16
// Q8_K (292): d:f32, qs[256]:i8, bsums[16]:i16
// IQ4_NL (18): d:f16, qs[16]               x = d * V[q]      Q4_0's nibbles, each an index into
//                                                              the 16 levels V (non-uniform)
// IQ4_XS (136): d:f16, scales_h:u16, scales_l[4], qs[128]      eight sub-blocks of 32, each IQ4_NL's
//                                                              nibbles (16 bytes) at scale
//                                                              d * (s - 32), s six bits: low four
//                                                              nibble i of scales_l, high two bits
//                                                              2i of scales_h
// PQ2   (10): d:f16, qs[8]                 x = d * (2q - 3)  Plinth's 2-bit (2.5 bits/weight):
//                                                              four levels symmetric about zero;
//                                                              weight j is bits 2(j/8).. of byte j%8
//
// Scales are formed in float first (d * sub-scale) and offsets are the negated min products,
// so scale*q + offset rounds exactly as the formats' definitions (d*sc*q - dmin*m) do.
#pragma once
#include <stdint.h>
#include <string.h>

#include "pk_quants.h"

#define BLK_INLINE static inline __attribute__((always_inline))

BLK_INLINE float blk_f16(const uint8_t *p) {
    _Float16 h;
    memcpy(&h, p, 2);
    return (float)h;
}

BLK_INLINE float blk_f32(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}

BLK_INLINE uint32_t blk_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

BLK_INLINE void blk_fill(float *dst, float v, int count) {
    for (int i = 0; i < count; i++) dst[i] = v;
}

// Legacy 32-weight blocks: one scale (and offset) for both halves.
BLK_INLINE void blk_nibbles(const uint8_t *qs, int bias, int8_t *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((qs[j] & 0x0f) - bias);
        q[j + 16] = (int8_t)((qs[j] >> 4) - bias);
    }
}

BLK_INLINE void blk_nibbles_high(const uint8_t *qs, uint32_t qh, int bias, int8_t *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(((qs[j] & 0x0f) | (((qh >> j) & 1u) << 4)) - bias);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - bias);
    }
}

BLK_INLINE void blk_q4_0(const uint8_t *b, int8_t *q, float *sc, float *of) {
    blk_nibbles(b + 2, 8, q);
    blk_fill(sc, blk_f16(b), 2); blk_fill(of, 0.0f, 2);
}

BLK_INLINE void blk_q4_1(const uint8_t *b, int8_t *q, float *sc, float *of) {
    blk_nibbles(b + 4, 0, q);
    blk_fill(sc, blk_f16(b), 2); blk_fill(of, blk_f16(b + 2), 2);
}

BLK_INLINE void blk_q5_0(const uint8_t *b, int8_t *q, float *sc, float *of) {
    blk_nibbles_high(b + 6, blk_u32(b + 2), 16, q);
    blk_fill(sc, blk_f16(b), 2); blk_fill(of, 0.0f, 2);
}

BLK_INLINE void blk_q5_1(const uint8_t *b, int8_t *q, float *sc, float *of) {
    blk_nibbles_high(b + 8, blk_u32(b + 4), 0, q);
    blk_fill(sc, blk_f16(b), 2); blk_fill(of, blk_f16(b + 2), 2);
}

BLK_INLINE void blk_q8_0(const uint8_t *b, int8_t *q, float *sc, float *of) {
    memcpy(q, b + 2, 32);
    blk_fill(sc, blk_f16(b), 2); blk_fill(of, 0.0f, 2);
}

BLK_INLINE void blk_q8_1(const uint8_t *b, int8_t *q, float *sc, float *of) {
    memcpy(q, b + 4, 32);
    blk_fill(sc, blk_f16(b), 2); blk_fill(of, 0.0f, 2);
}

// The IQ4 formats' 16 levels (ggml's kvalues_iq4nl): denser near zero, where most weights are.
static const int8_t blk_iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

BLK_INLINE void blk_iq4_nibbles(const uint8_t *qs, int8_t *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = blk_iq4_levels[qs[j] & 0x0f];
        q[j + 16] = blk_iq4_levels[qs[j] >> 4];
    }
}

BLK_INLINE void blk_iq4_nl(const uint8_t *b, int8_t *q, float *sc, float *of) {
    blk_iq4_nibbles(b + 2, q);
    blk_fill(sc, blk_f16(b), 2); blk_fill(of, 0.0f, 2);
}

// Sub-block i's six-bit scale s (the block's scale is d * (s - 32)).
BLK_INLINE int blk_iq4_xs_scale(const uint8_t *b, int i) {
    const int high = (int)(((unsigned)b[2] | ((unsigned)b[3] << 8)) >> (2 * i)) & 3;
    return ((b[4 + i / 2] >> (4 * (i % 2))) & 0x0f) | (high << 4);
}

BLK_INLINE void blk_iq4_xs(const uint8_t *b, int8_t *q, float *sc, float *of) {
    const float d = blk_f16(b);
    for (int i = 0; i < 8; i++) {
        blk_iq4_nibbles(b + 8 + 16 * i, q + 32 * i);
        sc[2 * i] = sc[2 * i + 1] = d * (float)(blk_iq4_xs_scale(b, i) - 32);
        of[2 * i] = of[2 * i + 1] = 0.0f;
    }
}

BLK_INLINE void blk_pq2(const uint8_t *b, int8_t *q, float *sc, float *of) {
    for (int j = 0; j < 32; j++) q[j] = (int8_t)(2 * ((b[2 + j % 8] >> (2 * (j / 8))) & 3) - 3);
    blk_fill(sc, blk_f16(b), 2); blk_fill(of, 0.0f, 2);
}

// Q2_K: two halves of 128 weights; each reads its 32 bytes of qs four times, two bits at a
// time. Scale byte s holds the 4-bit scale (low) and 4-bit min (high) of weights 16s..16s+15.
BLK_INLINE void blk_q2_K(const uint8_t *b, int8_t *q, float *sc, float *of) {
    const uint8_t *scales = b, *qs = b + 16;
    const float d = blk_f16(b + 80), dmin = blk_f16(b + 82);
    for (int s = 0; s < 16; s++) {
        sc[s] = d * (float)(scales[s] & 0x0f);
        of[s] = -(dmin * (float)(scales[s] >> 4));
    }
    for (int i = 0; i < 256; i++) {
        const int half = i / 128, shift = 2 * ((i % 128) / 32), l = i % 32;
        q[i] = (int8_t)((qs[half * 32 + l] >> shift) & 3);
    }
}

// Q3_K: 16 six-bit scales (low four bits from bytes 0..7, low nibbles giving scales 0..7 and
// high nibbles 8..15; high two bits from bytes 8..11), minus 32. The high quant bit is stored
// inverted: set means no offset, clear means -4.
BLK_INLINE void blk_q3_K(const uint8_t *b, int8_t *q, float *sc, float *of) {
    const uint8_t *hmask = b, *qs = b + 32, *packed = b + 96;
    const float d = blk_f16(b + 108);
    for (int k = 0; k < 16; k++) {
        const int low = (k < 8) ? (packed[k] & 0x0f) : (packed[k - 8] >> 4);
        const int high = (packed[8 + (k % 4)] >> (2 * (k / 4))) & 3;
        sc[k] = d * (float)((low | (high << 4)) - 32);
        of[k] = 0.0f;
    }
    for (int i = 0; i < 256; i++) {
        const int half = i / 128, shift = 2 * ((i % 128) / 32), l = i % 32;
        const int low = (qs[half * 32 + l] >> shift) & 3;
        const int high_set = (hmask[i % 32] >> (i / 32)) & 1;
        q[i] = (int8_t)(low - (high_set ? 0 : 4));
    }
}

// Six-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K. Sub-blocks 0..3 keep them in the
// low six bits of bytes j and j+4; sub-blocks 4..7 take their low four bits from the nibbles
// of byte j+8 and their top two bits from the spare top bits of bytes j-4, j.
BLK_INLINE void blk_scale_min_k4(const uint8_t *packed, int j, int *scale, int *min) {
    if (j < 4) {
        *scale = packed[j] & 63;
        *min = packed[j + 4] & 63;
    } else {
        *scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
        *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    }
}

// Q4_K and Q5_K: eight sub-blocks of 32; sub-block s reads 32 bytes of qs at (s/2)*32, nibble
// s%2, and (Q5_K) bit s of qh[l] as its fifth bit. qh is NULL for Q4_K.
BLK_INLINE void blk_q45_K(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, int8_t *q, float *sc, float *of) {
    const float d = blk_f16(b), dmin = blk_f16(b + 2);
    for (int s = 0; s < 8; s++) {
        int scale, min;
        blk_scale_min_k4(b + 4, s, &scale, &min);
        sc[2 * s] = sc[2 * s + 1] = d * (float)scale;
        of[2 * s] = of[2 * s + 1] = -(dmin * (float)min);
        const uint8_t *src = qs + (s / 2) * 32;
        const int shift = 4 * (s % 2);
        for (int l = 0; l < 32; l++) {
            int v = (src[l] >> shift) & 0x0f;
            if (qh) v |= ((qh[l] >> s) & 1) << 4;
            q[s * 32 + l] = (int8_t)v;
        }
    }
}

BLK_INLINE void blk_q4_K(const uint8_t *b, int8_t *q, float *sc, float *of) { blk_q45_K(b, NULL, b + 16, q, sc, of); }
BLK_INLINE void blk_q5_K(const uint8_t *b, int8_t *q, float *sc, float *of) { blk_q45_K(b, b + 16, b + 48, q, sc, of); }

// Q6_K: eight rows of 32; row r lives in half r/4 (64 bytes of ql, 32 of qh); its low four
// bits come from ql byte (r%2)*32 + l, nibble (r/2)%2, its top two bits from qh byte l, bit
// pair r%4; minus 32. One signed 8-bit scale per 16 weights.
BLK_INLINE void blk_q6_K(const uint8_t *b, int8_t *q, float *sc, float *of) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    const float d = blk_f16(b + 208);
    for (int s = 0; s < 16; s++) { sc[s] = d * (float)scales[s]; of[s] = 0.0f; }
    for (int r = 0; r < 8; r++) {
        const int half = r / 4;
        const uint8_t *lo = ql + half * 64 + (r % 2) * 32;
        const uint8_t *hi = qh + half * 32;
        const int lo_shift = 4 * ((r / 2) % 2), hi_shift = 2 * (r % 4);
        for (int l = 0; l < 32; l++)
            q[r * 32 + l] = (int8_t)((((lo[l] >> lo_shift) & 0x0f) | (((hi[l] >> hi_shift) & 3) << 4)) - 32);
    }
}

BLK_INLINE void blk_q8_K(const uint8_t *b, int8_t *q, float *sc, float *of) {
    memcpy(q, b + 4, 256);
    blk_fill(sc, blk_f32(b), 16); blk_fill(of, 0.0f, 16);
}
