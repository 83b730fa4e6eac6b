#include "pk_matmul.h"
#include "pk_quants.h"
#include "blocks.h"

// No FMA contraction: every ISA clone must round exactly like the portable code.
#pragma clang fp contract(off)
#include <math.h>
#include <stdatomic.h>
#include <string.h>

// ---- activation quantization -------------------------------------------------------------
//
// Activations are quantized the way llama.cpp quantizes them for each weight type (its
// "vec_dot_type"), so that both engines feed the same int8 values to the same integer sums:
// Q8_0 (fp16 scale) for Q4_0/Q5_0/Q8_0, Q8_1 (fp16 scale and fp16 scaled sum) for Q4_1/Q5_1,
// Q8_K (f32 scale per 256, signed by the largest value) for the k-quants.

static inline float round_f16(float v) { return (float)(_Float16)v; }

enum { ACT_Q8_0, ACT_Q8_1, ACT_Q8_K, ACT_KINDS };

static int act_kind(int type) {
    switch (type) {
    case PK_Q4_1: case PK_Q5_1: return ACT_Q8_1;
    case PK_Q2_K: case PK_Q3_K: case PK_Q4_K: case PK_Q5_K: case PK_Q6_K: return ACT_Q8_K;
    default: return ACT_Q8_0;
    }
}

static void quantize_row_q8_32(const float *x, int64_t k, int kind, int8_t *q, float *d, float *xs) {
    for (int64_t b = 0; b < k / 32; b++) {
        const float *xb = x + b * 32;
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) {
            const float a = fabsf(xb[i]);
            amax = a > amax ? a : amax;
        }
        const float db = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        int8_t *qb = q + b * 32;
        for (int i = 0; i < 32; i++) {
            const int v = (int)nearbyintf(xb[i] * id); // ties to even, like _mm256_round_ps
            qb[i] = (int8_t)v;
            sum += v;
        }
        d[b] = round_f16(db);
        // Q8_1 carries d*sum as one fp16 per 32; Q4_1/Q5_1 offsets are equal on both halves.
        xs[2 * b] = kind == ACT_Q8_1 ? round_f16(db * (float)sum) : 0.0f;
        xs[2 * b + 1] = 0.0f;
    }
}

static inline int nearest_int(float v) { return (int)nearbyintf(v); }

static void quantize_row_q8_K(const float *x, int64_t k, int8_t *q, float *d, float *xs) {
    for (int64_t b = 0; b < k / 256; b++) {
        const float *xb = x + b * 256;
        int8_t *qb = q + b * 256;
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < 256; i++) {
            const float a = fabsf(xb[i]);
            if (a > amax) { amax = a; max = xb[i]; }
        }
        if (amax == 0.0f) {
            memset(qb, 0, 256);
            for (int i = 0; i < 8; i++) d[b * 8 + i] = 0.0f;
            for (int i = 0; i < 16; i++) xs[b * 16 + i] = 0.0f;
            continue;
        }
        const float iscale = -127.0f / max;
        const float db = 1.0f / iscale;
        for (int i = 0; i < 256; i++) {
            const int v = nearest_int(iscale * xb[i]);
            qb[i] = (int8_t)(v < 127 ? v : 127);
        }
        for (int i = 0; i < 8; i++) d[b * 8 + i] = db;
        for (int s = 0; s < 16; s++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += qb[s * 16 + i];
            xs[b * 16 + s] = db * (float)sum;
        }
    }
}

static void quantize_row_act(const float *x, int64_t k, int kind, int8_t *q, float *d, float *xs) {
    if (kind == ACT_Q8_K) quantize_row_q8_K(x, k, q, d, xs);
    else quantize_row_q8_32(x, k, kind, q, d, xs);
}

// ---- the product ---------------------------------------------------------------------------

// Activations of n rows of length k in one int8 format.
typedef struct {
    int8_t *q;  // n*k
    float *d;   // n*k/32 block scales
    float *xs;  // n*k/16: d * sum(q) over each 16-value half block (Q8_1: fp16 per 32, see above)
} qact;

typedef struct {
    pk_matmul_op ops[PK_MATMUL_MAX_OPS];
    int count;
    int64_t first_row[PK_MATMUL_MAX_OPS + 1]; // op i owns rows [first_row[i], first_row[i+1])
    int64_t k, n;
    const float *x;
    qact act[ACT_KINDS];
    uint8_t *thread_scratch; // per thread: row unpack buffers
    size_t thread_bytes;
} matmul_job;

#define ALWAYS_INLINE static inline __attribute__((always_inline))

// One body, compiled three times: plain, AVX2 and AVX-512 (the compiler vectorizes each clone
// for its ISA); the widest the CPU supports is picked at run time.
ALWAYS_INLINE void q8_rows_body(const matmul_job *j, const pk_matmul_op *op, int64_t r0, int64_t r1, uint8_t *buf) {
    const int64_t k = j->k, nsb = k / 16;
    const int64_t be = pk_block_elements(op->type);
    const size_t bb = pk_block_bytes(op->type);
    const size_t row_bytes = (size_t)(k / be) * bb;
    const qact *a = &j->act[act_kind(op->type)];
    int8_t *q = (int8_t *)buf;
    float *sc = (float *)(buf + ((k + 63) & ~(int64_t)63));
    float *of = sc + nsb;
    int32_t *isum = (int32_t *)(of + nsb);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)op->w + r * row_bytes;
        for (int64_t b = 0; b < k / be; b++) blk_unpack(op->type, row + b * bb, q + b * be, sc + b * (be / 16), of + b * (be / 16));
        for (int64_t t = 0; t < j->n; t++) {
            const int8_t *xq = a->q + t * k;
            const float *xd = a->d + t * (k / 32);
            const float *xs = a->xs + t * nsb;
            for (int64_t s = 0; s < nsb; s++) {
                int32_t acc = 0;
                for (int i = 0; i < 16; i++) acc += (int32_t)q[s * 16 + i] * (int32_t)xq[s * 16 + i];
                isum[s] = acc;
            }
            float acc = 0.0f;
            for (int64_t s = 0; s < nsb; s++) acc += sc[s] * (xd[s >> 1] * (float)isum[s]) + of[s] * xs[s];
            op->y[t * op->ldy + r] = acc;
        }
    }
}

typedef void (*rows_fn)(const matmul_job *, const pk_matmul_op *, int64_t, int64_t, uint8_t *);

static void q8_rows_generic(const matmul_job *j, const pk_matmul_op *op, int64_t r0, int64_t r1, uint8_t *buf) {
    q8_rows_body(j, op, r0, r1, buf);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c")))
static void q8_rows_avx2(const matmul_job *j, const pk_matmul_op *op, int64_t r0, int64_t r1, uint8_t *buf) {
    q8_rows_body(j, op, r0, r1, buf);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
static void q8_rows_avx512(const matmul_job *j, const pk_matmul_op *op, int64_t r0, int64_t r1, uint8_t *buf) {
    q8_rows_body(j, op, r0, r1, buf);
}
#endif

static rows_fn pick_q8_rows(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) return q8_rows_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) return q8_rows_avx2;
#endif
    return q8_rows_generic;
}

static _Atomic(rows_fn) q8_impl;

static rows_fn q8_rows(void) {
    rows_fn fn = atomic_load_explicit(&q8_impl, memory_order_relaxed);
    if (!fn) {
        fn = pick_q8_rows(); // every thread picks the same function
        atomic_store_explicit(&q8_impl, fn, memory_order_relaxed);
    }
    return fn;
}

// Float weights (F32/F16/BF16) meet the float activations.
static void f32_rows(const matmul_job *j, const pk_matmul_op *op, int64_t r0, int64_t r1, uint8_t *buf) {
    float *wf = (float *)buf;
    const size_t row_bytes = (size_t)j->k * pk_block_bytes(op->type);
    for (int64_t r = r0; r < r1; r++) {
        pk_dequantize(op->type, (const uint8_t *)op->w + r * row_bytes, wf, j->k);
        for (int64_t t = 0; t < j->n; t++) {
            const float *x = j->x + t * j->k;
            float acc = 0.0f;
            for (int64_t i = 0; i < j->k; i++) acc += wf[i] * x[i];
            op->y[t * op->ldy + r] = acc;
        }
    }
}

static int has_int_form(int type) { return pk_block_elements(type) > 1; }

static void matmul_task(void *ctx, int ith, int nth) {
    const matmul_job *j = ctx;
    // Contiguous 8-row-aligned ranges over all ops' rows, so each thread streams its own part.
    const int64_t total = j->first_row[j->count];
    const int64_t per = ((total + nth - 1) / nth + 7) & ~(int64_t)7;
    const int64_t g0 = (int64_t)ith * per;
    const int64_t g1 = g0 + per < total ? g0 + per : total;
    uint8_t *buf = j->thread_scratch + (size_t)ith * j->thread_bytes;
    for (int i = 0; i < j->count; i++) {
        const int64_t lo = j->first_row[i] > g0 ? j->first_row[i] : g0;
        const int64_t hi = j->first_row[i + 1] < g1 ? j->first_row[i + 1] : g1;
        if (lo >= hi) continue;
        const pk_matmul_op *op = &j->ops[i];
        const int64_t r0 = lo - j->first_row[i], r1 = hi - j->first_row[i];
        if (has_int_form(op->type)) q8_rows()(j, op, r0, r1, buf);
        else f32_rows(j, op, r0, r1, buf);
    }
}

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

static size_t thread_bytes_for(int64_t k) {
    // int8 row + scale + offset + integer sums, or a float row: the larger of the two.
    size_t q8 = align64((size_t)k) + 3 * align64((size_t)(k / 16 + 1) * sizeof(float));
    size_t f = align64((size_t)k * sizeof(float));
    return q8 > f ? q8 : f;
}

static size_t act_bytes(int64_t n, int64_t k) {
    return align64((size_t)(n * k)) + align64((size_t)(n * (k / 32)) * sizeof(float)) +
           align64((size_t)(n * (k / 16)) * sizeof(float));
}

size_t pk_matmul_scratch_bytes(int64_t n, int64_t k, int threads) {
    return ACT_KINDS * act_bytes(n, k) + (size_t)threads * thread_bytes_for(k) + 64;
}

int pk_matmul_many(pk_pool *pool, const pk_matmul_op *ops, int count, int64_t k,
                   const float *x, int64_t n, void *scratch) {
    if (count < 1 || count > PK_MATMUL_MAX_OPS) return -1;
    matmul_job j;
    memset(&j, 0, sizeof j);
    j.count = count;
    j.k = k;
    j.n = n;
    j.x = x;
    int need[ACT_KINDS] = {0};
    for (int i = 0; i < count; i++) {
        const int64_t be = pk_block_elements(ops[i].type);
        if (be <= 0 || k % be != 0 || (be > 1 && k % 32 != 0)) return -1;
        j.ops[i] = ops[i];
        j.first_row[i + 1] = j.first_row[i] + ops[i].m;
        if (be > 1) need[act_kind(ops[i].type)] = 1;
    }
    uint8_t *s = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    for (int kind = 0; kind < ACT_KINDS; kind++) {
        qact *a = &j.act[kind];
        a->q = (int8_t *)s;
        a->d = (float *)(s + align64((size_t)(n * k)));
        a->xs = (float *)((uint8_t *)a->d + align64((size_t)(n * (k / 32)) * sizeof(float)));
        s += act_bytes(n, k);
        if (!need[kind]) continue;
        for (int64_t t = 0; t < n; t++)
            quantize_row_act(x + t * k, k, kind, a->q + t * k, a->d + t * (k / 32), a->xs + t * (k / 16));
    }
    j.thread_scratch = s;
    j.thread_bytes = thread_bytes_for(k);
    pk_pool_run(pool, matmul_task, &j);
    return 0;
}

int pk_matmul(pk_pool *pool, int type, const void *w, int64_t m, int64_t k,
              const float *x, int64_t n, float *y, int64_t ldy, void *scratch) {
    const pk_matmul_op op = {type, w, m, y, ldy};
    return pk_matmul_many(pool, &op, 1, k, x, n, scratch);
}
