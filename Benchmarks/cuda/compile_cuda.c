// Compiles PlinthCUDA's kernel modules with NVRTC, without a GPU or a driver: a build check of
// the device source (each module's -DPKC_FORMAT configuration) and a measure of the first-use
// compile time, on one thread and on several.
//   compile_cuda [--arch 90] [--ptx] [--types 3,8] [--save DIR] [THREADS...]
// --ptx: PTX for compute_<arch>, as a load makes for a device newer than NVRTC knows. --types: the
// common module and those formats only (ggml type ids; default every format), as a first load of
// a model with those weight types compiles. --save: each module's output into DIR (pkc-core.ptx,
// pkc-8-q8_0.ptx, ...; .cubin without --ptx), for launch_resources.py. THREADS default: 1, then the
// machine's CPUs. NVRTC is found as pk_cuda.c finds it ($PLINTH_CUDA_LIB_DIR, CUDA_HOME, ...);
// NVRTC from PyPI (nvidia-cuda-nvrtc-cu12) works. Exit status 0 only when every module compiled.
#include "pk_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int arch = 90, ptx = 0, types[64], ntypes = -1, threads[16], count = 0;
    const char *save = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc) {
            arch = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--ptx") == 0) {
            ptx = 1;
        } else if (strcmp(argv[i], "--save") == 0 && i + 1 < argc) {
            save = argv[++i];
        } else if (strcmp(argv[i], "--types") == 0 && i + 1 < argc) {
            ntypes = 0;
            for (char *s = argv[++i], *end; *s && ntypes < 64; s = *end ? end + 1 : end) types[ntypes++] = (int)strtol(s, &end, 10);
        } else if (count < 16 && atoi(argv[i]) > 0) {
            threads[count++] = atoi(argv[i]);
        } else {
            fprintf(stderr, "usage: compile_cuda [--arch 90] [--ptx] [--types 3,8] [--save DIR] [THREADS...]\n");
            return 2;
        }
    }
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (count == 0) {
        threads[count++] = 1;
        if (cpus > 1) threads[count++] = (int)(cpus > 16 ? 16 : cpus);
    }
    char err[2048];
    for (int i = 0; i < count; i++) {
        double seconds = 0;
        size_t bytes = 0;
        const int st = pkc_compile_check(arch, ptx, ntypes < 0 ? NULL : types, ntypes, threads[i], save, &seconds, &bytes, err, sizeof err);
        if (st != PKC_OK) {
            printf("%s_%d: %s: %s\n", ptx ? "compute" : "sm", arch, pkc_status_name(st), err);
            return 1;
        }
        printf("%s_%d: the common module and %s compiled on %d thread%s in %.1f s (%zu bytes of %s)\n", ptx ? "compute" : "sm", arch,
               ntypes < 0 ? "every format's" : "the named formats'", threads[i], threads[i] == 1 ? "" : "s", seconds, bytes,
               ptx ? "PTX" : "cubin");
    }
    return 0;
}
