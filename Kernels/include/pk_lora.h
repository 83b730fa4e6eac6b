// Low-rank adapter (LoRA) products added to the output of a weight matrix, for the rows of a
// batch whose sequences use the adapter: y[row] += scale * (x[row] * A^T) * B^T.
#pragma once
#include <stdint.h>
#include "pk_pool.h"

// The largest rank pk_lora_apply takes.
#define PK_LORA_MAX_RANK 1024

#ifdef __cplusplus
extern "C" {
#endif

// One adapter's pair on one matrix, for `n` rows of the batch. A is rank x k and bt (B
// transposed) rank x m, both row-major int8, each row r scaled by a_scale[r] / bt_scale[r]
// (pk_lora_quantize_rows). Row rows[i] of x is the input of the op's i-th row, and row rows[i]
// of y (stride ldy) its output.
typedef struct {
    const int8_t *a, *bt;
    const float *a_scale, *bt_scale;
    int64_t rank, m;
    float scale;
    float *y;
    int64_t ldy;
    const int32_t *rows;
    int64_t n;
} pk_lora_op;

// Adds every op's low-rank product to its rows of y. `x` holds the batch's inputs, rows of
// width k. Ops may share x rows (one adapter's q, k and v) and must not write the same y
// elements. Returns 0, or -1 on bad
// arguments (a rank above PK_LORA_MAX_RANK among them). Every element is summed in one fixed
// order, whatever the thread count, the batch around the row or the instruction set: a row's
// result depends on that row alone.
int pk_lora_apply(pk_pool *pool, const pk_lora_op *ops, int nops, const float *x, int64_t k);

// Int8 rows for pk_lora_op: each of the `rows` rows of x (width `cols`) as round(x / s), clamped
// to ±127, with s the scale among max|x|/127 · (1 − i/64), i < 16, of least squared error (0 for
// a zero row), written to scale[row].
void pk_lora_quantize_rows(const float *x, int64_t rows, int64_t cols, int8_t *q, float *scale);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
extern "C" {
#endif

// Merges a pair into a matrix: the `rows` x k matrix `w` of type `in_type` plus
// scale * B * A (bt: B transposed, rank x rows; a: rank x k), written to `out` as `out_type`
// (quantized to nearest). Rows are split between the pool's threads. Returns 0, or -1 when a
// type cannot be read or written, k is not whole blocks of both types, or memory runs out.
int pk_lora_merge(pk_pool *pool, int in_type, const void *w, int out_type, void *out, int64_t rows, int64_t k,
                  const float *a, const float *bt, int64_t rank, float scale);

#ifdef __cplusplus
}
#endif
