// PlinthCUDA host side: the driver API, NVRTC and cuBLAS through dlopen, the kernel cache, and
// the launches. Plain C11; no CUDA header is needed to build it: the few types, constants and
// signatures used are declared here, from the CUDA documentation.
#define _GNU_SOURCE
#include "pk_cuda.h"
#include "pkc_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// ---- the driver API, NVRTC and cuBLAS as far as used -------------------------------------------

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NO_DEVICE = 100,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_STREAM_NON_BLOCKING = 1,
    CU_EVENT_DISABLE_TIMING = 2,
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
};

// cuLaunchKernelEx's configuration, laid out as cuda.h's CUlaunchAttribute (an id, then a
// 64-byte union at offset 8) and CUlaunchConfig.
typedef struct CUlaunchAttribute {
    int id;
    int pad_;
    union {
        char bytes[64];
        int programmatic_serialization;
        unsigned long long align_;
    } value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig {
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
    CUstream stream;
    CUlaunchAttribute *attrs;
    unsigned attr_count;
} CUlaunchConfig;
_Static_assert(sizeof(CUlaunchAttribute) == 72 && sizeof(CUlaunchConfig) == 56, "cuda.h's layouts");

typedef struct cu_api {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*StreamBeginCapture)(CUstream, int);
    CUresult (*StreamEndCapture)(CUstream, CUgraph *);
    CUresult (*GraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*GraphLaunch)(CUgraphExec, CUstream);
    CUresult (*GraphExecDestroy)(CUgraphExec);
    CUresult (*GraphDestroy)(CUgraph);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **); // optional (older drivers lack it)
} cu_api;

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef struct nvrtc_api {
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                 const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*GetErrorString)(nvrtcResult);
    nvrtcResult (*GetNumSupportedArchs)(int *); // optional (NVRTC 11.2+)
    nvrtcResult (*GetSupportedArchs)(int *);    // optional
} nvrtc_api;

typedef int cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;
enum {
    CUBLAS_OP_N = 0, CUBLAS_OP_T = 1,
    CUDA_R_32F = 0, CUDA_R_16F = 2,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_GEMM_DEFAULT = -1,
};
typedef struct cublas_api {
    cublasStatus_t (*Create)(cublasHandle_t *);
    cublasStatus_t (*Destroy)(cublasHandle_t);
    cublasStatus_t (*SetStream)(cublasHandle_t, CUstream);
    cublasStatus_t (*SetWorkspace)(cublasHandle_t, void *, size_t); // optional (cuBLAS 11.4+)
    cublasStatus_t (*GemmEx)(cublasHandle_t, int, int, int, int, int, const void *, const void *, int, int,
                             const void *, int, int, const void *, void *, int, int, int, int);
} cublas_api;

// ---- formats ---------------------------------------------------------------------------------

typedef struct fmt_info {
    int type;
    const char *name;
    int block_elements, block_bytes;
} fmt_info;

static const fmt_info fmts[] = {
    {0, "f32", 16, 64},     {1, "f16", 16, 32},     {30, "bf16", 16, 32},   {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},    {6, "q5_0", 32, 22},    {7, "q5_1", 32, 24},    {8, "q8_0", 32, 34},
    {10, "q2_k", 256, 84},  {11, "q3_k", 256, 110}, {12, "q4_k", 256, 144}, {13, "q5_k", 256, 176},
    {14, "q6_k", 256, 210}, {20, "iq4_nl", 32, 18},   {23, "iq4_xs", 256, 136}, {1024, "pq2", 32, 10},
};
#define NFMT ((int)(sizeof fmts / sizeof fmts[0]))
#define GEMV_MAX_ROWS 8
#define NORM_MAX_ROWS 2 // the GEMVs with pkc_matmul_add_norm's tail (pkc_kernels.cu)
#define PKC_TOPK_THREADS 256 // pkc_kernels.cu's TOPK_THREADS
#define PKC_TOPK_BLOCKS 32   // pkc_kernels.cu's TOPK_BLOCKS
#define TOPK_ROWS 256        // pkc_topk: rows per launch (its scratch)
#define GEMV_WARPS 4
#define ATT_MAXG 8
#define ATT_TILE 128
#define ATT_THREADS 128

static int fmt_index(int type) {
    for (int i = 0; i < NFMT; i++)
        if (fmts[i].type == type) return i;
    return -1;
}

// F32, F16 and BF16 have no codes: their GEMV always reads float x.
static int is_float_format(int i) { return fmts[i].type == 0 || fmts[i].type == 1 || fmts[i].type == 30; }

// Whether the GEMV of an m x k matrix of format i reads x's int8 rows when it has them. Measured
// on an H100 (Benchmarks/cuda/README.md, round 4, graph-replayed, n = 1): int8 x wins for Q4_1,
// Q8_0 and Q4_K at every shape; for Q5_0 only on matrices of 4M weights (896 x 4864: 4.91 -> 4.14
// us), losing on those under 1M (896 x 896: 4.07 -> 4.36); Q6_K loses at both shapes (896 x 4864:
// 4.39 -> 5.26), its per-group scales costing more than the bytes save. Q5_1 is taken as Q5_0.
static int prefers_int8(int i, int64_t m, int64_t k) {
    switch (fmts[i].type) {
    case 14: return 0;                                  // Q6_K
    case 6: case 7: return m * k >= ((int64_t)2 << 20); // Q5_0, Q5_1
    default: return !is_float_format(i);
    }
}

// ---- the context -------------------------------------------------------------------------------

struct pkc_graph {
    CUgraph graph;
    CUgraphExec exec;
};

// One weight format's kernels, from its own module (loaded when first needed: load_modules).
typedef struct fmt_kernels {
    CUmodule module; // NULL until loaded
    // gemv_r[n - 1]: the variant of two rows of W per lane group at n rows of x (n = 1, 2).
    CUfunction gemv[GEMV_MAX_ROWS], gemv_r[2], dq32, dq16, rows, embed;
    // The int8-row GEMVs of the quantized formats (NULL for the float ones).
    CUfunction gemv8[GEMV_MAX_ROWS], gemv8_r[2];
    // The gated products (pkc_matmul_glu) at 1 and 2 rows of x: float x, int8 x.
    CUfunction glu[2], glu8[2];
} fmt_kernels;

struct pkc_context {
    void *libcuda, *libnvrtc, *libcublas;
    cu_api cu;
    nvrtc_api nv;
    cublas_api cb;
    CUdevice dev;
    CUcontext cuctx;
    int ctx_retained;
    CUstream stream;
    CUmodule core;     // the core module's kernels (the ones below); the formats' are in fk
    fmt_kernels fk[NFMT];
    int arch;          // the sm_XX the modules are compiled for (compute_XX where ptx)
    int ptx;           // 1: the modules are PTX for compute_<arch>, which the driver compiles for the device
    char cache_dir[900];
    cublasHandle_t blas;
    CUevent ev0, ev1;
    // pkc_matmul_runs: a second stream for the runs after the first, forked from and joined to
    // the stream by these events (in a capture: parallel branches of the graph).
    CUstream side;
    CUevent fork, join;
    CUfunction quantize_q8, rms, rope_table, rope, swiglu, add, scale, add_bias, to_f16, argmax, topk, store_kv, qkv_rope_store, qkv_norm_rope_store, attn[ATT_MAXG], attn_combine, attn_mma[3], lora,
        lora_embed, copy_kv;
    CUdeviceptr scratch_w, scratch_x, scratch_a, blas_ws;
    CUdeviceptr argmax_part, argmax_count; // pkc_argmax's per-block results and per-row counters
    CUdeviceptr norm_count; // pkc_matmul_add_norm's ticket counter (back to 0 after each launch)
    CUdeviceptr topk_part, topk_count; // pkc_topk's per-block lists and per-row counters
    size_t cap_w, cap_x, cap_a;
    int64_t gemm_min_rows;
    int64_t gemv_min_warps; // gemv_rows_per_group
    int gemv_force_r;       // $PLINTH_CUDA_GEMV_R (0: the policy)
    int64_t gemv_wide_warps; // gemv_lanes: a launch with fewer warps widens its lane groups
    int int8_rows;           // int8 rows of x where given: 0 by prefers_int8, 1 always, -1 never ($PLINTH_CUDA_INT8=0)
    int glu_fused;           // pkc_glu_fused ($PLINTH_CUDA_GLU=0: never)
    int norm_fused;          // pkc_matmul_add_norm's norm in the GEMV's last block ($PLINTH_CUDA_NORM_FUSED=0: never)
    int rope_fused;          // pkc_matmul_runs_rope_store's rope and store in the GEMVs' last block ($PLINTH_CUDA_ROPE_FUSED=0: never)
    int runs_overlap;        // pkc_matmul_runs's side stream ($PLINTH_CUDA_OVERLAP=0: one run after another)
    int mma_attention;       // pkc_attention_prompt's tensor cores (sm_80+; $PLINTH_CUDA_MMA_ATTN=0: never)
    // Programmatic dependent launch (pkc_set_dependent_launch): whether this device and driver
    // have it (and passed the self-test at open), and whether it is on.
    int pdl_ok, pdl;
    // The stream whose last operation was one of our kernels, if any: only a kernel launched
    // right after another on its stream is launched to overlap it.
    CUstream kernel_last;
    int capturing;
    // f16 copies of weights the GEMM path reads instead of dequantizing them (pkc_cache_f16),
    // sorted by weight address.
    struct f16_copy { CUdeviceptr w, f16; int64_t m, k; int fi; } *f16;
    int f16_count, f16_cap;
    pkc_device_info info;
    char err[2048];
};

static int failv(pkc_context *c, int status, const char *fmt, va_list ap) {
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    return status;
}

static int fail(pkc_context *c, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    failv(c, status, fmt, ap);
    va_end(ap);
    return status;
}

static int cu_fail(pkc_context *c, CUresult r, const char *what) {
    const char *name = NULL, *text = NULL;
    if (c->cu.GetErrorName) c->cu.GetErrorName(r, &name);
    if (c->cu.GetErrorString) c->cu.GetErrorString(r, &text);
    return fail(c, r == CUDA_ERROR_OUT_OF_MEMORY ? PKC_ERR_OUT_OF_MEMORY : PKC_ERR_DRIVER, "%s failed: %s (%s, %d)",
                what, name ? name : "CUDA error", text ? text : "no description", r);
}

#define CU(c, call, what)                                   \
    do {                                                    \
        const CUresult r_ = (call);                         \
        if (r_ != CUDA_SUCCESS) return cu_fail(c, r_, what); \
    } while (0)

// Process exit. The driver tears itself down at exit; a thread still inside a call then (a
// scheduler thread releasing its context while the main thread returns from main) would race
// that teardown and crash. Every call holds this lock for reading (nested calls count once per
// thread); at exit a handler, registered after the libraries were loaded so that it runs before
// their destructors, takes it for writing and keeps it: calls in flight finish first, and later
// ones wait until the process is gone.
static pthread_rwlock_t exit_lock = PTHREAD_RWLOCK_INITIALIZER;
static _Atomic int exiting;
static _Thread_local int call_depth;

static void hold_at_exit(void) {
    exiting = 1;
    pthread_rwlock_wrlock(&exit_lock);
}

static void register_exit_hold(void) { atexit(hold_at_exit); }

typedef struct { int unused; } call_guard;

static call_guard enter_call(void) {
    if (call_depth++ == 0) {
        if (exiting) for (;;) pause();
        pthread_rwlock_rdlock(&exit_lock);
    }
    return (call_guard){0};
}

static void leave_call(call_guard *g) {
    (void)g;
    if (--call_depth == 0) pthread_rwlock_unlock(&exit_lock);
}

#define GUARD call_guard guard_ __attribute__((cleanup(leave_call))) = enter_call()

// Makes the context current on the calling thread (the caller may move between threads).
#define ENTER(c)                                                                       \
    GUARD;                                                                             \
    do {                                                                               \
        if (!(c)) return PKC_ERR_INVALID;                                              \
        CU(c, (c)->cu.CtxSetCurrent((c)->cuctx), "cuCtxSetCurrent");                   \
    } while (0)

const char *pkc_error(const pkc_context *ctx) { return ctx ? ctx->err : "no context"; }

const char *pkc_status_name(int status) {
    switch (status) {
    case PKC_OK: return "ok";
    case PKC_ERR_NO_DRIVER: return "no driver";
    case PKC_ERR_NO_DEVICE: return "no device";
    case PKC_ERR_NO_NVRTC: return "no NVRTC";
    case PKC_ERR_NO_CUBLAS: return "no cuBLAS";
    case PKC_ERR_DRIVER: return "driver error";
    case PKC_ERR_COMPILE: return "kernel compilation failed";
    case PKC_ERR_CUBLAS: return "cuBLAS error";
    case PKC_ERR_OUT_OF_MEMORY: return "out of device memory";
    case PKC_ERR_INVALID: return "invalid argument";
    case PKC_ERR_UNSUPPORTED: return "unsupported";
    default: return "unknown status";
    }
}

// ---- libraries ---------------------------------------------------------------------------------

// Tries each name as given (the loader's search path), then in the usual CUDA folders.
static void *open_library(const char *const *names, char *tried, size_t tried_size) {
    const char *env_dirs[] = {getenv("PLINTH_CUDA_LIB_DIR"), getenv("CUDA_HOME"), getenv("CUDA_PATH")};
    const char *fixed_dirs[] = {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                                "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu",
                                "/usr/lib/aarch64-linux-gnu"};
    char path[1024];
    tried[0] = 0;
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        // The loader's own reason for the first name is the one worth reporting.
        const char *e = dlerror();
        if (i == 0) snprintf(tried, tried_size, "%s", e ? e : "not found");
    }
    for (int pass = 0; pass < 2; pass++) {
        const int count = pass == 0 ? 3 : (int)(sizeof fixed_dirs / sizeof fixed_dirs[0]);
        for (int d = 0; d < count; d++) {
            const char *dir = pass == 0 ? env_dirs[d] : fixed_dirs[d];
            if (!dir || !*dir) continue;
            for (int i = 0; names[i]; i++) {
                // CUDA_HOME and CUDA_PATH name the toolkit's root: its libraries are in lib64.
                if (pass == 0 && d > 0) snprintf(path, sizeof path, "%s/lib64/%s", dir, names[i]);
                else snprintf(path, sizeof path, "%s/%s", dir, names[i]);
                void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (h) return h;
            }
        }
    }
    return NULL;
}

// Resolves `count` symbols into the function-pointer table `table`; names[i] NULL-terminated
// alternatives are not needed here. Returns the first missing required name, or NULL.
static const char *bind(void *lib, void **slots, const char *const *names, const int *optional, int count) {
    for (int i = 0; i < count; i++) {
        void *f = dlsym(lib, names[i]);
        if (!f && !(optional && optional[i])) return names[i];
        slots[i] = f;
    }
    return NULL;
}

static int load_driver(pkc_context *c) {
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    char why[512];
    c->libcuda = open_library(names, why, sizeof why);
    if (!c->libcuda) return fail(c, PKC_ERR_NO_DRIVER, "no NVIDIA driver: libcuda.so.1 could not be opened (%s)", why);
    static const char *const syms[] = {
        "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute",
        "cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent",
        "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuMemAlloc_v2", "cuMemFree_v2",
        "cuMemGetInfo_v2", "cuMemGetAddressRange_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemsetD8Async",
        "cuModuleLoadData", "cuModuleUnload", "cuModuleGetFunction", "cuFuncSetAttribute", "cuLaunchKernel",
        "cuEventCreate", "cuEventDestroy_v2", "cuEventRecord", "cuEventSynchronize", "cuEventElapsedTime",
        "cuStreamWaitEvent",
        "cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphLaunch",
        "cuGraphExecDestroy", "cuGraphDestroy", "cuGetErrorName", "cuGetErrorString", "cuLaunchKernelEx"};
    enum { count = (int)(sizeof syms / sizeof syms[0]) };
    _Static_assert(sizeof(cu_api) == count * sizeof(void *), "cu_api and its names");
    int optional[count] = {0};
    optional[count - 1] = 1;
    const char *missing = bind(c->libcuda, (void **)&c->cu, syms, optional, count);
    if (missing) return fail(c, PKC_ERR_NO_DRIVER, "the NVIDIA driver is too old: libcuda.so.1 lacks %s", missing);
    return PKC_OK;
}

static int load_nvrtc(pkc_context *c) {
    static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", NULL};
    char why[512];
    c->libnvrtc = open_library(names, why, sizeof why);
    if (!c->libnvrtc)
        return fail(c, PKC_ERR_NO_NVRTC,
                    "NVRTC not found: libnvrtc.so(.13/.12) could not be opened (%s); install the CUDA toolkit's "
                    "NVRTC or set PLINTH_CUDA_LIB_DIR", why);
    static const char *const syms[] = {"nvrtcVersion", "nvrtcCreateProgram", "nvrtcCompileProgram",
                                       "nvrtcGetProgramLogSize", "nvrtcGetProgramLog", "nvrtcGetCUBINSize",
                                       "nvrtcGetCUBIN", "nvrtcGetPTXSize", "nvrtcGetPTX", "nvrtcDestroyProgram",
                                       "nvrtcGetErrorString", "nvrtcGetNumSupportedArchs", "nvrtcGetSupportedArchs"};
    static const int optional[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    _Static_assert(sizeof(nvrtc_api) == sizeof syms / sizeof syms[0] * sizeof(void *), "nvrtc_api and its names");
    const char *missing = bind(c->libnvrtc, (void **)&c->nv, syms, optional, (int)(sizeof syms / sizeof syms[0]));
    if (missing) return fail(c, PKC_ERR_NO_NVRTC, "NVRTC is too old: it lacks %s (CUDA 11.1 or later needed)", missing);
    return PKC_OK;
}

static int load_cublas(pkc_context *c) {
    static const char *const names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11", NULL};
    char why[512];
    c->libcublas = open_library(names, why, sizeof why);
    if (!c->libcublas)
        return fail(c, PKC_ERR_NO_CUBLAS, "cuBLAS not found: libcublas.so(.13/.12) could not be opened (%s)", why);
    static const char *const syms[] = {"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2",
                                       "cublasSetWorkspace_v2", "cublasGemmEx"};
    static const int optional[] = {0, 0, 0, 1, 0};
    _Static_assert(sizeof(cublas_api) == sizeof syms / sizeof syms[0] * sizeof(void *), "cublas_api and its names");
    const char *missing = bind(c->libcublas, (void **)&c->cb, syms, optional, (int)(sizeof syms / sizeof syms[0]));
    if (missing) return fail(c, PKC_ERR_NO_CUBLAS, "cuBLAS is too old: it lacks %s", missing);
    return PKC_OK;
}

// ---- kernel cache ------------------------------------------------------------------------------

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define CACHE_MAGIC 0x554b4350u // "PCKU"
#define CACHE_VERSION 1u

typedef struct cache_header {
    uint32_t magic, version;
    uint64_t key, size, checksum;
} cache_header;

static int mkdir_p(const char *dir) {
    char path[1024];
    const size_t len = strlen(dir);
    if (len == 0 || len >= sizeof path) return -1;
    memcpy(path, dir, len + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

// Reads a cache entry; returns a malloc'd cubin of *size bytes, or NULL when absent or corrupt.
static void *cache_read(const char *path, uint64_t key, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    cache_header h;
    void *data = NULL;
    if (fread(&h, sizeof h, 1, f) == 1 && h.magic == CACHE_MAGIC && h.version == CACHE_VERSION && h.key == key &&
        h.size > 0 && h.size < ((uint64_t)1 << 31)) {
        data = malloc((size_t)h.size);
        if (data && (fread(data, 1, (size_t)h.size, f) != h.size || fnv1a(0xcbf29ce484222325ull, data, (size_t)h.size) != h.checksum)) {
            free(data);
            data = NULL;
        }
        if (data) *size = (size_t)h.size;
    }
    fclose(f);
    return data;
}

// Writes a cache entry through a temporary file and a rename, so readers never see half of one.
static void cache_write(const char *path, uint64_t key, const void *data, size_t size) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    const cache_header h = {CACHE_MAGIC, CACHE_VERSION, key, size, fnv1a(0xcbf29ce484222325ull, data, size)};
    const int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(data, 1, size, f) == size;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) unlink(tmp);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// How an architecture is named: compute_XX for PTX, sm_XX for machine code.
static const char *arch_kind(int ptx) { return ptx ? "compute" : "sm"; }

// What the modules are built as (c->arch, c->ptx) for a device of compute capability cc: machine
// code for the device's own architecture where NVRTC knows it, else for the newest it knows of
// the device's major version (machine code runs on later minors of its major). A device newer
// than every architecture NVRTC knows (a new GPU, an older toolkit) gets PTX for the newest, which
// the driver compiles for it at load. A device older than all of them (NVRTC 13 has no sm_70)
// cannot be served by this NVRTC.
static int pick_arch(pkc_context *c, int cc) {
    c->arch = cc;
    c->ptx = 0;
    int count = 0;
    if (!c->nv.GetNumSupportedArchs || !c->nv.GetSupportedArchs || c->nv.GetNumSupportedArchs(&count) != 0 ||
        count <= 0 || count > 256)
        return PKC_OK;
    int archs[256], same = 0, oldest = 0, newest = 0;
    if (c->nv.GetSupportedArchs(archs) != 0) return PKC_OK;
    for (int i = 0; i < count; i++) {
        if (archs[i] == cc) return PKC_OK;
        if (archs[i] / 10 == cc / 10 && archs[i] < cc && archs[i] > same) same = archs[i];
        if (!oldest || archs[i] < oldest) oldest = archs[i];
        if (archs[i] > newest) newest = archs[i];
    }
    if (same) c->arch = same;
    else if (newest < cc) c->arch = newest, c->ptx = 1;
    else
        return fail(c, PKC_ERR_UNSUPPORTED, "NVRTC %d.%d builds kernels for sm_%d to sm_%d, not for %s (sm_%d): point "
                    "PLINTH_CUDA_LIB_DIR at an NVRTC that still supports it (CUDA 12 for sm_70)", c->info.nvrtc_major,
                    c->info.nvrtc_minor, oldest, newest, c->info.name, cc);
    return PKC_OK;
}

// ---- kernel modules ----------------------------------------------------------------------------
//
// The kernel source is compiled as modules: the core one (norms, RoPE, attention, argmax, ...)
// at open, and one per weight format (pkc_kernels.cu with -DPKC_FORMAT=<type>) when a format is
// first needed or named to pkc_prepare, which compiles the missing ones on parallel threads. A
// model pays for the formats it uses, not all fourteen (each module is ~1.5-3.5 s of NVRTC).
// Each module is cached as its own cubin, keyed by the source, the module, the arch and NVRTC.

#define CORE_MODULE (-1)

typedef struct module_job {
    const nvrtc_api *nv;
    int arch, ptx, fi; // as the context's; fi: a format index, or CORE_MODULE
    uint64_t key;
    char path[1024];
    void *cubin;
    size_t size;
    int status, from_cache;
    char err[1600];
} module_job;

static const char *module_name(int fi) { return fi == CORE_MODULE ? "core" : fmts[fi].name; }

// NVRTC on one module; touches nothing shared but the (thread-safe) library.
static void compile_module(module_job *j) {
    char arch_opt[64], fmt_opt[64];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%d", arch_kind(j->ptx), j->arch);
    snprintf(fmt_opt, sizeof fmt_opt, "-DPKC_FORMAT=%d", j->fi == CORE_MODULE ? -1 : fmts[j->fi].type);
    const char *opts[] = {arch_opt, "--std=c++17", "-default-device", fmt_opt};
    const nvrtc_api *nv = j->nv;
    nvrtcProgram prog = NULL;
    nvrtcResult r = nv->CreateProgram(&prog, pkc_kernels_source, "pkc_kernels.cu", 0, NULL, NULL);
    if (r != 0) {
        j->status = PKC_ERR_COMPILE;
        snprintf(j->err, sizeof j->err, "nvrtcCreateProgram failed: %s", nv->GetErrorString(r));
        return;
    }
    r = nv->CompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
    if (r != 0) {
        size_t log_size = 0;
        char log[1200] = "";
        if (nv->GetProgramLogSize(prog, &log_size) == 0 && log_size > 1) {
            char *full = malloc(log_size);
            if (full && nv->GetProgramLog(prog, full) == 0) {
                snprintf(log, sizeof log, "%s", full);
                for (char *p = log; *p; p++)
                    if (*p == '\n') *p = ' ';
            }
            free(full);
        }
        nv->DestroyProgram(&prog);
        j->status = PKC_ERR_COMPILE;
        snprintf(j->err, sizeof j->err, "NVRTC could not compile the %s kernels for %s_%d: %s: %s", module_name(j->fi),
                 arch_kind(j->ptx), j->arch, nv->GetErrorString(r), log);
        return;
    }
    // PTX is text: its size counts the NUL that cuModuleLoadData reads to.
    size_t n = 0;
    r = j->ptx ? nv->GetPTXSize(prog, &n) : nv->GetCUBINSize(prog, &n);
    void *bin = (r == 0 && n > 0) ? malloc(n) : NULL;
    if (!bin || (j->ptx ? nv->GetPTX(prog, bin) : nv->GetCUBIN(prog, bin)) != 0) {
        free(bin);
        nv->DestroyProgram(&prog);
        j->status = PKC_ERR_COMPILE;
        snprintf(j->err, sizeof j->err, "NVRTC produced no %s for the %s kernels (%s_%d)", j->ptx ? "PTX" : "cubin",
                 module_name(j->fi), arch_kind(j->ptx), j->arch);
        return;
    }
    nv->DestroyProgram(&prog);
    j->cubin = bin;
    j->size = n;
    j->status = PKC_OK;
}

typedef struct job_queue {
    module_job *jobs;
    int count;
    _Atomic int next;
} job_queue;

static void *compile_worker(void *arg) {
    job_queue *q = arg;
    for (int i; (i = q->next++) < q->count;)
        if (!q->jobs[i].cubin) compile_module(&q->jobs[i]);
    return NULL;
}

// Compiles the jobs that have no cubin yet, on up to `threads` threads (the calling one
// included; a thread that cannot be started leaves its share to the others).
static void compile_jobs(module_job *jobs, int count, int threads) {
    job_queue q = {jobs, count, 0};
    if (threads > count) threads = count;
    if (threads > 16) threads = 16;
    pthread_t t[16];
    int started = 0;
    for (int i = 1; i < threads; i++)
        if (pthread_create(&t[started], NULL, compile_worker, &q) == 0) started++;
    compile_worker(&q);
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
}

static int compile_threads(void) {
    const char *env = getenv("PLINTH_CUDA_COMPILE_THREADS");
    if (env && atoi(env) > 0) return atoi(env);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1 : cpus > 16 ? 16 : (int)cpus;
}

static uint64_t module_key(int arch, int ptx, int fi, int major, int minor) {
    char keytext[160];
    snprintf(keytext, sizeof keytext, "|%s_%d|nvrtc %d.%d|cache %u|module %s", arch_kind(ptx), arch, major, minor,
             CACHE_VERSION, module_name(fi));
    const uint64_t key = fnv1a(0xcbf29ce484222325ull, pkc_kernels_source, strlen(pkc_kernels_source));
    return fnv1a(key, keytext, strlen(keytext));
}

static int get_function(pkc_context *c, CUmodule m, CUfunction *f, const char *name) {
    const CUresult r = c->cu.ModuleGetFunction(f, m, name);
    if (r != CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "cuModuleGetFunction(%s)", name);
        return cu_fail(c, r, what);
    }
    return PKC_OK;
}

static int get_core_functions(pkc_context *c, CUmodule m) {
    char name[64];
    int st;
    for (int g = 1; g <= ATT_MAXG; g++) {
        snprintf(name, sizeof name, "pkc_attention_g%d", g);
        if ((st = get_function(c, m, &c->attn[g - 1], name))) return st;
    }
    struct { CUfunction *f; const char *name; } named[] = {
        {&c->quantize_q8, "pkc_quantize_q8"}, {&c->rms, "pkc_rms_norm"}, {&c->rope_table, "pkc_rope_table"}, {&c->rope, "pkc_rope"},
        {&c->swiglu, "pkc_swiglu"}, {&c->add, "pkc_add"}, {&c->scale, "pkc_scale"}, {&c->add_bias, "pkc_add_bias"},
        {&c->to_f16, "pkc_to_f16"}, {&c->argmax, "pkc_argmax"}, {&c->topk, "pkc_topk"}, {&c->store_kv, "pkc_store_kv"}, {&c->qkv_rope_store, "pkc_qkv_rope_store"},
        {&c->qkv_norm_rope_store, "pkc_qkv_norm_rope_store"},
        {&c->attn_combine, "pkc_attention_combine"}, {&c->lora, "pkc_lora"},
        {&c->lora_embed, "pkc_lora_embed"}, {&c->copy_kv, "pkc_copy_kv"}, {&c->attn_mma[0], "pkc_attention_mma_h64"},
        {&c->attn_mma[1], "pkc_attention_mma_h128"}, {&c->attn_mma[2], "pkc_attention_mma_h256"}};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if ((st = get_function(c, m, named[i].f, named[i].name))) return st;
    return PKC_OK;
}

static int get_format_functions(pkc_context *c, int i, CUmodule m) {
    fmt_kernels *f = &c->fk[i];
    const char *nm = fmts[i].name;
    char name[64];
    int st;
    for (int n = 1; n <= GEMV_MAX_ROWS; n++) {
        snprintf(name, sizeof name, "pkc_gemv_%s_%d_r1", nm, n);
        if ((st = get_function(c, m, &f->gemv[n - 1], name))) return st;
        if (is_float_format(i)) continue;
        snprintf(name, sizeof name, "pkc_gemv8_%s_%d_r1", nm, n);
        if ((st = get_function(c, m, &f->gemv8[n - 1], name))) return st;
    }
    for (int n = 1; n <= 2; n++) {
        snprintf(name, sizeof name, "pkc_gemv_%s_%d_r2", nm, n);
        if ((st = get_function(c, m, &f->gemv_r[n - 1], name))) return st;
        snprintf(name, sizeof name, "pkc_gemv_%s_%d_glu", nm, n);
        if ((st = get_function(c, m, &f->glu[n - 1], name))) return st;
        if (is_float_format(i)) continue;
        snprintf(name, sizeof name, "pkc_gemv8_%s_%d_r2", nm, n);
        if ((st = get_function(c, m, &f->gemv8_r[n - 1], name))) return st;
        snprintf(name, sizeof name, "pkc_gemv8_%s_%d_glu", nm, n);
        if ((st = get_function(c, m, &f->glu8[n - 1], name))) return st;
    }
    snprintf(name, sizeof name, "pkc_dequant_f32_%s", nm);
    if ((st = get_function(c, m, &f->dq32, name))) return st;
    snprintf(name, sizeof name, "pkc_dequant_f16_%s", nm);
    if ((st = get_function(c, m, &f->dq16, name))) return st;
    snprintf(name, sizeof name, "pkc_get_rows_%s", nm);
    if ((st = get_function(c, m, &f->rows, name))) return st;
    snprintf(name, sizeof name, "pkc_embed_norm_rope_%s", nm);
    return get_function(c, m, &f->embed, name);
}

// Loads a module's cubin and takes its functions; the module is kept only when both work.
static int install_module(pkc_context *c, int fi, const void *cubin) {
    CUmodule m = NULL;
    const CUresult r = c->cu.ModuleLoadData(&m, cubin);
    if (r != CUDA_SUCCESS) {
        // The likely cause where NVRTC is of a later CUDA than the driver (a driver loads the
        // machine code of its own major's toolkits, and PTX of its version or older): say so.
        char what[400];
        const int nvrtc = c->info.nvrtc_major * 1000 + c->info.nvrtc_minor * 10, driver = c->info.driver_version;
        if (nvrtc > driver)
            snprintf(what, sizeof what, "cuModuleLoadData (the %s kernels, from NVRTC %d.%d, newer than the driver's CUDA %d.%d: "
                     "update the driver, or point PLINTH_CUDA_LIB_DIR at an NVRTC no newer than it)", module_name(fi),
                     c->info.nvrtc_major, c->info.nvrtc_minor, driver / 1000, driver % 1000 / 10);
        else
            snprintf(what, sizeof what, "cuModuleLoadData (the %s kernels)", module_name(fi));
        return cu_fail(c, r, what);
    }
    const int st = fi == CORE_MODULE ? get_core_functions(c, m) : get_format_functions(c, fi, m);
    if (st) {
        c->cu.ModuleUnload(m);
        return st;
    }
    if (fi == CORE_MODULE) c->core = m;
    else c->fk[fi].module = m;
    return PKC_OK;
}

// The distinct format indexes of `types` (NULL: every format) into want; returns how many, or
// minus the status (the message set) for a type the kernels do not handle.
static int format_set(pkc_context *c, const char *what, const int *types, int count, int want[NFMT]) {
    int n = 0;
    for (int i = 0; i < (types ? count : NFMT); i++) {
        const int fi = types ? fmt_index(types[i]) : i;
        if (fi < 0) return -fail(c, PKC_ERR_UNSUPPORTED, "%s: weight type %d is not supported by the CUDA kernels", what, types[i]);
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= want[j] == fi;
        if (!seen) want[n++] = fi;
    }
    return n;
}

// Makes the distinct modules `want` (format indexes or CORE_MODULE; loaded ones are skipped)
// ready: each from the cache when a valid entry loads, else compiled (in parallel) and then
// cached.
static int load_modules(pkc_context *c, const int *want, int count) {
    int missing = -2;
    for (int i = 0; i < count && missing == -2; i++)
        if (want[i] == CORE_MODULE ? !c->core : !c->fk[want[i]].module) missing = want[i];
    if (missing == -2) return PKC_OK;
    if (c->capturing)
        return fail(c, PKC_ERR_INVALID, "the %s kernels are needed during graph capture: call pkc_prepare with the model's "
                    "weight types first", module_name(missing));
    const double t0 = now_seconds();
    module_job *jobs = calloc((size_t)count, sizeof *jobs);
    if (!jobs) return fail(c, PKC_ERR_OUT_OF_MEMORY, "out of host memory");
    int n = 0, st = PKC_OK;
    for (int i = 0; i < count; i++) {
        const int fi = want[i];
        if (fi == CORE_MODULE ? c->core != NULL : c->fk[fi].module != NULL) continue;
        module_job *j = &jobs[n++];
        j->nv = &c->nv;
        j->arch = c->arch;
        j->ptx = c->ptx;
        j->fi = fi;
        j->key = module_key(c->arch, c->ptx, fi, c->info.nvrtc_major, c->info.nvrtc_minor);
        if (c->cache_dir[0])
            snprintf(j->path, sizeof j->path, "%s/plinth-kernels-%s_%d-%s-%016llx.%s", c->cache_dir, arch_kind(c->ptx),
                     c->arch, module_name(fi), (unsigned long long)j->key, c->ptx ? "ptx" : "cubin");
        j->cubin = j->path[0] ? cache_read(j->path, j->key, &j->size) : NULL;
        j->from_cache = j->cubin != NULL;
    }
    // A cached cubin that passes its checksum but does not load is compiled again.
    for (int i = 0; i < n; i++) {
        if (!jobs[i].cubin || install_module(c, jobs[i].fi, jobs[i].cubin) == PKC_OK) continue;
        free(jobs[i].cubin);
        jobs[i].cubin = NULL;
        jobs[i].from_cache = 0;
    }
    int compile = 0;
    for (int i = 0; i < n; i++) compile += !jobs[i].from_cache;
    if (compile) compile_jobs(jobs, n, compile_threads());
    // Each module that compiled is installed and cached, whatever became of the others; the first
    // failure is the one reported.
    char first[sizeof c->err] = "";
    for (int i = 0; i < n; i++) {
        module_job *j = &jobs[i];
        if (!j->from_cache) {
            const int s = j->status ? fail(c, j->status, "%s", j->err) : install_module(c, j->fi, j->cubin);
            if (s == PKC_OK && j->path[0]) cache_write(j->path, j->key, j->cubin, j->size);
            if (s != PKC_OK && st == PKC_OK) {
                st = s;
                snprintf(first, sizeof first, "%s", c->err);
            }
        }
        free(j->cubin);
    }
    if (st != PKC_OK) snprintf(c->err, sizeof c->err, "%s", first);
    free(jobs);
    if (compile) c->info.kernels_from_cache = 0;
    c->info.compile_seconds += now_seconds() - t0;
    return st;
}

// The core module at open (the formats come later).
static int load_kernels(pkc_context *c, const char *cache_dir) {
    int major = 0, minor = 0;
    c->nv.Version(&major, &minor);
    c->info.nvrtc_major = major;
    c->info.nvrtc_minor = minor;
    int st = pick_arch(c, c->info.cc_major * 10 + c->info.cc_minor);
    if (st) return st;
    c->info.kernel_arch = c->arch;
    c->info.kernel_ptx = c->ptx;
    c->info.kernels_from_cache = 1;
    if (cache_dir && *cache_dir && strlen(cache_dir) < sizeof c->cache_dir && mkdir_p(cache_dir) == 0)
        snprintf(c->cache_dir, sizeof c->cache_dir, "%s", cache_dir);
    const int core = CORE_MODULE;
    return load_modules(c, &core, 1);
}

int pkc_prepare(pkc_context *c, const int *types, int count) {
    ENTER(c);
    if (count < 0 || (count > 0 && !types)) return fail(c, PKC_ERR_INVALID, "pkc_prepare: no types");
    int want[NFMT];
    const int n = format_set(c, "pkc_prepare", types, count, want);
    return n < 0 ? -n : n ? load_modules(c, want, n) : PKC_OK;
}

// Writes a compiled module where pkc_compile_check is told to keep it.
static int save_module(pkc_context *c, const char *dir, const module_job *j) {
    char path[1200], module[64] = "core";
    if (j->fi != CORE_MODULE) snprintf(module, sizeof module, "%d-%s", fmts[j->fi].type, fmts[j->fi].name);
    snprintf(path, sizeof path, "%s/pkc-%s.%s", dir, module, j->ptx ? "ptx" : "cubin");
    FILE *f = fopen(path, "wb");
    // PTX's size counts its NUL, which a text file leaves out.
    const size_t n = j->ptx && j->size ? j->size - 1 : j->size;
    int ok = f && fwrite(j->cubin, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    return ok ? PKC_OK : fail(c, PKC_ERR_INVALID, "pkc_compile_check: writing %s: %s", path, strerror(errno));
}

int pkc_compile_check(int arch, int ptx, const int *types, int count, int threads, const char *save_dir, double *seconds,
                      size_t *cubin_bytes, char *error, size_t error_size) {
    if (error && error_size) error[0] = 0;
    pkc_context *c = calloc(1, sizeof *c);
    module_job *jobs = calloc(NFMT + 1, sizeof *jobs);
    int st = c && jobs ? load_nvrtc(c) : PKC_ERR_OUT_OF_MEMORY;
    int want[NFMT], n = 0;
    if (st == PKC_OK && (n = format_set(c, "pkc_compile_check", types, count, want)) < 0) st = -n;
    if (st == PKC_OK) {
        jobs[0].fi = CORE_MODULE;
        for (int i = 0; i < n; i++) jobs[i + 1].fi = want[i];
        n++;
        for (int i = 0; i < n; i++) {
            jobs[i].nv = &c->nv;
            jobs[i].arch = arch;
            jobs[i].ptx = ptx != 0;
        }
        const double t0 = now_seconds();
        compile_jobs(jobs, n, threads > 0 ? threads : compile_threads());
        if (seconds) *seconds = now_seconds() - t0;
        size_t bytes = 0;
        for (int i = 0; i < n; i++) {
            if (jobs[i].status && !st) st = fail(c, jobs[i].status, "%s", jobs[i].err);
            if (!jobs[i].status && save_dir && !st) st = save_module(c, save_dir, &jobs[i]);
            bytes += jobs[i].size;
            free(jobs[i].cubin);
        }
        if (cubin_bytes) *cubin_bytes = bytes;
    }
    if (error && error_size) snprintf(error, error_size, "%s", c ? c->err : "out of host memory");
    free(jobs);
    free(c);
    return st;
}

// ---- open / close ------------------------------------------------------------------------------

// Measured on an H100 (Benchmarks/cuda/README.md): up to 8 rows the GEMV wins or ties on most
// shapes (one launch of its widest kernel); from 9 rows it would take two launches and the GEMM
// path wins everywhere.
#define DEFAULT_GEMM_MIN_ROWS 9
#define DEFAULT_GEMV_MIN_WARPS 2048
// A GEMV launch of fewer warps than this (a few long rows: Qwen2.5's 896 x 4864 made 896 warps,
// 10% achieved occupancy) doubles its lanes per row, up to a block of 128, while each lane keeps
// two units.
#define DEFAULT_GEMV_WIDE_WARPS 2048
#define BLAS_WORKSPACE (32u << 20)
// pkc_argmax: rows per launch (its scratch) and blocks per row at most.
#define ARGMAX_ROWS 1024
#define ARGMAX_MAX_BLOCKS 64

static int setup_dependent_launch(pkc_context *c);

// The tensor-core attention (mma.sync m16n8k16) needs kernels built for sm_80 or newer: the
// architecture they are built for, which is never newer than the device.
static int mma_capable(const pkc_context *c) { return c->arch >= 80; }

// A saving's switch: off where the variable is "0", on otherwise (unset included).
static int switched_off(const char *variable) {
    const char *v = getenv(variable);
    return v && strcmp(v, "0") == 0;
}

static int open_device(pkc_context *c, int ordinal, const char *cache_dir) {
    int st = load_driver(c);
    if (st) return st;
    CUresult r = c->cu.Init(0);
    if (r == CUDA_ERROR_NO_DEVICE) return fail(c, PKC_ERR_NO_DEVICE, "no CUDA device: the NVIDIA driver found no GPU");
    if (r != CUDA_SUCCESS) {
        cu_fail(c, r, "cuInit");
        char why[sizeof c->err];
        snprintf(why, sizeof why, "%s", c->err);
        return fail(c, PKC_ERR_NO_DEVICE, "no usable CUDA device: %s", why);
    }
    int count = 0;
    CU(c, c->cu.DeviceGetCount(&count), "cuDeviceGetCount");
    if (count <= 0) return fail(c, PKC_ERR_NO_DEVICE, "no CUDA device: the NVIDIA driver found no GPU");
    if (ordinal < 0 || ordinal >= count)
        return fail(c, PKC_ERR_NO_DEVICE, "no CUDA device %d (the driver has %d)", ordinal, count);
    CU(c, c->cu.DeviceGet(&c->dev, ordinal), "cuDeviceGet");
    CU(c, c->cu.DeviceGetName(c->info.name, (int)sizeof c->info.name, c->dev), "cuDeviceGetName");
    CU(c, c->cu.DeviceGetAttribute(&c->info.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->dev), "cuDeviceGetAttribute");
    CU(c, c->cu.DeviceGetAttribute(&c->info.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->dev), "cuDeviceGetAttribute");
    CU(c, c->cu.DeviceGetAttribute(&c->info.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev), "cuDeviceGetAttribute");
    CU(c, c->cu.DriverGetVersion(&c->info.driver_version), "cuDriverGetVersion");
    CU(c, c->cu.DeviceTotalMem(&c->info.total_memory, c->dev), "cuDeviceTotalMem");
    if (c->info.cc_major < 7)
        return fail(c, PKC_ERR_NO_DEVICE, "%s (compute capability %d.%d) is too old: 7.0 or later is needed",
                    c->info.name, c->info.cc_major, c->info.cc_minor);
    // The primary context: the one cuBLAS (through the runtime) uses too.
    CU(c, c->cu.DevicePrimaryCtxRetain(&c->cuctx, c->dev), "cuDevicePrimaryCtxRetain");
    c->ctx_retained = 1;
    CU(c, c->cu.CtxSetCurrent(c->cuctx), "cuCtxSetCurrent");
    CU(c, c->cu.StreamCreate(&c->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CU(c, c->cu.EventCreate(&c->ev0, 0), "cuEventCreate");
    CU(c, c->cu.EventCreate(&c->ev1, 0), "cuEventCreate");
    CU(c, c->cu.StreamCreate(&c->side, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CU(c, c->cu.EventCreate(&c->fork, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    CU(c, c->cu.EventCreate(&c->join, CU_EVENT_DISABLE_TIMING), "cuEventCreate");

    if ((st = load_nvrtc(c))) return st;
    if ((st = load_kernels(c, cache_dir))) return st;

    if ((st = load_cublas(c))) return st;
    cublasStatus_t s = c->cb.Create(&c->blas);
    if (s != 0) {
        c->blas = NULL;
        return fail(c, PKC_ERR_NO_CUBLAS, "cublasCreate failed (status %d)", s);
    }
    if ((s = c->cb.SetStream(c->blas, c->stream)) != 0) return fail(c, PKC_ERR_CUBLAS, "cublasSetStream failed (status %d)", s);
    // A workspace of our own, so that cuBLAS allocates nothing later (graph capture included).
    if (c->cb.SetWorkspace) {
        CU(c, c->cu.MemAlloc(&c->blas_ws, BLAS_WORKSPACE), "cuMemAlloc (cuBLAS workspace)");
        if ((s = c->cb.SetWorkspace(c->blas, (void *)(uintptr_t)c->blas_ws, BLAS_WORKSPACE)) != 0)
            return fail(c, PKC_ERR_CUBLAS, "cublasSetWorkspace failed (status %d)", s);
    }
    CU(c, c->cu.MemAlloc(&c->argmax_part, (size_t)ARGMAX_ROWS * ARGMAX_MAX_BLOCKS * 12), "cuMemAlloc (argmax)");
    CU(c, c->cu.MemAlloc(&c->argmax_count, (size_t)ARGMAX_ROWS * 4), "cuMemAlloc (argmax)");
    CU(c, c->cu.MemsetD8Async(c->argmax_count, 0, (size_t)ARGMAX_ROWS * 4, c->stream), "cuMemsetD8Async (argmax)");
    CU(c, c->cu.MemAlloc(&c->norm_count, 16), "cuMemAlloc (norm counter)");
    CU(c, c->cu.MemAlloc(&c->topk_part, (size_t)TOPK_ROWS * PKC_TOPK_BLOCKS * PKC_TOPK_MAX * 8), "cuMemAlloc (top-k)");
    CU(c, c->cu.MemAlloc(&c->topk_count, (size_t)TOPK_ROWS * 4), "cuMemAlloc (top-k)");
    CU(c, c->cu.MemsetD8Async(c->topk_count, 0, (size_t)TOPK_ROWS * 4, c->stream), "cuMemsetD8Async (top-k)");
    CU(c, c->cu.MemsetD8Async(c->norm_count, 0, 16, c->stream), "cuMemsetD8Async (norm counter)");
    c->gemm_min_rows = DEFAULT_GEMM_MIN_ROWS;
    const char *env = getenv("PLINTH_CUDA_GEMM_MIN_ROWS");
    if (env && atoll(env) > 0) c->gemm_min_rows = atoll(env);
    c->gemv_min_warps = DEFAULT_GEMV_MIN_WARPS;
    if ((env = getenv("PLINTH_CUDA_GEMV_MIN_WARPS")) && atoll(env) > 0) c->gemv_min_warps = atoll(env);
    if ((env = getenv("PLINTH_CUDA_GEMV_R"))) c->gemv_force_r = atoi(env);
    c->gemv_wide_warps = DEFAULT_GEMV_WIDE_WARPS;
    if ((env = getenv("PLINTH_CUDA_GEMV_WIDE_WARPS")) && atoll(env) >= 0) c->gemv_wide_warps = atoll(env);
    c->int8_rows = switched_off("PLINTH_CUDA_INT8") ? -1 : 0;
    c->glu_fused = !switched_off("PLINTH_CUDA_GLU");
    c->norm_fused = !switched_off("PLINTH_CUDA_NORM_FUSED");
    c->rope_fused = !switched_off("PLINTH_CUDA_ROPE_FUSED");
    c->runs_overlap = !switched_off("PLINTH_CUDA_OVERLAP");
    c->mma_attention = mma_capable(c) && !switched_off("PLINTH_CUDA_MMA_ATTN");
    return setup_dependent_launch(c);
}

static int probed_devices;

static void probe_devices(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    CUresult (*init)(unsigned) = (CUresult (*)(unsigned))dlsym(lib, "cuInit");
    CUresult (*count)(int *) = (CUresult (*)(int *))dlsym(lib, "cuDeviceGetCount");
    int n = 0;
    if (init && count && init(0) == CUDA_SUCCESS && count(&n) == CUDA_SUCCESS && n > 0) probed_devices = n;
    // The driver stays loaded, as pkc_open leaves it.
}

int pkc_device_count(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, probe_devices);
    return probed_devices;
}

int pkc_open(int ordinal, const char *cache_dir, pkc_context **out, char *error, size_t error_size) {
    if (out) *out = NULL;
    if (error && error_size) error[0] = 0;
    if (!out) return PKC_ERR_INVALID;
    pkc_context *c = calloc(1, sizeof *c);
    if (!c) {
        if (error && error_size) snprintf(error, error_size, "out of host memory");
        return PKC_ERR_OUT_OF_MEMORY;
    }
    GUARD;
    const int st = open_device(c, ordinal, cache_dir);
    if (st != PKC_OK) {
        if (error && error_size) snprintf(error, error_size, "%s", c->err);
        pkc_close(c);
        return st;
    }
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_exit_hold);
    *out = c;
    return PKC_OK;
}

void pkc_close(pkc_context *c) {
    if (!c) return;
    GUARD;
    if (c->cuctx && c->cu.CtxSetCurrent) {
        c->cu.CtxSetCurrent(c->cuctx);
        if (c->stream) c->cu.StreamSynchronize(c->stream);
        if (c->blas) c->cb.Destroy(c->blas);
        CUdeviceptr bufs[] = {c->scratch_w, c->scratch_x, c->scratch_a, c->blas_ws, c->argmax_part, c->argmax_count, c->norm_count,
                                c->topk_part, c->topk_count};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) c->cu.MemFree(bufs[i]);
        for (int i = 0; i < c->f16_count; i++) c->cu.MemFree(c->f16[i].f16);
        if (c->core) c->cu.ModuleUnload(c->core);
        for (int i = 0; i < NFMT; i++)
            if (c->fk[i].module) c->cu.ModuleUnload(c->fk[i].module);
        if (c->ev0) c->cu.EventDestroy(c->ev0);
        if (c->ev1) c->cu.EventDestroy(c->ev1);
        if (c->fork) c->cu.EventDestroy(c->fork);
        if (c->join) c->cu.EventDestroy(c->join);
        if (c->side) c->cu.StreamDestroy(c->side);
        if (c->stream) c->cu.StreamDestroy(c->stream);
        if (c->ctx_retained) c->cu.DevicePrimaryCtxRelease(c->dev);
    }
    // cuBLAS and NVRTC stay loaded: unloading libraries that may have registered handlers at
    // exit is not worth the risk; the driver likewise.
    free(c->f16);
    free(c);
}

int pkc_device_info_get(pkc_context *c, pkc_device_info *info) {
    ENTER(c);
    if (!info) return fail(c, PKC_ERR_INVALID, "pkc_device_info_get: info is NULL");
    size_t free_bytes = 0, total = 0;
    CU(c, c->cu.MemGetInfo(&free_bytes, &total), "cuMemGetInfo");
    c->info.free_memory = free_bytes;
    *info = c->info;
    return PKC_OK;
}

// ---- memory ------------------------------------------------------------------------------------

// The bytes of m x k values in f16 (the GEMM path's copies and scratch).
static size_t f16_bytes(int64_t m, int64_t k) { return (size_t)(m * k) * 2; }

int pkc_alloc(pkc_context *c, size_t bytes, pkc_ptr *out) {
    ENTER(c);
    if (!out || bytes == 0) return fail(c, PKC_ERR_INVALID, "pkc_alloc: zero bytes or no output");
    CUdeviceptr p = 0;
    CU(c, c->cu.MemAlloc(&p, bytes), "cuMemAlloc");
    *out = p;
    return PKC_OK;
}

int pkc_free(pkc_context *c, pkc_ptr ptr) {
    ENTER(c);
    if (!ptr) return PKC_OK;
    if (c->capturing) return fail(c, PKC_ERR_INVALID, "pkc_free: not during graph capture");
    if (c->f16_count) {
        // The f16 copies of weights in this allocation go with it (its addresses may be reused).
        CUdeviceptr base = 0;
        size_t size = 0;
        CU(c, c->cu.MemGetAddressRange(&base, &size, ptr), "cuMemGetAddressRange");
        int kept = 0, synced = 0;
        for (int i = 0; i < c->f16_count; i++) {
            const struct f16_copy e = c->f16[i];
            if (e.w < base || e.w >= base + size) {
                c->f16[kept++] = e;
                continue;
            }
            // Work in flight may still read it. A failure here returns before the table changed.
            if (!synced) CU(c, c->cu.StreamSynchronize(c->stream), "cuStreamSynchronize");
            synced = 1;
            c->cu.MemFree(e.f16); // out of the table whatever this says
            c->info.f16_weight_bytes -= f16_bytes(e.m, e.k);
        }
        c->f16_count = kept;
    }
    CU(c, c->cu.MemFree(ptr), "cuMemFree");
    return PKC_OK;
}

int pkc_upload(pkc_context *c, pkc_ptr dst, const void *src, size_t bytes) {
    ENTER(c);
    if (bytes == 0) return PKC_OK;
    // From pageable memory the copy is staged before this returns, so src may be reused.
    c->kernel_last = NULL;
    CU(c, c->cu.MemcpyHtoDAsync(dst, src, bytes, c->stream), "cuMemcpyHtoDAsync");
    return PKC_OK;
}

int pkc_download(pkc_context *c, void *dst, pkc_ptr src, size_t bytes) {
    ENTER(c);
    c->kernel_last = NULL;
    if (bytes) CU(c, c->cu.MemcpyDtoHAsync(dst, src, bytes, c->stream), "cuMemcpyDtoHAsync");
    CU(c, c->cu.StreamSynchronize(c->stream), "cuStreamSynchronize");
    return PKC_OK;
}

int pkc_download_rows(pkc_context *c, float *dst, pkc_ptr src, int64_t ld, const int32_t *rows, int64_t count,
                      int64_t width) {
    ENTER(c);
    if (count < 0 || width < 0 || ld < width || (count > 0 && (!rows || !dst)))
        return fail(c, PKC_ERR_INVALID, "pkc_download_rows: bad sizes");
    c->kernel_last = NULL;
    for (int64_t i = 0; i < count; i++) {
        if (rows[i] < 0) return fail(c, PKC_ERR_INVALID, "pkc_download_rows: negative row %d", rows[i]);
        CU(c, c->cu.MemcpyDtoHAsync(dst + i * width, src + (uint64_t)((int64_t)rows[i] * ld) * 4, (size_t)width * 4, c->stream),
           "cuMemcpyDtoHAsync");
    }
    CU(c, c->cu.StreamSynchronize(c->stream), "cuStreamSynchronize");
    return PKC_OK;
}

int pkc_copy(pkc_context *c, pkc_ptr dst, pkc_ptr src, size_t bytes) {
    ENTER(c);
    c->kernel_last = NULL;
    if (bytes) CU(c, c->cu.MemcpyDtoDAsync(dst, src, bytes, c->stream), "cuMemcpyDtoDAsync");
    return PKC_OK;
}

int pkc_memset(pkc_context *c, pkc_ptr dst, uint8_t value, size_t bytes) {
    ENTER(c);
    c->kernel_last = NULL;
    if (bytes) CU(c, c->cu.MemsetD8Async(dst, value, bytes, c->stream), "cuMemsetD8Async");
    return PKC_OK;
}

int pkc_synchronize(pkc_context *c) {
    ENTER(c);
    CU(c, c->cu.StreamSynchronize(c->stream), "cuStreamSynchronize");
    return PKC_OK;
}

// Grows a scratch buffer to at least `bytes` (rounded up to 2 MiB); waits for the stream first,
// since work in flight may still read the old one.
static int ensure(pkc_context *c, CUdeviceptr *buf, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return PKC_OK;
    if (c->capturing)
        return fail(c, PKC_ERR_INVALID, "scratch of %zu bytes needed during graph capture: call pkc_reserve first", bytes);
    const size_t rounded = (bytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    CU(c, c->cu.StreamSynchronize(c->stream), "cuStreamSynchronize");
    if (*buf) CU(c, c->cu.MemFree(*buf), "cuMemFree");
    *buf = 0;
    *cap = 0;
    CU(c, c->cu.MemAlloc(buf, rounded), "cuMemAlloc (scratch)");
    *cap = rounded;
    return PKC_OK;
}

int pkc_reserve(pkc_context *c, int64_t m, int64_t k, int64_t n) {
    ENTER(c);
    if (m < 0 || k < 0 || n < 0) return fail(c, PKC_ERR_INVALID, "pkc_reserve: negative size");
    int st = ensure(c, &c->scratch_w, &c->cap_w, f16_bytes(m, k));
    if (!st) st = ensure(c, &c->scratch_x, &c->cap_x, f16_bytes(n, k));
    return st;
}

int pkc_timer_start(pkc_context *c) {
    ENTER(c);
    c->kernel_last = NULL;
    CU(c, c->cu.EventRecord(c->ev0, c->stream), "cuEventRecord");
    return PKC_OK;
}

int pkc_timer_stop(pkc_context *c, float *ms) {
    ENTER(c);
    c->kernel_last = NULL;
    CU(c, c->cu.EventRecord(c->ev1, c->stream), "cuEventRecord");
    CU(c, c->cu.EventSynchronize(c->ev1), "cuEventSynchronize");
    float v = 0.0f;
    CU(c, c->cu.EventElapsedTime(&v, c->ev0, c->ev1), "cuEventElapsedTime");
    if (ms) *ms = v;
    return PKC_OK;
}

int pkc_graph_begin(pkc_context *c) {
    ENTER(c);
    if (c->capturing) return fail(c, PKC_ERR_INVALID, "pkc_graph_begin: already capturing");
    c->kernel_last = NULL;
    CU(c, c->cu.StreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    c->capturing = 1;
    return PKC_OK;
}

int pkc_graph_end(pkc_context *c, pkc_graph **out) {
    ENTER(c);
    if (!c->capturing || !out) return fail(c, PKC_ERR_INVALID, "pkc_graph_end: not capturing");
    c->capturing = 0;
    c->kernel_last = NULL;
    *out = NULL;
    CUgraph g = NULL;
    CU(c, c->cu.StreamEndCapture(c->stream, &g), "cuStreamEndCapture");
    CUgraphExec e = NULL;
    const CUresult r = c->cu.GraphInstantiateWithFlags(&e, g, 0);
    if (r != CUDA_SUCCESS) {
        c->cu.GraphDestroy(g);
        return cu_fail(c, r, "cuGraphInstantiateWithFlags");
    }
    pkc_graph *h = malloc(sizeof *h);
    if (!h) {
        c->cu.GraphExecDestroy(e);
        c->cu.GraphDestroy(g);
        return fail(c, PKC_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    h->graph = g;
    h->exec = e;
    *out = h;
    return PKC_OK;
}

int pkc_graph_launch(pkc_context *c, pkc_graph *g) {
    ENTER(c);
    if (!g) return fail(c, PKC_ERR_INVALID, "pkc_graph_launch: no graph");
    c->kernel_last = NULL;
    CU(c, c->cu.GraphLaunch(g->exec, c->stream), "cuGraphLaunch");
    return PKC_OK;
}

void pkc_graph_destroy(pkc_context *c, pkc_graph *g) {
    if (!c || !g) return;
    GUARD;
    c->cu.CtxSetCurrent(c->cuctx);
    c->cu.GraphExecDestroy(g->exec);
    c->cu.GraphDestroy(g->graph);
    free(g);
}

// ---- launches ----------------------------------------------------------------------------------

// A kernel that follows another on its stream is launched to overlap it where dependent launch
// is on: its blocks may be scheduled while that one finishes, and wait in PKC_DEPENDENT() for
// its results, so the gap between the two (a few microseconds in a decode step of ~150 small
// launches) is mostly hidden. After a copy, an event or a cuBLAS call it is an ordinary launch.
static int launch(pkc_context *c, CUfunction f, const char *name, uint64_t gx, unsigned gy, unsigned block,
                  unsigned shared, void **args) {
    if (gx == 0 || gy == 0) return PKC_OK;
    if (gx > 0x7fffffffu) return fail(c, PKC_ERR_INVALID, "%s: grid of %llu blocks is too large", name, (unsigned long long)gx);
    CUresult r;
    if (c->pdl && c->kernel_last == c->stream) {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmatic_serialization = 1;
        const CUlaunchConfig cfg = {(unsigned)gx, gy, 1, block, 1, 1, shared, c->stream, &attr, 1};
        r = c->cu.LaunchKernelEx(&cfg, f, args, NULL);
        if (r == CUDA_SUCCESS) c->info.dependent_launches++;
    } else {
        r = c->cu.LaunchKernel(f, (unsigned)gx, gy, 1, block, 1, 1, shared, c->stream, args, NULL);
    }
    c->kernel_last = r == CUDA_SUCCESS ? c->stream : NULL;
    if (r == CUDA_SUCCESS) c->info.kernel_launches++;
    if (r != CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "launch of %s", name);
        return cu_fail(c, r, what);
    }
    return PKC_OK;
}

static uint64_t blocks_for(int64_t threads, unsigned block) { return (uint64_t)((threads + block - 1) / block); }

// A row's norm block: a thread per value up to 1024, so one load of x per thread in each pass,
// no loop (a decode step's norm is one block, a chain of latencies).
static unsigned norm_threads(int64_t k) { return k >= 1024 ? 1024u : (unsigned)((k + 31) / 32 * 32); }

// pkc_kernels.cu's RopeFreqs: a table (0: none) and its frequencies. The angle step between pairs
// is the host's powf, as pk_rope_table computes it, so the angles are the CPU's bits.
typedef struct {
    pkc_ptr table, factors;
    float theta_scale, freq_scale;
} rope_freqs;

static rope_freqs rope_freqs_of(pkc_rope_freqs f, int rope_dims, pkc_ptr table) {
    rope_freqs r = {table, f.factors, powf(f.base, -2.0f / (float)rope_dims), f.scale};
    return r;
}

// Whether frequencies can make a table: a positive finite base and scale.
static int rope_freqs_valid(pkc_rope_freqs f) { return f.base > 0.0f && isfinite(f.base) && f.scale > 0.0f && isfinite(f.scale); }

// Whether a product's input rows at n rows are f16 rows (the GEMM path's) rather than int8 rows.
static int rows_f16(const pkc_context *c, int64_t n) { return n >= c->gemm_min_rows; }

// Checks an int8 row buffer's arguments (when q is given).
static int check_q8(pkc_context *c, const char *what, int64_t k, pkc_ptr q, int64_t ldq) {
    if (q && (k % 32 != 0 || ldq < (int64_t)pkc_q8_row_bytes(k) || ldq % 16 != 0 || q % 16 != 0))
        return fail(c, PKC_ERR_INVALID, "%s: int8 rows need k a multiple of 32, ldq >= pkc_q8_row_bytes(k) and 16-byte alignment",
                    what);
    return PKC_OK;
}

// Checks an input row buffer's arguments (when q is given) for n rows of k: int8 rows below the
// GEMM path, f16 rows on it (ldq >= 2k bytes).
static int check_rows(pkc_context *c, const char *what, int64_t k, int64_t n, pkc_ptr q, int64_t ldq) {
    if (!q || !rows_f16(c, n)) return check_q8(c, what, k, q, ldq);
    if (ldq < 2 * k || ldq % 16 != 0 || q % 16 != 0)
        return fail(c, PKC_ERR_INVALID, "%s: f16 input rows need ldq >= 2k bytes and 16-byte alignment", what);
    return PKC_OK;
}

size_t pkc_input_row_bytes(const pkc_context *c, int64_t k, int64_t n) {
    return !c || k <= 0 ? 0 : rows_f16(c, n) ? (size_t)(2 * k + 15) / 16 * 16 : pkc_q8_row_bytes(k);
}

int pkc_supports_type(int type) { return fmt_index(type) >= 0; }

size_t pkc_row_bytes(int type, int64_t k) {
    const int i = fmt_index(type);
    if (i < 0 || k <= 0 || k % fmts[i].block_elements != 0) return 0;
    return (size_t)(k / fmts[i].block_elements) * (size_t)fmts[i].block_bytes;
}

// Checks a weight matrix's type and row length; returns its format index, or minus the status
// (the message set).
static int check_weights(pkc_context *c, const char *what, int type, pkc_ptr w, int64_t k) {
    const int i = fmt_index(type);
    if (i < 0) {
        return -fail(c, PKC_ERR_UNSUPPORTED, "%s: weight type %d is not supported by the CUDA kernels", what, type);
    }
    if (k <= 0 || k % fmts[i].block_elements != 0 || k > 0x7fffffff) {
        return -fail(c, PKC_ERR_INVALID, "%s: a row of %lld is not whole %s blocks (of %d)", what, (long long)k,
                     fmts[i].name, fmts[i].block_elements);
    }
    if (w % 16 != 0) {
        return -fail(c, PKC_ERR_INVALID, "%s: weights must be 16-byte aligned", what);
    }
    const int st = c->fk[i].module ? PKC_OK : load_modules(c, &i, 1);
    return st ? -st : i;
}

int pkc_dequantize(pkc_context *c, int type, pkc_ptr src, int64_t n, int64_t k, pkc_ptr dst, int64_t ldd) {
    ENTER(c);
    const int i = check_weights(c, "pkc_dequantize", type, src, k);
    if (i < 0) return -i;
    if (n < 0 || ldd < k || ldd % 4 != 0 || dst % 16 != 0)
        return fail(c, PKC_ERR_INVALID, "pkc_dequantize: bad n, ldd (a multiple of 4) or dst alignment");
    int64_t row_bytes = (int64_t)pkc_row_bytes(type, k);
    int kk = (int)k;
    void *args[] = {&src, &row_bytes, &n, &kk, &dst, &ldd};
    return launch(c, c->fk[i].dq32, "dequantize", blocks_for(n * (k / 16), 256), 1, 256, 0, args);
}

int pkc_get_rows(pkc_context *c, int type, pkc_ptr table, int64_t n_rows, int64_t k, pkc_ptr ids, int64_t n,
                 pkc_ptr out, int64_t ldo) {
    ENTER(c);
    const int i = check_weights(c, "pkc_get_rows", type, table, k);
    if (i < 0) return -i;
    if (n < 0 || ldo < k || ldo % 4 != 0 || out % 16 != 0)
        return fail(c, PKC_ERR_INVALID, "pkc_get_rows: bad n, ldo (a multiple of 4) or out alignment");
    int64_t row_bytes = (int64_t)pkc_row_bytes(type, k);
    int kk = (int)k;
    void *args[] = {&table, &row_bytes, &n_rows, &kk, &ids, &n, &out, &ldo};
    return launch(c, c->fk[i].rows, "get_rows", blocks_for(n * (k / 16), 256), 1, 256, 0, args);
}

int pkc_embed_norm_rope(pkc_context *c, int type, pkc_ptr table, int64_t n_rows, int64_t k, pkc_ptr ids, int64_t n,
                        pkc_ptr out, int64_t ldo, float scale, pkc_ptr w, pkc_ptr y, int64_t ldy, float eps, pkc_ptr q,
                        int64_t ldq, pkc_ptr positions, int rope_dims, const pkc_rope_freqs *freqs, const pkc_ptr *rope_tables,
                        int count) {
    ENTER(c);
    const int i = check_weights(c, "pkc_embed_norm_rope", type, table, k);
    if (i < 0) return -i;
    if (n < 0 || n > 0x7fffffff || ldo < k || ldo % 4 != 0 || out % 16 != 0 || ldy < k || count < 0 || count > 2 ||
        (count > 0 && (rope_dims <= 0 || rope_dims % 2 != 0 || !positions || !freqs || !rope_tables)))
        return fail(c, PKC_ERR_INVALID, "pkc_embed_norm_rope: bad sizes, ldo (a multiple of 4), out alignment or tables (at most 2)");
    for (int t = 0; t < count; t++)
        if (rope_tables[t] && !rope_freqs_valid(freqs[t]))
            return fail(c, PKC_ERR_INVALID, "pkc_embed_norm_rope: a RoPE base and scale must be positive and finite");
    int st = check_rows(c, "pkc_embed_norm_rope", k, n, q, ldq);
    if (st) return st;
    int64_t row_bytes = (int64_t)pkc_row_bytes(type, k);
    int kk = (int)k, pairs = rope_dims / 2, qf16 = q && rows_f16(c, n);
    rope_freqs r[2] = {{0, 0, 0.0f, 1.0f}, {0, 0, 0.0f, 1.0f}};
    for (int t = 0; t < count; t++)
        if (rope_tables[t]) r[t] = rope_freqs_of(freqs[t], rope_dims, rope_tables[t]);
    void *args[] = {&table, &row_bytes, &n_rows, &kk, &ids, &out, &ldo, &scale, &w, &y, &ldy, &eps, &q, &ldq, &qf16, &positions,
                    &pairs, &r[0], &r[1]};
    // pkc_rms_norm's block: a thread per value up to 1024.
    return launch(c, c->fk[i].embed, "embed_norm_rope", (uint64_t)n, 1, norm_threads(k), 0, args);
}

int pkc_set_gemv_rows_per_group(pkc_context *c, int rows) {
    if (!c) return 0;
    const int old = c->gemv_force_r;
    c->gemv_force_r = rows < 0 ? 0 : rows;
    return old;
}

int64_t pkc_set_gemm_min_rows(pkc_context *c, int64_t rows) {
    if (!c) return 0;
    const int64_t old = c->gemm_min_rows;
    c->gemm_min_rows = rows < 1 ? 1 : rows;
    return old;
}

static int cublas_fail(pkc_context *c, cublasStatus_t s, const char *what) {
    return fail(c, s == 3 ? PKC_ERR_OUT_OF_MEMORY : PKC_ERR_CUBLAS, "%s failed (cuBLAS status %d)", what, s);
}

// The weights' bytes a copy was made from.
static CUdeviceptr copy_source_end(const struct f16_copy *e) {
    return e->w + (CUdeviceptr)((size_t)e->m * pkc_row_bytes(fmts[e->fi].type, e->k));
}

// The m x k weights at w (format fi) dequantized to f16 rows of k at dst.
static int dequant_f16(pkc_context *c, int fi, pkc_ptr w, int64_t m, int64_t k, CUdeviceptr dst) {
    int64_t row_bytes = (int64_t)pkc_row_bytes(fmts[fi].type, k), ldd = k;
    int kk = (int)k;
    void *args[] = {&w, &row_bytes, &m, &kk, &dst, &ldd};
    return launch(c, c->fk[fi].dq16, "dequantize to f16", blocks_for(m * (k / 16), 256), 1, 256, 0, args);
}

// How many copies' weights start at or before w. The table is sorted by w and its copies' weights
// never overlap, so copy [result - 1] is the only one that can hold w.
static int copies_up_to(const pkc_context *c, CUdeviceptr w) {
    int lo = 0, hi = c->f16_count;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (c->f16[mid].w <= w) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// The f16 copy of the m x k weights at w, where one was made (pkc_cache_f16) of them or of a
// run of matrices that holds them (whole rows of one format and k); 0 when none.
static CUdeviceptr cached_f16(const pkc_context *c, int fi, pkc_ptr w, int64_t m, int64_t k) {
    const int at = copies_up_to(c, w);
    if (at == 0) return 0;
    const struct f16_copy *e = &c->f16[at - 1];
    const int64_t row_bytes = (int64_t)pkc_row_bytes(fmts[fi].type, k);
    if (e->fi != fi || e->k != k || (int64_t)(w - e->w) % row_bytes != 0) return 0;
    const int64_t row = (int64_t)(w - e->w) / row_bytes;
    return row + m <= e->m ? e->f16 + (CUdeviceptr)(row * k * 2) : 0;
}

int pkc_cache_f16(pkc_context *c, int type, pkc_ptr w, int64_t m, int64_t k) {
    ENTER(c);
    const int fi = check_weights(c, "pkc_cache_f16", type, w, k);
    if (fi < 0) return -fi;
    if (m <= 0) return fail(c, PKC_ERR_INVALID, "pkc_cache_f16: no rows");
    if (c->capturing) return fail(c, PKC_ERR_INVALID, "pkc_cache_f16: allocates, so not during graph capture");
    // F32 and F16 weights go to cuBLAS as they are: nothing to copy.
    if (fmts[fi].type == 0 || fmts[fi].type == 1) return PKC_OK;
    const struct f16_copy copy = {w, 0, m, k, fi};
    const CUdeviceptr end = copy_source_end(&copy);
    CUdeviceptr base = 0;
    size_t size = 0;
    CU(c, c->cu.MemGetAddressRange(&base, &size, w), "cuMemGetAddressRange");
    if (end > base + size) return fail(c, PKC_ERR_INVALID, "pkc_cache_f16: the weights run past the end of their allocation");
    // The new copy goes at `at`: it overlaps another only if it overlaps a neighbour.
    const int at = copies_up_to(c, w);
    if ((at > 0 && w < copy_source_end(&c->f16[at - 1])) || (at < c->f16_count && c->f16[at].w < end))
        return fail(c, PKC_ERR_INVALID, "pkc_cache_f16: these weights overlap ones already copied");
    if (c->f16_count == c->f16_cap) {
        const int cap = c->f16_cap ? 2 * c->f16_cap : 64;
        struct f16_copy *grown = realloc(c->f16, (size_t)cap * sizeof *grown);
        if (!grown) return fail(c, PKC_ERR_OUT_OF_MEMORY, "pkc_cache_f16: out of host memory");
        c->f16 = grown;
        c->f16_cap = cap;
    }
    CUdeviceptr f16 = 0;
    CU(c, c->cu.MemAlloc(&f16, f16_bytes(m, k)), "cuMemAlloc (f16 weights)");
    const int st = dequant_f16(c, fi, w, m, k, f16);
    if (st) {
        c->cu.MemFree(f16);
        return st;
    }
    memmove(&c->f16[at + 1], &c->f16[at], (size_t)(c->f16_count - at) * sizeof *c->f16);
    c->f16[at] = copy;
    c->f16[at].f16 = f16;
    c->f16_count++;
    c->info.f16_weight_bytes += f16_bytes(m, k);
    return PKC_OK;
}

// With q, x's f16 rows (ldq bytes apart) are given: no conversion of x.
static int matmul_gemm(pkc_context *c, int fi, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q, int64_t ldq,
                       int64_t n, pkc_ptr y, int64_t ldy, int add) {
    const float one = 1.0f, zero = add ? 1.0f : 0.0f; // beta: y = W x (+ y)
    int st;
    cublasStatus_t s;
    if (m > 0x7fffffff || n > 0x7fffffff || ldx > 0x7fffffff || ldy > 0x7fffffff)
        return fail(c, PKC_ERR_INVALID, "pkc_matmul: sizes beyond cuBLAS's int range");
    if (fmts[fi].type == 0) {
        // f32 weights: straight through in f32 (no copy)
        c->kernel_last = NULL;
        s = c->cb.GemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one, (const void *)(uintptr_t)w,
                         CUDA_R_32F, (int)k, (const void *)(uintptr_t)x, CUDA_R_32F, (int)ldx, &zero,
                         (void *)(uintptr_t)y, CUDA_R_32F, (int)ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        return s ? cublas_fail(c, s, "cublasGemmEx (f32)") : PKC_OK;
    }
    CUdeviceptr a = fmts[fi].type == 1 ? w : cached_f16(c, fi, w, m, k);
    if (!a) {
        if ((st = ensure(c, &c->scratch_w, &c->cap_w, f16_bytes(m, k)))) return st;
        a = c->scratch_w;
        if ((st = dequant_f16(c, fi, w, m, k, a))) return st;
    }
    CUdeviceptr b = q;
    int64_t ldb = ldq / 2;
    if (!q) {
        if ((st = ensure(c, &c->scratch_x, &c->cap_x, f16_bytes(n, k)))) return st;
        b = c->scratch_x;
        ldb = k;
        int nn = (int)n, kk = (int)k;
        void *args[] = {&x, &ldx, &b, &nn, &kk};
        if ((st = launch(c, c->to_f16, "to_f16", blocks_for(n * k, 256), 1, 256, 0, args))) return st;
    }
    c->kernel_last = NULL;
    s = c->cb.GemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one, (const void *)(uintptr_t)a,
                     CUDA_R_16F, (int)k, (const void *)(uintptr_t)b, CUDA_R_16F, (int)ldb, &zero, (void *)(uintptr_t)y,
                     CUDA_R_32F, (int)ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s ? cublas_fail(c, s, "cublasGemmEx (f16)") : PKC_OK;
}

// The device's NormOut (pkc_kernels.cu): a GEMV's norm tail.
typedef struct norm_out {
    CUdeviceptr g, h, q, counter, post, r;
    int64_t ldh, ldq, ldr;
    float eps, post_eps;
} norm_out;
_Static_assert(sizeof(norm_out) == 80, "norm_out is the kernels' NormOut");

// The device's KVCache (pkc_kernels.cu): a pkc_kv as the kernels take it.
typedef struct kv_layout {
    CUdeviceptr k, v, pages;
    int64_t slot_stride;
    int kv_dim, page_shift, max_pages, unused;
} kv_layout;
_Static_assert(sizeof(kv_layout) == 48, "kv_layout is the kernels' KVCache");

static kv_layout layout_of(const pkc_kv *kv) {
    return (kv_layout){kv->k, kv->v, kv->pages, kv->slot_stride, (int)kv->kv_dim, kv->pages ? kv->page_shift : 0,
                       kv->pages ? (int)kv->max_pages : 0, 0};
}

// The device's RopeOut (pkc_kernels.cu): a q | k | v GEMV's rope-and-store tail.
typedef struct rope_out {
    CUdeviceptr x, table, bias, slots, positions, counter, qn, kn;
    kv_layout kv;
    int64_t stride;
    int q_heads, kv_heads, head_dim, pairs, neox;
    unsigned blocks;
    float eps;
    int unused;
} rope_out;
_Static_assert(sizeof(rope_out) == 152, "rope_out is the kernels' RopeOut");

static int uses_int8(const pkc_context *c, int fi, int64_t m, int64_t k) {
    return c->int8_rows > 0 ? !is_float_format(fi) : c->int8_rows == 0 && prefers_int8(fi, m, k);
}

static int matmul(pkc_context *c, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                  int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, int add, const pkc_norm *norm,
                  const pkc_post_norm *post, const rope_out *ro);

int pkc_matmul(pkc_context *c, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, int64_t n,
               pkc_ptr y, int64_t ldy) {
    return matmul(c, type, w, m, k, x, ldx, 0, 0, n, y, ldy, 0, NULL, NULL, NULL);
}

int pkc_matmul_add(pkc_context *c, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, int64_t n,
                   pkc_ptr y, int64_t ldy) {
    return matmul(c, type, w, m, k, x, ldx, 0, 0, n, y, ldy, 1, NULL, NULL, NULL);
}

int pkc_matmul_q8(pkc_context *c, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                  int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, int add) {
    return matmul(c, type, w, m, k, x, ldx, q, ldq, n, y, ldy, add != 0, NULL, NULL, NULL);
}

int pkc_matmul_add_norm(pkc_context *c, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                        int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, const pkc_norm *norm) {
    if (c && !norm) return fail(c, PKC_ERR_INVALID, "pkc_matmul_add_norm: no norm");
    return matmul(c, type, w, m, k, x, ldx, q, ldq, n, y, ldy, 1, norm, NULL, NULL);
}

int pkc_matmul_post_norm(pkc_context *c, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                         int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, const pkc_post_norm *post, const pkc_norm *norm) {
    if (c && !post) return fail(c, PKC_ERR_INVALID, "pkc_matmul_post_norm: no post-norm");
    return matmul(c, type, w, m, k, x, ldx, q, ldq, n, y, ldy, 0, norm, post, NULL);
}

int64_t pkc_gemm_min_rows(const pkc_context *c) { return c ? c->gemm_min_rows : 0; }

size_t pkc_q8_row_bytes(int64_t k) { return k <= 0 ? 0 : ((size_t)k + (size_t)(k / 32) * 4 + 15) / 16 * 16; }

static int gemv_rows_per_group(const pkc_context *c, int64_t m, int lanes_log2, int64_t n);
static int gemv_lanes(const pkc_context *c, int64_t m, int64_t units);

// A GEMV launch's geometry for m rows of W of k weights and `rows` rows of x: its lanes per row
// group (log2), rows of W per group and blocks.
static uint64_t gemv_geometry(const pkc_context *c, int64_t m, int64_t k, int64_t rows, int *lanes_log2, int *r) {
    *lanes_log2 = gemv_lanes(c, m, k / 16);
    *r = gemv_rows_per_group(c, m, *lanes_log2, rows);
    return blocks_for(m, (unsigned)((((int64_t)GEMV_WARPS * 32) >> *lanes_log2) * *r));
}


static int rms_norm(pkc_context *c, pkc_ptr x, int64_t ldx, pkc_ptr w, pkc_ptr y, int64_t ldy, int64_t n, int64_t k,
                    float eps, pkc_ptr q, int64_t ldq, int heads);

// The unfused form of a post-norm's tail: y's rows normalized in place, then added to the residual.
static int post_norm_add(pkc_context *c, pkc_ptr y, int64_t ldy, int64_t n, int64_t m, const pkc_post_norm *post) {
    int st = rms_norm(c, y, ldy, post->weight, y, ldy, n, m, post->eps, 0, 0, 1);
    if (st) return st;
    if (ldy == m && post->ldr == m) return pkc_add(c, post->residual, y, n * m);
    for (int64_t t = 0; t < n && !st; t++) st = pkc_add(c, post->residual + (uint64_t)(t * post->ldr) * 4, y + (uint64_t)(t * ldy) * 4, m);
    return st;
}

static int matmul(pkc_context *c, int type, pkc_ptr w, int64_t m, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                  int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, int add, const pkc_norm *norm, const pkc_post_norm *post,
                  const rope_out *ro) {
    ENTER(c);
    const int fi = check_weights(c, "pkc_matmul", type, w, k);
    if (fi < 0) return -fi;
    if (m <= 0 || n < 0 || m > 0x7fffffff || ldx < k || ldx % 4 != 0 || x % 16 != 0 || ldy < m)
        return fail(c, PKC_ERR_INVALID, "pkc_matmul: bad sizes, strides or alignment (m %lld, k %lld, n %lld, ldx %lld, ldy %lld)",
                    (long long)m, (long long)k, (long long)n, (long long)ldx, (long long)ldy);
    int st = check_rows(c, "pkc_matmul_q8", k, n, q, ldq);
    if (st) return st;
    if (norm && (m > 0x7fffffff || norm->ldo < m || norm->ldo % 4 != 0 || !norm->out || norm->out % 16 != 0 || !norm->weight))
        return fail(c, PKC_ERR_INVALID, "pkc_matmul_add_norm: bad norm output (ldo >= m, a multiple of 4, 16-byte aligned) or weights");
    if (norm && (st = check_rows(c, "pkc_matmul_add_norm", m, n, norm->q, norm->ldq))) return st;
    if (post && (!post->weight || !post->residual || post->residual % 16 != 0 || post->ldr < m || post->ldr % 4 != 0 || ldy % 4 != 0 ||
                 y % 16 != 0 || add))
        return fail(c, PKC_ERR_INVALID, "pkc_matmul_post_norm: bad residual rows (ldr >= m, a multiple of 4, 16-byte aligned) or weights");
    if (n == 0) return PKC_OK;
    if (ro && (n > NORM_MAX_ROWS || n >= c->gemm_min_rows || norm || post))
        return fail(c, PKC_ERR_INVALID, "pkc_matmul: a rope tail at %lld rows, or with a norm", (long long)n);
    // The norms (and the residual add) as their own launches after the product: on the GEMM path,
    // past the GEMV kernels that have the norm tail (NORM_MAX_ROWS rows of x), or when not fused.
    if (n >= c->gemm_min_rows || ((norm || post) && (!c->norm_fused || n > NORM_MAX_ROWS))) {
        st = n >= c->gemm_min_rows ? matmul_gemm(c, fi, w, m, k, x, ldx, q, ldq, n, y, ldy, add)
                                   : matmul(c, type, w, m, k, x, ldx, q, ldq, n, y, ldy, add, NULL, NULL, NULL);
        if (!st && post) st = post_norm_add(c, y, ldy, n, m, post);
        if (st || !norm) return st;
        const pkc_ptr src = post ? post->residual : y;
        const int64_t lds = post ? post->ldr : ldy;
        return rms_norm(c, src, lds, norm->weight, norm->out, norm->ldo, n, m, norm->eps, norm->q, norm->ldq, 1);
    }
    // The int8 GEMV where x's int8 rows are given and the weights have codes; else float x.
    const int i8 = q && uses_int8(c, fi, m, k);
    int mm = (int)m, kk = (int)k;
    int64_t row_bytes = (int64_t)pkc_row_bytes(type, k);
    for (int64_t t0 = 0; t0 < n; t0 += GEMV_MAX_ROWS) {
        const int64_t rows = n - t0 < GEMV_MAX_ROWS ? n - t0 : GEMV_MAX_ROWS;
        int lanes_log2, r;
        const uint64_t blocks = gemv_geometry(c, m, k, rows, &lanes_log2, &r);
        const fmt_kernels *fk = &c->fk[fi];
        const CUfunction f = i8 ? (r == 1 ? fk->gemv8[rows - 1] : fk->gemv8_r[rows - 1])
                                : (r == 1 ? fk->gemv[rows - 1] : fk->gemv_r[rows - 1]);
        CUdeviceptr xt = i8 ? q + (uint64_t)(t0 * ldq) : x + (uint64_t)(t0 * ldx) * 4, yt = y + (uint64_t)(t0 * ldy) * 4;
        int64_t ld = i8 ? ldq : ldx;
        // With a norm, this launch's last block normalizes its rows of y.
        norm_out no = {0};
        if (norm || post) no.counter = c->norm_count;
        if (norm) {
            no.g = norm->weight;
            no.h = norm->out + (uint64_t)(t0 * norm->ldo) * 4;
            no.q = norm->q ? norm->q + (uint64_t)(t0 * norm->ldq) : 0;
            no.ldh = norm->ldo;
            no.ldq = norm->ldq;
            no.eps = norm->eps;
        }
        if (post) {
            no.post = post->weight;
            no.r = post->residual + (uint64_t)(t0 * post->ldr) * 4;
            no.ldr = post->ldr;
            no.post_eps = post->eps;
        }
        rope_out rt = ro ? *ro : (rope_out){0};
        void *args[] = {&w, &mm, &kk, &row_bytes, &xt, &ld, &yt, &ldy, &lanes_log2, &add, &no, &rt};
        st = launch(c, f, i8 ? "gemv8" : "gemv", blocks, 1, GEMV_WARPS * 32, 0, args);
        if (st) return st;
    }
    return PKC_OK;
}

// pkc_matmul_runs with, where ro is given, the rope tail in each run's launch (n <= NORM_MAX_ROWS
// on the GEMV path; ro->blocks counts every run's blocks).
static int matmul_runs(pkc_context *c, const pkc_run *runs, int count, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                       int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, const rope_out *ro) {
    if (count < 1 || !runs) return fail(c, PKC_ERR_INVALID, "pkc_matmul_runs: no runs");
    for (int i = 0; i < count; i++)
        if (runs[i].column < 0 || runs[i].m <= 0 || runs[i].column + runs[i].m > ldy)
            return fail(c, PKC_ERR_INVALID, "pkc_matmul_runs: run %d's rows %lld.. (%lld) are not within ldy %lld", i,
                        (long long)runs[i].column, (long long)runs[i].m, (long long)ldy);
    int st;
    // A tail's ticket spans every run's launch: what could refuse a later run is checked (and its
    // module loaded) before the first one launches.
    for (int i = 0; ro && i < count; i++) {
        if ((st = check_weights(c, "pkc_matmul_runs_rope_store", runs[i].type, runs[i].w, k)) < 0) return -st;
        if (runs[i].m > 0x7fffffff) return fail(c, PKC_ERR_INVALID, "pkc_matmul_runs_rope_store: run %d has %lld rows", i, (long long)runs[i].m);
    }
    // One after another where there is nothing to overlap: a single run, or the GEMM path
    // (cuBLAS works on the context's stream); or where $PLINTH_CUDA_OVERLAP=0.
    if (count == 1 || n >= c->gemm_min_rows || n == 0 || !c->runs_overlap) {
        for (int i = 0; i < count; i++)
            if ((st = matmul(c, runs[i].type, runs[i].w, runs[i].m, k, x, ldx, q, ldq, n, y + (uint64_t)runs[i].column * 4, ldy, 0, NULL, NULL, ro)))
                return st;
        return PKC_OK;
    }
    // The format modules first, so that nothing loads between the fork and the join.
    for (int i = 0; i < count; i++)
        if ((st = check_weights(c, "pkc_matmul_runs", runs[i].type, runs[i].w, k)) < 0) return -st;
    c->kernel_last = NULL; // the fork and the join: events
    CU(c, c->cu.EventRecord(c->fork, c->stream), "cuEventRecord");
    CU(c, c->cu.StreamWaitEvent(c->side, c->fork, 0), "cuStreamWaitEvent");
    st = matmul(c, runs[0].type, runs[0].w, runs[0].m, k, x, ldx, q, ldq, n, y + (uint64_t)runs[0].column * 4, ldy, 0, NULL, NULL, ro);
    // The later runs enqueue on the side stream (launch() uses c->stream).
    const CUstream main_stream = c->stream;
    c->stream = c->side;
    for (int i = 1; i < count && !st; i++)
        st = matmul(c, runs[i].type, runs[i].w, runs[i].m, k, x, ldx, q, ldq, n, y + (uint64_t)runs[i].column * 4, ldy, 0, NULL, NULL, ro);
    c->stream = main_stream;
    // Joined even after a failure, so that a capture can still end.
    c->kernel_last = NULL;
    CUresult r = c->cu.EventRecord(c->join, c->side);
    if (r == CUDA_SUCCESS) r = c->cu.StreamWaitEvent(c->stream, c->join, 0);
    if (st) return st;
    if (r != CUDA_SUCCESS) return cu_fail(c, r, "joining the side stream");
    return PKC_OK;
}

int pkc_matmul_runs(pkc_context *c, const pkc_run *runs, int count, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                    int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy) {
    ENTER(c);
    return matmul_runs(c, runs, count, k, x, ldx, q, ldq, n, y, ldy, NULL);
}

static int check_qkv(pkc_context *c, const char *what, const pkc_kv *cache, int64_t n, int64_t stride, int q_heads,
                     int kv_heads, int head_dim, int rope_dims);
static int qkv_rope_store(pkc_context *c, const pkc_kv *cache, pkc_ptr qkv, int64_t n, int64_t stride, int q_heads,
                          int kv_heads, int head_dim, int rope_dims, pkc_ptr table, int neox, pkc_ptr bias, pkc_ptr slots,
                          pkc_ptr positions);
static int qkv_norm_rope_store(pkc_context *c, const pkc_kv *cache, pkc_ptr qkv, int64_t n, int64_t stride, int q_heads,
                               int kv_heads, int head_dim, int rope_dims, pkc_ptr table, int neox, pkc_ptr q_norm,
                               pkc_ptr k_norm, float eps, pkc_ptr slots, pkc_ptr positions);

int pkc_matmul_runs_rope_store(pkc_context *c, const pkc_run *runs, int count, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                               int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, const pkc_rope_store *rs) {
    ENTER(c);
    if (!rs) return fail(c, PKC_ERR_INVALID, "pkc_matmul_runs_rope_store: no rope");
    int st = check_qkv(c, "pkc_matmul_runs_rope_store", &rs->cache, n, ldy, rs->q_heads, rs->kv_heads, rs->head_dim, rs->rope_dims);
    if (st) return st;
    const int normed = rs->q_norm || rs->k_norm;
    if (normed && rs->bias) return fail(c, PKC_ERR_INVALID, "pkc_matmul_runs_rope_store: a bias with head norms");
    if (!c->rope_fused || n < 1 || n > NORM_MAX_ROWS || n >= c->gemm_min_rows) {
        if ((st = matmul_runs(c, runs, count, k, x, ldx, q, ldq, n, y, ldy, NULL))) return st;
        if (normed)
            return qkv_norm_rope_store(c, &rs->cache, y, n, ldy, rs->q_heads, rs->kv_heads, rs->head_dim, rs->rope_dims, rs->table,
                                       rs->neox, rs->q_norm, rs->k_norm, rs->eps, rs->slots, rs->positions);
        return qkv_rope_store(c, &rs->cache, y, n, ldy, rs->q_heads, rs->kv_heads, rs->head_dim, rs->rope_dims, rs->table, rs->neox,
                              rs->bias, rs->slots, rs->positions);
    }
    rope_out ro = {y, rs->table, rs->bias, rs->slots, rs->positions, c->norm_count, rs->q_norm, rs->k_norm, layout_of(&rs->cache), ldy,
                   rs->q_heads, rs->kv_heads, rs->head_dim, rs->rope_dims / 2, rs->neox, 0, rs->eps, 0};
    uint64_t blocks = 0;
    for (int i = 0; i < count && runs; i++) {
        int lanes_log2, r;
        blocks += gemv_geometry(c, runs[i].m, k, n, &lanes_log2, &r);
    }
    if (blocks > 0xffffffffu) return fail(c, PKC_ERR_INVALID, "pkc_matmul_runs_rope_store: %llu blocks", (unsigned long long)blocks);
    ro.blocks = (unsigned)blocks;
    st = matmul_runs(c, runs, count, k, x, ldx, q, ldq, n, y, ldy, &ro);
    if (st) {
        // A run may have failed after others had counted: the ticket goes back to 0 for later tails.
        c->kernel_last = NULL;
        c->cu.MemsetD8Async(c->norm_count, 0, 4, c->stream);
    }
    return st;
}

// A switch set to on (0 or 1); returns its previous setting.
static int set_switch(int *flag, int on) {
    const int old = *flag;
    *flag = on != 0;
    return old;
}

int pkc_set_rope_fused(pkc_context *c, int on) { return c ? set_switch(&c->rope_fused, on) : 0; }

int pkc_set_attention_mma(pkc_context *c, int on) { return c ? set_switch(&c->mma_attention, on && mma_capable(c)) : 0; }

int pkc_matmul_reads_rows(const pkc_context *c, int type, int64_t m, int64_t k, int64_t n) {
    const int fi = fmt_index(type);
    if (!c || fi < 0 || n < 1 || k <= 0) return 0;
    // The GEMM path multiplies f16 rows, but for f32 weights (f32 x as it is).
    if (rows_f16(c, n)) return fmts[fi].type != 0;
    return k % 32 == 0 && uses_int8(c, fi, m, k);
}

int pkc_set_gemv_int8(pkc_context *c, int mode) {
    if (!c) return 0;
    const int old = c->int8_rows;
    c->int8_rows = mode > 0 ? 1 : mode < 0 ? -1 : 0;
    return old;
}

int pkc_set_norm_fused(pkc_context *c, int on) { return c ? set_switch(&c->norm_fused, on) : 0; }

int pkc_glu_rows(const pkc_context *c, int64_t n) { return c && n >= 1 && n <= 2 && n < c->gemm_min_rows; }

int pkc_glu_fused(const pkc_context *c, int64_t n) { return pkc_glu_rows(c, n) && c->glu_fused; }

int pkc_matmul_glu(pkc_context *c, int type, pkc_ptr w, int64_t f, int64_t k, pkc_ptr x, int64_t ldx, pkc_ptr q,
                   int64_t ldq, int64_t n, pkc_ptr y, int64_t ldy, int gelu) {
    ENTER(c);
    const int fi = check_weights(c, "pkc_matmul_glu", type, w, k);
    if (fi < 0) return -fi;
    if (!pkc_glu_fused(c, n))
        return fail(c, PKC_ERR_INVALID, "pkc_matmul_glu: %lld rows of x (fused only at 1 or 2 rows on the GEMV path)", (long long)n);
    if (f <= 0 || 2 * f > 0x7fffffff || ldx < k || ldx % 4 != 0 || x % 16 != 0 || ldy < f)
        return fail(c, PKC_ERR_INVALID, "pkc_matmul_glu: bad sizes, strides or alignment");
    int st = check_rows(c, "pkc_matmul_glu", k, n, q, ldq);
    if (st) return st;
    const int i8 = q && uses_int8(c, fi, 2 * f, k);
    // The lanes of the plain product of all 2f rows, so that each sum is that product's bit for bit.
    int lanes_log2 = gemv_lanes(c, 2 * f, k / 16);
    int mm = (int)f, kk = (int)k, g = gelu != 0;
    int64_t row_bytes = (int64_t)pkc_row_bytes(type, k), ld = i8 ? ldq : ldx;
    CUdeviceptr xt = i8 ? q : x;
    void *args[] = {&w, &mm, &kk, &row_bytes, &xt, &ld, &y, &ldy, &lanes_log2, &g};
    const CUfunction fn = i8 ? c->fk[fi].glu8[n - 1] : c->fk[fi].glu[n - 1];
    return launch(c, fn, "gemv glu", blocks_for(f, (unsigned)((GEMV_WARPS * 32) >> lanes_log2)), 1, GEMV_WARPS * 32, 0, args);
}

// Lanes per row group (log2): a whole warp for rows of 64 units (1024 weights) or more, else 16
// or 8, so that each lane still gets a few units (and a warp several rows); then, while the
// launch would make fewer than gemv_wide_warps warps, twice as many (64, 128: the whole block)
// as long as each lane keeps two units.
static int gemv_lanes(const pkc_context *c, int64_t m, int64_t units) {
    int ll = units >= 64 ? 5 : units >= 32 ? 4 : 3;
    while (ll < 7 && units >= (2 << (ll + 1)) && ((m << ll) >> 5) < c->gemv_wide_warps) ll++;
    return ll;
}

// Rows of W per lane group (1 or 2; 2 exists at n <= 2 rows of x) for a GEMV launch. Two rows
// share each load of x (whose f32 reads bound the GEMV on L1) but make half the groups.
// Measured on an H100 (Benchmarks/cuda/README.md): R = 2 wins on wide matrices (the Q8_0
// vocabulary products 97 -> 70 us) and at two rows of x from ~1000 warps, and loses on short
// ones (896 rows); R = 4 never beat it by more than noise, so there is none.
static int gemv_rows_per_group(const pkc_context *c, int64_t m, int lanes_log2, int64_t n) {
    if (n > 2) return 1;
    if (c->gemv_force_r > 0) return c->gemv_force_r >= 2 ? 2 : 1;
    const int64_t warps = (((m + 1) / 2) << lanes_log2) >> 5;
    return warps >= c->gemv_min_warps / n ? 2 : 1;
}

// ---- elementwise -------------------------------------------------------------------------------

int pkc_rms_norm(pkc_context *c, pkc_ptr x, int64_t ldx, pkc_ptr w, pkc_ptr y, int64_t ldy, int64_t n, int64_t k,
                 float eps) {
    return pkc_rms_norm_q8(c, x, ldx, w, y, ldy, n, k, eps, 0, 0);
}

int pkc_rms_norm_q8(pkc_context *c, pkc_ptr x, int64_t ldx, pkc_ptr w, pkc_ptr y, int64_t ldy, int64_t n, int64_t k,
                    float eps, pkc_ptr q, int64_t ldq) {
    ENTER(c);
    return rms_norm(c, x, ldx, w, y, ldy, n, k, eps, q, ldq, 1);
}

int pkc_rms_norm_heads(pkc_context *c, pkc_ptr x, int64_t ldx, int heads, pkc_ptr w, int64_t n, int64_t k, float eps) {
    ENTER(c);
    if (heads <= 0 || ldx < (int64_t)heads * k) return fail(c, PKC_ERR_INVALID, "pkc_rms_norm_heads: bad sizes");
    return rms_norm(c, x, ldx, w, x, ldx, n, k, eps, 0, 0, heads);
}

static int rms_norm(pkc_context *c, pkc_ptr x, int64_t ldx, pkc_ptr w, pkc_ptr y, int64_t ldy, int64_t n, int64_t k,
                    float eps, pkc_ptr q, int64_t ldq, int heads) {
    if (n < 0 || k <= 0 || k > 0x7fffffff || ldx < k || ldy < k || n * heads > 0x7fffffff)
        return fail(c, PKC_ERR_INVALID, "pkc_rms_norm: bad sizes");
    int st = check_rows(c, "pkc_rms_norm_q8", k, n, q, ldq);
    if (st) return st;
    int kk = (int)k, qf16 = q && rows_f16(c, n);
    void *args[] = {&x, &ldx, &w, &y, &ldy, &kk, &eps, &q, &ldq, &heads, &qf16};
    return launch(c, c->rms, "rms_norm", (uint64_t)(n * heads), 1, norm_threads(k), 0, args);
}

int pkc_quantize_q8(pkc_context *c, pkc_ptr x, int64_t ldx, int64_t n, int64_t k, pkc_ptr q, int64_t ldq) {
    ENTER(c);
    if (n < 0 || n > 0x7fffffff || k <= 0 || k > 0x7fffffff || ldx < k || !q)
        return fail(c, PKC_ERR_INVALID, "pkc_quantize_q8: bad sizes");
    int st = check_q8(c, "pkc_quantize_q8", k, q, ldq);
    if (st) return st;
    int nn = (int)n, kk = (int)k;
    void *args[] = {&x, &ldx, &nn, &kk, &q, &ldq};
    return launch(c, c->quantize_q8, "quantize_q8", blocks_for(n * k, 256), 1, 256, 0, args);
}

int pkc_rope_table(pkc_context *c, pkc_ptr positions, int64_t n, int rope_dims, pkc_rope_freqs freqs, pkc_ptr table) {
    ENTER(c);
    if (n < 0 || n > 0x7fffffff || rope_dims <= 0 || rope_dims % 2 != 0 || (n > 0 && !positions) || !rope_freqs_valid(freqs))
        return fail(c, PKC_ERR_INVALID, "pkc_rope_table: bad sizes, no positions, or a base or scale not positive and finite");
    rope_freqs r = rope_freqs_of(freqs, rope_dims, table);
    int nn = (int)n, pairs = rope_dims / 2;
    void *args[] = {&positions, &nn, &pairs, &r};
    return launch(c, c->rope_table, "rope_table", blocks_for(n * pairs, 256), 1, 256, 0, args);
}

int pkc_rope(pkc_context *c, pkc_ptr x, int64_t n, int64_t stride, int heads, int head_dim, int rope_dims,
             pkc_ptr table, int neox) {
    ENTER(c);
    if (n < 0 || n > 0x7fffffff || heads <= 0 || rope_dims <= 0 || rope_dims % 2 != 0 || rope_dims > head_dim ||
        stride < (int64_t)heads * head_dim)
        return fail(c, PKC_ERR_INVALID, "pkc_rope: bad sizes");
    int nn = (int)n, pairs = rope_dims / 2;
    void *args[] = {&x, &nn, &stride, &heads, &head_dim, &pairs, &table, &neox};
    return launch(c, c->rope, "rope", blocks_for(n * heads * pairs, 256), 1, 256, 0, args);
}

int pkc_swiglu(pkc_context *c, pkc_ptr gate, int64_t ldg, pkc_ptr up, int64_t ldu, int64_t n, int64_t k) {
    return pkc_swiglu_q8(c, gate, ldg, up, ldu, n, k, 0, 0);
}

static int gated(pkc_context *c, int gelu, pkc_ptr gate, int64_t ldg, pkc_ptr up, int64_t ldu, int64_t n, int64_t k,
                 pkc_ptr q, int64_t ldq) {
    const char *name = gelu ? "pkc_geglu" : "pkc_swiglu";
    if (n < 0 || n > 0x7fffffff || k <= 0 || k > 0x7fffffff || ldg < k || ldu < k)
        return fail(c, PKC_ERR_INVALID, "%s: bad sizes", name);
    int st = check_rows(c, name, k, n, q, ldq);
    if (st) return st;
    int nn = (int)n, kk = (int)k, qf16 = q && rows_f16(c, n);
    void *args[] = {&gate, &ldg, &up, &ldu, &nn, &kk, &q, &ldq, &gelu, &qf16};
    return launch(c, c->swiglu, name + 4, blocks_for(n * k, 256), 1, 256, 0, args);
}

int pkc_swiglu_q8(pkc_context *c, pkc_ptr gate, int64_t ldg, pkc_ptr up, int64_t ldu, int64_t n, int64_t k, pkc_ptr q,
                  int64_t ldq) {
    ENTER(c);
    return gated(c, 0, gate, ldg, up, ldu, n, k, q, ldq);
}

int pkc_geglu_q8(pkc_context *c, pkc_ptr gate, int64_t ldg, pkc_ptr up, int64_t ldu, int64_t n, int64_t k, pkc_ptr q,
                 int64_t ldq) {
    ENTER(c);
    return gated(c, 1, gate, ldg, up, ldu, n, k, q, ldq);
}

int pkc_add(pkc_context *c, pkc_ptr y, pkc_ptr x, int64_t count) {
    ENTER(c);
    if (count < 0) return fail(c, PKC_ERR_INVALID, "pkc_add: negative count");
    void *args[] = {&y, &x, &count};
    return launch(c, c->add, "add", blocks_for(count, 256), 1, 256, 0, args);
}

// Chains of dependent additions, launched one after another and in a graph replayed twice: the
// sums must be exact. Returns the first failure (message set).
static int dependent_launch_self_test(pkc_context *c) {
    enum { N = 4096, CHAIN = 8 };
    float *host = malloc(2 * N * sizeof(float));
    if (!host) return fail(c, PKC_ERR_OUT_OF_MEMORY, "out of host memory");
    float *got = host + N;
    for (int i = 0; i < N; i++) host[i] = (float)(i % 13);
    pkc_ptr x = 0, y = 0;
    pkc_graph *g = NULL;
    char first[sizeof c->err] = "";
    int st = pkc_alloc(c, N * sizeof(float), &x);
    if (!st) st = pkc_alloc(c, N * sizeof(float), &y);
    if (!st) st = pkc_upload(c, x, host, N * sizeof(float));
    if (!st) st = pkc_memset(c, y, 0, N * sizeof(float));
    for (int i = 0; i < CHAIN && !st; i++) st = pkc_add(c, y, x, N);
    if (!st && (st = pkc_graph_begin(c)) == PKC_OK) {
        for (int i = 0; i < CHAIN && !st; i++) st = pkc_add(c, y, x, N);
        if (st) snprintf(first, sizeof first, "%s", c->err);
        const int end = pkc_graph_end(c, &g); // ends the capture whatever happened in it
        if (!st) st = end;
        else snprintf(c->err, sizeof c->err, "%s", first);
    }
    for (int r = 0; r < 2 && !st; r++) st = pkc_graph_launch(c, g);
    if (!st) st = pkc_download(c, got, y, N * sizeof(float));
    // Each chain's launches after its first overlap the one before (the tracking in launch()).
    if (!st && c->info.dependent_launches != 2 * (CHAIN - 1))
        st = fail(c, PKC_ERR_DRIVER, "%llu dependent launches where %d were due", c->info.dependent_launches,
                  2 * (CHAIN - 1));
    for (int i = 0; i < N && !st; i++)
        if (got[i] != host[i] * (3 * CHAIN))
            st = fail(c, PKC_ERR_DRIVER, "element %d is %g after chains of dependent launches, not %g", i, got[i],
                      host[i] * (3 * CHAIN));
    if (g) pkc_graph_destroy(c, g);
    if (st) snprintf(first, sizeof first, "%s", c->err);
    if (x) pkc_free(c, x);
    if (y) pkc_free(c, y);
    if (st) snprintf(c->err, sizeof c->err, "%s", first);
    free(host);
    return st;
}

// Dependent launch where the device is sm_90 or newer and the driver 12.3 or newer (the first to
// capture such launches into graphs), unless $PLINTH_CUDA_PDL=0, once the self-test passes.
// Otherwise it stays off, the reason in the device info; the context works either way, unless
// the failure left the context unusable (a fault in a kernel): then opening fails.
static int setup_dependent_launch(pkc_context *c) {
    const char *why = NULL;
    if (switched_off("PLINTH_CUDA_PDL")) why = "off by $PLINTH_CUDA_PDL=0";
    // As mma_capable: the architecture the kernels are built for (griddepcontrol is sm_90's).
    else if (c->arch < 90)
        why = c->ptx ? "the kernels are PTX for an architecture older than sm_90 (NVRTC does not know this device)"
                     : "the device is older than sm_90";
    else if (c->info.driver_version < 12030 || !c->cu.LaunchKernelEx) why = "the driver is older than CUDA 12.3";
    if (why) {
        snprintf(c->info.dependent_launch_off, sizeof c->info.dependent_launch_off, "%s", why);
        return PKC_OK;
    }
    c->pdl = 1;
    const int st = dependent_launch_self_test(c);
    c->info.dependent_launches = 0;
    if (st != PKC_OK) {
        c->pdl = 0;
        snprintf(c->info.dependent_launch_off, sizeof c->info.dependent_launch_off, "self-test failed: %s", c->err);
        c->err[0] = 0;
        CU(c, c->cu.StreamSynchronize(c->stream), "cuStreamSynchronize (after the dependent launch self-test)");
        return PKC_OK;
    }
    c->pdl_ok = 1;
    c->info.dependent_launch = 1;
    return PKC_OK;
}

int pkc_set_dependent_launch(pkc_context *c, int on) {
    if (!c) return 0;
    const int old = c->pdl;
    c->pdl = on && c->pdl_ok;
    c->info.dependent_launch = c->pdl;
    return old;
}

static int scale_launch(pkc_context *c, const char *name, pkc_ptr y, int64_t count, float s, float cap) {
    if (count < 0) return fail(c, PKC_ERR_INVALID, "%s: negative count", name);
    void *args[] = {&y, &count, &s, &cap};
    return launch(c, c->scale, name, blocks_for(count, 256), 1, 256, 0, args);
}

int pkc_scale(pkc_context *c, pkc_ptr y, int64_t count, float s) {
    ENTER(c);
    return scale_launch(c, "scale", y, count, s, 0.0f);
}

int pkc_softcap(pkc_context *c, pkc_ptr y, int64_t count, float cap) {
    ENTER(c);
    if (!(cap > 0.0f)) return fail(c, PKC_ERR_INVALID, "pkc_softcap: the cap must be positive");
    return scale_launch(c, "softcap", y, count, 1.0f, cap);
}

int pkc_add_bias(pkc_context *c, pkc_ptr y, int64_t ldy, pkc_ptr bias, int64_t n, int64_t m) {
    ENTER(c);
    if (n < 0 || n > 0x7fffffff || m <= 0 || m > 0x7fffffff || ldy < m) return fail(c, PKC_ERR_INVALID, "pkc_add_bias: bad sizes");
    int nn = (int)n, mm = (int)m;
    void *args[] = {&y, &ldy, &bias, &nn, &mm};
    return launch(c, c->add_bias, "add_bias", blocks_for(n * m, 256), 1, 256, 0, args);
}

// pkc_lora's arguments (pkc_kernels.cu: LoraOp, LoraOps): every field 8 bytes but the last two,
// so the host and device layouts agree.
#define LORA_OPS 8
#define LORA_COLS 1024
typedef struct {
    pkc_ptr a, bt, a_scale, bt_scale, y, rows;
    int64_t ldy, rank, m, n, first_block, col_blocks;
    float scale, unused;
} lora_arg;
typedef struct {
    lora_arg op[LORA_OPS];
    int64_t count;
} lora_args;

int pkc_lora_apply(pkc_context *c, const pkc_lora_op *ops, int nops, pkc_ptr x, int64_t ldx, int64_t k) {
    ENTER(c);
    if (nops < 0 || (nops > 0 && !ops) || k <= 0 || k > 0x7fffffff || ldx < k || !x)
        return fail(c, PKC_ERR_INVALID, "pkc_lora_apply: bad arguments");
    for (int i = 0; i < nops; i++) {
        const pkc_lora_op *o = &ops[i];
        if (o->rank < 1 || o->rank > PKC_LORA_MAX_RANK || o->m <= 0 || o->m > 0x7fffffff || o->ldy < o->m || o->n < 0 ||
            o->n > 0x7fffffff || !o->a || !o->bt || !o->a_scale || !o->bt_scale || !o->y || (o->n > 0 && !o->rows))
            return fail(c, PKC_ERR_INVALID, "pkc_lora_apply: op %d: rank %lld (1...%d), %lld outputs, stride %lld, %lld rows", i,
                        (long long)o->rank, PKC_LORA_MAX_RANK, (long long)o->m, (long long)o->ldy, (long long)o->n);
    }
    int kk = (int)k;
    for (int first = 0; first < nops; first += LORA_OPS) {
        lora_args a;
        memset(&a, 0, sizeof a);
        uint64_t blocks = 0;
        for (int i = first; i < nops && i < first + LORA_OPS; i++) {
            const pkc_lora_op *o = &ops[i];
            lora_arg *l = &a.op[a.count++];
            *l = (lora_arg){.a = o->a, .bt = o->bt, .a_scale = o->a_scale, .bt_scale = o->bt_scale, .y = o->y, .rows = o->rows,
                            .ldy = o->ldy, .rank = o->rank, .m = o->m, .n = o->n, .first_block = (int64_t)blocks,
                            .col_blocks = (o->m + LORA_COLS - 1) / LORA_COLS, .scale = o->scale};
            blocks += (uint64_t)o->n * (uint64_t)l->col_blocks;
        }
        void *args[] = {&a, &x, &ldx, &kk};
        const int st = launch(c, c->lora, "lora", blocks, 1, 256, 0, args);
        if (st) return st;
    }
    return PKC_OK;
}

int pkc_lora_embed(pkc_context *c, pkc_ptr a, pkc_ptr bt, int64_t rank, int64_t vocab, float scale, pkc_ptr rows, int64_t n,
                   pkc_ptr ids, pkc_ptr x, int64_t ldx, int64_t e) {
    ENTER(c);
    if (rank < 1 || rank > PKC_LORA_MAX_RANK || vocab <= 0 || n < 0 || n > 0x7fffffff || e <= 0 || e > 0x7fffffff || ldx < e ||
        !a || !bt || !x || (n > 0 && (!rows || !ids)))
        return fail(c, PKC_ERR_INVALID, "pkc_lora_embed: bad arguments");
    int rr = (int)rank, ee = (int)e;
    void *args[] = {&a, &bt, &rr, &vocab, &scale, &rows, &ids, &x, &ldx, &ee};
    return launch(c, c->lora_embed, "lora_embed", (uint64_t)n, 1, 256, 0, args);
}

int pkc_argmax(pkc_context *c, pkc_ptr x, int64_t ld, int64_t n, int64_t width, pkc_ptr ids) {
    return pkc_argmax_masked(c, x, ld, n, width, 0, 0, 0, ids);
}

int pkc_argmax_masked(pkc_context *c, pkc_ptr x, int64_t ld, int64_t n, int64_t width, pkc_ptr masks,
                      int64_t mask_words, pkc_ptr mask_rows, pkc_ptr ids) {
    ENTER(c);
    if (n < 0 || width <= 0 || width > 0x7fffffff || ld < width || (masks && (mask_words <= 0 || !mask_rows)))
        return fail(c, PKC_ERR_INVALID, "pkc_argmax: bad sizes");
    int ww = (int)width;
    // Blocks of 256 threads over ~4096 entries each: a row's choice spread over up to 64 blocks.
    const int64_t nb = (width + 4095) / 4096 < ARGMAX_MAX_BLOCKS ? (width + 4095) / 4096 : ARGMAX_MAX_BLOCKS;
    for (int64_t t0 = 0; t0 < n; t0 += ARGMAX_ROWS) {
        const unsigned rows = (unsigned)(n - t0 < ARGMAX_ROWS ? n - t0 : ARGMAX_ROWS);
        CUdeviceptr xt = x + (uint64_t)(t0 * ld) * 4, idt = ids + (uint64_t)t0 * 4;
        CUdeviceptr mrt = mask_rows ? mask_rows + (uint64_t)t0 * 4 : 0;
        void *args[] = {&xt, &ld, &ww, &masks, &mask_words, &mrt, &idt, &c->argmax_part, &c->argmax_count};
        const int st = launch(c, c->argmax, "argmax", (uint64_t)nb, rows, 256, 0, args);
        if (st) return st;
    }
    return PKC_OK;
}

int pkc_topk(pkc_context *c, pkc_ptr x, int64_t ld, int64_t n, int64_t width, pkc_ptr ks, pkc_ptr masks,
             int64_t mask_words, pkc_ptr mask_rows, pkc_ptr out) {
    ENTER(c);
    if (n < 0 || n > 0x7fffffff || width <= 0 || width > 0x7fffffff || ld < width || !ks || !out || out % 8 != 0 ||
        (masks && (mask_words <= 0 || !mask_rows)))
        return fail(c, PKC_ERR_INVALID, "pkc_topk: bad sizes, no ks or out, or a mask without its rows");
    int ww = (int)width;
    // Blocks over ~4096 values each, up to TOPK_BLOCKS per row: a row's scan is many short
    // chains of loads, not one block's long one.
    const int64_t nb = (width + 4095) / 4096 < PKC_TOPK_BLOCKS ? (width + 4095) / 4096 : PKC_TOPK_BLOCKS;
    for (int64_t t0 = 0; t0 < n; t0 += TOPK_ROWS) {
        const unsigned rows = (unsigned)(n - t0 < TOPK_ROWS ? n - t0 : TOPK_ROWS);
        CUdeviceptr xt = x + (uint64_t)(t0 * ld) * 4, kt = ks + (uint64_t)t0 * 4, ot = out + (uint64_t)(t0 * PKC_TOPK_MAX) * 8;
        CUdeviceptr mrt = mask_rows ? mask_rows + (uint64_t)t0 * 4 : 0;
        void *args[] = {&xt, &ld, &ww, &kt, &masks, &mask_words, &mrt, &ot, &c->topk_part, &c->topk_count};
        const int st = launch(c, c->topk, "topk", (uint64_t)nb, rows, PKC_TOPK_THREADS, 0, args);
        if (st) return st;
    }
    return PKC_OK;
}

// ---- KV cache and attention --------------------------------------------------------------------

static int check_kv(pkc_context *c, const char *what, const pkc_kv *kv) {
    if (!kv || kv->kv_dim <= 0 || kv->kv_dim % 8 != 0 || kv->kv_dim > 0x7fffffff || kv->k % 16 != 0 || kv->v % 16 != 0)
        return fail(c, PKC_ERR_INVALID, "%s: bad cache (kv_dim a multiple of 8, 16-byte aligned arrays)", what);
    if (kv->pages) {
        if (kv->pages % 4 != 0 || kv->max_pages <= 0 || kv->max_pages > 0x7fffffff || kv->page_shift < 0 || kv->page_shift > 16)
            return fail(c, PKC_ERR_INVALID, "%s: bad page table (max_pages > 0, page_shift 0 to 16)", what);
    } else if (kv->slot_stride < kv->kv_dim || kv->slot_stride % 8 != 0) {
        return fail(c, PKC_ERR_INVALID, "%s: bad cache (slot_stride a multiple of 8, at least kv_dim)", what);
    }
    return PKC_OK;
}

int pkc_store_kv(pkc_context *c, const pkc_kv *cache, pkc_ptr k, int64_t ldk, pkc_ptr v, int64_t ldv, int64_t n,
                 pkc_ptr slots, pkc_ptr positions) {
    ENTER(c);
    int st = check_kv(c, "pkc_store_kv", cache);
    if (st) return st;
    if (n < 0 || n > 0x7fffffff || ldk < cache->kv_dim || ldv < cache->kv_dim)
        return fail(c, PKC_ERR_INVALID, "pkc_store_kv: bad sizes");
    kv_layout kv = layout_of(cache);
    int nn = (int)n;
    void *args[] = {&kv, &k, &ldk, &v, &ldv, &nn, &slots, &positions};
    return launch(c, c->store_kv, "store_kv", blocks_for(n * cache->kv_dim, 256), 1, 256, 0, args);
}

// The shapes of a q | k | v rope-and-store: n rows (stride floats) of q_heads + 2 kv_heads heads.
static int check_qkv(pkc_context *c, const char *what, const pkc_kv *cache, int64_t n, int64_t stride, int q_heads,
                     int kv_heads, int head_dim, int rope_dims) {
    int st = check_kv(c, what, cache);
    if (st) return st;
    if (n < 0 || n > 0x7fffffff || q_heads <= 0 || kv_heads <= 0 || head_dim <= 0 || head_dim % 2 != 0 ||
        rope_dims <= 0 || rope_dims % 2 != 0 || rope_dims > head_dim || (int64_t)kv_heads * head_dim != cache->kv_dim ||
        stride < (int64_t)(q_heads + 2 * kv_heads) * head_dim || n * (q_heads + 2 * kv_heads) > 0x7fffffff)
        return fail(c, PKC_ERR_INVALID, "%s: bad sizes", what);
    return PKC_OK;
}

int pkc_qkv_rope_store(pkc_context *c, const pkc_kv *cache, pkc_ptr qkv, int64_t n, int64_t stride, int q_heads,
                       int kv_heads, int head_dim, int rope_dims, pkc_ptr table, int neox, pkc_ptr bias, pkc_ptr slots,
                       pkc_ptr positions) {
    ENTER(c);
    int st = check_qkv(c, "pkc_qkv_rope_store", cache, n, stride, q_heads, kv_heads, head_dim, rope_dims);
    if (st) return st;
    return qkv_rope_store(c, cache, qkv, n, stride, q_heads, kv_heads, head_dim, rope_dims, table, neox, bias, slots, positions);
}

static int qkv_rope_store(pkc_context *c, const pkc_kv *cache, pkc_ptr qkv, int64_t n, int64_t stride, int q_heads,
                          int kv_heads, int head_dim, int rope_dims, pkc_ptr table, int neox, pkc_ptr bias, pkc_ptr slots,
                          pkc_ptr positions) {
    int nn = (int)n, pairs = rope_dims / 2;
    kv_layout kv = layout_of(cache);
    void *args[] = {&qkv, &nn, &stride, &q_heads, &kv_heads, &head_dim, &pairs, &table, &neox, &bias, &kv, &slots, &positions};
    return launch(c, c->qkv_rope_store, "qkv_rope_store", blocks_for(n * (q_heads + 2 * kv_heads) * (head_dim / 2), 256), 1,
                  256, 0, args);
}

int pkc_qkv_norm_rope_store(pkc_context *c, const pkc_kv *cache, pkc_ptr qkv, int64_t n, int64_t stride, int q_heads,
                            int kv_heads, int head_dim, int rope_dims, pkc_ptr table, int neox, pkc_ptr q_norm,
                            pkc_ptr k_norm, float eps, pkc_ptr slots, pkc_ptr positions) {
    ENTER(c);
    int st = check_qkv(c, "pkc_qkv_norm_rope_store", cache, n, stride, q_heads, kv_heads, head_dim, rope_dims);
    if (st) return st;
    return qkv_norm_rope_store(c, cache, qkv, n, stride, q_heads, kv_heads, head_dim, rope_dims, table, neox, q_norm, k_norm, eps,
                               slots, positions);
}

static int qkv_norm_rope_store(pkc_context *c, const pkc_kv *cache, pkc_ptr qkv, int64_t n, int64_t stride, int q_heads,
                               int kv_heads, int head_dim, int rope_dims, pkc_ptr table, int neox, pkc_ptr q_norm,
                               pkc_ptr k_norm, float eps, pkc_ptr slots, pkc_ptr positions) {
    const int64_t heads = (int64_t)q_heads + 2 * (int64_t)kv_heads;
    if (n == 0) return PKC_OK;
    int pairs = rope_dims / 2;
    kv_layout kv = layout_of(cache);
    void *args[] = {&qkv, &stride, &q_heads, &kv_heads, &head_dim, &pairs, &table, &neox, &q_norm, &k_norm, &eps, &kv, &slots,
                    &positions};
    // A thread per pair of a head, in whole warps (rms_row's), up to 1024.
    return launch(c, c->qkv_norm_rope_store, "qkv_norm_rope_store", (uint64_t)(n * heads), 1, norm_threads(head_dim / 2), 0, args);
}

int pkc_attention(pkc_context *c, const pkc_kv *cache, pkc_ptr q, int64_t ldq, int64_t n, int n_head,
                  int n_kv_head, int head_dim, pkc_ptr slots, pkc_ptr kv_len, int64_t max_kv, float scale,
                  pkc_ptr out, int64_t ldo) {
    return pkc_attention_prompt(c, cache, q, ldq, n, n_head, n_kv_head, head_dim, slots, kv_len, max_kv, 0, scale, out, ldo, 0, 0,
                                n);
}

int pkc_attention_window(pkc_context *c, const pkc_kv *cache, pkc_ptr q, int64_t ldq, int64_t n, int n_head,
                         int n_kv_head, int head_dim, pkc_ptr slots, pkc_ptr kv_len, int64_t max_kv, int window,
                         float scale, pkc_ptr out, int64_t ldo, pkc_ptr rows, int64_t ldr) {
    return pkc_attention_prompt(c, cache, q, ldq, n, n_head, n_kv_head, head_dim, slots, kv_len, max_kv, window, scale, out, ldo,
                                rows, ldr, n);
}

// The tensor-core kernels (attn_mma[i], pkc_attention_mma_h<head_dim>) by head size, with the
// block rows each query head takes (the kernel's HD / OD: a part of the dims each).
static const struct { int head_dim, parts; } mma_heads[] = {{64, 1}, {128, 1}, {256, 2}};

// mma_heads' index of `head_dim` where the tensor cores take it, else -1.
static int mma_kernel(const pkc_context *c, int head_dim) {
    if (!c || !c->mma_attention) return -1;
    for (int i = 0; i < (int)(sizeof mma_heads / sizeof mma_heads[0]); i++)
        if (mma_heads[i].head_dim == head_dim) return i;
    return -1;
}

int pkc_attention_uses_mma(const pkc_context *c, int head_dim) { return mma_kernel(c, head_dim) >= 0; }

int pkc_attention_prompt(pkc_context *c, const pkc_kv *cache, pkc_ptr q, int64_t ldq, int64_t n, int n_head, int n_kv_head,
                         int head_dim, pkc_ptr slots, pkc_ptr kv_len, int64_t max_kv, int window, float scale, pkc_ptr out,
                         int64_t ldo, pkc_ptr rows, int64_t ldr, int64_t from) {
    ENTER(c);
    int st = check_kv(c, "pkc_attention", cache);
    if (st) return st;
    if (rows && !rows_f16(c, n))
        return fail(c, PKC_ERR_INVALID, "pkc_attention: input rows at %lld rows, below the GEMM path's %lld", (long long)n,
                    (long long)c->gemm_min_rows);
    if ((st = check_rows(c, "pkc_attention", (int64_t)n_head * head_dim, n, rows, ldr))) return st;
    if (n < 0 || n > 0x7fffffff || n_head <= 0 || n_kv_head <= 0 || n_head % n_kv_head != 0 || head_dim <= 0 ||
        head_dim > 256 || head_dim < 8 || (head_dim & (head_dim - 1)) != 0 || (int64_t)n_kv_head * head_dim != cache->kv_dim ||
        ldq < (int64_t)n_head * head_dim || ldo < (int64_t)n_head * head_dim || max_kv < 0 || max_kv > 0x7fffffff ||
        window < 0 || from < 0 || from > n)
        return fail(c, PKC_ERR_INVALID, "pkc_attention: bad sizes");
    // A row reads at most `window` positions: the splits are over that span.
    if (window > 0 && max_kv > window) max_kv = window;
    const int group = n_head / n_kv_head;
    if (group > ATT_MAXG)
        return fail(c, PKC_ERR_UNSUPPORTED, "pkc_attention: %d query heads per kv head (at most %d)", group, ATT_MAXG);
    const int mk = mma_kernel(c, head_dim);
    if (mk >= 0 && from < n) {
        // 4 warps of 16 rows a block; each query head's parts a block row each
        kv_layout kv = layout_of(cache);
        int f = (int)from, nn = (int)n;
        void *args[] = {&kv, &q, &ldq, &n_head, &n_kv_head, &slots, &kv_len, &scale, &out, &ldo, &window, &rows, &ldr, &f, &nn};
        if ((st = launch(c, c->attn_mma[mk], "attention_mma", (uint64_t)((n - from + 63) / 64),
                         (unsigned)(n_head * mma_heads[mk].parts), 128, 0, args)))
            return st;
        n = from;
    }
    if (n == 0) return PKC_OK;
    const int64_t want = 2 * (int64_t)c->info.multiprocessors;
    // A block per query head where even that grid is small (decoding few rows), else per kv head.
    const int g = (int64_t)n * n_head <= want ? 1 : group;
    // Few blocks and long contexts: split the positions so the grid fills the chip.
    const int64_t units = n * (n_head / g);
    int64_t splits = 1;
    if (units < want && max_kv > 2 * ATT_TILE) {
        splits = (want + units - 1) / units;
        const int64_t most = (max_kv + 2 * ATT_TILE - 1) / (2 * ATT_TILE);
        if (splits > most) splits = most;
        if (splits > 64) splits = 64;
    }
    int64_t split_len = max_kv;
    if (splits > 1) {
        split_len = (max_kv + splits - 1) / splits;
        split_len = (split_len + ATT_TILE - 1) / ATT_TILE * ATT_TILE;
        splits = (max_kv + split_len - 1) / split_len;
    }
    if (split_len < 1) split_len = 1;
    CUdeviceptr partial = 0;
    if (splits > 1) {
        // Sized for every step of this head layout, not for this one: grown by a later step, the
        // buffer would move under the graphs captured before it. Splits come only where units <
        // want, so n * n_head * splits = units * g * splits < g * (want + units) < 2 * want * group.
        const size_t most = (size_t)(2 * want * group) * (size_t)(head_dim + 2) * 4;
        if ((st = ensure(c, &c->scratch_a, &c->cap_a, most))) return st;
        partial = c->scratch_a;
    }
    kv_layout kv = layout_of(cache);
    int sl = (int)split_len;
    // queries, a tile of scores, the stats (4 per head, keeping what follows 16-byte aligned) and
    // the position groups' partial outputs (ATT_THREADS * 8 / head_dim groups of group * head_dim)
    const unsigned shared = (unsigned)((g * head_dim + g * ATT_TILE + 4 * g + ATT_THREADS * 8 * g) * 4);
    // The rows where the output is final: the attention launch's without splits, else the merge's.
    CUdeviceptr rows_att = splits > 1 ? 0 : rows;
    void *args[] = {&kv, &q, &ldq, &n_head, &n_kv_head, &head_dim, &slots, &kv_len, &scale, &sl, &out, &ldo, &partial, &window,
                    &rows_att, &ldr};
    if ((st = launch(c, c->attn[g - 1], "attention", (uint64_t)units, (unsigned)splits, ATT_THREADS, shared, args))) return st;
    if (splits > 1) {
        int sp = (int)splits;
        void *cargs[] = {&partial, &n_head, &head_dim, &sp, &out, &ldo, &rows, &ldr};
        const unsigned threads = (unsigned)((head_dim + 31) / 32 * 32);
        if ((st = launch(c, c->attn_combine, "attention_combine", (uint64_t)(n * n_head), 1, threads, 0, cargs))) return st;
    }
    return PKC_OK;
}

// pkc_copy_kv's arguments (pkc_kernels.cu: KVCopy, KVCopies), every field 8 bytes. check_kv's
// rules and a layer stride of whole 8 halves make every run 16-byte aligned.
#define KV_COPIES 16
typedef struct {
    int64_t src, dst, count;
} kv_copy_arg;
typedef struct {
    kv_copy_arg op[KV_COPIES];
    int64_t layer_stride, layers;
} kv_copy_args;

static int moves(const pkc_kv_copy *o) { return o->count > 0 && o->src != o->dst; }

int pkc_copy_kv(pkc_context *c, const pkc_kv *cache, int layers, int64_t layer_stride, const pkc_kv_copy *copies, int n) {
    ENTER(c);
    int st = check_kv(c, "pkc_copy_kv", cache);
    if (st) return st;
    if (cache->pages) return fail(c, PKC_ERR_INVALID, "pkc_copy_kv: a slotted cache (a paged one shares or copies pages)");
    if (layers < 0 || layers > 65535 / 2 / KV_COPIES || layer_stride < 0 || layer_stride % 8 != 0 || n < 0 || (n > 0 && !copies))
        return fail(c, PKC_ERR_INVALID, "pkc_copy_kv: bad arguments (%d layers, layer stride %lld: a multiple of 8, %d copies)", layers,
                    (long long)layer_stride, n);
    for (int i = 0; i < n; i++) {
        const pkc_kv_copy *o = &copies[i];
        if (o->src < 0 || o->dst < 0 || o->count < 0 || o->count * cache->kv_dim > cache->slot_stride)
            return fail(c, PKC_ERR_INVALID, "pkc_copy_kv: copy %d: %lld positions of slot %d to slot %d (a slot holds %lld)", i,
                        (long long)o->count, o->src, o->dst, (long long)(cache->slot_stride / cache->kv_dim));
        // One launch runs them all at once: no copy may write a slot another reads or writes.
        for (int j = 0; j < i; j++)
            if (moves(o) && moves(&copies[j]) && (o->dst == copies[j].dst || o->dst == copies[j].src || o->src == copies[j].dst))
                return fail(c, PKC_ERR_INVALID, "pkc_copy_kv: copies %d (slot %d to %d) and %d (slot %d to %d) share a slot", j,
                            copies[j].src, copies[j].dst, i, o->src, o->dst);
    }
    // A launch for every 16 copies that move something.
    kv_copy_args a;
    memset(&a, 0, sizeof a);
    int64_t longest = 0, count = 0;
    for (int i = 0; i < n; i++) {
        const pkc_kv_copy *o = &copies[i];
        if (moves(o)) {
            const int64_t halves = o->count * cache->kv_dim;
            a.op[count++] = (kv_copy_arg){(int64_t)o->src * cache->slot_stride, (int64_t)o->dst * cache->slot_stride, halves};
            if (halves > longest) longest = halves;
        }
        if (count == 0 || (count < KV_COPIES && i + 1 < n)) continue;
        a.layer_stride = layer_stride;
        a.layers = layers;
        uint64_t blocks = blocks_for(longest / 8, 256);
        if (blocks > 64) blocks = 64;
        void *args[] = {(void *)&cache->k, (void *)&cache->v, &a};
        if ((st = launch(c, c->copy_kv, "copy_kv", blocks, (unsigned)(count * 2 * layers), 256, 0, args))) return st;
        memset(&a, 0, sizeof a);
        longest = count = 0;
    }
    return PKC_OK;
}
