#include "pk_ops.h"
#include "elementwise.h"
#include "pk_matmul.h"
#include "pk_quants.h"
#include "isa.h"
#include "kexp.h"
#include "share.h"

// No FMA contraction: every ISA clone must round exactly like the portable code.
#pragma clang fp contract(off)
#include <math.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

// ---- rows split between the pool's threads -----------------------------------------------------

// Below this many values, one thread finishes before a hand-off to the pool would (a hand-off
// to a spinning worker costs about a microsecond; 8192 values take a few).
#define PARALLEL_MIN_VALUES 8192

static void for_rows(pk_pool *pool, int64_t rows, int64_t values, rows_fn fn, const void *args) {
    split_rows(pool, rows, values >= PARALLEL_MIN_VALUES, fn, args);
}

// ---- RMSNorm ---------------------------------------------------------------------------------

typedef struct { const float *x, *w; float *y; int64_t k; float eps; } norm_args;

// The sum of squares is taken in double (as the reference implementation does) on sixteen
// lanes: lane l adds the squares (rounded as floats) of values l, l + 16, l + 32, ... in order,
// and the lanes are added by a fixed tree. (One chain in order was four cycles per value.)
#define NORM_LANES 16

ALWAYS_INLINE double norm_lane_tree(double *lane) {
    for (int width = NORM_LANES / 2; width >= 1; width /= 2)
        for (int l = 0; l < width; l++) lane[l] += lane[l + width];
    return lane[0];
}

// 1 / sqrt(mean square + eps) from the sum of squares.
ALWAYS_INLINE float norm_scale(double sum, int64_t k, float eps) {
    const float mean = (float)(sum / (double)k);
    return 1.0f / sqrtf(mean + eps);
}

ALWAYS_INLINE void norm_rows_body(const void *a, int64_t r0, int64_t r1) {
    const norm_args *p = a;
    for (int64_t t = r0; t < r1; t++) {
        const float *xr = p->x + t * p->k;
        float *yr = p->y + t * p->k;
        double lane[NORM_LANES] = {0};
        for (int64_t i = 0; i < p->k; i++) lane[i % NORM_LANES] += (double)(xr[i] * xr[i]);
        const float scale = norm_scale(norm_lane_tree(lane), p->k, p->eps);
        for (int64_t i = 0; i < p->k; i++) yr[i] = (xr[i] * scale) * p->w[i];
    }
}

static void norm_rows_scalar(const void *a, int64_t r0, int64_t r1) { norm_rows_body(a, r0, r1); }

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c"))) static void norm_rows_avx2(const void *a, int64_t r0, int64_t r1) {
    norm_rows_body(a, r0, r1);
}

// The lanes of the 16 values from i that are before k.
__attribute__((target("avx512f"))) ALWAYS_INLINE __mmask16 first_lanes(int64_t i, int64_t k) {
    return k - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - i)) - 1u);
}

// norm_rows_body with vectors: lanes 0-7 and 8-15 of each 16 values in two double vectors.
__attribute__((target("avx512f,avx512dq"))) static void norm_rows_avx512(const void *a, int64_t r0, int64_t r1) {
    const norm_args *p = a;
    const int64_t k = p->k;
    for (int64_t t = r0; t < r1; t++) {
        const float *xr = p->x + t * k;
        float *yr = p->y + t * k;
        __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
        for (int64_t i = 0; i < k; i += 16) {
            const __mmask16 m = first_lanes(i, k);
            const __m512 v = _mm512_maskz_loadu_ps(m, xr + i);
            const __m512 sq = _mm512_mul_ps(v, v);
            lo = _mm512_mask_add_pd(lo, (__mmask8)m, lo, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
            hi = _mm512_mask_add_pd(hi, (__mmask8)(m >> 8), hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
        }
        double lane[NORM_LANES];
        _mm512_storeu_pd(lane, lo);
        _mm512_storeu_pd(lane + 8, hi);
        const __m512 scale = _mm512_set1_ps(norm_scale(norm_lane_tree(lane), k, p->eps));
        for (int64_t i = 0; i < k; i += 16) {
            const __mmask16 m = first_lanes(i, k);
            const __m512 v = _mm512_maskz_loadu_ps(m, xr + i);
            _mm512_mask_storeu_ps(yr + i, m, _mm512_mul_ps(_mm512_mul_ps(v, scale), _mm512_maskz_loadu_ps(m, p->w + i)));
        }
    }
}
#endif

static rows_fn norm_rows(void) { return ISA_PICK(rows_fn, norm_rows_scalar, norm_rows_avx2, norm_rows_avx512); }

void pk_rms_norm(pk_pool *pool, const float *x, const float *w, float *y, int64_t n, int64_t k, float eps) {
    const norm_args a = {x, w, y, k, eps};
    for_rows(pool, n, n * k, norm_rows(), &a);
}

void ew_rms_norm_rows(const float *x, const float *w, float *y, int64_t r0, int64_t r1, int64_t k, float eps) {
    const norm_args a = {x, w, y, k, eps};
    norm_rows()(&a, r0, r1);
}

// ---- RoPE ------------------------------------------------------------------------------------

void pk_rope_table(const int32_t *positions, int64_t n, int rope_dims, float freq_base, float freq_scale,
                   const float *factors, float *table) {
    const int pairs = rope_dims / 2;
    const float theta_scale = powf(freq_base, -2.0f / (float)rope_dims);
    for (int64_t t = 0; t < n; t++) {
        // theta advances by repeated multiplication, matching llama.cpp's rounding.
        float theta = (float)positions[t];
        float *row = table + t * 2 * pairs;
        for (int i = 0; i < pairs; i++) {
            const float angle = freq_scale * (factors ? theta / factors[i] : theta);
            row[2 * i] = cosf(angle);
            row[2 * i + 1] = sinf(angle);
            theta *= theta_scale;
        }
    }
}

typedef struct {
    float *x;
    int64_t stride;
    int heads, head_dim, rope_dims, neox;
    const float *table;
} rope_args;

static void rope_rows(const void *a, int64_t r0, int64_t r1) {
    const rope_args *p = a;
    const int pairs = p->rope_dims / 2;
    for (int64_t t = r0; t < r1; t++) {
        const float *cs = p->table + t * 2 * pairs, *sn = cs + 1;
        float *row = p->x + t * p->stride;
        for (int h = 0; h < p->heads; h++) {
            float *v = row + (int64_t)h * p->head_dim;
            for (int i = 0; i < pairs; i++) {
                const int ia = p->neox ? i : 2 * i;
                const int ib = p->neox ? i + p->rope_dims / 2 : 2 * i + 1;
                const float x0 = v[ia], x1 = v[ib];
                v[ia] = x0 * cs[2 * i] - x1 * sn[2 * i];
                v[ib] = x0 * sn[2 * i] + x1 * cs[2 * i];
            }
        }
    }
}

void pk_rope(pk_pool *pool, float *x, int64_t n, int64_t stride, int heads, int head_dim, int rope_dims,
             const float *table, int neox) {
    const rope_args a = {x, stride, heads, head_dim, rope_dims, neox, table};
    for_rows(pool, n, n * heads * (int64_t)head_dim * 2, rope_rows, &a);
}

// ---- Gated activations: SwiGLU, GEGLU --------------------------------------------------------

// gate = act(g) * up with act(g) = g / (1 + e^-x): x = g for SiLU; x = 2u for gelu's tanh form,
// u = sqrt(2/pi) (g + 0.044715 g^3), since 0.5 (1 + tanh u) = sigmoid(2u). One scalar and one
// vector definition, written op by op alike, so that every ISA gives the same bits.
#define GELU_2U 1.5957691216057308f /* 2 sqrt(2/pi) */
#define GELU_CUBE 0.044715f

// Rows of k values, ldg and ldu apart (rows packed one after another: ldg = ldu = k).
typedef struct { float *gate; const float *up; int64_t k, ldg, ldu; } gated_args;

ALWAYS_INLINE float gated_x(int gelu, float g) { return gelu ? GELU_2U * (g + GELU_CUBE * (g * g * g)) : g; }

ALWAYS_INLINE void gated_span(int gelu, float *gate, const float *up, int64_t i, int64_t end) {
    for (; i < end; i++) {
        const float g = gate[i];
        gate[i] = (g / (1.0f + kexp(-gated_x(gelu, g)))) * up[i];
    }
}

// Rows [r0, r1) by `span` (gated_span or an ISA's vector copy): as one span when they are
// packed, so that vectors run across the rows' ends.
ALWAYS_INLINE void gated_spans(int gelu, const gated_args *p, int64_t r0, int64_t r1,
                               void (*span)(int, float *, const float *, int64_t, int64_t)) {
    if (p->ldg == p->k && p->ldu == p->k) { span(gelu, p->gate, p->up, r0 * p->k, r1 * p->k); return; }
    for (int64_t r = r0; r < r1; r++) span(gelu, p->gate + r * p->ldg, p->up + r * p->ldu, 0, p->k);
}

ALWAYS_INLINE void gated_rows(int gelu, const void *a, int64_t r0, int64_t r1) { gated_spans(gelu, a, r0, r1, gated_span); }

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512dq,avx2,fma,f16c"))) ALWAYS_INLINE void gated_span16(int gelu, float *gate, const float *up, int64_t i, int64_t end) {
    const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
    const __m512 two_u = _mm512_set1_ps(GELU_2U), cube = _mm512_set1_ps(GELU_CUBE);
    for (; i + 16 <= end; i += 16) {
        const __m512 g = _mm512_loadu_ps(gate + i);
        const __m512 x = gelu ? _mm512_mul_ps(two_u, _mm512_add_ps(g, _mm512_mul_ps(cube, _mm512_mul_ps(_mm512_mul_ps(g, g), g)))) : g;
        const __m512 e = kexp16(_mm512_xor_ps(x, sign));
        _mm512_storeu_ps(gate + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
    }
    gated_span(gelu, gate, up, i, end);
}
__attribute__((target("avx512f,avx512dq,avx2,fma,f16c"))) ALWAYS_INLINE void gated_rows16(int gelu, const void *a, int64_t r0, int64_t r1) {
    gated_spans(gelu, a, r0, r1, gated_span16);
}
#define GATED_ISA_KERNELS(name, gelu)                                                                                     \
    __attribute__((target("avx2,fma,f16c"))) static void name##_avx2(const void *a, int64_t r0, int64_t r1) {             \
        gated_rows(gelu, a, r0, r1);                                                                                      \
    }                                                                                                                     \
    __attribute__((target("avx512f,avx512dq,avx2,fma,f16c"))) static void name##_avx512(const void *a, int64_t r0, int64_t r1) { \
        gated_rows16(gelu, a, r0, r1);                                                                                    \
    }
#else
#define GATED_ISA_KERNELS(name, gelu)
#endif

#define GATED_KERNELS(name, gelu)                                                                     \
    static void name##_scalar(const void *a, int64_t r0, int64_t r1) { gated_rows(gelu, a, r0, r1); } \
    GATED_ISA_KERNELS(name, gelu)

GATED_KERNELS(swiglu, 0)
GATED_KERNELS(geglu, 1)

void ew_gated_rows(pk_pool *pool, int gelu, float *gate, int64_t ldg, const float *up, int64_t ldu, int64_t rows,
                   int64_t count) {
    const rows_fn fn = gelu ? ISA_PICK(rows_fn, geglu_scalar, geglu_avx2, geglu_avx512)
                            : ISA_PICK(rows_fn, swiglu_scalar, swiglu_avx2, swiglu_avx512);
    const gated_args a = {gate, up, count, ldg, ldu};
    for_rows(pool, rows, rows * count, fn, &a);
}

void pk_swiglu(pk_pool *pool, float *gate, const float *up, int64_t n, int64_t k) { ew_gated_rows(pool, 0, gate, k, up, k, n, k); }
void pk_geglu(pk_pool *pool, float *gate, const float *up, int64_t n, int64_t k) { ew_gated_rows(pool, 1, gate, k, up, k, n, k); }

// ---- small helpers ---------------------------------------------------------------------------

typedef struct { float *y; const float *x; int64_t k, x_stride; } add_args;

// (Exact IEEE adds: every ISA's copy gives the same bits.)
ALWAYS_INLINE void add_rows_body(const void *a, int64_t r0, int64_t r1) {
    const add_args *p = a;
    for (int64_t t = r0; t < r1; t++) {
        float *y = p->y + t * p->k;
        const float *x = p->x + t * p->x_stride;
        for (int64_t i = 0; i < p->k; i++) y[i] += x[i];
    }
}

static void add_rows_scalar(const void *a, int64_t r0, int64_t r1) { add_rows_body(a, r0, r1); }
#if defined(__x86_64__)
__attribute__((target("avx2"))) static void add_rows_avx2(const void *a, int64_t r0, int64_t r1) { add_rows_body(a, r0, r1); }
__attribute__((target("avx512f"))) static void add_rows_avx512(const void *a, int64_t r0, int64_t r1) { add_rows_body(a, r0, r1); }
#endif

void pk_add_rows(pk_pool *pool, float *y, const float *x, int64_t rows, int64_t k, int64_t x_stride) {
    const add_args a = {y, x, k, x_stride};
    for_rows(pool, rows, rows * k, ISA_PICK(rows_fn, add_rows_scalar, add_rows_avx2, add_rows_avx512), &a);
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) static void f32_to_f16_f16c(const float *x, uint16_t *y, int64_t count) {
    int64_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < count; i++) y[i] = pk_f32_to_f16(x[i]);
}
#endif

typedef void (*f16_row_fn)(const float *, uint16_t *, int64_t);
static void f32_to_f16_portable(const float *x, uint16_t *y, int64_t count) {
    for (int64_t i = 0; i < count; i++) y[i] = pk_f32_to_f16(x[i]);
}

void pk_f32_to_f16_row(const float *x, uint16_t *y, int64_t count) {
    // The conversion is IEEE round-to-nearest-even either way (NaN payloads aside).
    ISA_PICK(f16_row_fn, f32_to_f16_portable, f32_to_f16_f16c, f32_to_f16_f16c)(x, y, count);
}

// ---- argmax ----------------------------------------------------------------------------------

// Sixteen running maxima side by side (a select per lane, which vectorizes where a search with
// an early index does not), then the first index holding the largest.
ALWAYS_INLINE int64_t argmax_body(const float *x, int64_t n) {
    float lane[16];
    for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    float best = -INFINITY;
    for (int l = 0; l < 16; l++) best = lane[l] > best ? lane[l] : best;
    for (; i < n; i++) best = x[i] > best ? x[i] : best;
    if (best == -INFINITY) return 0; // nothing above -inf (or only NaN): the first id, as a scan gives
    for (i = 0; i + 16 <= n; i += 16) {
        int hit = 0;
        for (int l = 0; l < 16; l++) hit |= x[i + l] == best;
        if (hit) break;
    }
    for (; i < n; i++)
        if (x[i] == best) return i;
    return 0;
}

static int64_t argmax_portable(const float *x, int64_t n) { return argmax_body(x, n); }
#if defined(__x86_64__)
__attribute__((target("avx512f,avx2"))) static int64_t argmax_avx512(const float *x, int64_t n) { return argmax_body(x, n); }
__attribute__((target("avx2"))) static int64_t argmax_avx2(const float *x, int64_t n) { return argmax_body(x, n); }
#endif

typedef int64_t (*argmax_fn)(const float *, int64_t);
int64_t pk_argmax(const float *x, int64_t n) { return ISA_PICK(argmax_fn, argmax_portable, argmax_avx2, argmax_avx512)(x, n); }
