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
// `w` points at m rows of `type` laid out one after another; `packed`, when not NULL, at the
// same weights as pk_pack wrote them (64-byte aligned), which the kernels then read instead.
// Epilogues, applied to each tile's results while they are in cache (quantized types only):
// `bias` (m values) is added to every row's result, and with `accumulate` the result is added
// to y instead of stored (y = y + (product + bias), as a separate pk_add_rows would give).
typedef struct pk_matmul_op {
    int type;
    const void *w;
    int64_t m;
    float *y;
    int64_t ldy;
    const void *packed;
    const float *bias;
    int accumulate;
} pk_matmul_op;

// What pk_matmul_fused does around the products.
typedef struct pk_matmul_fuse {
    // PK_GLU_SILU or PK_GLU_GELU_TANH: two ops of equal m, and ops[0].y = act(ops[0]) * ops[1]
    // (pk_swiglu's or pk_geglu's bits); ops[1].y may be used as scratch. PK_GLU_NONE: no pairing.
    int glu;
    // When set, the input rows are first made: x = RMSNorm(norm_source) * norm_weight, as
    // pk_rms_norm gives them: x is written (it must be writable; norm_source may be x itself),
    // and is the products' input.
    const float *norm_source;
    const float *norm_weight;
    float norm_eps;
} pk_matmul_fuse;

enum { PK_GLU_NONE = 0, PK_GLU_SILU = 1, PK_GLU_GELU_TANH = 2 };

// Packed weights: the rows of whole 16-row tiles, reordered so that the kernels load each
// tile's rows side by side instead of shuffling them together at every product, and (legacy
// 32-weight formats) each field of a block on whole vectors (same bytes, same results bit for
// bit; the rows past the last whole tile are read from `w`).
// The layout's version: stored packed weights of another version must be packed again.
#define PK_PACK_VERSION 2
// Bytes pk_pack writes for an m x k matrix of `type` (a multiple of 64), or 0 when the type
// has no packed form or m < 16.
size_t pk_pack_bytes(int type, int64_t m, int64_t k);
// Writes the packed form of `w` to `dst` (pk_pack_bytes(type, m, k) bytes). Returns 0, or -1
// when the type has no packed form or k is not whole blocks.
int pk_pack(int type, const void *w, int64_t m, int64_t k, void *dst);
// Copies row `row` of packed weights back out in the file's layout (the row's bytes) to `dst`.
// Returns 0, or -1 when the row is past the last whole tile (read it from the file instead).
int pk_packed_row(int type, const void *packed, int64_t m, int64_t k, int64_t row, void *dst);

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

// pk_matmul_many with the fusions of `fuse` (NULL: none) and the ops' epilogues. Returns -1
// as pk_matmul_many does, and also when an epilogue or the pairing is asked of float weights
// or the pairing of ops that are not two of equal m.
int pk_matmul_fused(pk_pool *pool, const pk_matmul_op *ops, int count, int64_t k, const float *x, int64_t n,
                    const pk_matmul_fuse *fuse, void *scratch);

// A single product: pk_matmul_many with one op.
int pk_matmul(pk_pool *pool, int type, const void *w, int64_t m, int64_t k,
              const float *x, int64_t n, float *y, int64_t ldy, void *scratch);

#ifdef __cplusplus
}
#endif
