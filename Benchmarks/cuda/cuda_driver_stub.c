// Link-time stand-in for the CUDA driver library (libcuda.so.1), for build_llama_cuda.sh on a
// machine with no driver: the calls ggml-cuda makes directly (its virtual-memory pool). Where the
// tools run, the real driver is loaded under the same soname; these bodies never run there.
#include <cuda.h>

CUresult cuDeviceGet(CUdevice *d, int o) { (void)d; (void)o; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuDeviceGetAttribute(int *p, CUdevice_attribute a, CUdevice d) { (void)p; (void)a; (void)d; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuGetErrorString(CUresult e, const char **s) { (void)e; (void)s; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuMemAddressFree(CUdeviceptr p, size_t n) { (void)p; (void)n; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t a, CUdeviceptr b, unsigned long long f) {
    (void)p; (void)n; (void)a; (void)b; (void)f; return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *p, unsigned long long f) {
    (void)h; (void)n; (void)p; (void)f; return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags o) {
    (void)g; (void)p; (void)o; return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemMap(CUdeviceptr p, size_t n, size_t o, CUmemGenericAllocationHandle h, unsigned long long f) {
    (void)p; (void)n; (void)o; (void)h; (void)f; return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle h) { (void)h; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t c) { (void)p; (void)n; (void)d; (void)c; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuMemUnmap(CUdeviceptr p, size_t n) { (void)p; (void)n; return CUDA_ERROR_NOT_SUPPORTED; }
