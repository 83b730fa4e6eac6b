// Sixteen 32-bit lanes (lane r = weight row r of a tile) for the tile kernels in qtile_simd.h:
// one zmm register with AVX-512 VNNI (QT_AVX512 = 1), two ymm registers with AVX2. Every
// operation is exact integer or IEEE float arithmetic, so both give the reference's bits.
// Internal; included once per instruction set, inside that set's target pragma.
#pragma once
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define INL static inline __attribute__((always_inline))

// Sixteen rows `stride` bytes apart, or their packed tile (pk_pack's layout) when `packed` is
// set, and the next tile's rows (or packed tile) to prefetch, or NULL.
typedef struct {
    const uint8_t *base;
    size_t stride;
    const uint8_t *prefetch;
    const uint8_t *packed;
} rows16;

#if QT_AVX512

typedef __m512i vi;
typedef __m512 vf;

INL vi vand(vi a, vi b) { return _mm512_and_si512(a, b); }
INL vi vor(vi a, vi b) { return _mm512_or_si512(a, b); }
INL vi vxor(vi a, vi b) { return _mm512_xor_si512(a, b); }
INL vi vadd(vi a, vi b) { return _mm512_add_epi32(a, b); }
INL vi vsub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
INL vi vsrli(vi a, int n) { return _mm512_srli_epi32(a, (unsigned)n); }
INL vi vslli(vi a, int n) { return _mm512_slli_epi32(a, (unsigned)n); }
INL vi vsrai(vi a, int n) { return _mm512_srai_epi32(a, (unsigned)n); }
INL vi vset1(int32_t v) { return _mm512_set1_epi32(v); }
INL vi vzero(void) { return _mm512_setzero_si512(); }
INL vi vload(const void *p) { return _mm512_load_si512(p); }
INL void vstore(void *p, vi v) { _mm512_store_si512(p, v); }

INL vf vfset1(float v) { return _mm512_set1_ps(v); }
INL vf vfzero(void) { return _mm512_setzero_ps(); }
INL vf vcvt(vi v) { return _mm512_cvtepi32_ps(v); }
INL vf vfmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
INL vf vfadd(vf a, vf b) { return _mm512_add_ps(a, b); }
INL vf vfmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
INL vf vfload(const float *p) { return _mm512_load_ps(p); }
INL void vfstore(float *p, vf v) { _mm512_store_ps(p, v); }
INL vf vfneg(vf v) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u))); }
// y[r] = v[r] for r < rows.
INL void vfstore_rows(float *y, vf v, int rows) { _mm512_mask_storeu_ps(y, (__mmask16)((1u << rows) - 1u), v); }
// v[r] = y[r] for r < rows, zero past them.
INL vf vfload_rows(const float *y, int rows) { return _mm512_maskz_loadu_ps((__mmask16)((1u << rows) - 1u), y); }

// Sixteen half floats at p (32-byte aligned), converted.
INL vf f16x16(const void *p) { return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)p)); }

// The half float in the low / high 16 bits of each lane.
INL vf f16_low(vi v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }
INL vf f16_high(vi v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16))); }

// Bit b of a 4-bit index, moved to bit 4 of byte b (the fifth bit of four codes).
INL vi spread4(vi bits) {
    const __m512i table = _mm512_setr_epi32(
        0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010, 0x00101000, 0x00101010,
        0x10000000, 0x10000010, 0x10001000, 0x10001010, 0x10100000, 0x10100010, 0x10101000, 0x10101010);
    return _mm512_permutexvar_epi32(bits, table); // uses the low four bits of each lane
}

// s + the sum over the four bytes of each lane of code (unsigned) times x (signed, broadcast).
// `sgn`: codes are q + 128 and s starts at 0 rather than at -128 * sum(x); same sum either way.
INL vi vdot4(vi s, vi w, int32_t xquad, int sgn) {
    (void)sgn;
    return _mm512_dpbusd_epi32(s, w, _mm512_set1_epi32(xquad));
}
#define VDOT_SIGNED_SKIPS_BIAS 0

// Each byte of idx (0..15) replaced by table[idx].
INL vi vlookup16(vi idx, const int8_t table[16]) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)table)), idx);
}

// out[d] lane r = the d-th dword of the 16 bytes at row r + at; with `masked`, only the first
// `valid` bytes are read (the rest are zero).
INL void tr16x4_masked(const rows16 *rw, size_t at, int masked, size_t valid, vi out[4]) {
    const size_t s = rw->stride;
    const uint8_t *p = rw->base + at;
    const __mmask16 m = (__mmask16)((1u << (masked ? valid : 0)) - 1u);
    __m512i z[4];
    for (int i = 0; i < 4; i++) {
        // z[i], 128-bit lane l: row 4l + i, so that the unpacks below leave lane r = row r.
        const uint8_t *q = p + (size_t)i * s;
#define LD(ptr) (masked ? _mm_maskz_loadu_epi8(m, (ptr)) : _mm_loadu_si128((const __m128i *)(ptr)))
        __m512i v = _mm512_castsi128_si512(LD(q));
        v = _mm512_inserti32x4(v, LD(q + 4 * s), 1);
        v = _mm512_inserti32x4(v, LD(q + 8 * s), 2);
        z[i] = _mm512_inserti32x4(v, LD(q + 12 * s), 3);
#undef LD
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm512_unpacklo_epi64(t0, t2);
    out[1] = _mm512_unpackhi_epi64(t0, t2);
    out[2] = _mm512_unpacklo_epi64(t1, t3);
    out[3] = _mm512_unpackhi_epi64(t1, t3);
}

#else // AVX2: lanes 0..7 in .l, 8..15 in .h

typedef struct { __m256i l, h; } vi;
typedef struct { __m256 l, h; } vf;

#define VI2(op, a, b) ((vi){op((a).l, (b).l), op((a).h, (b).h)})
#define VF2(op, a, b) ((vf){op((a).l, (b).l), op((a).h, (b).h)})
INL vi vand(vi a, vi b) { return VI2(_mm256_and_si256, a, b); }
INL vi vor(vi a, vi b) { return VI2(_mm256_or_si256, a, b); }
INL vi vxor(vi a, vi b) { return VI2(_mm256_xor_si256, a, b); }
INL vi vadd(vi a, vi b) { return VI2(_mm256_add_epi32, a, b); }
INL vi vsub(vi a, vi b) { return VI2(_mm256_sub_epi32, a, b); }
INL vi vsrli(vi a, int n) { return (vi){_mm256_srli_epi32(a.l, n), _mm256_srli_epi32(a.h, n)}; }
INL vi vslli(vi a, int n) { return (vi){_mm256_slli_epi32(a.l, n), _mm256_slli_epi32(a.h, n)}; }
INL vi vsrai(vi a, int n) { return (vi){_mm256_srai_epi32(a.l, n), _mm256_srai_epi32(a.h, n)}; }
INL vi vset1(int32_t v) { const __m256i x = _mm256_set1_epi32(v); return (vi){x, x}; }
INL vi vzero(void) { return (vi){_mm256_setzero_si256(), _mm256_setzero_si256()}; }
INL vi vload(const void *p) { return (vi){_mm256_load_si256((const __m256i *)p), _mm256_load_si256((const __m256i *)p + 1)}; }
INL void vstore(void *p, vi v) { _mm256_store_si256((__m256i *)p, v.l); _mm256_store_si256((__m256i *)p + 1, v.h); }

INL vf vfset1(float v) { const __m256 x = _mm256_set1_ps(v); return (vf){x, x}; }
INL vf vfzero(void) { return (vf){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
INL vf vcvt(vi v) { return (vf){_mm256_cvtepi32_ps(v.l), _mm256_cvtepi32_ps(v.h)}; }
INL vf vfmul(vf a, vf b) { return VF2(_mm256_mul_ps, a, b); }
INL vf vfadd(vf a, vf b) { return VF2(_mm256_add_ps, a, b); }
INL vf vfmadd(vf a, vf b, vf c) { return (vf){_mm256_fmadd_ps(a.l, b.l, c.l), _mm256_fmadd_ps(a.h, b.h, c.h)}; }
INL vf vfload(const float *p) { return (vf){_mm256_load_ps(p), _mm256_load_ps(p + 8)}; }
INL void vfstore(float *p, vf v) { _mm256_store_ps(p, v.l); _mm256_store_ps(p + 8, v.h); }
INL vf vfneg(vf v) { const __m256 m = _mm256_set1_ps(-0.0f); return (vf){_mm256_xor_ps(v.l, m), _mm256_xor_ps(v.h, m)}; }
INL void vfstore_rows(float *y, vf v, int rows) {
    if (rows == 16) { _mm256_storeu_ps(y, v.l); _mm256_storeu_ps(y + 8, v.h); return; }
    float t[16];
    _mm256_storeu_ps(t, v.l);
    _mm256_storeu_ps(t + 8, v.h);
    memcpy(y, t, (size_t)rows * sizeof(float));
}
INL vf vfload_rows(const float *y, int rows) {
    if (rows == 16) return (vf){_mm256_loadu_ps(y), _mm256_loadu_ps(y + 8)};
    float t[16] = {0};
    memcpy(t, y, (size_t)rows * sizeof(float));
    return (vf){_mm256_loadu_ps(t), _mm256_loadu_ps(t + 8)};
}

// The low 16 bits of each lane of both halves as eight halves, converted.
INL __m256 f16_half8(__m256i v) {
    const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                          0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, pick), 0x08);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}
INL vf f16_low(vi v) { return (vf){f16_half8(v.l), f16_half8(v.h)}; }
INL vf f16x16(const void *p) {
    const __m128i *q = (const __m128i *)p;
    return (vf){_mm256_cvtph_ps(_mm_load_si128(q)), _mm256_cvtph_ps(_mm_load_si128(q + 1))};
}
INL vf f16_high(vi v) { return f16_low(vsrli(v, 16)); }

// Bit b of a 4-bit index, moved to bit 4 of byte b: a multiply places bit b at bit 8b.
INL vi spread4(vi bits) {
    const __m256i m = _mm256_set1_epi32(0x00204081), f = _mm256_set1_epi32(15), one = _mm256_set1_epi32(0x01010101);
    const __m256i l = _mm256_and_si256(_mm256_mullo_epi32(_mm256_and_si256(bits.l, f), m), one);
    const __m256i h = _mm256_and_si256(_mm256_mullo_epi32(_mm256_and_si256(bits.h, f), m), one);
    return (vi){_mm256_slli_epi32(l, 4), _mm256_slli_epi32(h, 4)};
}

// s + the four-byte dot products, without VNNI: pairs through maddubs (u8 x s8 -> s16), then
// madd to s32. Codes up to 63 cannot saturate the pairs (2 * 63 * 127 < 32767); Q8_0's (up to
// 255) could, so with `sgn` they go back to signed q = code - 128 and maddubs takes |q| and x
// with q's sign (2 * 128 * 127 < 32767; x is never -128).
INL __m256i dot4_half(__m256i s, __m256i w, __m256i x, int sgn) {
    __m256i pairs;
    if (sgn) {
        const __m256i q = _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80));
        pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(x, q));
    } else {
        pairs = _mm256_maddubs_epi16(w, x);
    }
    return _mm256_add_epi32(s, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}
INL vi vdot4(vi s, vi w, int32_t xquad, int sgn) {
    const __m256i x = _mm256_set1_epi32(xquad);
    return (vi){dot4_half(s.l, w.l, x, sgn), dot4_half(s.h, w.h, x, sgn)};
}
// With `sgn`, vdot4 sums (code - 128) * x, which already includes -128 * sum(x).
#define VDOT_SIGNED_SKIPS_BIAS 1

INL vi vlookup16(vi idx, const int8_t table[16]) {
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table));
    return (vi){_mm256_shuffle_epi8(t, idx.l), _mm256_shuffle_epi8(t, idx.h)};
}

INL __m128i load16(const uint8_t *p, int masked, size_t valid) {
    if (!masked) return _mm_loadu_si128((const __m128i *)p);
    uint8_t t[16] = {0};
    memcpy(t, p, valid);
    return _mm_loadu_si128((const __m128i *)t);
}

// As the AVX-512 version: eight rows per half, each 128-bit lane of z[i] one row.
INL void tr16x4_masked(const rows16 *rw, size_t at, int masked, size_t valid, vi out[4]) {
    const size_t s = rw->stride;
    const uint8_t *p = rw->base + at;
    __m256i o[2][4];
    for (int half = 0; half < 2; half++) {
        __m256i z[4];
        for (int i = 0; i < 4; i++) {
            const uint8_t *q = p + (size_t)(8 * half + i) * s;
            z[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(load16(q, masked, valid)), load16(q + 4 * s, masked, valid), 1);
        }
        const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
        const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
        o[half][0] = _mm256_unpacklo_epi64(t0, t2);
        o[half][1] = _mm256_unpackhi_epi64(t0, t2);
        o[half][2] = _mm256_unpacklo_epi64(t1, t3);
        o[half][3] = _mm256_unpackhi_epi64(t1, t3);
    }
    for (int d = 0; d < 4; d++) out[d] = (vi){o[0][d], o[1][d]};
}

#endif
