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
