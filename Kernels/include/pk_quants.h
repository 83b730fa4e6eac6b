// Quantized tensor formats as GGUF stores them (ggml's block layouts), and their dequantizers.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Type ids are ggml's (the numbers GGUF files carry).
typedef enum pk_type {
    PK_F32 = 0, PK_F16 = 1, PK_Q4_0 = 2, PK_Q4_1 = 3,
    PK_Q5_0 = 6, PK_Q5_1 = 7, PK_Q8_0 = 8, PK_Q8_1 = 9,
    PK_Q2_K = 10, PK_Q3_K = 11, PK_Q4_K = 12, PK_Q5_K = 13, PK_Q6_K = 14, PK_Q8_K = 15,
    PK_BF16 = 30,
} pk_type;

// Weights per block (1 for float types); 0 when the type is not supported.
int64_t pk_block_elements(int type);
// Bytes per block; 0 when the type is not supported.
size_t pk_block_bytes(int type);
// Dequantizes `n` consecutive weights (a multiple of the block size) starting at `src`.
// Returns 0, or -1 when the type is unsupported or `n` is not a whole number of blocks.
int pk_dequantize(int type, const void *src, float *dst, int64_t n);

float pk_f16_to_f32(uint16_t h);
uint16_t pk_f32_to_f16(float f);
float pk_bf16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif
