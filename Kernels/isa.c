#include "isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int cpu_has_avx2(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

static int cpu_has_avx512(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

static _Atomic int chosen_isa = -1;

int pk_isa(void) {
    int isa = atomic_load_explicit(&chosen_isa, memory_order_relaxed);
    if (isa < 0) {
        isa = cpu_has_avx512() ? PK_ISA_AVX512 : cpu_has_avx2() ? PK_ISA_AVX2 : PK_ISA_SCALAR;
        const char *want = getenv("PLINTH_ISA");
        if (want && strcmp(want, "avx2") == 0 && isa >= PK_ISA_AVX2) isa = PK_ISA_AVX2;
        if (want && strcmp(want, "scalar") == 0) isa = PK_ISA_SCALAR;
        atomic_store_explicit(&chosen_isa, isa, memory_order_relaxed);
    }
    return isa;
}

int pk_set_isa(int isa) {
    if ((isa == PK_ISA_AVX512 && cpu_has_avx512()) || (isa == PK_ISA_AVX2 && cpu_has_avx2()) || isa == PK_ISA_SCALAR)
        atomic_store_explicit(&chosen_isa, isa, memory_order_relaxed);
    return pk_isa();
}
