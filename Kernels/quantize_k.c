// Quantizers of the k-quants (256-weight super-blocks): Q2_K, Q3_K, Q4_K, Q5_K and Q6_K, bit
// for bit what llama-quantize writes (the same searches, the same float expressions in the same
// order), both without an importance matrix (ggml's reference rounding) and with one (its
// importance-weighted searches), so that a file from `plinth quantize` is the one
// llama-quantize writes. Layouts: blocks.h.
#include "pk_quants.h"
#include "types.h"

#include <math.h>
#include <string.h>

#pragma STDC FP_CONTRACT OFF
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off") // GCC ignores the STDC pragma
#endif

// Below this a group is all zeros (ggml's GROUP_MAX_EPS).
#define K_EPS 1e-15f

// Round half to even through the float mantissa (|v| < 2^22), as ggml rounds codes.
static int round_even(float v) {
    const float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// The value of largest magnitude (the first such, sign kept), or 0 when every magnitude is
// below K_EPS (an all-zero group).
static float largest(int n, const float *x) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    return amax < K_EPS ? 0.0f : max;
}

// Symmetric codes in [-nmax, nmax) for n values, weighted by `qw` (x^2 when NULL): the scale
// from the largest magnitude, then 18 nearby scales, keeping the codes of the best
// least-squares fit. L gets code + nmax; returns the fitted scale.
static float symmetric_codes(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    const float max = largest(n, x);
    if (max == 0.0f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clampi(round_even(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clampi(round_even(iscale * x[i]), -nmax, nmax - 1);
            const float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(round_even(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Codes in [0, nmax] for x = scale * code - min (min >= 0 returned in *neg_min): the range's
// grid, then nstep + 1 stretched grids, each refitted (scale and min by weighted least squares),
// keeping the one of least weighted squared error (absolute error with `mad`). Returns the scale.
static float offset_codes(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, uint8_t *aux,
                          float rmin, float rdelta, int nstep, int mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(round_even(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clampi(round_even(iscale * (x[i] - min)), 0, nmax);
            aux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.0f) {
                this_min = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            float error = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * aux[i] + this_min - x[i];
                diff = mad ? fabsf(diff) : diff * diff;
                error += w[i] * diff;
            }
            if (error < best_error) {
                memcpy(L, aux, (size_t)n);
                best_error = error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

// Codes in [0, nmax] for the non-negative values x (a super-block's scales or mins), each weighted
// by w: the largest value's grid and eight stretched ones, the one of least weighted squared
// error kept, then up to five passes moving single codes where that improves the least-squares
// fit. Returns the fitted scale.
static float positive_codes(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0.0f;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    if (max < K_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)round_even(iscale * x[i]);
    const float scale = 1 / iscale;
    float best = 0.0f;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * L[i];
        best += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max, scale_is = 1 / iscale_is;
        float err = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = round_even(iscale_is * x[i]);
            const float diff = x[i] - scale_is * (l < nmax ? l : nmax);
            err += w[i] * diff * diff;
        }
        if (err < best) {
            best = err;
            iscale = iscale_is;
        }
    }
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = round_even(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i], sl2 = suml2 - w[i] * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int l = round_even(x[i] * sl2 / slx);
                l = l < nmax ? l : nmax;
                if (l != L[i]) {
                    slx += w[i] * x[i] * l;
                    sl2 += w[i] * l * l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// llama-quantize's weight of each value of a super-block in the weighted searches: its column's
// importance times sqrt(sigma2 + x^2), sigma2 being (spread *) the super-block's mean square.
static void importance_weights(const float *x, const float *importance, float spread, float w[256]) {
    float sum_x2 = 0.0f;
    for (int i = 0; i < 256; i++) sum_x2 += x[i] * x[i];
    const float sigma2 = spread * sum_x2 / 256;
    for (int i = 0; i < 256; i++) w[i] = importance[i] * sqrtf(sigma2 + x[i] * x[i]);
}

// The sum of each group of `size` of the 256 weights.
static void group_sums(const float w[256], int size, float *sums) {
    for (int g = 0; g < 256 / size; g++) {
        float s = 0.0f;
        for (int i = 0; i < size; i++) s += w[size * g + i];
        sums[g] = s;
    }
}

// Q2_K's, Q4_K's and Q5_K's groups with an importance (llama-quantize's --imatrix): each group of
// `size` fitted by the weighted offset search (codes 0..nmax into L), then the groups' scales
// and mins as codes 0..scale_max (Ls, Lm) by weighted searches of their own, each group weighing
// its weights' sum. Gives the f16 header's d and dmin values.
static void weighted_offset_groups(const float *x, const float *importance, float spread, int size, int nmax, int scale_max,
                                   uint8_t L[256], uint8_t *Ls, uint8_t *Lm, float *d, float *m) {
    const int groups = 256 / size;
    float w[256], sw[16], scales[16], mins[16];
    uint8_t aux[32];
    importance_weights(x, importance, spread, w);
    for (int j = 0; j < groups; j++)
        scales[j] = offset_codes(size, nmax, x + size * j, w + size * j, L + size * j, &mins[j], aux, -0.9f, 0.05f, 36, 0);
    group_sums(w, size, sw);
    *d = positive_codes(groups, scale_max, scales, Ls, sw);
    *m = positive_codes(groups, scale_max, mins, Lm, sw);
}

// Codes 0..code_max of the non-negative values v on the largest one's grid (all 0 when it is
// 0), as ggml's reference rounding makes a super-block's scales and mins; returns the grid's step.
static float codes_on_largest(const float *v, int n, float code_max, uint8_t *L) {
    float max = 0.0f;
    for (int j = 0; j < n; j++)
        if (v[j] > max) max = v[j];
    const float inv = max > 0 ? code_max / max : 0.0f;
    for (int j = 0; j < n; j++) L[j] = (uint8_t)round_even(inv * v[j]);
    return max / code_max;
}

// A group's fit: codes in [-nmax, nmax) into L (plus nmax), weighted by qw where the fit
// takes weights (NULL: its own); returns the group's scale.
typedef float (*group_fit)(int n, int nmax, const float *x, int8_t *L, const float *qw);

// Fits the sixteen groups of 16 of a super-block, their scales into `scales`, each weighted by
// its part of `importance` when given; returns the scale of largest magnitude (the first such,
// sign kept).
static float fit_groups(const float *x, int nmax, group_fit fit, int8_t L[256], float scales[16], const float *importance) {
    float max_scale = 0.0f, max_abs = 0.0f;
    for (int g = 0; g < 16; g++) {
        scales[g] = fit(16, nmax, x + 16 * g, L + 16 * g, importance ? importance + 16 * g : NULL);
        if (fabsf(scales[g]) > max_abs) {
            max_abs = fabsf(scales[g]);
            max_scale = scales[g];
        }
    }
    return max_scale;
}

// Q4_K / Q5_K: eight groups of 32 with 6-bit scales and mins under f16 d and dmin. `nmax` 15 or
// 31; fills the header (d, dmin, the 12 packed scale bytes) and L (the codes of 256 weights).
// Without an importance, each group's fit weighs a value by the group's RMS plus its magnitude
// and the 6-bit scales are the groups' on the largest one's grid; with one, the fits and the
// scales' own grids are weighted searches (llama-quantize's --imatrix).
static void k_groups(const float *x, const float *importance, int nmax, uint8_t *block, uint8_t L[256]) {
    uint8_t Ls[8], Lm[8];
    float d_block, m_block;
    if (importance) {
        weighted_offset_groups(x, importance, 2.0f, 32, nmax, 63, L, Ls, Lm, &d_block, &m_block);
    } else {
        float w[32], scales[8], mins[8];
        uint8_t aux[32];
        for (int j = 0; j < 8; j++) {
            const float *xg = x + 32 * j;
            float sum_x2 = 0.0f;
            for (int l = 0; l < 32; l++) sum_x2 += xg[l] * xg[l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xg[l]);
            scales[j] = offset_codes(32, nmax, xg, w, L + 32 * j, &mins[j], aux, nmax == 15 ? -1.0f : -0.5f, 0.1f, nmax == 15 ? 20 : 15, 0);
        }
        d_block = codes_on_largest(scales, 8, 63.0f, Ls);
        m_block = codes_on_largest(mins, 8, 63.0f, Lm);
    }
    uint8_t *sc = block + 4;
    memset(sc, 0, 12);
    for (int j = 0; j < 8; j++) {
        const uint8_t ls = Ls[j] < 63 ? Ls[j] : 63, lm = Lm[j] < 63 ? Lm[j] : 63;
        if (j < 4) {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    qt_store_f16(block, d_block);
    qt_store_f16(block + 2, m_block);
    const float d0 = blk_f16(block), m0 = blk_f16(block + 2);
    for (int j = 0; j < 8; j++) {
        int s, m;
        blk_scale_min_k4(sc, j, &s, &m);
        const float d = d0 * s;
        if (d == 0.0f) continue;
        const float dm = m0 * m;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clampi(round_even((x[32 * j + i] + dm) / d), 0, nmax);
    }
}

static void q4_K_rows(const float *x, const float *importance, uint8_t *y, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, x += 256, y += 144) {
        uint8_t L[256];
        k_groups(x, importance ? importance + 256 * b : NULL, 15, y, L);
        // Low nibbles: weights 64c..64c+31, high: 64c+32..64c+63.
        uint8_t *q = y + 16;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) q[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + l + 32] << 4));
    }
}

static void q5_K_rows(const float *x, const float *importance, uint8_t *y, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, x += 256, y += 176) {
        uint8_t L[256];
        k_groups(x, importance ? importance + 256 * b : NULL, 31, y, L);
        // Bit 4 of weight 64c + l in bit 2c of qh[l], of 64c + 32 + l in bit 2c + 1.
        uint8_t *qh = y + 16, *ql = y + 48;
        memset(qh, 0, 32);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const int a = L[64 * c + l], b2 = L[64 * c + 32 + l];
                qh[l] |= (uint8_t)(((a >> 4) << (2 * c)) | ((b2 >> 4) << (2 * c + 1)));
                ql[32 * c + l] = (uint8_t)((a & 0xF) | ((b2 & 0xF) << 4));
            }
    }
}

// Q6_K; with an importance per column (llama-quantize's --imatrix) the groups' fits weigh
// each weight by it instead of x^2.
static void q6_K_rows(const float *x, const float *importance, uint8_t *y, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, x += 256, y += 210) {
        int8_t L[256];
        float scales[16];
        const float max_scale = fit_groups(x, 32, symmetric_codes, L, scales, importance ? importance + 256 * b : NULL);
        if (fabsf(max_scale) < K_EPS) {
            memset(y, 0, 210);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        qt_store_f16(y + 208, 1 / iscale);
        int8_t *sc = (int8_t *)(y + 192);
        for (int g = 0; g < 16; g++) {
            const int s = round_even(iscale * scales[g]);
            sc[g] = (int8_t)(s < 127 ? s : 127);
        }
        const float d0 = blk_f16(y + 208);
        for (int g = 0; g < 16; g++) {
            const float d = d0 * sc[g];
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; i++) L[16 * g + i] = (int8_t)(clampi(round_even(x[16 * g + i] / d), -32, 31) + 32);
        }
        // Per half of 128: ql[l] holds weights l (low) and l + 64 (high nibble), ql[l + 32]
        // weights l + 32 and l + 96; qh[l] the top two bits of l, l + 32, l + 64, l + 96.
        uint8_t *ql = y, *qh = y + 128;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32) {
            const int8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

void qt_quantize_q6_K(const float *x, uint8_t *y, int64_t n) { q6_K_rows(x, NULL, y, n); }
QT_WEIGHTED(q6_K) { q6_K_rows(x, importance, y, n); }

// Q2_K's and Q3_K's low two bits: weight 128h + 32p + l (codes 0..3) in bits 2p of byte 32h + l.
static void pack_planes(const uint8_t L[256], uint8_t qs[64]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *Lh = L + 128 * h;
            qs[32 * h + l] = (uint8_t)(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
        }
}

// Q2_K: sixteen groups of 16 with 4-bit scales and mins (a byte each: scale low, min high) under
// f16 d and dmin; codes 0..3. Without an importance the groups are fitted by absolute error
// weighted by |x| and the 4-bit scales are on the largest one's grid; with one, by squared
// error weighted as llama-quantize's --imatrix does, the 4-bit scales by a weighted search.
// Layout: scales[16], qs[64] (pack_planes), d, dmin.
static void q2_K_rows(const float *x, const float *importance, uint8_t *y, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, x += 256, y += 84) {
        uint8_t L[256], Ls[16], Lm[16];
        float d_block, m_block;
        if (importance) {
            weighted_offset_groups(x, importance + 256 * b, 1.0f, 16, 3, 15, L, Ls, Lm, &d_block, &m_block);
        } else {
            float w[16], scales[16], mins[16];
            uint8_t aux[16];
            for (int j = 0; j < 16; j++) {
                for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
                scales[j] = offset_codes(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], aux, -0.5f, 0.1f, 15, 1);
            }
            d_block = codes_on_largest(scales, 16, 15.0f, Ls);
            m_block = codes_on_largest(mins, 16, 15.0f, Lm);
        }
        uint8_t *sc = y;
        for (int j = 0; j < 16; j++) sc[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        qt_store_f16(y + 80, d_block);
        qt_store_f16(y + 82, m_block);
        const float d0 = blk_f16(y + 80), m0 = blk_f16(y + 82);
        for (int j = 0; j < 16; j++) {
            const float d = d0 * (sc[j] & 0xF);
            if (d == 0.0f) continue;
            const float dm = m0 * (sc[j] >> 4);
            for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)clampi(round_even((x[16 * j + i] + dm) / d), 0, 3);
        }
        pack_planes(L, y + 16);
    }
}

// Q3_K's group fit: symmetric codes in [-nmax, nmax) weighted by x^2, from the largest
// magnitude's grid, then up to five passes moving single codes where that improves the
// least-squares fit. L gets code + nmax; returns the fitted scale. (Without an importance only:
// the weighted Q3_K fits its groups with symmetric_codes, so qw is always NULL.)
static float refined_codes(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    (void)qw;
    const float max = largest(n, x);
    if (max == 0.0f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clampi(round_even(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                const int l = clampi(round_even(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (l != L[i]) {
                    slx += w * x[i] * l;
                    sl2 += w * l * l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Q3_K: sixteen groups of 16 with signed 6-bit scales under an f16 d; codes -4..3. Without an
// importance the groups take refined_codes and the scales the largest one's grid; with one,
// both are weighted searches (llama-quantize's --imatrix). Layout: hmask[32] (bit 2 of weight j
// in bit j/32 of byte j%32), qs[64] (the low two bits as Q2_K), scales[12] (low nibbles in
// bytes 0..7, high two bits in 8..11), d.
static void q3_K_rows(const float *x, const float *importance, uint8_t *y, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, x += 256, y += 110) {
        int8_t L[256], Ls[16];
        float scales[16];
        float d_block = 0.0f;
        if (importance) {
            float w[256], sw[16];
            importance_weights(x, importance + 256 * b, 2.0f, w);
            fit_groups(x, 4, symmetric_codes, L, scales, w);
            group_sums(w, 16, sw);
            d_block = symmetric_codes(16, 32, scales, Ls, sw);
        } else {
            const float max_scale = fit_groups(x, 4, refined_codes, L, scales, NULL);
            if (max_scale != 0.0f) {
                const float iscale = -32.0f / max_scale;
                for (int j = 0; j < 16; j++) Ls[j] = (int8_t)(clampi((int8_t)round_even(iscale * scales[j]), -32, 31) + 32);
                d_block = 1 / iscale;
            } else {
                memset(Ls, 0, 16); // all zero: every scale byte 0, as ggml's reference writes it
            }
        }
        uint8_t *sc = y + 96;
        memset(sc, 0, 12);
        for (int j = 0; j < 16; j++) {
            const int l = Ls[j];
            if (j < 8) sc[j] = (uint8_t)(l & 0xF);
            else sc[j - 8] |= (uint8_t)((l & 0xF) << 4);
            sc[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        qt_store_f16(y + 108, d_block);
        const float d0 = blk_f16(y + 108);
        for (int j = 0; j < 16; j++) {
            const int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
            const int s = (lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            const float d = d0 * s;
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(clampi(round_even(x[16 * j + i] / d), -4, 3) + 4);
        }
        uint8_t *hmask = y, *qs = y + 32;
        memset(hmask, 0, 32);
        for (int j = 0; j < 256; j++) {
            if (L[j] > 3) {
                hmask[j % 32] |= (uint8_t)(1 << (j / 32));
                L[j] -= 4;
            }
        }
        pack_planes((const uint8_t *)L, qs);
    }
}

// The entry points: round to nearest (ggml's reference) and importance-weighted.
void qt_quantize_q2_K(const float *x, uint8_t *y, int64_t n) { q2_K_rows(x, NULL, y, n); }
void qt_quantize_q3_K(const float *x, uint8_t *y, int64_t n) { q3_K_rows(x, NULL, y, n); }
void qt_quantize_q4_K(const float *x, uint8_t *y, int64_t n) { q4_K_rows(x, NULL, y, n); }
void qt_quantize_q5_K(const float *x, uint8_t *y, int64_t n) { q5_K_rows(x, NULL, y, n); }
QT_WEIGHTED(q2_K) { q2_K_rows(x, importance, y, n); }
QT_WEIGHTED(q3_K) { q3_K_rows(x, importance, y, n); }
QT_WEIGHTED(q4_K) { q4_K_rows(x, importance, y, n); }
QT_WEIGHTED(q5_K) { q5_K_rows(x, importance, y, n); }
