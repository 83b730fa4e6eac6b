// PlinthCUDA: the CUDA backend's kernels, over raw device pointers, with no build-time
// dependency on CUDA.
//
// The driver (libcuda.so.1), NVRTC (libnvrtc.so*) and cuBLAS (libcublas.so*) are opened with
// dlopen when a context is opened; the kernels are CUDA C source held inside this target,
// compiled by NVRTC for the device's compute capability when first needed (the common kernels
// at open, each weight format's at its first use or at pkc_prepare) and cached as cubins in
// the directory the caller names. Where any piece is missing, pkc_open fails with a status
// and a one-line reason, and the caller runs on the CPU.
//
// Conventions:
// - A context owns one device (its primary context), one stream, one cuBLAS handle and a scratch
//   buffer. Every call enqueues on the stream and returns without waiting, except the ones that
//   say they wait (downloads, pkc_synchronize). Calls on one context must not overlap; any thread
//   may make them (each call makes the context current on its thread).
// - Device memory is addressed by pkc_ptr (a CUdeviceptr). Matrices are row-major with explicit
//   row strides counted in elements. Float activations are f32; the KV cache is f16.
// - Per-row metadata (token ids, positions, slots, kv lengths) are int32 arrays in device memory,
//   so a step uploads them once and a captured graph replays with new values.
// - Weights stay in GGUF's block layouts (pk_quants.h's type ids: ggml's numbers). A row of k
//   weights of a block type is k / block_elements blocks, rows one after another.
// - Nothing here allocates device memory except pkc_alloc, pkc_reserve and the first call that
//   needs more scratch than was reserved (reserve ahead of a graph capture).
// - Every function returns PKC_OK (0) or a pkc_status; pkc_error gives the message of the last
//   failure on the context.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pkc_context pkc_context;
typedef uint64_t pkc_ptr; // a device address (CUdeviceptr)

typedef enum pkc_status {
    PKC_OK = 0,
    PKC_ERR_NO_DRIVER = 1,   // libcuda.so.1 could not be opened (no NVIDIA driver)
    PKC_ERR_NO_DEVICE = 2,   // the driver has no usable device (or that ordinal)
    PKC_ERR_NO_NVRTC = 3,    // libnvrtc could not be opened
    PKC_ERR_NO_CUBLAS = 4,   // libcublas could not be opened or initialized
    PKC_ERR_DRIVER = 5,      // a driver call failed (the message names it and the CUDA error)
    PKC_ERR_COMPILE = 6,     // NVRTC could not compile the kernels (the message holds its log)
    PKC_ERR_CUBLAS = 7,      // a cuBLAS call failed
    PKC_ERR_OUT_OF_MEMORY = 8,
    PKC_ERR_INVALID = 9,     // bad arguments (sizes, strides, alignment)
    PKC_ERR_UNSUPPORTED = 10 // a weight type these kernels do not handle
} pkc_status;

// ---- context -----------------------------------------------------------------------------------

// How many CUDA devices the driver reports (0 without a driver), without opening a context:
// a cheap probe for sizing decisions. Probed once per process.
int pkc_device_count(void);
// Opens device `ordinal`, loading the libraries and the common kernels (compiled by NVRTC, or
// read from `cache_dir`, created if missing; NULL disables the cache). On failure returns the
// status, sets *out to NULL and writes a one-line reason (no trailing newline) to `error`.
int pkc_open(int ordinal, const char *cache_dir, pkc_context **out, char *error, size_t error_size);
void pkc_close(pkc_context *ctx);
// The message of the last failure on this context ("" when none).
const char *pkc_error(const pkc_context *ctx);
// A short name of a status ("no driver", ...).
const char *pkc_status_name(int status);

typedef struct pkc_device_info {
    char name[256];
    int cc_major, cc_minor;           // compute capability
    int multiprocessors;
    int driver_version;               // e.g. 13000
    int nvrtc_major, nvrtc_minor;
    size_t total_memory, free_memory; // bytes, free as of this call
    int kernels_from_cache;           // 1 when every kernel module so far came from the cache
    double compile_seconds;           // time spent so far loading or compiling kernel modules
    // Dependent launch (pkc_set_dependent_launch): 1 when on; when off, why.
    int dependent_launch;
    char dependent_launch_off[512];
    unsigned long long dependent_launches; // kernels launched so far to overlap the one before
    // This library's kernels launched so far, those captured into graphs included (a graph's
    // replays are not launches; cuBLAS's kernels, copies and memsets are not counted): the
    // difference across a step's first run is the kernels of ours that the step launches.
    unsigned long long kernel_launches;
    size_t f16_weight_bytes; // the f16 copies of weights made by pkc_cache_f16
    // What the kernels are built as: machine code for sm_<kernel_arch> (the device's, or an
    // earlier minor of its major), or, where kernel_ptx is 1, PTX for compute_<kernel_arch> that
    // the driver compiles for a device newer than NVRTC knows.
    int kernel_arch, kernel_ptx;
} pkc_device_info;
int pkc_device_info_get(pkc_context *ctx, pkc_device_info *info);

// Makes the kernels of these weight types ready (pk_quants.h ids; repeats are fine): each
// format's module is read from the cache or compiled, the missing ones on parallel threads
// (one per CPU up to 16; $PLINTH_CUDA_COMPILE_THREADS overrides). Without it a format's
// kernels are compiled at its first use, which must not fall inside a graph capture. Call it
// with a model's types when loading the model.
int pkc_prepare(pkc_context *ctx, const int *types, int count);

// A build check that needs no GPU and no driver, only NVRTC: compiles the common kernel module
// and those of `types` (NULL: every format) for sm_<arch> (ptx: as PTX for compute_<arch>) on
// `threads` threads (0: as pkc_prepare): what a first load of a model with those types
// compiles. Gives the wall seconds and the output's total size; on failure the status and
// NVRTC's log. The output is discarded, or written to `save_dir` (when not NULL) as one file a
// module, pkc-MODULE.ptx or .cubin (MODULE: "core", or the format's ggml type and name, as
// "8-q8_0"), for tools that read it (Benchmarks/cuda/launch_resources.py).
int pkc_compile_check(int arch, int ptx, const int *types, int count, int threads, const char *save_dir, double *seconds,
                      size_t *cubin_bytes, char *error, size_t error_size);

// ---- memory ------------------------------------------------------------------------------------

int pkc_alloc(pkc_context *ctx, size_t bytes, pkc_ptr *out);
int pkc_free(pkc_context *ctx, pkc_ptr ptr);
// Host to device; returns once `src` may be reused.
int pkc_upload(pkc_context *ctx, pkc_ptr dst, const void *src, size_t bytes);
// Device to host; waits for the stream (everything enqueued before it) and the copy.
int pkc_download(pkc_context *ctx, void *dst, pkc_ptr src, size_t bytes);
// Downloads `count` rows of `width` floats, row rows[i] of `src` (row stride `ld` floats), to
// dst + i * width (host). Waits. For the logits rows that sampling needs.
int pkc_download_rows(pkc_context *ctx, float *dst, pkc_ptr src, int64_t ld, const int32_t *rows, int64_t count,
                      int64_t width);
int pkc_copy(pkc_context *ctx, pkc_ptr dst, pkc_ptr src, size_t bytes);
int pkc_memset(pkc_context *ctx, pkc_ptr dst, uint8_t value, size_t bytes);
int pkc_synchronize(pkc_context *ctx);
// Grows the scratch so that matmuls up to m x k weights with n rows (the GEMM path's f16
// copies) need no allocation later. The scratch only grows.
int pkc_reserve(pkc_context *ctx, int64_t m, int64_t k, int64_t n);
// Makes an f16 copy of the m x k weights at w (the dequantizer's values): the GEMM path then
// reads it instead of dequantizing the weights at every call, for these weights and any whole
// rows of them (one matrix of a run copied as one). Allocates m * k * 2 bytes
// (PKC_ERR_OUT_OF_MEMORY when they are not there); F32 and F16 weights need no copy. Weights
// overlapping ones already copied, or running past their allocation, are refused. The copy
// lasts until pkc_free of the weights' allocation or pkc_close; weights written again after it
// was made would leave it stale (the backend uploads its weights once, before copying).
int pkc_cache_f16(pkc_context *ctx, int type, pkc_ptr w, int64_t m, int64_t k);

// Device-event timing on the context's stream: pkc_timer_stop waits and gives the milliseconds
// since pkc_timer_start.
int pkc_timer_start(pkc_context *ctx);
int pkc_timer_stop(pkc_context *ctx, float *ms);

// Graph capture of the stream: calls between begin and end are recorded instead of run (no
// downloads, no scratch growth in between); pkc_graph_launch replays them. One graph per handle.
typedef struct pkc_graph pkc_graph;
int pkc_graph_begin(pkc_context *ctx);
int pkc_graph_end(pkc_context *ctx, pkc_graph **out);
int pkc_graph_launch(pkc_context *ctx, pkc_graph *graph);
void pkc_graph_destroy(pkc_context *ctx, pkc_graph *graph);

// ---- weights -----------------------------------------------------------------------------------

// Whether the kernels handle a weight type (pk_quants.h ids): F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
int pkc_supports_type(int type);
// Bytes of one row of k weights of `type` (0 when unsupported or k is not whole blocks).
size_t pkc_row_bytes(int type, int64_t k);

// Dequantizes n rows of k weights (row r at src + r * row_bytes) to f32 (dst row stride ldd),
// with the CPU dequantizer's arithmetic: every value equals pk_dequantize's bit for bit.
int pkc_dequantize(pkc_context *ctx, int type, pkc_ptr src, int64_t n, int64_t k, pkc_ptr dst, int64_t ldd);

// Token embedding: out[i] (row stride ldo floats) = row ids[i] of the n_rows x k table, for n
// ids (int32, device). Ids outside [0, n_rows) give a row of zeros.
int pkc_get_rows(pkc_context *ctx, int type, pkc_ptr table, int64_t n_rows, int64_t k, pkc_ptr ids, int64_t n,
                 pkc_ptr out, int64_t ldo);
// A RoPE table's frequencies, as pk_rope_table takes them: the base, the linear scale (1: none)
// and per-pair factors (Llama 3.1's rope_freqs: rope_dims/2 floats on the device; 0: none).
typedef struct pkc_rope_freqs {
    float base;
    float scale;
    pkc_ptr factors;
} pkc_rope_freqs;

// A step's first launches in one, bit for bit: pkc_get_rows into out, pkc_scale of those rows by
// the family's embedding scale (1: none), pkc_rms_norm_q8 of them by w into y (and the input rows
// q; 0: none), and pkc_rope_table of the n positions for up to two tables (Gemma 3's local and
// global): rope_tables[i] of freqs[i], i < count (0 to 2; a table 0 is skipped). A block per row.
int pkc_embed_norm_rope(pkc_context *ctx, int type, pkc_ptr table, int64_t n_rows, int64_t k, pkc_ptr ids, int64_t n,
                        pkc_ptr out, int64_t ldo, float scale, pkc_ptr w, pkc_ptr y, int64_t ldy, float eps, pkc_ptr q,
                        int64_t ldq, pkc_ptr positions, int rope_dims, const pkc_rope_freqs *freqs, const pkc_ptr *rope_tables,
                        int count);

// y[t*ldy + r] = sum_i W[r][i] * x[t*ldx + i] for t < n, r < m: the m x k weights W of `type`
// times n rows of x. Below the crossover (pkc_set_gemm_min_rows; default measured on an H100)
// a dequantizing GEMV reads each weight once for all n rows; from it on, W is dequantized to
// f16 in the scratch and cuBLAS multiplies (f16 inputs, f32 accumulation). x must be 16-byte
// aligned with ldx a multiple of 4; y must not overlap x.
int pkc_matmul(pkc_context *ctx, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, int64_t n,
               pkc_ptr y, int64_t ldy);
// pkc_matmul accumulating: y += W x (a residual connection folded into the product). On the
// GEMV path bit for bit pkc_matmul into a temporary then pkc_add; on the GEMM path cuBLAS's beta.
int pkc_matmul_add(pkc_context *ctx, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, int64_t n,
                   pkc_ptr y, int64_t ldy);
// Int8 rows of x for the GEMV of the quantized formats: row t at q + t * ldq holds k bytes (x
// rounded to int8 per 32 values as the CPU kernels round it for Q8_0-type activations: d = amax /
// 127 rounded to f16, byte = rint(x * 127 / amax)) and then the k / 32 float scales d. k a multiple of 32; ldq at
// least pkc_q8_row_bytes(k) and, like q, a multiple of 16.
size_t pkc_q8_row_bytes(int64_t k);
// Input rows: what the makers of a product's input (pkc_rms_norm_q8, pkc_swiglu_q8 and the norms
// of the fused products) also write for the product, and pkc_matmul_q8 reads instead of x. For
// n rows below the GEMM path (pkc_gemm_min_rows) they are int8 rows as above; from it, f16 rows
// of k values (x as the GEMM path would convert it: then no conversion launch). The bytes of
// one row for n rows of k (a multiple of 16):
size_t pkc_input_row_bytes(const pkc_context *ctx, int64_t k, int64_t n);
// n rows of x (row stride ldx floats) to int8 rows.
int pkc_quantize_q8(pkc_context *ctx, pkc_ptr x, int64_t ldx, int64_t n, int64_t k, pkc_ptr q, int64_t ldq);
// pkc_matmul (add = 0) or pkc_matmul_add (add = 1) that may read x's input rows `q` (of the same
// n rows of x; 0: none) instead of x. On the GEMV path, int8 rows for the quantized formats,
// which then multiply in integers with dp4a (one byte of x per weight instead of four) unless
// $PLINTH_CUDA_INT8=0; the float formats read x. On the GEMM path, f16 rows, which cuBLAS reads
// as they are (f32 weights read x).
int pkc_matmul_q8(pkc_context *ctx, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                  int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, int add);
// pkc_matmul_q8 with add = 1 into the residual rows y (n rows of m), then RMSNorm of those rows:
// norm->out = y / sqrt(mean(y^2) + eps) * weight (m floats) and, when norm->q is given, its int8
// rows, as pkc_rms_norm_q8 writes them, bit for bit. At 1 or 2 rows of x on the GEMV path the
// product's last block to finish does the norm, so a decode step saves the norm's launch (unless
// $PLINTH_CUDA_NORM_FUSED=0); elsewhere it is a second launch. norm->out and norm->q may
// be the product's own input rows (every block has read them before the last one writes).
typedef struct pkc_norm {
    pkc_ptr weight;
    float eps;
    pkc_ptr out;
    int64_t ldo;
    pkc_ptr q;
    int64_t ldq;
} pkc_norm;
int pkc_matmul_add_norm(pkc_context *ctx, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                        int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, const pkc_norm *norm);
// A product whose rows are normalized before they join the residual stream (Gemma's norms after
// attention and after the feed-forward): y = W x (pkc_matmul_q8, add = 0), then y's rows
// normalized in place by post->weight, added to the residual rows (post->residual, stride
// post->ldr), and, with norm (may be NULL), those normalized as pkc_matmul_add_norm's into
// norm->out and norm->q: pkc_rms_norm, pkc_add and pkc_rms_norm_q8 one after another, bit for
// bit, in the product's last block where pkc_matmul_add_norm's norm is.
typedef struct pkc_post_norm {
    pkc_ptr weight;
    float eps;
    pkc_ptr residual;
    int64_t ldr;
} pkc_post_norm;
int pkc_matmul_post_norm(pkc_context *ctx, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                         int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, const pkc_post_norm *post, const pkc_norm *norm);
// Whether pkc_matmul_add_norm's GEMV path normalizes in the product's last block (1, the default
// unless $PLINTH_CUDA_NORM_FUSED=0) or launches the norm after it (0). Returns the previous
// setting; for tests and benchmarks, like the other pkc_set_* settings.
int pkc_set_norm_fused(pkc_context *ctx, int on);
// Several products of one input written side by side: run i multiplies its m_i x k weights
// of its own type, y[t*ldy + column_i + r] = (W_i x_t)[r], as pkc_matmul_q8 (add = 0) would,
// bit for bit. On the GEMV path the runs after the first go on a second stream forked from the
// context's and joined back, so they overlap it (in a captured graph: parallel branches); a
// product whose pieces differ in type (Qwen2.5's q|k in Q5_0 beside v in Q8_0) then costs about
// one launch's latency, not two.
typedef struct pkc_run {
    int type;
    pkc_ptr w;
    int64_t m, column;
} pkc_run;
int pkc_matmul_runs(pkc_context *ctx, const pkc_run *runs, int count, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                    int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy);
// A gated product in one launch: W is 2f x k, the f gate rows then the f up rows (one matrix of
// one type); y[t*ldy + i] = silu(gate_i . x_t) * (up_i . x_t) for i < f, with pkc_matmul's sums
// and pkc_swiglu's arithmetic bit for bit (x's int8 rows q as pkc_matmul_q8 takes them, or 0);
// with gelu, gelu(gate_i . x_t) * (up_i . x_t) as pkc_geglu_q8's. Only where pkc_glu_fused(ctx,
// n) says so: 1 or 2 rows of x below the GEMM path, unless $PLINTH_CUDA_GLU=0; elsewhere
// PKC_ERR_INVALID.
int pkc_matmul_glu(pkc_context *ctx, int type, pkc_ptr w, int64_t f, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                   int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, int gelu);
int pkc_glu_fused(const pkc_context *ctx, int64_t n);
// Whether n rows are where pkc_matmul_glu can run (1 or 2, below the GEMM path), whatever
// $PLINTH_CUDA_GLU says: a caller feeds the down product the same rows there either way.
int pkc_glu_rows(const pkc_context *ctx, int64_t n);
// Whether the GEMV reads x's int8 rows when given them: 0 by a measured policy per format and
// size (the default), 1 always (formats with codes), -1 never (also $PLINTH_CUDA_INT8=0).
// Returns the previous mode. Like the other pkc_set_* settings, for tests and benchmarks: a
// caller that captures graphs (CUDAForward) must not see them change after it has captured.
int pkc_set_gemv_int8(pkc_context *ctx, int mode);
// Whether a kernel that follows another on the stream is launched to overlap it (programmatic
// dependent launch: its blocks are scheduled while the one before finishes, then wait for its
// results), hiding most of the gap between launches. Available on sm_90 or newer with a CUDA
// 12.3+ driver, after a self-test at open; on there by default unless $PLINTH_CUDA_PDL=0 (which
// also makes it unavailable). pkc_device_info says which, and why not. Turns it off (0) or on
// (1, where available); returns the previous setting. Results are the same either way.
int pkc_set_dependent_launch(pkc_context *ctx, int on);
// Whether pkc_matmul_q8 (and pkc_matmul_glu, m being its 2f rows) of these weights and n rows
// of x would read input rows given to it: on the GEMV path where k is whole 32s and the format's
// int8 policy says so; on the GEMM path unless the weights are f32. A caller makes the rows
// (pkc_rms_norm_q8, pkc_swiglu_q8) only where some product reads them.
int pkc_matmul_reads_rows(const pkc_context *ctx, int type, int64_t m, int64_t k, int64_t n);
// The rows from which pkc_matmul takes the GEMM path (below them int8 rows are worth making).
int64_t pkc_gemm_min_rows(const pkc_context *ctx);
// Rows from which pkc_matmul takes the GEMM path (1: always; INT64_MAX: never; default 9, or
// $PLINTH_CUDA_GEMM_MIN_ROWS). Returns the
// previous value.
int64_t pkc_set_gemm_min_rows(pkc_context *ctx, int64_t rows);
// Rows of W per lane group in the GEMV path: 1 or 2 (2 where the launch has at most two rows
// of x), or 0 for the policy (R = 2 where that leaves
// $PLINTH_CUDA_GEMV_MIN_WARPS / n warps, default 2048, else 1). $PLINTH_CUDA_GEMV_R sets it at open.
// Returns the previous value.
int pkc_set_gemv_rows_per_group(pkc_context *ctx, int rows);

// ---- elementwise -------------------------------------------------------------------------------

// y = x / sqrt(mean(x^2) + eps) * w for n rows of k (y may be x).
int pkc_rms_norm(pkc_context *ctx, pkc_ptr x, int64_t ldx, pkc_ptr w, pkc_ptr y, int64_t ldy, int64_t n, int64_t k,
                 float eps);
// pkc_rms_norm that also writes the normed rows as input rows to q (q 0: not; int8 rows or, from
// pkc_gemm_min_rows rows, f16 rows: pkc_input_row_bytes).
int pkc_rms_norm_q8(pkc_context *ctx, pkc_ptr x, int64_t ldx, pkc_ptr w, pkc_ptr y, int64_t ldy, int64_t n, int64_t k,
                    float eps, pkc_ptr q, int64_t ldq);
// In place, each of `heads` rows of k floats side by side in each of n rows of x (row stride
// ldx): pk_rms_norm of every head with the same k weights (Gemma's query and key norms).
int pkc_rms_norm_heads(pkc_context *ctx, pkc_ptr x, int64_t ldx, int heads, pkc_ptr w, int64_t n, int64_t k, float eps);
// The RoPE table of pk_rope_table: table[t*rope_dims + 2i], [.. + 2i + 1] = cos, sin of pair i's
// angle for positions[t] (int32, device), t < n. Once per step; every layer's pkc_rope uses it.
int pkc_rope_table(pkc_context *ctx, pkc_ptr positions, int64_t n, int rope_dims, pkc_rope_freqs freqs, pkc_ptr table);
// pk_rope in place: n rows (stride `stride` floats) of `heads` heads of head_dim, the first
// rope_dims values of each head rotated by row t of `table`; neox pairs i with i + rope_dims/2,
// otherwise (2i, 2i+1).
int pkc_rope(pkc_context *ctx, pkc_ptr x, int64_t n, int64_t stride, int heads, int head_dim, int rope_dims,
             pkc_ptr table, int neox);
// gate = silu(gate) * up over n rows of k (pk_swiglu's arithmetic, bit for bit).
int pkc_swiglu(pkc_context *ctx, pkc_ptr gate, int64_t ldg, pkc_ptr up, int64_t ldu, int64_t n, int64_t k);
// pkc_swiglu that also writes the results as input rows to q (q 0: not), as pkc_rms_norm_q8.
int pkc_swiglu_q8(pkc_context *ctx, pkc_ptr gate, int64_t ldg, pkc_ptr up, int64_t ldu, int64_t n, int64_t k, pkc_ptr q,
                  int64_t ldq);
// gate = gelu(gate) * up with gelu's tanh form (pk_geglu's arithmetic, bit for bit); q as
// pkc_swiglu_q8's.
int pkc_geglu_q8(pkc_context *ctx, pkc_ptr gate, int64_t ldg, pkc_ptr up, int64_t ldu, int64_t n, int64_t k, pkc_ptr q,
                 int64_t ldq);
// y += x over `count` floats.
int pkc_add(pkc_context *ctx, pkc_ptr y, pkc_ptr x, int64_t count);
// y *= s over `count` floats (an embedding scale: exact, as the CPU's multiply).
int pkc_scale(pkc_context *ctx, pkc_ptr y, int64_t count, float s);
// y = cap * tanh(y / cap) over `count` floats (a final logit softcap; the device's tanhf, within
// an ulp or two of glibc's).
int pkc_softcap(pkc_context *ctx, pkc_ptr y, int64_t count, float cap);
// y[t*ldy + i] += bias[i] for t < n, i < m.
int pkc_add_bias(pkc_context *ctx, pkc_ptr y, int64_t ldy, pkc_ptr bias, int64_t n, int64_t m);
// ids[t] = the index of the largest of row t's `width` values (row stride ld), for t < n: the
// lowest among equals, NaN never wins, 0 when none is above -infinity (pk_argmax's rule).
int pkc_argmax(pkc_context *ctx, pkc_ptr x, int64_t ld, int64_t n, int64_t width, pkc_ptr ids);
// pkc_argmax where row t's choice may be limited to a token mask, as the CPU sampler's greedy
// choice is: mask_rows[t] (int32, device) >= 0 names a row of `masks` (mask_words uint32 words
// each, bit i % 32 of word i / 32 allowing token i); then ids[t] is the first allowed token unless
// a later one is strictly greater (the lowest among equals; a NaN first one stays), 0 when none
// is allowed. mask_rows[t] < 0 (or masks 0) takes pkc_argmax's rule.
int pkc_argmax_masked(pkc_context *ctx, pkc_ptr x, int64_t ld, int64_t n, int64_t width, pkc_ptr masks,
                      int64_t mask_words, pkc_ptr mask_rows, pkc_ptr ids);
// For sampling: row t's k = min(ks[t], PKC_TOPK_MAX) best values (ks int32, device; 0 skips the
// row), allowed by its mask as in pkc_argmax_masked, best first: the larger value, then the lower
// id, the CPU sampler's top-k order. out (8-byte aligned) gets PKC_TOPK_MAX entries per row of
// {int32 id, float value}, id -1 past the row's count (fewer allowed tokens than k). NaN values
// are skipped; -infinity ones count. A sampled row then costs 512 bytes to copy back, not a
// vocabulary of floats.
#define PKC_TOPK_MAX 64
int pkc_topk(pkc_context *ctx, pkc_ptr x, int64_t ld, int64_t n, int64_t width, pkc_ptr ks, pkc_ptr masks,
             int64_t mask_words, pkc_ptr mask_rows, pkc_ptr out);

// ---- LoRA adapters (unmerged) ------------------------------------------------------------------

// One adapter's pair on one matrix for n rows of a step, pk_lora_op's (Kernels/include/pk_lora.h)
// fields in device memory: A (rank x k) and bt (B transposed, rank x m) int8 row-major, row r
// scaled by a_scale[r] / bt_scale[r] (pk_lora_quantize_rows); rows (int32, n) are the indices of
// the op's rows in x and in y (stride ldy).
typedef struct pkc_lora_op {
    pkc_ptr a, bt, a_scale, bt_scale;
    int64_t rank, m;
    float scale;
    pkc_ptr y;
    int64_t ldy;
    pkc_ptr rows;
    int64_t n;
} pkc_lora_op;
#define PKC_LORA_MAX_RANK 1024
// y[rows[i]] += scale * B (A x[rows[i]]) for every op, pk_lora_apply's arithmetic bit for bit
// (x rows of k floats, stride ldx). Ops must not write the same y elements. Graph-capturable: the
// ops are kernel arguments, not device memory.
int pkc_lora_apply(pkc_context *ctx, const pkc_lora_op *ops, int nops, pkc_ptr x, int64_t ldx, int64_t k);
// The token embedding's pair for n rows: x[rows[i]] (stride ldx, e floats) += scale * bt[.][t] * a
// with t = ids[rows[i]] (a: rank x e floats, bt: rank x vocab floats; rows, ids int32), in
// LoRAPair.addDelta's order and roundings.
int pkc_lora_embed(pkc_context *ctx, pkc_ptr a, pkc_ptr bt, int64_t rank, int64_t vocab, float scale, pkc_ptr rows,
                   int64_t n, pkc_ptr ids, pkc_ptr x, int64_t ldx, int64_t e);

// ---- KV cache and attention --------------------------------------------------------------------

// A layer's cache is two f16 arrays, keys and values, of rows of kv_dim halves. Slotted (pages
// 0): [slot][position][kv_dim], position p of slot s at s * slot_stride + p * kv_dim halves
// (slot_stride >= max positions * kv_dim). Paged: the arrays are pages of page_len = 1 <<
// page_shift rows, and pages (int32, device, max_pages per slot) names each slot's: position p of
// slot s is row p % page_len of page pages[s * max_pages + p / page_len], at (page * page_len +
// p % page_len) * kv_dim halves. Every position a kernel reads or writes must have its page.
// Where the layers live (one buffer each or one for all) is the caller's choice.
typedef struct pkc_kv {
    pkc_ptr k, v;
    int64_t slot_stride; // halves (slotted)
    int64_t kv_dim;      // n_kv_head * head_dim
    pkc_ptr pages;       // 0: slotted
    int64_t max_pages;   // entries per slot in pages
    int32_t page_shift;  // log2 of page_len, 0 to 16
} pkc_kv;

// Rounds the step's keys and values (n rows, row strides ldk/ldv floats) to f16 and stores row
// t at (slots[t], positions[t]) (int32, device).
int pkc_store_kv(pkc_context *ctx, const pkc_kv *cache, pkc_ptr k, int64_t ldk, pkc_ptr v, int64_t ldv, int64_t n,
                 pkc_ptr slots, pkc_ptr positions);

// pkc_add_bias (when bias is not 0: q_heads + 2 kv_heads heads of head_dim floats), pkc_rope of
// the q and k heads and pkc_store_kv of k and v, in one launch and with the same results: n rows
// (stride `stride` floats) of q | k | v, head after head; k and v row t go to (slots[t],
// positions[t]).
int pkc_qkv_rope_store(pkc_context *ctx, const pkc_kv *cache, pkc_ptr qkv, int64_t n, int64_t stride, int q_heads,
                       int kv_heads, int head_dim, int rope_dims, pkc_ptr table, int neox, pkc_ptr bias, pkc_ptr slots,
                       pkc_ptr positions);

// pkc_matmul_runs into a layer's q | k | v rows (y, stride ldy), then pkc_qkv_rope_store's work on
// them (the bias, when given one vector over the whole row; RoPE of the q and k heads; k and v into
// the cache), or with q_norm or k_norm pkc_qkv_norm_rope_store's (no bias then), with the same
// results bit for bit: at 1 or 2 rows of x on the GEMV path in the last block to finish of the
// products' launches (their blocks counted together, on both streams), so a decode step saves
// that launch (unless $PLINTH_CUDA_ROPE_FUSED=0); elsewhere after them.
typedef struct pkc_rope_store {
    pkc_kv cache;
    int q_heads, kv_heads, head_dim, rope_dims;
    pkc_ptr table;
    int neox;
    pkc_ptr bias, slots, positions;
    pkc_ptr q_norm, k_norm; // 0: none
    float eps;              // the head norms'
} pkc_rope_store;
int pkc_matmul_runs_rope_store(pkc_context *ctx, const pkc_run *runs, int count, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                               int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, const pkc_rope_store *rs);
// Whether pkc_matmul_runs_rope_store's GEMV path does the rope in the products' last block (1,
// the default) or launches it after them (0); returns the previous setting.
int pkc_set_rope_fused(pkc_context *ctx, int on);
// pkc_rms_norm_heads of the q heads by q_norm and of the k heads by k_norm (either may be 0: not
// normalized; the same eps), then pkc_rope of both and pkc_store_kv of k and v: one launch with
// the results of those, bit for bit (no bias; pkc_qkv_rope_store's rows and cache otherwise).
int pkc_qkv_norm_rope_store(pkc_context *ctx, const pkc_kv *cache, pkc_ptr qkv, int64_t n, int64_t stride, int q_heads,
                            int kv_heads, int head_dim, int rope_dims, pkc_ptr table, int neox, pkc_ptr q_norm,
                            pkc_ptr k_norm, float eps, pkc_ptr slots, pkc_ptr positions);

// Causal attention for a ragged batch of n query rows: row t (q row stride ldq floats, n_head
// heads of head_dim) attends to positions [0, kv_len[t]) of slot slots[t] (int32, device), kv
// head h/(n_head/n_kv_head) for head h, scores times `scale`, softmax, weighted values; out
// (row stride ldo) gets n_head * head_dim floats. Queries are rounded to f16 first (as the CPU
// kernel and llama.cpp do). Rows are independent: batched decode (one row per sequence) and a
// chunked prefill (many rows of one slot, kv_len rising) are the same call. max_kv bounds
// every kv_len (it sizes the split of long contexts; it may exceed them all, so that a caller
// replaying a captured graph can round it up and keep the launches the same for many steps);
// head_dim a power of two from 8 to 256, at most 8 query heads per kv head, n_head a multiple
// of n_kv_head.
int pkc_attention(pkc_context *ctx, const pkc_kv *cache, pkc_ptr q, int64_t ldq, int64_t n, int n_head,
                  int n_kv_head, int head_dim, pkc_ptr slots, pkc_ptr kv_len, int64_t max_kv, float scale,
                  pkc_ptr out, int64_t ldo);
// pkc_attention over a sliding window: each row attends to its last `window` positions, its own
// included (pk_attention_window with starts kv_len - window); 0: no window. With rows, each
// output also goes there as an f16 input row of the product that multiplies it (the attention
// output's: rows of ldr bytes, pkc_input_row_bytes of n_head * head_dim at n, 16-byte aligned),
// so that the product reads them instead of converting out; only where n rows take the GEMM path
// (pkc_gemm_min_rows); 0: none.
int pkc_attention_window(pkc_context *ctx, const pkc_kv *cache, pkc_ptr q, int64_t ldq, int64_t n, int n_head,
                         int n_kv_head, int head_dim, pkc_ptr slots, pkc_ptr kv_len, int64_t max_kv, int window,
                         float scale, pkc_ptr out, int64_t ldo, pkc_ptr rows, int64_t ldr);
// pkc_attention_window with rows [from, n) on tensor cores where pkc_attention_uses_mma: a
// warp takes 16 rows, and rows that are one slot's consecutive positions (a prompt's chunk) share
// their keys' loads and products; rows [0, from) (decode rows) take pkc_attention_window's
// kernel. Any rows give the same outputs within rounding either side of `from`: only speed
// depends on the split. from = n: pkc_attention_window.
int pkc_attention_prompt(pkc_context *ctx, const pkc_kv *cache, pkc_ptr q, int64_t ldq, int64_t n, int n_head, int n_kv_head,
                         int head_dim, pkc_ptr slots, pkc_ptr kv_len, int64_t max_kv, int window, float scale, pkc_ptr out,
                         int64_t ldo, pkc_ptr rows, int64_t ldr, int64_t from);
// Whether pkc_attention_prompt runs its rows from `from` on tensor cores for this head size:
// sm_80 and newer, heads of 64, 128 or 256, unless $PLINTH_CUDA_MMA_ATTN=0 or pkc_set_attention_mma.
int pkc_attention_uses_mma(const pkc_context *ctx, int head_dim);
// Turns pkc_attention_prompt's tensor cores on or off (on only where the device has them);
// returns the previous setting. For comparisons.
int pkc_set_attention_mma(pkc_context *ctx, int on);

// Copies, for each of copies[0..<n], the first `count` positions of slot `src` to slot `dst`, in
// `layers` layer caches (layer l's at cache->k/v + l * layer_stride halves): prefix sharing and
// copy on write, one launch per 16 copies that move something. A slotted cache only: a paged
// cache's page is copied as the slot of a slotted one (slot_stride = page_len * kv_dim). The
// copies run at once, so no copy may write a slot that another reads or writes
// (PKC_ERR_INVALID); a copy within one slot, or of no positions, does nothing.
typedef struct pkc_kv_copy {
    int32_t src, dst;
    int64_t count;
} pkc_kv_copy;
int pkc_copy_kv(pkc_context *ctx, const pkc_kv *cache, int layers, int64_t layer_stride, const pkc_kv_copy *copies, int n);

#ifdef __cplusplus
}
#endif
