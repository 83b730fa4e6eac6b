// Shared by the CUDA test and benchmark programs: random data, random weights of every format,
// f16 helpers, and checked calls.
#pragma once
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pk_cuda.h"
#include "PlinthKernels.h"

// Block geometry from the kernels' type table.
static inline int64_t block_elements(int type) {
    pk_type_info info;
    return pk_type_info_of(type, &info) == 0 ? info.block_elements : 0;
}
static inline size_t block_bytes(int type) {
    pk_type_info info;
    return pk_type_info_of(type, &info) == 0 ? info.block_bytes : 0;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rng_u64(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static inline double rng_unit(void) { return (double)(rng_u64() >> 11) * (1.0 / 9007199254740992.0); }
static inline float rng_uniform(float lo, float hi) { return lo + (hi - lo) * (float)rng_unit(); }
static inline float rng_normal(void) {
    const double u = rng_unit() + 1e-12, v = rng_unit();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void fill_normal(float *x, int64_t count, float scale) {
    for (int64_t i = 0; i < count; i++) x[i] = scale * rng_normal();
}

static void put_f16(uint8_t *p, float v) {
    const uint16_t h = pk_f32_to_f16(v);
    memcpy(p, &h, 2);
}

// Random weights of `type`: random bytes for the quants and sub-scales, then the f16 super
// scales (and mins) overwritten with values of a real model's size, so nothing is NaN or huge.
static void random_weights(int type, uint8_t *w, int64_t m, int64_t k) {
    const size_t row = pkc_row_bytes(type, k);
    const size_t total = row * (size_t)m;
    if (type == PK_F32) {
        fill_normal((float *)w, m * k, 0.05f);
        return;
    }
    if (type == PK_F16 || type == PK_BF16) {
        for (int64_t i = 0; i < m * k; i++) {
            const float v = 0.05f * rng_normal();
            uint16_t h;
            if (type == PK_F16) h = pk_f32_to_f16(v);
            else { uint32_t u; memcpy(&u, &v, 4); h = (uint16_t)(u >> 16); }
            memcpy(w + 2 * i, &h, 2);
        }
        return;
    }
    for (size_t i = 0; i < total; i++) w[i] = (uint8_t)rng_u64();
    const int64_t be = block_elements(type);
    const size_t bb = block_bytes(type);
    const int64_t blocks = m * (k / be);
    for (int64_t b = 0; b < blocks; b++) {
        uint8_t *p = w + (size_t)b * bb;
        switch (type) {
        case PK_Q4_0: case PK_Q5_0: case PK_Q8_0: case PK_PQ2: case PK_IQ4_NL:
            put_f16(p, rng_uniform(0.001f, 0.01f) * (rng_u64() & 1 ? 1.0f : -1.0f));
            break;
        case PK_Q4_1: case PK_Q5_1:
            put_f16(p, rng_uniform(0.001f, 0.01f));
            put_f16(p + 2, rng_uniform(-0.08f, 0.0f));
            break;
        case PK_Q2_K: put_f16(p + 80, rng_uniform(0.001f, 0.01f)); put_f16(p + 82, rng_uniform(0.0f, 0.005f)); break;
        case PK_Q3_K: put_f16(p + 108, rng_uniform(0.0002f, 0.002f)); break;
        case PK_Q4_K: case PK_Q5_K: put_f16(p, rng_uniform(0.0002f, 0.002f)); put_f16(p + 2, rng_uniform(0.0f, 0.002f)); break;
        case PK_Q6_K: put_f16(p + 208, rng_uniform(0.00005f, 0.0005f)); break;
        case PK_IQ4_XS: put_f16(p, rng_uniform(0.00002f, 0.0002f) * (rng_u64() & 1 ? 1.0f : -1.0f)); break;
        default: break;
        }
    }
}

// Every weight type the kernels handle.
static const int all_types[] = {PK_F32, PK_F16, PK_BF16, PK_Q4_0, PK_Q4_1, PK_Q5_0, PK_Q5_1, PK_Q8_0,
                                PK_Q2_K, PK_Q3_K, PK_Q4_K, PK_Q5_K, PK_Q6_K, PK_IQ4_NL, PK_IQ4_XS, PK_PQ2};
#define NTYPES ((int)(sizeof all_types / sizeof all_types[0]))

static const char *type_name(int type) {
    switch (type) {
    case PK_F32: return "F32"; case PK_F16: return "F16"; case PK_BF16: return "BF16";
    case PK_Q4_0: return "Q4_0"; case PK_Q4_1: return "Q4_1"; case PK_Q5_0: return "Q5_0"; case PK_Q5_1: return "Q5_1";
    case PK_Q8_0: return "Q8_0"; case PK_Q2_K: return "Q2_K"; case PK_Q3_K: return "Q3_K"; case PK_Q4_K: return "Q4_K";
    case PK_Q5_K: return "Q5_K"; case PK_Q6_K: return "Q6_K"; case PK_IQ4_NL: return "IQ4_NL";
    case PK_IQ4_XS: return "IQ4_XS"; case PK_PQ2: return "PQ2"; default: return "?";
    }
}

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// A call that must succeed: on failure prints the context's message and exits (the programs
// have nothing sensible to do after a failed device call).
#define CHECK(ctx, call)                                                                              \
    do {                                                                                              \
        const int st_ = (call);                                                                       \
        if (st_ != PKC_OK) {                                                                          \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, pkc_status_name(st_), \
                    pkc_error(ctx));                                                                  \
            exit(2);                                                                                  \
        }                                                                                             \
    } while (0)

static pkc_ptr dev_alloc(pkc_context *c, size_t bytes) {
    pkc_ptr p = 0;
    CHECK(c, pkc_alloc(c, bytes ? bytes : 16, &p));
    return p;
}

static pkc_ptr dev_upload(pkc_context *c, const void *src, size_t bytes) {
    pkc_ptr p = dev_alloc(c, bytes);
    CHECK(c, pkc_upload(c, p, src, bytes));
    return p;
}
