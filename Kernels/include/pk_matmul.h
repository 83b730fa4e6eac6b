// Matrix products of quantized weights with activations.
//
// Quantized weights meet activations quantized to int8 the way llama.cpp quantizes them for
// each weight type, and are summed as exact integers per sub-block (see qtile.h for the exact
// definition), so a row's result does not depend on how many rows share the call or on the
// instruction set: batched and single-token steps agree bit for bit.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "pk_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

// One product of a call: y[t*ldy + r] = sum_i w[r][i] * x[t][i] for r in [0,m).
// `w` points at m rows of `type` laid out one after another.
typedef struct pk_matmul_op {
    int type;
    const void *w;
    int64_t m;
    float *y;
    int64_t ldy;
} pk_matmul_op;

// Most products one call may hold.
#define PK_MATMUL_MAX_OPS 4

// Bytes of scratch a call needs for n activation rows of length k with `threads` threads.
size_t pk_matmul_scratch_bytes(int64_t n, int64_t k, int threads);

// Runs `count` products of the same n x k input in one pass over the pool: the input is
// quantized once per activation format, and the threads split all the rows between them.
// Returns 0, or -1 for an unsupported type, a row length that is not whole blocks, or a
// count outside [1, PK_MATMUL_MAX_OPS].
int pk_matmul_many(pk_pool *pool, const pk_matmul_op *ops, int count, int64_t k,
                   const float *x, int64_t n, void *scratch);

// A single product: pk_matmul_many with one op.
int pk_matmul(pk_pool *pool, int type, const void *w, int64_t m, int64_t k,
              const float *x, int64_t n, float *y, int64_t ldy, void *scratch);

// Instruction sets of the kernels. The widest the CPU supports is used unless a test asks for
// another one (every path gives the same bits; the scalar one is the reference).
enum { PK_ISA_SCALAR = 0, PK_ISA_AVX2 = 1, PK_ISA_AVX512 = 2 };
// The instruction set in use.
int pk_matmul_isa(void);
// Selects `isa` when the CPU supports it; returns the one now in use.
int pk_matmul_set_isa(int isa);

#ifdef __cplusplus
}
#endif
