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

// The specification of attention, which every instruction set follows bit for bit (the scalar
// body below is it): for each (row, head), over the row's positions [start, len),
//   score[p] = (the dot product of the query rounded to half and key p, fmaf over the dimensions
//              in order, from 0) * scale; with a soft cap c, then c * tanhf(score[p] * (1 / c))
//              (Gemma 2's attention logits, as llama.cpp caps them);
//   e[p]     = kexp(score[p] - the largest score);
//   sum      = the lane tree (tree_sum) of sixteen partial sums, lane l adding e[p] of the
//              positions p = l (mod 16) in order;
//   w[p]     = e[p] * (1 / sum), rounded to half;
//   out[i]   = fmaf of w[p] * value[p][i] over the positions in order, from 0.
// The query and the weights meet the half-precision keys and values rounded to half, as
// llama.cpp rounds them (its products convert them); only the order of the sums is this
// kernel's own, chosen so that every product is an FMA and no sum is folded. Each (row, head) depends
// only on its query and its own positions, so rows can be computed together in any grouping:
// a unit of work is a tile of rows of one sequence with the heads of one kv head, and each key
// or value vector read is used for all of them.

typedef struct {
    const float *q;
    int n_head, n_kv_head, head_dim, group, split;
    int64_t kv_dim;
    const uint16_t *const *keys, *const *values;
    const int32_t *kv_start, *kv_len; // kv_start NULL: every row from position 0
    int64_t v_stride, max_kv, score_stride;
    const int32_t *tiles;             // tile i: rows [tiles[i], tiles[i + 1])
    int64_t n_tiles;
    float scale, softcap; // softcap 0: none
    float *out, *scratch;
} attn_job;

// Rows a tile may hold for `group` query heads per kv head: up to 14 (row, head) pairs, whose
// scores stay in registers together (SCORE_PAIRS).
static int tile_rows(int group) { return group >= 14 ? 1 : 14 / group > 8 ? 8 : 14 / group; }

// A unit: rows [t0, t0 + rows) of one sequence, heads [h0, h0 + count) of kv head kvh. Its
// (row, head) pairs are numbered r * count + c; their queries, scores and ranges live in the
// thread's scratch.
typedef struct {
    int64_t t0;
    int rows, kvh, h0, count;
} attn_unit;

// Where pair i of unit u starts in q and in out (rows of n_head * head_dim).
ALWAYS_INLINE int64_t pair_offset(const attn_job *j, const attn_unit *u, int i) {
    return ((u->t0 + i / u->count) * j->n_head + u->h0 + i % u->count) * j->head_dim;
}

// The smallest start and the largest end of n pairs' ranges.
ALWAYS_INLINE void pairs_span(const int64_t *from, const int64_t *to, int n, int64_t *lo, int64_t *hi) {
    *lo = from[0], *hi = to[0];
    for (int i = 1; i < n; i++) *lo = from[i] < *lo ? from[i] : *lo, *hi = to[i] > *hi ? to[i] : *hi;
}

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
// that cache was read moments ago, so a unit starting at row t fetches nothing ahead.
ALWAYS_INLINE int continues_previous_row(const attn_job *j, int64_t t) { return t > 0 && j->keys[t - 1] == j->keys[t]; }

ALWAYS_INLINE int64_t window_start(const attn_job *j, int64_t t) { return j->kv_start ? j->kv_start[t] : 0; }

typedef struct {
    float *q;        // pairs * head_dim: the pairs' queries
    float *scores;   // pairs * score_stride: scores, then e, at their absolute positions
    int64_t *from, *to; // pairs: each pair's [start, len)
    float *row;      // 2 * 256: a value row and an accumulator (scalar body)
} attn_scratch;

static size_t per_thread(int64_t max_kv, int group) {
    const size_t pairs = (size_t)tile_rows(group) * (size_t)group;
    const size_t stride = (size_t)(max_kv + 15) / 16 * 16;
    // (a whole number of 64-byte lines per thread, so that threads share no line)
    return (pairs * 256 + pairs * stride + pairs * 4 + 512 + 4 * 16) / 16 * 16;
}

static attn_scratch scratch_of(const attn_job *j, int ith) {
    float *b = j->scratch + (size_t)ith * per_thread(j->max_kv, j->group);
    const size_t pairs = (size_t)tile_rows(j->group) * (size_t)j->group;
    attn_scratch s;
    s.q = b;
    s.scores = s.q + pairs * 256;
    s.from = (int64_t *)(s.scores + pairs * (size_t)j->score_stride);
    s.to = s.from + pairs;
    s.row = (float *)(s.to + pairs);
    return s;
}

// The pairs' queries and ranges into the scratch; returns the number of pairs.
ALWAYS_INLINE int unit_setup(const attn_job *j, const attn_unit *u, attn_scratch *s) {
    const int hd = j->head_dim, pairs = u->rows * u->count;
    for (int i = 0; i < pairs; i++) {
        const int64_t t = u->t0 + i / u->count;
        const float *q = j->q + pair_offset(j, u, i);
        for (int d = 0; d < hd; d++) s->q[(size_t)i * hd + d] = f16_round(q[d]);
        s->from[i] = window_start(j, t);
        s->to[i] = j->kv_len[t];
    }
    return pairs;
}

// The scores of the sixteen keys of a block (pk_store_key's layout, this kv head's part) for
// one query, key innermost (where the compiler vectorizes).
ALWAYS_INLINE void score_block(const float *q, const uint16_t *block, int hd, float scale, float *s) {
    float acc[PK_KEY_BLOCK] = {0};
    for (int d = 0; d < hd; d++) {
        float kf[PK_KEY_BLOCK];
        load_f16(block + d * PK_KEY_BLOCK, kf, PK_KEY_BLOCK);
        for (int key = 0; key < PK_KEY_BLOCK; key++) acc[key] = fmaf(q[d], kf[key], acc[key]);
    }
    for (int key = 0; key < PK_KEY_BLOCK; key++) s[key] = acc[key] * scale;
}

// A pair's scores over [from, to) capped at +-cap (cap > 0), in scalar code whatever the
// instruction set: tanhf is libm's.
static void softcap_scores(float *s, int64_t from, int64_t to, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t p = from; p < to; p++) s[p] = cap * tanhf(s[p] * inv);
}

// Turns a pair's scores over [from, to) into their weights w.
ALWAYS_INLINE void softmax_weights(float *s, int64_t from, int64_t to) {
    if (to <= from) return;
    float mx = -INFINITY;
    for (int64_t p = from; p < to; p++) mx = s[p] > mx ? s[p] : mx;
    float lane[LANES] = {0};
    for (int64_t p = from; p < to; p++) {
        s[p] = kexp(s[p] - mx);
        lane[p % LANES] += s[p];
    }
    const float inv = 1.0f / tree_sum(lane);
    for (int64_t p = from; p < to; p++) s[p] = f16_round(s[p] * inv);
}

// The specification, one pair at a time.
ALWAYS_INLINE void attend_body(const attn_job *j, const attn_unit *u, attn_scratch *s) {
    const int hd = j->head_dim;
    const int pairs = unit_setup(j, u, s);
    const uint16_t *kb = unit_keys(j, u->t0, u->kvh), *vb = unit_values(j, u->t0, u->kvh);
    for (int i = 0; i < pairs; i++) {
        float *sc = s->scores + (size_t)i * j->score_stride;
        const int64_t from = s->from[i], to = s->to[i];
        for (int64_t p0 = from / PK_KEY_BLOCK * PK_KEY_BLOCK; p0 < to; p0 += PK_KEY_BLOCK)
            score_block(s->q + (size_t)i * hd, kb + p0 * j->kv_dim, hd, j->scale, sc + p0);
        if (j->softcap > 0.0f) softcap_scores(sc, from, to, j->softcap);
        softmax_weights(sc, from, to);
        float *v = s->row, *acc = s->row + 256;
        for (int d = 0; d < hd; d++) acc[d] = 0.0f;
        for (int64_t p = from; p < to; p++) {
            load_f16(vb + p * j->v_stride, v, hd);
            for (int d = 0; d < hd; d++) acc[d] = fmaf(sc[p], v[d], acc[d]);
        }
        float *out = j->out + pair_offset(j, u, i);
        for (int d = 0; d < hd; d++) out[d] = acc[d];
    }
}

// The unit a thread runs after the current one, whose keys and values it fetches meanwhile.
typedef struct {
    const uint16_t *keys, *values;
    int64_t from, len; // the positions it reads (a window's start on)
} next_unit;

// `warm`: the unit's first row continues the row before it (continues_previous_row): nothing
// is fetched ahead.
typedef void (*attend_fn)(const attn_job *, const attn_unit *, attn_scratch *, const next_unit *, int);

static void attend_scalar(const attn_job *j, const attn_unit *u, attn_scratch *s, const next_unit *next, int warm) {
    (void)next, (void)warm;
    attend_body(j, u, s);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c")))
static void attend_avx2(const attn_job *j, const attn_unit *u, attn_scratch *s, const next_unit *next, int warm) {
    (void)next, (void)warm;
    attend_body(j, u, s);
}
#include <immintrin.h>
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), apply_to = function)

// attend_body for head sizes that are multiples of 16 (up to 256), with intrinsics: per vector
// what the body does per lane, in the same order (the tests hold it to the body's bits).

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

// Key blocks fetched into L1 ahead of the one being scored (a unit's first ones during the unit
// before it).
#define KEYS_AHEAD 3

// Slice b of `blocks` of the next unit's keys and values, into L2. Each sequence's cache is read
// once per step, mostly from memory: fetching a whole unit ahead, at the pace of this one's
// blocks, keeps more lines in flight than L1's misses alone allow.
ALWAYS_INLINE void fetch_next_slice(const attn_job *j, const next_unit *nx, int64_t b, int64_t blocks) {
    const int64_t first = nx->from / PK_KEY_BLOCK, nblocks = (nx->len + PK_KEY_BLOCK - 1) / PK_KEY_BLOCK - first;
    for (int64_t i = b * nblocks / blocks; i < (b + 1) * nblocks / blocks; i++) {
        const int64_t nb = first + i;
        const char *k = (const char *)(nx->keys + nb * PK_KEY_BLOCK * j->kv_dim);
        if (i >= KEYS_AHEAD) // (the first ones are on their way to L1 already: prefetch_keys)
            for (int o = 0; o < j->head_dim * PK_KEY_BLOCK * 2; o += 64) _mm_prefetch(k + o, _MM_HINT_T1);
        for (int64_t p = nb * PK_KEY_BLOCK > nx->from ? nb * PK_KEY_BLOCK : nx->from; p < (nb + 1) * PK_KEY_BLOCK && p < nx->len; p++) {
            const char *v = (const char *)(nx->values + p * j->v_stride);
            for (int o = 0; o < 2 * j->head_dim; o += 64) _mm_prefetch(v + o, _MM_HINT_T1);
            _mm_prefetch(v + 2 * j->head_dim - 1, _MM_HINT_T1);
        }
    }
}

// Pairs scored together (one accumulator per pair and key block).
#define SCORE_PAIRS 14
// Key blocks scored together for NR pairs, so that at least eight sums are in flight.
#define SCORE_BLOCKS(NR) ((NR) >= 8 ? 1 : (NR) >= 3 ? (8 + (NR) - 1) / (NR) : 4)

// Scores of NR pairs (queries HD floats apart) against NB key blocks from `block`: each key
// vector converted once for all the pairs, each pair's sums in registers over all dimensions.
ALWAYS_INLINE void score_nb(const int NR, const int NB, const float *q, const uint16_t *block, int64_t block_halves,
                            const int HD, __m512 scale, float *dst, int64_t stride) {
    __m512 acc[4][SCORE_PAIRS];
    for (int b = 0; b < NB; b++)
        for (int r = 0; r < NR; r++) acc[b][r] = _mm512_setzero_ps();
    for (int d = 0; d < HD; d++)
        for (int b = 0; b < NB; b++) {
            const __m512 k = ld_half16(block + b * block_halves + d * PK_KEY_BLOCK);
            for (int r = 0; r < NR; r++) acc[b][r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r * HD + d]), k, acc[b][r]);
        }
    for (int b = 0; b < NB; b++)
        for (int r = 0; r < NR; r++) _mm512_storeu_ps(dst + r * stride + b * PK_KEY_BLOCK, _mm512_mul_ps(acc[b][r], scale));
}

// Blocks [b, b + nb) for NR pairs, nb being SCORE_BLOCKS(NR) or 1.
ALWAYS_INLINE void score_blocks(const int NR, int nb, const float *q, const uint16_t *block, int64_t block_halves,
                                const int HD, __m512 scale, float *dst, int64_t stride) {
    if (nb == SCORE_BLOCKS(NR)) score_nb(NR, SCORE_BLOCKS(NR), q, block, block_halves, HD, scale, dst, stride);
    else score_nb(NR, 1, q, block, block_halves, HD, scale, dst, stride);
}

// The lanes of the 16 positions from p inside [from, to).
ALWAYS_INLINE __mmask16 lanes_in(int64_t from, int64_t to, int64_t p) {
    const uint32_t lo = from <= p ? 0xFFFFu : from - p >= 16 ? 0u : 0xFFFFu << (from - p);
    const uint32_t hi = to >= p + 16 ? 0xFFFFu : to <= p ? 0u : 0xFFFFu >> (16 - (to - p));
    return (__mmask16)(lo & hi);
}

// softmax_weights with vectors: the blocks around [from, to) masked to it.
ALWAYS_INLINE void softmax_weights16(float *s, int64_t from, int64_t to) {
    if (to <= from) return;
    const int64_t p0 = from / 16 * 16;
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (int64_t p = p0; p < to; p += 16) mv = _mm512_mask_max_ps(mv, lanes_in(from, to, p), mv, _mm512_loadu_ps(s + p));
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
    __m512 lane = _mm512_setzero_ps();
    for (int64_t p = p0; p < to; p += 16) {
        const __mmask16 m = lanes_in(from, to, p);
        const __m512 e = kexp16(_mm512_sub_ps(_mm512_loadu_ps(s + p), mx));
        _mm512_mask_storeu_ps(s + p, m, e);
        lane = _mm512_mask_add_ps(lane, m, lane, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / tree_sum16(lane));
    for (int64_t p = p0; p < to; p += 16)
        _mm512_mask_storeu_ps(s + p, lanes_in(from, to, p), round_half16(_mm512_mul_ps(_mm512_loadu_ps(s + p), inv)));
}

// Pairs weighed together: four accumulators each for 64 columns.
#define VALUE_PAIRS 6

// Positions [p0, p1) of weigh_nr: each pair's FMAs, only where the position is in its range
// when `checked`.
ALWAYS_INLINE void weigh_span(const int NR, const int W, const int checked, const uint16_t *vb, int64_t stride, const float *e,
                              int64_t estride, const int64_t *from, const int64_t *to, int64_t p0, int64_t p1,
                              __m512 acc[VALUE_PAIRS][4]) {
    for (int64_t p = p0; p < p1; p++) {
        __m512 v[4];
        for (int w = 0; w < W; w++) v[w] = ld_half16(vb + p * stride + 16 * w);
        for (int r = 0; r < NR; r++)
            if (!checked || (p >= from[r] && p < to[r])) {
                const __m512 x = _mm512_set1_ps(e[r * estride + p]);
                for (int w = 0; w < W; w++) acc[r][w] = _mm512_fmadd_ps(x, v[w], acc[r][w]);
            }
    }
}

// The values of columns [g, g + 16 W) weighed by NR pairs' w (score_stride apart) over their
// ranges, in order of position, each value vector converted once for all the pairs; the
// positions every pair has, [both_from, both_to), without checks.
ALWAYS_INLINE void weigh_nr(const int NR, const int W, const uint16_t *vb, int64_t stride, const float *e, int64_t estride,
                            const int64_t *from, const int64_t *to, float *const *out) {
    int64_t lo, hi, both_from = from[0], both_to = to[0];
    pairs_span(from, to, NR, &lo, &hi);
    for (int r = 1; r < NR; r++)
        both_from = from[r] > both_from ? from[r] : both_from, both_to = to[r] < both_to ? to[r] : both_to;
    const int64_t a = both_from < hi ? both_from : hi, z = both_to > a ? both_to : a;
    __m512 acc[VALUE_PAIRS][4];
    for (int r = 0; r < NR; r++)
        for (int w = 0; w < W; w++) acc[r][w] = _mm512_setzero_ps();
    weigh_span(NR, W, 1, vb, stride, e, estride, from, to, lo, a, acc);
    weigh_span(NR, W, 0, vb, stride, e, estride, from, to, a, z, acc);
    weigh_span(NR, W, 1, vb, stride, e, estride, from, to, z, hi, acc);
    for (int r = 0; r < NR; r++)
        for (int w = 0; w < W; w++) _mm512_storeu_ps(out[r] + 16 * w, acc[r][w]);
}

// weigh_nr for NR pairs over W = 1..4 column vectors.
ALWAYS_INLINE void weigh_w(const int NR, int w, const uint16_t *vb, int64_t stride, const float *e, int64_t estride,
                           const int64_t *from, const int64_t *to, float *const *out) {
    switch (w) {
    case 1: weigh_nr(NR, 1, vb, stride, e, estride, from, to, out); break;
    case 2: weigh_nr(NR, 2, vb, stride, e, estride, from, to, out); break;
    case 3: weigh_nr(NR, 3, vb, stride, e, estride, from, to, out); break;
    default: weigh_nr(NR, 4, vb, stride, e, estride, from, to, out); break;
    }
}

ALWAYS_INLINE void attend16n_body(const attn_job *j, const attn_unit *u, attn_scratch *s, const next_unit *next, int warm,
                                  const int HD) {
    const int pairs = unit_setup(j, u, s);
    const int64_t stride = j->v_stride, ss = j->score_stride;
    int64_t lo, hi;
    pairs_span(s->from, s->to, pairs, &lo, &hi);
    const uint16_t *kb = unit_keys(j, u->t0, u->kvh), *vb = unit_values(j, u->t0, u->kvh);
    const int64_t block_halves = PK_KEY_BLOCK * j->kv_dim;
    const __m512 scale = _mm512_set1_ps(j->scale);

    // Scores, SCORE_PAIRS pairs at a time, over the blocks that any of them needs.
    const int64_t b_lo = lo / 16, b_hi = (hi + 15) / 16;
    for (int i0 = 0; i0 < pairs; i0 += SCORE_PAIRS) {
        const int nr = pairs - i0 < SCORE_PAIRS ? pairs - i0 : SCORE_PAIRS;
        const int nb_max = SCORE_BLOCKS(nr);
        const float *q = s->q + (size_t)i0 * HD;
        for (int64_t b = b_lo; b < b_hi;) {
            const int nb = b + nb_max <= b_hi ? nb_max : 1;
            // The cache rarely stays in cache between decode steps: fetch keys KEYS_AHEAD blocks
            // ahead (the first ones came with the unit before, see attention_task), and these
            // blocks' values for after the softmax, while these blocks are scored.
            if (!warm && i0 == 0)
                for (int64_t f = b; f < b + nb; f++) {
                    if (f + KEYS_AHEAD < b_hi)
                        for (int o = 0; o < HD * PK_KEY_BLOCK * 2; o += 64)
                            _mm_prefetch((const char *)(kb + (f + KEYS_AHEAD) * block_halves) + o, _MM_HINT_T0);
                    if (next) fetch_next_slice(j, next, f - b_lo, b_hi - b_lo);
                    for (int64_t p = f * 16; p < f * 16 + 16 && p < hi; p++) {
                        const char *v = (const char *)(vb + p * stride);
                        for (int o = 0; o < 2 * HD; o += 64) _mm_prefetch(v + o, _MM_HINT_T0);
                        _mm_prefetch(v + 2 * HD - 1, _MM_HINT_T0);
                    }
                }
            const uint16_t *block = kb + b * block_halves;
            float *dst = s->scores + (size_t)i0 * ss + b * 16;
            switch (nr) {
#define SCORE_CASE(NR) case NR: score_blocks(NR, nb, q, block, block_halves, HD, scale, dst, ss); break;
            SCORE_CASE(1) SCORE_CASE(2) SCORE_CASE(3) SCORE_CASE(4) SCORE_CASE(5) SCORE_CASE(6)
            SCORE_CASE(7) SCORE_CASE(8) SCORE_CASE(9) SCORE_CASE(10) SCORE_CASE(11) SCORE_CASE(12) SCORE_CASE(13)
            default: SCORE_CASE(14)
#undef SCORE_CASE
            }
            b += nb;
        }
    }

    if (j->softcap > 0.0f)
        for (int i = 0; i < pairs; i++) softcap_scores(s->scores + (size_t)i * ss, s->from[i], s->to[i], j->softcap);
    for (int i = 0; i < pairs; i++) softmax_weights16(s->scores + (size_t)i * ss, s->from[i], s->to[i]);

    // Values: VALUE_PAIRS pairs at a time, 64 columns at a time.
    for (int i0 = 0; i0 < pairs; i0 += VALUE_PAIRS) {
        const int nr = pairs - i0 < VALUE_PAIRS ? pairs - i0 : VALUE_PAIRS;
        for (int g = 0; g < HD; g += 64) {
            const int w = (HD - g) / 16 < 4 ? (HD - g) / 16 : 4;
            float *out[VALUE_PAIRS];
            for (int r = 0; r < nr; r++) out[r] = j->out + pair_offset(j, u, i0 + r) + g;
            const float *e = s->scores + (size_t)i0 * ss;
            const int64_t *from = s->from + i0, *to = s->to + i0;
            switch (nr) {
            case 1: weigh_w(1, w, vb + g, stride, e, ss, from, to, out); break;
            case 2: weigh_w(2, w, vb + g, stride, e, ss, from, to, out); break;
            case 3: weigh_w(3, w, vb + g, stride, e, ss, from, to, out); break;
            case 4: weigh_w(4, w, vb + g, stride, e, ss, from, to, out); break;
            case 5: weigh_w(5, w, vb + g, stride, e, ss, from, to, out); break;
            default: weigh_w(6, w, vb + g, stride, e, ss, from, to, out); break;
            }
        }
    }
}

// The common head sizes get a copy each with their loops unrolled.
static void attend64_avx512(const attn_job *j, const attn_unit *u, attn_scratch *s, const next_unit *next, int warm) {
    attend16n_body(j, u, s, next, warm, 64);
}
static void attend128_avx512(const attn_job *j, const attn_unit *u, attn_scratch *s, const next_unit *next, int warm) {
    attend16n_body(j, u, s, next, warm, 128);
}
static void attend256_avx512(const attn_job *j, const attn_unit *u, attn_scratch *s, const next_unit *next, int warm) {
    attend16n_body(j, u, s, next, warm, 256);
}

static void attend_avx512(const attn_job *j, const attn_unit *u, attn_scratch *s, const next_unit *next, int warm) {
    if (j->head_dim == 64) attend64_avx512(j, u, s, next, warm);
    else if (j->head_dim == 128) attend128_avx512(j, u, s, next, warm);
    else if (j->head_dim == 256) attend256_avx512(j, u, s, next, warm);
    else if (j->head_dim % 16 == 0) attend16n_body(j, u, s, next, warm, j->head_dim);
    else attend_body(j, u, s);
}
#pragma clang attribute pop
#endif

// Follows the matmul's choice, so a test that forces the scalar path gets it here too.
static attend_fn pick(void) { return ISA_PICK(attend_fn, attend_scalar, attend_avx2, attend_avx512); }

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
static void prefetch_keys(const attn_job *j, const next_unit *nx) {
    const int64_t first = nx->from / PK_KEY_BLOCK, end = (nx->len + PK_KEY_BLOCK - 1) / PK_KEY_BLOCK;
    const size_t bytes = (size_t)j->head_dim * PK_KEY_BLOCK * 2, block_bytes = (size_t)j->kv_dim * PK_KEY_BLOCK * 2;
    const char *k = (const char *)nx->keys + (size_t)first * block_bytes;
    for (int64_t b = first; b < end && b < first + 3; b++, k += block_bytes)
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(k + o, 0, 3);
}

// Unit u: a tile and a kv head, or (with `split`) a tile and one head.
static attn_unit unit_at(const attn_job *j, int64_t u) {
    const int per_unit = j->split ? 1 : j->group;
    const int64_t per_tile = j->n_head / per_unit;
    const int64_t tile = u / per_tile;
    const int h0 = (int)(u % per_tile) * per_unit;
    const int64_t t0 = j->tiles[tile];
    return (attn_unit){t0, (int)(j->tiles[tile + 1] - t0), h0 / j->group, h0, per_unit};
}

// Threads claim units one at a time from a shared counter, each holding the claim on its next
// unit while it runs the current one (to fetch the next one's cache meanwhile): a unit's time
// depends on its context and on the memory, so a fixed split leaves one thread waiting.
static void attention_task(void *ctx, int ith, int nth) {
    (void)nth;
    attn_task_ctx *c = ctx;
    const attn_job *j = c->j;
    attn_scratch s = scratch_of(j, ith);
    const int64_t total = j->n_tiles * (j->n_head / (j->split ? 1 : j->group));
    int64_t u = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
    while (u < total) {
        const int64_t un = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
        const attn_unit unit = unit_at(j, u);
        next_unit next = {0};
        if (un < total) {
            const attn_unit nu = unit_at(j, un);
            next = (next_unit){unit_keys(j, nu.t0, nu.kvh), unit_values(j, nu.t0, nu.kvh), window_start(j, nu.t0), j->kv_len[nu.t0]};
            for (int64_t t = nu.t0 + 1; t < nu.t0 + nu.rows; t++) {
                next.from = window_start(j, t) < next.from ? window_start(j, t) : next.from;
                next.len = j->kv_len[t] > next.len ? j->kv_len[t] : next.len;
            }
            if (!continues_previous_row(j, nu.t0)) prefetch_keys(j, &next);
        }
        // Only with units of whole kv heads (many rows): single-head units are few rows, whose
        // caches are small and which take turns on one kv head's cache.
        const int fetch = un < total && !j->split;
        const int warm = continues_previous_row(j, unit.t0);
        c->fn(j, &unit, &s, fetch && !warm ? &next : NULL, warm);
        u = un;
    }
}

// Rows handed to the pool at once.
#define TILED_ROWS 1024

void pk_attention(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                  const uint16_t *const *keys, const uint16_t *const *values, const int32_t *kv_len,
                  int64_t v_stride, float scale, float *out, float *scratch) {
    pk_attention_window(pool, q, n, n_head, n_kv_head, head_dim, keys, values, NULL, kv_len, v_stride, scale, out, scratch);
}

void pk_attention_window(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                         const uint16_t *const *keys, const uint16_t *const *values, const int32_t *kv_start,
                         const int32_t *kv_len, int64_t v_stride, float scale, float *out, float *scratch) {
    pk_attention_capped(pool, q, n, n_head, n_kv_head, head_dim, keys, values, kv_start, kv_len, v_stride, scale, 0.0f, out, scratch);
}

void pk_attention_capped(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                         const uint16_t *const *keys, const uint16_t *const *values, const int32_t *kv_start,
                         const int32_t *kv_len, int64_t v_stride, float scale, float softcap, float *out, float *scratch) {
    if (n <= 0) return;
    attn_job j = {q, n_head, n_kv_head, head_dim, n_head / n_kv_head, 0, (int64_t)n_kv_head * head_dim, keys, values, kv_start, kv_len,
                  v_stride, 0, 0, NULL, 0, scale, softcap > 0.0f ? softcap : 0.0f, out, scratch};
    for (int64_t t = 0; t < n; t++) j.max_kv = kv_len[t] > j.max_kv ? kv_len[t] : j.max_kv;
    j.score_stride = (j.max_kv + 15) / 16 * 16;
    // Tiles: runs of rows of one sequence (the same caches), tile_rows at most; rows go to the
    // pool TILED_ROWS at a time (any grouping gives the same bits).
    const int most = tile_rows(j.group);
    for (int64_t r0 = 0; r0 < n; r0 += TILED_ROWS) {
        const int64_t r1 = n - r0 < TILED_ROWS ? n : r0 + TILED_ROWS;
        int32_t tiles[TILED_ROWS + 1];
        int64_t count = 0;
        for (int64_t t = r0; t < r1; t++)
            if (t == r0 || keys[t] != keys[t - 1] || values[t] != values[t - 1] || t - tiles[count - 1] >= most)
                tiles[count++] = (int32_t)t;
        tiles[count] = (int32_t)r1;
        j.tiles = tiles, j.n_tiles = count;
        j.split = count * n_kv_head < 4 * (int64_t)pk_pool_threads(pool);
        attn_task_ctx c = {&j, pick(), 0};
        pk_pool_run(pool, attention_task, &c);
    }
}
