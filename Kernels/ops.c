#include "pk_ops.h"
#include "pk_quants.h"

// No FMA contraction: every ISA clone must round exactly like the portable code.
#pragma clang fp contract(off)
#include <math.h>
#include <string.h>

void pk_rms_norm(const float *x, const float *w, float *y, int64_t n, int64_t k, float eps) {
    for (int64_t t = 0; t < n; t++) {
        const float *xr = x + t * k;
        float *yr = y + t * k;
        double sum = 0.0; // double accumulation, as the reference implementation does
        for (int64_t i = 0; i < k; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / (double)k);
        const float scale = 1.0f / sqrtf(mean + eps);
        for (int64_t i = 0; i < k; i++) yr[i] = (xr[i] * scale) * w[i];
    }
}

void pk_rope(float *x, int64_t n, int64_t stride, int heads, int head_dim, int rope_dims,
             const int32_t *positions, float freq_base, int neox) {
    float cs[512], sn[512];
    const int pairs = rope_dims / 2 < 512 ? rope_dims / 2 : 512;
    const float theta_scale = powf(freq_base, -2.0f / (float)rope_dims);
    for (int64_t t = 0; t < n; t++) {
        // theta advances by repeated multiplication, matching llama.cpp's rounding.
        float theta = (float)positions[t];
        for (int i = 0; i < pairs; i++) {
            cs[i] = cosf(theta);
            sn[i] = sinf(theta);
            theta *= theta_scale;
        }
        float *row = x + t * stride;
        for (int h = 0; h < heads; h++) {
            float *v = row + (int64_t)h * head_dim;
            for (int i = 0; i < pairs; i++) {
                const int a = neox ? i : 2 * i;
                const int b = neox ? i + rope_dims / 2 : 2 * i + 1;
                const float x0 = v[a], x1 = v[b];
                v[a] = x0 * cs[i] - x1 * sn[i];
                v[b] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}

void pk_swiglu(float *gate, const float *up, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        const float g = gate[i];
        gate[i] = (g / (1.0f + expf(-g))) * up[i];
    }
}

void pk_add(float *y, const float *x, int64_t count) {
    for (int64_t i = 0; i < count; i++) y[i] += x[i];
}

void pk_f32_to_f16_row(const float *x, uint16_t *y, int64_t count) {
    for (int64_t i = 0; i < count; i++) y[i] = pk_f32_to_f16(x[i]);
}

size_t pk_attention_scratch_floats(int64_t max_kv, int threads) {
    return (size_t)threads * (size_t)(max_kv + 512);
}

typedef struct {
    const float *q;
    int64_t n;
    int n_head, n_kv_head, head_dim;
    const uint16_t *const *k_rows, *const *v_rows;
    const int32_t *kv_len;
    int64_t kv_stride, max_kv;
    float scale;
    float *out, *scratch;
} attn_job;

static void attention_one(const attn_job *j, int64_t t, int h, float *buf) {
    const int hd = j->head_dim;
    const int kvh = h / (j->n_head / j->n_kv_head);
    const int64_t len = j->kv_len[t];
    float *scores = buf;
    float *qh = buf + j->max_kv; // the query rounded to half precision, as the reference does
    float *acc = qh + 256;
    const float *qsrc = j->q + t * (int64_t)j->n_head * hd + (int64_t)h * hd;
    for (int i = 0; i < hd; i++) qh[i] = pk_f16_to_f32(pk_f32_to_f16(qsrc[i]));
    const uint16_t *kb = j->k_rows[t] + (int64_t)kvh * hd;
    float mx = -INFINITY;
    for (int64_t p = 0; p < len; p++) {
        const uint16_t *kp = kb + p * j->kv_stride;
        float s = 0.0f;
        for (int i = 0; i < hd; i++) s += qh[i] * pk_f16_to_f32(kp[i]);
        s *= j->scale;
        scores[p] = s;
        mx = s > mx ? s : mx;
    }
    // As llama.cpp: exp sums in double, probabilities scaled by 1/sum, then rounded to half
    // precision, because they meet the half-precision values as a half-precision product.
    double sum = 0.0;
    for (int64_t p = 0; p < len; p++) {
        const float e = expf(scores[p] - mx);
        scores[p] = e;
        sum += (double)e;
    }
    const float inv = (float)(1.0 / sum);
    memset(acc, 0, (size_t)hd * sizeof(float));
    const uint16_t *vb = j->v_rows[t] + (int64_t)kvh * hd;
    for (int64_t p = 0; p < len; p++) {
        const float w = pk_f16_to_f32(pk_f32_to_f16(scores[p] * inv));
        const uint16_t *vp = vb + p * j->kv_stride;
        for (int i = 0; i < hd; i++) acc[i] += w * pk_f16_to_f32(vp[i]);
    }
    memcpy(j->out + t * (int64_t)j->n_head * hd + (int64_t)h * hd, acc, (size_t)hd * sizeof(float));
}

static void attention_task(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    float *buf = j->scratch + (size_t)ith * (size_t)(j->max_kv + 512);
    const int64_t total = j->n * j->n_head;
    for (int64_t u = ith; u < total; u += nth) attention_one(j, u / j->n_head, (int)(u % j->n_head), buf);
}

void pk_attention(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                  const uint16_t *const *k_rows, const uint16_t *const *v_rows, const int32_t *kv_len,
                  int64_t kv_stride, float scale, float *out, float *scratch) {
    attn_job j = {q, n, n_head, n_kv_head, head_dim, k_rows, v_rows, kv_len, kv_stride, 0, scale, out, scratch};
    for (int64_t t = 0; t < n; t++) j.max_kv = kv_len[t] > j.max_kv ? kv_len[t] : j.max_kv;
    pk_pool_run(pool, attention_task, &j);
}
