#include "pk_matmul.h"
#include "pk_quants.h"

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

static int act_kind(int type) {
    switch (type) {
    case PK_Q4_1: case PK_Q5_1: return 1;
    case PK_Q2_K: case PK_Q3_K: case PK_Q4_K: case PK_Q5_K: case PK_Q6_K: return 2;
    default: return 0;
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
        xs[2 * b] = kind == 1 ? round_f16(db * (float)sum) : 0.0f;
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

static void quantize_row_act(const float *x, int64_t k, int type, int8_t *q, float *d, float *xs) {
    const int kind = act_kind(type);
    if (kind == 2) quantize_row_q8_K(x, k, q, d, xs);
    else quantize_row_q8_32(x, k, kind, q, d, xs);
}

// ---- weight unpacking (ggml block layouts) ----------------------------------------------

static inline __attribute__((always_inline)) float h2f(const uint8_t *p) {
    _Float16 h;
    memcpy(&h, p, 2);
    return (float)h;
}

static inline __attribute__((always_inline)) void fill16(float *dst, float v, int count) { for (int i = 0; i < count; i++) dst[i] = v; }

static inline __attribute__((always_inline)) void unpack_q4_0(const uint8_t *b, int8_t *q, float *sc, float *of) {
    const float d = h2f(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((qs[j] & 0xF) - 8);
        q[j + 16] = (int8_t)((qs[j] >> 4) - 8);
    }
    fill16(sc, d, 2); fill16(of, 0.0f, 2);
}

static inline __attribute__((always_inline)) void unpack_q4_1(const uint8_t *b, int8_t *q, float *sc, float *of) {
    const float d = h2f(b), m = h2f(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(qs[j] & 0xF);
        q[j + 16] = (int8_t)(qs[j] >> 4);
    }
    fill16(sc, d, 2); fill16(of, m, 2);
}

static inline __attribute__((always_inline)) void unpack_q5(const uint8_t *qhp, const uint8_t *qs, int bias, int8_t *q) {
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    for (int j = 0; j < 16; j++) {
        const int h0 = ((qh >> j) << 4) & 0x10;
        const int h1 = (qh >> (j + 12)) & 0x10;
        q[j] = (int8_t)(((qs[j] & 0xF) | h0) - bias);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | h1) - bias);
    }
}

static inline __attribute__((always_inline)) void unpack_q5_0(const uint8_t *b, int8_t *q, float *sc, float *of) {
    unpack_q5(b + 2, b + 6, 16, q);
    fill16(sc, h2f(b), 2); fill16(of, 0.0f, 2);
}

static inline __attribute__((always_inline)) void unpack_q5_1(const uint8_t *b, int8_t *q, float *sc, float *of) {
    unpack_q5(b + 4, b + 8, 0, q);
    fill16(sc, h2f(b), 2); fill16(of, h2f(b + 2), 2);
}

static inline __attribute__((always_inline)) void unpack_q8_0(const uint8_t *b, int8_t *q, float *sc, float *of) {
    memcpy(q, b + 2, 32);
    fill16(sc, h2f(b), 2); fill16(of, 0.0f, 2);
}

static inline __attribute__((always_inline)) void unpack_q2_K(const uint8_t *b, int8_t *q, float *sc, float *of) {
    const uint8_t *scales = b, *qs = b + 16;
    const float d = h2f(b + 80), dmin = h2f(b + 82);
    int is = 0;
    for (int n = 0; n < 2; n++, qs += 32) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++, is++) {
                const uint8_t s = scales[is];
                sc[is] = d * (float)(s & 0xF);
                of[is] = -(dmin * (float)(s >> 4));
                for (int l = 0; l < 16; l++) q[is * 16 + l] = (int8_t)((qs[half * 16 + l] >> shift) & 3);
            }
        }
    }
}

static inline __attribute__((always_inline)) void unpack_q3_K(const uint8_t *b, int8_t *q, float *sc, float *of) {
    const uint8_t *hm = b, *qs = b + 32, *raw = b + 96;
    const float d = h2f(b + 108);
    uint32_t aux[4];
    memcpy(aux, raw, 12);
    const uint32_t kmask1 = 0x03030303u, kmask2 = 0x0f0f0f0fu, tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    const int8_t *s6 = (const int8_t *)aux;
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < 2; n++, qs += 32) {
        for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
            for (int half = 0; half < 2; half++, is++) {
                sc[is] = d * (float)(s6[is] - 32);
                of[is] = 0.0f;
                for (int l = 0; l < 16; l++) {
                    const int i = half * 16 + l;
                    q[is * 16 + l] = (int8_t)(((qs[i] >> shift) & 3) - ((hm[i] & m) ? 0 : 4));
                }
            }
        }
    }
}

static inline __attribute__((always_inline)) void scale_min_k4(int j, const uint8_t *s, int *d, int *m) {
    if (j < 4) {
        *d = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *d = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// Q4_K and Q5_K share their scale layout; qh is NULL for Q4_K.
static inline __attribute__((always_inline)) void unpack_q45_K(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, int8_t *q, float *sc, float *of) {
    const float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t *scales = b + 4;
    for (int j = 0; j < 4; j++) {
        for (int nib = 0; nib < 2; nib++) {
            const int sub = 2 * j + nib;
            int s, m;
            scale_min_k4(sub, scales, &s, &m);
            const float ds = d * (float)s, dm = -(dmin * (float)m);
            sc[2 * sub] = sc[2 * sub + 1] = ds;
            of[2 * sub] = of[2 * sub + 1] = dm;
            for (int l = 0; l < 32; l++) {
                int v = nib ? (qs[j * 32 + l] >> 4) : (qs[j * 32 + l] & 0xF);
                if (qh && (qh[l] >> sub) & 1) v += 16;
                q[sub * 32 + l] = (int8_t)v;
            }
        }
    }
}

static inline __attribute__((always_inline)) void unpack_q4_K(const uint8_t *b, int8_t *q, float *sc, float *of) { unpack_q45_K(b, NULL, b + 16, q, sc, of); }
static inline __attribute__((always_inline)) void unpack_q5_K(const uint8_t *b, int8_t *q, float *sc, float *of) { unpack_q45_K(b, b + 16, b + 48, q, sc, of); }

static inline __attribute__((always_inline)) void unpack_q6_K(const uint8_t *b, int8_t *q, float *sc, float *of) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    const float d = h2f(b + 208);
    for (int i = 0; i < 16; i++) { sc[i] = d * (float)scales[i]; of[i] = 0.0f; }
    for (int n = 0; n < 2; n++, ql += 64, qh += 32, q += 128) {
        for (int l = 0; l < 32; l++) {
            q[l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            q[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

typedef void (*unpack_fn)(const uint8_t *, int8_t *, float *, float *);

static unpack_fn unpacker(int type) {
    switch (type) {
    case PK_Q4_0: return unpack_q4_0;
    case PK_Q4_1: return unpack_q4_1;
    case PK_Q5_0: return unpack_q5_0;
    case PK_Q5_1: return unpack_q5_1;
    case PK_Q8_0: return unpack_q8_0;
    case PK_Q2_K: return unpack_q2_K;
    case PK_Q3_K: return unpack_q3_K;
    case PK_Q4_K: return unpack_q4_K;
    case PK_Q5_K: return unpack_q5_K;
    case PK_Q6_K: return unpack_q6_K;
    default: return NULL;
    }
}

int pk_type_uses_q8(int type) { return unpacker(type) != NULL; }

int pk_unpack_row(int type, const void *src, int64_t n, int8_t *q, float *scale, float *offset) {
    unpack_fn f = unpacker(type);
    const int64_t be = pk_block_elements(type);
    if (!f || be <= 0 || n % be != 0) return -1;
    const size_t bb = pk_block_bytes(type);
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / be; b++) f(p + b * bb, q + b * be, scale + b * (be / 16), offset + b * (be / 16));
    return 0;
}

// ---- the product ---------------------------------------------------------------------------

typedef struct {
    int type;
    const uint8_t *w;
    size_t row_bytes;
    int64_t m, k, n, ldy;
    const float *x;
    pk_qact act;
    float *y;
    uint8_t *thread_scratch; // per thread: row unpack buffers
    size_t thread_bytes;
} matmul_job;

#define ALWAYS_INLINE static inline __attribute__((always_inline))

// One body, compiled three times: plain, AVX2 and AVX-512 (the compiler vectorizes each clone
// for its ISA); the widest the CPU supports is picked at run time.
ALWAYS_INLINE void unpack_dispatch(int type, const uint8_t *b, int8_t *q, float *sc, float *of) {
    switch (type) {
    case PK_Q4_0: unpack_q4_0(b, q, sc, of); break;
    case PK_Q4_1: unpack_q4_1(b, q, sc, of); break;
    case PK_Q5_0: unpack_q5_0(b, q, sc, of); break;
    case PK_Q5_1: unpack_q5_1(b, q, sc, of); break;
    case PK_Q8_0: unpack_q8_0(b, q, sc, of); break;
    case PK_Q2_K: unpack_q2_K(b, q, sc, of); break;
    case PK_Q3_K: unpack_q3_K(b, q, sc, of); break;
    case PK_Q4_K: unpack_q4_K(b, q, sc, of); break;
    case PK_Q5_K: unpack_q5_K(b, q, sc, of); break;
    case PK_Q6_K: unpack_q6_K(b, q, sc, of); break;
    default: break;
    }
}

ALWAYS_INLINE void q8_rows_body(const matmul_job *j, int64_t r0, int64_t r1, uint8_t *buf) {
    const int64_t k = j->k, nsb = k / 16;
    const int64_t be = pk_block_elements(j->type);
    const size_t bb = pk_block_bytes(j->type);
    int8_t *q = (int8_t *)buf;
    float *sc = (float *)(buf + ((k + 63) & ~(int64_t)63));
    float *of = sc + nsb;
    int32_t *isum = (int32_t *)(of + nsb);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = j->w + r * j->row_bytes;
        for (int64_t b = 0; b < k / be; b++) unpack_dispatch(j->type, row + b * bb, q + b * be, sc + b * (be / 16), of + b * (be / 16));
        for (int64_t t = 0; t < j->n; t++) {
            const int8_t *xq = j->act.q + t * k;
            const float *xd = j->act.d + t * (k / 32);
            const float *xs = j->act.xs + t * nsb;
            for (int64_t s = 0; s < nsb; s++) {
                int32_t acc = 0;
                for (int i = 0; i < 16; i++) acc += (int32_t)q[s * 16 + i] * (int32_t)xq[s * 16 + i];
                isum[s] = acc;
            }
            float acc = 0.0f;
            for (int64_t s = 0; s < nsb; s++) acc += sc[s] * (xd[s >> 1] * (float)isum[s]) + of[s] * xs[s];
            j->y[t * j->ldy + r] = acc;
        }
    }
}

static void q8_rows_generic(const matmul_job *j, int64_t r0, int64_t r1, uint8_t *buf) { q8_rows_body(j, r0, r1, buf); }

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c")))
static void q8_rows_avx2(const matmul_job *j, int64_t r0, int64_t r1, uint8_t *buf) { q8_rows_body(j, r0, r1, buf); }

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
static void q8_rows_avx512(const matmul_job *j, int64_t r0, int64_t r1, uint8_t *buf) { q8_rows_body(j, r0, r1, buf); }
#endif

typedef void (*rows_fn)(const matmul_job *, int64_t, int64_t, uint8_t *);

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

static void q8_rows(matmul_job *j, int64_t r0, int64_t r1, uint8_t *buf) {
    rows_fn fn = atomic_load_explicit(&q8_impl, memory_order_relaxed);
    if (!fn) {
        fn = pick_q8_rows(); // every thread picks the same function
        atomic_store_explicit(&q8_impl, fn, memory_order_relaxed);
    }
    fn(j, r0, r1, buf);
}

static void f32_rows(matmul_job *j, int64_t r0, int64_t r1, uint8_t *buf) {
    float *wf = (float *)buf;
    for (int64_t r = r0; r < r1; r++) {
        pk_dequantize(j->type, j->w + r * j->row_bytes, wf, j->k);
        for (int64_t t = 0; t < j->n; t++) {
            const float *x = j->x + t * j->k;
            float acc = 0.0f;
            for (int64_t i = 0; i < j->k; i++) acc += wf[i] * x[i];
            j->y[t * j->ldy + r] = acc;
        }
    }
}

static void matmul_task(void *ctx, int ith, int nth) {
    matmul_job *j = ctx;
    // Contiguous row ranges, 8-row aligned, so each thread streams its own part of the weights.
    const int64_t per = ((j->m + nth - 1) / nth + 7) & ~(int64_t)7;
    const int64_t r0 = (int64_t)ith * per;
    const int64_t r1 = r0 + per < j->m ? r0 + per : j->m;
    if (r0 >= r1) return;
    uint8_t *buf = j->thread_scratch + (size_t)ith * j->thread_bytes;
    if (pk_type_uses_q8(j->type)) q8_rows(j, r0, r1, buf);
    else f32_rows(j, r0, r1, buf);
}

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

static size_t thread_bytes_for(int64_t k) {
    // int8 row + scale + offset, or a float row: the larger of the two.
    size_t q8 = align64((size_t)k) + 3 * align64((size_t)(k / 16 + 1) * sizeof(float));
    size_t f = align64((size_t)k * sizeof(float));
    return q8 > f ? q8 : f;
}

size_t pk_matmul_scratch_bytes(int64_t n, int64_t k, int threads) {
    return align64((size_t)(n * k)) + align64((size_t)(n * (k / 32)) * sizeof(float)) +
           align64((size_t)(n * (k / 16)) * sizeof(float)) + (size_t)threads * thread_bytes_for(k) + 64;
}

int pk_matmul(pk_pool *pool, int type, const void *w, int64_t m, int64_t k,
              const float *x, int64_t n, float *y, int64_t ldy, void *scratch) {
    const int64_t be = pk_block_elements(type);
    if (be <= 0 || k % be != 0) return -1;
    const int q8 = pk_type_uses_q8(type);
    if (q8 && k % 32 != 0) return -1;
    matmul_job j = {0};
    j.type = type;
    j.w = w;
    j.row_bytes = (size_t)(k / be) * pk_block_bytes(type);
    j.m = m; j.k = k; j.n = n; j.ldy = ldy;
    j.x = x;
    j.y = y;
    uint8_t *s = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    j.act.q = (int8_t *)s; s += align64((size_t)(n * k));
    j.act.d = (float *)s; s += align64((size_t)(n * (k / 32)) * sizeof(float));
    j.act.xs = (float *)s; s += align64((size_t)(n * (k / 16)) * sizeof(float));
    j.thread_scratch = s;
    j.thread_bytes = thread_bytes_for(k);
    if (q8)
        for (int64_t t = 0; t < n; t++)
            quantize_row_act(x + t * k, k, type, j.act.q + t * k, j.act.d + t * (k / 32), j.act.xs + t * (k / 16));
    pk_pool_run(pool, matmul_task, &j);
    return 0;
}
