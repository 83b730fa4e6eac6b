// Reference quantizers: floats to a type's blocks by round-to-nearest, bit for bit what ggml's
// reference quantizers write (the same expressions, in the same float order), so a file this
// writes is the file llama-quantize writes without an importance matrix. Each is its type's
// row's `quantize` (types.h); blocks.h documents the layouts they fill. Plinth's own formats
// (PQ2) have no ggml counterpart: theirs search their scales.
#include "pk_quants.h"
#include "types.h"

#include <math.h>
#include <string.h>

#pragma STDC FP_CONTRACT OFF
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off") // GCC ignores the STDC pragma
#endif

void qt_quantize_f32(const float *x, uint8_t *y, int64_t n) {
    if (n > 0) memcpy(y, x, (size_t)n * sizeof(float));
}

void qt_quantize_f16(const float *x, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) qt_store_f16(y + 2 * i, x[i]);
}

// Round to nearest even on the top 16 bits; a NaN stays a (quiet) NaN.
void qt_quantize_bf16(const float *x, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        const uint16_t h = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 64) : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        y[2 * i] = (uint8_t)h;
        y[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

// Legacy 32-weight blocks. Symmetric formats (Q4_0, Q5_0) scale so that the value of largest
// magnitude lands on the most negative code, exactly: d = max / -2^(bits-1), q = x/d + bias,
// rounded half up. Offset formats (Q4_1, Q5_1) spread [min, max] over the codes: x = d*q + min.
void qt_legacy_grid(const float *x, int bits, int offset, float *d, float *m, uint8_t q[32]) {
    const int top = (1 << bits) - 1;
    if (offset) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < 32; j++) {
            lo = x[j] < lo ? x[j] : lo;
            hi = x[j] > hi ? x[j] : hi;
        }
        *d = (hi - lo) / (float)top;
        *m = lo;
        const float id = *d != 0.0f ? 1.0f / *d : 0.0f;
        for (int j = 0; j < 32; j++) {
            const int v = (int)((x[j] - lo) * id + 0.5f);
            q[j] = (uint8_t)(v < top ? v : top);
        }
        return;
    }
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    const float half = (float)(1 << (bits - 1));
    *d = max / -half;
    *m = 0.0f;
    const float id = *d != 0.0f ? 1.0f / *d : 0.0f;
    for (int j = 0; j < 32; j++) {
        const int v = (int)(x[j] * id + (half + 0.5f)); // positive: truncation rounds half up
        q[j] = (uint8_t)(v < top ? v : top);
    }
}

// Writes one legacy block: head (d, or d and m), the fifth bits (five-bit formats), the nibbles
// (weight j low, weight j+16 high).
static void pack_legacy(int bits, int offset, float d, float m, const uint8_t q[32], uint8_t *b) {
    qt_store_f16(b, d);
    uint8_t *p = b + 2;
    if (offset) {
        qt_store_f16(p, m);
        p += 2;
    }
    if (bits == 5) {
        uint32_t qh = 0;
        for (int j = 0; j < 32; j++) qh |= (uint32_t)(q[j] >> 4) << j;
        for (int i = 0; i < 4; i++) p[i] = (uint8_t)(qh >> (8 * i));
        p += 4;
    }
    for (int j = 0; j < 16; j++) p[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}

void qt_pack_block(const qt_type *ty, float d, float m, const uint8_t q[32], uint8_t *out) {
    if (qt_legacy_bits(ty) == 8) {
        qt_store_f16(out, d);
        for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)(q[j] - 128);
        return;
    }
    pack_legacy(qt_legacy_bits(ty), ty->tile.offsets, d, m, q, out);
}

static void legacy_block(const float *x, const qt_type *ty, uint8_t *b) {
    float d, m;
    uint8_t q[32];
    qt_legacy_grid(x, qt_legacy_bits(ty), ty->tile.offsets, &d, &m, q);
    qt_pack_block(ty, d, m, q, b);
}

// Importance-weighted legacy blocks: the scale (and minimum) minimizing sum_j w_j (x_j - x'_j)^2,
// found by trying scales around the plain one, rounding, and refitting by weighted least squares;
// every candidate is judged with the f16 values the block will store.
static inline float f16_round(float v) { return pk_f16_to_f32(pk_f32_to_f16(v)); }

static float weighted_error(const float *x, const float *w, const uint8_t *q, int bias, float d, float m) {
    float e = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float r = x[j] - (d * (float)(q[j] - bias) + m);
        e += w[j] * r * r;
    }
    return e;
}

// The code of x on the grid d * (q - bias) + m, clamped to [0, top] (bias when d is zero).
// Rounded half to even as nearbyintf does, by adding and subtracting 1.5 * 2^23 after a clamp
// that keeps |t| far below 2^22: no libm call, so the weighted search's loops vectorize (the
// same codes, files byte-identical; Gemma Q4_0 --imatrix 29.4 -> 20.3 s).
static inline int legacy_round(float x, float d, float m, int bias, int top) { // d != 0
    float t = (x - m) / d;
    t = t < -(float)bias - 1.0f ? -(float)bias - 1.0f : t > (float)(top - bias) + 1.0f ? (float)(top - bias) + 1.0f : t;
    const int v = (int)((t + 12582912.0f) - 12582912.0f) + bias;
    return v < 0 ? 0 : v > top ? top : v;
}

static int legacy_code(float x, float d, float m, int bias, int top) {
    return d != 0.0f ? legacy_round(x, d, m, bias, top) : bias;
}

// legacy_code for 32 values, d's test out of the loop.
static void round_codes(const float *x, float d, float m, int bias, int top, uint8_t q[32]) {
    if (d == 0.0f) {
        memset(q, bias, 32);
        return;
    }
    for (int j = 0; j < 32; j++) q[j] = (uint8_t)legacy_round(x[j], d, m, bias, top);
}

// The grid (d, and m for offset formats) that fits codes q best by weighted least squares, as
// the block will store it (f16). Returns 0 when the codes cannot determine it.
static int fit_grid(const float *x, const float *w, const uint8_t q[32], int bias, int offset, float *d, float *m) {
    float sw = 0, swq = 0, swqq = 0, swx = 0, swxq = 0;
    for (int j = 0; j < 32; j++) {
        const float s = (float)(q[j] - bias);
        sw += w[j]; swq += w[j] * s; swqq += w[j] * s * s; swx += w[j] * x[j]; swxq += w[j] * x[j] * s;
    }
    if (offset) {
        const float det = swqq * sw - swq * swq;
        if (!(det > 0.0f)) return 0;
        *d = f16_round((swxq * sw - swx * swq) / det);
        *m = f16_round((swqq * swx - swq * swxq) / det);
    } else {
        if (!(swqq > 0.0f)) return 0;
        *d = f16_round(swxq / swqq);
        *m = 0.0f;
    }
    return 1;
}

void qt_weighted_grid(const float *x, const float *w, int bits, int offset, float *d_out, float *m_out, uint8_t q_out[32]) {
    const int top = (1 << bits) - 1, bias = offset ? 0 : 1 << (bits - 1);
    float plain_d, plain_m;
    qt_legacy_grid(x, bits, offset, &plain_d, &plain_m, q_out);
    float best_d = f16_round(plain_d), best_m = offset ? f16_round(plain_m) : 0.0f;
    float best = weighted_error(x, w, q_out, bias, best_d, best_m);
    if (plain_d == 0.0f) { *d_out = best_d; *m_out = best_m; return; }
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; j++) {
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    uint8_t q[32];
    float d, m;
    // Grids from 0.7 to 1.3 times the plain scale (offset formats: starting at the minimum, or
    // centered on the range), each refitted to its codes.
    for (int step = 0; step <= 30; step++) {
        const float dc = plain_d * (0.70f + 0.02f * (float)step);
        for (int centered = 0; centered <= offset; centered++) {
            const float mc = offset ? (centered ? lo - 0.5f * (dc * (float)top - (hi - lo)) : lo) : 0.0f;
            round_codes(x, dc, mc, bias, top, q);
            if (!fit_grid(x, w, q, bias, offset, &d, &m)) continue;
            const float e = weighted_error(x, w, q, bias, d, m);
            if (e < best) { best = e; best_d = d; best_m = m; memcpy(q_out, q, 32); }
        }
    }
    // Then alternate: round to the best grid, refit the grid to those codes, while it helps.
    for (int round = 0; round < 8 && best_d != 0.0f; round++) {
        round_codes(x, best_d, best_m, bias, top, q);
        if (!fit_grid(x, w, q, bias, offset, &d, &m)) break;
        const float e = weighted_error(x, w, q, bias, d, m);
        if (!(e < best)) break;
        best = e; best_d = d; best_m = m; memcpy(q_out, q, 32);
    }
    *d_out = best_d;
    *m_out = best_m;
}

// The error a block's rounding causes in a product is sum_j (w_j - w'_j) x_j; with the columns'
// activations taken as independent, its expected square is sum_j (w_j - w'_j)^2 E[x_j^2], the
// importance. Each value's weight in the search is that importance times (sigma2 + w_j^2)^(1/4),
// sigma2 the row's mean square (n is one row): halfway, in the exponent, to llama.cpp's
// sqrt(sigma2 + w_j^2), leaning toward the row's larger weights. Measured by KLD against the
// F32 model (importance alone / this / llama.cpp's factor / llama-quantize), Q4_0: SmolLM2
// 0.132 / 0.138 / 0.140 / 0.169, Qwen2.5-Coder 0.187 / 0.173 / 0.175 / 0.172, Gemma 3 0.173 /
// 0.182 / 0.190 / 0.207; Q5_0: 0.037 / 0.039 / 0.042 / 0.051, 0.0122 / 0.0117 / 0.0124 / 0.0123,
// 0.0167 / 0.0176 / 0.0186 / 0.0225. The importance alone is far behind llama-quantize on Qwen
// Q4_0; this weight is at it or within noise everywhere (Benchmarks/README.md, quantizer).
static void legacy_weighted(const float *x, const float *importance, int64_t n, const qt_type *ty, uint8_t *y) {
    float sigma2 = 0.0f;
    for (int64_t j = 0; j < n; j++) sigma2 += x[j] * x[j];
    sigma2 /= (float)n;
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b, *imp = importance + 32 * b;
        float w[32];
        for (int j = 0; j < 32; j++) w[j] = imp[j] * powf(sigma2 + xb[j] * xb[j], 0.25f);
        float d, m;
        uint8_t q[32];
        qt_weighted_grid(xb, w, qt_legacy_bits(ty), ty->tile.offsets, &d, &m, q);
        qt_pack_block(ty, d, m, q, y + ty->bytes * b);
    }
}

// Q8_0: d = amax / 127, q = round(x / d), half away from zero.
void qt_quantize_q8_0(const float *x, uint8_t *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b;
        uint8_t *out = y + 34 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        qt_store_f16(out, d);
        for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)roundf(xb[j] * id);
    }
}

#define LEGACY_QUANTIZERS(name, id)                                                                    \
    void qt_quantize_##name(const float *x, uint8_t *y, int64_t n) {                                   \
        for (int64_t b = 0; b < n / 32; b++) legacy_block(x + 32 * b, QT_ROW(id), y + QT_ROW(id)->bytes * b); \
    }                                                                                                  \
    void qt_quantize_weighted_##name(const float *x, const float *importance, uint8_t *y, int64_t n) { \
        legacy_weighted(x, importance, n, QT_ROW(id), y);                                              \
    }
LEGACY_QUANTIZERS(q4_0, PK_Q4_0)
LEGACY_QUANTIZERS(q4_1, PK_Q4_1)
LEGACY_QUANTIZERS(q5_0, PK_Q5_0)
LEGACY_QUANTIZERS(q5_1, PK_Q5_1)

// Q8_0 weighted: the symmetric search on 8-bit codes (-128..127), stored as int8, or the plain
// block (amax / 127) where that is nearer.
void qt_quantize_weighted_q8_0(const float *x, const float *importance, uint8_t *y, int64_t n) {
    const qt_type *ty = QT_ROW(PK_Q8_0);
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b, *w = importance + 32 * b;
        uint8_t *out = y + ty->bytes * b;
        qt_quantize_q8_0(xb, out, 32);
        uint8_t plain[32];
        for (int j = 0; j < 32; j++) plain[j] = (uint8_t)((int8_t)out[2 + j] + 128);
        const float plain_d = blk_f16(out);
        float d, m;
        uint8_t q[32];
        qt_weighted_grid(xb, w, 8, 0, &d, &m, q);
        const int bias = qt_legacy_bias(ty);
        if (weighted_error(xb, w, q, bias, d, 0.0f) < weighted_error(xb, w, plain, bias, plain_d, 0.0f)) qt_pack_block(ty, d, 0.0f, q, out);
    }
}

// PQ2: x = d * (2c - 3). Four levels need their scale searched, not derived from the largest
// value (which would waste the outer levels on one weight): for each candidate d in a range of
// fractions of the largest magnitude, the nearest codes, then d refitted to those codes by
// weighted least squares and the codes taken again; the f16-rounded d with the least
// w-weighted squared error wins.
// The code of the level d * (2c - 3) nearest x, given id = 1/d (0 when d is zero).
static int pq2_code(float x, float id) {
    const int v = (int)floorf((x * id + 3.0f) * 0.5f + 0.5f);
    return v < 0 ? 0 : v > 3 ? 3 : v;
}

static float pq2_codes(const float *x, const float *w, float d, uint8_t c[32]) {
    float e = 0.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
        const int v = pq2_code(x[j], id);
        c[j] = (uint8_t)v;
        const float r = x[j] - d * (float)(2 * v - 3);
        e += w[j] * r * r;
    }
    return e;
}

static float pq2_refit(const float *x, const float *w, const uint8_t c[32]) {
    float num = 0.0f, den = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float v = (float)(2 * c[j] - 3);
        num += w[j] * x[j] * v;
        den += w[j] * v * v;
    }
    return den > 0.0f ? num / den : 0.0f;
}

static float pq2_fit_scale(const float *x, const float *w) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    uint8_t c[32];
    float best_d = 0.0f, best_e = INFINITY;
    if (amax > 0.0f) {
        for (int step = 0; step <= 28; step++) {
            float d = amax * (0.12f + 0.01f * (float)step);
            pq2_codes(x, w, d, c);
            d = pk_f16_to_f32(pk_f32_to_f16(pq2_refit(x, w, c)));
            if (!(d > 0.0f)) continue;
            const float e = pq2_codes(x, w, d, c);
            if (e < best_e) {
                best_e = e;
                best_d = d;
            }
        }
    }
    return best_d;
}

static void pq2_pack(const qt_type *ty, const float p[2], const uint8_t q[32], uint8_t *out) {
    (void)ty;
    qt_store_f16(out, p[0]);
    memset(out + 2, 0, 8);
    for (int j = 0; j < 32; j++) out[2 + j % 8] |= (uint8_t)(q[j] << (2 * (j / 8)));
}

static void pq2_block(const float *x, const float *w, uint8_t *out) {
    const float p[2] = {pq2_fit_scale(x, w), 0.0f};
    uint8_t c[32];
    pq2_codes(x, w, p[0], c);
    pq2_pack(NULL, p, c, out);
}

static void pq2_fit(const qt_type *ty, const float *x, const float *w, float p[2]) {
    (void)ty;
    p[0] = pq2_fit_scale(x, w);
    p[1] = 0.0f;
}

static int pq2_nearest(const qt_type *ty, float x, const float p[2], float *value) {
    (void)ty;
    const int v = pq2_code(x, p[0] != 0.0f ? 1.0f / p[0] : 0.0f);
    *value = p[0] * (float)(2 * v - 3);
    return v;
}

const qt_grid qt_pq2_grid_ops = {pq2_fit, pq2_nearest, pq2_pack};

// Legacy blocks under GPTQ: the weighted grid search, codes q + bias clamped to the width.
static void legacy_fit(const qt_type *ty, const float *x, const float *w, float p[2]) {
    uint8_t q[32];
    qt_weighted_grid(x, w, qt_legacy_bits(ty), ty->tile.offsets, &p[0], &p[1], q);
}

static int legacy_nearest(const qt_type *ty, float x, const float p[2], float *value) {
    const int bias = qt_legacy_bias(ty), top = (1 << qt_legacy_bits(ty)) - 1;
    const int v = legacy_code(x, p[0], p[1], bias, top);
    *value = p[0] * (float)(v - bias) + p[1];
    return v;
}

static void legacy_pack(const qt_type *ty, const float p[2], const uint8_t q[32], uint8_t *out) { qt_pack_block(ty, p[0], p[1], q, out); }

const qt_grid qt_legacy_grid_ops = {legacy_fit, legacy_nearest, legacy_pack};

void qt_quantize_weighted_pq2(const float *x, const float *importance, uint8_t *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) pq2_block(x + 32 * b, importance + 32 * b, y + 10 * b);
}

void qt_quantize_pq2(const float *x, uint8_t *y, int64_t n) {
    static const float uniform[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                      1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int64_t b = 0; b < n / 32; b++) pq2_block(x + 32 * b, uniform, y + 10 * b);
}

int pk_quantize(int type, const float *src, void *dst, int64_t n) {
    const qt_type *ty = qt_type_of(type);
    if (!ty || !ty->quantize || n < 0 || n % ty->elements != 0) return -1;
    ty->quantize(src, (uint8_t *)dst, n);
    return 0;
}

int pk_quantize_weighted(int type, const float *src, void *dst, int64_t n, const float *importance) {
    const qt_type *ty = qt_type_of(type);
    if (!ty || !ty->quantize || n < 0 || n % ty->elements != 0) return -1;
    if (ty->quantize_weighted && importance) ty->quantize_weighted(src, importance, (uint8_t *)dst, n);
    else ty->quantize(src, (uint8_t *)dst, n);
    return 0;
}
