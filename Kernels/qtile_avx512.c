// AVX-512 (with VNNI) tile kernels: the same results as qtile.h's reference, bit for bit.
#if defined(__x86_64__)
#include "qtile_isa.h"

#include <immintrin.h>

#pragma clang fp contract(off)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), apply_to = function)

#define INL static inline __attribute__((always_inline))

// ---- loading 16 rows -----------------------------------------------------------------------

// Sixteen rows `stride` bytes apart. Loads address them from four bases (rows 0, 4, 8, 12) plus
// 0..3 strides, which x86 addressing does for free, so no table of pointers is kept.
typedef struct {
    const uint8_t *base;
    size_t stride;
    const uint8_t *prefetch; // the next tile's rows, or NULL
} rows16;

// out[d] lane r = the d-th little-endian dword of the 16 bytes at row r + at; with `mask`,
// only the masked bytes are read (the rest are zero).
INL void tr16x4_masked(const rows16 *rw, size_t at, int masked, __mmask16 m, __m512i out[4]) {
    const size_t s = rw->stride;
    const uint8_t *p = rw->base + at;
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

INL void tr16x4(const rows16 *rw, size_t at, __m512i out[4]) { tr16x4_masked(rw, at, 0, 0, out); }

// A window of the 16 rows' bytes [at, at + 16*nchunks), transposed: T[i] lane r = the dword at
// byte 4i of the window in row r. Bytes at or past `end` (the row's end) read as zero, so the
// last block of a tensor never reads past it.
INL void window(const rows16 *rw, size_t at, int nchunks, size_t end, __m512i *T) {
    for (int c = 0; c < nchunks; c++) {
        const size_t o = at + 16 * (size_t)c;
        // Streams the next tile in while this one is being worked on: one line per row per 64 bytes.
        if (rw->prefetch && (o & 63) == 0)
            for (int r = 0; r < QT_ROWS; r++) _mm_prefetch((const char *)(rw->prefetch + r * rw->stride + o), _MM_HINT_T0);
        if (o + 16 <= end) tr16x4(rw, o, T + 4 * c);
        else tr16x4_masked(rw, o, 1, (__mmask16)((1u << (end - o)) - 1u), T + 4 * c);
    }
}

// Lane r = the dword at byte o of the window in row r (any alignment).
INL __m512i dword_at(const __m512i *T, size_t o) {
    const size_t q = o / 4, s = 8 * (o % 4);
    if (s == 0) return T[q];
    return _mm512_or_si512(_mm512_srl_epi32(T[q], _mm_cvtsi32_si128((int)s)), _mm512_sll_epi32(T[q + 1], _mm_cvtsi32_si128(32 - (int)s)));
}

INL __m512 f16_low(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }
INL __m512 f16_high(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16))); }
INL __m512 neg(__m512 v) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u))); }

#define MASK4 _mm512_set1_epi32(0x0f0f0f0f)
#define MASK2 _mm512_set1_epi32(0x03030303)
#define MASK1 _mm512_set1_epi32(0x01010101)

// Bit b of a 4-bit index, moved to bit 4 of byte b (the fifth bit of four codes).
INL __m512i spread4(__m512i bits) {
    const __m512i table = _mm512_setr_epi32(
        0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010, 0x00101000, 0x00101010,
        0x10000000, 0x10000010, 0x10001000, 0x10001010, 0x10100000, 0x10100010, 0x10101000, 0x10101010);
    return _mm512_permutexvar_epi32(bits, table); // uses the low four bits of each lane
}

// One sub-block of one activation row against 16 rows: the step qtile.h defines, shared by the
// fused decode kernel and the tile kernel.
INL void step(const int sub, const int offsets, const __m512i *w, __m512 sc, __m512 of, const int8_t *xj,
              int32_t nb, float dx, float xs, __m512 *acc, __m512 *off) {
    // Two chains of dot products (integer sums are exact in any order) halve the latency.
    __m512i s = _mm512_set1_epi32(nb), s1 = _mm512_setzero_si512();
    for (int v = 0; v < sub / 4; v += 2) {
        int32_t q0, q1;
        memcpy(&q0, xj + 4 * v, 4);
        memcpy(&q1, xj + 4 * v + 4, 4);
        s = _mm512_dpbusd_epi32(s, w[v], _mm512_set1_epi32(q0));
        s1 = _mm512_dpbusd_epi32(s1, w[v + 1], _mm512_set1_epi32(q1));
    }
    s = _mm512_add_epi32(s, s1);
    *acc = _mm512_fmadd_ps(_mm512_mul_ps(sc, _mm512_set1_ps(dx)), _mm512_cvtepi32_ps(s), *acc);
    if (offsets) *off = _mm512_fmadd_ps(of, _mm512_set1_ps(xs), *off);
}

// Where unpacked sub-blocks go: into a tile (for many activation rows), or straight into the
// dot product with one activation row (decode), in sub-block order either way.
typedef struct {
    qt_tile t;
    const int8_t *x;
    const float *dx, *xs;
    const int32_t *nb;
    __m512 acc, off;
} sink;

INL void emit(const int fused, sink *s, const int sub, const int offsets, int64_t j, const __m512i *w, __m512 sc, __m512 of) {
    if (!fused) {
        uint8_t *c = s->t.codes + j * sub * QT_ROWS;
        for (int v = 0; v < sub / 4; v++) _mm512_store_si512((void *)(c + 64 * v), w[v]);
        _mm512_store_ps(s->t.scale + j * QT_ROWS, sc);
        if (offsets) _mm512_store_ps(s->t.offset + j * QT_ROWS, of);
        return;
    }
    step(sub, offsets, w, sc, of, s->x + j * sub, s->nb[j], s->dx[j], offsets ? s->xs[j] : 0.0f, &s->acc, &s->off);
}

// ---- legacy 32-weight blocks ---------------------------------------------------------------

// Q4_0 (bias 8), Q4_1 (d, m), Q5_0 (qh, bias 16), Q5_1 (d, m, qh), Q8_0 (signed, bias 128).
// Blocks are read in groups whose bytes fill whole 16-byte chunks.
INL void unpack_legacy(const int fused, const int type, const rows16 *rw, int64_t nblocks, sink *s) {
    const size_t bb = type == PK_Q4_0 ? 18 : type == PK_Q4_1 ? 20 : type == PK_Q5_0 ? 22 : type == PK_Q5_1 ? 24 : 34;
    const int group = type == PK_Q4_1 ? 4 : type == PK_Q5_1 ? 2 : 8;
    const int offsets = type == PK_Q4_1 || type == PK_Q5_1;
    const size_t row_bytes = (size_t)nblocks * bb;
    __m512i T[17 * 4 + 1];
    for (int64_t g = 0; g < nblocks; g += group) {
        const size_t at = (size_t)g * bb;
        const size_t len = (size_t)(nblocks - g < group ? nblocks - g : group) * bb;
        window(rw, at, (int)((len + 15) / 16), row_bytes, T);
        for (int64_t b = g; b < g + group && b < nblocks; b++) {
            const size_t o = (size_t)(b - g) * bb;
            const __m512i head = dword_at(T, o);
            const __m512 sc = f16_low(head);
            const __m512 of = offsets ? f16_high(head) : _mm512_setzero_ps();
            __m512i w[8];
            if (type == PK_Q8_0) {
                const __m512i flip = _mm512_set1_epi32((int)0x80808080u);
                for (int v = 0; v < 8; v++) w[v] = _mm512_xor_si512(dword_at(T, o + 2 + 4 * v), flip);
            } else {
                const size_t qs = o + (type == PK_Q4_0 ? 2 : type == PK_Q4_1 ? 4 : type == PK_Q5_0 ? 6 : 8);
                for (int v = 0; v < 4; v++) {
                    const __m512i e = dword_at(T, qs + 4 * v);
                    w[v] = _mm512_and_si512(e, MASK4);
                    w[v + 4] = _mm512_and_si512(_mm512_srli_epi32(e, 4), MASK4);
                }
                if (type == PK_Q5_0 || type == PK_Q5_1) {
                    const __m512i qh = dword_at(T, o + (type == PK_Q5_0 ? 2 : 4));
                    for (int v = 0; v < 4; v++) {
                        w[v] = _mm512_or_si512(w[v], spread4(_mm512_srli_epi32(qh, 4 * v)));
                        w[v + 4] = _mm512_or_si512(w[v + 4], spread4(_mm512_srli_epi32(qh, 16 + 4 * v)));
                    }
                }
            }
            emit(fused, s, 32, offsets, b, w, sc, of);
        }
    }
}

// ---- k-quants ------------------------------------------------------------------------------

INL __m512i byte_of(__m512i v, int i) { return _mm512_and_si512(_mm512_srli_epi32(v, 8 * i), _mm512_set1_epi32(0xff)); }

// Q4_K and Q5_K: eight sub-blocks of 32 with six-bit scales and mins.
INL void unpack_q45_K(const int fused, const int five, const rows16 *rw, int64_t nblocks, sink *s) {
    const size_t bb = five ? 176 : 144, row_bytes = (size_t)nblocks * bb;
    __m512i T[11 * 4];
    for (int64_t b = 0; b < nblocks; b++) {
        window(rw, (size_t)b * bb, (int)(bb / 16), row_bytes, T);
        const __m512 d = f16_low(T[0]), dmin = f16_high(T[0]);
        const __m512i s0 = T[1], s1 = T[2], s2 = T[3];
        __m512 sc[8], of[8];
        for (int j = 0; j < 8; j++) {
            __m512i scale, min;
            if (j < 4) {
                scale = _mm512_and_si512(byte_of(s0, j), _mm512_set1_epi32(63));
                min = _mm512_and_si512(byte_of(s1, j), _mm512_set1_epi32(63));
            } else {
                const int i = j - 4;
                scale = _mm512_or_si512(_mm512_and_si512(byte_of(s2, i), _mm512_set1_epi32(15)),
                                        _mm512_slli_epi32(_mm512_srli_epi32(byte_of(s0, i), 6), 4));
                min = _mm512_or_si512(_mm512_srli_epi32(byte_of(s2, i), 4),
                                      _mm512_slli_epi32(_mm512_srli_epi32(byte_of(s1, i), 6), 4));
            }
            sc[j] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(scale));
            of[j] = neg(_mm512_mul_ps(dmin, _mm512_cvtepi32_ps(min)));
        }
        const __m512i *qh = T + 4;             // Q5_K: bytes 16..47
        const __m512i *qs = T + (five ? 12 : 4); // bytes 48.. or 16..
        for (int p = 0; p < 4; p++) {
            __m512i lo[8], hi[8];
            for (int v = 0; v < 8; v++) {
                const __m512i e = qs[8 * p + v];
                lo[v] = _mm512_and_si512(e, MASK4);
                hi[v] = _mm512_and_si512(_mm512_srli_epi32(e, 4), MASK4);
                if (five) {
                    lo[v] = _mm512_or_si512(lo[v], _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[v], 2 * p), MASK1), 4));
                    hi[v] = _mm512_or_si512(hi[v], _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[v], 2 * p + 1), MASK1), 4));
                }
            }
            emit(fused, s, 32, 1, b * 8 + 2 * p, lo, sc[2 * p], of[2 * p]);
            emit(fused, s, 32, 1, b * 8 + 2 * p + 1, hi, sc[2 * p + 1], of[2 * p + 1]);
        }
    }
}

// Q6_K: sixteen sub-blocks of 16, six-bit codes (bias 32), signed eight-bit scales.
INL void unpack_q6_K(const int fused, const rows16 *rw, int64_t nblocks, sink *s) {
    const size_t row_bytes = (size_t)nblocks * 210;
    __m512i T[14 * 4];
    for (int64_t b = 0; b < nblocks; b++) {
        window(rw, (size_t)b * 210, 14, row_bytes, T);
        const __m512 d = f16_low(T[52]);       // bytes 208..209
        __m512 sc[16];
        for (int j = 0; j < 16; j++) {
            const __m512i v = _mm512_srai_epi32(_mm512_slli_epi32(T[48 + j / 4], 24 - 8 * (j % 4)), 24);
            sc[j] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(v));
        }
        for (int half = 0; half < 2; half++) {
            const __m512i *l0 = T + 16 * half, *l1 = T + 16 * half + 8, *h = T + 32 + 8 * half;
            for (int rr = 0; rr < 4; rr++) {
                const __m512i *lo = rr % 2 ? l1 : l0;
                const int nib = 4 * (rr / 2);
                __m512i w[8];
                for (int v = 0; v < 8; v++) {
                    const __m512i low = _mm512_and_si512(_mm512_srli_epi32(lo[v], nib), MASK4);
                    const __m512i high = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h[v], 2 * rr), MASK2), 4);
                    w[v] = _mm512_or_si512(low, high);
                }
                const int64_t j = b * 16 + 2 * (4 * half + rr);
                emit(fused, s, 16, 0, j, w, sc[j - b * 16], _mm512_setzero_ps());
                emit(fused, s, 16, 0, j + 1, w + 4, sc[j + 1 - b * 16], _mm512_setzero_ps());
            }
        }
    }
}

// Q2_K: sixteen sub-blocks of 16, two-bit codes, four-bit scales and mins.
INL void unpack_q2_K(const int fused, const rows16 *rw, int64_t nblocks, sink *s) {
    const size_t row_bytes = (size_t)nblocks * 84;
    __m512i T[6 * 4];
    for (int64_t b = 0; b < nblocks; b++) {
        window(rw, (size_t)b * 84, 6, row_bytes, T);
        const __m512i head = T[20];            // bytes 80..83
        const __m512 d = f16_low(head), dmin = f16_high(head);
        for (int half = 0; half < 2; half++) {
            const __m512i *q = T + 4 + 8 * half;
            for (int j = 0; j < 8; j++) {
                const int sj = 8 * half + j;
                const __m512i v = byte_of(T[sj / 4], sj % 4);
                const __m512 sc = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(15))));
                const __m512 of = neg(_mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4))));
                const int shift = 2 * (j / 2);
                __m512i w[4];
                for (int u = 0; u < 4; u++) w[u] = _mm512_and_si512(_mm512_srli_epi32(q[(j % 2) * 4 + u], shift), MASK2);
                emit(fused, s, 16, 1, b * 16 + sj, w, sc, of);
            }
        }
    }
}

// Q3_K: sixteen sub-blocks of 16, two low bits from qs and an inverted high bit from hmask
// (set: +0, clear: -4, so with bias 4 the code is low + 4 * bit), six-bit scales minus 32.
INL void unpack_q3_K(const int fused, const rows16 *rw, int64_t nblocks, sink *s) {
    const size_t row_bytes = (size_t)nblocks * 110;
    __m512i T[7 * 4];
    for (int64_t b = 0; b < nblocks; b++) {
        window(rw, (size_t)b * 110, 7, row_bytes, T);
        const __m512 d = f16_low(T[27]);       // bytes 108..109
        for (int k = 0; k < 16; k++) {
            const __m512i lo = k < 8 ? _mm512_and_si512(byte_of(T[24 + k / 4], k % 4), _mm512_set1_epi32(15))
                                     : _mm512_srli_epi32(byte_of(T[24 + (k - 8) / 4], (k - 8) % 4), 4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(byte_of(T[26], k % 4), 2 * (k / 4)), _mm512_set1_epi32(3));
            const __m512i v = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
            const __m512 sc = _mm512_mul_ps(d, _mm512_cvtepi32_ps(v));
            const int half = k / 8, shift = 2 * ((k % 8) / 2);
            __m512i w[4];
            for (int v4 = 0; v4 < 4; v4++) {
                const __m512i low = _mm512_and_si512(_mm512_srli_epi32(T[8 + 8 * half + 4 * (k % 2) + v4], shift), MASK2);
                const __m512i bit = _mm512_and_si512(_mm512_srli_epi32(T[4 * (k % 2) + v4], k / 2), MASK1);
                w[v4] = _mm512_or_si512(low, _mm512_slli_epi32(bit, 2));
            }
            emit(fused, s, 16, 0, b * 16 + k, w, sc, _mm512_setzero_ps());
        }
    }
}

INL int unpack_any(const int fused, int type, const rows16 *rw, int64_t k, sink *s) {
    switch (type) {
    case PK_Q4_0: unpack_legacy(fused, PK_Q4_0, rw, k / 32, s); return 1;
    case PK_Q4_1: unpack_legacy(fused, PK_Q4_1, rw, k / 32, s); return 1;
    case PK_Q5_0: unpack_legacy(fused, PK_Q5_0, rw, k / 32, s); return 1;
    case PK_Q5_1: unpack_legacy(fused, PK_Q5_1, rw, k / 32, s); return 1;
    case PK_Q8_0: unpack_legacy(fused, PK_Q8_0, rw, k / 32, s); return 1;
    case PK_Q4_K: unpack_q45_K(fused, 0, rw, k / 256, s); return 1;
    case PK_Q5_K: unpack_q45_K(fused, 1, rw, k / 256, s); return 1;
    case PK_Q6_K: unpack_q6_K(fused, rw, k / 256, s); return 1;
    case PK_Q2_K: unpack_q2_K(fused, rw, k / 256, s); return 1;
    case PK_Q3_K: unpack_q3_K(fused, rw, k / 256, s); return 1;
    default: return 0;
    }
}

// Prefetching past a tensor's end would be harmless (prefetches never fault) but wasted.
INL rows16 rows_make(const uint8_t *w, size_t row_bytes, int last) {
    return (rows16){w, row_bytes, last ? NULL : w + QT_ROWS * row_bytes};
}

void qt_unpack_avx512(int type, const qt_format *f, const uint8_t *w, size_t row_bytes, int rows, int64_t k, qt_tile t) {
    if (rows < QT_ROWS) { qt_unpack_ref(type, f, w, row_bytes, rows, k, t); return; }
    const rows16 rw = rows_make(w, row_bytes, 1);
    sink s = {.t = t};
    if (!unpack_any(0, type, &rw, k, &s)) qt_unpack_ref(type, f, w, row_bytes, rows, k, t);
}

int qt_gemv_avx512(int type, const qt_format *f, const uint8_t *w, size_t row_bytes, int rows, int last, int64_t k,
                   const qt_act *a, const int32_t *nb, int64_t t, float *y) {
    if (rows < QT_ROWS) return 0;
    const rows16 rw = rows_make(w, row_bytes, last);
    const int64_t nsub = k / f->sub;
    sink s = {.x = a->q + t * k, .dx = (f->sub == 16 ? a->dx16 : a->dx32) + t * nsub,
              .xs = (f->sub == 16 ? a->xs16 : a->xs32) + t * nsub, .nb = nb + t * nsub, .acc = _mm512_setzero_ps(), .off = _mm512_setzero_ps()};
    if (!unpack_any(1, type, &rw, k, &s)) return 0;
    _mm512_mask_storeu_ps(y, (__mmask16)((1u << rows) - 1u), f->offsets ? _mm512_add_ps(s.acc, s.off) : s.acc);
    return 1;
}

// ---- the dot kernel ------------------------------------------------------------------------

INL void dot_n(const int count, const int sub, const int offsets, qt_tile tl, int64_t k, const qt_act *a,
               const int32_t *nb, int64_t t0, float *y, int64_t ldy, int rows) {
    const int64_t nsub = k / sub;
    const float *dxs = sub == 16 ? a->dx16 : a->dx32;
    const float *xss = sub == 16 ? a->xs16 : a->xs32;
    __m512 acc[8], off[8];
    for (int i = 0; i < count; i++) acc[i] = off[i] = _mm512_setzero_ps();
    for (int64_t j = 0; j < nsub; j++) {
        const uint8_t *c = tl.codes + j * sub * QT_ROWS;
        __m512i w[8];
        for (int v = 0; v < sub / 4; v++) w[v] = _mm512_load_si512((const void *)(c + 64 * v));
        const __m512 sc = _mm512_load_ps(tl.scale + j * QT_ROWS);
        const __m512 of = offsets ? _mm512_load_ps(tl.offset + j * QT_ROWS) : _mm512_setzero_ps();
        for (int i = 0; i < count; i++) {
            const int64_t t = t0 + i, u = t * nsub + j;
            step(sub, offsets, w, sc, of, a->q + t * k + j * sub, nb[u], dxs[u], offsets ? xss[u] : 0.0f, &acc[i], &off[i]);
        }
    }
    const __mmask16 m = (__mmask16)((1u << rows) - 1u);
    for (int i = 0; i < count; i++) _mm512_mask_storeu_ps(y + i * ldy, m, offsets ? _mm512_add_ps(acc[i], off[i]) : acc[i]);
}

#define DOT_CASES(sub, off)                                                                          \
    switch (count) {                                                                                 \
    case 1: dot_n(1, sub, off, tl, k, a, nb, t0, y, ldy, rows); return;                               \
    case 2: dot_n(2, sub, off, tl, k, a, nb, t0, y, ldy, rows); return;                               \
    case 3: dot_n(3, sub, off, tl, k, a, nb, t0, y, ldy, rows); return;                               \
    case 4: dot_n(4, sub, off, tl, k, a, nb, t0, y, ldy, rows); return;                               \
    case 5: dot_n(5, sub, off, tl, k, a, nb, t0, y, ldy, rows); return;                               \
    case 6: dot_n(6, sub, off, tl, k, a, nb, t0, y, ldy, rows); return;                               \
    case 7: dot_n(7, sub, off, tl, k, a, nb, t0, y, ldy, rows); return;                               \
    default: dot_n(8, sub, off, tl, k, a, nb, t0, y, ldy, rows); return;                              \
    }

static void dot_16_0(qt_tile tl, int64_t k, const qt_act *a, const int32_t *nb, int64_t t0, int count, float *y, int64_t ldy, int rows) { DOT_CASES(16, 0) }
static void dot_16_1(qt_tile tl, int64_t k, const qt_act *a, const int32_t *nb, int64_t t0, int count, float *y, int64_t ldy, int rows) { DOT_CASES(16, 1) }
static void dot_32_0(qt_tile tl, int64_t k, const qt_act *a, const int32_t *nb, int64_t t0, int count, float *y, int64_t ldy, int rows) { DOT_CASES(32, 0) }
static void dot_32_1(qt_tile tl, int64_t k, const qt_act *a, const int32_t *nb, int64_t t0, int count, float *y, int64_t ldy, int rows) { DOT_CASES(32, 1) }

void qt_dot_avx512(const qt_format *f, qt_tile tl, int64_t k, const qt_act *a, const int32_t *nb,
                   int64_t t0, int count, float *y, int64_t ldy, int rows) {
    if (f->sub == 16) (f->offsets ? dot_16_1 : dot_16_0)(tl, k, a, nb, t0, count, y, ldy, rows);
    else (f->offsets ? dot_32_1 : dot_32_0)(tl, k, a, nb, t0, count, y, ldy, rows);
}

#pragma clang attribute pop
#endif
