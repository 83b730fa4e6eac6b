// LoRA products for hot-swapped adapters. They are small beside the base matrix product: for
// each row of each op, t = A x then y += scale * B t, all in one pass over the pool (a step
// calls this four times a layer, so barriers cost more than the arithmetic). Plain loops rather
// than BLAS, so that a row's result never depends on how many rows share the call (batch
// invariance); the lanes below are independent sums, which compilers vectorize without
// reassociating anything. Every product is
// a fused multiply-add (fmaf, exactly rounded on every ISA). The pair's weights are int8 with a
// scale per row: a step with several adapters is bound by reading their weights from memory
// (they do not stay in cache beside the base model's), and int8 reads half of F16's bytes.
#include "pk_lora.h"
#include "isa.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

#pragma STDC FP_CONTRACT OFF
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off") // GCC ignores the STDC pragma
#endif

#define LORA_LANES 16
#define LORA_COLUMNS 256

typedef struct {
    const pk_lora_op *ops;
    int nops;
    const float *x;
    int64_t k;
} lora_args;

typedef void (*lora_fn)(void *, int, int);

// x . a for an int8 row a (its scale applied by the caller).
static inline __attribute__((always_inline)) float dot(const float *x, const int8_t *a, int64_t k) {
    float acc[LORA_LANES] = {0};
    int64_t i = 0;
    for (; i + LORA_LANES <= k; i += LORA_LANES)
        for (int l = 0; l < LORA_LANES; l++) acc[l] = fmaf(x[i + l], (float)a[i + l], acc[l]);
    for (int l = 0; i + l < k; l++) acc[l] = fmaf(x[i + l], (float)a[i + l], acc[l]);
    for (int w = LORA_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

// t[r] of one row: (A's row r . x) times A's row scale, then times B's row-r scale, which is
// where B's scale enters its products. Every path computes t so.
static inline __attribute__((always_inline)) float scaled_t(const pk_lora_op *op, int64_t r, float dot) {
    return dot * op->a_scale[r] * op->bt_scale[r];
}

// One row of one op, whole: t = A x (rank values), then y[row] += scale * B t, by column chunks.
static inline __attribute__((always_inline)) void row_body(const lora_args *a, const pk_lora_op *op, int64_t i) {
    float t[PK_LORA_MAX_RANK], s[LORA_COLUMNS];
    const float *x = a->x + (int64_t)op->rows[i] * a->k;
    for (int64_t r = 0; r < op->rank; r++) t[r] = scaled_t(op, r, dot(x, op->a + r * a->k, a->k));
    float *y = op->y + (int64_t)op->rows[i] * op->ldy;
    for (int64_t c = 0; c < op->m; c += LORA_COLUMNS) {
        int64_t w = op->m - c < LORA_COLUMNS ? op->m - c : LORA_COLUMNS;
        for (int64_t j = 0; j < w; j++) s[j] = 0;
        for (int64_t r = 0; r < op->rank; r++) {
            const float tr = t[r];
            const int8_t *b = op->bt + r * op->m + c;
            for (int64_t j = 0; j < w; j++) s[j] = fmaf(tr, (float)b[j], s[j]);
        }
        for (int64_t j = 0; j < w; j++) y[c + j] = fmaf(op->scale, s[j], y[c + j]);
    }
}

// `next` is the op of the thread's next block (NULL after its last), for prefetching.
typedef void (*rows_fn)(const lora_args *, const pk_lora_op *, int64_t first, int count, const pk_lora_op *next);

// Thread ith's share of all (op, row) items, handed to `rows` up to `block` rows of one op at a
// time; each item is computed by one thread, start to end, so one pass over the pool does all.
static inline __attribute__((always_inline)) void share_rows(const lora_args *a, int ith, int nth, int block, rows_fn rows) {
    int64_t total = 0;
    for (int i = 0; i < a->nops; i++) total += a->ops[i].n;
    int64_t lo = total * ith / nth, hi = total * (ith + 1) / nth, base = 0;
    for (int o = 0; o < a->nops && base < hi; o++) {
        const pk_lora_op *op = &a->ops[o];
        int64_t i0 = lo > base ? lo - base : 0, i1 = hi - base < op->n ? hi - base : op->n;
        for (int64_t i = i0; i < i1; i += block) {
            const pk_lora_op *next = i + block < i1 ? op : NULL;
            if (!next && base + op->n < hi)
                for (int p = o + 1; p < a->nops && !next; p++) next = a->ops[p].n > 0 ? &a->ops[p] : NULL;
            rows(a, op, i, i1 - i < block ? (int)(i1 - i) : block, next);
        }
        base += op->n;
    }
}

static inline __attribute__((always_inline)) void rows_generic(const lora_args *a, const pk_lora_op *op, int64_t first, int count,
                                                              const pk_lora_op *next) {
    (void)next;
    for (int q = 0; q < count; q++) row_body(a, op, first + q);
}

static inline __attribute__((always_inline)) void apply_body(const lora_args *a, int ith, int nth) {
    share_rows(a, ith, nth, 1, rows_generic);
}

static void apply_scalar(void *ctx, int ith, int nth) { apply_body(ctx, ith, nth); }
#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static void apply_avx2(void *ctx, int ith, int nth) { apply_body(ctx, ith, nth); }

// The same sums as row_body, in the same order (16 lanes, then halves folded), with the lanes
// and the output columns held in registers.
// Sixteen int8 weights widened (exactly) to floats.
__attribute__((target("avx512f,fma"))) static inline __m512 load_i8(const int8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

// The sixteen lanes folded in halves (lane l gets lane l + w, w = 8, 4, 2, 1), as dot() folds.
__attribute__((target("avx512f,avx512dq,fma"))) static inline float fold16(__m512 v) {
    const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}

__attribute__((target("avx512f,fma"))) static float dot_avx512(const float *x, const int8_t *a, int64_t k) {
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load_i8(a + i), acc);
    float lanes[16];
    _mm512_storeu_ps(lanes, acc);
    for (int l = 0; i + l < k; l++) lanes[l] = fmaf(x[i + l], (float)a[i + l], lanes[l]);
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lanes[l] += lanes[l + w];
    return lanes[0];
}

#define LORA_T512 __attribute__((target("avx512f,avx512dq,fma"))) static inline __attribute__((always_inline))

// Lines fetched a few at a time while other work runs, far enough ahead of their use to cover
// a miss to memory: B^T while A runs, the next block's A while B runs.
typedef struct {
    const char *p, *end;
    int per;
} lora_stream;

static inline __attribute__((always_inline)) void stream_step(lora_stream *s) {
    for (int i = 0; i < s->per && s->p < s->end; i++, s->p += 64) _mm_prefetch(s->p, _MM_HINT_T0);
}

static inline __attribute__((always_inline)) lora_stream stream_of(const void *p, int64_t bytes, int64_t steps) {
    const int64_t lines = (bytes + 63) / 64, per = steps > 0 ? (lines + steps - 1) / steps : lines;
    return (lora_stream){(const char *)p, (const char *)p + lines * 64, per > 8 ? 8 : (int)per};
}

// t[q][r], r in [r0, r0 + nk): nk (1 or 2) rows of A against nr inputs, k a multiple of 16.
LORA_T512 void a_rows_avx512(const pk_lora_op *op, const float *const *x, int64_t k, int64_t r0, const int nk, const int nr,
                             float t[4][PK_LORA_MAX_RANK], lora_stream *ahead) {
    __m512 c[2][4];
    for (int h = 0; h < nk; h++)
        for (int q = 0; q < nr; q++) c[h][q] = _mm512_setzero_ps();
    const int more = r0 + nk + 1 < op->rank; // the next pair of A's rows, fetched while this one runs
    for (int64_t j = 0; j < k; j += 16) {
        if (more && j % 64 == 0) {
            _mm_prefetch((const char *)(op->a + (r0 + nk) * k + j), _MM_HINT_T0);
            _mm_prefetch((const char *)(op->a + (r0 + nk + 1) * k + j), _MM_HINT_T0);
        }
        stream_step(ahead);
        __m512 av[2];
        for (int h = 0; h < nk; h++) av[h] = load_i8(op->a + (r0 + h) * k + j);
        for (int q = 0; q < nr; q++) {
            const __m512 xv = _mm512_loadu_ps(x[q] + j);
            for (int h = 0; h < nk; h++) c[h][q] = _mm512_fmadd_ps(xv, av[h], c[h][q]);
        }
    }
    for (int h = 0; h < nk; h++)
        for (int q = 0; q < nr; q++) t[q][r0 + h] = scaled_t(op, r0 + h, fold16(c[h][q]));
}

// Columns c .. c + 16 nv of y[q] += scale * (t[q] . B), for nr rows at once.
LORA_T512 void b_cols_avx512(const pk_lora_op *op, float t[4][PK_LORA_MAX_RANK], float *const *y, int64_t c, const int nv,
                             const int nr, lora_stream *ahead) {
    __m512 s[4][4];
    for (int q = 0; q < nr; q++)
        for (int v = 0; v < nv; v++) s[q][v] = _mm512_setzero_ps();
    for (int64_t r = 0; r < op->rank; r++) {
        const int8_t *b = op->bt + r * op->m + c;
        stream_step(ahead);
        __m512 bv[4];
        for (int v = 0; v < nv; v++) bv[v] = load_i8(b + 16 * v);
        for (int q = 0; q < nr; q++) {
            const __m512 tr = _mm512_set1_ps(t[q][r]);
            for (int v = 0; v < nv; v++) s[q][v] = _mm512_fmadd_ps(tr, bv[v], s[q][v]);
        }
    }
    const __m512 scale = _mm512_set1_ps(op->scale);
    for (int q = 0; q < nr; q++)
        for (int v = 0; v < nv; v++)
            _mm512_storeu_ps(y[q] + c + 16 * v, _mm512_fmadd_ps(scale, s[q][v], _mm512_loadu_ps(y[q] + c + 16 * v)));
}

// Up to four rows of one op together (rows i0 .. i0 + nr): each weight vector is loaded and
// widened once for all of them, and A's rows go two at a time so they share the loads of x.
// Every output is still its own chain in dot()'s and row_body's order, so the rows come out
// exactly as one at a time. nr is a constant in each caller below, so the loops over rows unroll
// and the accumulators stay in registers (with a variable count they lived on the stack, a
// store and a reload around every FMA).
LORA_T512 void rows_avx512_n(const lora_args *a, const pk_lora_op *op, int64_t i0, const int nr, const pk_lora_op *next) {
    static _Thread_local float t[4][PK_LORA_MAX_RANK];
    const float *x[4];
    for (int q = 0; q < nr; q++) x[q] = a->x + (int64_t)op->rows[i0 + q] * a->k;
    for (int64_t j = 0; j < 2 * a->k && j < op->rank * a->k; j += 64) // A's first two rows
        _mm_prefetch((const char *)(op->a + j), _MM_HINT_T0);
    lora_stream bt = stream_of(op->bt, op->rank * op->m, (op->rank + 1) / 2 * (a->k / 16));
    if (a->k % 16 == 0) {
        int64_t r = 0;
        for (; r + 2 <= op->rank; r += 2) a_rows_avx512(op, x, a->k, r, 2, nr, t, &bt);
        if (r < op->rank) a_rows_avx512(op, x, a->k, r, 1, nr, t, &bt);
    } else {
        for (int q = 0; q < nr; q++)
            for (int64_t r = 0; r < op->rank; r++) t[q][r] = scaled_t(op, r, dot_avx512(x[q], op->a + r * a->k, a->k));
    }
    float *y[4];
    for (int q = 0; q < nr; q++) y[q] = op->y + (int64_t)op->rows[i0 + q] * op->ldy;
    lora_stream ahead = {NULL, NULL, 0};
    if (next && next->a != op->a) ahead = stream_of(next->a, next->rank * a->k, op->rank * ((op->m + 15) / 16));
    int64_t c = 0;
    for (; c + 64 <= op->m; c += 64) b_cols_avx512(op, t, y, c, 4, nr, &ahead);
    for (; c + 16 <= op->m; c += 16) b_cols_avx512(op, t, y, c, 1, nr, &ahead);
    for (; c < op->m; c++)
        for (int q = 0; q < nr; q++) {
            float sum = 0;
            for (int64_t r = 0; r < op->rank; r++) sum = fmaf(t[q][r], (float)op->bt[r * op->m + c], sum);
            y[q][c] = fmaf(op->scale, sum, y[q][c]);
        }
}

__attribute__((target("avx512f,avx512dq,fma"))) static void rows_avx512(const lora_args *a, const pk_lora_op *op, int64_t i0, int nr,
                                                                         const pk_lora_op *next) {
    switch (nr) {
    case 4: rows_avx512_n(a, op, i0, 4, next); break;
    case 3: rows_avx512_n(a, op, i0, 3, next); break;
    case 2: rows_avx512_n(a, op, i0, 2, next); break;
    default: rows_avx512_n(a, op, i0, 1, next); break;
    }
}

__attribute__((target("avx512f,avx512dq,fma"))) static void apply_avx512(void *ctx, int ith, int nth) {
    share_rows(ctx, ith, nth, 4, rows_avx512);
}
#endif

int pk_lora_apply(pk_pool *pool, const pk_lora_op *ops, int nops, const float *x, int64_t k) {
    if (nops <= 0) return 0;
    if (!ops || !x || k <= 0) return -1;
    for (int i = 0; i < nops; i++) {
        const pk_lora_op *op = &ops[i];
        if (op->rank <= 0 || op->rank > PK_LORA_MAX_RANK || op->m <= 0 || op->n < 0 || !op->a || !op->bt || !op->a_scale ||
            !op->bt_scale || !op->y ||
            (op->n > 0 && !op->rows))
            return -1;
    }
    lora_args args = {ops, nops, x, k};
    lora_fn apply = ISA_PICK(lora_fn, apply_scalar, apply_avx2, apply_avx512);
    if (pool) pk_pool_run(pool, apply, &args); else apply(&args, 0, 1);
    return 0;
}

// Round to nearest with the scale among absmax/127 * (1 - i/64), i < 16, that leaves the least
// squared error: an outlier then costs the rest of the row less precision.
void pk_lora_quantize_rows(const float *x, int64_t rows, int64_t cols, int8_t *q, float *scale) {
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * cols;
        float m = 0;
        for (int64_t j = 0; j < cols; j++) m = fmaxf(m, fabsf(row[j]));
        // A row too small for its reciprocal to be finite, or one that is not finite (readers
        // refuse those), is stored as zeros.
        if (!(m >= 127 * FLT_MIN) || !isfinite(m)) m = 0;
        float best = m / 127, bestErr = INFINITY;
        for (int i = 0; i < 16 && m > 0; i++) {
            const float s = m / 127 * (1 - i / 64.0f), inv = 1 / s;
            float err = 0;
            for (int64_t j = 0; j < cols; j++) {
                float v = nearbyintf(row[j] * inv);
                v = v > 127 ? 127 : v < -127 ? -127 : v;
                const float d = row[j] - v * s;
                err += d * d;
            }
            if (err < bestErr) bestErr = err, best = s;
        }
        const float inv = m > 0 ? 1 / best : 0;
        for (int64_t j = 0; j < cols; j++) {
            float v = nearbyintf(row[j] * inv);
            if (v != v) v = 0; // NaN
            q[r * cols + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        scale[r] = m > 0 ? best : 0;
    }
}

// ---- merging --------------------------------------------------------------------------------

#include "pk_quants.h"
#include <cblas.h>
#include <stdlib.h>

#define MERGE_ROWS 64

typedef struct {
    int in_type, out_type;
    const char *w;
    char *out;
    int64_t rows, k, rank, in_row_bytes, out_row_bytes;
    const float *a, *bt;
    float scale;
    int failed;
} merge_args;

static void merge_rows(void *ctx, int ith, int nth) {
    merge_args *m = ctx;
    int64_t lo = m->rows * ith / nth, hi = m->rows * (ith + 1) / nth;
    float *buf = malloc((size_t)MERGE_ROWS * (size_t)m->k * sizeof(float));
    if (!buf) { m->failed = 1; return; }
    for (int64_t r0 = lo; r0 < hi; r0 += MERGE_ROWS) {
        int64_t n = hi - r0 < MERGE_ROWS ? hi - r0 : MERGE_ROWS;
        for (int64_t r = 0; r < n; r++)
            if (pk_dequantize(m->in_type, m->w + (r0 + r) * m->in_row_bytes, buf + r * m->k, m->k) != 0) m->failed = 1;
        // buf += scale * B[r0 .. r0 + n) * A, B's rows being bt's columns.
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)n, (blasint)m->k, (blasint)m->rank, m->scale,
                    m->bt + r0, (blasint)m->rows, m->a, (blasint)m->k, 1.0f, buf, (blasint)m->k);
        for (int64_t r = 0; r < n; r++)
            if (pk_quantize(m->out_type, buf + r * m->k, m->out + (r0 + r) * m->out_row_bytes, m->k) != 0) m->failed = 1;
    }
    free(buf);
}

int pk_lora_merge(pk_pool *pool, int in_type, const void *w, int out_type, void *out, int64_t rows, int64_t k,
                  const float *a, const float *bt, int64_t rank, float scale) {
    pk_type_info ti, to;
    if (!w || !out || !a || !bt || rows <= 0 || k <= 0 || rank <= 0) return -1;
    if (pk_type_info_of(in_type, &ti) != 0 || pk_type_info_of(out_type, &to) != 0 || !ti.can_dequantize || !to.can_quantize) return -1;
    if (k % ti.block_elements != 0 || k % to.block_elements != 0) return -1;
    merge_args m = {in_type, out_type, w, out, rows, k, rank,
                    (int64_t)(k / ti.block_elements * (int64_t)ti.block_bytes), (int64_t)(k / to.block_elements * (int64_t)to.block_bytes),
                    a, bt, scale, 0};
    if (pool) pk_pool_run(pool, merge_rows, &m); else merge_rows(&m, 0, 1);
    return m.failed ? -1 : 0;
}
