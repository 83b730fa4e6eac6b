// Elementwise and attention kernels of the transformer step.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "pk_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

// The elementwise kernels split their rows between the pool's threads when there is enough
// work to pay for the hand-off (prefill, batches); a pool may be NULL (one thread). Every row is
// computed the same way on every ISA and thread count.

// y = x / sqrt(mean(x^2) + eps) * w, for n rows of length k (y may alias x).
void pk_rms_norm(pk_pool *pool, const float *x, const float *w, float *y, int64_t n, int64_t k, float eps);

// The rotations of rotary position embedding for n rows at `positions`: table[t*rope_dims + 2i]
// and [.. + 2i + 1] hold cos and sin of pair i's angle. Computed once per step, used by every
// layer's pk_rope.
// Pair i's angle at position p is freq_scale * (p * freq_base^(-2i/rope_dims) / factors[i]), as
// llama.cpp computes it without YaRN: freq_scale is 1/factor for linear RoPE scaling, and
// `factors` (NULL: all 1) are per-pair frequency factors (Llama 3.1's rope_freqs).
void pk_rope_table(const int32_t *positions, int64_t n, int rope_dims, float freq_base, float freq_scale,
                   const float *factors, float *table);

// Rotary position embedding in place on n rows, each holding `heads` heads of `head_dim` values
// (row stride `stride`), row t rotated by row t of `table` (pk_rope_table). `neox` pairs value
// i with i+head_dim/2 (GPT-NeoX, Qwen2); otherwise adjacent pairs (2i, 2i+1) as GGUF stores
// llama's Q/K.
void pk_rope(pk_pool *pool, float *x, int64_t n, int64_t stride, int heads, int head_dim, int rope_dims,
             const float *table, int neox);

// gate = silu(gate) * up over n rows of k values, with silu(g) = g / (1 + e^-g) and e^x from a
// fixed polynomial (kexp.h), the same bits on every ISA.
void pk_swiglu(pk_pool *pool, float *gate, const float *up, int64_t n, int64_t k);

// gate = gelu(gate) * up (Gemma's gated FFN), with gelu's tanh form
// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), computed as g / (1 + e^-2u): the same bits on
// every ISA.
void pk_geglu(pk_pool *pool, float *gate, const float *up, int64_t n, int64_t k);

// y += x for `rows` rows of k values: row t of y is y + t*k, row t of x is x + t*x_stride
// (x_stride 0: the same x for every row, as a bias), shared between the pool's threads.
void pk_add_rows(pk_pool *pool, float *y, const float *x, int64_t rows, int64_t k, int64_t x_stride);

// Converts count floats to IEEE half, rounding to nearest even.
void pk_f32_to_f16_row(const float *x, uint16_t *y, int64_t count);

// The index of the largest of n values (the lowest among equals; NaNs never win; 0 when none
// is above -infinity).
int64_t pk_argmax(const float *x, int64_t n);

// Attention reads each sequence's keys from blocks of PK_KEY_BLOCK positions, stored
// transposed so that one vector scores a block's positions together: block b starts
// b * PK_KEY_BLOCK * kv_dim halves into the sequence's keys and holds value i (kv head h, dim
// d: i = h * head_dim + d) of position b * PK_KEY_BLOCK + l at [i * PK_KEY_BLOCK + l]. Values
// are one row of kv_dim halves per position.
#define PK_KEY_BLOCK 16
// Rounds the kv_dim keys of position `pos` to half and stores them in a sequence's key blocks.
void pk_store_key(const float *k, int64_t kv_dim, int64_t pos, uint16_t *keys);
// The step's keys and values of n rows, rounded to half, stored at positions[r] of their
// sequences' caches (keys[r]: key blocks as above; values[r]: one row of kv_dim per position),
// the rows split between the pool's threads (their first writes to a page fault it in).
void pk_store_kv(pk_pool *pool, const float *k, const float *v, int64_t n, int64_t kv_dim, const int32_t *positions,
                 uint16_t *const *keys, uint16_t *const *values);

// Causal attention for n query rows. Row t attends to positions [0, kv_len[t]) of its own
// sequence, whose keys (blocks as above) start at keys[t] and values (half floats) at
// values[t], one position every `v_stride` halves, kv head h at offset h*head_dim. q and out
// hold n rows of n_head*head_dim floats; head_dim is at most 256 and n_head a multiple of
// n_kv_head. `scratch` holds pk_attention_scratch_floats(max_kv, n_head / n_kv_head, threads)
// floats, 8-byte aligned, where max_kv is at least every kv_len.
//
// Every (row, head) is computed on its own, in a fixed order that every instruction set follows
// (each dot product and each weighted sum over positions taken in order with fmaf, the softmax's
// sum by a fixed lane tree, a polynomial exp; the query and the weights rounded to half as
// llama.cpp rounds them; see attention.c), so a row's result does not
// depend on the batch, on the rows computed with it or on the CPU. Rows of one sequence next to
// each other are computed together: each key and value read serves all of them.
size_t pk_attention_scratch_floats(int64_t max_kv, int group, int threads);
void pk_attention(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                  const uint16_t *const *keys, const uint16_t *const *values, const int32_t *kv_len,
                  int64_t v_stride, float scale, float *out, float *scratch);
// The same with a window: row t attends to positions [kv_start[t], kv_len[t]) only (sliding-window
// layers; 0 <= kv_start[t]). The positions before it weigh exactly zero, as a mask of -infinity
// gives: they take no part in the maximum, the sum or the values.
void pk_attention_window(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                         const uint16_t *const *keys, const uint16_t *const *values, const int32_t *kv_start,
                         const int32_t *kv_len, int64_t v_stride, float scale, float *out, float *scratch);
// The same with the scores soft-capped: score = softcap * tanh(score / softcap) before the
// softmax (Gemma 2's attention logit soft-capping; softcap <= 0: none).
void pk_attention_capped(pk_pool *pool, const float *q, int64_t n, int n_head, int n_kv_head, int head_dim,
                         const uint16_t *const *keys, const uint16_t *const *values, const int32_t *kv_start,
                         const int32_t *kv_len, int64_t v_stride, float scale, float softcap, float *out, float *scratch);

#ifdef __cplusplus
}
#endif
