// AVX-512 (with VNNI) tile kernels: qtile_simd.h on one zmm register per sixteen lanes.
#if defined(__x86_64__)
#pragma clang fp contract(off)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#define QT_AVX512 1
#define QT_NAME(x) x##_avx512
#include "qtile_simd.h"
#pragma clang attribute pop
#endif
