#include "pk_matmul.h"
#include "elementwise.h"
#include "isa.h"
#include "qtile_isa.h"
#include "share.h"

// No FMA contraction: the order of every rounding is written out (fmaf where it is meant).
#pragma clang fp contract(off)
#include <cblas.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

// ---- activation quantization -------------------------------------------------------------
//
// Activations are quantized as llama.cpp quantizes them for the legacy weight types (its
// "vec_dot_type"), so both engines feed the same int8 values to the same integer sums: Q8_0
// (fp16 scale per 32) for Q4_0/Q5_0/Q8_0, Q8_1 (fp16 scale and fp16 scaled sum) for Q4_1/Q5_1.
// For the k-quants (ACT_Q8_K) llama.cpp's Q8_K has one f32 scale per 256 values; Plinth gives
// every 32 values their own f32 scale. The kernels apply a scale per sub-block anyway, and an
// outlier then coarsens only its own 32 values. On Gemma 3, whose feed-forward activations have
// large outliers, Q8_K's rounding of ffn_down's input was most of the file's error against F32
// (Benchmarks/README.md, fidelity).

#define ALWAYS_INLINE static inline __attribute__((always_inline))

static inline float round_f16(float v) { return (float)(_Float16)v; }

// Arrays of one activation format for n rows of length k.
typedef struct {
    int8_t *q;
    float *dx16, *dx32, *xs16, *xs32;
    int32_t *sx16, *sx32;
} act_buf;

// 32 values to int8 at their own scale amax/127 (returned, unrounded), each rounded to nearest
// with ties to even, like _mm256_round_ps; half[h] is the sum of the codes of values 16h..16h+15.
ALWAYS_INLINE float quantize_block32(const float *xb, int8_t *qb, int32_t half[2]) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) {
        const float a = fabsf(xb[i]);
        amax = a > amax ? a : amax;
    }
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < 32; i++) qb[i] = (int8_t)(int)__builtin_rintf(xb[i] * id);
    for (int h = 0; h < 2; h++) {
        half[h] = 0;
        for (int i = 0; i < 16; i++) half[h] += qb[16 * h + i];
    }
    return amax / 127.0f;
}

// The terms of block b (32 values) of a row of `kind`, from its unrounded scale d and its halves'
// code sums; the row's arrays start at o16 and o32 of the buffers.
ALWAYS_INLINE void block_terms(int kind, act_buf a, int64_t o16, int64_t o32, int64_t b, float d, const int32_t half[2]) {
    const int32_t sum = half[0] + half[1];
    if (kind == ACT_Q8_K) {
        for (int h = 0; h < 2; h++) {
            a.dx16[o16 + 2 * b + h] = d;
            a.sx16[o16 + 2 * b + h] = half[h];
            a.xs16[o16 + 2 * b + h] = d * (float)half[h];
        }
        a.dx32[o32 + b] = d;
        a.sx32[o32 + b] = sum;
        a.xs32[o32 + b] = d * (float)sum;
        return;
    }
    a.dx32[o32 + b] = round_f16(d);
    a.sx32[o32 + b] = sum;
    // Q8_1 carries d*sum as one fp16 per 32 (from the unrounded d, as llama.cpp does; using
    // dx*sum instead measured no better: Benchmarks/README.md, fidelity).
    a.xs32[o32 + b] = kind == ACT_Q8_1 ? round_f16(d * (float)sum) : 0.0f;
}

// ---- scratch layout ------------------------------------------------------------------------

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

static size_t act_bytes(int64_t n, int64_t k) {
    const size_t per16 = align64((size_t)(n * (k / 16)) * 4), per32 = align64((size_t)(n * (k / 32)) * 4);
    return align64((size_t)(n * k)) + 3 * per16 + 3 * per32;
}

static size_t bias_bytes(int64_t n, int64_t k) { return align64((size_t)(n * (k / 16)) * sizeof(int32_t)); }

// Float weights meet many activation rows through cblas_sgemm, SGEMM_ROWS rows at a time
// dequantized to f32 (measured: our int8 tiles beat dequantize-then-sgemm for every quantized
// format at every batch size, so only float weights take this path).
#define SGEMM_ROWS 32
#define SGEMM_MIN_N 8

// Two tiles: a paired (gated) product unpacks a tile of each matrix.
static size_t thread_bytes_for(int64_t k) {
    const size_t tile = 2 * align64(qt_tile_bytes(k));
    const size_t f = align64((size_t)k * SGEMM_ROWS * sizeof(float));
    return tile > f ? tile : f;
}

size_t pk_matmul_scratch_bytes(int64_t n, int64_t k, int threads) {
    return ACT_KINDS * act_bytes(n, k) + PK_MATMUL_MAX_OPS * bias_bytes(n, k) +
           (size_t)threads * thread_bytes_for(k) + 64;
}

static act_buf act_at(uint8_t *s, int64_t n, int64_t k) {
    const size_t per16 = align64((size_t)(n * (k / 16)) * 4), per32 = align64((size_t)(n * (k / 32)) * 4);
    act_buf a;
    a.q = (int8_t *)s;
    s += align64((size_t)(n * k));
    a.dx16 = (float *)s; s += per16;
    a.sx16 = (int32_t *)s; s += per16;
    a.xs16 = (float *)s; s += per16;
    a.dx32 = (float *)s; s += per32;
    a.sx32 = (int32_t *)s; s += per32;
    a.xs32 = (float *)s;
    return a;
}

// Blocks [b0, b1) of row t, each by `block` (quantize_block32 or an ISA's copy of it); inlined,
// so the block function is called directly.
ALWAYS_INLINE void quantize_blocks(const float *x, int64_t t, int64_t b0, int64_t b1, int64_t k, int kind, act_buf a,
                                   float (*block)(const float *, int8_t *, int32_t[2])) {
    for (int64_t b = b0; b < b1; b++) {
        int32_t half[2];
        const float d = block(x + t * k + b * 32, a.q + t * k + b * 32, half);
        block_terms(kind, a, t * (k / 16), t * (k / 32), b, d, half);
    }
}

// Rows [t0, t1), block by block.
ALWAYS_INLINE void quantize_rows(const float *x, int64_t t0, int64_t t1, int64_t k, int kind, act_buf a,
                                 float (*block)(const float *, int8_t *, int32_t[2])) {
    for (int64_t t = t0; t < t1; t++) quantize_blocks(x, t, 0, k / 32, k, kind, a, block);
}

ALWAYS_INLINE void quantize_act_body(const float *x, int64_t t0, int64_t t1, int64_t k, int kind, act_buf a) {
    quantize_rows(x, t0, t1, k, kind, a, quantize_block32);
}

// ---- the reference kernels (also compiled for AVX2, where the compiler vectorizes them) ----

ALWAYS_INLINE void dot_ref_body(const qt_format *f, qt_tile tl, int64_t k, const qt_act *a, const int32_t *nb,
                                int64_t t0, int count, float *y, int64_t ldy, int rows, const qt_epilogue *e) {
    const int64_t nsub = k / f->sub;
    const float *dxs = f->sub == 16 ? a->dx16 : a->dx32;
    const float *xss = f->sub == 16 ? a->xs16 : a->xs32;
    for (int64_t t = t0; t < t0 + count; t++) {
        const int8_t *xq = a->q + t * k;
        float acc[QT_ROWS] = {0}, off[QT_ROWS] = {0};
        for (int64_t j = 0; j < nsub; j++) {
            int32_t is[QT_ROWS];
            for (int r = 0; r < QT_ROWS; r++) is[r] = nb[t * nsub + j];
            const uint8_t *c = tl.codes + j * f->sub * QT_ROWS;
            const int8_t *xj = xq + j * f->sub;
            for (int v = 0; v < f->sub / 4; v++)
                for (int r = 0; r < QT_ROWS; r++)
                    for (int b = 0; b < 4; b++) is[r] += (int32_t)c[v * 64 + r * 4 + b] * (int32_t)xj[4 * v + b];
            const float d = dxs[t * nsub + j];
            for (int r = 0; r < QT_ROWS; r++) acc[r] = fmaf(tl.scale[j * QT_ROWS + r] * d, (float)is[r], acc[r]);
            if (f->offsets) {
                const float o = xss[t * nsub + j];
                for (int r = 0; r < QT_ROWS; r++) off[r] = fmaf(tl.offset[j * QT_ROWS + r], o, off[r]);
            }
        }
        for (int r = 0; r < rows; r++) {
            float *out = y + (t - t0) * ldy + r;
            *out = qt_epilogue_apply(e, f->offsets ? acc[r] + off[r] : acc[r], *out, r);
        }
    }
}

// Float weights (F32/F16/BF16) against float activations: sixteen partial sums per row, reduced
// by a fixed tree, the same on every ISA.
ALWAYS_INLINE void float_rows_body(int type, const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, int64_t k,
                                   const float *x, int64_t n, float *y, int64_t ldy, float *wf) {
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * row_bytes;
        pk_dequantize(type, row, wf, k); // exact for the float types
        for (int64_t t = 0; t < n; t++) {
            const float *xr = x + t * k;
            float acc[16] = {0};
            int64_t i = 0;
            for (; i + 16 <= k; i += 16)
                for (int l = 0; l < 16; l++) acc[l] = fmaf(wf[i + l], xr[i + l], acc[l]);
            for (int l = 0; i + l < k; l++) acc[l] = fmaf(wf[i + l], xr[i + l], acc[l]);
            for (int width = 8; width >= 1; width /= 2)
                for (int l = 0; l < width; l++) acc[l] += acc[l + width];
            y[t * ldy + r] = acc[0];
        }
    }
}

static void quantize_scalar(const float *x, int64_t t0, int64_t t1, int64_t k, int kind, act_buf a) {
    quantize_act_body(x, t0, t1, k, kind, a);
}
static void unpack_scalar(const qt_type *ty, const uint8_t *w, size_t row_bytes, const uint8_t *packed, int rows,
                          int last, int64_t k, qt_tile t) {
    (void)packed, (void)last; // the reference reads the rows as the file has them
    qt_unpack_ref(ty, w, row_bytes, rows, k, t);
}
static void dot_scalar(const qt_format *f, qt_tile tl, int64_t k, const qt_act *a, const int32_t *nb,
                       int64_t t0, int count, float *y, int64_t ldy, int rows, const qt_epilogue *e) {
    dot_ref_body(f, tl, k, a, nb, t0, count, y, ldy, rows, e);
}
static void float_scalar(int type, const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, int64_t k,
                         const float *x, int64_t n, float *y, int64_t ldy, float *wf) {
    float_rows_body(type, w, row_bytes, r0, r1, k, x, n, y, ldy, wf);
}

#if defined(__x86_64__)
#define AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
AVX2_TARGET static void quantize_avx2(const float *x, int64_t t0, int64_t t1, int64_t k, int kind, act_buf a) {
    quantize_act_body(x, t0, t1, k, kind, a);
}
AVX2_TARGET static void float_avx2(int type, const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, int64_t k,
                                   const float *x, int64_t n, float *y, int64_t ldy, float *wf) {
    float_rows_body(type, w, row_bytes, r0, r1, k, x, n, y, ldy, wf);
}
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))
// Sixteen vectors reduced to one whose lane b is the reduction of vector b's lanes, by a tree
// of halving shuffles (8 + 4 + 2 + 1 combining ops) instead of sixteen reductions of their own.
// The leaves are taken in the order that leaves the lanes in order: the tree puts vector
// 4j + m's result in lane 4m + j. Max and integer add are exact, so any order gives the same.
#define TREE16(T, name, comb, shuf_f32x4, unpack_lo64, unpack_hi64, shuf_32)                              \
    AVX512_TARGET static inline T name(const T v[16]) {                                                  \
        T w[8], x[4], y[2];                                                                              \
        for (int i = 0; i < 8; i++) {                                                                    \
            const T a = v[(2 * i) % 4 * 4 + (2 * i) / 4], b = v[(2 * i + 1) % 4 * 4 + (2 * i + 1) / 4];  \
            w[i] = comb(shuf_f32x4(a, b, 0x44), shuf_f32x4(a, b, 0xEE));                                 \
        }                                                                                                \
        for (int i = 0; i < 4; i++)                                                                      \
            x[i] = comb(shuf_f32x4(w[2 * i], w[2 * i + 1], 0x88), shuf_f32x4(w[2 * i], w[2 * i + 1], 0xDD)); \
        for (int i = 0; i < 2; i++) y[i] = comb(unpack_lo64(x[2 * i], x[2 * i + 1]), unpack_hi64(x[2 * i], x[2 * i + 1])); \
        return comb(shuf_32(y[0], y[1], 0x88), shuf_32(y[0], y[1], 0xDD));                               \
    }
#define I32X4(a, b, imm) _mm512_shuffle_i32x4(a, b, imm)
#define I64LO(a, b) _mm512_unpacklo_epi64(a, b)
#define I64HI(a, b) _mm512_unpackhi_epi64(a, b)
#define I32SH(a, b, imm) _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), imm))
#define F64LO(a, b) _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
#define F64HI(a, b) _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
TREE16(__m512, max_tree16, _mm512_max_ps, _mm512_shuffle_f32x4, F64LO, F64HI, _mm512_shuffle_ps)
TREE16(__m512i, add_tree16, _mm512_add_epi32, I32X4, I64LO, I64HI, I32SH)

// quantize_block32 on two vectors: the same codes, scale and sums (max ignores NaN as the scalar
// comparison does; a NaN's code is 0 on both paths). For a row's last few blocks.
AVX512_TARGET static inline float quantize_block32_avx512(const float *xb, int8_t *qb, int32_t half[2]) {
    const __m512 v[2] = {_mm512_loadu_ps(xb), _mm512_loadu_ps(xb + 16)};
    __m512 m = _mm512_setzero_ps();
    for (int h = 0; h < 2; h++) m = _mm512_max_ps(_mm512_abs_ps(v[h]), m); // NaN lanes keep m
    const float amax = _mm512_reduce_max_ps(m);
    const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    for (int h = 0; h < 2; h++) {
        const __m128i q = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v[h], id)));
        _mm_storeu_si128((__m128i *)(qb + 16 * h), q);
        half[h] = _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q));
    }
    return amax / 127.0f;
}

// quantize_rows for sixteen blocks at a time: the same codes, scales and terms as the scalar
// path, bit for bit (max ignores NaN as the scalar comparison does; a NaN's code is 0 on both).
// Per block only the codes are made one at a time; the blocks' maxima, scales, code sums and
// terms are vectors with one block per lane.
AVX512_TARGET static void quantize_avx512(const float *x, int64_t t0, int64_t t1, int64_t k, int kind, act_buf a) {
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512i low_half = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i high_half = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    // dword of the packs' result holding each output dword (see below)
    const __m512i code_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const int64_t nblocks = k / 32;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t g = 0; g < nblocks; g += 16) {
            const int nb = nblocks - g < 16 ? (int)(nblocks - g) : 16;
            // A short tail costs as much through the tree as sixteen blocks: block by block.
            if (nb < 8) {
                quantize_blocks(x, t, g, nblocks, k, kind, a, quantize_block32_avx512);
                break;
            }
            const __mmask16 valid = (__mmask16)((1u << nb) - 1u);
            const float *xg = x + t * k + g * 32;
            int8_t *qg = a.q + t * k + g * 32;
            // Blocks past the row's end read as zero (every loop below has constant bounds, so
            // the sixteen blocks stay in registers).
            __m512 v[2][16], m[16];
            for (int b = 0; b < 16; b++) {
                const __mmask16 in = b < nb ? 0xffff : 0;
                m[b] = _mm512_setzero_ps();
                for (int h = 0; h < 2; h++) {
                    v[h][b] = _mm512_maskz_loadu_ps(in, xg + 32 * b + 16 * h);
                    // NaN lanes keep m (the max's second operand)
                    m[b] = _mm512_max_ps(_mm512_and_ps(v[h][b], abs_mask), m[b]);
                }
            }
            const __m512 amax = max_tree16(m);
            const __mmask16 nonzero = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_UQ);
            const __m512 id = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(127.0f), amax);
            const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
            __m512i half[2][16];
            for (int b = 0; b < 16; b++) {
                const __m512 s = _mm512_permutexvar_ps(_mm512_set1_epi32(b), id);
                for (int h = 0; h < 2; h++) {
                    // a NaN's code is 0, as the scalar conversion's low byte (in codes and sums)
                    const __m512 p = _mm512_mul_ps(v[h][b], s);
                    half[h][b] = _mm512_maskz_cvtps_epi32(_mm512_cmp_ps_mask(p, p, _CMP_ORD_Q), p);
                }
            }
            // Codes of two blocks at a time: saturating packs (the codes are within +-127) leave
            // dword 4l + i of the result holding lane l's dword i of (block 0's halves, block
            // 1's halves).
            for (int b = 0; b < nb; b += 2) {
                const __m512i p = _mm512_packs_epi16(_mm512_packs_epi32(half[0][b], half[1][b]),
                                                     _mm512_packs_epi32(half[0][b + 1], half[1][b + 1]));
                const __m512i q = _mm512_permutexvar_epi32(code_order, p);
                if (nb - b >= 2) _mm512_storeu_si512(qg + 32 * b, q);
                else _mm256_storeu_si256((__m256i *)(qg + 32 * b), _mm512_castsi512_si256(q));
            }
            const int64_t o32 = t * nblocks + g, o16 = 2 * o32;
            if (kind == ACT_Q8_K) {
                const __m512i s0 = add_tree16(half[0]), s1 = add_tree16(half[1]);
                const __m512i sum = _mm512_add_epi32(s0, s1);
                const __m512i h0 = _mm512_permutex2var_epi32(s0, low_half, s1), h1 = _mm512_permutex2var_epi32(s0, high_half, s1);
                const __m512 d0 = _mm512_permutex2var_ps(d, low_half, d), d1 = _mm512_permutex2var_ps(d, high_half, d);
                // nb >= 8 here: the first eight blocks' sixteen halves are all there
                const __mmask16 lo = 0xffff, hi = (__mmask16)((1u << (2 * (nb - 8))) - 1u);
                _mm512_mask_storeu_ps(a.dx16 + o16, lo, d0);
                _mm512_mask_storeu_ps(a.dx16 + o16 + 16, hi, d1);
                _mm512_mask_storeu_epi32(a.sx16 + o16, lo, h0);
                _mm512_mask_storeu_epi32(a.sx16 + o16 + 16, hi, h1);
                _mm512_mask_storeu_ps(a.xs16 + o16, lo, _mm512_mul_ps(d0, _mm512_cvtepi32_ps(h0)));
                _mm512_mask_storeu_ps(a.xs16 + o16 + 16, hi, _mm512_mul_ps(d1, _mm512_cvtepi32_ps(h1)));
                _mm512_mask_storeu_ps(a.dx32 + o32, valid, d);
                _mm512_mask_storeu_epi32(a.sx32 + o32, valid, sum);
                _mm512_mask_storeu_ps(a.xs32 + o32, valid, _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)));
                continue;
            }
            __m512i both[16];
            for (int b = 0; b < 16; b++) both[b] = _mm512_add_epi32(half[0][b], half[1][b]);
            const __m512i sum = add_tree16(both);
            // round_f16: to half with ties to even and back, as the (_Float16) conversion does
            _mm512_mask_storeu_ps(a.dx32 + o32, valid, _mm512_cvtph_ps(_mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT)));
            _mm512_mask_storeu_epi32(a.sx32 + o32, valid, sum);
            const __m512 xs = kind == ACT_Q8_1 ? _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)), _MM_FROUND_TO_NEAREST_INT))
                                               : _mm512_setzero_ps();
            _mm512_mask_storeu_ps(a.xs32 + o32, valid, xs);
        }
}
AVX512_TARGET static void float_avx512(int type, const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, int64_t k,
                                       const float *x, int64_t n, float *y, int64_t ldy, float *wf) {
    float_rows_body(type, w, row_bytes, r0, r1, k, x, n, y, ldy, wf);
}
#endif

// ---- dispatch ------------------------------------------------------------------------------

// One instruction set's kernels: the per-type unpackers are its row of the type's kernels
// (qtile_simd.h), NULL for the scalar set, which unpacks every type by the reference.
typedef struct {
    void (*quantize)(const float *, int64_t, int64_t, int64_t, int, act_buf);
    qt_dot_fn dot;
    const qt_kernels *types;
    void (*float_rows)(int, const uint8_t *, size_t, int64_t, int64_t, int64_t, const float *, int64_t, float *, int64_t, float *);
} kernel_set;

static const kernel_set scalar_set = {quantize_scalar, dot_scalar, NULL, float_scalar};
#if defined(__x86_64__)
static const kernel_set avx2_set = {quantize_avx2, qt_dot_avx2, qt_kernels_avx2, float_avx2};
static const kernel_set avx512_set = {quantize_avx512, qt_dot_avx512, qt_kernels_avx512, float_avx512};
#endif

// A type's unpackers in a set: its SIMD ones, or the reference (and no fused kernel).
static qt_kernels type_kernels(const kernel_set *ks, int type) {
    if (ks->types && ks->types[QT_SLOT(type)].unpack) return ks->types[QT_SLOT(type)];
    return (qt_kernels){unpack_scalar, NULL};
}

// ---- the product ---------------------------------------------------------------------------

typedef struct {
    pk_matmul_op ops[PK_MATMUL_MAX_OPS];
    const qt_type *ty[PK_MATMUL_MAX_OPS];
    qt_kernels tk[PK_MATMUL_MAX_OPS];
    const int32_t *nb[PK_MATMUL_MAX_OPS];  // -bias * sum(x) per (row, sub-block), per op
    int quantized[PK_MATMUL_MAX_OPS];
    int count;
    int64_t first_tile[PK_MATMUL_MAX_OPS + 1]; // op i owns tiles [first_tile[i], first_tile[i+1])
    int64_t k, n;
    const float *x;
    qt_act act[ACT_KINDS];
    act_buf abuf[ACT_KINDS];
    int need[ACT_KINDS];
    int32_t *nbw[PK_MATMUL_MAX_OPS];
    uint8_t *thread_scratch;
    size_t thread_bytes;
    kernel_set ks;
    int64_t tile_bytes[PK_MATMUL_MAX_OPS];
    size_t row_bytes[PK_MATMUL_MAX_OPS], packed_tile[PK_MATMUL_MAX_OPS]; // per op, set up once
    int prepare_in_task;       // the threads quantize their share of the rows, then meet
    _Atomic int prepared;
    _Atomic int64_t next_tile;
    pk_matmul_fuse fuse;
    int64_t units;             // tiles, or pairs of tiles when paired
} matmul_job;

// How finely the tiles are dealt out: more runs balance better, each costs one atomic add.
#define TILE_RUNS_PER_THREAD 8

// Activation rows per call of the dot kernel.
#define QT_TOKENS 8

// Up to this many activation rows, the fused single-row kernel beats unpacking a tile.
#define GEMV_MAX_TOKENS 3

// From this many activation rows a gated pair runs as one job of paired tiles (fewer: the two
// products, then the activation over their rows).
#define GLU_PAIRED_MIN_TOKENS 33

// Where rows [r, r + rows) of op i are read from: the file's rows, and their packed tile when
// it is whole. The next tile is fetched ahead unless this one ends the thread's run (at row
// `end`) or the next is not whole (and so not packed like this one).
typedef struct {
    const uint8_t *w, *packed;
    int rows, last;
} tile_source;

static inline tile_source tile_source_at(const matmul_job *j, int i, int64_t r, int64_t end) {
    const pk_matmul_op *op = &j->ops[i];
    tile_source s;
    s.rows = end - r < QT_ROWS ? (int)(end - r) : QT_ROWS;
    s.w = (const uint8_t *)op->w + (size_t)r * j->row_bytes[i];
    s.packed = op->packed && s.rows == QT_ROWS ? (const uint8_t *)op->packed + (size_t)(r / QT_ROWS) * j->packed_tile[i] : NULL;
    s.last = r + QT_ROWS >= end || (s.packed && r + 2 * QT_ROWS > op->m);
    return s;
}

// Pair g of a gated pair (ops 0 and 1, 33 tokens or more, so never the decode kernel): tile g
// of both, the second's results into a block in L1, the first's gated with them in place.
static void paired_tiles(const matmul_job *j, int64_t g, int64_t end, uint8_t *buf) {
    const int64_t r = g * QT_ROWS;
    qt_tile tl[2];
    qt_epilogue e[2];
    int rows = 0;
    for (int i = 0; i < 2; i++) {
        const tile_source src = tile_source_at(j, i, r, end);
        tl[i] = qt_tile_at(buf + (size_t)i * align64(qt_tile_bytes(j->k)), j->k);
        j->tk[i].unpack(j->ty[i], src.w, j->row_bytes[i], src.packed, src.rows, src.last, j->k, tl[i]);
        e[i] = (qt_epilogue){j->ops[i].bias ? j->ops[i].bias + r : NULL, 0};
        rows = src.rows;
    }
    const pk_matmul_op *op = &j->ops[0];
    float block[QT_TOKENS * QT_ROWS];
    for (int64_t t = 0; t < j->n; t += QT_TOKENS) {
        const int count = j->n - t < QT_TOKENS ? (int)(j->n - t) : QT_TOKENS;
        float *y = op->y + t * op->ldy + r;
        j->ks.dot(&j->ty[0]->tile, tl[0], j->k, &j->act[j->ty[0]->tile.act], j->nb[0], t, count, y, op->ldy, rows, &e[0]);
        j->ks.dot(&j->ty[1]->tile, tl[1], j->k, &j->act[j->ty[1]->tile.act], j->nb[1], t, count, block, QT_ROWS, rows, &e[1]);
        ew_gated_rows(NULL, j->fuse.glu == PK_GLU_GELU_TANH, y, op->ldy, block, QT_ROWS, count, rows);
    }
}

// Tiles [g0, g1) of the job, in op order (pairs of tiles for a gated pair), each result through
// its op's epilogue as it is stored.
static void matmul_tiles(const matmul_job *j, int64_t g0, int64_t g1, uint8_t *buf) {
    if (j->fuse.glu) {
        const int64_t end = g1 * QT_ROWS < j->ops[0].m ? g1 * QT_ROWS : j->ops[0].m;
        for (int64_t g = g0; g < g1; g++) paired_tiles(j, g, end, buf);
        return;
    }
    for (int i = 0; i < j->count; i++) {
        const int64_t lo = j->first_tile[i] > g0 ? j->first_tile[i] : g0;
        const int64_t hi = j->first_tile[i + 1] < g1 ? j->first_tile[i + 1] : g1;
        if (lo >= hi) continue;
        const pk_matmul_op *op = &j->ops[i];
        const qt_type *ty = j->ty[i];
        const size_t row_bytes = j->row_bytes[i];
        const int64_t r0 = (lo - j->first_tile[i]) * QT_ROWS;
        const int64_t r1 = (hi - j->first_tile[i]) * QT_ROWS < op->m ? (hi - j->first_tile[i]) * QT_ROWS : op->m;
        if (!j->quantized[i]) {
            if (j->n < SGEMM_MIN_N) {
                j->ks.float_rows(op->type, op->w, row_bytes, r0, r1, j->k, j->x, j->n, op->y, op->ldy, (float *)buf);
                continue;
            }
            float *wf = (float *)buf;
            for (int64_t r = r0; r < r1; r += SGEMM_ROWS) {
                const int64_t rows = r1 - r < SGEMM_ROWS ? r1 - r : SGEMM_ROWS;
                pk_dequantize(op->type, (const uint8_t *)op->w + (size_t)r * row_bytes, wf, rows * j->k);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)j->n, (blasint)rows, (blasint)j->k, 1.0f,
                            j->x, (blasint)j->k, wf, (blasint)j->k, 0.0f, op->y + r, (blasint)op->ldy);
            }
            continue;
        }
        const qt_format *f = &ty->tile;
        const qt_act *a = &j->act[f->act];
        const qt_tile tl = qt_tile_at(buf, j->k);
        const int epilogue = op->bias || op->accumulate;
        for (int64_t r = r0; r < r1; r += QT_ROWS) {
            const tile_source src = tile_source_at(j, i, r, r1);
            const qt_epilogue e = {op->bias ? op->bias + r : NULL, op->accumulate};
            const qt_epilogue *ep = epilogue ? &e : NULL;
            // A few activation rows (decode; a token with jump-forward text after it) go through
            // the fused kernel one row at a time: no tile stored, and the block of weights stays
            // in L1 between rows. Writing a tile costs several fused passes.
            if (j->n <= GEMV_MAX_TOKENS && j->tk[i].gemv) {
                int64_t t = 0;
                while (t < j->n && j->tk[i].gemv(ty, src.w, row_bytes, src.packed, src.rows, src.last, j->k, a, j->nb[i], t,
                                                  op->y + t * op->ldy + r, ep))
                    t++;
                if (t == j->n) continue;
            }
            j->tk[i].unpack(ty, src.w, row_bytes, src.packed, src.rows, src.last, j->k, tl);
            for (int64_t t = 0; t < j->n; t += QT_TOKENS) {
                const int count = j->n - t < QT_TOKENS ? (int)(j->n - t) : QT_TOKENS;
                j->ks.dot(f, tl, j->k, a, j->nb[i], t, count, op->y + t * op->ldy + r, op->ldy, src.rows, ep);
            }
        }
    }
}

// A unit's cost in decode: the bytes it streams.
static int64_t tile_cost(const void *ctx, int64_t g) {
    const matmul_job *j = ctx;
    if (j->fuse.glu) return j->tile_bytes[0] + j->tile_bytes[1];
    int i = 0;
    while (g >= j->first_tile[i + 1]) i++;
    return j->tile_bytes[i];
}

// Quantizes activation rows [t0, t1) for every format the ops need, and their bias terms.
static void prepare_rows(const matmul_job *j, int64_t t0, int64_t t1) {
    if (j->fuse.norm_source)
        ew_rms_norm_rows(j->fuse.norm_source, j->fuse.norm_weight, (float *)j->x, t0, t1, j->k, j->fuse.norm_eps);
    for (int kind = 0; kind < ACT_KINDS; kind++)
        if (j->need[kind]) j->ks.quantize(j->x, t0, t1, j->k, kind, j->abuf[kind]);
    for (int i = 0; i < j->count; i++) {
        if (!j->quantized[i]) continue;
        const qt_format *f = &j->ty[i]->tile;
        const int32_t *sx = f->sub == 16 ? j->act[f->act].sx16 : j->act[f->act].sx32;
        const int64_t per = j->k / f->sub;
        for (int64_t u = t0 * per; u < t1 * per; u++) j->nbw[i][u] = -f->bias * sx[u];
    }
}

// Every thread's share of the rows is quantized before any tile reads them.
static void prepare_shared(matmul_job *j, int ith, int nth) {
    prepare_rows(j, j->n * ith / nth, j->n * (ith + 1) / nth);
    meet(&j->prepared, nth);
}

// Threads take runs of tiles from a shared counter until none are left: tiles of different
// formats and ops cost different amounts, so a fixed split would leave one thread waiting.
static void matmul_task(void *ctx, int ith, int nth) {
    matmul_job *j = ctx;
    if (j->prepare_in_task) prepare_shared(j, ith, nth);
    uint8_t *buf = j->thread_scratch + (size_t)ith * j->thread_bytes;
    const int64_t total = j->units;
    if (nth == 1) { matmul_tiles(j, 0, total, buf); return; }
    if (j->n == 1) {
        // Decode streams the weights once: contiguous shares of equal bytes keep each thread's
        // reads sequential (and its prefetches ahead of it).
        int64_t g0, g1;
        share_by_cost(total, tile_cost, j, ith, nth, &g0, &g1);
        matmul_tiles(j, g0, g1, buf);
        return;
    }
    int64_t run = total / ((int64_t)nth * TILE_RUNS_PER_THREAD);
    if (run < 1) run = 1;
    for (;;) {
        const int64_t g0 = atomic_fetch_add_explicit(&j->next_tile, run, memory_order_relaxed);
        if (g0 >= total) return;
        matmul_tiles(j, g0, g0 + run < total ? g0 + run : total, buf);
    }
}

int pk_matmul_fused(pk_pool *pool, const pk_matmul_op *ops, int count, int64_t k, const float *x, int64_t n,
                    const pk_matmul_fuse *fuse, void *scratch) {
    if (count < 1 || count > PK_MATMUL_MAX_OPS) return -1;
    matmul_job j;
    memset(&j, 0, sizeof j);
    j.count = count;
    j.k = k;
    j.n = n;
    j.x = x;
    if (fuse) j.fuse = *fuse;
    j.ks = *ISA_PICK(const kernel_set *, &scalar_set, &avx2_set, &avx512_set);
    if (j.fuse.glu && (count != 2 || ops[0].m != ops[1].m || j.fuse.glu < 0 || j.fuse.glu > PK_GLU_GELU_TANH)) return -1;
    for (int i = 0; i < count; i++) {
        const qt_type *ty = qt_type_of(ops[i].type);
        if (!ty || !(ty->tile.sub || ty->to_float) || k % ty->elements != 0) return -1;
        j.ops[i] = ops[i];
        j.ty[i] = ty;
        j.quantized[i] = ty->tile.sub != 0;
        if (j.quantized[i]) {
            if (k % 32 != 0) return -1;
            j.need[ty->tile.act] = 1;
            j.tk[i] = type_kernels(&j.ks, ops[i].type);
        } else if (j.fuse.glu || ops[i].bias || ops[i].accumulate) {
            return -1; // float weights go through BLAS, which takes no epilogue
        }
        j.first_tile[i + 1] = j.first_tile[i] + (ops[i].m + QT_ROWS - 1) / QT_ROWS;
        j.row_bytes[i] = qt_row_bytes(ty, k);
        j.packed_tile[i] = ops[i].packed && j.quantized[i] ? qt_packed_tile_bytes(ty, j.row_bytes[i]) : 0;
        j.tile_bytes[i] = QT_ROWS * (int64_t)j.row_bytes[i];
    }
    // A few tokens (decode, batched decode) pair badly: each unit's rows are too few to pay for
    // gating them apart, and two tiles crowd L1. Their products run apart and are gated after.
    const int glu_after = j.fuse.glu && n < GLU_PAIRED_MIN_TOKENS;
    if (glu_after) j.fuse.glu = PK_GLU_NONE;
    j.units = j.fuse.glu ? j.first_tile[1] : j.first_tile[count];
    uint8_t *s = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    for (int kind = 0; kind < ACT_KINDS; kind++) {
        const act_buf a = act_at(s, n, k);
        s += act_bytes(n, k);
        j.abuf[kind] = a;
        j.act[kind] = (qt_act){a.q, a.dx16, a.dx32, a.sx16, a.sx32, a.xs16, a.xs32};
    }
    for (int i = 0; i < count; i++, s += bias_bytes(n, k)) {
        j.nbw[i] = (int32_t *)s;
        j.nb[i] = j.nbw[i];
    }
    j.thread_scratch = s;
    j.thread_bytes = thread_bytes_for(k);
    // One row is quickest alone; more are shared, with the threads meeting inside the task.
    j.prepare_in_task = n > 1 && pk_pool_threads(pool) > 1;
    if (!j.prepare_in_task) prepare_rows(&j, 0, n);
    pk_pool_run(pool, matmul_task, &j);
    if (glu_after) ew_gated_rows(pool, fuse->glu == PK_GLU_GELU_TANH, ops[0].y, ops[0].ldy, ops[1].y, ops[1].ldy, n, ops[0].m);
    return 0;
}

int pk_matmul_many(pk_pool *pool, const pk_matmul_op *ops, int count, int64_t k,
                   const float *x, int64_t n, void *scratch) {
    return pk_matmul_fused(pool, ops, count, k, x, n, NULL, scratch);
}

// ---- packed weights ------------------------------------------------------------------------

// Over-read of the last tile's windows (a window may span up to 4 dwords past the row's end,
// and a mid-dword window one more): kept readable and zero.
#define PACK_SLACK 1024

// The type's row when it has a packed form (every type with tiles) and the shape fits.
static const qt_type *packable(int type, int64_t m, int64_t k, size_t *row_bytes) {
    const qt_type *ty = qt_type_of(type);
    if (!ty || !ty->tile.sub || k % ty->elements != 0 || m < QT_ROWS) return NULL;
    *row_bytes = qt_row_bytes(ty, k);
    return ty;
}

size_t pk_pack_bytes(int type, int64_t m, int64_t k) {
    size_t row_bytes;
    const qt_type *ty = packable(type, m, k, &row_bytes);
    return ty ? (size_t)(m / QT_ROWS) * qt_packed_tile_bytes(ty, row_bytes) + PACK_SLACK : 0;
}

// Copies one row between the file's layout and its packed tile (qtile.h's layouts), in either
// direction: a packed tile's bytes for a row are exactly the row's bytes, moved in runs of at
// most four (one lane of a vector).
static void packed_row_copy(const qt_type *ty, size_t row_bytes, uint8_t *tile, int r, uint8_t *row, int to_tile) {
#define MOVE(t, f, n) (to_tile ? memcpy(tile + (t), row + (f), (n)) : memcpy(row + (f), tile + (t), (n)))
    const size_t lane = 4 * (size_t)r;
    const qt_legacy l = ty->fields;
    if (!l.qs) {
        for (size_t at = 0; at < row_bytes; at += 4) MOVE(at * QT_ROWS + lane, at, row_bytes - at < 4 ? row_bytes - at : 4);
        return;
    }
    const size_t bb = ty->bytes, blocks = row_bytes / bb;
    size_t base = 0;
    for (size_t g = 0; g < blocks; g += (size_t)l.group) {
        const int n = blocks - g < (size_t)l.group ? (int)(blocks - g) : l.group;
        for (int i = 0; i < n; i++) {
            const size_t at = (g + (size_t)i) * bb;
            MOVE(base + qt_legacy_head_at(&l, i) + (size_t)r * (size_t)l.head, at, (size_t)l.head);
            if (l.qh) MOVE(base + qt_legacy_qh_at(i) + lane, at + (size_t)l.head, 4);
            for (int v = 0; v < l.qs / 4; v++)
                MOVE(base + qt_legacy_qs_at(&l, n, i) + 64 * (size_t)v + lane, at + (size_t)(l.head + l.qh + 4 * v), 4);
        }
        base += qt_legacy_group_bytes(&l, n);
    }
#undef MOVE
}

int pk_pack(int type, const void *w, int64_t m, int64_t k, void *dst) {
    size_t row_bytes;
    const qt_type *ty = packable(type, m, k, &row_bytes);
    if (!ty) return -1;
    const size_t tile_bytes = qt_packed_tile_bytes(ty, row_bytes);
    uint8_t *out = dst;
    memset(out, 0, (size_t)(m / QT_ROWS) * tile_bytes + PACK_SLACK); // padding reads as zero
    for (int64_t g = 0; g < m / QT_ROWS; g++, out += tile_bytes)
        for (int r = 0; r < QT_ROWS; r++)
            packed_row_copy(ty, row_bytes, out, r, (uint8_t *)w + (size_t)(g * QT_ROWS + r) * row_bytes, 1);
    return 0;
}

int pk_packed_row(int type, const void *packed, int64_t m, int64_t k, int64_t row, void *dst) {
    size_t row_bytes;
    const qt_type *ty = packable(type, m, k, &row_bytes);
    if (!ty || row < 0 || row >= m / QT_ROWS * QT_ROWS) return -1;
    uint8_t *tile = (uint8_t *)packed + (size_t)(row / QT_ROWS) * qt_packed_tile_bytes(ty, row_bytes);
    packed_row_copy(ty, row_bytes, tile, (int)(row % QT_ROWS), dst, 0);
    return 0;
}

int pk_matmul(pk_pool *pool, int type, const void *w, int64_t m, int64_t k,
              const float *x, int64_t n, float *y, int64_t ldy, void *scratch) {
    const pk_matmul_op op = {type, w, m, y, ldy, NULL, NULL, 0};
    return pk_matmul_many(pool, &op, 1, k, x, n, scratch);
}
