// OpenBLAS set-up, done before OpenBLAS initializes itself.
//
// Debian's OpenBLAS (0.3.21) takes AVX-512 CPUs it does not know for "Haswell" and runs AVX2
// kernels at about half the speed of its SkylakeX ones; and its own thread pool would compete
// with Plinth's, which already calls BLAS from every core. Both are read from the environment
// once, when the library loads, so they are set from the executable's pre-initialization array,
// which the dynamic loader runs before any shared library's constructor. A value the user set
// is left alone.
#include <stdlib.h>

#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
static void pk_configure_openblas(int argc, char **argv, char **envp) {
    (void)argc; (void)argv; (void)envp;
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
}

__attribute__((section(".preinit_array"), used))
static void (*const pk_preinit)(int, char **, char **) = pk_configure_openblas;

// Referenced by the pool so that the linker keeps this object (and its pre-init entry).
int pk_blas_configured = 1;
#else
int pk_blas_configured = 0;
#endif
