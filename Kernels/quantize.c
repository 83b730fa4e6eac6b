// Reference quantizers: floats to a type's blocks by round-to-nearest, bit for bit what ggml's
// reference quantizers write (the same expressions, in the same float order), so a file this
// writes is the file llama-quantize writes without an importance matrix. Each is its type's
// row's `quantize` (types.h); blocks.h documents the layouts they fill.
#include "pk_quants.h"
#include "types.h"

#include <math.h>
#include <string.h>

#pragma STDC FP_CONTRACT OFF

static void store_f16(uint8_t *p, float v) {
    const uint16_t h = pk_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

void qt_quantize_f32(const float *x, uint8_t *y, int64_t n) {
    if (n > 0) memcpy(y, x, (size_t)n * sizeof(float));
}

void qt_quantize_f16(const float *x, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) store_f16(y + 2 * i, x[i]);
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
static void legacy_codes(const float *x, int bits, int offset, float *d, float *m, uint8_t q[32]) {
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
        const int v = (int8_t)(x[j] * id + (half + 0.5f));
        q[j] = (uint8_t)(v < top ? v : top);
    }
}

// Writes one legacy block: head (d, or d and m), the fifth bits (five-bit formats), the nibbles
// (weight j low, weight j+16 high).
static void legacy_block(const float *x, int bits, int offset, uint8_t *b) {
    float d, m;
    uint8_t q[32];
    legacy_codes(x, bits, offset, &d, &m, q);
    store_f16(b, d);
    uint8_t *p = b + 2;
    if (offset) {
        store_f16(p, m);
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

#define LEGACY_QUANTIZER(name, bits, offset, bytes)                                          \
    void name(const float *x, uint8_t *y, int64_t n) {                                       \
        for (int64_t b = 0; b < n / 32; b++) legacy_block(x + 32 * b, bits, offset, y + (bytes) * b); \
    }
LEGACY_QUANTIZER(qt_quantize_q4_0, 4, 0, 18)
LEGACY_QUANTIZER(qt_quantize_q4_1, 4, 1, 20)
LEGACY_QUANTIZER(qt_quantize_q5_0, 5, 0, 22)
LEGACY_QUANTIZER(qt_quantize_q5_1, 5, 1, 24)

// Q8_0: d = amax / 127, q = round(x / d), half away from zero.
void qt_quantize_q8_0(const float *x, uint8_t *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b;
        uint8_t *out = y + 34 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        store_f16(out, d);
        for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)roundf(xb[j] * id);
    }
}

int pk_quantize(int type, const float *src, void *dst, int64_t n) {
    const qt_type *ty = qt_type_of(type);
    if (!ty || !ty->quantize || n < 0 || n % ty->elements != 0) return -1;
    ty->quantize(src, (uint8_t *)dst, n);
    return 0;
}
