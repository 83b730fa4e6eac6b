// Gated activations on a span of values, for the fused gate|up product (matmul.c). Internal.
#pragma once
#include <stdint.h>

// gate[i] = act(gate[i]) * up[i] for i < count, act = SiLU (gelu 0) or gelu's tanh form (gelu 1):
// pk_swiglu's and pk_geglu's bits, on the instruction set in use.
void gated_activation(int gelu, float *gate, const float *up, int64_t count);
