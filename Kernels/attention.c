#include "pk_ops.h"
#include "pk_matmul.h"

// The order of every rounding is written out: no contraction, fmaf where it is meant.
#pragma clang fp contract(off)
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define LANES 16

ALWAYS_INLINE float f16_round(float v) { return (float)(_Float16)v; }

// e^x for x <= 0 (Cody-Waite reduction, degree-6 polynomial; relative error ~1e-7). Written
// out so that every ISA computes the same bits, unlike libm's expf.
ALWAYS_INLINE float exp_neg(float x) {
    x = x < -87.0f ? -87.0f : x;
    const float n = nearbyintf(x * 1.44269504088896341f);
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    const float y = fmaf(p, r * r, r) + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return y * scale;
}

// Sum of sixteen lanes by a fixed tree.
ALWAYS_INLINE float tree_sum(float *acc) {
    for (int width = LANES / 2; width >= 1; width /= 2)
        for (int l = 0; l < width; l++) acc[l] += acc[l + width];
    return acc[0];
}

// Dot product in llama.cpp's (ggml's AVX-512) order: four 16-lane accumulators over chunks of
// 64 (a first product rounds as a product), folded 0+2, 1+3, 0+1, then the lane tree; a tail
// of fewer than 64 is added in double. `stride` steps through b (1: contiguous).
ALWAYS_INLINE float dot_ggml(const float *a, const float *b, int64_t stride, int64_t n) {
    float acc[4][LANES] = {{0}};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < LANES; l++) acc[j][l] = fmaf(a[i + 16 * j + l], b[(i + 16 * j + l) * stride], acc[j][l]);
    for (int l = 0; l < LANES; l++) {
        acc[0][l] += acc[2][l];
        acc[1][l] += acc[3][l];
    }
    for (int l = 0; l < LANES; l++) acc[0][l] += acc[1][l];
    double sum = (double)tree_sum(acc[0]);
    for (; i < n; i++) sum += (double)(a[i] * b[i * stride]);
    return (float)sum;
}

ALWAYS_INLINE void load_f16(const uint16_t *src, float *dst, int count) {
    for (int i = 0; i < count; i++) {
        _Float16 h;
        memcpy(&h, src + i, 2);
        dst[i] = (float)h;
    }
}

typedef struct {
    const float *q;
    int64_t n;
    int n_head, n_kv_head, head_dim, group, split;
    const uint16_t *const *k_rows, *const *v_rows;
    const int32_t *kv_len;
    int64_t kv_stride, max_kv;
    float scale;
    float *out, *scratch;
} attn_job;

// Heads [h0, h0+count) of row t, all in kv head kvh: scores for all of them from one pass over
// the keys, then softmax and one pass over the values.
ALWAYS_INLINE void attend_body(const attn_job *j, int64_t t, int kvh, int h0, int count, float *buf) {
    const int hd = j->head_dim;
    const int64_t len = j->kv_len[t];
    float *scores = buf;                              // count * max_kv
    float *qh = buf + (size_t)count * j->max_kv;      // count * 256: queries rounded to half
    float *kv = qh + (size_t)count * 256;             // 256: one key or value row as floats
    const float *qrow = j->q + t * (int64_t)j->n_head * hd;
    for (int c = 0; c < count; c++)
        for (int i = 0; i < hd; i++) qh[c * 256 + i] = f16_round(qrow[(int64_t)(h0 + c) * hd + i]);
    const uint16_t *kb = j->k_rows[t] + (int64_t)kvh * hd;
    for (int64_t p = 0; p < len; p++) {
        load_f16(kb + p * j->kv_stride, kv, hd);
        for (int c = 0; c < count; c++) scores[c * j->max_kv + p] = dot_ggml(qh + c * 256, kv, 1, hd) * j->scale;
    }
    const uint16_t *vb = j->v_rows[t] + (int64_t)kvh * hd;
    float inv[64];
    for (int c = 0; c < count; c++) {
        float *s = scores + c * j->max_kv;
        float mx = -INFINITY;
        for (int64_t p = 0; p < len; p++) mx = s[p] > mx ? s[p] : mx;
        // As llama.cpp: each chunk of 16 summed by the lane tree, the chunks and the tail in double.
        double sum = 0.0;
        int64_t p = 0;
        for (; p + LANES <= len; p += LANES) {
            float chunk[LANES];
            for (int l = 0; l < LANES; l++) chunk[l] = s[p + l] = exp_neg(s[p + l] - mx);
            sum += (double)tree_sum(chunk);
        }
        for (; p < len; p++) { s[p] = exp_neg(s[p] - mx); sum += (double)s[p]; }
        inv[c] = (float)(1.0 / sum);
        // Probabilities meet the half-precision values rounded to half, as llama.cpp does.
        for (int64_t u = 0; u < len; u++) s[u] = f16_round(s[u] * inv[c]);
    }
    // out[i] = the dot over positions of the probabilities and V[., i], in llama.cpp's order
    // (see dot_ggml), for every i at once: slot (j, l) of a 64-position chunk accumulates
    // position 64c + 16j + l, so V is read row by row; the tail past the last whole chunk is
    // added in double.
    float *out = j->out + t * (int64_t)j->n_head * hd + (int64_t)h0 * hd;
    float *slots = kv + 256;                          // count * 64 * hd
    memset(slots, 0, (size_t)count * 64 * (size_t)hd * sizeof(float));
    const int64_t whole = len / 64 * 64;
    for (int64_t p = 0; p < whole; p++) {
        load_f16(vb + p * j->kv_stride, kv, hd);
        for (int c = 0; c < count; c++) {
            const float w = scores[c * j->max_kv + p];
            float *a = slots + ((size_t)c * 64 + (size_t)(p % 64)) * hd;
            for (int i = 0; i < hd; i++) a[i] = fmaf(w, kv[i], a[i]);
        }
    }
    for (int c = 0; c < count; c++) {
        float *a = slots + (size_t)c * 64 * hd;       // slot (j, l) at row 16j + l
        for (int l = 0; l < 16; l++)
            for (int i = 0; i < hd; i++) {
                a[l * hd + i] += a[(32 + l) * hd + i];
                a[(16 + l) * hd + i] += a[(48 + l) * hd + i];
            }
        for (int l = 0; l < 16; l++)
            for (int i = 0; i < hd; i++) a[l * hd + i] += a[(16 + l) * hd + i];
        for (int width = 8; width >= 1; width /= 2)
            for (int l = 0; l < width; l++)
                for (int i = 0; i < hd; i++) a[l * hd + i] += a[(l + width) * hd + i];
        for (int i = 0; i < hd; i++) out[c * hd + i] = a[i];
    }
    if (whole < len) {
        double *tail = (double *)(slots + (size_t)count * 64 * hd);   // count * hd doubles
        for (int c = 0; c < count; c++)
            for (int i = 0; i < hd; i++) tail[c * hd + i] = (double)out[c * hd + i];
        for (int64_t p = whole; p < len; p++) {
            load_f16(vb + p * j->kv_stride, kv, hd);
            for (int c = 0; c < count; c++) {
                const float w = scores[c * j->max_kv + p];
                for (int i = 0; i < hd; i++) tail[c * hd + i] += (double)(w * kv[i]);
            }
        }
        for (int c = 0; c < count; c++)
            for (int i = 0; i < hd; i++) out[c * hd + i] = (float)tail[c * hd + i];
    }
}

typedef void (*attend_fn)(const attn_job *, int64_t, int, int, int, float *);

static void attend_scalar(const attn_job *j, int64_t t, int kvh, int h0, int count, float *buf) {
    attend_body(j, t, kvh, h0, count, buf);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c")))
static void attend_avx2(const attn_job *j, int64_t t, int kvh, int h0, int count, float *buf) {
    attend_body(j, t, kvh, h0, count, buf);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
static void attend_avx512(const attn_job *j, int64_t t, int kvh, int h0, int count, float *buf) {
    attend_body(j, t, kvh, h0, count, buf);
}
#endif

static attend_fn pick(void) {
    // Follows the matmul's choice, so a test that forces the scalar path gets it here too.
    switch (pk_matmul_isa()) {
#if defined(__x86_64__)
    case PK_ISA_AVX512: return attend_avx512;
    case PK_ISA_AVX2: return attend_avx2;
#endif
    default: return attend_scalar;
    }
}

// scores and queries per head, a key/value row, then 64 slots of head_dim and a double tail per head
static size_t per_thread(int64_t max_kv, int group) {
    // whole 64-byte lines, so that each thread's part (and its doubles) stays aligned
    return ((size_t)group * (size_t)(max_kv + 256 + 64 * 256 + 2 * 256) + 256 + 16 + 15) & ~(size_t)15;
}

size_t pk_attention_scratch_floats(int64_t max_kv, int group, int threads) {
    return (size_t)threads * per_thread(max_kv, group < 1 ? 1 : group);
}

typedef struct { const attn_job *j; attend_fn fn; } attn_task_ctx;

static void attention_task(void *ctx, int ith, int nth) {
    const attn_task_ctx *c = ctx;
    const attn_job *j = c->j;
    float *buf = j->scratch + (size_t)ith * per_thread(j->max_kv, j->group);
    // Units are (row, kv head), or (row, head) when there are too few of those to share out.
    const int per_unit = j->split ? 1 : j->group;
    const int64_t units_per_row = j->n_head / per_unit;
    const int64_t total = j->n * units_per_row;
    const int64_t u0 = total * ith / nth, u1 = total * (ith + 1) / nth;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t t = u / units_per_row;
        const int h0 = (int)(u % units_per_row) * per_unit;
        c->fn(j, t, h0 / j->group, h0, per_unit, buf);
    }
}

void pk_attention(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                  const uint16_t *const *k_rows, const uint16_t *const *v_rows, const int32_t *kv_len,
                  int64_t kv_stride, float scale, float *out, float *scratch) {
    attn_job j = {q, n, n_head, n_kv_head, head_dim, n_head / n_kv_head, 0, k_rows, v_rows, kv_len, kv_stride, 0, scale, out, scratch};
    for (int64_t t = 0; t < n; t++) j.max_kv = kv_len[t] > j.max_kv ? kv_len[t] : j.max_kv;
    j.split = n * n_kv_head < 4 * (int64_t)pk_pool_threads(pool);
    attn_task_ctx c = {&j, pick()};
    pk_pool_run(pool, attention_task, &c);
}
