// Tests of every PlinthCUDA kernel against the CPU kernels (Kernels/) and, where the CPU
// kernel is itself approximate (the int8-activation matmul, the f16-probability attention),
// against a float64 reference. One line per test, then "N passed, N failed".
//
// Usage: test_cuda [cache-dir]    (default cache: /tmp/plinth-cuda-test-cache, emptied first)
//
// Tolerances (why):
// - dequantize, get_rows, add, add_bias, argmax, store_kv, copy_kv, download_rows, lora,
//   lora_embed, dependent launch (overlapped launches against the same one after another): exact.
// - the fused launches against the launches they replace (matmul_add_norm, matmul_post_norm,
//   matmul_glu with SwiGLU and GEGLU, qkv_rope_store, qkv_norm_rope_store, matmul_runs_rope_store): exact.
//   The dequantizers form sc * q exactly and add the offset with one rounding, as the CPU does.
// - swiglu, geglu, scale: exact (the same kexp polynomial, IEEE division and products, no
//   contraction); softcap: 4 ulp (the device's tanhf against glibc's).
// - rms_norm, rms_norm_heads: within 2 ulp of the CPU (both sum squares in double; only the summation order
//   differs, which can move the f32 mean by an ulp).
// - rope: the table within 2e-7 absolute of the CPU's (same angles bit for bit; CUDA's and
//   glibc's sinf/cosf each within ~1 ulp); the rotation itself exact given the same table.
// - matmul, GEMV path: |y - ref| <= 2e-5 * sum|w x| against float64 on the dequantized weights
//   (f32 accumulation over chains of at most ~100 roundings of partial sums bounded by sum|w x|:
//   <= 100 * 6e-8 = 6e-6 even in the worst case; 2e-5 leaves room).
// - matmul, int8 GEMV path (x's int8 rows): |y - ref| <= 2e-5 * sum|w xq| against float64 on the
//   dequantized weights and the int8 rows' values (d * byte): the integer sums are exact, the rest
//   is the float GEMV's chain of roundings. The int8 rows themselves (quantize_q8, and rms_norm
//   and swiglu writing them): exact against the CPU's rounding of the same floats.
// - matmul, GEMM path: |y - ref| <= 2e-3 * sum|w x| (W and x rounded to f16: each product off by
//   at most 2 * 2^-11 = 9.8e-4 of |w x|, plus f32 accumulation).
// - matmul, GPU vs the CPU kernel: |gpu - cpu| <= 2e-2 * sum|w x| (the CPU rounds activations to
//   int8 per block: each x off by up to amax/254, which is ~4/254 = 1.6e-2 of a typical |x|).
// - attention: against float64 (f16-rounded q, the f16 cache, exact softmax): <= 2e-5 of max|v|
//   (f32 throughout); against the CPU kernel: <= 2e-3 of max|v| (the CPU, as llama.cpp, rounds
//   the probabilities to f16: 2^-11 relative each). The same bounds on tensor cores
//   (pkc_attention_prompt): f16 products are exact, sums in f32, and each probability goes in as
//   two f16 parts (~2^-22 relative).
#define _GNU_SOURCE
#include "common.h"

#include <dirent.h>
#include <fcntl.h>
#include <float.h>
#include <unistd.h>

static int passed, failed;
static pk_pool *pool;

static void report(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (ok) passed++;
    else failed++;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

// RoPE frequencies of a base alone (no scaling).
static pkc_rope_freqs base_freqs(float base) { return (pkc_rope_freqs){base, 1.0f, 0}; }

// Per-pair frequency factors shaped as Llama 3.1's: 1 for the fast pairs, 8 for the slow ones,
// a smooth ramp between.
static void llama31_factors(float *f, int pairs) {
    for (int i = 0; i < pairs; i++) {
        const float x = (float)i / (float)(pairs - 1);
        f[i] = x < 0.4f ? 1.0f : x > 0.7f ? 8.0f : 1.0f + 7.0f * (x - 0.4f) / 0.3f;
    }
}

// Whether a PLINTH_CUDA_ switch turns its launch saving off (set to 0), as pk_cuda.c reads it.
static int switched_off(const char *name) {
    const char *env = getenv(name);
    return env && strcmp(env, "0") == 0;
}

// Removes a cache directory the tests made (or emptied before a run), saying so where it cannot.
static void remove_dir(const char *dir) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

// Ulps between two finite floats of the same sign (large when signs differ).
static int64_t ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if ((ia < 0) != (ib < 0)) return a == b ? 0 : INT32_MAX;
    const int64_t d = (int64_t)ia - (int64_t)ib;
    return d < 0 ? -d : d;
}

// The CPU's activation rounding (Kernels/matmul.c, quantize_row_q8_32) of one row of k floats:
// bytes and per-32 f16-rounded scales.
static void host_q8(const float *x, int64_t k, int8_t *q, float *d) {
    for (int64_t b = 0; b < k / 32; b++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fabsf(x[b * 32 + i]) > amax ? fabsf(x[b * 32 + i]) : amax;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int i = 0; i < 32; i++) q[b * 32 + i] = (int8_t)(int)rintf(x[b * 32 + i] * id);
        d[b] = (float)(_Float16)(amax / 127.0f);
    }
}

// Compares n int8 rows on the device (stride ldq) with host_q8 of rows of x (stride ldx): the
// count of differing bytes and scales.
static int64_t q8_mismatches(pkc_context *c, pkc_ptr dq, int64_t ldq, const float *x, int64_t ldx, int64_t n, int64_t k) {
    uint8_t *got = malloc((size_t)(n * ldq));
    CHECK(c, pkc_download(c, got, dq, (size_t)(n * ldq)));
    int8_t *q = malloc((size_t)k);
    float *d = malloc((size_t)(k / 32) * 4);
    int64_t bad = 0;
    for (int64_t t = 0; t < n; t++) {
        host_q8(x + t * ldx, k, q, d);
        bad += memcmp(q, got + t * ldq, (size_t)k) != 0;
        for (int64_t b = 0; b < k / 32; b++) {
            float g;
            memcpy(&g, got + t * ldq + k + 4 * b, 4);
            bad += !(g == d[b]);
        }
    }
    free(got); free(q); free(d);
    return bad;
}

// Compares n f16 rows on the device (stride ldq bytes) with the f16 rounding of rows of x (stride
// ldx): the count of differing values.
static int64_t f16_mismatches(pkc_context *c, pkc_ptr dq, int64_t ldq, const float *x, int64_t ldx, int64_t n, int64_t k) {
    uint8_t *got = malloc((size_t)(n * ldq));
    CHECK(c, pkc_download(c, got, dq, (size_t)(n * ldq)));
    int64_t bad = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < k; i++) {
            const _Float16 want = (_Float16)x[t * ldx + i];
            bad += memcmp(&want, got + t * ldq + 2 * i, 2) != 0;
        }
    free(got);
    return bad;
}

// A product's input rows of n rows of x (host x, and dx on the device; row stride ldx floats):
// int8 rows (pkc_quantize_q8) below the GEMM path, f16 rows (x rounded on the host) on it.
static pkc_ptr make_input_rows(pkc_context *c, const float *x, pkc_ptr dx, int64_t ldx, int64_t n, int64_t k, int64_t *ldq) {
    *ldq = (int64_t)pkc_input_row_bytes(c, k, n);
    if (n < pkc_gemm_min_rows(c)) {
        pkc_ptr dq = dev_alloc(c, (size_t)(n * *ldq));
        CHECK(c, pkc_quantize_q8(c, dx, ldx, n, k, dq, *ldq));
        return dq;
    }
    _Float16 *h = calloc((size_t)(n * *ldq), 1);
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < k; i++) h[t * (*ldq / 2) + i] = (_Float16)x[t * ldx + i];
    pkc_ptr dq = dev_upload(c, h, (size_t)(n * *ldq));
    free(h);
    return dq;
}

// Kernels this context has launched so far (pkc_device_info.kernel_launches).
static unsigned long long kernel_launches(pkc_context *c) {
    pkc_device_info info;
    CHECK(c, pkc_device_info_get(c, &info));
    return info.kernel_launches;
}

static float *host_floats(int64_t count) {
    float *p = aligned_alloc(64, (size_t)((count * 4 + 63) / 64 * 64 + 64));
    if (!p) { fprintf(stderr, "out of host memory\n"); exit(2); }
    return p;
}

static float *download_floats(pkc_context *c, pkc_ptr src, int64_t count) {
    float *h = host_floats(count);
    CHECK(c, pkc_download(c, h, src, (size_t)count * 4));
    return h;
}

// ---- dequantize / get_rows ---------------------------------------------------------------------


static int is_k_quant(int type) { return block_elements(type) == 256; }

static void test_dequantize(pkc_context *c) {
    for (int ti = 0; ti < NTYPES; ti++) {
        const int type = all_types[ti];
        const int64_t m = 37, k = is_k_quant(type) ? 1536 : 576;
        const size_t rb = pkc_row_bytes(type, k);
        uint8_t *w = malloc(rb * (size_t)m);
        random_weights(type, w, m, k);
        float *ref = host_floats(m * k);
        for (int64_t r = 0; r < m; r++) pk_dequantize(type, w + r * rb, ref + r * k, k);
        pkc_ptr dw = dev_upload(c, w, rb * (size_t)m);
        const int64_t ldd = k + 4;
        pkc_ptr dd = dev_alloc(c, (size_t)(m * ldd) * 4);
        CHECK(c, pkc_memset(c, dd, 0xff, (size_t)(m * ldd) * 4));
        CHECK(c, pkc_dequantize(c, type, dw, m, k, dd, ldd));
        float *got = download_floats(c, dd, m * ldd);
        int64_t bad = 0;
        for (int64_t r = 0; r < m; r++)
            for (int64_t i = 0; i < k; i++) bad += !same_bits(got[r * ldd + i], ref[r * k + i]);
        report(bad == 0, "dequantize %-4s %lldx%lld: %lld of %lld values differ from pk_dequantize (tolerance: bit-exact)",
               type_name(type), (long long)m, (long long)k, (long long)bad, (long long)(m * k));

        // get_rows: ids with repeats and two out of range (rows of zeros)
        const int64_t n = 9;
        int32_t ids[9] = {5, 0, 36, 5, 17, -1, 37, 2, 30};
        pkc_ptr dids = dev_upload(c, ids, sizeof ids);
        pkc_ptr dout = dev_alloc(c, (size_t)(n * k) * 4);
        CHECK(c, pkc_memset(c, dout, 0xff, (size_t)(n * k) * 4));
        CHECK(c, pkc_get_rows(c, type, dw, m, k, dids, n, dout, k));
        float *rows = download_floats(c, dout, n * k);
        bad = 0;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < k; i++) {
                const float want = (ids[t] < 0 || ids[t] >= m) ? 0.0f : ref[ids[t] * k + i];
                bad += !same_bits(rows[t * k + i], want);
            }
        report(bad == 0, "get_rows   %-4s 9 ids (2 out of range): %lld values differ (tolerance: bit-exact)", type_name(type),
               (long long)bad);
        CHECK(c, pkc_free(c, dw));
        CHECK(c, pkc_free(c, dd));
        CHECK(c, pkc_free(c, dids));
        CHECK(c, pkc_free(c, dout));
        free(w); free(ref); free(got); free(rows);
    }
}

// ---- matmul ------------------------------------------------------------------------------------

typedef struct { const char *name; int64_t m, k; } shape;

static const shape shapes[] = {
    {"smol attn_q", 576, 576},   {"smol attn_k", 192, 576},    {"smol ffn_up", 1536, 576}, {"smol ffn_down", 576, 1536},
    {"smol output", 49152, 576}, {"qwen attn_q", 896, 896},    {"qwen attn_k", 128, 896},  {"qwen ffn_up", 4864, 896},
    {"qwen ffn_down", 896, 4864}, {"qwen output", 151936, 896}, {"odd", 77, 1536}, {"wide", 64, 4096},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

// The worst errors over a set of calls of one (type, shape, path).
typedef struct { double gpu, cpu, diff; int64_t unwritten; } mm_err;
#define MM_PASSES 5
// Passes: the GEMV path (rows per lane group by the policy), the GEMM path, the GEMV's
// row-blocked variant forced (R = 2 at n <= 2), then the int8 GEMV (quantized formats) both ways.
static int pass_i8(int pass) { return pass >= 3; }

static void matmul_case(pkc_context *c, int type, const shape *s, const int64_t *ns, int count, int check_cpu,
                        mm_err *errs) {
    const int64_t m = s->m, k = s->k;
    const size_t rb = pkc_row_bytes(type, k);
    uint8_t *w = malloc(rb * (size_t)m);
    random_weights(type, w, m, k);
    pkc_ptr dw = dev_upload(c, w, rb * (size_t)m);
    // Reference rows: all of them for small matrices, 192 spread out for the vocabulary ones.
    const int64_t nref = m <= 1536 ? m : 192;
    int64_t *refrow = malloc((size_t)nref * sizeof *refrow);
    for (int64_t i = 0; i < nref; i++) refrow[i] = nref == m ? i : (i * 7919 + 13) % m;
    refrow[nref - 1] = m - 1; // the last row too
    double *wd = malloc((size_t)(nref * k) * sizeof *wd);
    float *tmp = host_floats(k);
    for (int64_t i = 0; i < nref; i++) {
        pk_dequantize(type, w + refrow[i] * rb, tmp, k);
        for (int64_t j = 0; j < k; j++) wd[i * k + j] = tmp[j];
    }
    memset(errs, 0, MM_PASSES * sizeof *errs);
    const int quantized = type != PK_F32 && type != PK_F16 && type != PK_BF16;
    for (int pass = 0; pass < MM_PASSES; pass++) {
    mm_err *e = &errs[pass];
    const int gemm = pass == 1, force_r = pass == 2 || pass == 4 ? 2 : 0, i8 = pass_i8(pass);
    if (i8 && (!quantized || k % 32 != 0)) continue;
    const int64_t saved = pkc_set_gemm_min_rows(c, gemm ? 1 : INT64_MAX);
    const int saved_r = pkc_set_gemv_rows_per_group(c, force_r);
    const int saved_i8 = pkc_set_gemv_int8(c, i8 ? 1 : 0); // the int8 passes take int8 x for every format with codes
    for (int ci = 0; ci < count; ci++) {
        const int64_t n = ns[ci];
        if (force_r && n > 2) continue;
        const int64_t ldx = k + (ci % 2 ? 8 : 0), ldy = m + (ci % 2 ? 3 : 0); // strided every other call
        float *x = host_floats(n * ldx);
        fill_normal(x, n * ldx, 1.0f);
        pkc_ptr dx = dev_upload(c, x, (size_t)(n * ldx) * 4);
        pkc_ptr dy = dev_alloc(c, (size_t)(n * ldy) * 4);
        CHECK(c, pkc_memset(c, dy, 0xff, (size_t)(n * ldy) * 4));
        // The int8 pass: x's int8 rows, and the values they stand for as the reference's x.
        float *xr = x;
        int64_t ldr = ldx;
        pkc_ptr dq = 0;
        if (i8) {
            const int64_t ldq = (int64_t)pkc_q8_row_bytes(k) + (ci % 2 ? 16 : 0);
            dq = dev_alloc(c, (size_t)(n * ldq));
            CHECK(c, pkc_quantize_q8(c, dx, ldx, n, k, dq, ldq));
            CHECK(c, pkc_matmul_q8(c, type, dw, m, k, dx, ldx, dq, ldq, n, dy, ldy, 0));
            uint8_t *qb = malloc((size_t)(n * ldq));
            CHECK(c, pkc_download(c, qb, dq, (size_t)(n * ldq)));
            xr = host_floats(n * k);
            ldr = k;
            for (int64_t t = 0; t < n; t++)
                for (int64_t j = 0; j < k; j++) {
                    float d;
                    memcpy(&d, qb + t * ldq + k + 4 * (j / 32), 4);
                    xr[t * k + j] = d * (float)(int8_t)qb[t * ldq + j];
                }
            free(qb);
        } else {
            CHECK(c, pkc_matmul(c, type, dw, m, k, dx, ldx, n, dy, ldy));
        }
        float *y = download_floats(c, dy, n * ldy);
        float *ycpu = NULL;
        if (check_cpu) {
            float *xc = host_floats(n * k);
            for (int64_t t = 0; t < n; t++) memcpy(xc + t * k, x + t * ldx, (size_t)k * 4);
            ycpu = host_floats(n * m);
            const size_t sb = pk_matmul_scratch_bytes(n, k, pk_pool_threads(pool));
            void *scratch = aligned_alloc(64, (sb + 63) / 64 * 64);
            if (pk_matmul(pool, type, w, m, k, xc, n, ycpu, m, scratch) != 0) { fprintf(stderr, "pk_matmul failed\n"); exit(2); }
            free(scratch);
            free(xc);
        }
        for (int64_t t = 0; t < n; t++) {
            for (int64_t i = 0; i < nref; i++) {
                const int64_t r = refrow[i];
                double ref = 0.0, mag = 0.0;
                for (int64_t j = 0; j < k; j++) {
                    const double p = wd[i * k + j] * (double)xr[t * ldr + j];
                    ref += p;
                    mag += fabs(p);
                }
                if (mag == 0.0) mag = 1e-30;
                const float g = y[t * ldy + r];
                if (isnan(g)) { e->unwritten++; continue; }
                const double eg = fabs((double)g - ref) / mag;
                if (eg > e->gpu) e->gpu = eg;
                if (ycpu) {
                    const double ec = fabs((double)ycpu[t * m + r] - ref) / mag;
                    const double ed = fabs((double)g - (double)ycpu[t * m + r]) / mag;
                    if (ec > e->cpu) e->cpu = ec;
                    if (ed > e->diff) e->diff = ed;
                }
            }
            // every output written (NaN poison), also the rows without a reference
            for (int64_t r = 0; r < m; r++)
                if (isnan(y[t * ldy + r])) e->unwritten++;
        }
        CHECK(c, pkc_free(c, dx));
        CHECK(c, pkc_free(c, dy));
        if (dq) CHECK(c, pkc_free(c, dq));
        if (xr != x) free(xr);
        free(x); free(y); free(ycpu);
    }
    pkc_set_gemm_min_rows(c, saved);
    pkc_set_gemv_rows_per_group(c, saved_r);
    pkc_set_gemv_int8(c, saved_i8);
    }
    CHECK(c, pkc_free(c, dw));
    free(w); free(wd); free(tmp); free(refrow);
}

// y += W x against y + (W x) by pkc_matmul and pkc_add: the GEMV path bit for bit, the GEMM path
// (cuBLAS's beta) within 1e-6 of |y| + 1 (one rounding of the sum, possibly fused).
static void test_matmul_add(pkc_context *c) {
    static const int types[] = {PK_Q4_1, PK_Q5_0, PK_Q8_0, PK_Q6_K};
    static const int64_t ns[] = {1, 5, 16};
    const int64_t m = 1536, k = 768, ldy = m + 8;
    for (int ti = 0; ti < 4; ti++) {
        const int type = types[ti];
        const size_t rb = pkc_row_bytes(type, k);
        uint8_t *w = malloc(rb * (size_t)m);
        random_weights(type, w, m, k);
        pkc_ptr dw = dev_upload(c, w, rb * (size_t)m);
        for (int ni = 0; ni < 3; ni++) {
            const int64_t n = ns[ni];
            float *x = host_floats(n * k), *y0 = host_floats(n * ldy);
            fill_normal(x, n * k, 1.0f);
            fill_normal(y0, n * ldy, 4.0f);
            pkc_ptr dx = dev_upload(c, x, (size_t)(n * k) * 4), da = dev_upload(c, y0, (size_t)(n * ldy) * 4);
            pkc_ptr db = dev_upload(c, y0, (size_t)(n * ldy) * 4), dt = dev_alloc(c, (size_t)(n * ldy) * 4);
            CHECK(c, pkc_memset(c, dt, 0, (size_t)(n * ldy) * 4));
            CHECK(c, pkc_matmul_add(c, type, dw, m, k, dx, k, n, da, ldy));
            CHECK(c, pkc_matmul(c, type, dw, m, k, dx, k, n, dt, ldy));
            CHECK(c, pkc_add(c, db, dt, n * ldy));
            float *a = download_floats(c, da, n * ldy), *b = download_floats(c, db, n * ldy);
            const int gemm = n >= 9;
            if (!gemm) {
                // The int8 GEMV's accumulation, likewise bit for bit.
                const int64_t ldq = (int64_t)pkc_q8_row_bytes(k);
                pkc_ptr dq = dev_alloc(c, (size_t)(n * ldq)), qa = dev_upload(c, y0, (size_t)(n * ldy) * 4);
                pkc_ptr qb = dev_upload(c, y0, (size_t)(n * ldy) * 4);
                CHECK(c, pkc_memset(c, dt, 0, (size_t)(n * ldy) * 4));
                CHECK(c, pkc_quantize_q8(c, dx, k, n, k, dq, ldq));
                CHECK(c, pkc_matmul_q8(c, type, dw, m, k, dx, k, dq, ldq, n, qa, ldy, 1));
                CHECK(c, pkc_matmul_q8(c, type, dw, m, k, dx, k, dq, ldq, n, dt, ldy, 0));
                CHECK(c, pkc_add(c, qb, dt, n * ldy));
                float *ya = download_floats(c, qa, n * ldy), *yb = download_floats(c, qb, n * ldy);
                int64_t diff = 0;
                for (int64_t i = 0; i < n * ldy; i++) diff += !same_bits(ya[i], yb[i]);
                report(diff == 0, "matmul_q8 add %s %lldx%lld n=%lld: %lld values differ from matmul_q8 + add (tol exact)",
                       type_name(type), (long long)m, (long long)k, (long long)n, (long long)diff);
                pkc_free(c, dq); pkc_free(c, qa); pkc_free(c, qb);
                free(ya); free(yb);
            }
            int64_t bad = 0;
            double worst = 0.0;
            for (int64_t i = 0; i < n * ldy; i++) {
                const double d = fabs((double)a[i] - (double)b[i]);
                if (d > worst) worst = d;
                if (gemm ? d > 1e-6 * (fabs((double)b[i]) + 1.0) : !same_bits(a[i], b[i])) bad++;
            }
            report(bad == 0, "matmul_add %s %lldx%lld n=%lld (%s): %lld values differ from matmul + add, worst %.2g (tol %s)",
                   type_name(type), (long long)m, (long long)k, (long long)n, gemm ? "gemm" : "gemv", (long long)bad, worst,
                   gemm ? "1e-6 of |y|+1" : "exact");
            pkc_free(c, dx); pkc_free(c, da); pkc_free(c, db); pkc_free(c, dt);
            free(x); free(y0); free(a); free(b);
        }
        pkc_free(c, dw);
        free(w);
    }
}

// Downloads n rows of `bytes` bytes each (stride ld bytes) into one host buffer.
static uint8_t *download_rows_bytes(pkc_context *c, pkc_ptr src, int64_t n, int64_t ld, int64_t bytes) {
    uint8_t *h = malloc((size_t)(n * bytes));
    for (int64_t t = 0; t < n; t++) CHECK(c, pkc_download(c, h + t * bytes, src + (uint64_t)(t * ld), (size_t)bytes));
    return h;
}

// pkc_matmul_add_norm against pkc_matmul_q8 (add) then pkc_rms_norm_q8: the residual rows, the
// normed rows and their int8 rows bit for bit; on the GEMV path (one launch and, past 8 rows,
// launches of 8), the GEMM path, with the norm unfused, and a captured graph replayed twice
// (the ticket counter must come back to 0). Row lengths under, at and over rms_norm's 1024 threads.
static void test_matmul_add_norm(pkc_context *c) {
    static const struct { int type; int64_t m, k; } cases[] = {
        {PK_Q5_0, 896, 896}, {PK_Q6_K, 896, 4864}, {PK_Q4_1, 576, 1536}, {PK_Q8_0, 2048, 512}, {PK_Q4_K, 1024, 256},
        {PK_Q8_0, 576, 576}};
    static const int64_t ns[] = {1, 2, 5, 8, 13};
    for (int ci = 0; ci < 6; ci++) {
        const int type = cases[ci].type;
        const int64_t m = cases[ci].m, k = cases[ci].k, ldy = m + 4, ldo = m + 8, ldq = (int64_t)pkc_q8_row_bytes(k);
        const size_t rb = pkc_row_bytes(type, k);
        uint8_t *w = malloc(rb * (size_t)m);
        random_weights(type, w, m, k);
        pkc_ptr dw = dev_upload(c, w, rb * (size_t)m);
        float *g = host_floats(m);
        for (int64_t i = 0; i < m; i++) g[i] = rng_uniform(0.5f, 1.5f);
        pkc_ptr dg = dev_upload(c, g, (size_t)m * 4);
        for (int ni = 0; ni < 5; ni++) {
            const int64_t n = ns[ni];
            float *x = host_floats(n * k), *y0 = host_floats(n * ldy);
            fill_normal(x, n * k, 1.0f);
            fill_normal(y0, n * ldy, 2.0f);
            pkc_ptr dx = dev_upload(c, x, (size_t)(n * k) * 4), dq = dev_alloc(c, (size_t)(n * ldq));
            CHECK(c, pkc_memset(c, dq, 0, (size_t)(n * ldq)));
            CHECK(c, pkc_quantize_q8(c, dx, k, n, k, dq, ldq));
            for (int mode = 0; mode < 6; mode++) {
                // 0: GEMV, int8 rows in and out; 1: GEMV, floats; 2: GEMM path; 3: the norm unfused;
                // 4: as 0 with the norm's int8 rows (stride ldhq) written over the product's own int8
                // input (stride ldq), as CUDAForward's down product does; 5: as 0 with two rows of W
                // per lane group (forced at 1 and 2 rows of x)
                const int64_t saved = pkc_set_gemm_min_rows(c, mode == 2 ? 1 : INT64_MAX);
                const int fused = pkc_set_norm_fused(c, mode != 3);
                const int saved_r = pkc_set_gemv_rows_per_group(c, mode == 5 ? 2 : 0);
                pkc_context *const cc = c;
                const pkc_ptr qin = mode == 0 || mode >= 4 ? dq : 0;
                // The norm's input rows: on the GEMM path f16 rows, else int8 rows; the bytes a
                // kernel writes of each (int8: values, then a float scale per 32; the rest is padding).
                const int64_t ldhq = (int64_t)pkc_input_row_bytes(c, m, n), qbytes = mode == 2 ? 2 * m : m + m / 8;
                const int64_t qcap = n * (ldq > ldhq ? ldq : ldhq);
                pkc_ptr yr = dev_upload(c, y0, (size_t)(n * ldy) * 4), ya = dev_upload(c, y0, (size_t)(n * ldy) * 4);
                pkc_ptr yg = dev_upload(c, y0, (size_t)(n * ldy) * 4);
                pkc_ptr hr = dev_alloc(c, (size_t)(n * ldo) * 4), ha = dev_alloc(c, (size_t)(n * ldo) * 4), hg = dev_alloc(c, (size_t)(n * ldo) * 4);
                pkc_ptr qr = dev_alloc(c, (size_t)qcap), qa = dev_alloc(c, (size_t)qcap), qg = dev_alloc(c, (size_t)qcap);
                const int with_q = (m % 32 == 0 || mode == 2) && mode != 1;
                // the reference: twice, the second for the graph replayed twice
                float *ref_y[2], *ref_h[2];
                uint8_t *ref_q[2];
                for (int rep = 0; rep < 2; rep++) {
                    CHECK(c, pkc_matmul_q8(c, type, dw, m, k, dx, k, qin, ldq, n, yr, ldy, 1));
                    CHECK(c, pkc_rms_norm_q8(c, yr, ldy, dg, hr, ldo, n, m, 1e-6f, with_q ? qr : 0, ldhq));
                    ref_y[rep] = download_floats(c, yr, n * ldy);
                    ref_h[rep] = download_floats(c, hr, n * ldo);
                    ref_q[rep] = with_q ? download_rows_bytes(c, qr, n, ldhq, qbytes) : NULL;
                }
                pkc_norm na = {dg, 1e-6f, ha, ldo, with_q ? qa : 0, ldhq}, ng = {dg, 1e-6f, hg, ldo, with_q ? qg : 0, ldhq};
                if (mode == 4) {
                    // the input's int8 rows in qa, which the norm then overwrites
                    CHECK(c, pkc_copy(c, qa, dq, (size_t)(n * ldq)));
                    CHECK(cc, pkc_matmul_add_norm(cc, type, dw, m, k, dx, k, qa, ldq, n, ya, ldy, &na));
                } else {
                    CHECK(cc, pkc_matmul_add_norm(cc, type, dw, m, k, dx, k, qin, ldq, n, ya, ldy, &na));
                }
                int graph_ok = 1;
                if (mode != 2 && mode != 4) {
                    pkc_graph *gr = NULL;
                    graph_ok = pkc_graph_begin(cc) == PKC_OK && pkc_matmul_add_norm(cc, type, dw, m, k, dx, k, qin, ldq, n, yg, ldy, &ng) == PKC_OK &&
                               pkc_graph_end(cc, &gr) == PKC_OK && pkc_graph_launch(cc, gr) == PKC_OK && pkc_graph_launch(cc, gr) == PKC_OK &&
                               pkc_synchronize(cc) == PKC_OK;
                    pkc_graph_destroy(cc, gr);
                }
                float *ay = download_floats(c, ya, n * ldy), *ah = download_floats(c, ha, n * ldo);
                uint8_t *aq = with_q ? download_rows_bytes(c, qa, n, ldhq, qbytes) : NULL;
                int64_t diff = 0;
                for (int64_t t2 = 0; t2 < n; t2++)
                    for (int64_t i = 0; i < m; i++)
                        diff += !same_bits(ay[t2 * ldy + i], ref_y[0][t2 * ldy + i]) + !same_bits(ah[t2 * ldo + i], ref_h[0][t2 * ldo + i]);
                if (with_q) diff += memcmp(aq, ref_q[0], (size_t)(n * qbytes)) != 0;
                int64_t gdiff = 0;
                if (mode != 2 && mode != 4) {
                    float *gy = download_floats(c, yg, n * ldy), *gh = download_floats(c, hg, n * ldo);
                    uint8_t *gq = with_q ? download_rows_bytes(c, qg, n, ldhq, qbytes) : NULL;
                    for (int64_t t2 = 0; t2 < n; t2++)
                        for (int64_t i = 0; i < m; i++)
                            gdiff += !same_bits(gy[t2 * ldy + i], ref_y[1][t2 * ldy + i]) + !same_bits(gh[t2 * ldo + i], ref_h[1][t2 * ldo + i]);
                    if (with_q) gdiff += memcmp(gq, ref_q[1], (size_t)(n * qbytes)) != 0;
                    free(gy); free(gh); free(gq);
                }
                static const char *const names[] = {"gemv, int8 rows", "gemv, floats", "gemm", "gemv, norm unfused",
                                                    "gemv, norm's int8 rows over the input's", "gemv, 2 rows of W per group"};
                report(diff == 0 && gdiff == 0 && graph_ok,
                       "matmul_add_norm %s %lldx%lld n=%lld (%s): %lld differences from matmul_q8 + rms_norm_q8, graph replayed twice %lld%s (tol exact)",
                       type_name(type), (long long)m, (long long)k, (long long)n, names[mode], (long long)diff, (long long)gdiff,
                       graph_ok ? "" : ", graph failed");
                for (int rep = 0; rep < 2; rep++) { free(ref_y[rep]); free(ref_h[rep]); free(ref_q[rep]); }
                free(ay); free(ah); free(aq);
                pkc_ptr bufs[] = {yr, ya, yg, hr, ha, hg, qr, qa, qg};
                for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pkc_free(c, bufs[i]);
                pkc_set_gemm_min_rows(c, saved);
                pkc_set_norm_fused(c, fused);
                pkc_set_gemv_rows_per_group(c, saved_r);
            }
            pkc_free(c, dx); pkc_free(c, dq);
            free(x); free(y0);
        }
        pkc_free(c, dw); pkc_free(c, dg);
        free(w); free(g);
    }
}

// pkc_matmul_post_norm against pkc_matmul_q8 (add 0), pkc_rms_norm of its rows in place,
// pkc_add into the residual and pkc_rms_norm_q8 of the residual (when a next norm is given): the
// product's rows, the residual, the normed rows and their int8 rows bit for bit, on the paths of
// test_matmul_add_norm and replayed from a graph twice (the residual then has two additions).
static void test_matmul_post_norm(pkc_context *c) {
    static const struct { int type; int64_t m, k; } cases[] = {{PK_Q8_0, 640, 2048}, {PK_Q4_K, 1152, 256}, {PK_Q5_0, 640, 640}};
    static const int64_t ns[] = {1, 2, 5};
    for (int ci = 0; ci < 3; ci++) {
        const int type = cases[ci].type;
        const int64_t m = cases[ci].m, k = cases[ci].k, ldy = m + 4, ldr = m + 12, ldo = m + 8;
        const size_t rb = pkc_row_bytes(type, k);
        uint8_t *w = malloc(rb * (size_t)m);
        random_weights(type, w, m, k);
        pkc_ptr dw = dev_upload(c, w, rb * (size_t)m);
        float *g = host_floats(2 * m);
        for (int64_t i = 0; i < 2 * m; i++) g[i] = rng_uniform(0.5f, 1.5f);
        pkc_ptr dpost = dev_upload(c, g, (size_t)m * 4), dg = dev_upload(c, g + m, (size_t)m * 4);
        int64_t bad = 0, runs = 0;
        int graph_ok = 1;
        for (int ni = 0; ni < 3; ni++) {
            const int64_t n = ns[ni];
            float *x = host_floats(n * k), *r0 = host_floats(n * ldr);
            fill_normal(x, n * k, 1.0f);
            fill_normal(r0, n * ldr, 2.0f);
            pkc_ptr dx = dev_upload(c, x, (size_t)(n * k) * 4);
            for (int mode = 0; mode < 8; mode++) {
                // 0: GEMV, int8 rows in and out; 1: GEMV, floats; 2: GEMM path (f16 rows in and
                // out); 3: the norms unfused; 4: two rows of W per lane group; 5-7: as 0-2 with no
                // next norm
                const int path = mode >= 5 ? mode - 5 : mode, next = mode < 5;
                const int64_t saved = pkc_set_gemm_min_rows(c, path == 2 ? 1 : INT64_MAX);
                const int fused = pkc_set_norm_fused(c, path != 3);
                const int saved_r = pkc_set_gemv_rows_per_group(c, path == 4 ? 2 : 0);
                int64_t ldq;
                const pkc_ptr dq = make_input_rows(c, x, dx, k, n, k, &ldq), qin = path == 1 ? 0 : dq;
                const int with_q = next && (m % 32 == 0 || path == 2) && path != 1;
                // the next norm's input rows, and the bytes a kernel writes of each
                const int64_t ldhq = (int64_t)pkc_input_row_bytes(c, m, n), qbytes = path == 2 ? 2 * m : m + m / 8;
                // [0]: the reference, [1]: the call, [2]: the graph replayed twice (reference: twice)
                pkc_ptr y[3], res[3], h[3], q[3];
                for (int i = 0; i < 3; i++) {
                    y[i] = dev_alloc(c, (size_t)(n * ldy) * 4);
                    res[i] = dev_upload(c, r0, (size_t)(n * ldr) * 4);
                    h[i] = dev_alloc(c, (size_t)(n * ldo) * 4);
                    q[i] = dev_alloc(c, (size_t)(n * ldhq));
                    CHECK(c, pkc_memset(c, y[i], 0, (size_t)(n * ldy) * 4));
                    CHECK(c, pkc_memset(c, h[i], 0, (size_t)(n * ldo) * 4));
                    CHECK(c, pkc_memset(c, q[i], 0, (size_t)(n * ldhq)));
                }
                float *ref[2][3];
                uint8_t *refq[2];
                for (int rep = 0; rep < 2; rep++) {
                    CHECK(c, pkc_matmul_q8(c, type, dw, m, k, dx, k, qin, ldq, n, y[0], ldy, 0));
                    CHECK(c, pkc_rms_norm(c, y[0], ldy, dpost, y[0], ldy, n, m, 1e-6f));
                    for (int64_t t = 0; t < n; t++) CHECK(c, pkc_add(c, res[0] + (uint64_t)(t * ldr) * 4, y[0] + (uint64_t)(t * ldy) * 4, m));
                    if (next) CHECK(c, pkc_rms_norm_q8(c, res[0], ldr, dg, h[0], ldo, n, m, 1e-5f, with_q ? q[0] : 0, ldhq));
                    ref[rep][0] = download_floats(c, y[0], n * ldy);
                    ref[rep][1] = download_floats(c, res[0], n * ldr);
                    ref[rep][2] = download_floats(c, h[0], n * ldo);
                    refq[rep] = with_q ? download_rows_bytes(c, q[0], n, ldhq, qbytes) : NULL;
                }
                pkc_post_norm pn[3];
                pkc_norm nn[3];
                for (int i = 1; i < 3; i++) {
                    pn[i] = (pkc_post_norm){dpost, 1e-6f, res[i], ldr};
                    nn[i] = (pkc_norm){dg, 1e-5f, h[i], ldo, with_q ? q[i] : 0, ldhq};
                }
                CHECK(c, pkc_matmul_post_norm(c, type, dw, m, k, dx, k, qin, ldq, n, y[1], ldy, &pn[1], next ? &nn[1] : NULL));
                pkc_graph *gr = NULL;
                const int gok = pkc_graph_begin(c) == PKC_OK &&
                                pkc_matmul_post_norm(c, type, dw, m, k, dx, k, qin, ldq, n, y[2], ldy, &pn[2], next ? &nn[2] : NULL) == PKC_OK &&
                                pkc_graph_end(c, &gr) == PKC_OK && pkc_graph_launch(c, gr) == PKC_OK && pkc_graph_launch(c, gr) == PKC_OK &&
                                pkc_synchronize(c) == PKC_OK;
                pkc_graph_destroy(c, gr);
                graph_ok &= gok;
                for (int i = 1; i < 3; i++) {
                    const int rep = i - 1;
                    float *gy = download_floats(c, y[i], n * ldy), *gres = download_floats(c, res[i], n * ldr), *gh = download_floats(c, h[i], n * ldo);
                    for (int64_t t = 0; t < n; t++) {
                        for (int64_t j = 0; j < m; j++) {
                            bad += !same_bits(gy[t * ldy + j], ref[rep][0][t * ldy + j]);
                            bad += !same_bits(gres[t * ldr + j], ref[rep][1][t * ldr + j]);
                            if (next) bad += !same_bits(gh[t * ldo + j], ref[rep][2][t * ldo + j]);
                        }
                    }
                    if (with_q) {
                        uint8_t *gq = download_rows_bytes(c, q[i], n, ldhq, qbytes);
                        bad += memcmp(gq, refq[rep], (size_t)(n * qbytes)) != 0;
                        free(gq);
                    }
                    free(gy); free(gres); free(gh);
                }
                runs++;
                for (int rep = 0; rep < 2; rep++) { for (int j = 0; j < 3; j++) free(ref[rep][j]); free(refq[rep]); }
                for (int i = 0; i < 3; i++) { pkc_free(c, y[i]); pkc_free(c, res[i]); pkc_free(c, h[i]); pkc_free(c, q[i]); }
                pkc_free(c, dq);
                pkc_set_gemm_min_rows(c, saved);
                pkc_set_norm_fused(c, fused);
                pkc_set_gemv_rows_per_group(c, saved_r);
            }
            pkc_free(c, dx);
            free(x); free(r0);
        }
        report(bad == 0 && graph_ok,
               "matmul_post_norm %s %lldx%lld n=1,2,5 (gemv int8 and float x, gemm, unfused, 2 rows of W per group; with and without a next norm): "
               "%lld differences in %lld runs from matmul_q8 + rms_norm + add + rms_norm_q8, direct and graph-replayed twice%s (tol exact)",
               type_name(type), (long long)m, (long long)k, (long long)bad, (long long)runs, graph_ok ? "" : ", a graph failed");
        pkc_free(c, dw); pkc_free(c, dpost); pkc_free(c, dg);
        free(w); free(g);
    }
}

// pkc_matmul_runs against one pkc_matmul_q8 per run into the same columns: bit for bit, with
// and without int8 rows, on the GEMV path (the side stream) and the GEMM path, run directly and
// replayed from a captured graph. Qwen2.5's q|k (Q5_0) beside v (Q8_0), and three runs.
static void test_matmul_runs(pkc_context *c) {
    static const struct { int count; int types[3]; int64_t m[3]; } cases[] = {
        {2, {PK_Q5_0, PK_Q8_0}, {1024, 128}}, {3, {PK_Q4_K, PK_Q6_K, PK_Q4_1}, {256, 512, 64}}};
    static const int64_t ns[] = {1, 2, 7, 12};
    const int64_t k = 1024;
    for (int ci = 0; ci < 2; ci++) {
        pkc_run runs[3];
        int64_t ldy = 8;
        uint8_t *w[3];
        for (int i = 0; i < cases[ci].count; i++) {
            const size_t bytes = pkc_row_bytes(cases[ci].types[i], k) * (size_t)cases[ci].m[i];
            w[i] = malloc(bytes);
            random_weights(cases[ci].types[i], w[i], cases[ci].m[i], k);
            runs[i] = (pkc_run){cases[ci].types[i], dev_upload(c, w[i], bytes), cases[ci].m[i], ldy};
            ldy += cases[ci].m[i] + 4;
        }
        for (int ni = 0; ni < 4; ni++) {
            const int64_t n = ns[ni];
            float *x = host_floats(n * k);
            fill_normal(x, n * k, 1.0f);
            pkc_ptr dx = dev_upload(c, x, (size_t)(n * k) * 4);
            int64_t ldq;
            const pkc_ptr dq = make_input_rows(c, x, dx, k, n, k, &ldq);
            pkc_ptr da = dev_alloc(c, (size_t)(n * ldy) * 4), db = dev_alloc(c, (size_t)(n * ldy) * 4), dg = dev_alloc(c, (size_t)(n * ldy) * 4);
            for (int i8 = 0; i8 < 2; i8++) {
                const pkc_ptr q = i8 ? dq : 0;
                CHECK(c, pkc_memset(c, da, 0, (size_t)(n * ldy) * 4));
                CHECK(c, pkc_memset(c, db, 0, (size_t)(n * ldy) * 4));
                CHECK(c, pkc_memset(c, dg, 0, (size_t)(n * ldy) * 4));
                CHECK(c, pkc_matmul_runs(c, runs, cases[ci].count, k, dx, k, q, ldq, n, da, ldy));
                for (int i = 0; i < cases[ci].count; i++)
                    CHECK(c, pkc_matmul_q8(c, runs[i].type, runs[i].w, runs[i].m, k, dx, k, q, ldq, n,
                                           db + (uint64_t)runs[i].column * 4, ldy, 0));
                pkc_graph *g = NULL;
                CHECK(c, pkc_graph_begin(c));
                CHECK(c, pkc_matmul_runs(c, runs, cases[ci].count, k, dx, k, q, ldq, n, dg, ldy));
                CHECK(c, pkc_graph_end(c, &g));
                CHECK(c, pkc_graph_launch(c, g));
                float *a = download_floats(c, da, n * ldy), *b = download_floats(c, db, n * ldy), *gr = download_floats(c, dg, n * ldy);
                pkc_graph_destroy(c, g);
                int64_t diff = 0, zeros = 0;
                for (int64_t i = 0; i < n * ldy; i++) {
                    diff += !same_bits(a[i], b[i]) || !same_bits(gr[i], b[i]);
                    zeros += b[i] == 0.0f;
                }
                // Every run's columns were written (random products are not exactly zero).
                int64_t gaps = 8 + 4 * cases[ci].count;
                report(diff == 0 && zeros == n * gaps, "matmul_runs %d runs k=%lld n=%lld%s: %lld values differ from one matmul_q8 per run "
                       "(direct or graph-replayed), %lld zeros (want %lld, the gaps) (tol exact)", cases[ci].count, (long long)k,
                       (long long)n, !i8 ? "" : n < pkc_gemm_min_rows(c) ? " int8 rows" : " f16 rows", (long long)diff, (long long)zeros,
                       (long long)(n * gaps));
                free(a); free(b); free(gr);
            }
            pkc_free(c, dx); pkc_free(c, dq); pkc_free(c, da); pkc_free(c, db); pkc_free(c, dg);
            free(x);
        }
        for (int i = 0; i < cases[ci].count; i++) {
            pkc_free(c, runs[i].w);
            free(w[i]);
        }
    }
    pkc_run bad = {PK_Q8_0, 0, 64, 100};
    const int st = pkc_matmul_runs(c, &bad, 1, 1024, 0, 1024, 0, 0, 1, 0, 128);
    report(st == PKC_ERR_INVALID, "matmul_runs: a run past ldy is refused (\"%s\")", pkc_error(c));
}

// pkc_matmul_runs_rope_store against pkc_matmul_runs + pkc_qkv_rope_store (pkc_qkv_norm_rope_store
// with head norms): the q | k | v rows and both caches bit for bit, direct and graph-replayed twice
// (the tail's ticket must come back to 0), at 1 and 2 rows (the tail in the products' last block),
// 5 rows (after them), 2 rows on the GEMM path and with the tail turned off. SmolLM2's layer (one
// Q8_0 run, no bias), Qwen2.5's (q|k Q5_0 beside v Q8_0 on the side stream, a bias, NeoX pairs),
// Gemma 3's (query and key norms, heads of 256) and a key norm alone on heads of 64 (whose own
// launch runs 32 threads a head, the tail 128).
static void test_matmul_runs_rope_store(pkc_context *c) {
    static const struct { int qh, kvh, hd, neox, bias, norms, count, types[2]; int64_t k; const char *name; } cases[] = {
        {9, 3, 64, 0, 0, 0, 1, {PK_Q8_0}, 576, "smollm2 (one run)"},
        {14, 2, 64, 1, 1, 0, 2, {PK_Q5_0, PK_Q8_0}, 896, "qwen2.5 (two runs, bias)"},
        {4, 1, 256, 1, 0, 3, 1, {PK_Q8_0}, 640, "gemma3 (q and k norms)"},
        {8, 2, 64, 0, 0, 2, 2, {PK_Q4_0, PK_Q6_K}, 512, "k norm alone, heads of 64"}};
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    static const struct { int64_t n; int gemm, fused; } modes[] = {{1, 0, 1}, {2, 0, 1}, {5, 0, 1}, {2, 1, 1}, {1, 0, 0}};
    int32_t pos[5] = {3, 9, 0, 14, 7}, slot[5] = {1, 0, 2, 2, 1};
    pkc_ptr dpos = dev_upload(c, pos, sizeof pos), dslot = dev_upload(c, slot, sizeof slot);
    for (int ci = 0; ci < ncases; ci++) {
        const int qh = cases[ci].qh, kvh = cases[ci].kvh, hd = cases[ci].hd;
        const int64_t k = cases[ci].k, kvd = (int64_t)kvh * hd, width = (int64_t)(qh + 2 * kvh) * hd, ldy = width + 8;
        const int64_t cache_halves = 3 * 16 * kvd;
        // the runs: all of q | k | v in one, or q | k then v
        pkc_run runs[2];
        uint8_t *w[2];
        const int64_t ms[2] = {cases[ci].count == 1 ? width : (qh + kvh) * (int64_t)hd, kvd};
        for (int i = 0; i < cases[ci].count; i++) {
            const size_t bytes = pkc_row_bytes(cases[ci].types[i], k) * (size_t)ms[i];
            w[i] = malloc(bytes);
            random_weights(cases[ci].types[i], w[i], ms[i], k);
            runs[i] = (pkc_run){cases[ci].types[i], dev_upload(c, w[i], bytes), ms[i], i == 0 ? 0 : ms[0]};
        }
        float *bias = host_floats(width);
        fill_normal(bias, width, 0.5f);
        float *gains = host_floats(2 * hd);
        fill_normal(gains, 2 * hd, 1.0f);
        pkc_ptr dg = dev_upload(c, gains, (size_t)(2 * hd) * 4);
        const pkc_ptr qn = cases[ci].norms & 1 ? dg : 0, kn = cases[ci].norms & 2 ? dg + (pkc_ptr)hd * 4 : 0;
        pkc_ptr db = dev_upload(c, bias, (size_t)width * 4), table = dev_alloc(c, 5 * (size_t)hd * 4);
        CHECK(c, pkc_rope_table(c, dpos, 5, hd, base_freqs(10000.0f), table));
        int64_t bad = 0;
        int graph_ok = 1;
        for (int mi = 0; mi < 5; mi++) {
            const int64_t n = modes[mi].n;
            const int64_t saved = pkc_set_gemm_min_rows(c, modes[mi].gemm ? 1 : INT64_MAX);
            const int fused = pkc_set_rope_fused(c, modes[mi].fused);
            float *x = host_floats(n * k);
            fill_normal(x, n * k, 1.0f);
            pkc_ptr dx = dev_upload(c, x, (size_t)(n * k) * 4);
            int64_t ldq;
            const pkc_ptr dq = make_input_rows(c, x, dx, k, n, k, &ldq);
            // [0] the reference, [1] the call, [2] the graph
            pkc_ptr y[3];
            pkc_kv kv[3];
            for (int i = 0; i < 3; i++) {
                y[i] = dev_alloc(c, (size_t)(n * ldy) * 4);
                CHECK(c, pkc_memset(c, y[i], 0, (size_t)(n * ldy) * 4));
                kv[i] = (pkc_kv){.k = dev_alloc(c, (size_t)cache_halves * 2), .v = dev_alloc(c, (size_t)cache_halves * 2), .slot_stride = 16 * kvd,
                                 .kv_dim = kvd};
                CHECK(c, pkc_memset(c, kv[i].k, 0x11, (size_t)cache_halves * 2));
                CHECK(c, pkc_memset(c, kv[i].v, 0x11, (size_t)cache_halves * 2));
            }
            const pkc_ptr b = cases[ci].bias ? db : 0;
            CHECK(c, pkc_matmul_runs(c, runs, cases[ci].count, k, dx, k, dq, ldq, n, y[0], ldy));
            if (cases[ci].norms)
                CHECK(c, pkc_qkv_norm_rope_store(c, &kv[0], y[0], n, ldy, qh, kvh, hd, hd, table, cases[ci].neox, qn, kn, 1e-6f, dslot,
                                                 dpos));
            else
                CHECK(c, pkc_qkv_rope_store(c, &kv[0], y[0], n, ldy, qh, kvh, hd, hd, table, cases[ci].neox, b, dslot, dpos));
            pkc_rope_store rs[3];
            for (int i = 1; i < 3; i++)
                rs[i] = (pkc_rope_store){kv[i], qh, kvh, hd, hd, table, cases[ci].neox, b, dslot, dpos, qn, kn, 1e-6f};
            CHECK(c, pkc_matmul_runs_rope_store(c, runs, cases[ci].count, k, dx, k, dq, ldq, n, y[1], ldy, &rs[1]));
            pkc_graph *gr = NULL;
            const int gok = pkc_graph_begin(c) == PKC_OK &&
                            pkc_matmul_runs_rope_store(c, runs, cases[ci].count, k, dx, k, dq, ldq, n, y[2], ldy, &rs[2]) == PKC_OK &&
                            pkc_graph_end(c, &gr) == PKC_OK && pkc_graph_launch(c, gr) == PKC_OK && pkc_graph_launch(c, gr) == PKC_OK &&
                            pkc_synchronize(c) == PKC_OK;
            pkc_graph_destroy(c, gr);
            graph_ok &= gok;
            float *ref = download_floats(c, y[0], n * ldy);
            uint16_t *rk = malloc((size_t)cache_halves * 2), *rv = malloc((size_t)cache_halves * 2), *h = malloc((size_t)cache_halves * 2);
            CHECK(c, pkc_download(c, rk, kv[0].k, (size_t)cache_halves * 2));
            CHECK(c, pkc_download(c, rv, kv[0].v, (size_t)cache_halves * 2));
            for (int i = 1; i < 3; i++) {
                float *got = download_floats(c, y[i], n * ldy);
                for (int64_t t = 0; t < n; t++)
                    for (int64_t j = 0; j < width; j++) bad += !same_bits(got[t * ldy + j], ref[t * ldy + j]);
                CHECK(c, pkc_download(c, h, kv[i].k, (size_t)cache_halves * 2));
                for (int64_t j = 0; j < cache_halves; j++) bad += h[j] != rk[j];
                CHECK(c, pkc_download(c, h, kv[i].v, (size_t)cache_halves * 2));
                for (int64_t j = 0; j < cache_halves; j++) bad += h[j] != rv[j];
                free(got);
            }
            free(ref); free(rk); free(rv); free(h); free(x);
            for (int i = 0; i < 3; i++) { pkc_free(c, y[i]); pkc_free(c, kv[i].k); pkc_free(c, kv[i].v); }
            pkc_free(c, dx); pkc_free(c, dq);
            pkc_set_gemm_min_rows(c, saved);
            pkc_set_rope_fused(c, fused);
        }
        report(bad == 0 && graph_ok,
               "matmul_runs_rope_store %s: %lld values and cache halves differ from matmul_runs + qkv_%srope_store at n=1,2 (tail), "
               "5, 2 (gemm) and 1 (tail off), direct and graph-replayed twice%s (tol exact)",
               cases[ci].name, (long long)bad, cases[ci].norms ? "norm_" : "", graph_ok ? "" : ", a graph failed");
        for (int i = 0; i < cases[ci].count; i++) { pkc_free(c, runs[i].w); free(w[i]); }
        pkc_free(c, db); pkc_free(c, dg); pkc_free(c, table);
        free(bias); free(gains);
    }
    // Head norms with a bias: refused.
    {
        pkc_kv kv = {.k = dev_alloc(c, 4096), .v = dev_alloc(c, 4096), .slot_stride = 64, .kv_dim = 64};
        pkc_ptr buf = dev_alloc(c, 4096);
        const pkc_rope_store rs = {kv, 1, 1, 64, 64, buf, 0, buf, dslot, dpos, buf, 0, 1e-6f};
        const pkc_run run = {PK_F32, buf, 192, 0};
        const int st = pkc_matmul_runs_rope_store(c, &run, 1, 4, buf, 4, 0, 0, 1, buf, 192, &rs);
        report(st == PKC_ERR_INVALID, "matmul_runs_rope_store: a bias with head norms is refused (%s)", pkc_status_name(st));
        pkc_free(c, kv.k); pkc_free(c, kv.v); pkc_free(c, buf);
    }
    pkc_free(c, dpos); pkc_free(c, dslot);
}

static int quick; // --quick: fewer shapes (the CPU emulator in CI)

// The gated product (pkc_matmul_glu) against the product of all 2f rows then pkc_swiglu (or
// pkc_geglu_q8): bit for bit, float x and int8 x, by the policy and with int8 x forced, at 1 and 2
// rows. Every format; --quick: the catalog models' formats (the first six) on every shape, the
// others on their first.
static void test_glu(pkc_context *c, int gelu) {
    if (switched_off("PLINTH_CUDA_GLU")) {
        printf("SKIP matmul_glu%s: off by $PLINTH_CUDA_GLU=0\n", gelu ? " (gelu)" : "");
        return;
    }
    static const int types[] = {PK_Q4_1, PK_Q5_0, PK_Q8_0, PK_Q4_K, PK_Q6_K, PK_F16, PK_Q4_0, PK_Q5_1,
                                PK_Q2_K, PK_Q3_K, PK_Q5_K, PK_PQ2,  PK_BF16, PK_F32, PK_IQ4_NL, PK_IQ4_XS};
    static const int64_t shapes[][2] = {{1536, 576}, {4864, 896}, {512, 4096}};
    for (int ti = 0; ti < (int)(sizeof types / sizeof types[0]); ti++)
        for (int si = 0, fitted = 0; si < 3; si++) {
            const int type = types[ti];
            const int64_t f = shapes[si][0], k = shapes[si][1], m = 2 * f;
            if (k % block_elements(type) != 0 || (quick && ti >= 6 && fitted)) continue;
            fitted = 1;
            const size_t rb = pkc_row_bytes(type, k);
            uint8_t *w = malloc(rb * (size_t)m);
            random_weights(type, w, m, k);
            pkc_ptr dw = dev_upload(c, w, rb * (size_t)m);
            int64_t bad = 0, total = 0;
            for (int n = 1; n <= 2; n++)
                for (int mode = 0; mode < 3; mode++) { // float x; int8 x by the policy; int8 x forced
                    float *x = host_floats(n * k);
                    fill_normal(x, n * k, 1.0f);
                    const int64_t ldq = (int64_t)pkc_q8_row_bytes(k), ldy = 2 * f + 8;
                    pkc_ptr dx = dev_upload(c, x, (size_t)(n * k) * 4), dq = dev_alloc(c, (size_t)(n * ldq));
                    pkc_ptr dy = dev_alloc(c, (size_t)(n * ldy) * 4), dr = dev_alloc(c, (size_t)(n * m) * 4);
                    CHECK(c, pkc_quantize_q8(c, dx, k, n, k, dq, ldq));
                    const pkc_ptr q = mode ? dq : 0;
                    const int saved = pkc_set_gemv_int8(c, mode == 2 ? 1 : 0);
                    CHECK(c, pkc_matmul_glu(c, type, dw, f, k, dx, k, q, ldq, n, dy, ldy, gelu));
                    CHECK(c, pkc_matmul_q8(c, type, dw, m, k, dx, k, q, ldq, n, dr, m, 0));
                    CHECK(c, (gelu ? pkc_geglu_q8 : pkc_swiglu_q8)(c, dr, m, dr + (uint64_t)f * 4, m, n, f, 0, 0));
                    pkc_set_gemv_int8(c, saved);
                    float *y = download_floats(c, dy, n * ldy), *r = download_floats(c, dr, n * m);
                    for (int64_t t = 0; t < n; t++)
                        for (int64_t i = 0; i < f; i++) bad += !same_bits(y[t * ldy + i], r[t * m + i]);
                    total += n * f;
                    pkc_free(c, dx); pkc_free(c, dq); pkc_free(c, dy); pkc_free(c, dr);
                    free(x); free(y); free(r);
                }
            report(bad == 0, "matmul_glu%s %s f=%lld k=%lld n=1,2 (float x, int8 x by policy and forced): %lld of %lld differ from matmul + %s (tol exact)",
                   gelu ? " (gelu)" : "", type_name(type), (long long)f, (long long)k, (long long)bad, (long long)total,
                   gelu ? "geglu" : "swiglu");
            pkc_free(c, dw);
            free(w);
        }
}

// The vocabulary-sized shapes only for the formats that models keep their output matrix in.
// --quick (the CPU emulator in CI, Benchmarks/cuda/emu): every format's products on two shapes,
// one of 576 columns and one of 1536 (k-quants need whole 256s), not the whole table.
static int quick_shape(const shape *s) { return strcmp(s->name, "smol attn_k") == 0 || strcmp(s->name, "odd") == 0; }

// The GEMM path with f16 copies of the weights (pkc_cache_f16) against the same products
// dequantizing at each call, bit for bit. The weights: a run of three matrices, then another
// matrix of 40 rows. The copies: the other matrix's first, then the run's (a copy at a lower
// address made after one at a higher). The products: the run, its second matrix and its last
// rows (each from the run's copy: one launch, x to f16, where there were two), the other matrix
// (its own copy), and 16 rows across the two (in no one copy: dequantized, two launches). An
// overlapping copy is refused, and pkc_free of the weights takes the copies' bytes back. Each
// format's weights are freed before the next one's are allocated, on the emulator at the same
// address (on a device, often): a copy left behind would be found stale, and the next format's
// copies refused as overlapping it.
static void test_f16_cache(pkc_context *c) {
    static const int types[] = {PK_Q4_1, PK_Q5_0, PK_Q8_0, PK_Q4_K, PK_Q6_K, PK_BF16, PK_F16};
    const int64_t saved = pkc_set_gemm_min_rows(c, 1);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int type = types[ti];
        const int64_t k = 512, rows[3] = {64, 32, 48}, m = 144, other = 40, n = 11;
        const size_t rb = pkc_row_bytes(type, k);
        uint8_t *w = malloc(rb * (size_t)(m + other));
        random_weights(type, w, m + other, k);
        pkc_ptr dw = dev_upload(c, w, rb * (size_t)(m + other));
        float *x = host_floats(n * k);
        fill_normal(x, n * k, 1.0f);
        pkc_ptr dx = dev_upload(c, x, (size_t)(n * k) * 4), dy = dev_alloc(c, (size_t)(n * m) * 4);
        // (first row, rows): the run, its second matrix, its last 48 rows, the other matrix, across both
        enum { PARTS = 5 };
        const int64_t parts[PARTS][2] = {{0, m}, {rows[0], rows[1]}, {m - rows[2], rows[2]}, {m, other}, {m - 8, 16}};
        const int copied = type != PK_F16; // F16 weights go to cuBLAS as they are
        const unsigned long long plain = copied ? 2 : 1, want_launches[PARTS] = {1, 1, 1, 1, plain};
        float *want[PARTS], *got[PARTS];
        unsigned long long launched[PARTS];
        pkc_device_info info0, info1, info2;
        CHECK(c, pkc_device_info_get(c, &info0));
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) {
                CHECK(c, pkc_cache_f16(c, type, dw + (pkc_ptr)(m * (int64_t)rb), other, k));
                CHECK(c, pkc_cache_f16(c, type, dw, m, k));
            }
            for (int i = 0; i < PARTS; i++) {
                const unsigned long long before = kernel_launches(c);
                CHECK(c, pkc_matmul(c, type, dw + (pkc_ptr)(parts[i][0] * (int64_t)rb), parts[i][1], k, dx, k, n, dy, parts[i][1]));
                launched[i] = kernel_launches(c) - before;
                float *y = download_floats(c, dy, n * parts[i][1]);
                if (pass == 0) want[i] = y;
                else got[i] = y;
            }
        }
        CHECK(c, pkc_device_info_get(c, &info1));
        int64_t bad = 0;
        int launches_ok = 1;
        for (int i = 0; i < PARTS; i++) {
            for (int64_t j = 0; j < n * parts[i][1]; j++) bad += !same_bits(want[i][j], got[i][j]);
            launches_ok &= launched[i] == want_launches[i];
        }
        const int overlap = pkc_cache_f16(c, type, dw + (pkc_ptr)(rows[0] * (int64_t)rb), 8, k);
        const int refused = !copied || overlap == PKC_ERR_INVALID;
        const size_t copy_bytes = copied ? (size_t)((m + other) * k * 2) : 0;
        CHECK(c, pkc_free(c, dw));
        CHECK(c, pkc_device_info_get(c, &info2));
        const int bytes_ok = info1.f16_weight_bytes - info0.f16_weight_bytes == copy_bytes &&
                             info2.f16_weight_bytes == info0.f16_weight_bytes;
        report(bad == 0 && launches_ok && refused && bytes_ok,
               "f16 weight copies %-4s: %lld values differ from dequantizing at each product (tol exact); launches per product %llu %llu %llu %llu %llu; overlap %s; %zu bytes of copies, %s after pkc_free",
               type_name(type), (long long)bad, launched[0], launched[1], launched[2], launched[3], launched[4],
               copied ? (overlap == PKC_ERR_INVALID ? "refused" : "accepted") : "not copied (F16)",
               info1.f16_weight_bytes - info0.f16_weight_bytes, info2.f16_weight_bytes == info0.f16_weight_bytes ? "returned" : "not returned");
        for (int i = 0; i < PARTS; i++) { free(want[i]); free(got[i]); }
        free(w); free(x);
        pkc_free(c, dx); pkc_free(c, dy);
    }
    pkc_set_gemm_min_rows(c, saved);
}

// Input rows on the GEMM path: at 13 rows (past the crossover) pkc_rms_norm_q8 and pkc_swiglu_q8
// write f16 rows, each value its float's rounding to f16, and pkc_matmul_q8 reading them gives
// bit for bit the product that converts x itself, with one launch fewer (no x to f16). F32
// weights read x (pkc_matmul_reads_rows says so, and a product given rows ignores them).
static void test_gemm_input_rows(pkc_context *c) {
    static const int types[] = {PK_Q4_1, PK_Q8_0, PK_Q6_K, PK_F16, PK_BF16, PK_F32};
    const int64_t n = 13, m = 256, k = 768, ld = k + 4;
    if (n < pkc_gemm_min_rows(c)) return;
    const int64_t ldq = (int64_t)pkc_input_row_bytes(c, k, n);
    float *x = host_floats(n * ld), *u = host_floats(n * ld), *g = host_floats(k);
    fill_normal(x, n * ld, 2.0f);
    fill_normal(u, n * ld, 1.0f);
    for (int64_t i = 0; i < k; i++) g[i] = rng_uniform(0.5f, 1.5f);
    pkc_ptr dx = dev_upload(c, x, (size_t)(n * ld) * 4), du = dev_upload(c, u, (size_t)(n * ld) * 4), dg = dev_upload(c, g, (size_t)k * 4);
    pkc_ptr h = dev_alloc(c, (size_t)(n * ld) * 4), q = dev_alloc(c, (size_t)(n * ldq)), y0 = dev_alloc(c, (size_t)(n * m) * 4),
            y1 = dev_alloc(c, (size_t)(n * m) * 4);
    for (int maker = 0; maker < 2; maker++) {
        // the input: the norm of x, or swiglu of x (as gate) and u
        if (maker == 0) CHECK(c, pkc_rms_norm_q8(c, dx, ld, dg, h, ld, n, k, 1e-6f, q, ldq));
        else {
            CHECK(c, pkc_copy(c, h, dx, (size_t)(n * ld) * 4));
            CHECK(c, pkc_swiglu_q8(c, h, ld, du, ld, n, k, q, ldq));
        }
        float *hv = download_floats(c, h, n * ld);
        const int64_t badq = f16_mismatches(c, q, ldq, hv, ld, n, k);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            const int type = types[ti];
            const size_t rb = pkc_row_bytes(type, k);
            uint8_t *w = malloc(rb * (size_t)m);
            random_weights(type, w, m, k);
            pkc_ptr dw = dev_upload(c, w, rb * (size_t)m);
            const unsigned long long l0 = kernel_launches(c);
            CHECK(c, pkc_matmul(c, type, dw, m, k, h, ld, n, y0, m));
            const unsigned long long l1 = kernel_launches(c);
            CHECK(c, pkc_matmul_q8(c, type, dw, m, k, h, ld, q, ldq, n, y1, m, 0));
            const unsigned long long l2 = kernel_launches(c);
            float *a = download_floats(c, y0, n * m), *b = download_floats(c, y1, n * m);
            int64_t diff = 0;
            for (int64_t i = 0; i < n * m; i++) diff += !same_bits(a[i], b[i]);
            const int reads = pkc_matmul_reads_rows(c, type, m, k, n);
            const unsigned long long plain = l1 - l0, with = l2 - l1;
            report(badq == 0 && diff == 0 && reads == (type != PK_F32) && with == plain - (unsigned long long)reads,
                   "gemm input rows %-4s from %s, n=13: %lld f16 row values differ from their rounding, %lld products from converting x (tol exact); launches %llu with the rows, %llu without",
                   type_name(type), maker ? "swiglu" : "rms_norm", (long long)badq, (long long)diff, with, plain);
            free(a); free(b); free(w);
            pkc_free(c, dw);
        }
        free(hv);
    }
    pkc_free(c, dx); pkc_free(c, du); pkc_free(c, dg); pkc_free(c, h); pkc_free(c, q); pkc_free(c, y0); pkc_free(c, y1);
    free(x); free(u); free(g);
}

static int big_shape_type(int type) { return type == PK_Q4_0 || type == PK_Q4_1 || type == PK_Q5_0 || type == PK_Q8_0 || type == PK_F16; }

static void test_matmul(pkc_context *c) {
    static const int64_t ns_small[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 64};
    static const int64_t ns_big[] = {1, 4, 64};
    for (int ti = 0; ti < NTYPES; ti++) {
        const int type = all_types[ti];
        for (int si = 0; si < NSHAPES; si++) {
            const shape *s = &shapes[si];
            if (s->k % block_elements(type) != 0 || (quick && !quick_shape(s))) continue;
            const int big = s->m > 10000;
            if (big && !big_shape_type(type)) continue;
            const int64_t *ns = big ? ns_big : ns_small;
            const int count = big ? 3 : 12;
            mm_err e[MM_PASSES];
            // The CPU comparison on the smaller shapes (the CPU kernel does all rows: slow for vocabularies).
            const int check_cpu = !big;
            matmul_case(c, type, s, ns, count, check_cpu, e);
            static const char *const pass_names[MM_PASSES] = {"gemv", "gemm", "gemv r2", "gemv8", "gemv8 r2"};
            static const char *const pass_ns[2][MM_PASSES] = {{"1..9,13,16,64", "1..9,13,16,64", "1,2", "1..9,13,16,64", "1,2"},
                                                              {"1,4,64", "1,4,64", "1", "1,4,64", "1"}};
            const int quantized = type != PK_F32 && type != PK_F16 && type != PK_BF16;
            for (int pass = 0; pass < MM_PASSES; pass++) {
                if (pass_i8(pass) && (!quantized || s->k % 32 != 0)) continue;
                const double tol = pass == 1 ? 2e-3 : 2e-5;
                const int ok = e[pass].unwritten == 0 && e[pass].gpu <= tol && (!check_cpu || e[pass].diff <= 2e-2);
                char cpu[96] = "";
                if (check_cpu) snprintf(cpu, sizeof cpu, "; cpu %.1e, |gpu-cpu| %.1e (tol 2e-2)", e[pass].cpu, e[pass].diff);
                report(ok, "matmul %-4s %-13s %6lldx%-4lld n=%s %s: max |y-ref|/sum|wx| %.2e (tol %.0e)%s%s",
                       type_name(type), s->name, (long long)s->m, (long long)s->k, pass_ns[big][pass],
                       pass_names[pass], e[pass].gpu, tol, cpu, e[pass].unwritten ? " UNWRITTEN OUTPUTS" : "");
            }
        }
    }
}

// ---- elementwise -------------------------------------------------------------------------------

static void test_rms_norm(pkc_context *c) {
    // 1001 and 4097 not whole 32s; 2048 and 4096 past the 1024 threads of a block (a loop).
    static const int64_t ks[] = {576, 896, 1001, 2048, 4096, 4097};
    static const int64_t nsz[] = {1, 7, 64};
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 3; b++) {
            const int64_t n = nsz[b], k = ks[a], ld = k + 5;
            float *x = host_floats(n * ld), *w = host_floats(k), *ref = host_floats(n * k);
            fill_normal(x, n * ld, 3.0f);
            fill_normal(w, k, 1.0f);
            float *xc = host_floats(n * k);
            for (int64_t t = 0; t < n; t++) memcpy(xc + t * k, x + t * ld, (size_t)k * 4);
            pk_rms_norm(NULL, xc, w, ref, n, k, 1e-6f);
            pkc_ptr dx = dev_upload(c, x, (size_t)(n * ld) * 4), dw = dev_upload(c, w, (size_t)k * 4);
            pkc_ptr dy = dev_alloc(c, (size_t)(n * k) * 4);
            CHECK(c, pkc_rms_norm(c, dx, ld, dw, dy, k, n, k, 1e-6f));
            float *y = download_floats(c, dy, n * k);
            int64_t worst = 0, exact = 0;
            for (int64_t i = 0; i < n * k; i++) {
                const int64_t u = ulps(y[i], ref[i]);
                worst = u > worst ? u : worst;
                exact += u == 0;
            }
            report(worst <= 2, "rms_norm n=%lld k=%lld: max %lld ulp from pk_rms_norm, %lld of %lld bit-exact (tol 2 ulp)",
                   (long long)n, (long long)k, (long long)worst, (long long)exact, (long long)(n * k));
            const int f16 = n >= pkc_gemm_min_rows(c);
            if (k % 32 == 0 || f16) {
                // The same norm writing input rows too: the floats unchanged; int8 rows the CPU's
                // rounding of them, or (n on the GEMM path) f16 rows their rounding to f16.
                const int64_t ldq = (int64_t)pkc_input_row_bytes(c, k, n);
                pkc_ptr dy2 = dev_alloc(c, (size_t)(n * k) * 4), dq = dev_alloc(c, (size_t)(n * ldq));
                CHECK(c, pkc_rms_norm_q8(c, dx, ld, dw, dy2, k, n, k, 1e-6f, dq, ldq));
                float *y2 = download_floats(c, dy2, n * k);
                int64_t diff = 0;
                for (int64_t i = 0; i < n * k; i++) diff += !same_bits(y[i], y2[i]);
                const int64_t bad = f16 ? f16_mismatches(c, dq, ldq, y, k, n, k) : q8_mismatches(c, dq, ldq, y, k, n, k);
                report(diff == 0 && bad == 0, "rms_norm_q8 n=%lld k=%lld: %lld floats differ from rms_norm, %lld %s (tol exact)",
                       (long long)n, (long long)k, (long long)diff, (long long)bad,
                       f16 ? "f16 row values from their rounding to f16" : "int8 rows or scales from the CPU's rounding");
                pkc_free(c, dy2); pkc_free(c, dq);
                free(y2);
            }
            pkc_free(c, dx); pkc_free(c, dw); pkc_free(c, dy);
            free(x); free(w); free(ref); free(xc); free(y);
        }
}

// pkc_embed_norm_rope against pkc_get_rows, pkc_rms_norm_q8 and pkc_rope_table one after another:
// the gathered rows, the normed rows, their int8 rows and the table bit for bit, with and
// without the int8 rows and the table, ids out of range included; with Gemma 3's embedding scale
// and two tables against the same with pkc_scale and two tables.
static void test_embed_norm_rope(pkc_context *c) {
    struct { int type; int64_t k; } cases[] = {{PK_Q8_0, 576}, {PK_Q4_1, 576}, {PK_Q5_0, 896}, {PK_Q6_K, 1536},
                                               {PK_F16, 2048}, {PK_F32, 64},  {PK_Q4_0, 576}, {PK_Q5_1, 576},
                                               {PK_Q2_K, 512}, {PK_Q3_K, 768}, {PK_Q4_K, 1024}, {PK_Q5_K, 256},
                                               {PK_PQ2, 576},  {PK_BF16, 128}, {PK_IQ4_NL, 576}, {PK_IQ4_XS, 512}};
    static const int64_t nsz[] = {1, 2, 9}; // 9: the GEMM path's rows, f16 input rows
    int32_t ids[9] = {5, 0, 36, -1, 17, 5, 37, 2, 30}, pos[9];
    for (int i = 0; i < 9; i++) pos[i] = i == 0 ? 0 : (int32_t)(rng_u64() % 32768);
    pkc_ptr dids = dev_upload(c, ids, sizeof ids), dpos = dev_upload(c, pos, sizeof pos);
    float factors[32];
    llama31_factors(factors, 32);
    pkc_ptr dfactors = dev_upload(c, factors, sizeof factors);
    const int64_t m = 37;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int b = 0; b < 3; b++)
            for (int variant = 0; variant < 3; variant++) { // 0: int8 rows and a table; 1: neither; 2: rows, scale, 2 tables
                const int type = cases[ci].type;
                const int64_t k = cases[ci].k, n = nsz[b], ldo = k + 4, ldy = k + 8, rd = 64;
                const size_t rb = pkc_row_bytes(type, k);
                uint8_t *wt = malloc(rb * (size_t)m);
                random_weights(type, wt, m, k);
                float *g = host_floats(k);
                fill_normal(g, k, 1.0f);
                // input rows: int8 ones (k whole 32s), or from the GEMM path's rows f16 ones
                const int64_t ldq = variant != 1 && (k % 32 == 0 || n >= pkc_gemm_min_rows(c)) ? (int64_t)pkc_input_row_bytes(c, k, n) : 0;
                pkc_ptr dw = dev_upload(c, wt, rb * (size_t)m), dg = dev_upload(c, g, (size_t)k * 4);
                pkc_ptr dx[2], dy[2], dq[2] = {0, 0}, dt[2] = {0, 0}, dt2[2] = {0, 0};
                for (int j = 0; j < 2; j++) {
                    dx[j] = dev_alloc(c, (size_t)(n * ldo) * 4);
                    dy[j] = dev_alloc(c, (size_t)(n * ldy) * 4);
                    CHECK(c, pkc_memset(c, dx[j], 0, (size_t)(n * ldo) * 4));
                    CHECK(c, pkc_memset(c, dy[j], 0, (size_t)(n * ldy) * 4));
                    if (ldq) {
                        dq[j] = dev_alloc(c, (size_t)(n * ldq));
                        CHECK(c, pkc_memset(c, dq[j], 0, (size_t)(n * ldq)));
                    }
                    if (variant != 1) {
                        dt[j] = dev_alloc(c, (size_t)(n * rd) * 4);
                        CHECK(c, pkc_memset(c, dt[j], 0, (size_t)(n * rd) * 4));
                    }
                    if (variant == 2) {
                        dt2[j] = dev_alloc(c, (size_t)(n * rd) * 4);
                        CHECK(c, pkc_memset(c, dt2[j], 0, (size_t)(n * rd) * 4));
                    }
                }
                // Gemma 3's: sqrt(640) on the embedding, RoPE bases 1e6 (global, here also scaled
                // by 1/8 with Llama 3.1-style factors) and 1e4 (local)
                const float scale = 25.298221f;
                const pkc_rope_freqs freqs[2] = {{1000000.0f, variant == 2 ? 0.125f : 1.0f, variant == 2 ? dfactors : 0},
                                                 base_freqs(10000.0f)};
                CHECK(c, pkc_get_rows(c, type, dw, m, k, dids, n, dx[0], ldo));
                if (variant == 2) CHECK(c, pkc_scale(c, dx[0], n * ldo, scale));
                CHECK(c, pkc_rms_norm_q8(c, dx[0], ldo, dg, dy[0], ldy, n, k, 1e-5f, dq[0], ldq));
                if (dt[0]) CHECK(c, pkc_rope_table(c, dpos, n, (int)rd, freqs[0], dt[0]));
                if (dt2[0]) CHECK(c, pkc_rope_table(c, dpos, n, (int)rd, freqs[1], dt2[0]));
                const pkc_ptr tables[2] = {dt[1], dt2[1]};
                CHECK(c, pkc_embed_norm_rope(c, type, dw, m, k, dids, n, dx[1], ldo, variant == 2 ? scale : 1.0f, dg, dy[1], ldy, 1e-5f,
                                             dq[1], ldq, dpos, (int)rd, freqs, tables, variant == 2 ? 2 : variant == 0));
                int64_t bad = 0;
                const pkc_ptr *bufs[] = {dx, dy, dq, dt, dt2};
                const int64_t sizes[] = {n * ldo * 4, n * ldy * 4, n * ldq, dt[0] ? n * rd * 4 : 0, dt2[0] ? n * rd * 4 : 0};
                for (int j = 0; j < 5; j++) {
                    if (!sizes[j]) continue;
                    uint8_t *a = malloc((size_t)sizes[j]), *bb = malloc((size_t)sizes[j]);
                    CHECK(c, pkc_download(c, a, bufs[j][0], (size_t)sizes[j]));
                    CHECK(c, pkc_download(c, bb, bufs[j][1], (size_t)sizes[j]));
                    for (int64_t i = 0; i < sizes[j]; i++) bad += a[i] != bb[i];
                    free(a); free(bb);
                }
                report(bad == 0, "embed_norm_rope %-4s k=%lld n=%lld %s: %lld bytes differ from get_rows + %srms_norm_q8 + rope_table%s (tol exact)",
                       type_name(type), (long long)k, (long long)n,
                       variant == 0 ? "with input rows and table" : variant == 1 ? "rows only" : "input rows, scale, 2 tables",
                       (long long)bad, variant == 2 ? "scale + " : "", variant == 2 ? " x2" : "");
                for (int j = 0; j < 2; j++) {
                    pkc_free(c, dx[j]); pkc_free(c, dy[j]);
                    if (dq[j]) pkc_free(c, dq[j]);
                    if (dt[j]) pkc_free(c, dt[j]);
                    if (dt2[j]) pkc_free(c, dt2[j]);
                }
                pkc_free(c, dw); pkc_free(c, dg);
                free(wt); free(g);
            }
    pkc_free(c, dids); pkc_free(c, dpos); pkc_free(c, dfactors);
}

static void test_rope(pkc_context *c) {
    // scale: linear scaling (1: none); factors: Llama 3.1's per-pair factors
    struct { int heads, head_dim, rope_dims, neox; float base, scale; int factors; const char *name; } cases[] = {
        {9, 64, 64, 0, 10000.0f, 1.0f, 0, "smol q (normal)"}, {3, 64, 64, 0, 10000.0f, 1.0f, 0, "smol k (normal)"},
        {14, 64, 64, 1, 1000000.0f, 1.0f, 0, "qwen q (neox)"}, {2, 64, 64, 1, 1000000.0f, 1.0f, 0, "qwen k (neox)"},
        {4, 128, 64, 1, 10000.0f, 1.0f, 0, "partial rope_dims 64 of 128 (neox)"}, {4, 128, 32, 0, 500000.0f, 1.0f, 0, "partial 32 of 128 (normal)"},
        {8, 64, 64, 0, 500000.0f, 1.0f, 1, "llama 3.1 factors (normal)"}, {4, 128, 128, 1, 1000000.0f, 0.125f, 0, "linear x8 (neox)"},
        {4, 64, 64, 0, 500000.0f, 0.25f, 1, "linear x4 and factors"}};
    const int64_t n = 64;
    int32_t pos[64];
    for (int i = 0; i < n; i++) pos[i] = i < 8 ? i : (int32_t)(rng_u64() % 32768);
    pkc_ptr dpos = dev_upload(c, pos, sizeof pos);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int heads = cases[ci].heads, hd = cases[ci].head_dim, rd = cases[ci].rope_dims;
        const int64_t stride = (int64_t)heads * hd + 16;
        float *tref = host_floats(n * rd), factors[64];
        llama31_factors(factors, rd / 2);
        pk_rope_table(pos, n, rd, cases[ci].base, cases[ci].scale, cases[ci].factors ? factors : NULL, tref);
        pkc_ptr dt = dev_alloc(c, (size_t)(n * rd) * 4), dfactors = cases[ci].factors ? dev_upload(c, factors, (size_t)rd / 2 * 4) : 0;
        CHECK(c, pkc_rope_table(c, dpos, n, rd, (pkc_rope_freqs){cases[ci].base, cases[ci].scale, dfactors}, dt));
        float *tab = download_floats(c, dt, n * rd);
        double terr = 0.0;
        for (int64_t i = 0; i < n * rd; i++) terr = fmax(terr, fabs((double)tab[i] - (double)tref[i]));
        float *x = host_floats(n * stride);
        fill_normal(x, n * stride, 1.0f);
        pkc_ptr dx = dev_upload(c, x, (size_t)(n * stride) * 4);
        CHECK(c, pkc_rope(c, dx, n, stride, heads, hd, rd, dt, cases[ci].neox));
        float *y = download_floats(c, dx, n * stride);
        pk_rope(NULL, x, n, stride, heads, hd, rd, tab, cases[ci].neox); // CPU rotation with the GPU's table
        int64_t bad = 0;
        for (int64_t i = 0; i < n * stride; i++) bad += !same_bits(x[i], y[i]);
        report(terr <= 2e-7 && bad == 0,
               "rope %-36s n=64 (positions up to 32767): table max |err| %.1e (tol 2e-7); rotation: %lld values differ (tol bit-exact)",
               cases[ci].name, terr, (long long)bad);
        pkc_free(c, dt); pkc_free(c, dx);
        if (dfactors) pkc_free(c, dfactors);
        free(tref); free(tab); free(x); free(y);
    }
    pkc_free(c, dpos);
}

// SwiGLU (gelu 0) or GEGLU (1) against pk_swiglu / pk_geglu on strided rows, bit for bit (the
// clamps of kexp and signed zeros included); with int8 rows (k a multiple of 32), the same
// floats and the CPU's rounding of them.
static void test_gated(pkc_context *c, int gelu) {
    const char *name = gelu ? "geglu" : "swiglu";
    static const int64_t ks[] = {1536, 4864, 999};
    for (int a = 0; a < 3; a++) {
        const int64_t n = 7, k = ks[a], ldg = k + 3, ldu = k + 9;
        float *g = host_floats(n * ldg), *u = host_floats(n * ldu);
        fill_normal(g, n * ldg, 4.0f);
        fill_normal(u, n * ldu, 1.0f);
        g[0] = 100.0f; g[1] = -100.0f; g[2] = 0.0f; g[3] = -0.0f; g[4] = 9.0f; g[5] = -9.0f;
        pkc_ptr dg = dev_upload(c, g, (size_t)(n * ldg) * 4), du = dev_upload(c, u, (size_t)(n * ldu) * 4);
        CHECK(c, gelu ? pkc_geglu_q8(c, dg, ldg, du, ldu, n, k, 0, 0) : pkc_swiglu(c, dg, ldg, du, ldu, n, k));
        float *y = download_floats(c, dg, n * ldg);
        float *gc = host_floats(n * k), *uc = host_floats(n * k);
        for (int64_t t = 0; t < n; t++) {
            memcpy(gc + t * k, g + t * ldg, (size_t)k * 4);
            memcpy(uc + t * k, u + t * ldu, (size_t)k * 4);
        }
        if (gelu) pk_geglu(NULL, gc, uc, n, k);
        else pk_swiglu(NULL, gc, uc, n, k);
        int64_t bad = 0;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < k; i++) bad += !same_bits(y[t * ldg + i], gc[t * k + i]);
        report(bad == 0, "%s n=7 k=%lld (strided): %lld values differ from pk_%s (tol bit-exact)", name, (long long)k,
               (long long)bad, name);
        if (k % 32 == 0) {
            const int64_t ldq = (int64_t)pkc_q8_row_bytes(k) + 16;
            pkc_ptr dg2 = dev_upload(c, g, (size_t)(n * ldg) * 4), dq = dev_alloc(c, (size_t)(n * ldq));
            CHECK(c, (gelu ? pkc_geglu_q8 : pkc_swiglu_q8)(c, dg2, ldg, du, ldu, n, k, dq, ldq));
            float *y2 = download_floats(c, dg2, n * ldg);
            int64_t diff = 0;
            for (int64_t i = 0; i < n * ldg; i++) diff += !same_bits(y[i], y2[i]);
            const int64_t badq = q8_mismatches(c, dq, ldq, y, ldg, n, k);
            report(diff == 0 && badq == 0, "%s_q8 n=7 k=%lld: %lld floats differ from %s, %lld int8 rows or scales from the CPU's rounding (tol exact)",
                   name, (long long)k, (long long)diff, name, (long long)badq);
            pkc_free(c, dg2); pkc_free(c, dq);
            free(y2);
        }
        pkc_free(c, dg); pkc_free(c, du);
        free(g); free(u); free(y); free(gc); free(uc);
    }
}

static void test_swiglu_add(pkc_context *c) {
    test_gated(c, 0);
    // add and add_bias
    const int64_t n = 13, m = 896, ld = 900;
    float *y = host_floats(n * ld), *x = host_floats(n * ld), *b = host_floats(m);
    fill_normal(y, n * ld, 1.0f);
    fill_normal(x, n * ld, 1.0f);
    fill_normal(b, m, 1.0f);
    pkc_ptr dy = dev_upload(c, y, (size_t)(n * ld) * 4), dx = dev_upload(c, x, (size_t)(n * ld) * 4), db = dev_upload(c, b, (size_t)m * 4);
    CHECK(c, pkc_add(c, dy, dx, n * ld));
    float *got = download_floats(c, dy, n * ld);
    float *want = host_floats(n * ld);
    memcpy(want, y, (size_t)(n * ld) * 4);
    pk_add_rows(pool, want, x, 1, n * ld, 0);
    int64_t bad = 0;
    for (int64_t i = 0; i < n * ld; i++) bad += !same_bits(got[i], want[i]);
    report(bad == 0, "add %lld values: %lld differ from pk_add_rows (tol bit-exact)", (long long)(n * ld), (long long)bad);
    CHECK(c, pkc_add_bias(c, dy, ld, db, n, m));
    free(got);
    got = download_floats(c, dy, n * ld);
    bad = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < ld; i++) {
            const float e = i < m ? want[t * ld + i] + b[i] : want[t * ld + i];
            bad += !same_bits(got[t * ld + i], e);
        }
    report(bad == 0, "add_bias n=13 m=896 ld=900: %lld values differ (tol bit-exact; padding untouched)", (long long)bad);
    pkc_free(c, dy); pkc_free(c, dx); pkc_free(c, db);
    free(y); free(x); free(b); free(got); free(want);
}

// pkc_topk against a full sort on the host (larger value, then lower id) of each row's allowed,
// non-NaN values: ids and value bits exact. Rows with many ties (values on a coarse grid), NaNs,
// -infinity, k of 0, 1, 40, 64 and 100 (taken as 64), masks allowing a handful of tokens or
// most, fewer allowed tokens than k.
typedef struct { float v; int i; } ranked;
static int ranked_order(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static void test_topk(pkc_context *c) {
    // the last: past TOPK_ROWS (256) rows, so two launches, and no masks at all
    static const struct { int64_t width, rows; int masked; } runs[] = {{151936, 24, 1}, {1000, 24, 1}, {1000, 300, 0}};
    for (int a = 0; a < 3; a++) {
        const int64_t n = runs[a].rows, w = runs[a].width, ld = w + 32, words = (w + 31) / 32;
        float *x = host_floats(n * ld);
        int32_t *ks = malloc((size_t)n * 4), *mrows = malloc((size_t)n * 4);
        uint32_t *masks = calloc((size_t)(n * words), 4);
        for (int64_t r = 0; r < n; r++) {
            static const int kk[] = {40, 64, 1, 100, 0, 40};
            ks[r] = kk[r % 6];
            for (int64_t i = 0; i < w; i++) x[r * ld + i] = r % 3 == 0 ? (float)(int)(rng_normal() * 2.0f) : rng_normal() * 3.0f;
            mrows[r] = -1;
            if (!runs[a].masked) continue;
            if (r % 4 == 1) { // a few allowed tokens: fewer than k
                mrows[r] = (int32_t)r;
                for (int j = 0; j < 12; j++) { const int64_t i = (int64_t)(rng_u64() % (uint64_t)w); masks[r * words + i / 32] |= 1u << (i % 32); }
            } else if (r % 4 == 2) { // most tokens
                mrows[r] = (int32_t)r;
                for (int64_t i = 0; i < w; i++) if (rng_u64() % 8) masks[r * words + i / 32] |= 1u << (i % 32);
            }
        }
        x[0 * ld + 3] = NAN; x[0 * ld + 4] = NAN; // an unmasked row: each thread's first values enter its list
        for (int64_t i = 0; i < w; i += 2) x[7 * ld + i] = -INFINITY;
        for (int64_t i = 0; i < w; i++) x[8 * ld + i] = -INFINITY;
        pkc_ptr dx = dev_upload(c, x, (size_t)(n * ld) * 4), dk = dev_upload(c, ks, (size_t)n * 4), dmr = dev_upload(c, mrows, (size_t)n * 4);
        pkc_ptr dm = dev_upload(c, masks, (size_t)(n * words) * 4), dout = dev_alloc(c, (size_t)(n * PKC_TOPK_MAX) * 8);
        CHECK(c, pkc_memset(c, dout, 0x5a, (size_t)(n * PKC_TOPK_MAX) * 8));
        CHECK(c, pkc_topk(c, dx, ld, n, w, dk, runs[a].masked ? dm : 0, words, dmr, dout));
        int32_t *out = malloc((size_t)(n * PKC_TOPK_MAX) * 8);
        CHECK(c, pkc_download(c, out, dout, (size_t)(n * PKC_TOPK_MAX) * 8));
        ranked *all = malloc((size_t)w * sizeof *all);
        int64_t bad = 0, checked = 0;
        for (int64_t r = 0; r < n; r++) {
            if (ks[r] == 0) { // skipped: untouched
                bad += out[r * PKC_TOPK_MAX * 2] != 0x5a5a5a5a;
                continue;
            }
            int64_t m = 0;
            for (int64_t i = 0; i < w; i++) {
                const float v = x[r * ld + i];
                if (v != v || (mrows[r] >= 0 && !((masks[r * words + i / 32] >> (i % 32)) & 1u))) continue;
                all[m++] = (ranked){v, (int)i};
            }
            qsort(all, (size_t)m, sizeof *all, ranked_order);
            const int64_t k = ks[r] < PKC_TOPK_MAX ? ks[r] : PKC_TOPK_MAX;
            for (int64_t j = 0; j < PKC_TOPK_MAX; j++) {
                const int32_t id = out[(r * PKC_TOPK_MAX + j) * 2];
                float v;
                memcpy(&v, &out[(r * PKC_TOPK_MAX + j) * 2 + 1], 4);
                const int want = j < k && j < m;
                bad += want ? (id != all[j].i || !same_bits(v, all[j].v)) : id != -1;
                checked++;
            }
        }
        report(bad == 0, "topk width %lld, %lld rows (ties, NaN, -inf, %s, k 0/1/40/64/100): %lld of %lld entries differ from a full sort (tol exact)",
               (long long)w, (long long)n, runs[a].masked ? "masks" : "no masks", (long long)bad, (long long)checked);
        pkc_free(c, dx); pkc_free(c, dk); pkc_free(c, dmr); pkc_free(c, dm); pkc_free(c, dout);
        free(x); free(masks); free(out); free(all); free(ks); free(mrows);
    }
}

static void test_argmax_rows(pkc_context *c) {
    static const int64_t widths[] = {49152, 151936, 1000};
    for (int a = 0; a < 3; a++) {
        const int64_t n = 64, w = widths[a], ld = w + 32;
        float *x = host_floats(n * ld);
        fill_normal(x, n * ld, 3.0f);
        // planted cases: ties (lowest index wins), NaNs, all -inf, max at the ends
        for (int64_t i = 0; i < w; i++) x[0 * ld + i] = 1.0f;
        x[1 * ld + 5] = 50.0f; x[1 * ld + w - 7] = 50.0f;
        x[2 * ld + 0] = NAN; x[2 * ld + 10] = NAN; x[2 * ld + 11] = 40.0f;
        for (int64_t i = 0; i < w; i++) x[3 * ld + i] = -INFINITY;
        x[4 * ld + w - 1] = 99.0f;
        x[5 * ld + 0] = 99.0f;
        for (int64_t i = 0; i < w; i++) x[6 * ld + i] = NAN;
        pkc_ptr dx = dev_upload(c, x, (size_t)(n * ld) * 4), di = dev_alloc(c, (size_t)n * 4);
        CHECK(c, pkc_argmax(c, dx, ld, n, w, di));
        int32_t ids[64];
        CHECK(c, pkc_download(c, ids, di, sizeof ids));
        int64_t bad = 0;
        for (int64_t t = 0; t < n; t++) bad += ids[t] != (int32_t)pk_argmax(x + t * ld, w);
        report(bad == 0, "argmax 64 rows x %lld (ties, NaN, -inf rows planted): %lld of 64 differ from pk_argmax (tol exact)",
               (long long)w, (long long)bad);
        // only selected rows back
        const int32_t rows[4] = {63, 1, 17, 1};
        float *sel = host_floats(4 * w);
        CHECK(c, pkc_download_rows(c, sel, dx, ld, rows, 4, w));
        bad = 0;
        for (int r = 0; r < 4; r++) bad += memcmp(sel + r * w, x + rows[r] * ld, (size_t)w * 4) != 0;
        report(bad == 0, "download_rows 4 of 64 rows x %lld: %lld rows differ (tol exact)", (long long)w, (long long)bad);
        // masked: the CPU sampler's greedy choice over allowed tokens (Sampler.choose): the first
        // allowed token unless a later one is strictly greater; 0 when none is allowed
        const int64_t words = (w + 31) / 32;
        uint32_t *masks = malloc((size_t)(n * words) * 4);
        int32_t mrows[64];
        uint64_t s = 0x9e3779b97f4a7c15ull + (uint64_t)a;
        for (int64_t i = 0; i < n * words; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            masks[i] = (i % 3 == 0) ? (uint32_t)s : (uint32_t)(s & (s >> 32)); // dense and sparse words
        }
        for (int64_t t = 0; t < n; t++) mrows[t] = (t % 5 == 4) ? -1 : (int32_t)((t * 7) % n);
        memset(masks + 10 * words, 0, (size_t)words * 4);          // mask row 10: nothing allowed
        memset(masks + 13 * words, 0, (size_t)words * 4);          // mask row 13: only token 10 and 11
        masks[13 * words] = (1u << 10) | (1u << 11);
        mrows[2] = 13;                                             // row 2: NaN at 10 first -> 10
        mrows[3] = 13;                                             // row 3: all -inf -> first allowed
        mrows[6] = 10;
        for (int64_t i = 0; i < w; i++) x[8 * ld + i] = 7.0f;      // row 8: ties -> first allowed
        CHECK(c, pkc_upload(c, dx, x, (size_t)(n * ld) * 4));
        pkc_ptr dm = dev_upload(c, masks, (size_t)(n * words) * 4), dr = dev_upload(c, mrows, sizeof mrows);
        CHECK(c, pkc_argmax_masked(c, dx, ld, n, w, dm, words, dr, di));
        CHECK(c, pkc_download(c, ids, di, sizeof ids));
        bad = 0;
        for (int64_t t = 0; t < n; t++) {
            const float *row = x + t * ld;
            int32_t want = 0;
            if (mrows[t] < 0) {
                want = (int32_t)pk_argmax(row, w);
            } else {
                const uint32_t *m = masks + mrows[t] * words;
                int32_t best = -1;
                float bestv = -INFINITY;
                for (int64_t i = 0; i < w; i++) {
                    if (!((m[i >> 5] >> (i & 31)) & 1u)) continue;
                    if (best < 0 || row[i] > bestv) { best = (int32_t)i; bestv = row[i]; }
                }
                want = best < 0 ? 0 : best;
            }
            bad += ids[t] != want;
        }
        report(bad == 0, "argmax_masked 64 rows x %lld (masks dense, sparse, empty; NaN first; ties; no mask): %lld of 64 differ from the sampler's rule (tol exact)",
               (long long)w, (long long)bad);
        pkc_free(c, dm); pkc_free(c, dr);
        free(masks);
        pkc_free(c, dx); pkc_free(c, di);
        free(x); free(sel);
    }
}

// ---- Gemma's operations ---------------------------------------------------------------------------

// The per-head norm (against pk_rms_norm over the heads as rows; 2 ulp as rms_norm), GEGLU
// (test_gated), the embedding scale (exact) and the logit softcap (the device's tanhf: 4 ulp of
// cap * tanhf(y / cap) by glibc).
static void test_gemma_ops(pkc_context *c) {
    {
        const int64_t n = 5, heads = 4, hd = 256, ld = heads * hd + 8;
        float *x = host_floats(n * ld), *w = host_floats(hd), *ref = host_floats(n * heads * hd);
        fill_normal(x, n * ld, 3.0f);
        fill_normal(w, hd, 1.0f);
        float *xc = host_floats(n * heads * hd);
        for (int64_t t = 0; t < n; t++) memcpy(xc + t * heads * hd, x + t * ld, (size_t)(heads * hd) * 4);
        pk_rms_norm(NULL, xc, w, ref, n * heads, hd, 1e-6f);
        pkc_ptr dx = dev_upload(c, x, (size_t)(n * ld) * 4), dw = dev_upload(c, w, (size_t)hd * 4);
        CHECK(c, pkc_rms_norm_heads(c, dx, ld, (int)heads, dw, n, hd, 1e-6f));
        float *y = download_floats(c, dx, n * ld);
        int64_t worst = 0, pad = 0;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < ld; i++) {
                if (i >= heads * hd) { pad += !same_bits(y[t * ld + i], x[t * ld + i]); continue; }
                const int64_t u = ulps(y[t * ld + i], ref[t * heads * hd + i]);
                worst = u > worst ? u : worst;
            }
        report(worst <= 2 && pad == 0, "rms_norm_heads n=5 x 4 heads of 256 (strided): max %lld ulp from pk_rms_norm (tol 2 ulp; %lld padding values touched)",
               (long long)worst, (long long)pad);
        pkc_free(c, dx); pkc_free(c, dw);
        free(x); free(w); free(ref); free(xc); free(y);
    }
    test_gated(c, 1);
    {
        const int64_t count = 262144 + 7;
        const float scale = sqrtf(640.0f), cap = 30.0f;
        float *x = host_floats(count);
        fill_normal(x, count, 20.0f);
        x[0] = 1e30f; x[1] = -1e30f; x[2] = 0.0f; x[3] = -0.0f;
        pkc_ptr dx = dev_upload(c, x, (size_t)count * 4), dy = dev_upload(c, x, (size_t)count * 4);
        CHECK(c, pkc_scale(c, dx, count, scale));
        CHECK(c, pkc_softcap(c, dy, count, cap));
        float *got = download_floats(c, dx, count), *cap_got = download_floats(c, dy, count);
        int64_t bad = 0, worst = 0;
        for (int64_t i = 0; i < count; i++) {
            bad += !same_bits(got[i], x[i] * scale);
            const int64_t u = ulps(cap_got[i], cap * tanhf(x[i] / cap));
            worst = u > worst ? u : worst;
        }
        const int refused = pkc_softcap(c, dy, count, 0.0f) == PKC_ERR_INVALID;
        report(bad == 0 && worst <= 4 && refused,
               "scale %lld values by sqrt(640): %lld differ from x * s (tol exact); softcap 30: max %lld ulp from cap*tanhf(x/cap) (tol 4 ulp); cap 0 refused",
               (long long)count, (long long)bad, (long long)worst);
        pkc_free(c, dx); pkc_free(c, dy);
        free(x); free(got); free(cap_got);
    }
}

// ---- KV cache and attention --------------------------------------------------------------------

typedef struct {
    int n_head, n_kv_head, head_dim, slots, max_pos;
    int64_t kv_dim;
    pkc_kv kv;
    uint16_t **ck, **cv; // CPU caches per slot (pk_store_kv's layout)
} kv_world;

static void kv_world_init(pkc_context *c, kv_world *w, int n_head, int n_kv_head, int head_dim, int slots, int max_pos) {
    w->n_head = n_head; w->n_kv_head = n_kv_head; w->head_dim = head_dim; w->slots = slots; w->max_pos = max_pos;
    w->kv_dim = (int64_t)n_kv_head * head_dim;
    const int64_t slot_stride = (int64_t)max_pos * w->kv_dim + 8; // padded: the stride is not the payload
    memset(&w->kv, 0, sizeof w->kv); // slotted: no page table
    w->kv.kv_dim = w->kv_dim;
    w->kv.slot_stride = slot_stride;
    w->kv.k = dev_alloc(c, (size_t)(slots * slot_stride) * 2);
    w->kv.v = dev_alloc(c, (size_t)(slots * slot_stride) * 2);
    CHECK(c, pkc_memset(c, w->kv.k, 0, (size_t)(slots * slot_stride) * 2));
    CHECK(c, pkc_memset(c, w->kv.v, 0, (size_t)(slots * slot_stride) * 2));
    w->ck = calloc((size_t)slots, sizeof *w->ck);
    w->cv = calloc((size_t)slots, sizeof *w->cv);
    const int64_t padded = (max_pos + PK_KEY_BLOCK - 1) / PK_KEY_BLOCK * PK_KEY_BLOCK;
    for (int s = 0; s < slots; s++) {
        w->ck[s] = calloc((size_t)(padded * w->kv_dim), 2);
        w->cv[s] = calloc((size_t)(padded * w->kv_dim), 2);
    }
}

static void kv_world_free(pkc_context *c, kv_world *w) {
    pkc_free(c, w->kv.k);
    pkc_free(c, w->kv.v);
    for (int s = 0; s < w->slots; s++) { free(w->ck[s]); free(w->cv[s]); }
    free(w->ck); free(w->cv);
}

// Stores random k/v rows for positions [0, len[s]) of every slot, in batches of mixed slots, on
// both sides.
static void kv_fill(pkc_context *c, kv_world *w, const int32_t *len) {
    int64_t total = 0;
    for (int s = 0; s < w->slots; s++) total += len[s];
    int32_t *sl = malloc((size_t)total * 4), *ps = malloc((size_t)total * 4);
    int64_t r = 0;
    for (int p = 0; p < w->max_pos; p++) // interleaved: one batch holds many slots
        for (int s = 0; s < w->slots; s++)
            if (p < len[s]) { sl[r] = s; ps[r] = p; r++; }
    float *k = host_floats(total * w->kv_dim), *v = host_floats(total * w->kv_dim);
    fill_normal(k, total * w->kv_dim, 1.0f);
    fill_normal(v, total * w->kv_dim, 1.0f);
    pkc_ptr dk = dev_upload(c, k, (size_t)(total * w->kv_dim) * 4), dv = dev_upload(c, v, (size_t)(total * w->kv_dim) * 4);
    pkc_ptr dsl = dev_upload(c, sl, (size_t)total * 4), dps = dev_upload(c, ps, (size_t)total * 4);
    const int64_t batch = 1000;
    for (int64_t b0 = 0; b0 < total; b0 += batch) {
        const int64_t nb = total - b0 < batch ? total - b0 : batch;
        CHECK(c, pkc_store_kv(c, &w->kv, dk + (uint64_t)(b0 * w->kv_dim) * 4, w->kv_dim, dv + (uint64_t)(b0 * w->kv_dim) * 4,
                              w->kv_dim, nb, dsl + (uint64_t)b0 * 4, dps + (uint64_t)b0 * 4));
    }
    uint16_t **keys = malloc((size_t)total * sizeof *keys), **vals = malloc((size_t)total * sizeof *vals);
    for (int64_t i = 0; i < total; i++) { keys[i] = w->ck[sl[i]]; vals[i] = w->cv[sl[i]]; }
    pk_store_kv(pool, k, v, total, w->kv_dim, ps, keys, vals);
    pkc_free(c, dk); pkc_free(c, dv); pkc_free(c, dsl); pkc_free(c, dps);
    free(sl); free(ps); free(k); free(v); free(keys); free(vals);
}

static float cpu_key(const kv_world *w, int s, int64_t p, int64_t i) {
    const uint16_t h = w->ck[s][(p / PK_KEY_BLOCK) * PK_KEY_BLOCK * w->kv_dim + i * PK_KEY_BLOCK + p % PK_KEY_BLOCK];
    return pk_f16_to_f32(h);
}

static void test_store(pkc_context *c, kv_world *w, const int32_t *len) {
    const size_t bytes = (size_t)(w->slots * w->kv.slot_stride) * 2;
    uint16_t *gk = malloc(bytes), *gv = malloc(bytes);
    CHECK(c, pkc_download(c, gk, w->kv.k, bytes));
    CHECK(c, pkc_download(c, gv, w->kv.v, bytes));
    int64_t bad = 0, count = 0;
    for (int s = 0; s < w->slots; s++)
        for (int64_t p = 0; p < len[s]; p++)
            for (int64_t i = 0; i < w->kv_dim; i++) {
                const int64_t o = s * w->kv.slot_stride + p * w->kv_dim + i;
                bad += pk_f16_to_f32(gk[o]) != cpu_key(w, s, p, i) || gv[o] != w->cv[s][p * w->kv_dim + i];
                count++;
            }
    report(bad == 0, "store_kv %d slots, %lld positions x kv_dim %lld (batches of mixed slots): %lld differ from pk_store_kv (tol bit-exact)",
           w->slots, (long long)(count / w->kv_dim), (long long)w->kv_dim, (long long)bad);
    free(gk); free(gv);
}

// Runs attention for rows (slot, kv_len) on both sides and checks; window > 0: each row's last
// `window` positions only (pkc_attention_window against pk_attention_window); rows from `from`
// on the tensor cores where the device has them (pkc_attention_prompt; from = n: none).
static void attention_case_from(pkc_context *c, kv_world *w, const char *name, int64_t n, const int32_t *slot,
                                const int32_t *kvlen, int window, int64_t from) {
    const int64_t qd = (int64_t)w->n_head * w->head_dim, ldq = qd + 4, ldo = qd + 12;
    float *q = host_floats(n * ldq);
    fill_normal(q, n * ldq, 1.0f);
    const float scale = 1.0f / sqrtf((float)w->head_dim);
    int32_t max_kv = 0;
    for (int64_t t = 0; t < n; t++) max_kv = kvlen[t] > max_kv ? kvlen[t] : max_kv;
    pkc_ptr dq = dev_upload(c, q, (size_t)(n * ldq) * 4), dsl = dev_upload(c, slot, (size_t)n * 4);
    pkc_ptr dlen = dev_upload(c, kvlen, (size_t)n * 4), dout = dev_alloc(c, (size_t)(n * ldo) * 4);
    CHECK(c, pkc_memset(c, dout, 0xff, (size_t)(n * ldo) * 4));
    const unsigned long long l0 = kernel_launches(c);
    CHECK(c, pkc_attention_prompt(c, &w->kv, dq, ldq, n, w->n_head, w->n_kv_head, w->head_dim, dsl, dlen, max_kv, window, scale,
                                  dout, ldo, 0, 0, from));
    const unsigned long long launched = kernel_launches(c) - l0;
    float *out = download_floats(c, dout, n * ldo);
    // With the output product's f16 input rows (the GEMM path's rows only):
    // the same floats bit for bit, the rows their f16 rounding, no launch more.
    const int64_t ldr = (int64_t)pkc_input_row_bytes(c, qd, n) + 16;
    pkc_ptr drows = dev_alloc(c, (size_t)(n * ldr)), dout2 = dev_alloc(c, (size_t)(n * ldo) * 4);
    CHECK(c, pkc_memset(c, drows, 0xff, (size_t)(n * ldr)));
    if (n >= pkc_gemm_min_rows(c)) {
        const unsigned long long l1 = kernel_launches(c);
        CHECK(c, pkc_attention_prompt(c, &w->kv, dq, ldq, n, w->n_head, w->n_kv_head, w->head_dim, dsl, dlen, max_kv, window, scale,
                                      dout2, ldo, drows, ldr, from));
        const unsigned long long launched_rows = kernel_launches(c) - l1;
        float *out2 = download_floats(c, dout2, n * ldo);
        int64_t differ = 0;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < qd; i++) differ += !same_bits(out[t * ldo + i], out2[t * ldo + i]);
        const int64_t bad_rows = f16_mismatches(c, drows, ldr, out, ldo, n, qd);
        report(differ == 0 && bad_rows == 0 && launched_rows == launched,
               "attention_rows %-29s %3lld rows%s: %lld outputs differ from pkc_attention's, %lld f16 rows values from their rounding "
               "(tol exact); %llu launches (%llu without rows)", name, (long long)n, launched > 1 ? " (split)" : "", (long long)differ,
               (long long)bad_rows, launched_rows, launched);
        free(out2);
    } else {
        const int st = pkc_attention_prompt(c, &w->kv, dq, ldq, n, w->n_head, w->n_kv_head, w->head_dim, dsl, dlen, max_kv, window,
                                            scale, dout2, ldo, drows, ldr, from);
        report(st == PKC_ERR_INVALID, "attention_rows %-29s %3lld rows, below the GEMM path: refused (%s)", name, (long long)n,
               pkc_status_name(st));
    }
    pkc_free(c, drows); pkc_free(c, dout2);
    // CPU
    float *qc = host_floats(n * qd), *oc = host_floats(n * qd);
    for (int64_t t = 0; t < n; t++) memcpy(qc + t * qd, q + t * ldq, (size_t)qd * 4);
    const uint16_t **keys = malloc((size_t)n * sizeof *keys), **vals = malloc((size_t)n * sizeof *vals);
    for (int64_t t = 0; t < n; t++) { keys[t] = w->ck[slot[t]]; vals[t] = w->cv[slot[t]]; }
    const int threads = pk_pool_threads(pool);
    float *scratch = host_floats((int64_t)pk_attention_scratch_floats(max_kv, w->n_head / w->n_kv_head, threads));
    int32_t *start = malloc((size_t)n * 4);
    for (int64_t t = 0; t < n; t++) start[t] = window && kvlen[t] > window ? kvlen[t] - window : 0;
    pk_attention_window(pool, qc, n, w->n_head, w->n_kv_head, w->head_dim, keys, vals, window ? start : NULL, kvlen, w->kv_dim,
                        scale, oc, scratch);
    // float64 reference from the f16 cache (CPU copy) and f16-rounded queries
    double eg = 0.0, ec = 0.0, vmax = 0.0;
    int64_t unwritten = 0;
    const int group = w->n_head / w->n_kv_head, hd = w->head_dim;
    double *sc = malloc((size_t)(max_kv + 1) * sizeof *sc), *acc = malloc((size_t)hd * sizeof *acc);
    for (int64_t t = 0; t < n; t++) {
        const int s = slot[t];
        for (int h = 0; h < w->n_head; h++) {
            const int kvh = h / group;
            double mx = -INFINITY;
            for (int64_t p = start[t]; p < kvlen[t]; p++) {
                double d = 0.0;
                for (int i = 0; i < hd; i++)
                    d += (double)pk_f16_to_f32(pk_f32_to_f16(q[t * ldq + h * hd + i])) * (double)cpu_key(w, s, p, (int64_t)kvh * hd + i);
                sc[p] = d * (double)scale;
                mx = fmax(mx, sc[p]);
            }
            double sum = 0.0;
            for (int64_t p = start[t]; p < kvlen[t]; p++) { sc[p] = exp(sc[p] - mx); sum += sc[p]; }
            for (int i = 0; i < hd; i++) acc[i] = 0.0;
            for (int64_t p = start[t]; p < kvlen[t]; p++)
                for (int i = 0; i < hd; i++) {
                    const double v = pk_f16_to_f32(w->cv[s][p * w->kv_dim + (int64_t)kvh * hd + i]);
                    acc[i] += sc[p] / sum * v;
                    vmax = fmax(vmax, fabs(v));
                }
            for (int i = 0; i < hd; i++) {
                const float g = out[t * ldo + h * hd + i];
                if (isnan(g)) { unwritten++; continue; }
                const double ref = kvlen[t] > 0 ? acc[i] : 0.0;
                eg = fmax(eg, fabs((double)g - ref));
                ec = fmax(ec, fabs((double)g - (double)oc[t * qd + h * hd + i]));
            }
        }
    }
    if (vmax == 0.0) vmax = 1.0;
    const int ok = unwritten == 0 && eg <= 2e-5 * vmax && ec <= 2e-3 * vmax;
    char win[32] = "", cores[48] = "";
    if (window) snprintf(win, sizeof win, ", window %d", window);
    if (from < n)
        snprintf(cores, sizeof cores, pkc_attention_uses_mma(c, hd) ? ", tensor cores from row %lld" : ", no tensor cores (from %lld)",
                 (long long)from);
    report(ok, "attention %-34s %3lld rows, heads %d/%d%s, max kv %4d%s: |gpu-f64| %.1e, |gpu-cpu| %.1e of max|v| %.2f (tol 2e-5, 2e-3)%s",
           name, (long long)n, w->n_head, w->n_kv_head, win, max_kv, cores, eg / vmax, ec / vmax, vmax, unwritten ? " UNWRITTEN" : "");
    free(start);
    pkc_free(c, dq); pkc_free(c, dsl); pkc_free(c, dlen); pkc_free(c, dout);
    free(q); free(out); free(qc); free(oc); free(keys); free(vals); free(scratch); free(sc); free(acc);
}

static void attention_case(pkc_context *c, kv_world *w, const char *name, int64_t n, const int32_t *slot, const int32_t *kvlen,
                           int window) {
    attention_case_from(c, w, name, n, slot, kvlen, window, n);
}

// The fused q | k | v launches against the launches they replace, on the same rows: the rows
// (q, k, v) and both caches bit for bit. pkc_qkv_rope_store against pkc_add_bias + pkc_rope +
// pkc_store_kv; pkc_qkv_norm_rope_store against pkc_rms_norm_heads (q, k) + pkc_rope +
// pkc_store_kv (Gemma 3 270M's heads, a query norm only, no norms with a partial rotation, heads
// of 96 with idle threads).
static void test_qkv_rope_store(pkc_context *c) {
    struct { int qh, kvh, hd, rd, neox, bias, norms; const char *name; } cases[] = {
        {9, 3, 64, 64, 0, 0, -1, "smol (normal, no bias)"}, {14, 2, 64, 64, 1, 1, -1, "qwen (neox, bias)"},
        {4, 2, 128, 32, 0, 1, -1, "partial rope 32 of 128 (normal, bias)"}, {4, 1, 128, 64, 1, 0, -1, "partial 64 of 128 (neox)"},
        // norms: -1 pkc_qkv_rope_store; else pkc_qkv_norm_rope_store, bit 0 the query norm, bit 1 the key norm
        {4, 1, 256, 256, 1, 0, 3, "gemma3 270m (neox, q and k norms)"}, {8, 2, 64, 64, 0, 0, 1, "q norm only (normal)"},
        {4, 2, 128, 64, 1, 0, 0, "no norms, partial 64 of 128 (neox)"}, {3, 1, 96, 96, 0, 0, 3, "heads of 96 (normal, norms; idle threads)"}};
    const int64_t n = 6, slots_n = 3, positions = 16;
    int32_t pos[6] = {0, 1, 2, 7, 15, 3}, slot[6] = {0, 0, 0, 1, 2, 2};
    pkc_ptr dpos = dev_upload(c, pos, sizeof pos), dslot = dev_upload(c, slot, sizeof slot);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int qh = cases[ci].qh, kvh = cases[ci].kvh, hd = cases[ci].hd, rd = cases[ci].rd, norms = cases[ci].norms;
        const int64_t kvd = (int64_t)kvh * hd, width = (int64_t)(qh + 2 * kvh) * hd, stride = width + 8;
        const int64_t cache_halves = slots_n * positions * kvd;
        float *x = host_floats(n * stride), *bias = host_floats(width), *g = host_floats(2 * hd);
        fill_normal(x, n * stride, 2.0f);
        fill_normal(bias, width, 0.5f);
        for (int i = 0; i < 2 * hd; i++) g[i] = rng_uniform(0.5f, 1.5f);
        pkc_ptr table = dev_alloc(c, (size_t)(n * rd) * 4), db = dev_upload(c, bias, (size_t)width * 4), dg = dev_upload(c, g, (size_t)(2 * hd) * 4);
        const pkc_ptr qn = norms > 0 && (norms & 1) ? dg : 0, kn = norms > 0 && (norms & 2) ? dg + (pkc_ptr)hd * 4 : 0;
        CHECK(c, pkc_rope_table(c, dpos, n, rd, base_freqs(10000.0f), table));
        pkc_ptr xa = dev_upload(c, x, (size_t)(n * stride) * 4), xb = dev_upload(c, x, (size_t)(n * stride) * 4);
        pkc_kv ca = {.k = dev_alloc(c, (size_t)cache_halves * 2), .v = dev_alloc(c, (size_t)cache_halves * 2), .slot_stride = positions * kvd,
                     .kv_dim = kvd};
        pkc_kv cb = {.k = dev_alloc(c, (size_t)cache_halves * 2), .v = dev_alloc(c, (size_t)cache_halves * 2), .slot_stride = positions * kvd,
                     .kv_dim = kvd};
        for (int i = 0; i < 2; i++) {
            CHECK(c, pkc_memset(c, i ? cb.k : ca.k, 0x11, (size_t)cache_halves * 2));
            CHECK(c, pkc_memset(c, i ? cb.v : ca.v, 0x11, (size_t)cache_halves * 2));
        }
        if (cases[ci].bias) CHECK(c, pkc_add_bias(c, xa, stride, db, n, width));
        if (qn) CHECK(c, pkc_rms_norm_heads(c, xa, stride, qh, qn, n, hd, 1e-6f));
        if (kn) CHECK(c, pkc_rms_norm_heads(c, xa + (pkc_ptr)(qh * hd) * 4, stride, kvh, kn, n, hd, 1e-6f));
        CHECK(c, pkc_rope(c, xa, n, stride, qh + kvh, hd, rd, table, cases[ci].neox));
        CHECK(c, pkc_store_kv(c, &ca, xa + (pkc_ptr)(qh * hd) * 4, stride, xa + (pkc_ptr)((qh + kvh) * hd) * 4, stride, n, dslot, dpos));
        if (norms < 0)
            CHECK(c, pkc_qkv_rope_store(c, &cb, xb, n, stride, qh, kvh, hd, rd, table, cases[ci].neox, cases[ci].bias ? db : 0,
                                        dslot, dpos));
        else
            CHECK(c, pkc_qkv_norm_rope_store(c, &cb, xb, n, stride, qh, kvh, hd, rd, table, cases[ci].neox, qn, kn, 1e-6f, dslot, dpos));
        float *ya = download_floats(c, xa, n * stride), *yb = download_floats(c, xb, n * stride);
        int64_t bad = 0, moved = 0;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < width; i++) {
                bad += !same_bits(ya[t * stride + i], yb[t * stride + i]);
                moved += !same_bits(yb[t * stride + i], x[t * stride + i]);
            }
        uint16_t *ka = malloc((size_t)cache_halves * 2), *kb = malloc((size_t)cache_halves * 2);
        int64_t badc = 0;
        for (int i = 0; i < 2; i++) {
            CHECK(c, pkc_download(c, ka, i ? ca.v : ca.k, (size_t)cache_halves * 2));
            CHECK(c, pkc_download(c, kb, i ? cb.v : cb.k, (size_t)cache_halves * 2));
            for (int64_t j = 0; j < cache_halves; j++) badc += ka[j] != kb[j];
        }
        // the rotated q and k values changed (in the rows not at position 0), at the least
        const int64_t changed_min = (n - 1) * (int64_t)(qh + kvh) * rd / 2;
        report(bad == 0 && badc == 0 && moved >= changed_min,
               "%s %s: %lld row values and %lld cache halves differ from %s + rope + store_kv (tol exact); %lld values changed",
               norms < 0 ? "qkv_rope_store" : "qkv_norm_rope_store", cases[ci].name, (long long)bad, (long long)badc,
               norms < 0 ? "add_bias" : "rms_norm_heads", (long long)moved);
        pkc_ptr frees[] = {table, db, dg, xa, xb, ca.k, ca.v, cb.k, cb.v};
        for (size_t i = 0; i < sizeof frees / sizeof frees[0]; i++) CHECK(c, pkc_free(c, frees[i]));
        free(x); free(bias); free(g); free(ya); free(yb); free(ka); free(kb);
    }
    CHECK(c, pkc_free(c, dpos));
    CHECK(c, pkc_free(c, dslot));
}

static void test_attention(pkc_context *c) {
    // Gemma 3 270M's shape: its local layers' sliding window of 512 (and 300, shorter than a
    // split) on every case, and the decode case also without one (its global layers).
    struct { int n_head, n_kv_head, head_dim, window; const char *name; } models[] = {
        {9, 3, 64, 0, "smol"}, {14, 2, 64, 0, "qwen"}, {8, 2, 128, 0, "hd128"}, {4, 1, 256, 512, "gemma"}, {4, 1, 256, 300, "gemma"}};
    for (int mi = 0; mi < 5; mi++) {
        const int win = models[mi].window;
        kv_world w;
        const int slots = 64, max_pos = 1100;
        kv_world_init(c, &w, models[mi].n_head, models[mi].n_kv_head, models[mi].head_dim, slots, max_pos);
        int32_t len[64];
        for (int s = 0; s < slots; s++) len[s] = 1 + (int32_t)(rng_u64() % 1024);
        len[0] = 1; len[1] = 1024; len[2] = 129; len[3] = 1099;
        len[5] = 400; len[6] = 90; len[7] = 50; // a step's prompts below
        kv_fill(c, &w, len);
        if (mi == 0) test_store(c, &w, len);
        char name[96];
        // batched decode: every slot, one query at its full length (ragged)
        int32_t sl[64], kl[64];
        for (int s = 0; s < slots; s++) { sl[s] = (s * 37) % slots; kl[s] = len[sl[s]]; }
        snprintf(name, sizeof name, "%s decode, 64 seqs ragged", models[mi].name);
        attention_case(c, &w, name, 64, sl, kl, win);
        if (win == 512) attention_case(c, &w, name, 64, sl, kl, 0);
        // chunked prefill: 37 rows of slot 3, causal, the chunk starting at 700
        int32_t psl[37], pkl[37];
        for (int i = 0; i < 37; i++) { psl[i] = 3; pkl[i] = 700 + i + 1; }
        snprintf(name, sizeof name, "%s prefill chunk 37 of one slot", models[mi].name);
        attention_case(c, &w, name, 37, psl, pkl, win);
        attention_case_from(c, &w, name, 37, psl, pkl, win, 0);
        // few rows, long contexts: the split path, with an empty row
        int32_t fsl[3] = {1, 3, 0}, fkl[3] = {1024, 1099, 0};
        snprintf(name, sizeof name, "%s 3 rows split (one kv_len 0)", models[mi].name);
        attention_case(c, &w, name, 3, fsl, fkl, win);
        attention_case_from(c, &w, name, 3, fsl, fkl, win, 0);
        // mixed: prefill rows and decode rows in one call
        int32_t msl[20], mkl[20];
        for (int i = 0; i < 20; i++) { msl[i] = i < 12 ? 2 : 4 + i; mkl[i] = i < 12 ? 100 + i : len[4 + i]; }
        snprintf(name, sizeof name, "%s mixed prefill+decode", models[mi].name);
        attention_case(c, &w, name, 20, msl, mkl, win);
        attention_case_from(c, &w, name, 20, msl, mkl, win, 0);
        // A scheduler's step: decode rows, then prompt chunks: a long one of slot 5 (positions
        // 200 to 299), a first one of slot 6 (0 to 69) and 5 rows of slot 7; the prompts' rows on
        // the tensor cores, their tiles straddling the chunks' ends.
        int32_t ssl[183], skl[183];
        for (int i = 0; i < 183; i++) {
            ssl[i] = i < 8 ? 8 + 5 * i : i < 108 ? 5 : i < 178 ? 6 : 7;
            skl[i] = i < 8 ? len[ssl[i]] : i < 108 ? 200 + (i - 8) + 1 : i < 178 ? (i - 108) + 1 : len[7] - (182 - i);
        }
        snprintf(name, sizeof name, "%s step: 8 decode rows, 3 chunks", models[mi].name);
        attention_case_from(c, &w, name, 183, ssl, skl, win, 8);
        if (mi == 0) attention_case_from(c, &w, name, 183, ssl, skl, 100, 8); // a window on the tensor cores
        if (mi == 0) {
            // many rows of short contexts: one launch, no split (the rows written by attention itself)
            for (int s = 0; s < slots; s++) { sl[s] = s; kl[s] = 1 + (int32_t)(rng_u64() % (len[s] < 200 ? len[s] : 200)); }
            snprintf(name, sizeof name, "%s decode, 64 seqs short", models[mi].name);
            attention_case(c, &w, name, 64, sl, kl, 0);
        }
        kv_world_free(c, &w);
    }
    // The query heads a kv head that no model above has, each its own kernel (pkc_attention_gG):
    // 2 (Gemma 2 2B), 5 (Qwen2.5-14B), 6 (Qwen2.5-1.5B), 8 (Qwen2.5-3B). Batched decode and the
    // split rows (prompts go the same way through the same kernel). Four kv heads: 64 rows of
    // 2 x 4 query heads are more blocks than 2 per SM on 132 SMs, where a block takes a kv head's
    // group (fewer take a query head each, pkc_attention_g1).
    static const int groups[] = {2, 5, 6, 8};
    for (int gi = 0; gi < 4; gi++) {
        kv_world w;
        const int slots = 64;
        kv_world_init(c, &w, 4 * groups[gi], 4, 64, slots, 1100);
        int32_t len[64], sl[64], kl[64];
        for (int s = 0; s < slots; s++) len[s] = 1 + (int32_t)(rng_u64() % 1099);
        len[1] = 1099;
        kv_fill(c, &w, len);
        for (int s = 0; s < slots; s++) { sl[s] = (s * 37) % slots; kl[s] = len[sl[s]]; }
        char name[96];
        snprintf(name, sizeof name, "g%d decode, 64 seqs ragged", groups[gi]);
        attention_case(c, &w, name, 64, sl, kl, 0);
        int32_t fsl[3] = {1, 3, 0}, fkl[3] = {1099, len[3], 0};
        snprintf(name, sizeof name, "g%d 3 rows split (one kv_len 0)", groups[gi]);
        attention_case(c, &w, name, 3, fsl, fkl, 0);
        kv_world_free(c, &w);
    }
}

// copy_kv on a padded slotted cache (slots of pos positions + 8 halves, layers + 16 halves) of
// random keys and values: the copies against the same copies made on the host, every half
// compared. Returns the halves that differ; *cache gets the device cache (freed by the caller).
static int64_t copy_kv_case(pkc_context *c, int slots, int pos, int layers, int kvd, const pkc_kv_copy *copies, int n,
                            pkc_kv *cache, uint16_t **host_k, uint16_t **host_v) {
    const int64_t ss = (int64_t)pos * kvd + 8, ls = slots * ss + 16, halves = layers * ls;
    pkc_kv kv = {.k = dev_alloc(c, (size_t)halves * 2), .v = dev_alloc(c, (size_t)halves * 2), .slot_stride = ss, .kv_dim = kvd};
    uint16_t *k = malloc((size_t)halves * 2), *v = malloc((size_t)halves * 2), *got = malloc((size_t)halves * 2);
    for (int64_t i = 0; i < halves; i++) { k[i] = (uint16_t)rng_u64(); v[i] = (uint16_t)rng_u64(); }
    CHECK(c, pkc_upload(c, kv.k, k, (size_t)halves * 2));
    CHECK(c, pkc_upload(c, kv.v, v, (size_t)halves * 2));
    CHECK(c, pkc_copy_kv(c, &kv, layers, ls, copies, n));
    for (int i = 0; i < n; i++)
        for (int l = 0; l < layers; l++) {
            const size_t bytes = (size_t)(copies[i].count * kvd) * 2;
            memmove(k + l * ls + copies[i].dst * ss, k + l * ls + copies[i].src * ss, bytes);
            memmove(v + l * ls + copies[i].dst * ss, v + l * ls + copies[i].src * ss, bytes);
        }
    int64_t bad = 0;
    CHECK(c, pkc_download(c, got, kv.k, (size_t)halves * 2));
    for (int64_t i = 0; i < halves; i++) bad += got[i] != k[i];
    CHECK(c, pkc_download(c, got, kv.v, (size_t)halves * 2));
    for (int64_t i = 0; i < halves; i++) bad += got[i] != v[i];
    free(got);
    *cache = kv;
    *host_k = k;
    *host_v = v;
    return bad;
}

// copy_kv: 22 copies (two launches) of 0 to 7 positions, one within a slot, in 3 layers; one copy
// of 2,100 positions (more than the 64 blocks of 256 threads cover in one pass); then copies it
// must refuse (a chain, one destination twice, a destination another reads, past a slot, a layer
// stride not of whole 16 bytes), with nothing written.
static void test_copy_kv(pkc_context *c) {
    enum { N = 22 };
    pkc_kv_copy copies[N];
    for (int i = 0; i < N - 1; i++) copies[i] = (pkc_kv_copy){i, 24 + i, i % 8};
    copies[N - 1] = (pkc_kv_copy){46, 46, 3};
    pkc_kv kv;
    uint16_t *k, *v;
    int64_t bad = copy_kv_case(c, 48, 7, 3, 72, copies, N, &kv, &k, &v);
    report(bad == 0, "copy_kv: %d copies of 0-7 positions in 3 layers: %lld halves differ from the host's copies (tol exact)", N,
           (long long)bad);
    const int64_t ss = kv.slot_stride, ls = 48 * ss + 16, halves = 3 * ls;
    const pkc_kv_copy refused[][2] = {{{1, 2, 3}, {2, 3, 3}}, {{1, 2, 3}, {3, 2, 3}}, {{2, 3, 3}, {1, 2, 3}}};
    const pkc_kv_copy over = {1, 2, 8};
    int st[5];
    for (int i = 0; i < 3; i++) st[i] = pkc_copy_kv(c, &kv, 3, ls, refused[i], 2);
    st[3] = pkc_copy_kv(c, &kv, 3, ls, &over, 1);
    st[4] = pkc_copy_kv(c, &kv, 3, ls + 4, copies, 2);
    uint16_t *got = malloc((size_t)halves * 2);
    CHECK(c, pkc_download(c, got, kv.k, (size_t)halves * 2));
    int same = memcmp(got, k, (size_t)halves * 2) == 0;
    CHECK(c, pkc_download(c, got, kv.v, (size_t)halves * 2));
    same &= memcmp(got, v, (size_t)halves * 2) == 0;
    int all = 1;
    for (int i = 0; i < 5; i++) all &= st[i] == PKC_ERR_INVALID;
    report(all && same, "copy_kv refuses a chain (%s), one destination twice (%s), a destination another reads (%s), a copy past a slot (%s), "
           "a layer stride of 4 halves more (%s); cache %s", pkc_status_name(st[0]), pkc_status_name(st[1]), pkc_status_name(st[2]),
           pkc_status_name(st[3]), pkc_status_name(st[4]), same ? "unchanged" : "CHANGED");
    CHECK(c, pkc_free(c, kv.k)); CHECK(c, pkc_free(c, kv.v));
    free(k); free(v); free(got);
    const pkc_kv_copy whole = {0, 2, 2100};
    bad = copy_kv_case(c, 3, 2100, 2, 64, &whole, 1, &kv, &k, &v);
    report(bad == 0, "copy_kv: 2100 positions of 64 halves in 2 layers (the blocks' stride loop): %lld halves differ (tol exact)",
           (long long)bad);
    CHECK(c, pkc_free(c, kv.k)); CHECK(c, pkc_free(c, kv.v));
    free(k); free(v);
}

// A paged cache (pkc_kv.pages) against a slotted one holding the same rows, its pages scattered
// over the pool in random order: pkc_store_kv and pkc_qkv_rope_store write the same halves to
// every position, and attention reads the same outputs from both, bit for bit (decode rows,
// a prefill chunk, the split path, a sliding window; the chunk and the window on tensor cores).
static void test_paged_kv(pkc_context *c) {
    struct { int qh, kvh, hd; const char *name; } cases[] = {{9, 3, 64, "smol"}, {14, 2, 64, "qwen"}, {4, 1, 256, "gemma"}};
    enum { SLOTS = 6, MAXPOS = 600, SHIFT = 4 };
    const int page_len = 1 << SHIFT, max_pages = (MAXPOS + page_len - 1) / page_len, pool = SLOTS * max_pages + 5;
    int32_t *table = malloc((size_t)pool * 4);
    for (int i = 0; i < pool; i++) table[i] = i;
    for (int i = pool - 1; i > 0; i--) {
        const int j = (int)(rng_u64() % (uint64_t)(i + 1)), t = table[i];
        table[i] = table[j];
        table[j] = t;
    }
    pkc_ptr dtable = dev_upload(c, table, (size_t)(SLOTS * max_pages) * 4);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int qh = cases[ci].qh, kvh = cases[ci].kvh, hd = cases[ci].hd;
        const int64_t kvd = (int64_t)kvh * hd, sh = SLOTS * MAXPOS * kvd, ph = (int64_t)pool * page_len * kvd;
        pkc_kv a = {dev_alloc(c, (size_t)sh * 2), dev_alloc(c, (size_t)sh * 2), MAXPOS * kvd, kvd, 0, 0, 0};
        pkc_kv b = {dev_alloc(c, (size_t)ph * 2), dev_alloc(c, (size_t)ph * 2), 0, kvd, dtable, max_pages, SHIFT};
        CHECK(c, pkc_memset(c, a.k, 0, (size_t)sh * 2)); CHECK(c, pkc_memset(c, a.v, 0, (size_t)sh * 2));
        CHECK(c, pkc_memset(c, b.k, 0, (size_t)ph * 2)); CHECK(c, pkc_memset(c, b.v, 0, (size_t)ph * 2));
        int32_t len[SLOTS] = {600, 1, 17, 300, 598, 64};
        int64_t total = 0;
        for (int s = 0; s < SLOTS; s++) total += len[s];
        int32_t *sl = malloc((size_t)total * 4), *ps = malloc((size_t)total * 4);
        int64_t r = 0;
        for (int p = 0; p < MAXPOS; p++)
            for (int s = 0; s < SLOTS; s++)
                if (p < len[s]) { sl[r] = s; ps[r] = p; r++; }
        float *k = host_floats(total * kvd), *v = host_floats(total * kvd);
        fill_normal(k, total * kvd, 1.0f);
        fill_normal(v, total * kvd, 1.0f);
        pkc_ptr dk = dev_upload(c, k, (size_t)(total * kvd) * 4), dv = dev_upload(c, v, (size_t)(total * kvd) * 4);
        pkc_ptr dsl = dev_upload(c, sl, (size_t)total * 4), dps = dev_upload(c, ps, (size_t)total * 4);
        CHECK(c, pkc_store_kv(c, &a, dk, kvd, dv, kvd, total, dsl, dps));
        CHECK(c, pkc_store_kv(c, &b, dk, kvd, dv, kvd, total, dsl, dps));
        // q | k | v rows at the next position of five slots (and two of slot 3), through RoPE
        enum { NQ = 6 };
        const int64_t width = (int64_t)(qh + 2 * kvh) * hd;
        int32_t qsl[NQ] = {1, 2, 3, 3, 4, 5}, qps[NQ] = {1, 17, 300, 301, 598, 64};
        float *x = host_floats(NQ * width);
        fill_normal(x, NQ * width, 1.0f);
        pkc_ptr dqsl = dev_upload(c, qsl, sizeof qsl), dqps = dev_upload(c, qps, sizeof qps), rope = dev_alloc(c, (size_t)(NQ * hd) * 4);
        pkc_ptr xa = dev_upload(c, x, (size_t)(NQ * width) * 4), xb = dev_upload(c, x, (size_t)(NQ * width) * 4);
        CHECK(c, pkc_rope_table(c, dqps, NQ, hd, base_freqs(10000.0f), rope));
        CHECK(c, pkc_qkv_rope_store(c, &a, xa, NQ, width, qh, kvh, hd, hd, rope, 1, 0, dqsl, dqps));
        CHECK(c, pkc_qkv_rope_store(c, &b, xb, NQ, width, qh, kvh, hd, hd, rope, 1, 0, dqsl, dqps));
        for (int i = 0; i < NQ; i++) len[qsl[i]] = qps[i] + 1 > len[qsl[i]] ? qps[i] + 1 : len[qsl[i]];
        uint16_t *ha = malloc((size_t)sh * 2), *hb = malloc((size_t)ph * 2);
        int64_t bad = 0, count = 0;
        for (int half = 0; half < 2; half++) {
            CHECK(c, pkc_download(c, ha, half ? a.v : a.k, (size_t)sh * 2));
            CHECK(c, pkc_download(c, hb, half ? b.v : b.k, (size_t)ph * 2));
            for (int s = 0; s < SLOTS; s++)
                for (int64_t p = 0; p < len[s]; p++) {
                    const int64_t pa = ((int64_t)s * MAXPOS + p) * kvd;
                    const int64_t pb = ((int64_t)table[s * max_pages + (p >> SHIFT)] * page_len + (p & (page_len - 1))) * kvd;
                    for (int64_t i = 0; i < kvd; i++) bad += ha[pa + i] != hb[pb + i];
                    count += kvd;
                }
        }
        report(bad == 0, "paged kv %s: store_kv and qkv_rope_store over %lld pages of %d rows in random order: %lld of %lld halves "
               "differ from the slotted cache's (tol exact)", cases[ci].name, (long long)pool, page_len, (long long)bad, (long long)count);
        // attention: decode rows of every slot, a prefill chunk of slot 0, three long rows (split), windowed
        struct { int n; int32_t slot[40], kvlen[40]; int window, mma; const char *name; } att[6];
        memset(att, 0, sizeof att);
        att[0].n = SLOTS; att[0].name = "decode";
        for (int s = 0; s < SLOTS; s++) { att[0].slot[s] = s; att[0].kvlen[s] = len[s]; }
        att[1].n = 40; att[1].name = "prefill chunk of 40";
        for (int i = 0; i < 40; i++) { att[1].slot[i] = 0; att[1].kvlen[i] = 561 + i; }
        att[2].n = 3; att[2].name = "3 long rows (split)";
        att[2].slot[0] = 0; att[2].slot[1] = 4; att[2].slot[2] = 3;
        att[2].kvlen[0] = 600; att[2].kvlen[1] = 599; att[2].kvlen[2] = 302;
        att[3] = att[0]; att[3].window = 100; att[3].name = "decode, window 100";
        att[4] = att[1]; att[4].mma = 1; att[4].name = "prefill chunk of 40, tensor cores";
        att[5] = att[3]; att[5].mma = 1; att[5].name = "decode, window 100, tensor cores";
        const int64_t qd = (int64_t)qh * hd;
        for (int ai = 0; ai < 6; ai++) {
            const int n = att[ai].n;
            if (att[ai].mma && !pkc_attention_uses_mma(c, hd)) continue;
            const int64_t from = att[ai].mma ? 0 : n;
            int32_t max_kv = 0;
            for (int t = 0; t < n; t++) max_kv = att[ai].kvlen[t] > max_kv ? att[ai].kvlen[t] : max_kv;
            float *q = host_floats(n * qd);
            fill_normal(q, n * qd, 1.0f);
            pkc_ptr dq = dev_upload(c, q, (size_t)(n * qd) * 4), das = dev_upload(c, att[ai].slot, (size_t)n * 4);
            pkc_ptr dal = dev_upload(c, att[ai].kvlen, (size_t)n * 4);
            pkc_ptr oa = dev_alloc(c, (size_t)(n * qd) * 4), ob = dev_alloc(c, (size_t)(n * qd) * 4);
            const float scale = 1.0f / sqrtf((float)hd);
            CHECK(c, pkc_attention_prompt(c, &a, dq, qd, n, qh, kvh, hd, das, dal, max_kv, att[ai].window, scale, oa, qd, 0, 0, from));
            CHECK(c, pkc_attention_prompt(c, &b, dq, qd, n, qh, kvh, hd, das, dal, max_kv, att[ai].window, scale, ob, qd, 0, 0, from));
            float *ya = download_floats(c, oa, n * qd), *yb = download_floats(c, ob, n * qd);
            int64_t differ = 0, zero = 0;
            for (int64_t i = 0; i < n * qd; i++) { differ += !same_bits(ya[i], yb[i]); zero += ya[i] == 0.0f; }
            report(differ == 0 && zero < n * qd, "paged kv %s attention, %s: %lld of %lld outputs differ from the slotted cache's (tol exact)",
                   cases[ci].name, att[ai].name, (long long)differ, (long long)(n * qd));
            pkc_ptr frees[] = {dq, das, dal, oa, ob};
            for (size_t i = 0; i < sizeof frees / sizeof frees[0]; i++) CHECK(c, pkc_free(c, frees[i]));
            free(q); free(ya); free(yb);
        }
        pkc_ptr frees[] = {a.k, a.v, b.k, b.v, dk, dv, dsl, dps, dqsl, dqps, rope, xa, xb};
        for (size_t i = 0; i < sizeof frees / sizeof frees[0]; i++) CHECK(c, pkc_free(c, frees[i]));
        free(sl); free(ps); free(k); free(v); free(x); free(ha); free(hb);
    }
    // A paged cache is refused where a slotted one is needed, and a bad page table at all.
    pkc_kv bad_table = {dev_alloc(c, 4096), dev_alloc(c, 4096), 0, 64, dtable, 0, SHIFT};
    pkc_kv paged = bad_table;
    paged.max_pages = max_pages;
    const pkc_kv_copy one = {0, 1, 4};
    const int st1 = pkc_copy_kv(c, &paged, 1, 0, &one, 1);
    const int st2 = pkc_store_kv(c, &bad_table, 0, 64, 0, 64, 0, 0, 0);
    report(st1 == PKC_ERR_INVALID && st2 == PKC_ERR_INVALID, "paged kv: copy_kv of a paged cache %s, a table of 0 pages per slot %s",
           pkc_status_name(st1), pkc_status_name(st2));
    CHECK(c, pkc_free(c, bad_table.k)); CHECK(c, pkc_free(c, bad_table.v)); CHECK(c, pkc_free(c, dtable));
    free(table);
}

// Attention's split scratch is sized for its head layout at first use, not grown by a later
// step, which would move it under the graphs captured before. A fresh context, Gemma 3 270M's
// heads: one row of 600 positions splits into the first allocation (2 MiB, before the fix enough
// for it alone); then 256 rows of 600 positions (2.1 MB of splits) are captured, where nothing
// may allocate, and the replay equals the direct call.
static void test_attention_scratch(const char *dir) {
    pkc_context *c = NULL;
    char err[2048] = "";
    if (pkc_open(0, dir, &c, err, sizeof err) != PKC_OK) { report(0, "attention scratch: open failed: %s", err); return; }
    kv_world w;
    kv_world_init(c, &w, 4, 1, 256, 2, 700);
    const int32_t len[2] = {600, 600};
    kv_fill(c, &w, len);
    enum { N = 256 };
    const int64_t qd = 4 * 256;
    int32_t sl[N], kl[N];
    for (int i = 0; i < N; i++) { sl[i] = i % 2; kl[i] = 600; }
    float *q = host_floats(N * qd);
    fill_normal(q, N * qd, 1.0f);
    pkc_ptr dq = dev_upload(c, q, (size_t)(N * qd) * 4), dsl = dev_upload(c, sl, sizeof sl), dlen = dev_upload(c, kl, sizeof kl);
    pkc_ptr direct = dev_alloc(c, (size_t)(N * qd) * 4), replayed = dev_alloc(c, (size_t)(N * qd) * 4);
    CHECK(c, pkc_attention(c, &w.kv, dq, qd, 1, 4, 1, 256, dsl, dlen, 600, 0.0625f, direct, qd));
    pkc_graph *g = NULL;
    CHECK(c, pkc_graph_begin(c));
    const int st = pkc_attention(c, &w.kv, dq, qd, N, 4, 1, 256, dsl, dlen, 600, 0.0625f, replayed, qd);
    snprintf(err, sizeof err, "%s", st ? pkc_error(c) : "");
    CHECK(c, pkc_graph_end(c, &g));
    int64_t bad = -1;
    if (st == PKC_OK) {
        CHECK(c, pkc_graph_launch(c, g));
        CHECK(c, pkc_attention(c, &w.kv, dq, qd, N, 4, 1, 256, dsl, dlen, 600, 0.0625f, direct, qd));
        float *a = download_floats(c, direct, N * qd), *b = download_floats(c, replayed, N * qd);
        bad = 0;
        for (int64_t i = 0; i < N * qd; i++) bad += !same_bits(a[i], b[i]);
        free(a); free(b);
    }
    report(st == PKC_OK && bad == 0, "attention scratch: %d rows of 600 positions captured after one row: %s; %lld outputs of the replay "
           "differ from the direct call (tol exact)", N, st ? err : "captured", (long long)bad);
    pkc_graph_destroy(c, g);
    pkc_free(c, dq); pkc_free(c, dsl); pkc_free(c, dlen); pkc_free(c, direct); pkc_free(c, replayed);
    kv_world_free(c, &w);
    free(q);
    pkc_close(c);
}

// ---- graph capture and the kernel cache ----------------------------------------------------------

static void test_graph(pkc_context *c) {
    const int64_t m = 49152, k = 576, n = 4;
    const size_t rb = pkc_row_bytes(PK_Q8_0, k);
    uint8_t *w = malloc(rb * (size_t)m);
    random_weights(PK_Q8_0, w, m, k);
    pkc_ptr dw = dev_upload(c, w, rb * (size_t)m), dx = dev_alloc(c, (size_t)(n * k) * 4);
    pkc_ptr dy = dev_alloc(c, (size_t)(n * m) * 4), di = dev_alloc(c, (size_t)n * 4);
    float *x = host_floats(n * k);
    fill_normal(x, n * k, 1.0f);
    CHECK(c, pkc_upload(c, dx, x, (size_t)(n * k) * 4));
    CHECK(c, pkc_matmul(c, PK_Q8_0, dw, m, k, dx, k, n, dy, m));
    CHECK(c, pkc_argmax(c, dy, m, n, m, di));
    int32_t direct[4], replay[4];
    CHECK(c, pkc_download(c, direct, di, sizeof direct));
    CHECK(c, pkc_memset(c, di, 0, sizeof replay));
    pkc_graph *g = NULL;
    CHECK(c, pkc_graph_begin(c));
    CHECK(c, pkc_matmul(c, PK_Q8_0, dw, m, k, dx, k, n, dy, m));
    CHECK(c, pkc_argmax(c, dy, m, n, m, di));
    CHECK(c, pkc_graph_end(c, &g));
    CHECK(c, pkc_graph_launch(c, g));
    CHECK(c, pkc_download(c, replay, di, sizeof replay));
    int ok = memcmp(direct, replay, sizeof direct) == 0;
    // new input, same graph
    fill_normal(x, n * k, 1.0f);
    CHECK(c, pkc_upload(c, dx, x, (size_t)(n * k) * 4));
    CHECK(c, pkc_graph_launch(c, g));
    CHECK(c, pkc_download(c, replay, di, sizeof replay));
    CHECK(c, pkc_matmul(c, PK_Q8_0, dw, m, k, dx, k, n, dy, m));
    CHECK(c, pkc_argmax(c, dy, m, n, m, di));
    CHECK(c, pkc_download(c, direct, di, sizeof direct));
    ok = ok && memcmp(direct, replay, sizeof direct) == 0;
    report(ok, "graph capture of gemv + argmax: replays equal direct calls, also after new input (tol exact)");
    pkc_graph_destroy(c, g);
    pkc_free(c, dw); pkc_free(c, dx); pkc_free(c, dy); pkc_free(c, di);
    free(w); free(x);
}

// ---- dependent launch ----------------------------------------------------------------------------

// Launches made to overlap the kernel before them (pkc_set_dependent_launch) against the same
// launches made one after another: a chain of additions (exact sums), and layers of a decode
// step's shape (RMSNorm with int8 rows, then a GEMV adding into the residual it normed), direct
// and graph-replayed: bit for bit. On a GPU a kernel that read before waiting would see the
// previous one's output half written; the emulator checks that each thread waits first.
static void test_dependent_launch(pkc_context *c) {
    pkc_device_info info;
    CHECK(c, pkc_device_info_get(c, &info));
    if (!info.dependent_launch) {
        // Off is right only where the device, the driver or $PLINTH_CUDA_PDL rule it out, not
        // after a failed self-test on a device that has it.
        const int expected = switched_off("PLINTH_CUDA_PDL") || info.cc_major < 9 || info.driver_version < 12030;
        const int refused = pkc_set_dependent_launch(c, 1) == 0 && pkc_set_dependent_launch(c, 0) == 0;
        report(expected && refused, "dependent launch unavailable here (%s): %s; turning it on is refused",
               info.dependent_launch_off, expected ? "as expected" : "UNEXPECTED on this device and driver");
        return;
    }
    // The chain: y += x, 32 times, each launch reading the sum the one before wrote.
    const int64_t count = quick ? (int64_t)1 << 16 : (int64_t)1 << 22;
    float *x = host_floats(count), *y = host_floats(count);
    for (int64_t i = 0; i < count; i++) x[i] = (float)(i % 29);
    pkc_ptr dx = dev_upload(c, x, (size_t)count * 4), dy = dev_alloc(c, (size_t)count * 4);
    CHECK(c, pkc_memset(c, dy, 0, (size_t)count * 4));
    unsigned long long before = info.dependent_launches;
    for (int i = 0; i < 32; i++) CHECK(c, pkc_add(c, dy, dx, count));
    CHECK(c, pkc_download(c, y, dy, (size_t)count * 4));
    CHECK(c, pkc_device_info_get(c, &info));
    int64_t bad = 0;
    for (int64_t i = 0; i < count; i++) bad += y[i] != x[i] * 32;
    report(bad == 0 && info.dependent_launches == before + 31,
           "dependent launch: 32 chained adds of %lld floats, %llu launches overlapping the one before (want 31): %lld wrong sums "
           "(tol exact)", (long long)count, info.dependent_launches - before, (long long)bad);

    // Layers: h, q = rms_norm_q8(r); r += W_l h (int8 rows), for each layer.
    const int layers = quick ? 4 : 12;
    const int64_t k = 896;
    const size_t rb = pkc_row_bytes(PK_Q8_0, k), ldq = pkc_q8_row_bytes(k);
    uint8_t *w = malloc(rb * (size_t)(k * layers));
    random_weights(PK_Q8_0, w, k * layers, k);
    float *r0 = host_floats(k), *norm = host_floats(k), *out[3];
    fill_normal(r0, k, 1.0f);
    for (int64_t i = 0; i < k; i++) norm[i] = 1.0f + 0.01f * (float)(i % 7);
    pkc_ptr dw = dev_upload(c, w, rb * (size_t)(k * layers)), dn = dev_upload(c, norm, (size_t)k * 4);
    pkc_ptr dr = dev_alloc(c, (size_t)k * 4), dh = dev_alloc(c, (size_t)k * 4), dq = dev_alloc(c, ldq);
    pkc_graph *g = NULL;
    unsigned long long overlapped[3];
    for (int pass = 0; pass < 3; pass++) { // one after another; overlapped; overlapped in a graph
        out[pass] = host_floats(k);
        pkc_set_dependent_launch(c, pass > 0);
        CHECK(c, pkc_device_info_get(c, &info));
        before = info.dependent_launches;
        if (pass == 2) CHECK(c, pkc_graph_begin(c));
        else CHECK(c, pkc_upload(c, dr, r0, (size_t)k * 4));
        for (int l = 0; l < layers; l++) {
            CHECK(c, pkc_rms_norm_q8(c, dr, k, dn, dh, k, 1, k, 1e-6f, dq, (int64_t)ldq));
            CHECK(c, pkc_matmul_q8(c, PK_Q8_0, dw + (pkc_ptr)(rb * (size_t)(k * l)), k, k, dh, k, dq, (int64_t)ldq, 1, dr, k, 1));
        }
        if (pass == 2) {
            CHECK(c, pkc_graph_end(c, &g));
            for (int rep = 0; rep < 2; rep++) { // twice, from the same start
                CHECK(c, pkc_upload(c, dr, r0, (size_t)k * 4));
                CHECK(c, pkc_graph_launch(c, g));
            }
        }
        CHECK(c, pkc_download(c, out[pass], dr, (size_t)k * 4));
        CHECK(c, pkc_device_info_get(c, &info));
        overlapped[pass] = info.dependent_launches - before;
    }
    int same = 1;
    for (int64_t i = 0; i < k; i++) same &= same_bits(out[0][i], out[1][i]) && same_bits(out[0][i], out[2][i]);
    report(same && overlapped[0] == 0 && overlapped[1] >= (unsigned long long)(2 * layers - 1) &&
               overlapped[2] >= (unsigned long long)(2 * layers - 1),
           "dependent launch: %d layers of rms_norm_q8 + Q8_0 gemv into the residual, overlapped (%llu launches) and "
           "graph-replayed twice (%llu) equal one after another (%llu) (tol exact)",
           layers, overlapped[1], overlapped[2], overlapped[0]);
    pkc_set_dependent_launch(c, 1);
    pkc_graph_destroy(c, g);
    pkc_free(c, dx); pkc_free(c, dy); pkc_free(c, dw); pkc_free(c, dn); pkc_free(c, dr); pkc_free(c, dh); pkc_free(c, dq);
    free(x); free(y); free(w); free(r0); free(norm);
    for (int pass = 0; pass < 3; pass++) free(out[pass]);
}

// ---- LoRA ----------------------------------------------------------------------------------------

// pkc_lora_apply against pk_lora_apply on the same int8 pairs: 11 ops (two launches) of ranks 1
// to 64 over rows of a 13-row batch, outputs from 1 to 5 column blocks, inputs with a tail (k not
// a multiple of 16); direct and graph-replayed. pkc_lora_embed against LoRAPair.addDelta's loop.
// Both exact: the same operations in the same order.
static void test_lora(pkc_context *c) {
    const int64_t n = 13;
    const int64_t ks[] = {576, 100, 896};
    const int64_t ranks[] = {1, 2, 8, 16, 33, 64, 2, 4, 1, 17, 8};
    const int64_t ms[] = {576, 192, 1300, 4864, 64, 896, 128, 3000, 576, 192, 1025};
    enum { NOPS = 11 };
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int64_t k = ks[ki];
        float *x = host_floats(n * (k + 3));
        fill_normal(x, n * (k + 3), 1.0f);
        pkc_ptr dx = dev_upload(c, x, (size_t)(n * (k + 3)) * 4);
        pk_lora_op cpu[NOPS];
        pkc_lora_op gpu[NOPS];
        float *ys[NOPS];
        float *want[NOPS];
        pkc_ptr dys[NOPS], dev_mem[NOPS][5];
        for (int o = 0; o < NOPS; o++) {
            const int64_t r = ranks[o], m = ms[o], ldy = m + 5;
            float *a = host_floats(r * k), *bt = host_floats(r * m);
            fill_normal(a, r * k, 0.05f);
            fill_normal(bt, r * m, 0.05f);
            int8_t *qa = malloc((size_t)(r * k)), *qb = malloc((size_t)(r * m));
            float *sa = host_floats(r), *sb = host_floats(r);
            pk_lora_quantize_rows(a, r, k, qa, sa);
            pk_lora_quantize_rows(bt, r, m, qb, sb);
            // Each op takes a different subset of the rows, in a scrambled order.
            int32_t *rows = malloc((size_t)n * 4);
            int64_t cnt = 0;
            for (int64_t t = 0; t < n; t++)
                if ((t + o) % 3 != 0 || o == 0) rows[cnt++] = (int32_t)((t * 5 + o) % n);
            ys[o] = host_floats(n * ldy);
            fill_normal(ys[o], n * ldy, 1.0f);
            want[o] = host_floats(n * ldy);
            memcpy(want[o], ys[o], (size_t)(n * ldy) * 4);
            dys[o] = dev_upload(c, ys[o], (size_t)(n * ldy) * 4);
            dev_mem[o][0] = dev_upload(c, qa, (size_t)(r * k));
            dev_mem[o][1] = dev_upload(c, qb, (size_t)(r * m));
            dev_mem[o][2] = dev_upload(c, sa, (size_t)r * 4);
            dev_mem[o][3] = dev_upload(c, sb, (size_t)r * 4);
            dev_mem[o][4] = dev_upload(c, rows, (size_t)cnt * 4);
            const float scale = 0.5f + (float)o;
            cpu[o] = (pk_lora_op){.a = qa, .bt = qb, .a_scale = sa, .bt_scale = sb, .rank = r, .m = m, .scale = scale,
                                  .y = want[o], .ldy = ldy, .rows = rows, .n = cnt};
            gpu[o] = (pkc_lora_op){.a = dev_mem[o][0], .bt = dev_mem[o][1], .a_scale = dev_mem[o][2], .bt_scale = dev_mem[o][3],
                                   .rank = r, .m = m, .scale = scale, .y = dys[o], .ldy = ldy, .rows = dev_mem[o][4], .n = cnt};
            free(a); free(bt);
        }
        // The device reads rows of stride k + 3 (as a step's inputs are strided); the CPU packed rows.
        float *packed = host_floats(n * k);
        for (int64_t t = 0; t < n; t++) memcpy(packed + t * k, x + t * (k + 3), (size_t)k * 4);
        if (pk_lora_apply(pool, cpu, NOPS, packed, k) != 0) { fprintf(stderr, "pk_lora_apply failed\n"); exit(2); }
        free(packed);
        CHECK(c, pkc_lora_apply(c, gpu, NOPS, dx, k + 3, k));
        int64_t bad = 0, total = 0;
        for (int o = 0; o < NOPS; o++) {
            const int64_t ldy = ms[o] + 5;
            float *got = download_floats(c, dys[o], n * ldy);
            for (int64_t i = 0; i < n * ldy; i++) bad += !same_bits(got[i], want[o][i]);
            total += n * ldy;
            free(got);
        }
        report(bad == 0, "lora k=%lld, %d ops of ranks 1-64 over a 13-row batch: %lld of %lld values differ from pk_lora_apply (tol bit-exact)",
               (long long)k, NOPS, (long long)bad, (long long)total);
        if (ki == 0) {
            // The same ops captured and replayed twice on fresh outputs.
            for (int o = 0; o < NOPS; o++) CHECK(c, pkc_upload(c, dys[o], ys[o], (size_t)(n * (ms[o] + 5)) * 4));
            pkc_graph *g = NULL;
            CHECK(c, pkc_graph_begin(c));
            CHECK(c, pkc_lora_apply(c, gpu, NOPS, dx, k + 3, k));
            CHECK(c, pkc_graph_end(c, &g));
            int64_t gbad = 0;
            for (int rep = 0; rep < 2; rep++) {
                for (int o = 0; o < NOPS; o++) CHECK(c, pkc_upload(c, dys[o], ys[o], (size_t)(n * (ms[o] + 5)) * 4));
                CHECK(c, pkc_graph_launch(c, g));
                for (int o = 0; o < NOPS; o++) {
                    const int64_t ldy = ms[o] + 5;
                    float *got = download_floats(c, dys[o], n * ldy);
                    for (int64_t i = 0; i < n * ldy; i++) gbad += !same_bits(got[i], want[o][i]);
                    free(got);
                }
            }
            pkc_graph_destroy(c, g);
            report(gbad == 0, "lora graph-replayed twice: %lld values differ from pk_lora_apply (tol bit-exact)", (long long)gbad);
            // Bad arguments are refused with a message, nothing launched.
            pkc_lora_op wide = gpu[0];
            wide.rank = PKC_LORA_MAX_RANK + 1;
            const int st = pkc_lora_apply(c, &wide, 1, dx, k + 3, k);
            report(st == PKC_ERR_INVALID && strstr(pkc_error(c), "rank") != NULL, "lora refuses rank %d: %s", PKC_LORA_MAX_RANK + 1,
                   pkc_error(c));
        }
        for (int o = 0; o < NOPS; o++) {
            free((void *)cpu[o].a); free((void *)cpu[o].bt); free((void *)cpu[o].a_scale); free((void *)cpu[o].bt_scale);
            free((void *)cpu[o].rows); free(ys[o]); free(want[o]);
            pkc_free(c, dys[o]);
            for (int j = 0; j < 5; j++) pkc_free(c, dev_mem[o][j]);
        }
        pkc_free(c, dx);
        free(x);
    }

    // The embedding's pair: rank 3, vocabulary 1000, rows 0, 2, 3 and 6 of 7.
    const int64_t rank = 3, vocab = 1000, e = 576, ldx = 580, nr = 7;
    float *a = host_floats(rank * e), *bt = host_floats(rank * vocab), *x = host_floats(nr * ldx);
    fill_normal(a, rank * e, 0.05f);
    fill_normal(bt, rank * vocab, 0.05f);
    fill_normal(x, nr * ldx, 1.0f);
    const int32_t ids[7] = {5, 999, 0, 417, 5, 3, 998}, rows[4] = {0, 2, 3, 6};
    const float scale = 1.75f;
    float *want = host_floats(nr * ldx);
    memcpy(want, x, (size_t)(nr * ldx) * 4);
    for (int i = 0; i < 4; i++) {
        float *out = want + rows[i] * ldx;
        for (int64_t r = 0; r < rank; r++) {
            const float s = scale * bt[r * vocab + ids[rows[i]]];
            for (int64_t j = 0; j < e; j++) {
                const float p = s * a[r * e + j];
                out[j] = out[j] + p;
            }
        }
    }
    pkc_ptr da = dev_upload(c, a, (size_t)(rank * e) * 4), db = dev_upload(c, bt, (size_t)(rank * vocab) * 4);
    pkc_ptr dxe = dev_upload(c, x, (size_t)(nr * ldx) * 4), dids = dev_upload(c, ids, sizeof ids), drows = dev_upload(c, rows, sizeof rows);
    CHECK(c, pkc_lora_embed(c, da, db, rank, vocab, scale, drows, 4, dids, dxe, ldx, e));
    float *got = download_floats(c, dxe, nr * ldx);
    int64_t bad = 0;
    for (int64_t i = 0; i < nr * ldx; i++) bad += !same_bits(got[i], want[i]);
    report(bad == 0, "lora_embed rank 3, 4 of 7 rows: %lld values differ from LoRAPair.addDelta's loop (tol bit-exact; other rows untouched)",
           (long long)bad);
    pkc_free(c, da); pkc_free(c, db); pkc_free(c, dxe); pkc_free(c, dids); pkc_free(c, drows);
    free(a); free(bt); free(x); free(want); free(got);
}

static void test_errors(pkc_context *c) {
    pkc_ptr p = dev_alloc(c, 4096);
    int st = pkc_matmul(c, 99, p, 4, 32, p, 32, 1, p, 4);
    const int unsupported = st == PKC_ERR_UNSUPPORTED && strstr(pkc_error(c), "99") != NULL;
    st = pkc_matmul(c, PK_Q4_K, p, 4, 100, p, 100, 1, p, 4);
    const int invalid = st == PKC_ERR_INVALID;
    st = pkc_alloc(c, (size_t)1 << 50, &p); // a petabyte
    const int oom = st == PKC_ERR_OUT_OF_MEMORY;
    report(unsupported && invalid && oom, "errors: unknown type -> unsupported (\"%s\"), bad k -> invalid, 1 PiB alloc -> out of memory",
           unsupported ? "…type 99…" : pkc_error(c));
    pkc_free(c, p);
}

// Opens a context on `dir` and prepares every format; 1 when both work, with the info after.
static int open_prepared(const char *dir, pkc_context **c, pkc_device_info *info, char *err, size_t err_size) {
    int st = pkc_open(0, dir, c, err, err_size);
    if (st == PKC_OK && (st = pkc_prepare(*c, all_types, NTYPES)) != PKC_OK) snprintf(err, err_size, "%s", pkc_error(*c));
    return st == PKC_OK && pkc_device_info_get(*c, info) == PKC_OK;
}

// The kernel cache's files in dir whose names start with prefix and end with suffix: how many
// (-1 on an error), each with "garbage" written at byte 100 where corrupt is set.
static int cache_files(const char *dir, const char *prefix, const char *suffix, int corrupt) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int count = 0;
    const size_t np = strlen(prefix), ns = strlen(suffix);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const size_t n = strlen(e->d_name);
        if (n < np + ns || strncmp(e->d_name, prefix, np) != 0 || strcmp(e->d_name + n - ns, suffix) != 0) continue;
        if (corrupt) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            const int fd = open(path, O_WRONLY);
            const int ok = fd >= 0 && pwrite(fd, "garbage", 7, 100) == 7;
            if (fd >= 0) close(fd);
            if (!ok) { count = -1; break; }
        }
        count++;
    }
    closedir(d);
    return count;
}

static void test_cache(const char *dir, int first_from_cache) {
    char err[2048] = "";
    pkc_context *c2 = NULL;
    pkc_device_info info;
    int ok = open_prepared(dir, &c2, &info, err, sizeof err) && info.kernels_from_cache == 1;
    report(ok && !first_from_cache, "kernel cache: first open compiled, second open and pkc_prepare read every module's cubin (%.2f s)%s",
           ok ? info.compile_seconds : -1.0, err);
    pkc_close(c2);
    // corrupt every cached file: the next open must compile again and work
    if (cache_files(dir, "", ".cubin", 1) <= 0) { report(0, "kernel cache: could not corrupt the cache files"); return; }
    ok = open_prepared(dir, &c2, &info, err, sizeof err) && info.kernels_from_cache == 0;
    report(ok, "kernel cache: corrupt entries are compiled again (%.2f s)%s", ok ? info.compile_seconds : -1.0, err);
    pkc_close(c2);
}

// A format's kernels are loaded at first use, but not inside a graph capture: that is a clear
// error, and pkc_prepare first makes the same capture work.
static void test_lazy_formats(void) {
    char dir[] = "/tmp/plinth-cuda-lazy-XXXXXX", err[2048] = "";
    if (!mkdtemp(dir)) { report(0, "lazy formats: no temporary directory"); return; }
    pkc_context *c = NULL;
    int st = pkc_open(0, dir, &c, err, sizeof err);
    if (st != PKC_OK) { report(0, "lazy formats: open failed: %s", err); return; }
    const int64_t m = 64, k = 256;
    const size_t wb = pkc_row_bytes(PK_Q4_0, k) * (size_t)m;
    pkc_ptr w = dev_alloc(c, wb), x = dev_alloc(c, (size_t)k * 4), y = dev_alloc(c, (size_t)m * 4);
    CHECK(c, pkc_memset(c, w, 0, wb));
    CHECK(c, pkc_memset(c, x, 0, (size_t)k * 4));
    pkc_graph *g = NULL;
    CHECK(c, pkc_graph_begin(c));
    st = pkc_matmul(c, PK_Q4_0, w, m, k, x, k, 1, y, m);
    const int refused = st == PKC_ERR_INVALID && strstr(pkc_error(c), "pkc_prepare") != NULL;
    char message[300];
    snprintf(message, sizeof message, "%s", pkc_error(c));
    CHECK(c, pkc_graph_end(c, &g));
    pkc_graph_destroy(c, g);
    const int types[] = {PK_Q4_0, PK_Q4_0, PK_Q8_0};
    st = pkc_prepare(c, types, 3);
    int captured = 0;
    if (st == PKC_OK && pkc_graph_begin(c) == PKC_OK) {
        captured = pkc_matmul(c, PK_Q4_0, w, m, k, x, k, 1, y, m) == PKC_OK;
        captured &= pkc_graph_end(c, &g) == PKC_OK && pkc_graph_launch(c, g) == PKC_OK && pkc_synchronize(c) == PKC_OK;
        pkc_graph_destroy(c, g);
    }
    const int bad = pkc_prepare(c, (const int[]){99}, 1) == PKC_ERR_UNSUPPORTED;
    report(refused && st == PKC_OK && captured && bad,
           "lazy formats: Q4_0 unloaded inside a capture refused (\"%.120s\"); after pkc_prepare the capture works; type 99 unsupported",
           message);
    pkc_free(c, w);
    pkc_free(c, x);
    pkc_free(c, y);
    pkc_close(c);
    remove_dir(dir);
}

// What the kernels are built as for devices and NVRTCs of other generations: the device's own
// machine code, an earlier minor's, PTX for a device newer than NVRTC knows (the driver compiles
// it), or a refusal that says why for a device older than every architecture NVRTC builds for.
// The emulator stands in for both ($PKC_EMU_CC, $PKC_EMU_NVRTC_ARCHS), and its driver loads
// machine code only on its own major and PTX only on a device at least as new, as a driver does;
// so on a GPU this is skipped. Each kind of device also gets a kernel run (y += x, exact), a
// format's module, and its modules back from the cache at a second open. Then an NVRTC newer
// than the driver ($PKC_EMU_NVRTC_VERSION, $PKC_EMU_DRIVER).
static void test_arch_choice(const char *name) {
    if (!strstr(name, "CPU emulator")) {
        printf("SKIP arch choice: it sets the emulator's device and NVRTC (not a GPU's)\n");
        return;
    }
    static const struct {
        const char *cc, *archs, *what;
        int arch, ptx, pdl, mma;
    } cases[] = {
        {"90", "75,80,86,89,90", "its own machine code", 90, 0, 1, 1},
        {"89", "75,80,86,90", "an earlier minor's machine code", 86, 0, 0, 1},
        {"100", "75,80,86,89,90", "PTX for NVRTC's newest", 90, 1, 1, 1},
        {"120", "75,80,86", "PTX older than sm_90: no dependent launch", 86, 1, 0, 1},
        {"120", "70,75", "PTX older than sm_80: no tensor-core attention", 75, 1, 0, 0},
        {"70", "75,80,90", "refused: older than all NVRTC knows", 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("PKC_EMU_CC", cases[i].cc, 1);
        setenv("PKC_EMU_NVRTC_ARCHS", cases[i].archs, 1);
        char dir[] = "/tmp/plinth-cuda-arch-XXXXXX", err[2048] = "";
        if (!mkdtemp(dir)) { report(0, "arch choice: no temporary directory"); continue; }
        pkc_context *c = NULL;
        int st = pkc_open(0, dir, &c, err, sizeof err);
        if (!cases[i].arch) {
            report(st == PKC_ERR_UNSUPPORTED && strstr(err, "sm_75 to sm_90") && strstr(err, "sm_70"),
                   "arch choice: sm_%s with NVRTC for %s: %s (\"%.160s\")", cases[i].cc, cases[i].archs, cases[i].what, err);
            if (st == PKC_OK) pkc_close(c);
        } else if (st != PKC_OK) {
            report(0, "arch choice: sm_%s with NVRTC for %s: open failed: %s", cases[i].cc, cases[i].archs, err);
        } else {
            pkc_device_info info;
            CHECK(c, pkc_device_info_get(c, &info));
            const int64_t n = 1000;
            float x[1000], y[1000], got[1000];
            for (int64_t j = 0; j < n; j++) x[j] = (float)j * 0.25f, y[j] = 3.0f - (float)j;
            pkc_ptr dx = dev_upload(c, x, sizeof x), dy = dev_upload(c, y, sizeof y);
            CHECK(c, pkc_add(c, dy, dx, n));
            CHECK(c, pkc_download(c, got, dy, sizeof got));
            int exact = 1;
            for (int64_t j = 0; j < n; j++) exact &= same_bits(got[j], y[j] + x[j]);
            const int format = pkc_prepare(c, (const int[]){PK_Q8_0}, 1) == PKC_OK;
            const int mma = pkc_attention_uses_mma(c, 128);
            pkc_free(c, dx);
            pkc_free(c, dy);
            pkc_close(c);
            char prefix[64];
            snprintf(prefix, sizeof prefix, "plinth-kernels-%s_%d-", cases[i].ptx ? "compute" : "sm", cases[i].arch);
            const int files = cache_files(dir, prefix, cases[i].ptx ? ".ptx" : ".cubin", 0) == 2;
            pkc_device_info again = {0};
            int cached = pkc_open(0, dir, &c, err, sizeof err) == PKC_OK;
            if (cached) {
                cached = pkc_prepare(c, (const int[]){PK_Q8_0}, 1) == PKC_OK && pkc_device_info_get(c, &again) == PKC_OK &&
                         again.kernels_from_cache == 1 && again.kernel_arch == cases[i].arch;
                pkc_close(c);
            }
            // Either saving turned off by its switch (a device round's fallback) is off on every device.
            const int pdl_wanted = cases[i].pdl && !switched_off("PLINTH_CUDA_PDL");
            const int mma_wanted = cases[i].mma && !switched_off("PLINTH_CUDA_MMA_ATTN");
            report(info.kernel_arch == cases[i].arch && info.kernel_ptx == cases[i].ptx && info.dependent_launch == pdl_wanted &&
                       mma == mma_wanted && exact && format && files && cached,
                   "arch choice: sm_%s with NVRTC for %s: %s (built as %s_%d, dependent launch %s, tensor-core attention %s; "
                   "y += x %s, Q8_0's module, both cached and read back)",
                   cases[i].cc, cases[i].archs, cases[i].what, info.kernel_ptx ? "compute" : "sm", info.kernel_arch,
                   info.dependent_launch ? "on" : "off", mma ? "on" : "off", exact ? "exact" : "WRONG");
        }
        remove_dir(dir);
    }
    unsetenv("PKC_EMU_CC");
    unsetenv("PKC_EMU_NVRTC_ARCHS");
    // An NVRTC of a later CUDA than the driver's (PyPI's newest beside an older driver): its
    // machine code loads within the driver's major version, and across majors the refusal says
    // which versions meet and what to do.
    static const struct { const char *nvrtc; int opens; } versions[] = {{"12.9", 1}, {"13.0", 0}};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        setenv("PKC_EMU_NVRTC_VERSION", versions[i].nvrtc, 1);
        setenv("PKC_EMU_DRIVER", "12080", 1);
        char dir[] = "/tmp/plinth-cuda-nvrtc-XXXXXX", err[2048] = "", want[120];
        if (!mkdtemp(dir)) { report(0, "arch choice: no temporary directory"); continue; }
        pkc_context *c = NULL;
        const int st = pkc_open(0, dir, &c, err, sizeof err);
        snprintf(want, sizeof want, "NVRTC %s, newer than the driver's CUDA 12.8", versions[i].nvrtc);
        report(versions[i].opens ? st == PKC_OK : st != PKC_OK && strstr(err, want) && strstr(err, "PLINTH_CUDA_LIB_DIR"),
               "arch choice: NVRTC %s beside a CUDA 12.8 driver: %s (\"%.200s\")", versions[i].nvrtc,
               versions[i].opens ? "opens" : "refused, saying why", st == PKC_OK ? "" : err);
        if (st == PKC_OK) pkc_close(c);
        remove_dir(dir);
    }
    unsetenv("PKC_EMU_NVRTC_VERSION");
    unsetenv("PKC_EMU_DRIVER");
}

int main(int argc, char **argv) {
    const char *dir = "/tmp/plinth-cuda-test-cache";
    int require_device = 0; // no device is a failure, not a skip (the emulator in CI)
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--require-device") == 0) require_device = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: test_cuda [CACHE_DIR] [--quick] [--require-device]\n");
            return 2;
        } else dir = argv[i];
    }
    remove_dir(dir);
    char err[2048];
    pkc_context *c = NULL;
    const double t0 = wall_seconds();
    const int st = pkc_open(0, dir, &c, err, sizeof err);
    if (st != PKC_OK) {
        printf("CUDA unavailable (%s): %s\n", pkc_status_name(st), err);
        printf("SKIP every CUDA test (dequantize, get_rows, matmul gemv/gemm, rms_norm, rope, swiglu, add, add_bias, "
               "rms_norm_heads, geglu, scale, softcap, argmax, topk, download_rows, store_kv, qkv_rope_store, qkv_norm_rope_store, attention, copy_kv, graph, dependent launch, errors, matmul_runs, matmul_runs_rope_store, matmul_add_norm, matmul_post_norm, glu, lora, lora_embed, lazy formats, arch choice, kernel cache): no usable GPU\n");
        printf("0 passed, 0 failed\n");
        return require_device ? 1 : 0;
    }
    pkc_device_info info;
    CHECK(c, pkc_device_info_get(c, &info));
    printf("device: %s, compute capability %d.%d, %d SMs, %.1f GiB (%.1f free), driver %d, NVRTC %d.%d; kernels %s in %.2f s\n",
           info.name, info.cc_major, info.cc_minor, info.multiprocessors, info.total_memory / 1073741824.0,
           info.free_memory / 1073741824.0, info.driver_version, info.nvrtc_major, info.nvrtc_minor,
           info.kernels_from_cache ? "from the cache" : "compiled", info.compile_seconds);
    printf("dependent launch: %s%s\n", info.dependent_launch ? "on" : "off: ", info.dependent_launch_off);
    (void)t0;
    // Every format's module at once, in parallel: what pkc_prepare costs a first load.
    const double tp = wall_seconds();
    CHECK(c, pkc_prepare(c, all_types, NTYPES));
    const double prepare_seconds = wall_seconds() - tp;
    CHECK(c, pkc_device_info_get(c, &info));
    printf("pkc_prepare: %d formats' kernels %s in %.2f s\n", NTYPES, info.kernels_from_cache ? "from the cache" : "compiled",
           prepare_seconds);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pool = pk_pool_create(cpus > 16 ? 16 : (int)(cpus < 1 ? 1 : cpus));

    test_dequantize(c);
    test_rms_norm(c);
    test_rope(c);
    test_embed_norm_rope(c);
    test_swiglu_add(c);
    test_gemma_ops(c);
    test_argmax_rows(c);
    test_topk(c);
    test_qkv_rope_store(c);
    test_attention(c);
    test_paged_kv(c);
    test_copy_kv(c);
    test_attention_scratch(dir);
    test_graph(c);
    test_dependent_launch(c);
    test_errors(c);
    test_matmul(c);
    test_f16_cache(c);
    test_gemm_input_rows(c);
    test_matmul_add(c);
    test_matmul_runs(c);
    test_matmul_add_norm(c);
    test_matmul_runs_rope_store(c);
    test_glu(c, 0);
    test_glu(c, 1);
    test_matmul_post_norm(c);
    test_lora(c);
    test_lazy_formats();
    test_arch_choice(info.name);
    test_cache(dir, info.kernels_from_cache);

    pkc_close(c);
    pk_pool_destroy(pool);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
