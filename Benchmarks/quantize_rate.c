// The activation quantizer's rate (ns per value, one thread) on prefill-sized inputs, per
// instruction set, each checked to give the scalar reference's bytes. Developer tool, not part
// of the package: it includes Kernels/matmul.c to reach the quantizers, which are internal.
//   clang -O2 -march=native -D_GNU_SOURCE -IKernels -IKernels/include $(pkg-config --cflags openblas) \
//      -o /tmp/quantize_rate Benchmarks/quantize_rate.c $(ls Kernels/*.c | grep -v matmul.c) \
//      -lopenblas -llapacke -lm -lpthread
//   /tmp/quantize_rate [rows]
#include "../Kernels/matmul.c"

#include <stdio.h>

#include "timing.h"

int main(int argc, char **argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 512;
    const int64_t ks[] = {576, 896, 1536, 4864};
    const char *kinds[] = {"Q8_0", "Q8_1", "Q8_K"};
    printf("| k | activation format | scalar ns/value | AVX2 | AVX-512 |\n| ---: | --- | ---: | ---: | ---: |\n");
    int failures = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        const int64_t k = ks[ki];
        float *x = malloc(sizeof(float) * (size_t)(n * k));
        // values with an outlier every 97, a zero block every 7th, so every path is taken
        for (int64_t i = 0; i < n * k; i++) x[i] = (float)((rand() % 20001) - 10000) / 300.0f * (i % 97 == 0 ? 20.0f : 1.0f);
        for (int64_t i = 0; i < n * k; i += 32 * 7) memset(x + i, 0, sizeof(float) * 32);
        const size_t bytes = act_bytes(n, k);
        uint8_t *ref = aligned_alloc(64, bytes), *got = aligned_alloc(64, bytes);
        for (int kind = 0; kind < ACT_KINDS; kind++) {
            memset(ref, 0, bytes);
            quantize_scalar(x, 0, n, k, kind, act_at(ref, n, k));
            void (*const fns[])(const float *, int64_t, int64_t, int64_t, int, act_buf) = {quantize_scalar, quantize_avx2, quantize_avx512};
            double ns[3];
            for (int f = 0; f < 3; f++) {
                memset(got, 0, bytes);
                const act_buf a = act_at(got, n, k);
                ns[f] = BEST(20, fns[f](x, 0, n, k, kind, a)) * 1e9 / (double)(n * k);
                if (memcmp(got, ref, bytes)) {
                    printf("set %d differs from the scalar reference (k %lld, %s)\n", f, (long long)k, kinds[kind]);
                    failures++;
                }
            }
            printf("| %lld | %s | %.3f | %.3f | %.3f |\n", (long long)k, kinds[kind], ns[0], ns[1], ns[2]);
        }
        free(x), free(ref), free(got);
    }
    return failures != 0;
}
