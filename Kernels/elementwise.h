// Elementwise kernels for other kernels to run as their prologue or epilogue (the matrix
// product's fused RMSNorm and gated activation). The same definitions as pk_rms_norm and
// pk_swiglu / pk_geglu, so a fused step gives the unfused one's bits. Internal.
#pragma once
#include <stdint.h>

#include "pk_pool.h"

// Rows [r0, r1) of y = RMSNorm(x) * w, rows of k (y may be x), on the calling thread.
void ew_rms_norm_rows(const float *x, const float *w, float *y, int64_t r0, int64_t r1, int64_t k, float eps);
// gate[c*ldg + i] = act(gate[c*ldg + i]) * up[c*ldu + i] for c < rows, i < count: SiLU, or
// GELU's tanh form when `gelu`; shared between the pool's threads when it pays (pool NULL: on
// the calling thread). pk_swiglu and pk_geglu are this with packed rows.
void ew_gated_rows(pk_pool *pool, int gelu, float *gate, int64_t ldg, const float *up, int64_t ldu, int64_t rows,
                   int64_t count);
