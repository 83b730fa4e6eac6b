// Tensor formats as GGUF stores them (ggml's types and block layouts), and their dequantizers.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Type ids are ggml's (the numbers GGUF files carry). Only the ones the kernels compute with
// are named here; every id ggml has defined has a row in the type table (types.h).
typedef enum pk_type {
    PK_F32 = 0, PK_F16 = 1, PK_Q4_0 = 2, PK_Q4_1 = 3,
    PK_Q5_0 = 6, PK_Q5_1 = 7, PK_Q8_0 = 8, PK_Q8_1 = 9,
    PK_Q2_K = 10, PK_Q3_K = 11, PK_Q4_K = 12, PK_Q5_K = 13, PK_Q6_K = 14, PK_Q8_K = 15,
    PK_IQ4_NL = 20, PK_IQ4_XS = 23, PK_BF16 = 30,
    PK_TYPE_COUNT = 42, // one past the largest id ggml has defined
    // Plinth's own formats take ids far past ggml's, so that other engines refuse a file that
    // uses one as an unknown type instead of misreading it (the file also names them under
    // `plinth.quantization.types`).
    PK_PLINTH_TYPES = 1024,
    PK_PQ2 = 1024, // 2-bit, 32-weight blocks: any row length that is a multiple of 32
    PK_PLINTH_TYPE_END = 1025,
} pk_type;

// A type as the table describes it.
typedef struct pk_type_info {
    const char *name;        // ggml's name, as llama.cpp prints it ("Q4_K")
    int64_t block_elements;  // weights per block (1 for plain number types)
    size_t block_bytes;      // bytes per block
    int can_dequantize;      // pk_dequantize reads it
    int can_multiply;        // pk_matmul multiplies it
    int can_quantize;        // pk_quantize writes it
    int can_gptq;            // pk_gptq writes it
    int can_weight;          // pk_quantize_weighted uses the importance (else it rounds to nearest)
    int exact_q8_0;          // pk_to_q8_0 rewrites it as Q8_0 exactly (Q4_0, Q5_0, Q8_0, IQ4_NL, PQ2: 32 weights d * q, an f16 d)
} pk_type_info;

// Fills `info` for ggml's type id `type`. Returns 0, or -1 when ggml has never defined the id.
int pk_type_info_of(int type, pk_type_info *info);

// Dequantizes `n` consecutive weights (a multiple of the block size) starting at `src`.
// Returns 0, or -1 when the type cannot be read or `n` is not a whole number of blocks.
int pk_dequantize(int type, const void *src, float *dst, int64_t n);

// Rewrites `n` weights of `type` (whole blocks) as Q8_0 blocks with the same values: each block
// keeps its f16 d and its codes become int8 (Q5_0's q - 16, Q4_0's q - 8, PQ2's 2c - 3), so that
// dequantizing either gives the same floats, bit for bit (d's bytes are copied). For the types
// whose info says exact_q8_0. Returns 0, or -1 for another type or `n` not whole blocks (dst then
// unwritten).
int pk_to_q8_0(int type, const void *src, void *dst, int64_t n);

// Quantizes `n` floats (a multiple of the block size) to `dst` by round-to-nearest, as ggml's
// reference quantizers do. Returns 0, or -1 when the type cannot be written or `n` is not whole
// blocks.
int pk_quantize(int type, const float *src, void *dst, int64_t n);

// The same, choosing each block's scale (and minimum) to minimize the error weighted by
// `importance` (one value per weight of the row: an importance matrix's mean squares of the
// activations each column meets). Types without a weighted quantizer round to nearest.
int pk_quantize_weighted(int type, const float *src, void *dst, int64_t n, const float *importance);

// GPTQ: quantizes the m x k matrix `w` (row-major, floats; changed in place) to `dst` (m rows of
// `type`: one whose info says can_gptq), spreading each column's rounding error over the
// later columns through the inverse of `h` = X^T X (k x k, the calibration activations' sums;
// `damp` times its mean diagonal is added). Returns 0, or -1 for another type, k not whole
// blocks, or a Hessian that stays singular.
int pk_gptq(int type, float *w, int64_t m, int64_t k, const float *h, float damp, void *dst);

float pk_f16_to_f32(uint16_t h);
uint16_t pk_f32_to_f16(float f);
float pk_bf16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif
