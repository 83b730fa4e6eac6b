#include "pk_ops.h"
#include "pk_matmul.h"
#include "isa.h"
#include "kexp.h"
#include "share.h"

// The order of every rounding is written out: no contraction, fmaf where it is meant.
#pragma clang fp contract(off)
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define LANES 16

ALWAYS_INLINE float f16_round(float v) { return (float)(_Float16)v; }

// Sum of sixteen lanes by a fixed tree.
ALWAYS_INLINE float tree_sum(float *acc) {
    for (int width = LANES / 2; width >= 1; width /= 2)
        for (int l = 0; l < width; l++) acc[l] += acc[l + width];
    return acc[0];
}

ALWAYS_INLINE void load_f16(const uint16_t *src, float *dst, int count) {
    for (int i = 0; i < count; i++) {
        _Float16 h;
        memcpy(&h, src + i, 2);
        dst[i] = (float)h;
    }
}

void pk_store_key(const float *k, int64_t kv_dim, int64_t pos, uint16_t *keys) {
    uint16_t *block = keys + (pos / PK_KEY_BLOCK) * PK_KEY_BLOCK * kv_dim + pos % PK_KEY_BLOCK;
    uint16_t h[256];
    for (int64_t i0 = 0; i0 < kv_dim; i0 += 256) {
        const int64_t count = kv_dim - i0 < 256 ? kv_dim - i0 : 256;
        pk_f32_to_f16_row(k + i0, h, count);
        for (int64_t i = 0; i < count; i++) block[(i0 + i) * PK_KEY_BLOCK] = h[i];
    }
}

typedef struct {
    const float *k, *v;
    int64_t kv_dim;
    const int32_t *positions;
    uint16_t *const *keys, *const *values;
} store_job;

static void store_rows(const void *args, int64_t r0, int64_t r1) {
    const store_job *s = args;
    for (int64_t r = r0; r < r1; r++) {
        pk_store_key(s->k + r * s->kv_dim, s->kv_dim, s->positions[r], s->keys[r]);
        pk_f32_to_f16_row(s->v + r * s->kv_dim, s->values[r] + (int64_t)s->positions[r] * s->kv_dim, s->kv_dim);
    }
}

void pk_store_kv(pk_pool *pool, const float *k, const float *v, int64_t n, int64_t kv_dim, const int32_t *positions,
                 uint16_t *const *keys, uint16_t *const *values) {
    const store_job s = {k, v, kv_dim, positions, keys, values};
    // Shared from two rows: the first write to each page of a cache faults it in, which costs
    // far more than the values suggest.
    split_rows(pool, n, 1, store_rows, &s);
}

// The scores of the sixteen keys of a block (pk_store_key's layout, this kv head's part) for
// one query, each a dot product in llama.cpp's (ggml's AVX-512) order: four 16-lane
// accumulators over chunks of 64 (a first product rounds as a product), folded 0+2, 1+3, 0+1,
// then the lane tree; a tail of fewer than 64 added in double; times the scale. Computed for
// all the keys side by side (key innermost, where the compiler vectorizes).
ALWAYS_INLINE void score_block(const float *qh, const uint16_t *block, int hd, float scale, float *s) {
    float slot[LANES][PK_KEY_BLOCK]; // slot l folded over its four accumulators, per key
    const int whole = hd / 64 * 64;
    for (int l = 0; l < LANES; l++) {
        float acc[4][PK_KEY_BLOCK] = {{0}};
        for (int c = 0; c < whole; c += 64)
            for (int j = 0; j < 4; j++) {
                const int d = c + 16 * j + l;
                float kf[PK_KEY_BLOCK];
                load_f16(block + d * PK_KEY_BLOCK, kf, PK_KEY_BLOCK);
                for (int key = 0; key < PK_KEY_BLOCK; key++) acc[j][key] = fmaf(qh[d], kf[key], acc[j][key]);
            }
        for (int key = 0; key < PK_KEY_BLOCK; key++) slot[l][key] = (acc[0][key] + acc[2][key]) + (acc[1][key] + acc[3][key]);
    }
    for (int width = LANES / 2; width >= 1; width /= 2)
        for (int l = 0; l < width; l++)
            for (int key = 0; key < PK_KEY_BLOCK; key++) slot[l][key] += slot[l + width][key];
    for (int key = 0; key < PK_KEY_BLOCK; key++) {
        double sum = (double)slot[0][key];
        for (int d = whole; d < hd; d++) {
            float kf;
            load_f16(block + d * PK_KEY_BLOCK + key, &kf, 1);
            sum += (double)(qh[d] * kf);
        }
        s[key] = (float)sum * scale;
    }
}

typedef struct {
    const float *q;
    int64_t n;
    int n_head, n_kv_head, head_dim, group, split;
    int64_t kv_dim;
    const uint16_t *const *keys, *const *values;
    const int32_t *kv_start, *kv_len; // kv_start NULL: every row from position 0
    int64_t v_stride, max_kv;
    float scale;
    float *out, *scratch;
} attn_job;

// Row t's keys of kv head kvh in its first block (the next blocks follow PK_KEY_BLOCK * kv_dim
// halves apart).
ALWAYS_INLINE const uint16_t *unit_keys(const attn_job *j, int64_t t, int kvh) {
    return j->keys[t] + (int64_t)kvh * j->head_dim * PK_KEY_BLOCK;
}

// Row t's values of kv head kvh at position 0 (the next positions follow v_stride halves apart).
ALWAYS_INLINE const uint16_t *unit_values(const attn_job *j, int64_t t, int kvh) {
    return j->values[t] + (int64_t)kvh * j->head_dim;
}

// Whether row t continues the row before it (the same sequence's cache, as in a prefill chunk):
// that cache was read moments ago, so a unit of row t fetches nothing ahead.
ALWAYS_INLINE int continues_previous_row(const attn_job *j, int64_t t) { return t > 0 && j->keys[t - 1] == j->keys[t]; }

// Key blocks fetched into L1 ahead of the one being scored (a unit's first ones during the unit
// before it).
#define KEYS_AHEAD 3

// The unit a thread runs after the current one, whose keys and values it fetches meanwhile.
typedef struct {
    const uint16_t *keys, *values;
    int64_t len;
} next_unit;

// A row's window: it attends from `start` (0 without one). The 64-position chunk the start falls
// in begins at `lo`: chunks before it weigh nothing and are skipped; the positions of its own
// chunk before the start are left out of the maximum and set to 0 in place of their exp (kexp
// clamps its argument, so it would not give 0 for them).
ALWAYS_INLINE int64_t window_start(const attn_job *j, int64_t t) { return j->kv_start ? j->kv_start[t] : 0; }

// Heads [h0, h0+count) of row t, all in kv head kvh: scores for all of them from one pass over
// the keys, then softmax and one pass over the values.
ALWAYS_INLINE void attend_body(const attn_job *j, int64_t t, int kvh, int h0, int count, float *buf) {
    const int hd = j->head_dim;
    const int64_t len = j->kv_len[t];
    const int64_t start = window_start(j, t), lo = start / 64 * 64;
    float *scores = buf;                              // count * max_kv
    float *qh = buf + (size_t)count * j->max_kv;      // count * 256: queries rounded to half
    float *kv = qh + (size_t)count * 256;             // 256: one key or value row as floats
    const float *qrow = j->q + t * (int64_t)j->n_head * hd;
    for (int c = 0; c < count; c++)
        for (int i = 0; i < hd; i++) qh[c * 256 + i] = f16_round(qrow[(int64_t)(h0 + c) * hd + i]);
    const uint16_t *kb = unit_keys(j, t, kvh);
    for (int64_t p0 = lo; p0 < len; p0 += PK_KEY_BLOCK) {
        const int64_t keys = len - p0 < PK_KEY_BLOCK ? len - p0 : PK_KEY_BLOCK;
        for (int c = 0; c < count; c++) {
            float s[PK_KEY_BLOCK];
            score_block(qh + c * 256, kb + p0 * j->kv_dim, hd, j->scale, s);
            memcpy(scores + c * j->max_kv + p0, s, (size_t)keys * sizeof(float));
        }
    }
    const uint16_t *vb = unit_values(j, t, kvh);
    float inv[64];
    for (int c = 0; c < count; c++) {
        float *s = scores + c * j->max_kv;
        float mx = -INFINITY;
        for (int64_t p = start; p < len; p++) mx = s[p] > mx ? s[p] : mx;
        // As llama.cpp: each chunk of 16 summed by the lane tree, the chunks and the tail in double.
        // (Positions before the start are 0; skipped chunks add nothing.)
        double sum = 0.0;
        int64_t p = lo;
        for (; p + LANES <= len; p += LANES) {
            float chunk[LANES];
            for (int l = 0; l < LANES; l++) chunk[l] = s[p + l] = p + l < start ? 0.0f : kexp(s[p + l] - mx);
            sum += (double)tree_sum(chunk);
        }
        for (; p < len; p++) { s[p] = p < start ? 0.0f : kexp(s[p] - mx); sum += (double)s[p]; }
        inv[c] = (float)(1.0 / sum);
        // Probabilities meet the half-precision values rounded to half, as llama.cpp does.
        for (int64_t u = lo; u < len; u++) s[u] = f16_round(s[u] * inv[c]);
    }
    // out[i] = the dot over positions of the probabilities and V[., i], in llama.cpp's order
    // (as score_block's), for every i at once: slot (j, l) of a 64-position chunk accumulates
    // position 64c + 16j + l, so V is read row by row; the tail past the last whole chunk is
    // added in double.
    float *out = j->out + t * (int64_t)j->n_head * hd + (int64_t)h0 * hd;
    float *slots = kv + 256;                          // count * 64 * hd
    memset(slots, 0, (size_t)count * 64 * (size_t)hd * sizeof(float));
    const int64_t whole = len / 64 * 64;
    for (int64_t p = lo; p < whole; p++) {
        load_f16(vb + p * j->v_stride, kv, hd);
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
        for (int64_t p = whole > lo ? whole : lo; p < len; p++) {
            load_f16(vb + p * j->v_stride, kv, hd);
            for (int c = 0; c < count; c++) {
                const float w = scores[c * j->max_kv + p];
                for (int i = 0; i < hd; i++) tail[c * hd + i] += (double)(w * kv[i]);
            }
        }
        for (int c = 0; c < count; c++)
            for (int i = 0; i < hd; i++) out[c * hd + i] = (float)tail[c * hd + i];
    }
}

// `warm`: the unit's row continues the row before it (continues_previous_row): nothing is fetched ahead.
typedef void (*attend_fn)(const attn_job *, int64_t, int, int, int, const next_unit *, int, float *);

static void attend_scalar(const attn_job *j, int64_t t, int kvh, int h0, int count, const next_unit *next, int warm, float *buf) {
    (void)next, (void)warm;
    attend_body(j, t, kvh, h0, count, buf);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c")))
static void attend_avx2(const attn_job *j, int64_t t, int kvh, int h0, int count, const next_unit *next, int warm, float *buf) {
    (void)next, (void)warm;
    attend_body(j, t, kvh, h0, count, buf);
}
#include <immintrin.h>
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), apply_to = function)

// attend_body for head sizes that are whole multiples of 64 (64: SmolLM2, Qwen2; 256: Gemma 3),
// written with intrinsics so that it does per vector what the body does per lane, in the same
// order: the tests hold it to the scalar body's bits. Values are accumulated 64 columns at a
// time (each column's sum on its own, so the grouping changes no bits).

ALWAYS_INLINE __m512 ld_half16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
ALWAYS_INLINE __m512 round_half16(__m512 v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }

// tree_sum of one vector: lanes l + l+8, then l + l+4, l + l+2, l + l+1.
ALWAYS_INLINE float tree_sum16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

// Heads whose values are weighed together (their accumulators fill half the registers).
#define VALUE_HEADS 4

// Slice b of `blocks` of the next unit's keys and values, into L2. Each sequence's cache is read
// once per step, mostly from memory: fetching a whole unit ahead, at the pace of this one's
// blocks, keeps more lines in flight than L1's misses alone allow.
ALWAYS_INLINE void fetch_next_slice(const attn_job *j, const next_unit *nx, int64_t b, int64_t blocks) {
    const int64_t nblocks = (nx->len + PK_KEY_BLOCK - 1) / PK_KEY_BLOCK;
    for (int64_t nb = b * nblocks / blocks; nb < (b + 1) * nblocks / blocks; nb++) {
        const char *k = (const char *)(nx->keys + nb * PK_KEY_BLOCK * j->kv_dim);
        if (nb >= KEYS_AHEAD) // (the first ones are on their way to L1 already: prefetch_keys)
            for (int o = 0; o < j->head_dim * PK_KEY_BLOCK * 2; o += 64) _mm_prefetch(k + o, _MM_HINT_T1);
        for (int64_t p = nb * PK_KEY_BLOCK; p < (nb + 1) * PK_KEY_BLOCK && p < nx->len; p++) {
            const char *v = (const char *)(nx->values + p * j->v_stride);
            for (int o = 0; o < 2 * j->head_dim; o += 64) _mm_prefetch(v + o, _MM_HINT_T1);
            _mm_prefetch(v + 2 * j->head_dim - 1, _MM_HINT_T1);
        }
    }
}

// Queries scored together against a block: each key vector is converted once for all of them.
#define SCORE_QUERIES 3

// Slot l of score_block for the sixteen keys of a block (lane = key), for NQ queries 256 floats
// apart: its four accumulators run over the 64-chunks in order, the first product being
// fmaf(q, k, 0) as the body's (which differs from q*k in the sign of a zero), then folded 0+2, 1+3.
ALWAYS_INLINE void score_slots(const int NQ, const float *qc, const uint16_t *block, const int hd, int l, __m512 *s) {
    __m512 acc[SCORE_QUERIES][4];
    for (int q = 0; q < 4; q++) {
        const __m512 k = ld_half16(block + (16 * q + l) * PK_KEY_BLOCK);
        for (int i = 0; i < NQ; i++) acc[i][q] = _mm512_fmadd_ps(_mm512_set1_ps(qc[256 * i + 16 * q + l]), k, _mm512_setzero_ps());
    }
    for (int c = 64; c < hd; c += 64)
        for (int q = 0; q < 4; q++) {
            const __m512 k = ld_half16(block + (c + 16 * q + l) * PK_KEY_BLOCK);
            for (int i = 0; i < NQ; i++) acc[i][q] = _mm512_fmadd_ps(_mm512_set1_ps(qc[256 * i + c + 16 * q + l]), k, acc[i][q]);
        }
    for (int i = 0; i < NQ; i++) s[i] = _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][2]), _mm512_add_ps(acc[i][1], acc[i][3]));
}

// Slots l and l + 8 added: the first level of the lane tree.
ALWAYS_INLINE void score_pair(const int NQ, const float *qc, const uint16_t *block, const int hd, int l, __m512 *a) {
    __m512 x[SCORE_QUERIES], y[SCORE_QUERIES];
    score_slots(NQ, qc, block, hd, l, x);
    score_slots(NQ, qc, block, hd, l + 8, y);
    for (int i = 0; i < NQ; i++) a[i] = _mm512_add_ps(x[i], y[i]);
}

// The scores of a block's keys for NQ queries, into dst (max_kv floats apart), masked to the
// keys present: the lane tree ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) of the pairs, taken depth
// first so that few partial sums are live at once.
ALWAYS_INLINE void score_block_n(const int NQ, const float *qc, const uint16_t *block, const int hd, __m512 scale, float *dst,
                                 int64_t max_kv, __mmask16 keys) {
    __m512 p[SCORE_QUERIES], r[SCORE_QUERIES], b0[SCORE_QUERIES], c0[SCORE_QUERIES], b1[SCORE_QUERIES];
    score_pair(NQ, qc, block, hd, 0, p), score_pair(NQ, qc, block, hd, 4, r);
    for (int i = 0; i < NQ; i++) b0[i] = _mm512_add_ps(p[i], r[i]);
    score_pair(NQ, qc, block, hd, 2, p), score_pair(NQ, qc, block, hd, 6, r);
    for (int i = 0; i < NQ; i++) c0[i] = _mm512_add_ps(b0[i], _mm512_add_ps(p[i], r[i]));
    score_pair(NQ, qc, block, hd, 1, p), score_pair(NQ, qc, block, hd, 5, r);
    for (int i = 0; i < NQ; i++) b1[i] = _mm512_add_ps(p[i], r[i]);
    score_pair(NQ, qc, block, hd, 3, p), score_pair(NQ, qc, block, hd, 7, r);
    for (int i = 0; i < NQ; i++) {
        const __m512 c1 = _mm512_add_ps(b1[i], _mm512_add_ps(p[i], r[i]));
        _mm512_mask_storeu_ps(dst + i * max_kv, keys, _mm512_mul_ps(_mm512_add_ps(c0[i], c1), scale));
    }
}

// score_block_n for `count` queries, SCORE_QUERIES at a time.
ALWAYS_INLINE void score_queries(const float *qc, int count, const uint16_t *block, const int hd, __m512 scale, float *dst,
                                 int64_t max_kv, __mmask16 keys) {
    for (int c = 0; c < count; c += SCORE_QUERIES) {
        const float *q = qc + 256 * c;
        float *d = dst + c * max_kv;
        switch (count - c) {
        case 1: score_block_n(1, q, block, hd, scale, d, max_kv, keys); break;
        case 2: score_block_n(2, q, block, hd, scale, d, max_kv, keys); break;
        default: score_block_n(3, q, block, hd, scale, d, max_kv, keys); break;
        }
    }
}

// The whole 64-position chunks [lo, whole) of the values weighed by NH heads' probabilities
// (max_kv floats apart), into rows 0..15 of each head's slots (64 * hd floats apart): per (l,
// column vector), the four slots l, l+16, l+32, l+48 of every head stay in registers over all the
// chunks, each value vector converted once for all the heads, then fold (m + m+32, m+16 + m+48,
// their sum) into row l, as attend_body folds its slots.
ALWAYS_INLINE void weigh_values(const int NH, const uint16_t *vb, int64_t stride, int64_t lo, int64_t whole, const float *sc,
                                int64_t max_kv, const int hd, float *slots) {
    for (int l = 0; l < 16; l++)
        for (int d = 0; d < hd / 16; d++) {
            __m512 acc[VALUE_HEADS][4];
            for (int c = 0; c < NH; c++)
                for (int q = 0; q < 4; q++) acc[c][q] = _mm512_setzero_ps();
            for (int64_t base = lo; base < whole; base += 64)
                for (int q = 0; q < 4; q++) {
                    const int64_t p = base + 16 * q + l;
                    const __m512 v = ld_half16(vb + p * stride + 16 * d);
                    for (int c = 0; c < NH; c++) acc[c][q] = _mm512_fmadd_ps(_mm512_set1_ps(sc[c * max_kv + p]), v, acc[c][q]);
                }
            for (int c = 0; c < NH; c++)
                _mm512_storeu_ps(slots + ((size_t)c * 64 + l) * hd + 16 * d,
                                 _mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][2]), _mm512_add_ps(acc[c][1], acc[c][3])));
        }
}

// The lanes of the 16 positions from p that are at or past the window's start.
static inline __mmask16 from_start(int64_t start, int64_t p) {
    return p >= start ? (__mmask16)0xFFFFu : start - p >= 16 ? (__mmask16)0 : (__mmask16)(0xFFFFu << (start - p));
}

ALWAYS_INLINE void attend64n_body(const attn_job *j, int64_t t, int kvh, int h0, int count, const next_unit *next, int warm,
                                  float *buf, const int HD) {
    const int64_t len = j->kv_len[t], stride = j->v_stride;
    const int64_t start = window_start(j, t), lo = start / 64 * 64;
    float *scores = buf;
    float *qh = buf + (size_t)count * j->max_kv;
    float *kv = qh + (size_t)count * 256;
    float *slots = kv + 256;                          // count * 64 * HD
    const float *qrow = j->q + t * (int64_t)j->n_head * HD;
    for (int c = 0; c < count; c++)
        for (int d = 0; d < HD / 16; d++)
            _mm512_storeu_ps(qh + c * 256 + 16 * d, round_half16(_mm512_loadu_ps(qrow + (int64_t)(h0 + c) * HD + 16 * d)));

    // Scores, a block of sixteen keys at a time (lane = key), in score_block's order.
    const uint16_t *kb = unit_keys(j, t, kvh);
    const int64_t block_halves = PK_KEY_BLOCK * j->kv_dim;
    const __m512 scale = _mm512_set1_ps(j->scale);
    const uint16_t *vb = unit_values(j, t, kvh);
    for (int64_t p0 = lo; p0 < len; p0 += 16) {
        const int keys = len - p0 < 16 ? (int)(len - p0) : 16;
        const uint16_t *block = kb + p0 / 16 * block_halves;
        // The cache rarely stays in cache between steps: fetch keys KEYS_AHEAD blocks ahead (the
        // first ones came with the unit before, see attention_task), and this block's values for
        // after the softmax, while this block is scored.
        if (!warm) {
            if (p0 + KEYS_AHEAD * PK_KEY_BLOCK < len)
                for (int o = 0; o < HD * PK_KEY_BLOCK * 2; o += 64)
                    _mm_prefetch((const char *)(block + KEYS_AHEAD * block_halves) + o, _MM_HINT_T0);
            if (next) fetch_next_slice(j, next, p0 / 16, (len + 15) / 16);
            for (int i = 0; i < keys; i++) {
                const char *v = (const char *)(vb + (p0 + i) * stride);
                for (int o = 0; o < 2 * HD; o += 64) _mm_prefetch(v + o, _MM_HINT_T0);
                _mm_prefetch(v + 2 * HD - 1, _MM_HINT_T0);
            }
        }
        score_queries(qh, count, block, HD, scale, scores + p0, j->max_kv, (__mmask16)((1u << keys) - 1u));
    }

    // Softmax per head (positions before the start left out and 0, as in attend_body).
    const int64_t chunks = len / 16 * 16;
    for (int c = 0; c < count; c++) {
        float *s = scores + c * j->max_kv;
        __m512 mv = _mm512_set1_ps(-INFINITY);
        int64_t p = lo;
        for (; p < chunks; p += 16) mv = _mm512_mask_max_ps(mv, from_start(start, p), mv, _mm512_loadu_ps(s + p));
        float mx = _mm512_reduce_max_ps(mv);
        for (; p < len; p++) mx = p >= start && s[p] > mx ? s[p] : mx;
        const __m512 m16 = _mm512_set1_ps(mx);
        double sum = 0.0;
        for (p = lo; p < chunks; p += 16) {
            __m512 e = kexp16(_mm512_sub_ps(_mm512_loadu_ps(s + p), m16));
            if (p < start) e = _mm512_maskz_mov_ps(from_start(start, p), e);
            _mm512_storeu_ps(s + p, e);
            sum += (double)tree_sum16(e);
        }
        for (; p < len; p++) { s[p] = p < start ? 0.0f : kexp(s[p] - mx); sum += (double)s[p]; }
        const float inv = (float)(1.0 / sum);
        const __m512 inv16 = _mm512_set1_ps(inv);
        for (p = lo; p < chunks; p += 16) _mm512_storeu_ps(s + p, round_half16(_mm512_mul_ps(_mm512_loadu_ps(s + p), inv16)));
        for (; p < len; p++) s[p] = f16_round(s[p] * inv);
    }

    // Values: slot m of a 64-position chunk accumulates positions m, m+64, m+128, ... in order,
    // so each slot's sum stays in registers; then the slots are folded as the body folds them.
    float *out = j->out + t * (int64_t)j->n_head * HD + (int64_t)h0 * HD;
    const int64_t whole = len / 64 * 64;
    if (whole > 0) {
        // VALUE_HEADS heads at a time share each converted value vector (weigh_values).
        for (int c0 = 0; c0 < count; c0 += VALUE_HEADS) {
            const float *sc = scores + c0 * j->max_kv;
            float *a = slots + (size_t)c0 * 64 * HD;
            switch (count - c0) {
            case 1: weigh_values(1, vb, stride, lo, whole, sc, j->max_kv, HD, a); break;
            case 2: weigh_values(2, vb, stride, lo, whole, sc, j->max_kv, HD, a); break;
            case 3: weigh_values(3, vb, stride, lo, whole, sc, j->max_kv, HD, a); break;
            default: weigh_values(4, vb, stride, lo, whole, sc, j->max_kv, HD, a); break;
            }
        }
        for (int c = 0; c < count; c++) {
            float *a = slots + (size_t)c * 64 * HD;
            for (int d = 0; d < HD / 16; d++) {
                for (int width = 8; width >= 1; width /= 2)
                    for (int l = 0; l < width; l++)
                        _mm512_storeu_ps(a + l * HD + 16 * d, _mm512_add_ps(_mm512_loadu_ps(a + l * HD + 16 * d), _mm512_loadu_ps(a + (l + width) * HD + 16 * d)));
                _mm512_storeu_ps(out + c * HD + 16 * d, _mm512_loadu_ps(a + 16 * d));
            }
        }
    } else {
        memset(out, 0, (size_t)count * HD * sizeof(float));
    }
    if (whole < len) {
        for (int c = 0; c < count; c++)
            for (int g = 0; g < HD; g += 64) {
            __m512d acc[8];
            for (int d = 0; d < 4; d++) {
                const __m512 o = _mm512_loadu_ps(out + c * HD + g + 16 * d);
                acc[2 * d] = _mm512_cvtps_pd(_mm512_castps512_ps256(o));
                acc[2 * d + 1] = _mm512_cvtps_pd(_mm512_extractf32x8_ps(o, 1));
            }
            for (int64_t p = whole > lo ? whole : lo; p < len; p++) {
                const uint16_t *v = vb + p * stride + g;
                const __m512 w = _mm512_set1_ps(scores[c * j->max_kv + p]);
                for (int d = 0; d < 4; d++) {
                    const __m512 prod = _mm512_mul_ps(w, ld_half16(v + 16 * d));
                    acc[2 * d] = _mm512_add_pd(acc[2 * d], _mm512_cvtps_pd(_mm512_castps512_ps256(prod)));
                    acc[2 * d + 1] = _mm512_add_pd(acc[2 * d + 1], _mm512_cvtps_pd(_mm512_extractf32x8_ps(prod, 1)));
                }
            }
            for (int d = 0; d < 4; d++)
                _mm512_storeu_ps(out + c * HD + g + 16 * d,
                                 _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(acc[2 * d])), _mm512_cvtpd_ps(acc[2 * d + 1]), 1));
        }
    }
}

// The common head sizes get a copy each with their loops unrolled (a few percent of a prefill).
static void attend64_avx512(const attn_job *j, int64_t t, int kvh, int h0, int count, const next_unit *next, int warm,
                             float *buf) {
    attend64n_body(j, t, kvh, h0, count, next, warm, buf, 64);
}
static void attend128_avx512(const attn_job *j, int64_t t, int kvh, int h0, int count, const next_unit *next, int warm,
                              float *buf) {
    attend64n_body(j, t, kvh, h0, count, next, warm, buf, 128);
}
static void attend256_avx512(const attn_job *j, int64_t t, int kvh, int h0, int count, const next_unit *next, int warm,
                              float *buf) {
    attend64n_body(j, t, kvh, h0, count, next, warm, buf, 256);
}

static void attend_avx512(const attn_job *j, int64_t t, int kvh, int h0, int count, const next_unit *next, int warm, float *buf) {
    if (j->head_dim == 64) attend64_avx512(j, t, kvh, h0, count, next, warm, buf);
    else if (j->head_dim == 128) attend128_avx512(j, t, kvh, h0, count, next, warm, buf);
    else if (j->head_dim == 256) attend256_avx512(j, t, kvh, h0, count, next, warm, buf);
    else if (j->head_dim % 64 == 0) attend64n_body(j, t, kvh, h0, count, next, warm, buf, j->head_dim);
    else attend_body(j, t, kvh, h0, count, buf);
}
#pragma clang attribute pop
#endif

// Follows the matmul's choice, so a test that forces the scalar path gets it here too.
static attend_fn pick(void) { return ISA_PICK(attend_fn, attend_scalar, attend_avx2, attend_avx512); }

// scores and queries per head, a key/value row, then 64 slots of head_dim and a double tail per head
static size_t per_thread(int64_t max_kv, int group) {
    // whole 64-byte lines, so that each thread's part (and its doubles) stays aligned
    return ((size_t)group * (size_t)(max_kv + 256 + 64 * 256 + 2 * 256) + 256 + 16 + 15) & ~(size_t)15;
}

size_t pk_attention_scratch_floats(int64_t max_kv, int group, int threads) {
    return (size_t)threads * per_thread(max_kv, group < 1 ? 1 : group);
}

typedef struct {
    const attn_job *j;
    attend_fn fn;
    _Atomic int64_t next; // the first unit no thread has claimed
} attn_task_ctx;

// Starts fetching the first keys of a unit (its first KEYS_AHEAD blocks; the unit fetches the rest
// ahead of itself), so that they arrive while the unit before it runs.
static void prefetch_keys(const attn_job *j, int64_t t, int kvh) {
    const int64_t blocks = (j->kv_len[t] + PK_KEY_BLOCK - 1) / PK_KEY_BLOCK;
    const size_t bytes = (size_t)j->head_dim * PK_KEY_BLOCK * 2, block_bytes = (size_t)j->kv_dim * PK_KEY_BLOCK * 2;
    const char *k = (const char *)unit_keys(j, t, kvh);
    for (int64_t b = 0; b < blocks && b < KEYS_AHEAD; b++, k += block_bytes)
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(k + o, 0, 3);
}

// Threads claim units one at a time from a shared counter, each holding the claim on its next
// unit while it runs the current one (to fetch the next one's cache meanwhile): a unit's time
// depends on its context and on the memory, so a fixed split leaves one thread waiting.
static void attention_task(void *ctx, int ith, int nth) {
    (void)nth;
    attn_task_ctx *c = ctx;
    const attn_job *j = c->j;
    float *buf = j->scratch + (size_t)ith * per_thread(j->max_kv, j->group);
    // Units are (row, kv head), or (row, head) when there are too few of those to share out.
    const int per_unit = j->split ? 1 : j->group;
    const int64_t units_per_row = j->n_head / per_unit;
    const int64_t total = j->n * units_per_row;
    int64_t u = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
    while (u < total) {
        const int64_t un = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
        const int64_t t = u / units_per_row;
        const int h0 = (int)(u % units_per_row) * per_unit;
        next_unit next = {0};
        if (un < total) {
            const int64_t tn = un / units_per_row;
            const int kvhn = (int)(un % units_per_row) * per_unit / j->group;
            next = (next_unit){unit_keys(j, tn, kvhn), unit_values(j, tn, kvhn), j->kv_len[tn]};
            if (!continues_previous_row(j, tn)) prefetch_keys(j, tn, kvhn);
        }
        // Only with units of whole kv heads (many rows): single-head units are few rows, whose
        // caches are small and which take turns on one kv head's cache.
        const int fetch = un < total && !j->split;
        const int warm = continues_previous_row(j, t);
        c->fn(j, t, h0 / j->group, h0, per_unit, fetch && !warm ? &next : NULL, warm, buf);
        u = un;
    }
}

void pk_attention(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                  const uint16_t *const *keys, const uint16_t *const *values, const int32_t *kv_len,
                  int64_t v_stride, float scale, float *out, float *scratch) {
    pk_attention_window(pool, q, n, n_head, n_kv_head, head_dim, keys, values, NULL, kv_len, v_stride, scale, out, scratch);
}

void pk_attention_window(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                         const uint16_t *const *keys, const uint16_t *const *values, const int32_t *kv_start,
                         const int32_t *kv_len, int64_t v_stride, float scale, float *out, float *scratch) {
    attn_job j = {q, n, n_head, n_kv_head, head_dim, n_head / n_kv_head, 0, (int64_t)n_kv_head * head_dim, keys, values, kv_start, kv_len,
                  v_stride, 0, scale, out, scratch};
    for (int64_t t = 0; t < n; t++) j.max_kv = kv_len[t] > j.max_kv ? kv_len[t] : j.max_kv;
    j.split = n * n_kv_head < 4 * (int64_t)pk_pool_threads(pool);
    attn_task_ctx c = {&j, pick(), 0};
    pk_pool_run(pool, attention_task, &c);
}
