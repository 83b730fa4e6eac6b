// Matrix products of quantized weights with activations.
//
// Quantized weights meet activations quantized to int8 in blocks of 32 (one f32 scale per block)
// and are summed as exact integers per 16-weight sub-block, so a row's result does not depend
// on how many rows share the call: batched and single-token steps agree bit for bit.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "pk_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

// Activations of `n` rows of length `k` (k a multiple of 32) quantized for pk_matmul.
typedef struct pk_qact {
    int8_t *q;     // n*k
    float *d;      // n*k/32 block scales
    float *xs;     // n*k/16: d * sum(q) over each 16-value half block
} pk_qact;

// Bytes of scratch pk_matmul needs for n activation rows of length k with `threads` threads.
size_t pk_matmul_scratch_bytes(int64_t n, int64_t k, int threads);

// True when weights of this type go through the int8 path (all block-quantized types).
int pk_type_uses_q8(int type);

// Unpacks one row of n weights so that w[i] = scale[i/16] * q[i] + offset[i/16].
// Returns -1 for types without an integer form (floats, unsupported).
int pk_unpack_row(int type, const void *src, int64_t n, int8_t *q, float *scale, float *offset);

// y[t*ldy + r] = sum_i w[r][i] * x[t*k + i] for r in [0,m), t in [0,n).
// `w` points at m rows of `type` laid out one after another (row length k).
// `scratch` holds pk_matmul_scratch_bytes(n, k, threads) bytes. Returns 0, or -1 for a bad type/k.
int pk_matmul(pk_pool *pool, int type, const void *w, int64_t m, int64_t k,
              const float *x, int64_t n, float *y, int64_t ldy, void *scratch);

#ifdef __cplusplus
}
#endif
