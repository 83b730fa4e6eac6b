// Micro-benchmarks of PlinthCUDA on the device it runs on: the memory-bandwidth ceiling (a
// device-to-device copy), GEMV GB/s per weight format at the real models' shapes, the GEMV/GEMM
// crossover, GEMM TFLOP/s at n = 64 and 512, and attention for 64 sequences and a prompt's chunk.
//
// Usage: bench_cuda [cache-dir] [quick]
// Times are from device events around many calls, the median of 5 repeats; weights are
// replicated over >= 512 MB and rotated so the 50 MB L2 cannot hold them.
#define _GNU_SOURCE
#include "common.h"

static pkc_context *c;
static double copy_gbs = 1.0;

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// ---- the ceiling -------------------------------------------------------------------------------

static void bench_copy(void) {
    const size_t bytes = (size_t)1 << 30;
    pkc_ptr a = dev_alloc(c, bytes), b = dev_alloc(c, bytes);
    CHECK(c, pkc_memset(c, a, 0x5a, bytes));
    float ms[5];
    for (int r = 0; r < 5; r++) {
        CHECK(c, pkc_timer_start(c));
        for (int i = 0; i < 5; i++) CHECK(c, pkc_copy(c, i % 2 ? a : b, i % 2 ? b : a, bytes));
        CHECK(c, pkc_timer_stop(c, &ms[r]));
    }
    qsort(ms, 5, sizeof ms[0], cmp_float);
    copy_gbs = 2.0 * 5 * (double)bytes / (ms[2] * 1e-3) / 1e9;
    printf("device-to-device copy of 1 GiB: %.0f GB/s (bytes read + written), the bandwidth ceiling below\n\n", copy_gbs);
    pkc_free(c, a);
    pkc_free(c, b);
}

// ---- GEMV --------------------------------------------------------------------------------------

typedef struct { const char *name; int64_t m, k; } shape;
static const shape shapes[] = {
    {"smol attn_q", 576, 576},   {"smol ffn_up", 1536, 576}, {"smol ffn_down", 576, 1536},  {"smol output", 49152, 576},
    {"qwen attn_q", 896, 896},   {"qwen ffn_up", 4864, 896}, {"qwen ffn_down", 896, 4864}, {"qwen output", 151936, 896},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

// A weight matrix replicated `copies` times (device), to rotate through.
typedef struct { pkc_ptr base; size_t bytes; int copies; } weights;

static weights make_weights(int type, int64_t m, int64_t k, size_t min_total) {
    weights w;
    w.bytes = pkc_row_bytes(type, k) * (size_t)m;
    w.bytes = (w.bytes + 255) / 256 * 256;
    w.copies = (int)((min_total + w.bytes - 1) / w.bytes);
    if (w.copies < 1) w.copies = 1;
    uint8_t *h = malloc(w.bytes);
    random_weights(type, h, m, k);
    w.base = dev_alloc(c, w.bytes * (size_t)w.copies);
    CHECK(c, pkc_upload(c, w.base, h, w.bytes));
    for (int i = 1; i < w.copies; i++) CHECK(c, pkc_copy(c, w.base + (uint64_t)i * w.bytes, w.base, w.bytes));
    free(h);
    return w;
}

// Median microseconds per pkc_matmul over `iters` calls rotating through the copies.
static double time_matmul(int type, const weights *w, int64_t m, int64_t k, pkc_ptr x, int64_t n, pkc_ptr y, int iters) {
    for (int i = 0; i < 3; i++) CHECK(c, pkc_matmul(c, type, w->base, m, k, x, k, n, y, m));
    float ms[5];
    for (int r = 0; r < 5; r++) {
        CHECK(c, pkc_timer_start(c));
        for (int i = 0; i < iters; i++)
            CHECK(c, pkc_matmul(c, type, w->base + (uint64_t)(i % w->copies) * w->bytes, m, k, x, k, n, y, m));
        CHECK(c, pkc_timer_stop(c, &ms[r]));
    }
    qsort(ms, 5, sizeof ms[0], cmp_float);
    return ms[2] * 1e3 / iters;
}

// The same through a captured graph of 64 calls (launch gaps mostly gone, as in a decode step
// that the runtime captures).
// With q (x's int8 rows, stride pkc_q8_row_bytes(k)), the int8 GEMV.
static double time_matmul_graph_q8(int type, const weights *w, int64_t m, int64_t k, pkc_ptr x, pkc_ptr q, int64_t n,
                                   pkc_ptr y) {
    pkc_graph *g = NULL;
    CHECK(c, pkc_graph_begin(c));
    for (int i = 0; i < 64; i++)
        CHECK(c, pkc_matmul_q8(c, type, w->base + (uint64_t)(i % w->copies) * w->bytes, m, k, x, k, q,
                               (int64_t)pkc_q8_row_bytes(k), n, y, m, 0));
    CHECK(c, pkc_graph_end(c, &g));
    CHECK(c, pkc_graph_launch(c, g));
    float ms[5];
    for (int r = 0; r < 5; r++) {
        CHECK(c, pkc_timer_start(c));
        for (int i = 0; i < 4; i++) CHECK(c, pkc_graph_launch(c, g));
        CHECK(c, pkc_timer_stop(c, &ms[r]));
    }
    pkc_graph_destroy(c, g);
    qsort(ms, 5, sizeof ms[0], cmp_float);
    return ms[2] * 1e3 / (4 * 64);
}

static double time_matmul_graph(int type, const weights *w, int64_t m, int64_t k, pkc_ptr x, int64_t n, pkc_ptr y) {
    return time_matmul_graph_q8(type, w, m, k, x, 0, n, y);
}

// Inputs and outputs for products of up to `rows` rows at every shape here: x normal (widest
// k 4864), y as wide as the widest m (151936).
typedef struct { pkc_ptr x, y; } products;
static products products_io(int64_t rows) {
    products io = {dev_alloc(c, (size_t)rows * 4864 * 4), dev_alloc(c, (size_t)rows * 151936 * 4)};
    float *hx = malloc((size_t)rows * 4864 * 4);
    fill_normal(hx, rows * 4864, 1.0f);
    CHECK(c, pkc_upload(c, io.x, hx, (size_t)rows * 4864 * 4));
    free(hx);
    return io;
}
static void products_free(products io) {
    pkc_free(c, io.x);
    pkc_free(c, io.y);
}

static int applies(int type, const shape *s, int quick) {
    if (s->k % block_elements(type) != 0) return 0;
    if (quick && s->m > 10000 && type != PK_Q8_0 && type != PK_Q4_1) return 0;
    return 1;
}

static void bench_gemv(int quick) {
    printf("GEMV (n = 1 row; GB/s = weight bytes / time; %% of the copy ceiling)\n");
    printf("%-5s %-14s %8s %9s %9s %7s %11s %9s %7s\n", "type", "shape", "MB", "us", "GB/s", "ceil%", "graph us", "GB/s", "ceil%");
    const products io = products_io(64);
    const pkc_ptr x = io.x, y = io.y;
    const int64_t saved = pkc_set_gemm_min_rows(c, INT64_MAX);
    for (int ti = 0; ti < NTYPES; ti++)
        for (int si = 0; si < NSHAPES; si++) {
            const shape *s = &shapes[si];
            if (!applies(all_types[ti], s, quick) || (s->m > 10000 && all_types[ti] == PK_F32)) continue;
            weights w = make_weights(all_types[ti], s->m, s->k, (size_t)512 << 20);
            int iters = (int)((4ull << 30) / w.bytes);
            iters = iters < 20 ? 20 : iters > 2000 ? 2000 : iters;
            const double us = time_matmul(all_types[ti], &w, s->m, s->k, x, 1, y, iters);
            const double gbs = (double)pkc_row_bytes(all_types[ti], s->k) * (double)s->m / (us * 1e-6) / 1e9;
            const double gus = time_matmul_graph(all_types[ti], &w, s->m, s->k, x, 1, y);
            const double ggbs = (double)pkc_row_bytes(all_types[ti], s->k) * (double)s->m / (gus * 1e-6) / 1e9;
            printf("%-5s %-14s %8.2f %9.2f %9.0f %6.0f%% %11.2f %9.0f %6.0f%%\n", type_name(all_types[ti]), s->name,
                   (double)pkc_row_bytes(all_types[ti], s->k) * (double)s->m / 1e6, us, gbs, 100.0 * gbs / copy_gbs, gus, ggbs,
                   100.0 * ggbs / copy_gbs);
            fflush(stdout);
            pkc_free(c, w.base);
        }
    pkc_set_gemm_min_rows(c, saved);
    products_free(io);
    printf("\n");
}

// The int8 GEMV (x as int8 rows, dp4a) against the float-x GEMV, graph-replayed µs per call, for
// the catalog models' formats at their shapes, n = 1 and 2; and the lane policy's widening
// ($PLINTH_CUDA_GEMV_WIDE_WARPS = 0 turns it off) on the int8 one.
static void bench_gemv8(void) {
    static const int qtypes[] = {PK_Q4_1, PK_Q5_0, PK_Q8_0, PK_Q4_K, PK_Q6_K};
    printf("GEMV int8 rows vs float rows (graph us per call; GB/s of weights at n = 1)\n");
    printf("%-5s %-14s %9s %9s %7s %9s | %9s %9s\n", "type", "shape", "n1 float", "int8", "GB/s", "speedup", "n2 float", "int8");
    const int64_t kmax = 4864, rows = 2;
    const products io = products_io(rows);
    const int64_t ldq = (int64_t)pkc_q8_row_bytes(kmax);
    const pkc_ptr q = dev_alloc(c, (size_t)(rows * ldq));
    const int64_t saved = pkc_set_gemm_min_rows(c, INT64_MAX);
    const int saved_i8 = pkc_set_gemv_int8(c, 1); // int8 x wherever given (the policy is what this measures)
    for (int ti = 0; ti < (int)(sizeof qtypes / sizeof qtypes[0]); ti++)
        for (int si = 0; si < NSHAPES; si++) {
            const shape *s = &shapes[si];
            const int type = qtypes[ti];
            if (s->k % block_elements(type) != 0 || (s->m > 10000 && type != PK_Q8_0)) continue;
            CHECK(c, pkc_quantize_q8(c, io.x, s->k, rows, s->k, q, (int64_t)pkc_q8_row_bytes(s->k)));
            weights w = make_weights(type, s->m, s->k, (size_t)512 << 20);
            const double f1 = time_matmul_graph(type, &w, s->m, s->k, io.x, 1, io.y);
            const double i1 = time_matmul_graph_q8(type, &w, s->m, s->k, io.x, q, 1, io.y);
            const double f2 = time_matmul_graph(type, &w, s->m, s->k, io.x, 2, io.y);
            const double i2 = time_matmul_graph_q8(type, &w, s->m, s->k, io.x, q, 2, io.y);
            const double gbs = (double)pkc_row_bytes(type, s->k) * (double)s->m / (i1 * 1e-6) / 1e9;
            printf("%-5s %-14s %9.2f %9.2f %7.0f %8.2fx | %9.2f %9.2f\n", type_name(type), s->name, f1, i1, gbs, f1 / i1, f2, i2);
            fflush(stdout);
            pkc_free(c, w.base);
        }
    pkc_set_gemm_min_rows(c, saved);
    pkc_set_gemv_int8(c, saved_i8);
    pkc_free(c, q);
    products_free(io);
    printf("\n");
}

// ---- crossover and GEMM --------------------------------------------------------------------------

// The GEMV's rows per lane group (R rows share each load of x): graph-replayed µs per call at
// n = 1 and 2 for R = 1 and 2, beside what the policy picks.
static void bench_gemv_rows(void) {
    static const int rtypes[] = {PK_Q4_1, PK_Q5_0, PK_Q8_0, PK_Q4_K, PK_Q6_K, PK_PQ2};
    printf("GEMV rows per lane group (graph us per call; policy: R by $PLINTH_CUDA_GEMV_MIN_WARPS)\n");
    printf("%-5s %-14s %9s %9s %9s | %9s %9s %9s\n", "type", "shape", "n1 R=1", "R=2", "policy", "n2 R=1", "R=2", "policy");
    const products io = products_io(2);
    const pkc_ptr x = io.x, y = io.y;
    const int64_t saved = pkc_set_gemm_min_rows(c, INT64_MAX);
    for (int ti = 0; ti < (int)(sizeof rtypes / sizeof rtypes[0]); ti++)
        for (int si = 0; si < NSHAPES; si++) {
            const shape *s = &shapes[si];
            const int type = rtypes[ti];
            if (s->k % block_elements(type) != 0 || (s->m > 10000 && type != PK_Q8_0)) continue;
            weights w = make_weights(type, s->m, s->k, (size_t)512 << 20);
            static const int cfg[6][2] = {{1, 1}, {1, 2}, {1, 0}, {2, 1}, {2, 2}, {2, 0}};
            double us[6];
            for (int i = 0; i < 6; i++) {
                const int old = pkc_set_gemv_rows_per_group(c, cfg[i][1]);
                us[i] = time_matmul_graph(type, &w, s->m, s->k, x, cfg[i][0], y);
                pkc_set_gemv_rows_per_group(c, old);
            }
            printf("%-5s %-14s %9.2f %9.2f %9.2f | %9.2f %9.2f %9.2f\n", type_name(type), s->name, us[0], us[1], us[2],
                   us[3], us[4], us[5]);
            fflush(stdout);
            pkc_free(c, w.base);
        }
    pkc_set_gemm_min_rows(c, saved);
    products_free(io);
    printf("\n");
}

static void bench_crossover(void) {
    static const int64_t ns[] = {1, 2, 3, 4, 6, 8, 12, 16, 32, 64};
    struct { int type; shape s; } cases[] = {
        {PK_Q4_1, {"qwen ffn_up", 4864, 896}}, {PK_Q8_0, {"qwen ffn_up", 4864, 896}}, {PK_Q5_0, {"smol ffn_up", 1536, 576}},
        {PK_Q4_K, {"qwen ffn_down", 896, 4864}}, {PK_Q6_K, {"qwen ffn_down", 896, 4864}}, {PK_Q8_0, {"qwen output", 151936, 896}},
        {PK_F16, {"qwen ffn_up", 4864, 896}}};
    printf("GEMV vs GEMM (dequantize to f16 + cublasGemmEx) per call, microseconds\n");
    printf("%-5s %-14s", "type", "shape");
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) printf(" %11lld", (long long)ns[i]);
    printf("   first n where GEMM wins\n");
    const products io = products_io(64);
    const pkc_ptr x = io.x, y = io.y;
    CHECK(c, pkc_reserve(c, 151936, 896, 512));
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const shape *s = &cases[ci].s;
        const int type = cases[ci].type;
        weights w = make_weights(type, s->m, s->k, (size_t)512 << 20);
        int iters = (int)((2ull << 30) / w.bytes);
        iters = iters < 10 ? 10 : iters > 500 ? 500 : iters;
        printf("%-5s %-14s", type_name(type), s->name);
        int64_t cross = -1;
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            pkc_set_gemm_min_rows(c, INT64_MAX);
            const double g = time_matmul(type, &w, s->m, s->k, x, ns[i], y, iters);
            pkc_set_gemm_min_rows(c, 1);
            const double m = time_matmul(type, &w, s->m, s->k, x, ns[i], y, iters);
            printf(" %5.1f/%-5.1f", g, m);
            if (cross < 0 && m < g) cross = ns[i];
        }
        printf("   %lld\n", (long long)cross);
        fflush(stdout);
        pkc_free(c, w.base);
    }
    pkc_set_gemm_min_rows(c, 8);
    products_free(io);
    printf("(each cell: gemv/gemm)\n\n");
}

static void bench_gemm(void) {
    static const int64_t ns[] = {64, 512, 2048};
    struct { int type; shape s; } cases[] = {
        {PK_Q8_0, {"qwen ffn_up", 4864, 896}}, {PK_Q4_1, {"qwen ffn_up", 4864, 896}}, {PK_F16, {"qwen ffn_up", 4864, 896}},
        {PK_Q4_K, {"qwen ffn_down", 896, 4864}}, {PK_Q8_0, {"qwen output", 151936, 896}}, {PK_F16, {"qwen output", 151936, 896}},
        {PK_Q4_1, {"smol output", 49152, 576}}};
    printf("GEMM path (dequantize W to f16 + cuBLAS f16 in / f32 accumulate and out): TFLOP/s (2mnk / time), us\n");
    const products io = products_io(2048);
    const pkc_ptr x = io.x, y = io.y;
    CHECK(c, pkc_reserve(c, 151936, 4864, 2048));
    pkc_set_gemm_min_rows(c, 1);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const shape *s = &cases[ci].s;
        weights w = make_weights(cases[ci].type, s->m, s->k, (size_t)256 << 20);
        printf("%-5s %-14s %6lldx%-5lld", type_name(cases[ci].type), s->name, (long long)s->m, (long long)s->k);
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            const double us = time_matmul(cases[ci].type, &w, s->m, s->k, x, ns[i], y, 20);
            printf("   n=%-4lld %6.1f TFLOP/s %8.1f us", (long long)ns[i], 2.0 * s->m * ns[i] * s->k / (us * 1e-6) / 1e12, us);
        }
        printf("\n");
        fflush(stdout);
        pkc_free(c, w.base);
    }
    pkc_set_gemm_min_rows(c, 8);
    products_free(io);
    printf("\n");
}

// ---- attention ---------------------------------------------------------------------------------

static void bench_attention(void) {
    // Gemma 3 270M's heads of 256, as its global layers (no window)
    struct { int n_head, n_kv_head, head_dim; const char *name; } models[] = {{9, 3, 64, "smol"}, {14, 2, 64, "qwen"}, {4, 1, 256, "gemma"}};
    static const int lens[] = {256, 1024, 4096};
    printf("Attention, one layer: 64 sequences decoding (one query each, all at kv_len; slotted, then the same rows as pages of 64\n"
           "positions in random order, as plinth's cache), and a prefill chunk\n");
    for (int mi = 0; mi < 3; mi++) {
        const int nh = models[mi].n_head, nkv = models[mi].n_kv_head, hd = models[mi].head_dim;
        const int64_t kv_dim = (int64_t)nkv * hd, max_pos = 4096, slots = 64, slot_stride = max_pos * kv_dim;
        pkc_kv kv = {.k = dev_alloc(c, (size_t)(slots * slot_stride) * 2), .v = dev_alloc(c, (size_t)(slots * slot_stride) * 2),
                     .slot_stride = slot_stride, .kv_dim = kv_dim};
        // The paged view of the same arrays: slots x 64 pages of 64 positions, shuffled.
        enum { PAGE_SHIFT = 6 };
        const int64_t per_slot = max_pos >> PAGE_SHIFT, pages_n = slots * per_slot;
        int32_t *table = malloc((size_t)pages_n * 4);
        for (int64_t i = 0; i < pages_n; i++) table[i] = (int32_t)i;
        for (int64_t i = pages_n - 1; i > 0; i--) {
            const int64_t j = (int64_t)(rng_u64() % (uint64_t)(i + 1));
            const int32_t t = table[i];
            table[i] = table[j];
            table[j] = t;
        }
        pkc_kv paged = kv;
        paged.pages = dev_upload(c, table, (size_t)pages_n * 4);
        paged.max_pages = per_slot;
        paged.page_shift = PAGE_SHIFT;
        free(table);
        // random f16 in [-1, 1): fill through store_kv would be slow; bytes of small halves instead
        uint16_t *h = malloc((size_t)(slot_stride) * 2);
        for (int64_t i = 0; i < slot_stride; i++) h[i] = pk_f32_to_f16(rng_uniform(-1.0f, 1.0f));
        for (int s = 0; s < slots; s++) {
            CHECK(c, pkc_upload(c, kv.k + (uint64_t)(s * slot_stride) * 2, h, (size_t)slot_stride * 2));
            CHECK(c, pkc_upload(c, kv.v + (uint64_t)(s * slot_stride) * 2, h, (size_t)slot_stride * 2));
        }
        free(h);
        const int64_t nmax = 2048, qd = (int64_t)nh * hd;
        float *hq = malloc((size_t)(nmax * qd) * 4);
        fill_normal(hq, nmax * qd, 1.0f);
        pkc_ptr q = dev_upload(c, hq, (size_t)(nmax * qd) * 4), out = dev_alloc(c, (size_t)(nmax * qd) * 4);
        free(hq);
        int32_t sl[2048], kl[2048];
        pkc_ptr dsl = dev_alloc(c, sizeof sl), dkl = dev_alloc(c, sizeof kl);
        for (int li = 0; li < 3; li++) {
            for (int i = 0; i < 64; i++) { sl[i] = i; kl[i] = lens[li]; }
            CHECK(c, pkc_upload(c, dsl, sl, 64 * 4));
            CHECK(c, pkc_upload(c, dkl, kl, 64 * 4));
            for (int pg = 0; pg < 2; pg++) {
                float ms[5];
                for (int r = 0; r < 5; r++) {
                    CHECK(c, pkc_timer_start(c));
                    for (int i = 0; i < 50; i++)
                        CHECK(c, pkc_attention(c, pg ? &paged : &kv, q, qd, 64, nh, nkv, hd, dsl, dkl, lens[li], 0.125f, out, qd));
                    CHECK(c, pkc_timer_stop(c, &ms[r]));
                }
                qsort(ms, 5, sizeof ms[0], cmp_float);
                const double us = ms[2] * 1e3 / 50;
                const double bytes = 64.0 * lens[li] * kv_dim * 2 * 2;
                printf("  %s decode 64 seqs x kv %4d%s: %8.1f us  (%.0f GB/s of K+V)\n", models[mi].name, lens[li], pg ? ", paged" : "", us,
                       bytes / (us * 1e-6) / 1e9);
            }
        }
        // A prompt's chunk: pkc_attention's kernel, then on tensor cores (pkc_attention_prompt from
        // row 0) over the slotted and the paged cache.
        static const int chunks[] = {512, 2048};
        for (int ci = 0; ci < 2; ci++) {
            const int n = chunks[ci];
            for (int i = 0; i < n; i++) { sl[i] = 0; kl[i] = i + 1; }
            CHECK(c, pkc_upload(c, dsl, sl, (size_t)n * 4));
            CHECK(c, pkc_upload(c, dkl, kl, (size_t)n * 4));
            const double flops = 4.0 * nh * hd * (double)n * (n + 1) / 2;
            double first = 0.0;
            for (int way = 0; way < 3; way++) {
                if (way > 0 && !pkc_attention_uses_mma(c, hd)) {
                    printf("  %s prefill %4d rows: no tensor-core attention on this device\n", models[mi].name, n);
                    break;
                }
                float ms[5];
                for (int r = 0; r < 5; r++) {
                    CHECK(c, pkc_timer_start(c));
                    for (int i = 0; i < 10; i++)
                        CHECK(c, pkc_attention_prompt(c, way == 2 ? &paged : &kv, q, qd, n, nh, nkv, hd, dsl, dkl, n, 0, 0.125f, out, qd, 0,
                                                      0, way ? 0 : n));
                    CHECK(c, pkc_timer_stop(c, &ms[r]));
                }
                qsort(ms, 5, sizeof ms[0], cmp_float);
                const double us = ms[2] * 1e3 / 10;
                if (way == 0) first = us;
                static const char *ways[] = {"", ", tensor cores", ", tensor cores, paged"};
                printf("  %s prefill %4d rows of one slot (causal%s): %8.1f us  (%.1f TFLOP/s%s", models[mi].name, n, ways[way], us,
                       flops / (us * 1e-6) / 1e12, way ? "; " : ")\n");
                if (way) printf("%.2fx the first)\n", first / us);
            }
        }
        pkc_free(c, kv.k); pkc_free(c, kv.v); pkc_free(c, paged.pages); pkc_free(c, q); pkc_free(c, out); pkc_free(c, dsl); pkc_free(c, dkl);
    }
    printf("\n");
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp/plinth-cuda-test-cache";
    const int quick = argc > 2 && strcmp(argv[2], "quick") == 0;
    char err[2048];
    const int st = pkc_open(0, dir, &c, err, sizeof err);
    if (st != PKC_OK) {
        printf("CUDA unavailable (%s): %s; nothing to measure\n", pkc_status_name(st), err);
        return 0;
    }
    // Every format's kernels now: a format first used inside a graph capture would be refused.
    CHECK(c, pkc_prepare(c, all_types, NTYPES));
    pkc_device_info info;
    CHECK(c, pkc_device_info_get(c, &info));
    printf("device: %s (cc %d.%d, %d SMs, %.1f GiB), driver %d, NVRTC %d.%d; kernels %s in %.2f s\n", info.name,
           info.cc_major, info.cc_minor, info.multiprocessors, info.total_memory / 1073741824.0, info.driver_version,
           info.nvrtc_major, info.nvrtc_minor, info.kernels_from_cache ? "from the cache" : "compiled", info.compile_seconds);
    // Back-to-back calls overlap where it is on: rounds before 2026-11-29 had it off (PLINTH_CUDA_PDL=0).
    printf("dependent launch: %s%s\n\n", info.dependent_launch ? "on" : "off: ", info.dependent_launch_off);
    if (argc > 6 && strcmp(argv[2], "profile") == 0) {
        // profile TYPE M K N: 20 calls of one matmul (for ncu --launch-skip 10 --launch-count 1)
        const int type = atoi(argv[3]);
        const int64_t m = atoll(argv[4]), k = atoll(argv[5]), n = atoll(argv[6]);
        weights w = make_weights(type, m, k, (size_t)512 << 20);
        pkc_ptr x = dev_alloc(c, (size_t)(n * k) * 4), y = dev_alloc(c, (size_t)(n * m) * 4);
        CHECK(c, pkc_memset(c, x, 0x3c, (size_t)(n * k) * 4));
        for (int i = 0; i < 20; i++) CHECK(c, pkc_matmul(c, type, w.base + (uint64_t)(i % w.copies) * w.bytes, m, k, x, k, n, y, m));
        CHECK(c, pkc_synchronize(c));
        pkc_close(c);
        return 0;
    }
    const char *only = getenv("PKC_BENCH");
    if (!only || strstr(only, "copy")) bench_copy();
    if (!only || strstr(only, "int8")) bench_gemv8();
    if (!only || strstr(only, "rows")) bench_gemv_rows();
    if (!only || strstr(only, "gemv")) bench_gemv(quick);
    if (!only || strstr(only, "cross")) bench_crossover();
    if (!only || strstr(only, "gemm")) bench_gemm();
    if (!only || strstr(only, "attn")) bench_attention();
    pkc_close(c);
    return 0;
}
