// AVX2 tile kernels: qtile_simd.h on two ymm registers per sixteen lanes, without VNNI.
#if defined(__x86_64__)
#pragma clang fp contract(off)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#define QT_AVX512 0
#define QT_NAME(x) x##_avx2
#include "qtile_simd.h"
#pragma clang attribute pop
#endif
