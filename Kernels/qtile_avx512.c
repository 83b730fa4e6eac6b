// AVX-512 (with VNNI) tile kernels: the same results as qtile.h's reference, bit for bit.
#if defined(__x86_64__)
#include "qtile_isa.h"

#include <immintrin.h>

#pragma clang fp contract(off)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), apply_to = function)

#define INL static inline __attribute__((always_inline))

// ---- loading 16 rows -----------------------------------------------------------------------

// Sixteen row pointers: missing rows repeat the last one, as the reference does.
typedef struct {
    const uint8_t *p[QT_ROWS];
    __m512i offsets; // byte offset of each row from p[0], for gathers
} rows16;

INL rows16 rows_make(const uint8_t *w, size_t row_bytes, int rows) {
    rows16 r;
    int32_t off[QT_ROWS];
    for (int i = 0; i < QT_ROWS; i++) {
        const int src = i < rows ? i : rows - 1;
        r.p[i] = w + (size_t)src * row_bytes;
        off[i] = (int32_t)((size_t)src * row_bytes);
    }
    r.offsets = _mm512_loadu_si512(off);
    return r;
}

// out[d] lane r = the d-th little-endian dword of the 16 bytes at rows.p[r] + at.
INL void tr16x4(const rows16 *rw, size_t at, __m512i out[4]) {
    __m512i z[4];
    for (int i = 0; i < 4; i++) {
        // z[i], 128-bit lane l: row 4l + i, so that the unpacks below leave lane r = row r.
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(rw->p[i] + at)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rw->p[4 + i] + at)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rw->p[8 + i] + at)), 2);
        z[i] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rw->p[12 + i] + at)), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm512_unpacklo_epi64(t0, t2);
    out[1] = _mm512_unpackhi_epi64(t0, t2);
    out[2] = _mm512_unpacklo_epi64(t1, t3);
    out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Lane r = the (unaligned) dword at rows.p[r] + at.
INL __m512i gather32(const rows16 *rw, size_t at) {
    return _mm512_i32gather_epi32(rw->offsets, (const void *)(rw->p[0] + at), 1);
}

INL __m512 f16_low(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }
INL __m512 f16_high(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16))); }
INL __m512 neg(__m512 v) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u))); }

#define MASK4 _mm512_set1_epi32(0x0f0f0f0f)
#define MASK2 _mm512_set1_epi32(0x03030303)
#define MASK1 _mm512_set1_epi32(0x01010101)

INL void put(uint8_t *codes, int v, __m512i x) { _mm512_store_si512((void *)(codes + 64 * v), x); }

// Bit b of a 4-bit index, moved to bit 4 of byte b (the fifth bit of four codes).
INL __m512i spread4(__m512i bits) {
    const __m512i table = _mm512_setr_epi32(
        0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010, 0x00101000, 0x00101010,
        0x10000000, 0x10000010, 0x10001000, 0x10001010, 0x10100000, 0x10100010, 0x10101000, 0x10101010);
    return _mm512_permutexvar_epi32(bits, table); // uses the low four bits of each lane
}

// ---- legacy 32-weight blocks ---------------------------------------------------------------

// Q4_0 (bias 8), Q4_1 (d, m), Q5_0 (qh, bias 16), Q8_0 (signed, bias 128).
INL void unpack_legacy(int type, const rows16 *rw, int64_t nblocks, qt_tile t) {
    const size_t bb = pk_block_bytes(type);
    for (int64_t b = 0; b < nblocks; b++) {
        const size_t at = (size_t)b * bb;
        uint8_t *codes = t.codes + b * 32 * QT_ROWS;
        const __m512i head = gather32(rw, at);
        __m512i e[4];
        switch (type) {
        case PK_Q4_0:
        case PK_Q4_1:
            tr16x4(rw, at + (type == PK_Q4_0 ? 2 : 4), e);
            for (int v = 0; v < 4; v++) {
                put(codes, v, _mm512_and_si512(e[v], MASK4));
                put(codes, v + 4, _mm512_and_si512(_mm512_srli_epi32(e[v], 4), MASK4));
            }
            _mm512_store_ps(t.scale + b * QT_ROWS, f16_low(head));
            if (type == PK_Q4_1) _mm512_store_ps(t.offset + b * QT_ROWS, f16_high(head));
            break;
        case PK_Q5_0: {
            const __m512i qh = gather32(rw, at + 2);
            tr16x4(rw, at + 6, e);
            for (int v = 0; v < 4; v++) {
                put(codes, v, _mm512_or_si512(_mm512_and_si512(e[v], MASK4), spread4(_mm512_srli_epi32(qh, 4 * v))));
                put(codes, v + 4, _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(e[v], 4), MASK4),
                                                  spread4(_mm512_srli_epi32(qh, 16 + 4 * v))));
            }
            _mm512_store_ps(t.scale + b * QT_ROWS, f16_low(head));
            break;
        }
        default: { // Q8_0
            const __m512i flip = _mm512_set1_epi32((int)0x80808080u);
            tr16x4(rw, at + 2, e);
            for (int v = 0; v < 4; v++) put(codes, v, _mm512_xor_si512(e[v], flip));
            tr16x4(rw, at + 18, e);
            for (int v = 0; v < 4; v++) put(codes, v + 4, _mm512_xor_si512(e[v], flip));
            _mm512_store_ps(t.scale + b * QT_ROWS, f16_low(head));
            break;
        }
        }
    }
}

// ---- k-quants ------------------------------------------------------------------------------

INL __m512i byte_of(__m512i v, int i) { return _mm512_and_si512(_mm512_srli_epi32(v, 8 * i), _mm512_set1_epi32(0xff)); }

// Q4_K and Q5_K: eight sub-blocks of 32 with six-bit scales and mins.
INL void unpack_q45_K(int five, const rows16 *rw, int64_t nblocks, qt_tile t) {
    const size_t bb = five ? 176 : 144;
    for (int64_t b = 0; b < nblocks; b++) {
        const size_t at = (size_t)b * bb;
        const __m512i head = gather32(rw, at);
        const __m512 d = f16_low(head), dmin = f16_high(head);
        const __m512i s0 = gather32(rw, at + 4), s1 = gather32(rw, at + 8), s2 = gather32(rw, at + 12);
        for (int j = 0; j < 8; j++) {
            __m512i sc, mn;
            if (j < 4) {
                sc = _mm512_and_si512(byte_of(s0, j), _mm512_set1_epi32(63));
                mn = _mm512_and_si512(byte_of(s1, j), _mm512_set1_epi32(63));
            } else {
                const int i = j - 4;
                sc = _mm512_or_si512(_mm512_and_si512(byte_of(s2, i), _mm512_set1_epi32(15)),
                                     _mm512_slli_epi32(_mm512_srli_epi32(byte_of(s0, i), 6), 4));
                mn = _mm512_or_si512(_mm512_srli_epi32(byte_of(s2, i), 4),
                                     _mm512_slli_epi32(_mm512_srli_epi32(byte_of(s1, i), 6), 4));
            }
            const int64_t sj = b * 8 + j;
            _mm512_store_ps(t.scale + sj * QT_ROWS, _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc)));
            _mm512_store_ps(t.offset + sj * QT_ROWS, neg(_mm512_mul_ps(dmin, _mm512_cvtepi32_ps(mn))));
        }
        __m512i qh[8];
        if (five) { tr16x4(rw, at + 16, qh); tr16x4(rw, at + 32, qh + 4); }
        const size_t qs = at + (five ? 48 : 16);
        for (int p = 0; p < 4; p++) {
            __m512i e[8];
            tr16x4(rw, qs + 32 * p, e);
            tr16x4(rw, qs + 32 * p + 16, e + 4);
            uint8_t *lo = t.codes + (b * 8 + 2 * p) * 32 * QT_ROWS, *hi = lo + 32 * QT_ROWS;
            for (int v = 0; v < 8; v++) {
                __m512i l = _mm512_and_si512(e[v], MASK4), h = _mm512_and_si512(_mm512_srli_epi32(e[v], 4), MASK4);
                if (five) {
                    l = _mm512_or_si512(l, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[v], 2 * p), MASK1), 4));
                    h = _mm512_or_si512(h, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[v], 2 * p + 1), MASK1), 4));
                }
                put(lo, v, l);
                put(hi, v, h);
            }
        }
    }
}

// Q6_K: sixteen sub-blocks of 16, six-bit codes (bias 32), signed eight-bit scales.
INL void unpack_q6_K(const rows16 *rw, int64_t nblocks, qt_tile t) {
    for (int64_t b = 0; b < nblocks; b++) {
        const size_t at = (size_t)b * 210;
        const __m512 d = f16_high(gather32(rw, at + 206));
        __m512i sc[4];
        tr16x4(rw, at + 192, sc);
        for (int s = 0; s < 16; s++) {
            const __m512i v = _mm512_srai_epi32(_mm512_slli_epi32(sc[s / 4], 24 - 8 * (s % 4)), 24);
            _mm512_store_ps(t.scale + (b * 16 + s) * QT_ROWS, _mm512_mul_ps(d, _mm512_cvtepi32_ps(v)));
        }
        for (int half = 0; half < 2; half++) {
            __m512i l0[8], l1[8], h[8];
            tr16x4(rw, at + half * 64, l0);
            tr16x4(rw, at + half * 64 + 16, l0 + 4);
            tr16x4(rw, at + half * 64 + 32, l1);
            tr16x4(rw, at + half * 64 + 48, l1 + 4);
            tr16x4(rw, at + 128 + half * 32, h);
            tr16x4(rw, at + 128 + half * 32 + 16, h + 4);
            for (int rr = 0; rr < 4; rr++) {
                const __m512i *lo = rr % 2 ? l1 : l0;
                const int nib = 4 * (rr / 2);
                // sub-blocks 2*rho and 2*rho+1 of the super-block, rho = 4*half + rr
                uint8_t *codes = t.codes + (b * 16 + 2 * (4 * half + rr)) * 16 * QT_ROWS;
                for (int v = 0; v < 8; v++) {
                    const __m512i low = _mm512_and_si512(_mm512_srli_epi32(lo[v], nib), MASK4);
                    const __m512i high = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h[v], 2 * rr), MASK2), 4);
                    put(codes, v, _mm512_or_si512(low, high));
                }
            }
        }
    }
}

// Q2_K: sixteen sub-blocks of 16, two-bit codes, four-bit scales and mins.
INL void unpack_q2_K(const rows16 *rw, int64_t nblocks, qt_tile t) {
    for (int64_t b = 0; b < nblocks; b++) {
        const size_t at = (size_t)b * 84;
        const __m512i head = gather32(rw, at + 80);
        const __m512 d = f16_low(head), dmin = f16_high(head);
        __m512i sc[4];
        tr16x4(rw, at, sc);
        for (int s = 0; s < 16; s++) {
            const __m512i v = byte_of(sc[s / 4], s % 4);
            const int64_t sj = (b * 16 + s) * QT_ROWS;
            _mm512_store_ps(t.scale + sj, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(15)))));
            _mm512_store_ps(t.offset + sj, neg(_mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)))));
        }
        for (int half = 0; half < 2; half++) {
            __m512i q[8];
            tr16x4(rw, at + 16 + 32 * half, q);
            tr16x4(rw, at + 16 + 32 * half + 16, q + 4);
            for (int s = 0; s < 8; s++) {
                uint8_t *codes = t.codes + (b * 16 + 8 * half + s) * 16 * QT_ROWS;
                const int shift = 2 * (s / 2);
                for (int v = 0; v < 4; v++)
                    put(codes, v, _mm512_and_si512(_mm512_srli_epi32(q[(s % 2) * 4 + v], shift), MASK2));
            }
        }
    }
}

void qt_unpack_avx512(int type, const qt_format *f, const uint8_t *w, size_t row_bytes, int rows, int64_t k, qt_tile t) {
    const rows16 rw = rows_make(w, row_bytes, rows);
    switch (type) {
    case PK_Q4_0: case PK_Q4_1: case PK_Q5_0: case PK_Q8_0: unpack_legacy(type, &rw, k / 32, t); return;
    case PK_Q4_K: unpack_q45_K(0, &rw, k / 256, t); return;
    case PK_Q5_K: unpack_q45_K(1, &rw, k / 256, t); return;
    case PK_Q6_K: unpack_q6_K(&rw, k / 256, t); return;
    case PK_Q2_K: unpack_q2_K(&rw, k / 256, t); return;
    default: qt_unpack_ref(type, f, w, row_bytes, rows, k, t); return;
    }
}

// ---- the dot kernel ------------------------------------------------------------------------

INL void dot_n(const int count, const int sub, const int offsets, qt_tile tl, int64_t k, const qt_act *a,
               const int32_t *nb, int64_t t0, float *y, int64_t ldy, int rows) {
    const int64_t nsub = k / sub;
    const float *dxs = sub == 16 ? a->dx16 : a->dx32;
    const float *xss = sub == 16 ? a->xs16 : a->xs32;
    __m512 acc[8];
    for (int i = 0; i < count; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t j = 0; j < nsub; j++) {
        const uint8_t *c = tl.codes + j * sub * QT_ROWS;
        __m512i w[8];
        for (int v = 0; v < sub / 4; v++) w[v] = _mm512_load_si512((const void *)(c + 64 * v));
        const __m512 sc = _mm512_load_ps(tl.scale + j * QT_ROWS);
        const __m512 of = offsets ? _mm512_load_ps(tl.offset + j * QT_ROWS) : _mm512_setzero_ps();
        for (int i = 0; i < count; i++) {
            const int64_t t = t0 + i, u = t * nsub + j;
            const int8_t *xj = a->q + t * k + j * sub;
            __m512i s = _mm512_set1_epi32(nb[u]);
            for (int v = 0; v < sub / 4; v++) {
                int32_t quad;
                memcpy(&quad, xj + 4 * v, 4);
                s = _mm512_dpbusd_epi32(s, w[v], _mm512_set1_epi32(quad));
            }
            acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(sc, _mm512_set1_ps(dxs[u])), _mm512_cvtepi32_ps(s), acc[i]);
            if (offsets) acc[i] = _mm512_fmadd_ps(of, _mm512_set1_ps(xss[u]), acc[i]);
        }
    }
    const __mmask16 m = (__mmask16)((1u << rows) - 1u);
    for (int i = 0; i < count; i++) _mm512_mask_storeu_ps(y + i * ldy, m, acc[i]);
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
