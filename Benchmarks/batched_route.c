// The batched (prefill) product of a quantized matrix by two routes, timed side by side: the
// int8 tiles (pk_matmul_many, what Plinth runs) and the matrix dequantized to f32 then
// cblas_sgemm (the design card's alternative, with OpenBLAS's core type as the environment
// sets it). Developer tool, not part of the package; links the kernels' sources directly.
//   cc -O2 -march=native -D_GNU_SOURCE -IKernels -IKernels/include $(pkg-config --cflags openblas) \
//      -o /tmp/batched_route Benchmarks/batched_route.c Kernels/*.c -lopenblas -llapacke -lm -lpthread
//   OPENBLAS_NUM_THREADS=2 OPENBLAS_CORETYPE=SkylakeX /tmp/batched_route
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pk_matmul.h"
#include "pk_pool.h"
#include "pk_quants.h"

#include "timing.h"

int main(void) {
    const int types[] = {PK_PQ2, PK_Q4_0, PK_Q4_1};
    const int64_t m = 1536, k = 576; // SmolLM2's ffn_gate/up shape
    const int64_t ns[] = {16, 64, 256, 512};
    pk_pool *pool = pk_pool_create(2);
    float *w = malloc(sizeof(float) * m * k), *wf = malloc(sizeof(float) * m * k);
    for (int64_t i = 0; i < m * k; i++) w[i] = (float)((rand() % 2001) - 1000) / 30000.0f;
    printf("| type | n | int8 tiles ms | dequantize + sgemm ms | sgemm alone ms | sgemm alone / tiles |\n"
           "| --- | --- | --- | --- | --- | --- |\n");
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        pk_type_info info;
        pk_type_info_of(types[ti], &info);
        uint8_t *q = malloc((size_t)(m * k / info.block_elements) * info.block_bytes);
        pk_quantize(types[ti], w, q, m * k);
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
            const int64_t n = ns[ni];
            float *x = malloc(sizeof(float) * n * k), *y = malloc(sizeof(float) * n * m);
            for (int64_t i = 0; i < n * k; i++) x[i] = (float)((rand() % 2001) - 1000) / 300.0f;
            void *scratch = aligned_alloc(64, (pk_matmul_scratch_bytes(n, k, 2) + 63) / 64 * 64);
            pk_matmul_op op = {.type = types[ti], .w = q, .m = m, .y = y, .ldy = m, .packed = NULL};
            const double tiles = BEST(7, pk_matmul_many(pool, &op, 1, k, x, n, scratch));
            const double sgemm = BEST(7, {
                pk_dequantize(types[ti], q, wf, m * k);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)m, (int)k, 1.0f, x, (int)k, wf, (int)k, 0.0f, y, (int)m);
            });
            // The route's best case: the f32 matrix already there (dequantizing for free).
            const double alone = BEST(7, cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)m, (int)k, 1.0f, x,
                                                     (int)k, wf, (int)k, 0.0f, y, (int)m));
            printf("| %s | %lld | %.3f | %.3f | %.3f | %.2f |\n", info.name, (long long)n, tiles * 1e3, sgemm * 1e3, alone * 1e3,
                   alone / tiles);
            free(x), free(y), free(scratch);
        }
        free(q);
    }
    pk_pool_destroy(pool);
    return 0;
}
