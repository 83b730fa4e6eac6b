// IQ4_NL and IQ4_XS quantizers (Plinth's own search; ggml's writes other bytes for the same
// floats). A block's values are d * V[c] for the 16 non-uniform levels V (blocks.h): the scale
// is searched, each trial's codes refitted by weighted least squares, and the codes are chosen
// again for the scale as stored (f16, and IQ4_XS's six-bit sub-block scales).
#include "pk_quants.h"
#include "types.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static const float iq4_ones[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

// The level index nearest v (in units of the scale): the count of midpoints between adjacent
// levels below v. The midpoints are multiples of 1/2, so a table over floor(2v) gives it.
#define IQ4_LO (-2 * 127 - 2)
#define IQ4_HI (2 * 113 + 2)
static uint8_t iq4_index_table[IQ4_HI - IQ4_LO + 1];
static pthread_once_t iq4_table_once = PTHREAD_ONCE_INIT;

static void iq4_build_table(void) {
    for (int h = IQ4_LO; h <= IQ4_HI; h++) {
        // v in [h/2, (h+1)/2): a midpoint m counts when m <= h/2 (v at m itself goes up).
        int i = 0;
        for (int j = 0; j < 15; j++) i += blk_iq4_levels[j] + blk_iq4_levels[j + 1] <= h;
        iq4_index_table[h - IQ4_LO] = (uint8_t)i;
    }
}

static inline int iq4_nearest(float v) {
    const float t = floorf(2.0f * v);
    const int h = !(t >= (float)IQ4_LO) ? IQ4_LO : t > (float)IQ4_HI ? IQ4_HI : (int)t; // NaN: the lowest
    return iq4_index_table[h - IQ4_LO];
}

// Codes of n values for scale d (index 8, the level nearest zero, where d is zero), and the
// weighted sums of the least-squares refit: sxv = sum w x V, svv = sum w V^2.
static void iq4_codes(const float *x, const float *w, int n, float d, uint8_t *q, float *sxv, float *svv) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    float a = 0.0f, b = 0.0f;
    for (int j = 0; j < n; j++) {
        const int c = d != 0.0f ? iq4_nearest(x[j] * id) : 8;
        const float v = (float)blk_iq4_levels[c];
        q[j] = (uint8_t)c;
        a += w[j] * x[j] * v;
        b += w[j] * v * v;
    }
    *sxv = a;
    *svv = b;
}

// The scale of n values (32) minimizing sum w (x - d V[c])^2, unrounded, and its codes. Trials
// put the value of largest magnitude at 0.8 to 1.2 times either end level (-127 or 113), each
// refitted to its codes; the best is then refined by rounding and refitting while that helps.
static float iq4_fit(const float *x, const float *w, int n, uint8_t *q) {
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); m = x[j]; }
    if (amax == 0.0f) {
        memset(q, 8, (size_t)n);
        return 0.0f;
    }
    uint8_t t[32];
    float best = -1.0f, best_d = 0.0f;
    for (int end = 0; end < 2; end++) {
        const float level = end ? 113.0f : -127.0f;
        for (int step = 0; step <= 16; step++) {
            const float d0 = m / (level * (0.8f + 0.025f * (float)step));
            float sxv, svv;
            iq4_codes(x, w, n, d0, t, &sxv, &svv);
            if (!(svv > 0.0f)) continue;
            const float score = sxv * sxv / svv; // the error's reduction at the refitted scale
            if (score > best) { best = score; best_d = sxv / svv; memcpy(q, t, (size_t)n); }
        }
    }
    // Importance all zero here: no error is visible to the weights, so plain least squares.
    if (best < 0.0f) return w == iq4_ones ? 0.0f : iq4_fit(x, iq4_ones, n, q);
    for (int round = 0; round < 4 && best_d != 0.0f; round++) {
        float sxv, svv;
        iq4_codes(x, w, n, best_d, t, &sxv, &svv);
        if (!(svv > 0.0f) || !(sxv * sxv / svv > best)) break;
        best = sxv * sxv / svv;
        best_d = sxv / svv;
        memcpy(q, t, (size_t)n);
    }
    return best_d;
}

static inline float f16_round(float v) { return pk_f16_to_f32(pk_f32_to_f16(v)); }

// Sixteen bytes of nibbles: code j low, code j + 16 high (blocks.h's IQ4 layout).
static void iq4_pack_nibbles(const uint8_t q[32], uint8_t *qs) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
}

static void iq4_ready(void) { pthread_once(&iq4_table_once, iq4_build_table); }

static void iq4_nl_row(const float *x, const float *importance, uint8_t *y, int64_t n) {
    iq4_ready();
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b, *w = importance ? importance + 32 * b : iq4_ones;
        uint8_t q[32], *out = y + 18 * b;
        const float d = f16_round(iq4_fit(xb, w, 32, q));
        float sxv, svv;
        iq4_codes(xb, w, 32, d, q, &sxv, &svv); // the codes for the scale as stored
        qt_store_f16(out, d);
        iq4_pack_nibbles(q, out + 2);
    }
}

// IQ4_XS: each sub-block's scale fitted alone, then the super-block's d puts the largest in
// magnitude at -32 (six-bit scales s - 32 span -32..31), every sub-block's scale rounded to d's
// grid, and its codes chosen again for that scale.
static void iq4_xs_row(const float *x, const float *importance, uint8_t *y, int64_t n) {
    iq4_ready();
    for (int64_t b = 0; b < n / 256; b++) {
        const float *xb = x + 256 * b;
        uint8_t *out = y + 136 * b, q[32];
        float ds[8], dmax = 0.0f;
        const float *w[8];
        for (int i = 0; i < 8; i++) {
            w[i] = importance ? importance + 256 * b + 32 * i : iq4_ones;
            ds[i] = iq4_fit(xb + 32 * i, w[i], 32, q);
            if (fabsf(ds[i]) > fabsf(dmax)) dmax = ds[i];
        }
        const float d = f16_round(-dmax / 32.0f);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t high = 0;
        memset(out + 4, 0, 4);
        for (int i = 0; i < 8; i++) {
            int s = (int)nearbyintf(ds[i] * id);
            s = (s < -32 ? -32 : s > 31 ? 31 : s) + 32;
            out[4 + i / 2] |= (uint8_t)((s & 15) << (4 * (i % 2)));
            high |= (uint16_t)((s >> 4) << (2 * i));
            float sxv, svv;
            iq4_codes(xb + 32 * i, w[i], 32, d * (float)(s - 32), q, &sxv, &svv);
            iq4_pack_nibbles(q, out + 8 + 16 * i);
        }
        qt_store_f16(out, d);
        out[2] = (uint8_t)high;
        out[3] = (uint8_t)(high >> 8);
    }
}

void qt_quantize_iq4_nl(const float *x, uint8_t *y, int64_t n) { iq4_nl_row(x, NULL, y, n); }
void qt_quantize_weighted_iq4_nl(const float *x, const float *importance, uint8_t *y, int64_t n) { iq4_nl_row(x, importance, y, n); }
void qt_quantize_iq4_xs(const float *x, uint8_t *y, int64_t n) { iq4_xs_row(x, NULL, y, n); }
void qt_quantize_weighted_iq4_xs(const float *x, const float *importance, uint8_t *y, int64_t n) { iq4_xs_row(x, importance, y, n); }
