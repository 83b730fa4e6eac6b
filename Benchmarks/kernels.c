// The prefill kernels against the machine's measured peaks (issue 26): a tight vpdpbusd loop on
// one and on every thread gives the int8 peak, a tight FMA loop the f32 peak; then the batched
// product (pk_matmul_many on packed weights, 512 activation rows, SmolLM2's and Qwen2.5's
// shapes) and causal attention over a 512-token prompt are timed and given as a fraction of
// them; `pipes` shows which of the product's instructions share vpdpbusd's pipes. Developer tool, not part of the package; links the kernels' sources directly.
//   clang -O2 -march=native -D_GNU_SOURCE -IKernels -IKernels/include $(pkg-config --cflags openblas) \
//      -o /tmp/kernels Benchmarks/kernels.c Kernels/*.c -lopenblas -llapacke -lm -lpthread
//   /tmp/kernels [all|matmul|attention|pipes|peak] [threads]   (under perf stat -e cycles,instructions for IPC)
#include <immintrin.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pk_matmul.h"
#include "pk_ops.h"
#include "pk_pool.h"
#include "pk_quants.h"

#include "timing.h"

// ---- peaks -------------------------------------------------------------------------------------

#define PEAK_ITERS 20000000LL

// Twelve independent chains of one instruction (more than latency x throughput), kept in
// registers across iterations; their sum is written to `out` so that nothing is optimized away.
#define PEAK_LOOP(name, isa, vec, sum_type, init, step, reduce)                                          \
    __attribute__((target(isa))) static void *name(void *out) {                                         \
        vec a[12];                                                                                     \
        for (int i = 0; i < 12; i++) a[i] = init(i);                                                   \
        for (long long n = 0; n < PEAK_ITERS; n++) {                                                   \
            for (int i = 0; i < 12; i++) a[i] = step(a[i]);                                            \
            __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]), \
                             "+v"(a[6]), "+v"(a[7]), "+v"(a[8]), "+v"(a[9]), "+v"(a[10]), "+v"(a[11])); \
        }                                                                                              \
        sum_type s = 0;                                                                                \
        for (int i = 0; i < 12; i++) s += reduce(a[i]);                                                \
        *(sum_type *)out = s;                                                                          \
        return NULL;                                                                                   \
    }

// vpdpbusd: 64 multiply-adds of bytes per instruction.
#define VNNI_INIT(i) _mm512_set1_epi32(i)
#define VNNI_STEP(a) _mm512_dpbusd_epi32((a), _mm512_set1_epi32(0x01020304), _mm512_set1_epi32(0x05060708))
PEAK_LOOP(vnni_loop, "avx512f,avx512bw,avx512vnni", __m512i, int, VNNI_INIT, VNNI_STEP, _mm512_reduce_add_epi32)

// FMA: sixteen lanes per instruction.
#define FMA_INIT(i) _mm512_set1_ps((float)(i))
#define FMA_STEP(a) _mm512_fmadd_ps((a), _mm512_set1_ps(0.999f), _mm512_set1_ps(1e-7f))
PEAK_LOOP(fma_loop, "avx512f,fma", __m512, float, FMA_INIT, FMA_STEP, _mm512_reduce_add_ps)

// Which pipes the tile kernel's per-sub-block float work takes: eight vpdpbusd chains (one 32-weight
// sub-block of one activation row) alone, then with the scale product and FMA that follow them
// (vmulps, vfmadd231ps), then with the conversion and an add too (vcvtdq2ps, vaddps). Where the
// time grows by one vpdpbusd per instruction, they share its pipes and bound the kernel.
#define PIPE_ITERS 100000000LL
__attribute__((target("avx512f,avx512bw,avx512vnni,fma"), noinline)) static double pipe_loop(int extra) {
    __m512i a[8];
    __m512 f[3];
    for (int i = 0; i < 8; i++) a[i] = _mm512_set1_epi32(i);
    for (int i = 0; i < 3; i++) f[i] = _mm512_set1_ps(1.0f + (float)i);
    const __m512i w = _mm512_set1_epi32(0x01010101), x = _mm512_set1_epi32(0x02020202);
    const __m512 m = _mm512_set1_ps(0.999f);
    const double t0 = now();
    for (long long n = 0; n < PIPE_ITERS; n++) {
        for (int i = 0; i < 8; i++) a[i] = _mm512_dpbusd_epi32(a[i], w, x);
        if (extra >= 1) f[0] = _mm512_mul_ps(f[0], m), f[1] = _mm512_fmadd_ps(f[1], m, m);
        if (extra >= 2) f[2] = _mm512_add_ps(f[2], _mm512_cvtepi32_ps(a[n & 7 ? 1 : 0]));
        __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]), "+v"(a[6]), "+v"(a[7]),
                         "+v"(f[0]), "+v"(f[1]), "+v"(f[2]));
    }
    const double t = now() - t0;
    int si = 0;
    float sf = 0;
    for (int i = 0; i < 8; i++) si += _mm512_reduce_add_epi32(a[i]);
    for (int i = 0; i < 3; i++) sf += _mm512_reduce_add_ps(f[i]);
    __asm__ volatile("" : : "r"(si), "x"(sf));
    return t;
}

static void bench_pipes(void) {
    double best[3] = {1e9, 1e9, 1e9};
    for (int run = 0; run < 3; run++)
        for (int e = 0; e < 3; e++) best[e] = fmin(best[e], pipe_loop(e));
    printf("\n| one thread, per 8 vpdpbusd | time, in vpdpbusd |\n| --- | --- |\n");
    const char *what[3] = {"8 vpdpbusd", "+ vmulps + vfmadd231ps", "+ vcvtdq2ps + vaddps"};
    for (int e = 0; e < 3; e++) printf("| %s | %.2f |\n", what[e], 8 * best[e] / best[0]);
}

// Operations per second of `loop` on `threads` threads (ops_per_instr: 128 for vpdpbusd, 32 for
// FMA): the best of five runs, since a neighbour's load on a shared machine only ever lowers it.
static double peak(void *(*loop)(void *), int threads, double ops_per_instr) {
    double best = 0;
    for (int run = 0; run < 5; run++) {
        pthread_t t[64];
        int sink[64];
        const double t0 = now();
        for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, loop, &sink[i]);
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        const double rate = (double)PEAK_ITERS * 12 * threads * ops_per_instr / (now() - t0);
        best = rate > best ? rate : best;
    }
    return best;
}

// ---- results -----------------------------------------------------------------------------------

// A table row without its last column (the fraction of the peak, filled in once the peaks are
// final), and the rate that column divides.
typedef struct {
    char text[160];
    double ops;
    int int8; // of the int8 peak, else of the f32 one
} row;

static row rows[64];
static int nrows;

static void add_row(double ops, int int8, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_row(double ops, int int8, const char *fmt, ...) {
    if (nrows == (int)(sizeof rows / sizeof *rows)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rows[nrows].text, sizeof rows[nrows].text, fmt, ap);
    va_end(ap);
    rows[nrows].ops = ops, rows[nrows].int8 = int8;
    nrows++;
}

// ---- products ------------------------------------------------------------------------------------

typedef struct {
    const char *name;
    int64_t m, k;
} shape;

static void bench_matmul(pk_pool *pool, int threads) {
    const int types[] = {PK_Q4_1, PK_Q8_0, PK_Q4_K, PK_Q6_K};
    const shape shapes[] = {{"SmolLM2 ffn_up", 1536, 576}, {"SmolLM2 ffn_down", 576, 1536}, {"SmolLM2 attn_q", 576, 576},
                            {"Qwen2.5 ffn_up", 4864, 896}, {"Qwen2.5 ffn_down", 896, 4864}};
    const int64_t ns[] = {16, 512}; // a batched decode step, a prefill chunk
    add_row(-1, 1, "| type | shape (m x k) | n | ms | T int8 ops/s | of peak |\n| --- | --- | --- | --- | --- | --- |");
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const int64_t n = ns[ni];
        pk_type_info info;
        pk_type_info_of(types[ti], &info);
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            const int64_t m = shapes[si].m, k = shapes[si].k;
            if (k % info.block_elements) continue;
            float *w = malloc(sizeof(float) * m * k), *x = malloc(sizeof(float) * n * k), *y = malloc(sizeof(float) * n * m);
            for (int64_t i = 0; i < m * k; i++) w[i] = (float)((rand() % 2001) - 1000) / 30000.0f;
            for (int64_t i = 0; i < n * k; i++) x[i] = (float)((rand() % 2001) - 1000) / 300.0f;
            uint8_t *q = malloc((size_t)(m * k / info.block_elements) * info.block_bytes);
            pk_quantize(types[ti], w, q, m * k);
            void *packed = aligned_alloc(64, (pk_pack_bytes(types[ti], m, k) + 63) / 64 * 64);
            pk_pack(types[ti], q, m, k, packed);
            void *scratch = aligned_alloc(64, (pk_matmul_scratch_bytes(n, k, threads) + 63) / 64 * 64);
            const pk_matmul_op op = {.type = types[ti], .w = q, .m = m, .y = y, .ldy = m, .packed = packed};
            const double t = BEST(n < 64 ? 400 : 25, pk_matmul_many(pool, &op, 1, k, x, n, scratch));
            const double ops = 2.0 * (double)m * (double)k * (double)n / t;
            add_row(ops, 1, "| %s | %s (%lld x %lld) | %lld | %.3f | %.3f |", info.name, shapes[si].name, (long long)m,
                    (long long)k, (long long)n, t * 1e3, ops / 1e12);
            free(w), free(x), free(y), free(q), free(packed), free(scratch);
        }
    }
}

// ---- attention ---------------------------------------------------------------------------------

typedef struct {
    const char *name;
    int n_head, n_kv_head, head_dim;
} attn_shape;

static void bench_attention(pk_pool *pool, int threads) {
    const attn_shape shapes[] = {{"SmolLM2", 9, 3, 64}, {"Qwen2.5", 14, 2, 64}, {"Gemma 3", 4, 1, 256}};
    const int64_t n = 512;
    add_row(-1, 0, "| model | heads / kv heads x dim | rows | ms | G f32 ops/s | of peak |\n| --- | --- | --- | --- | --- | --- |");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const attn_shape s = shapes[si];
        const int64_t kv_dim = (int64_t)s.n_kv_head * s.head_dim, q_dim = (int64_t)s.n_head * s.head_dim;
        float *q = malloc(sizeof(float) * n * q_dim), *k = malloc(sizeof(float) * n * kv_dim), *v = malloc(sizeof(float) * n * kv_dim);
        float *out = malloc(sizeof(float) * n * q_dim);
        for (int64_t i = 0; i < n * q_dim; i++) q[i] = (float)((rand() % 2001) - 1000) / 1000.0f;
        for (int64_t i = 0; i < n * kv_dim; i++) k[i] = (float)((rand() % 2001) - 1000) / 1000.0f, v[i] = (float)((rand() % 2001) - 1000) / 1000.0f;
        uint16_t *keys = aligned_alloc(64, sizeof(uint16_t) * n * kv_dim), *values = aligned_alloc(64, sizeof(uint16_t) * n * kv_dim);
        uint16_t **kp = malloc(sizeof *kp * n), **vp = malloc(sizeof *vp * n);
        int32_t *pos = malloc(sizeof *pos * n), *len = malloc(sizeof *len * n);
        for (int64_t t = 0; t < n; t++) kp[t] = keys, vp[t] = values, pos[t] = (int32_t)t, len[t] = (int32_t)t + 1;
        pk_store_kv(pool, k, v, n, kv_dim, pos, kp, vp);
        float *scratch = aligned_alloc(64, (pk_attention_scratch_floats(n, s.n_head / s.n_kv_head, threads) * sizeof(float) + 63) / 64 * 64);
        const double t = BEST(25, pk_attention(pool, q, n, s.n_head, s.n_kv_head, s.head_dim, (const uint16_t *const *)kp,
                                               (const uint16_t *const *)vp, len, kv_dim, 0.125f, out, scratch));
        // scores and values: 2 * head_dim multiply-adds per (row, head, position)
        const double ops = 4.0 * s.head_dim * s.n_head * (double)n * (double)(n + 1) / 2.0 / t;
        add_row(ops, 0, "| %s | %d / %d x %d | %lld | %.3f | %.1f |", s.name, s.n_head, s.n_kv_head, s.head_dim, (long long)n,
                t * 1e3, ops / 1e9);
        free(q), free(k), free(v), free(out), free(keys), free(values), free(kp), free(vp), free(pos), free(len), free(scratch);
    }
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "all";
    const int threads = argc > 2 ? atoi(argv[2]) : 2;
    // The peaks are measured before and after the kernels, and the higher one kept: on a shared
    // machine a neighbour can take a core for a second at a time.
    double int8_1 = peak(vnni_loop, 1, 128), int8_n = peak(vnni_loop, threads, 128), f32_n = peak(fma_loop, threads, 32);
    pk_pool *pool = pk_pool_create(threads);
    const int matmul = !strcmp(what, "all") || !strcmp(what, "matmul"), attention = !strcmp(what, "all") || !strcmp(what, "attention");
    if (!strcmp(what, "all") || !strcmp(what, "pipes")) bench_pipes();
    if (matmul) bench_matmul(pool, threads);
    if (attention) bench_attention(pool, threads);
    pk_pool_destroy(pool);
    int8_1 = fmax(int8_1, peak(vnni_loop, 1, 128)), int8_n = fmax(int8_n, peak(vnni_loop, threads, 128));
    f32_n = fmax(f32_n, peak(fma_loop, threads, 32));
    printf("int8 peak (vpdpbusd zmm): %.3f T ops/s on 1 thread, %.3f on %d; f32 peak (FMA zmm): %.1f G ops/s on %d\n",
           int8_1 / 1e12, int8_n / 1e12, threads, f32_n / 1e9, threads);
    for (int i = 0; i < nrows; i++) {
        if (rows[i].ops < 0) printf("\n%s\n", rows[i].text);
        else printf("%s %.0f %% |\n", rows[i].text, 100.0 * rows[i].ops / (rows[i].int8 ? int8_n : f32_n));
    }
    return 0;
}
