// LoRA products for hot-swapped adapters. They are small (rank <= 64) beside the base matrix
// product: first T = X * A^T for every op (split by rank rows between the threads), then
// y += scale * T * B^T (split by output columns). Plain loops rather than BLAS, so that a row's
// result never depends on how many rows share the call (batch invariance); the lanes below are
// independent sums, which compilers vectorize without reassociating anything.
#include "pk_lora.h"
#include "isa.h"

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
    float *t;  // per op: n x rank, at t_offset[op]
    const int64_t *t_offset;
} lora_args;

typedef void (*lora_fn)(void *, int, int);

static inline __attribute__((always_inline)) float dot(const float *x, const float *a, int64_t k) {
    float acc[LORA_LANES] = {0};
    int64_t i = 0;
    for (; i + LORA_LANES <= k; i += LORA_LANES)
        for (int l = 0; l < LORA_LANES; l++) acc[l] += x[i + l] * a[i + l];
    for (int l = 0; i + l < k; l++) acc[l] += x[i + l] * a[i + l];
    for (int w = LORA_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

// Thread ith's share of the units (op rank rows, or op output columns), op by op.
#define FOR_SHARE(a, units, ...)                                                        \
    do {                                                                                \
        int64_t total_ = 0;                                                             \
        for (int i_ = 0; i_ < (a)->nops; i_++) total_ += (a)->ops[i_].units;            \
        int64_t lo_ = total_ * ith / nth, hi_ = total_ * (ith + 1) / nth, base_ = 0;    \
        for (int op_i = 0; op_i < (a)->nops && base_ < hi_; op_i++) {                   \
            const pk_lora_op *op = &(a)->ops[op_i];                                     \
            int64_t u0 = lo_ > base_ ? lo_ - base_ : 0;                                 \
            int64_t u1 = hi_ - base_ < op->units ? hi_ - base_ : op->units;             \
            if (u1 > u0) { __VA_ARGS__ }                                                   \
            base_ += op->units;                                                         \
        }                                                                               \
    } while (0)

static inline __attribute__((always_inline)) void down_body(const lora_args *a, int ith, int nth) {
    FOR_SHARE(a, rank, {
        float *t = a->t + a->t_offset[op_i];
        for (int64_t i = 0; i < op->n; i++)
            for (int64_t j = u0; j < u1; j++)
                t[i * op->rank + j] = dot(a->x + (op->x0 + i) * a->k, op->a + j * a->k, a->k);
    });
}

static inline __attribute__((always_inline)) void up_body(const lora_args *a, int ith, int nth) {
    float s[LORA_COLUMNS];
    FOR_SHARE(a, m, {
        const float *t = a->t + a->t_offset[op_i];
        for (int64_t c = u0; c < u1; c += LORA_COLUMNS) {
            int64_t w = u1 - c < LORA_COLUMNS ? u1 - c : LORA_COLUMNS;
            for (int64_t i = 0; i < op->n; i++) {
                for (int64_t j = 0; j < w; j++) s[j] = 0;
                for (int64_t r = 0; r < op->rank; r++) {
                    const float tr = t[i * op->rank + r], *b = op->bt + r * op->m + c;
                    for (int64_t j = 0; j < w; j++) s[j] += tr * b[j];
                }
                float *y = op->y + (int64_t)op->rows[i] * op->ldy + c;
                for (int64_t j = 0; j < w; j++) y[j] += op->scale * s[j];
            }
        }
    });
}

static void down_scalar(void *ctx, int ith, int nth) { down_body(ctx, ith, nth); }
static void up_scalar(void *ctx, int ith, int nth) { up_body(ctx, ith, nth); }
#if defined(__x86_64__)
__attribute__((target("avx2"))) static void down_avx2(void *ctx, int ith, int nth) { down_body(ctx, ith, nth); }
__attribute__((target("avx2"))) static void up_avx2(void *ctx, int ith, int nth) { up_body(ctx, ith, nth); }
__attribute__((target("avx512f,avx2"))) static void down_avx512(void *ctx, int ith, int nth) { down_body(ctx, ith, nth); }
__attribute__((target("avx512f,avx2"))) static void up_avx512(void *ctx, int ith, int nth) { up_body(ctx, ith, nth); }
#endif

int64_t pk_lora_scratch_floats(const pk_lora_op *ops, int nops) {
    int64_t n = 0;
    for (int i = 0; i < nops; i++) n += ops[i].n * ops[i].rank;
    return n;
}

int pk_lora_apply(pk_pool *pool, const pk_lora_op *ops, int nops, const float *x, int64_t k, float *scratch) {
    if (nops <= 0) return 0;
    if (nops > 256 || !ops || !x || !scratch || k <= 0) return -1;
    int64_t t_offset[256], at = 0;
    for (int i = 0; i < nops; i++) {
        const pk_lora_op *op = &ops[i];
        if (op->rank <= 0 || op->m <= 0 || op->n < 0 || op->x0 < 0 || !op->a || !op->bt || !op->y || (op->n > 0 && !op->rows))
            return -1;
        t_offset[i] = at;
        at += op->n * op->rank;
    }
    lora_args args = {ops, nops, x, k, scratch, t_offset};
    lora_fn down = ISA_PICK(lora_fn, down_scalar, down_avx2, down_avx512);
    lora_fn up = ISA_PICK(lora_fn, up_scalar, up_avx2, up_avx512);
    if (pool) {
        pk_pool_run(pool, down, &args);
        pk_pool_run(pool, up, &args);
    } else {
        down(&args, 0, 1);
        up(&args, 0, 1);
    }
    return 0;
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
