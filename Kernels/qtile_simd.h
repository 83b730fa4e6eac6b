// The tile kernels, written once over qtile_vec.h's sixteen-lane vectors and compiled per
// instruction set (qtile_avx512.c, qtile_avx2.c): the same results as qtile.h's reference, bit
// for bit. Internal; QT_NAME(x) names this set's copy.
#pragma once
#include "qtile_isa.h"
#include "qtile_vec.h"

// A window of the 16 rows' bytes [at, at + 16*nchunks), transposed: T[i] lane r = the dword at
// byte 4i of the window in row r. Bytes at or past `end` (the row's end) read as zero, so the
// last block of a tensor never reads past it. Packed weights (pk_pack) already hold this
// layout: the window is a pointer into them. Otherwise the rows are transposed into `buf`.
// The next tile's weights are fetched into L2 (prefetcht1), not L1: a tile ahead is up to 80 KB,
// more than L1 holds, and a batched step's dot products take long enough that L2 is near enough.
// Measured against T0 and NTA (Benchmarks/README.md, kernels): batched decode products 12-20 %
// faster, decode products equal to NTA and faster than T0.
INL void fetch_weights(const void *p) { _mm_prefetch((const char *)p, _MM_HINT_T1); }

INL const vi *window(const rows16 *rw, size_t at, int nchunks, size_t end, vi *buf) {
    if (rw->packed) {
        const size_t d0 = at / 4;
        const vi *P = (const vi *)rw->packed + d0;
        // One line per vector; the next tile's same lines are fetched a tile ahead.
        if (rw->prefetch)
            for (int i = 0; i < 4 * nchunks; i++) fetch_weights((const vi *)rw->prefetch + d0 + i);
        if (at % 4 == 0) return P;
        // Odd blocks of Q3_K and Q6_K (110 and 210 bytes) start mid-dword.
        const int s = 8 * (int)(at % 4);
        for (int i = 0; i < 4 * nchunks; i++) buf[i] = vor(vsrli(P[i], s), vslli(P[i + 1], 32 - s));
        return buf;
    }
    for (int c = 0; c < nchunks; c++) {
        const size_t o = at + 16 * (size_t)c;
        // Streams the next tile in while this one is being worked on: one line per row per 64 bytes.
        if (rw->prefetch && (o & 63) == 0)
            for (int r = 0; r < QT_ROWS; r++) fetch_weights(rw->prefetch + r * rw->stride + o);
        if (o + 16 <= end) tr16x4_masked(rw, o, 0, 16, buf + 4 * c);
        else tr16x4_masked(rw, o, 1, end - o, buf + 4 * c);
    }
    return buf;
}

// Lane r = the dword at byte o of the window in row r (any alignment).
INL vi dword_at(const vi *T, size_t o) {
    const size_t q = o / 4, s = 8 * (o % 4);
    if (s == 0) return T[q];
    return vor(vsrli(T[q], (int)s), vslli(T[q + 1], 32 - (int)s));
}

#define MASK4 vset1(0x0f0f0f0f)
#define MASK2 vset1(0x03030303)
#define MASK1 vset1(0x01010101)

// One sub-block of one activation row against 16 rows: the step qtile.h defines, shared by the
// fused decode kernel and the tile kernel.
// `sgn`: the codes are q + 128 (Q8_0), which vdot4 may sum as signed q (see qtile_vec.h).
// `chains`: 2 splits the dot products into two dependency chains (integer sums are exact in any
// order), for decode, where one row's chain is all there is; batches interleave rows instead.
INL void step(const int sub, const int offsets, const int sgn, const int chains, const vi *w, vf sc, vf of,
              const int8_t *xj, int32_t nb, float dx, float xs, vf *acc, vf *off) {
    vi s = sgn && VDOT_SIGNED_SKIPS_BIAS ? vzero() : vset1(nb);
    if (chains == 2) {
        vi s1 = vzero();
        for (int v = 0; v < sub / 4; v += 2) {
            int32_t q0, q1;
            memcpy(&q0, xj + 4 * v, 4);
            memcpy(&q1, xj + 4 * v + 4, 4);
            s = vdot4(s, w[v], q0, sgn);
            s1 = vdot4(s1, w[v + 1], q1, sgn);
        }
        s = vadd(s, s1);
    } else {
        for (int v = 0; v < sub / 4; v++) {
            int32_t q;
            memcpy(&q, xj + 4 * v, 4);
            s = vdot4(s, w[v], q, sgn);
        }
    }
    *acc = vfmadd(vfmul(sc, vfset1(dx)), vcvt(s), *acc);
    if (offsets) *off = vfmadd(of, vfset1(xs), *off);
}

// Where unpacked sub-blocks go: into a tile (for many activation rows), or straight into the
// dot product with one activation row (decode), in sub-block order either way.
typedef struct {
    qt_tile t;
    const int8_t *x;
    const float *dx, *xs;
    const int32_t *nb;
    vf acc, off;
} sink;

INL void emit(const int fused, sink *s, const int sub, const int offsets, const int sgn, int64_t j, const vi *w, vf sc, vf of) {
    if (!fused) {
        uint8_t *c = s->t.codes + j * sub * QT_ROWS;
        for (int v = 0; v < sub / 4; v++) vstore(c + 64 * v, w[v]);
        vfstore(s->t.scale + j * QT_ROWS, sc);
        if (offsets) vfstore(s->t.offset + j * QT_ROWS, of);
        return;
    }
    step(sub, offsets, sgn, 2, w, sc, of, s->x + j * sub, s->nb[j], s->dx[j], offsets ? s->xs[j] : 0.0f, &s->acc, &s->off);
}

// ---- legacy 32-weight blocks ---------------------------------------------------------------

// Non-uniform formats: indexes (nibbles) to the tile codes of their levels, levels[i] + 128.
INL void levels_codes(const int8_t *levels, vi *w, int n) {
    const vi flip = vset1((int)0x80808080u);
    for (int v = 0; v < n; v++) w[v] = vxor(vlookup16(w[v], levels), flip);
}

// The 32 nibbles of four vectors of bytes: low nibbles first (w[0..3]), then high (w[4..7]).
INL void nibbles8(const vi *qs, vi w[8]) {
    for (int v = 0; v < 4; v++) {
        w[v] = vand(qs[v], MASK4);
        w[v + 4] = vand(vsrli(qs[v], 4), MASK4);
    }
}

// Codes of one block from its qs (and qh) vectors, as unpack_legacy below.
INL void legacy_codes(const qt_type *ty, const vi *qs, vi qh, vi w[8]) {
    if (ty->fields.qs == 32) { // eight-bit codes (Q8_0)
        const vi flip = vset1((int)0x80808080u);
        for (int v = 0; v < 8; v++) w[v] = vxor(qs[v], flip);
        return;
    }
    nibbles8(qs, w);
    if (ty->levels) levels_codes(ty->levels, w, 8);
    if (ty->fields.qh)
        for (int v = 0; v < 4; v++) {
            w[v] = vor(w[v], spread4(vsrli(qh, 4 * v)));
            w[v + 4] = vor(w[v + 4], spread4(vsrli(qh, 16 + 4 * v)));
        }
}

// Packed legacy blocks (qtile.h's field-by-field layout): every field is whole aligned vectors.
INL void unpack_legacy_packed(const int fused, const qt_type *ty, const rows16 *rw, int64_t nblocks, sink *s) {
    const qt_legacy l = ty->fields;
    const int offsets = ty->tile.offsets;
    size_t at = 0;
    for (int64_t g = 0; g < nblocks; g += l.group) {
        const int n = nblocks - g < l.group ? (int)(nblocks - g) : l.group;
        const size_t bytes = qt_legacy_group_bytes(&l, n);
        // The next tile's same lines, a tile ahead.
        if (rw->prefetch)
            for (size_t o = 0; o < bytes; o += 64) fetch_weights(rw->prefetch + at + o);
        const uint8_t *grp = rw->packed + at;
        for (int i = 0; i < n; i++) {
            vf sc, of = vfzero();
            if (offsets) {
                const vi head = vload(grp + qt_legacy_head_at(&l, i));
                sc = f16_low(head);
                of = f16_high(head);
            } else {
                sc = f16x16(grp + qt_legacy_head_at(&l, i));
            }
            const uint8_t *q = grp + qt_legacy_qs_at(&l, n, i);
            vi qs[8], w[8];
            for (int v = 0; v < l.qs / 4; v++) qs[v] = vload(q + 64 * v);
            legacy_codes(ty, qs, l.qh ? vload(grp + qt_legacy_qh_at(i)) : vzero(), w);
            emit(fused, s, 32, offsets, ty->tile.bias == 128, g + i, w, sc, of);
        }
        at += bytes;
    }
}

// Q4_0 (bias 8), Q4_1 (d, m), Q5_0 (qh, bias 16), Q5_1 (d, m, qh), Q8_0 (signed, bias 128),
// IQ4_NL (Q4_0's nibbles as levels, bias 128).
// Blocks are read in groups whose bytes fill whole 16-byte chunks (the row's window).
INL void unpack_legacy(const int fused, const qt_type *ty, const rows16 *rw, int64_t k, sink *s) {
    const int64_t nblocks = k / 32;
    if (rw->packed) { unpack_legacy_packed(fused, ty, rw, nblocks, s); return; }
    const qt_legacy l = ty->fields; // the block's fields, in the file's order: head, qh, qs
    const size_t bb = ty->bytes;
    const int group = l.window;
    const int offsets = ty->tile.offsets;
    const size_t row_bytes = (size_t)nblocks * bb;
    vi buf[17 * 4 + 1];
    for (int64_t g = 0; g < nblocks; g += group) {
        const size_t at = (size_t)g * bb;
        const size_t len = (size_t)(nblocks - g < group ? nblocks - g : group) * bb;
        const vi *T = window(rw, at, (int)((len + 15) / 16), row_bytes, buf);
        for (int64_t b = g; b < g + group && b < nblocks; b++) {
            const size_t o = (size_t)(b - g) * bb;
            const vi head = dword_at(T, o);
            const vf sc = f16_low(head);
            const vf of = offsets ? f16_high(head) : vfzero();
            const size_t qo = o + (size_t)(l.head + l.qh);
            vi qs[8], w[8];
            for (int v = 0; v < l.qs / 4; v++) qs[v] = dword_at(T, qo + 4 * v);
            legacy_codes(ty, qs, l.qh ? dword_at(T, o + (size_t)l.head) : vzero(), w);
            emit(fused, s, 32, offsets, ty->tile.bias == 128, b, w, sc, of);
        }
    }
}

// ---- Plinth's formats -----------------------------------------------------------------------

// PQ2: 10-byte blocks, read eight at a time (80 bytes: five whole chunks). Byte i of qs holds
// weights i, i+8, i+16, i+24 in its bit pairs, so vector v (weights 4v..4v+3) is the dword of
// bytes 0..3 or 4..7 shifted by 2*(v/2); the tile code 2c is the level 2c-3 plus the bias 3.
INL void unpack_pq2(const int fused, const qt_type *ty, const rows16 *rw, int64_t k, sink *s) {
    (void)ty;
    const int64_t nblocks = k / 32;
    const size_t row_bytes = (size_t)nblocks * 10;
    vi buf[5 * 4 + 1];
    for (int64_t g = 0; g < nblocks; g += 8) {
        const size_t len = (size_t)(nblocks - g < 8 ? nblocks - g : 8) * 10;
        const vi *T = window(rw, (size_t)g * 10, (int)((len + 15) / 16), row_bytes, buf);
        for (int64_t b = g; b < g + 8 && b < nblocks; b++) {
            const size_t o = (size_t)(b - g) * 10;
            const vf d = f16_low(dword_at(T, o));
            const vi q[2] = {dword_at(T, o + 2), dword_at(T, o + 6)};
            vi w[8];
            for (int v = 0; v < 8; v++) w[v] = vslli(vand(vsrli(q[v % 2], 2 * (v / 2)), MASK2), 1);
            emit(fused, s, 32, 0, 0, b, w, d, vfzero());
        }
    }
}

// ---- k-quants ------------------------------------------------------------------------------

INL vi byte_of(vi v, int i) { return vand(vsrli(v, 8 * i), vset1(0xff)); }

// IQ4_XS: eight sub-blocks of 32, each IQ4_NL's 16 bytes of nibbles, six-bit scales minus 32
// (low four bits in scales_l's nibbles, high two in scales_h's bit pairs).
INL void unpack_iq4_xs(const int fused, const qt_type *ty, const rows16 *rw, int64_t k, sink *s) {
    const int64_t nblocks = k / 256;
    const size_t row_bytes = (size_t)nblocks * 136;
    vi buf[9 * 4];
    for (int64_t b = 0; b < nblocks; b++) {
        const vi *T = window(rw, (size_t)b * 136, 9, row_bytes, buf);
        const vf d = f16_low(T[0]);
        const vi high = vsrli(T[0], 16);
        for (int i = 0; i < 8; i++) {
            const vi low = vand(vsrli(byte_of(T[1], i / 2), 4 * (i % 2)), vset1(15));
            const vi scale = vor(low, vslli(vand(vsrli(high, 2 * i), vset1(3)), 4));
            const vf sc = vfmul(d, vcvt(vsub(scale, vset1(32))));
            vi w[8];
            nibbles8(T + 2 + 4 * i, w);
            levels_codes(ty->levels, w, 8);
            emit(fused, s, 32, 0, 1, b * 8 + i, w, sc, vfzero());
        }
    }
}

// Q4_K and Q5_K: eight sub-blocks of 32 with six-bit scales and mins.
INL void unpack_q45_K(const int fused, const qt_type *ty, const rows16 *rw, int64_t k, sink *s) {
    const int five = ty->bytes == 176; // Q5_K: the Q4_K block plus 32 bytes of fifth bits
    const int64_t nblocks = k / 256;
    const size_t bb = five ? 176 : 144, row_bytes = (size_t)nblocks * bb;
    vi buf[11 * 4];
    for (int64_t b = 0; b < nblocks; b++) {
        const vi *T = window(rw, (size_t)b * bb, (int)(bb / 16), row_bytes, buf);
        const vf d = f16_low(T[0]), dmin = f16_high(T[0]);
        const vi s0 = T[1], s1 = T[2], s2 = T[3];
        vf sc[8], of[8];
        for (int j = 0; j < 8; j++) {
            vi scale, min;
            if (j < 4) {
                scale = vand(byte_of(s0, j), vset1(63));
                min = vand(byte_of(s1, j), vset1(63));
            } else {
                const int i = j - 4;
                scale = vor(vand(byte_of(s2, i), vset1(15)),
                                        vslli(vsrli(byte_of(s0, i), 6), 4));
                min = vor(vsrli(byte_of(s2, i), 4),
                                      vslli(vsrli(byte_of(s1, i), 6), 4));
            }
            sc[j] = vfmul(d, vcvt(scale));
            of[j] = vfneg(vfmul(dmin, vcvt(min)));
        }
        const vi *qh = T + 4;             // Q5_K: bytes 16..47
        const vi *qs = T + (five ? 12 : 4); // bytes 48.. or 16..
        for (int p = 0; p < 4; p++) {
            vi lo[8], hi[8];
            for (int v = 0; v < 8; v++) {
                const vi e = qs[8 * p + v];
                lo[v] = vand(e, MASK4);
                hi[v] = vand(vsrli(e, 4), MASK4);
                if (five) {
                    lo[v] = vor(lo[v], vslli(vand(vsrli(qh[v], 2 * p), MASK1), 4));
                    hi[v] = vor(hi[v], vslli(vand(vsrli(qh[v], 2 * p + 1), MASK1), 4));
                }
            }
            emit(fused, s, 32, 1, 0, b * 8 + 2 * p, lo, sc[2 * p], of[2 * p]);
            emit(fused, s, 32, 1, 0, b * 8 + 2 * p + 1, hi, sc[2 * p + 1], of[2 * p + 1]);
        }
    }
}

// Q6_K: sixteen sub-blocks of 16, six-bit codes (bias 32), signed eight-bit scales.
INL void unpack_q6_K(const int fused, const qt_type *ty, const rows16 *rw, int64_t k, sink *s) {
    (void)ty;
    const int64_t nblocks = k / 256;
    const size_t row_bytes = (size_t)nblocks * 210;
    vi buf[14 * 4];
    for (int64_t b = 0; b < nblocks; b++) {
        const vi *T = window(rw, (size_t)b * 210, 14, row_bytes, buf);
        const vf d = f16_low(T[52]);       // bytes 208..209
        vf sc[16];
        for (int j = 0; j < 16; j++) {
            const vi v = vsrai(vslli(T[48 + j / 4], 24 - 8 * (j % 4)), 24);
            sc[j] = vfmul(d, vcvt(v));
        }
        for (int half = 0; half < 2; half++) {
            const vi *l0 = T + 16 * half, *l1 = T + 16 * half + 8, *h = T + 32 + 8 * half;
            for (int rr = 0; rr < 4; rr++) {
                const vi *lo = rr % 2 ? l1 : l0;
                const int nib = 4 * (rr / 2);
                vi w[8];
                for (int v = 0; v < 8; v++) {
                    const vi low = vand(vsrli(lo[v], nib), MASK4);
                    const vi high = vslli(vand(vsrli(h[v], 2 * rr), MASK2), 4);
                    w[v] = vor(low, high);
                }
                const int64_t j = b * 16 + 2 * (4 * half + rr);
                emit(fused, s, 16, 0, 0, j, w, sc[j - b * 16], vfzero());
                emit(fused, s, 16, 0, 0, j + 1, w + 4, sc[j + 1 - b * 16], vfzero());
            }
        }
    }
}

// Q2_K: sixteen sub-blocks of 16, two-bit codes, four-bit scales and mins.
INL void unpack_q2_K(const int fused, const qt_type *ty, const rows16 *rw, int64_t k, sink *s) {
    (void)ty;
    const int64_t nblocks = k / 256;
    const size_t row_bytes = (size_t)nblocks * 84;
    vi buf[6 * 4];
    for (int64_t b = 0; b < nblocks; b++) {
        const vi *T = window(rw, (size_t)b * 84, 6, row_bytes, buf);
        const vi head = T[20];            // bytes 80..83
        const vf d = f16_low(head), dmin = f16_high(head);
        for (int half = 0; half < 2; half++) {
            const vi *q = T + 4 + 8 * half;
            for (int j = 0; j < 8; j++) {
                const int sj = 8 * half + j;
                const vi v = byte_of(T[sj / 4], sj % 4);
                const vf sc = vfmul(d, vcvt(vand(v, vset1(15))));
                const vf of = vfneg(vfmul(dmin, vcvt(vsrli(v, 4))));
                const int shift = 2 * (j / 2);
                vi w[4];
                for (int u = 0; u < 4; u++) w[u] = vand(vsrli(q[(j % 2) * 4 + u], shift), MASK2);
                emit(fused, s, 16, 1, 0, b * 16 + sj, w, sc, of);
            }
        }
    }
}

// Q3_K: sixteen sub-blocks of 16, two low bits from qs and an inverted high bit from hmask
// (set: +0, clear: -4, so with bias 4 the code is low + 4 * bit), six-bit scales minus 32.
INL void unpack_q3_K(const int fused, const qt_type *ty, const rows16 *rw, int64_t k, sink *s) {
    (void)ty;
    const int64_t nblocks = k / 256;
    const size_t row_bytes = (size_t)nblocks * 110;
    vi buf[7 * 4];
    for (int64_t b = 0; b < nblocks; b++) {
        const vi *T = window(rw, (size_t)b * 110, 7, row_bytes, buf);
        const vf d = f16_low(T[27]);       // bytes 108..109
        for (int k = 0; k < 16; k++) {
            const vi lo = k < 8 ? vand(byte_of(T[24 + k / 4], k % 4), vset1(15))
                                     : vsrli(byte_of(T[24 + (k - 8) / 4], (k - 8) % 4), 4);
            const vi hi = vand(vsrli(byte_of(T[26], k % 4), 2 * (k / 4)), vset1(3));
            const vi v = vsub(vor(lo, vslli(hi, 4)), vset1(32));
            const vf sc = vfmul(d, vcvt(v));
            const int half = k / 8, shift = 2 * ((k % 8) / 2);
            vi w[4];
            for (int v4 = 0; v4 < 4; v4++) {
                const vi low = vand(vsrli(T[8 + 8 * half + 4 * (k % 2) + v4], shift), MASK2);
                const vi bit = vand(vsrli(T[4 * (k % 2) + v4], k / 2), MASK1);
                w[v4] = vor(low, vslli(bit, 2));
            }
            emit(fused, s, 16, 0, 0, b * 16 + k, w, sc, vfzero());
        }
    }
}

// Prefetching past a tensor's end would be harmless (prefetches never fault) but wasted.
INL rows16 rows_make(const qt_type *ty, const uint8_t *w, size_t row_bytes, const uint8_t *packed, int last) {
    if (packed) return (rows16){w, row_bytes, last ? NULL : packed + qt_packed_tile_bytes(ty, row_bytes), packed};
    return (rows16){w, row_bytes, last ? NULL : w + QT_ROWS * row_bytes, NULL};
}

// The fused kernel's sink for activation row t, and its result.
INL sink gemv_sink(const qt_format *f, int64_t k, const qt_act *a, const int32_t *nb, int64_t t) {
    const int64_t nsub = k / f->sub;
    return (sink){.x = a->q + t * k, .dx = (f->sub == 16 ? a->dx16 : a->dx32) + t * nsub,
                  .xs = (f->sub == 16 ? a->xs16 : a->xs32) + t * nsub, .nb = nb + t * nsub, .acc = vfzero(), .off = vfzero()};
}
// Stores 16 results through the epilogue (qtile.h's qt_epilogue_apply, lane by lane).
INL void store_results(vf v, float *y, int rows, const qt_epilogue *e) {
    if (e) {
        if (e->bias) v = vfadd(v, vfload_rows(e->bias, rows));
        if (e->accumulate) v = vfadd(vfload_rows(y, rows), v);
    }
    vfstore_rows(y, v, rows);
}
INL void gemv_store(const qt_format *f, const sink *s, float *y, int rows, const qt_epilogue *e) {
    store_results(f->offsets ? vfadd(s->acc, s->off) : s->acc, y, rows, e);
}

// The types with SIMD unpackers: (name, id, unpacker). Each gets a tile kernel and a fused
// (decode) kernel specialized for its row, and a line in this set's kernel table.
#define SIMD_TYPES(X)                          \
    X(q4_0, PK_Q4_0, unpack_legacy)            \
    X(q4_1, PK_Q4_1, unpack_legacy)            \
    X(q5_0, PK_Q5_0, unpack_legacy)            \
    X(q5_1, PK_Q5_1, unpack_legacy)            \
    X(q8_0, PK_Q8_0, unpack_legacy)            \
    X(iq4_nl, PK_IQ4_NL, unpack_legacy)        \
    X(iq4_xs, PK_IQ4_XS, unpack_iq4_xs)        \
    X(q2_K, PK_Q2_K, unpack_q2_K)              \
    X(q3_K, PK_Q3_K, unpack_q3_K)              \
    X(q4_K, PK_Q4_K, unpack_q45_K)             \
    X(q5_K, PK_Q5_K, unpack_q45_K)             \
    X(q6_K, PK_Q6_K, unpack_q6_K)              \
    X(pq2, PK_PQ2, unpack_pq2)

#define DEFINE_KERNELS(name, id, unpacker)                                                                          \
    static void tile_##name(const qt_type *ty, const uint8_t *w, size_t row_bytes, const uint8_t *packed, int rows, \
                            int last, int64_t k, qt_tile t) {                                                       \
        if (rows < QT_ROWS) { qt_unpack_ref(ty, w, row_bytes, rows, k, t); return; }                                \
        const rows16 rw = rows_make(QT_ROW(id), w, row_bytes, packed, last);                                        \
        sink s = {.t = t};                                                                                          \
        unpacker(0, QT_ROW(id), &rw, k, &s);                                                                        \
    }                                                                                                               \
    static int fused_##name(const qt_type *ty, const uint8_t *w, size_t row_bytes, const uint8_t *packed, int rows, \
                            int last, int64_t k, const qt_act *a, const int32_t *nb, int64_t t, float *y,           \
                            const qt_epilogue *e) {                                                                 \
        (void)ty;                                                                                                   \
        if (rows < QT_ROWS) return 0;                                                                               \
        const rows16 rw = rows_make(QT_ROW(id), w, row_bytes, packed, last);                                        \
        sink s = gemv_sink(&QT_ROW(id)->tile, k, a, nb, t);                                                         \
        unpacker(1, QT_ROW(id), &rw, k, &s);                                                                        \
        gemv_store(&QT_ROW(id)->tile, &s, y, rows, e);                                                              \
        return 1;                                                                                                   \
    }
SIMD_TYPES(DEFINE_KERNELS)
#undef DEFINE_KERNELS

const qt_kernels QT_NAME(qt_kernels)[QT_SLOT_COUNT] = {
#define KERNEL_ROW(name, id, unpacker) [QT_SLOT(id)] = {tile_##name, fused_##name},
    SIMD_TYPES(KERNEL_ROW)
#undef KERNEL_ROW
};

// ---- the dot kernel ------------------------------------------------------------------------

INL void dot_n(const int count, const int sub, const int offsets, const int sgn, qt_tile tl, int64_t k, const qt_act *a,
               const int32_t *nb, int64_t t0, float *y, int64_t ldy, int rows, const qt_epilogue *e) {
    const int64_t nsub = k / sub;
    const float *dxs = sub == 16 ? a->dx16 : a->dx32;
    const float *xss = sub == 16 ? a->xs16 : a->xs32;
    vf acc[8], off[8];
    for (int i = 0; i < count; i++) acc[i] = off[i] = vfzero();
    for (int64_t j = 0; j < nsub; j++) {
        const uint8_t *c = tl.codes + j * sub * QT_ROWS;
        vi w[8];
        for (int v = 0; v < sub / 4; v++) w[v] = vload(c + 64 * v);
        const vf sc = vfload(tl.scale + j * QT_ROWS);
        const vf of = offsets ? vfload(tl.offset + j * QT_ROWS) : vfzero();
        for (int i = 0; i < count; i++) {
            const int64_t t = t0 + i, u = t * nsub + j;
            step(sub, offsets, sgn, 1, w, sc, of, a->q + t * k + j * sub, nb[u], dxs[u], offsets ? xss[u] : 0.0f, &acc[i], &off[i]);
        }
    }
    for (int i = 0; i < count; i++) store_results(offsets ? vfadd(acc[i], off[i]) : acc[i], y + i * ldy, rows, e);
}

// Activation rows per pass over the tile: as many as the registers hold.
#if QT_AVX512
#define DOT_ROWS 8
#else
#define DOT_ROWS 4
#endif

#define DOT_FN(name, sub, off, sgn)                                                                  \
    static void name(qt_tile tl, int64_t k, const qt_act *a, const int32_t *nb, int64_t t0, int count, \
                     float *y, int64_t ldy, int rows, const qt_epilogue *e) {                        \
        for (; count > 0; t0 += DOT_ROWS, y += DOT_ROWS * ldy, count -= DOT_ROWS) {                  \
            switch (count < DOT_ROWS ? count : DOT_ROWS) {                                           \
            case 1: dot_n(1, sub, off, sgn, tl, k, a, nb, t0, y, ldy, rows, e); break;                  \
            case 2: dot_n(2, sub, off, sgn, tl, k, a, nb, t0, y, ldy, rows, e); break;                  \
            case 3: dot_n(3, sub, off, sgn, tl, k, a, nb, t0, y, ldy, rows, e); break;                  \
            case 4: dot_n(4, sub, off, sgn, tl, k, a, nb, t0, y, ldy, rows, e); break;                  \
            case 5: dot_n(5, sub, off, sgn, tl, k, a, nb, t0, y, ldy, rows, e); break;                  \
            case 6: dot_n(6, sub, off, sgn, tl, k, a, nb, t0, y, ldy, rows, e); break;                  \
            case 7: dot_n(7, sub, off, sgn, tl, k, a, nb, t0, y, ldy, rows, e); break;                  \
            default: dot_n(8, sub, off, sgn, tl, k, a, nb, t0, y, ldy, rows, e); break;                 \
            }                                                                                        \
        }                                                                                            \
    }

DOT_FN(dot_16_0, 16, 0, 0)
DOT_FN(dot_16_1, 16, 1, 0)
DOT_FN(dot_32_0, 32, 0, 0)
DOT_FN(dot_32_0s, 32, 0, 1)
DOT_FN(dot_32_1, 32, 1, 0)

void QT_NAME(qt_dot)(const qt_format *f, qt_tile tl, int64_t k, const qt_act *a, const int32_t *nb,
                     int64_t t0, int count, float *y, int64_t ldy, int rows, const qt_epilogue *e) {
    if (f->sub == 16) (f->offsets ? dot_16_1 : dot_16_0)(tl, k, a, nb, t0, count, y, ldy, rows, e);
    else if (f->offsets) dot_32_1(tl, k, a, nb, t0, count, y, ldy, rows, e);
    else (f->bias == 128 ? dot_32_0s : dot_32_0)(tl, k, a, nb, t0, count, y, ldy, rows, e);
}
