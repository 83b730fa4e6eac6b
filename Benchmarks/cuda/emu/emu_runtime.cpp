// A CUDA device emulated on the CPU, for testing PlinthCUDA where there is no GPU: the driver
// API, NVRTC and cuBLAS as far as pk_cuda.c uses them, in one shared library that build.sh
// links as libcuda.so.1, libnvrtc.so and libcublas.so. "Compiling" a module picks the kernels
// built from the same pkc_kernels.cu as host C++ (emu_module.cpp); a launch runs every block,
// one after another in a scrambled order, and every thread of a block as a fiber that switches
// only at __syncthreads, __syncwarp and shuffles, in a scrambled order too, so code that leans
// on an order CUDA does not promise tends to show it. Streams run in issue order; a stream
// capture records the launches, copies and GEMMs and a graph launch replays them.
//
// What it checks: the kernels' arithmetic and indexing, barriers (a divergent barrier is an
// error naming the kernel), the host code's launches, graphs, streams and caches. What it cannot:
// speed, races between blocks running at once, and the device's expf/sincosf last bits.
#include "emu_device.h"
#include "emu_kernels.h"

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <mutex>
#include <string>
#include <vector>

#include <cblas.h>
#include <sys/mman.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#include <time.h>
#include <unistd.h>

namespace pkc_emu_source {
#include "pkc_kernels_src.c"
}

namespace pkc_emu {

// ---- fibers ------------------------------------------------------------------------------------

extern "C" void pkc_emu_switch(void **save, void *to);
#if defined(__x86_64__)
// Saves the callee-saved registers on the current stack, stores the stack pointer in *save,
// and continues on `to`, a stack this left (or one made by new_stack).
asm(R"(
    .text
    .globl pkc_emu_switch
    .type pkc_emu_switch, @function
pkc_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size pkc_emu_switch, .-pkc_emu_switch
)");
#else
#error "the CUDA emulator's fiber switch is written for x86-64"
#endif

enum State { ready, wait_warp, wait_block, done };
enum WarpOp { no_op, shuffle_op, syncwarp_op }; // what a lane waits at, in wait_warp

struct Fiber {
    pkc_emu_uint3 tid{}; // first: thread_index() reads it through the pointer
    void *sp = nullptr;
    char *stack = nullptr;
    int warp = 0;
    State state = ready;
    WarpOp warp_op = no_op;
    bool started = false;
    bool dependent = false; // has passed PKC_DEPENDENT()
    unsigned exchanges = 0; // its parity picks the slot: one barrier per shuffle
    uint64_t slot[2] = {0, 0};
    uint32_t frag[2][6] = {}; // an mma's a and b, in the same two slots as shuffles
};

// Plain globals, not thread_local: one kernel runs at a time (run's lock), and a TLS lookup per
// threadIdx costs more than the arithmetic around it.
Fiber *current;
pkc_emu_uint3 block_index, block_dim, grid_dim;
unsigned char *dynamic_shared;

namespace {

constexpr size_t stack_size = 256 * 1024;

uint64_t mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2f4fb3ull;
    return x ^ (x >> 33);
}

// A scrambled order of 0..<count from a seed: a start and a stride coprime with the count, so
// every index comes once (the blocks of a launch, the threads of a block).
struct Scramble {
    uint64_t first, stride, count;
    Scramble(uint64_t seed, uint64_t n) : first(seed % n), stride(n > 1 ? (mix(seed) | 1) % n : 1), count(n) {
        while (n > 1 && std::gcd<uint64_t, uint64_t>(stride, n) != 1) stride++;
    }
    uint64_t operator[](uint64_t i) const { return (first + i * stride) % count; }
};

struct Block {
    std::vector<Fiber> fibers;
    std::vector<int> alive_in_warp, waiting_in_warp, queue;
    std::vector<char *> *free_stacks = nullptr;
    size_t head = 0;
    int alive = 0, waiting_block = 0;
    void *scheduler_sp = nullptr;
    const Kernel *kernel = nullptr;
    void **args = nullptr;
    bool aborted = false;
    unsigned releases = 0; // scrambles the order in which a barrier lets its threads go
    std::string error;
};

Block *block;

char *take_stack(Block &b) {
    if (!b.free_stacks->empty()) {
        char *s = b.free_stacks->back();
        b.free_stacks->pop_back();
        return s;
    }
    // A guard page below each stack: an overflow faults instead of corrupting a neighbour.
    void *p = mmap(nullptr, stack_size + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "pkc-emu: out of memory for fiber stacks\n");
        abort();
    }
    mprotect(p, 4096, PROT_NONE);
    return static_cast<char *>(p) + 4096;
}

[[noreturn]] void leave(State s) {
    current->state = s;
    void *dead;
    pkc_emu_switch(&dead, block->scheduler_sp);
    __builtin_unreachable();
}

void fiber_main() {
    block->kernel->invoke(block->kernel->fn, block->args);
    leave(done);
}

void *new_stack(char *stack) {
#if defined(__SANITIZE_ADDRESS__)
    // A fiber leaves its frames without returning: their redzones stay poisoned (an ASan build
    // of the emulator, PKC_EMU_CXXFLAGS=-fsanitize=address, checks the kernels' memory accesses).
    __asan_unpoison_memory_region(stack, stack_size);
#endif
    uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + stack_size) & ~uintptr_t(15);
    uintptr_t *sp = reinterpret_cast<uintptr_t *>(top);
    *--sp = 0;                                         // fiber_main's return address: it never returns
    *--sp = reinterpret_cast<uintptr_t>(&fiber_main); // where pkc_emu_switch's ret goes
    for (int i = 0; i < 6; i++) *--sp = 0;             // rbp, rbx, r12-r15
    return sp;
}

void wait(State s, WarpOp op = no_op) {
    current->state = s;
    current->warp_op = op;
    pkc_emu_switch(&current->sp, block->scheduler_sp);
}

// Threads [lo, hi) waiting in `s` go on, starting from a rotating point and alternately up or
// down, so that no thread is always first after a barrier.
void release(Block &b, int lo, int hi, State s) {
    const int count = hi - lo;
    const unsigned r = b.releases++;
    const int start = (int)((r * 2654435761u) % (unsigned)count);
    for (int n = 0; n < count; n++) {
        const int i = lo + (r & 1 ? (start + n) % count : (start - n + count) % count);
        if (b.fibers[i].state == s) {
            b.fibers[i].state = ready;
            b.queue.push_back(i);
        }
    }
}

// A warp's barrier: every live lane must wait at the same kind (a shuffle or __syncwarp).
void release_warp(Block &b, int w) {
    const int lo = w * 32, hi = std::min<int>(lo + 32, (int)b.fibers.size());
    WarpOp op = no_op;
    for (int i = lo; i < hi; i++) {
        const Fiber &f = b.fibers[i];
        if (f.state != wait_warp) continue;
        if (op != no_op && f.warp_op != op && b.error.empty()) {
            b.error = "lanes of one warp wait at different places (a shuffle and __syncwarp)";
            b.aborted = true;
        }
        op = f.warp_op;
    }
    release(b, lo, hi, wait_warp);
    b.waiting_in_warp[w] = 0;
}

void release_block(Block &b) {
    release(b, 0, (int)b.fibers.size(), wait_block);
    b.waiting_block = 0;
}

const char *state_name(State s) {
    switch (s) {
    case ready: return "running";
    case wait_warp: return "at a warp barrier or shuffle";
    case wait_block: return "at __syncthreads";
    default: return "finished";
    }
}

// Runs one block: every thread from the start, switching at barriers, until all are done.
// Returns false with b.error set when the block cannot finish (a barrier some threads never
// reach, or a call the emulator refuses).
bool run_block(Block &b, unsigned threads, uint64_t seed) {
    b.fibers.assign(threads, Fiber{});
    const int warps = (int)((threads + 31) / 32);
    b.alive_in_warp.assign(warps, 0);
    b.waiting_in_warp.assign(warps, 0);
    b.queue.clear();
    b.head = 0;
    b.alive = (int)threads;
    b.waiting_block = 0;
    b.aborted = false;
    for (unsigned i = 0; i < threads; i++) {
        Fiber &f = b.fibers[i];
        f.tid = {i % block_dim.x, (i / block_dim.x) % block_dim.y, i / (block_dim.x * block_dim.y)};
        f.warp = (int)(i / 32);
        b.alive_in_warp[f.warp]++;
    }
    const Scramble order(seed, threads); // threads start in a scrambled order
    for (unsigned i = 0; i < threads; i++) b.queue.push_back((int)order[i]);
    while (b.head < b.queue.size() && !b.aborted) {
        const int i = b.queue[b.head++];
        Fiber &f = b.fibers[i];
        current = &f;
        if (!f.started) {
            f.started = true;
            f.stack = take_stack(b);
            f.sp = new_stack(f.stack);
        }
        pkc_emu_switch(&b.scheduler_sp, f.sp);
        if (b.aborted) break;
        switch (f.state) {
        case done:
            if (!f.dependent && !b.aborted) {
                b.error = "thread " + std::to_string(i) + " ended without PKC_DEPENDENT() (the wait for the kernel before)";
                b.aborted = true;
            }
            b.free_stacks->push_back(f.stack);
            f.stack = nullptr;
            b.alive--;
            b.alive_in_warp[f.warp]--;
            if (b.waiting_in_warp[f.warp] && b.waiting_in_warp[f.warp] == b.alive_in_warp[f.warp]) release_warp(b, f.warp);
            if (b.waiting_block && b.waiting_block == b.alive) release_block(b);
            break;
        case wait_warp:
            if (++b.waiting_in_warp[f.warp] == b.alive_in_warp[f.warp]) release_warp(b, f.warp);
            break;
        case wait_block:
            if (++b.waiting_block == b.alive) release_block(b);
            break;
        case ready: break;
        }
        if (b.queue.size() > 4 * threads && b.head > 2 * threads) { // keep the queue short
            b.queue.erase(b.queue.begin(), b.queue.begin() + (long)b.head);
            b.head = 0;
        }
    }
    if (b.alive > 0 && !b.aborted) {
        char why[300];
        int first = 0;
        while (b.fibers[first].state == done) first++;
        int other = first + 1;
        while (other < (int)threads && (b.fibers[other].state == done || b.fibers[other].state == b.fibers[first].state))
            other++;
        snprintf(why, sizeof why, "a barrier some threads never reach: thread %d is %s%s%s%s", first,
                 state_name(b.fibers[first].state), other < (int)threads ? ", thread " : "",
                 other < (int)threads ? std::to_string(other).c_str() : "",
                 other < (int)threads ? (std::string(" is ") + state_name(b.fibers[other].state)).c_str() : "");
        b.error = why;
    }
    // A stopped fiber's stack holds nothing that needs unwinding: take it back.
    for (Fiber &f : b.fibers)
        if (f.stack) b.free_stacks->push_back(f.stack), f.stack = nullptr;
    return b.alive == 0 && !b.aborted;
}

} // namespace

static_assert(offsetof(Fiber, tid) == 0, "thread_index() reads the fiber's first member");

// Every kernel's first statement: before it a thread may not reach a barrier or a shuffle.
void dependent_launch_point() {
    if (current->dependent) fail("PKC_DEPENDENT() twice in one thread");
    current->dependent = true;
}
static void check_dependent() {
    if (!current->dependent) fail("a barrier or shuffle before PKC_DEPENDENT()");
}
void sync_block() { check_dependent(); wait(wait_block); }
void sync_warp() { check_dependent(); wait(wait_warp, syncwarp_op); }

// Lanes alternate between two slots, so one barrier is enough: a lane can write the next
// shuffle's slot before the others read this one's, and the shuffle after that waits for them.
uint64_t exchange_xor(uint64_t bits, int lane_mask, int width) {
    check_dependent();
    Fiber *self = current;
    const unsigned p = self->exchanges++ & 1;
    self->slot[p] = bits;
    wait(wait_warp, shuffle_op);
    // The lane is the linear thread index's low 5 bits (2-D blocks included).
    const int lane = (int)((self - block->fibers.data()) & 31), from = lane ^ lane_mask;
    if (from >= ((lane / width) + 1) * width) return bits; // past the caller's segment
    const size_t j = (size_t)self->warp * 32 + (size_t)from;
    // The partner may have exited since the barrier, but it must have taken part in this shuffle.
    if (j >= block->fibers.size() || block->fibers[j].exchanges < self->exchanges)
        fail("a shuffle reads a lane that has exited or does not exist");
    return block->fibers[j].slot[p];
}

// Each lane computes its own four outputs from the a and b fragments of the lanes that hold
// their rows and columns: A's row r from lanes 4(r % 8) + 0..3, B's column c from lanes 4c + 0..3.
void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    check_dependent();
    Fiber *self = current;
    const unsigned p = self->exchanges++ & 1;
    for (int i = 0; i < 4; i++) self->frag[p][i] = a[i];
    self->frag[p][4] = b[0];
    self->frag[p][5] = b[1];
    wait(wait_warp, shuffle_op);
    const size_t base = (size_t)self->warp * 32;
    if (base + 32 > block->fibers.size()) fail("an mma in a warp of fewer than 32 threads");
    for (size_t j = base; j < base + 32; j++)
        if (block->fibers[j].exchanges < self->exchanges) fail("an mma that a lane of the warp did not take part in");
    const int lane = (int)((self - block->fibers.data()) & 31), g = lane >> 2, t = lane & 3;
    auto half_at = [&](int l, int reg, int hi) { return (double)half_to_f32((uint16_t)(block->fibers[base + l].frag[p][reg] >> (16 * hi))); };
    // A(r, k): lane 4(r % 8) + (k % 8) / 2, register (r >= 8) + 2 (k >= 8), half k % 2.
    auto A = [&](int r, int k) { return half_at(4 * (r & 7) + ((k & 7) >> 1), (r >> 3) + 2 * (k >> 3), k & 1); };
    // B(k, c): lane 4c + (k % 8) / 2, register 4 + (k >= 8), half k % 2.
    auto B = [&](int k, int c) { return half_at(4 * c + ((k & 7) >> 1), 4 + (k >> 3), k & 1); };
    for (int e = 0; e < 4; e++) {
        const int r = g + 8 * (e >> 1), c = 2 * t + (e & 1);
        double s = 0.0;
        for (int k = 0; k < 16; k++) s += A(r, k) * B(k, c);
        d[e] = (float)((double)d[e] + s);
    }
}

void fail(const char *what) {
    if (block->error.empty()) block->error = what;
    block->aborted = true;
    leave(done);
}

// ---- modules and launches ----------------------------------------------------------------------

namespace {

std::mutex &registry_lock() {
    static std::mutex m;
    return m;
}
std::map<int, const Module *> &registry() {
    static std::map<int, const Module *> r;
    return r;
}

std::atomic<uint64_t> launch_counter{0};

// The base of the scrambled orders: PKC_EMU_SEED, or a fixed default so runs repeat.
uint64_t seed_base() {
    static const uint64_t s = [] {
        const char *e = getenv("PKC_EMU_SEED");
        return e ? strtoull(e, nullptr, 10) : 12345ull;
    }();
    return s;
}

} // namespace

void register_module(const Module *m) {
    std::lock_guard<std::mutex> g(registry_lock());
    registry()[m->format] = m;
}

struct Launch {
    const Kernel *kernel;
    unsigned grid[3], threads[3];
    unsigned shared_bytes;
    std::vector<std::vector<unsigned char>> values; // owned copies of the arguments (captured launches)
};

// The kernel modules' static __shared__ variables, gathered by shared.ld (build.sh; a link
// without it fails here rather than leaving them unfilled).
extern "C" unsigned char __start_pkc_emu_shared[] __attribute__((visibility("hidden")));
extern "C" unsigned char __stop_pkc_emu_shared[] __attribute__((visibility("hidden")));

// Fills them all. Under ASan each static has a redzone after it, which memset (intercepted)
// would refuse to write: the fill is then a loop ASan does not check.
#if defined(__SANITIZE_ADDRESS__)
__attribute__((no_sanitize_address)) void fill_static_shared(int fill) {
    for (volatile unsigned char *p = __start_pkc_emu_shared; p < __stop_pkc_emu_shared; p++) *p = (unsigned char)fill;
}
#else
void fill_static_shared(int fill) { memset(__start_pkc_emu_shared, fill, (size_t)(__stop_pkc_emu_shared - __start_pkc_emu_shared)); }
#endif

// Runs a kernel to the end. Returns an empty string, or why it failed.
std::string run(const Kernel *k, const unsigned grid[3], const unsigned threads[3], unsigned shared_bytes, void **args) {
    static std::mutex one_at_a_time; // the fibers' state is per OS thread, but kernels share statics
    std::lock_guard<std::mutex> g(one_at_a_time);
    const uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
    const unsigned count = threads[0] * threads[1] * threads[2];
    if (count == 0 || count > 1024 || blocks == 0) return "invalid launch dimensions";
    if (shared_bytes > 227 * 1024) return "more dynamic shared memory than a block can have";
    static std::vector<char *> stacks; // kept from launch to launch
    Block b;
    b.free_stacks = &stacks;
    b.kernel = k;
    b.args = args;
    block = &b;
    std::vector<unsigned char> shared(std::max(shared_bytes, 1u)); // exact: an ASan build sees overruns
    block_dim = {threads[0], threads[1], threads[2]};
    grid_dim = {grid[0], grid[1], grid[2]};
    const uint64_t launch_number = launch_counter.fetch_add(1), seed = mix(seed_base() + launch_number);
    const Scramble order(seed, blocks);
    std::string error;
    for (uint64_t n = 0; n < blocks && error.empty(); n++) {
        const uint64_t i = order[n];
        block_index = {(unsigned)(i % grid[0]), (unsigned)((i / grid[0]) % grid[1]), (unsigned)(i / ((uint64_t)grid[0] * grid[1]))};
        // Shared memory holds anything at a block's start on a device: here 0xff bytes (NaN as
        // floats, -1 as ints) and 0x7f ones (3.4e38, 2139062143) by turns, so that a read before
        // the block's own write shows, also where a NaN would lose every comparison.
        const int fill = (launch_number + n) & 1 ? 0x7f : 0xff;
        if (shared_bytes) memset(shared.data(), fill, shared_bytes);
        fill_static_shared(fill); // every module's statics: as unset at a block's start as dynamic
        dynamic_shared = shared.data();
        if (!run_block(b, count, mix(seed ^ i))) {
            char where[160];
            snprintf(where, sizeof where, "%s, block (%u,%u,%u): ", k->name, block_index.x, block_index.y, block_index.z);
            error = where + b.error;
        }
    }
    block = nullptr;
    current = nullptr;
    return error;
}

} // namespace pkc_emu

// ---- the driver API ----------------------------------------------------------------------------

using namespace pkc_emu;

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
    CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
    CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
};

namespace {

struct Graph;

struct Gemm { // cublasGemmEx's arguments
    int ta, tb, m, n, k;
    float alpha, beta;
    const void *a, *b;
    void *c;
    int atype, btype, ctype, lda, ldb, ldc;
};

struct Op {
    enum Kind { kernel, copy, set, gemm } kind;
    Launch launch;
    void *dst = nullptr;
    const void *src = nullptr;
    size_t bytes = 0;
    unsigned char value = 0;
    Gemm blas{}; // a gemm op's arguments
};

// In a capture, `recorded` counts the ops a stream put in the graph and `joined` how many of
// them the origin stream has waited for: a capture may only end with every fork joined back.
struct Stream {
    Graph *capture = nullptr;
    size_t recorded = 0, joined = 0;
};
// An event names its capture by id: the capture may have ended (and its graph gone) by the
// time a stream waits on it.
struct Event {
    uint64_t capture = 0;
    Stream *source = nullptr;
    size_t seq = 0;
    double time = 0;
};
struct Graph {
    std::vector<Op> ops;
    uint64_t id = 0;
    Stream *origin = nullptr;
};

std::mutex state_lock;
std::vector<Stream *> streams;          // every stream made, for the end of a capture
std::map<uint64_t, Graph *> open_captures;
uint64_t next_capture_id = 1;
// Captures this thread has begun and not ended: the driver refuses "unsafe" calls meanwhile
// (allocations, synchronizations) in the thread-local mode pk_cuda.c uses.
thread_local int captures_here = 0;

Graph *open_capture(uint64_t id) {
    std::lock_guard<std::mutex> g(state_lock);
    auto it = open_captures.find(id);
    return it == open_captures.end() ? nullptr : it->second;
}
std::map<CUdeviceptr, size_t> allocations;
size_t allocated = 0;
Stream default_stream;
thread_local std::string last_launch_error;

double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

size_t total_memory() {
    const char *e = getenv("PKC_EMU_MEMORY_GIB");
    if (e) return (size_t)(atof(e) * 1073741824.0);
    return (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
}

Stream *stream_of(void *s) { return s ? static_cast<Stream *>(s) : &default_stream; }

// A column-major matrix of `rows` x `cols` at leading dimension `ld`, as floats: the elements
// only, since the last column may end the allocation.
std::vector<float> read_matrix(const void *p, int type, int rows, int cols, int ld) {
    std::vector<float> out((size_t)rows * cols);
    for (size_t j = 0; j < (size_t)cols; j++)
        for (size_t i = 0; i < (size_t)rows; i++)
            out[j * rows + i] = type == 0 ? static_cast<const float *>(p)[j * ld + i]
                                          : half_to_f32(static_cast<const uint16_t *>(p)[j * ld + i]);
    return out;
}

void do_gemm(const Gemm &g) {
    // Column-major, as cuBLAS: op(A) is m x k, op(B) k x n, C m x n.
    const int ar = g.ta ? g.k : g.m, ac = g.ta ? g.m : g.k, br = g.tb ? g.n : g.k, bc = g.tb ? g.k : g.n;
    const std::vector<float> a = read_matrix(g.a, g.atype, ar, ac, g.lda), b = read_matrix(g.b, g.btype, br, bc, g.ldb);
    std::vector<float> ab((size_t)g.m * g.n);
    if (g.m && g.n)
        cblas_sgemm(CblasColMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f,
                    a.data(), std::max(ar, 1), b.data(), std::max(br, 1), 0.0f, ab.data(), std::max(g.m, 1));
    // Then alpha * AB + beta * C element by element, as cuBLAS's epilogue does (OpenBLAS's beta
    // folds C into its partial sums: another rounding).
    for (size_t j = 0; j < (size_t)g.n; j++)
        for (size_t i = 0; i < (size_t)g.m; i++) {
            const float p = g.alpha * ab[j * g.m + i];
            if (g.ctype == 0) {
                float &y = static_cast<float *>(g.c)[j * g.ldc + i];
                y = g.beta == 0.0f ? p : p + g.beta * y;
            } else {
                uint16_t &y = static_cast<uint16_t *>(g.c)[j * g.ldc + i];
                y = f32_to_half(g.beta == 0.0f ? p : p + g.beta * half_to_f32(y));
            }
        }
}

// PKC_EMU_TRACE=FILE: one line per operation run (a kernel's name, grid and block; copies,
// memsets and GEMMs by kind) and one per graph replayed, to count what a step launches.
static FILE *trace_file() {
    static FILE *f = [] {
        const char *path = getenv("PKC_EMU_TRACE");
        return path && *path ? fopen(path, "w") : nullptr;
    }();
    return f;
}
static void trace(const Op &op) {
    FILE *f = trace_file();
    if (!f) return;
    switch (op.kind) {
    case Op::kernel:
        fprintf(f, "kernel %s %ux%ux%u %ux%ux%u\n", op.launch.kernel->name, op.launch.grid[0], op.launch.grid[1],
                op.launch.grid[2], op.launch.threads[0], op.launch.threads[1], op.launch.threads[2]);
        break;
    case Op::copy: fprintf(f, "copy %zu\n", op.bytes); break;
    case Op::set: fprintf(f, "memset %zu\n", op.bytes); break;
    case Op::gemm: fprintf(f, "gemm %dx%dx%d\n", op.blas.m, op.blas.n, op.blas.k); break;
    default: break;
    }
    fflush(f);
}

// PKC_EMU_NO_KERNELS=1: kernels and GEMMs are not run (copies and memsets are), so a program's
// time is its host code's and the driver calls': what a step costs the host, beside the GPU's
// work, where the next step waits for this one's tokens. Results are then meaningless.
static bool no_kernels() {
    static const bool off = [] {
        const char *e = getenv("PKC_EMU_NO_KERNELS");
        return e && strcmp(e, "1") == 0;
    }();
    return off;
}

CUresult execute(Op &op) {
    trace(op);
    if (no_kernels() && (op.kind == Op::kernel || op.kind == Op::gemm)) return CUDA_SUCCESS;
    switch (op.kind) {
    case Op::kernel: {
        std::vector<void *> args(op.launch.values.size());
        for (size_t i = 0; i < args.size(); i++) args[i] = op.launch.values[i].data();
        last_launch_error = run(op.launch.kernel, op.launch.grid, op.launch.threads, op.launch.shared_bytes, args.data());
        if (!last_launch_error.empty()) {
            fprintf(stderr, "pkc-emu: %s\n", last_launch_error.c_str());
            return CUDA_ERROR_LAUNCH_FAILED;
        }
        return CUDA_SUCCESS;
    }
    case Op::copy: memmove(op.dst, op.src, op.bytes); return CUDA_SUCCESS;
    case Op::set: memset(op.dst, op.value, op.bytes); return CUDA_SUCCESS;
    case Op::gemm: do_gemm(op.blas); return CUDA_SUCCESS;
    default: return CUDA_SUCCESS;
    }
}

// Runs the op now, or records it where the stream is being captured.
CUresult submit(void *stream, Op op) {
    Stream *s = stream_of(stream);
    if (s->capture) {
        s->capture->ops.push_back(std::move(op));
        s->recorded++;
        return CUDA_SUCCESS;
    }
    return execute(op);
}

bool is_device_range(CUdeviceptr p, size_t bytes) {
    std::lock_guard<std::mutex> g(state_lock);
    auto it = allocations.upper_bound(p);
    if (it == allocations.begin()) return false;
    --it;
    return p >= it->first && p + bytes <= it->first + it->second;
}


CUresult submit_gemm(void *stream, const Gemm &g) {
    Op op{Op::gemm, {}, nullptr, nullptr, 0, 0, g};
    return submit(stream, std::move(op));
}

// The device's compute capability as one number (90: 9.0), $PKC_EMU_CC or an H100's; and the
// architectures the emulated NVRTC builds for, $PKC_EMU_NVRTC_ARCHS ("75,80,90") or 90 alone. Read
// at each call, so that a test can open devices of several kinds in one process.
int emulated_cc() {
    const char *e = getenv("PKC_EMU_CC");
    return e && atoi(e) >= 10 ? atoi(e) : 90;
}
// The driver's version ($PKC_EMU_DRIVER, 12080: CUDA 12.8) and the emulated NVRTC's
// ($PKC_EMU_NVRTC_VERSION "13.0"; 0.1 by default, so that its cache keys never meet a real
// NVRTC's), as major * 1000 + minor * 10.
int driver_version() {
    const char *e = getenv("PKC_EMU_DRIVER");
    return e && atoi(e) > 0 ? atoi(e) : 12080;
}
int nvrtc_version() {
    const char *e = getenv("PKC_EMU_NVRTC_VERSION");
    int major = 0, minor = 1;
    if (e) sscanf(e, "%d.%d", &major, &minor);
    return major * 1000 + minor * 10;
}
std::vector<int> nvrtc_archs() {
    std::vector<int> archs;
    const char *e = getenv("PKC_EMU_NVRTC_ARCHS");
    for (const char *p = e ? e : "90"; *p;) {
        char *end;
        const long a = strtol(p, &end, 10);
        if (end == p) break;
        archs.push_back((int)a);
        p = *end ? end + 1 : end;
    }
    return archs;
}

} // namespace

extern "C" {

CUresult cuInit(unsigned) { return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int *v) { *v = driver_version(); return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(int *d, int ordinal) {
    if (ordinal != 0) return CUDA_ERROR_INVALID_VALUE;
    *d = 0;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char *name, int len, int) {
    snprintf(name, (size_t)len, "CPU emulator of a CUDA device (Benchmarks/cuda/emu, not a GPU)");
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int) {
    switch (attr) {
    case 16: { // multiprocessors: an H100's by default, so launches are shaped as in the device rounds
        const char *e = getenv("PKC_EMU_SMS");
        *v = e ? atoi(e) : 132;
        return CUDA_SUCCESS;
    }
    case 75: *v = emulated_cc() / 10; return CUDA_SUCCESS;
    case 76: *v = emulated_cc() % 10; return CUDA_SUCCESS;
    default: *v = 0; return CUDA_SUCCESS;
    }
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int) { *bytes = total_memory(); return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int) { static int token; *ctx = &token; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRelease_v2(int) { return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(void *) { return CUDA_SUCCESS; }
CUresult cuStreamCreate(void **s, unsigned) {
    Stream *st = new Stream();
    std::lock_guard<std::mutex> g(state_lock);
    streams.push_back(st);
    *s = st;
    return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(void *s) {
    std::lock_guard<std::mutex> g(state_lock);
    streams.erase(std::remove(streams.begin(), streams.end(), static_cast<Stream *>(s)), streams.end());
    delete static_cast<Stream *>(s);
    return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(void *) { return captures_here ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS; }

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    if (captures_here) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    std::lock_guard<std::mutex> g(state_lock);
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if (bytes > total_memory() - std::min(allocated, total_memory())) return CUDA_ERROR_OUT_OF_MEMORY;
    void *m = nullptr;
    if (posix_memalign(&m, 256, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    // Fresh device memory is not zeroed: make that visible.
    memset(m, 0xa5, bytes);
    *p = (CUdeviceptr)(uintptr_t)m;
    allocations[*p] = bytes;
    allocated += bytes;
    return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    if (captures_here) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    std::lock_guard<std::mutex> g(state_lock);
    auto it = allocations.find(p);
    if (it == allocations.end()) return p ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    allocated -= it->second;
    allocations.erase(it);
    free((void *)(uintptr_t)p);
    return CUDA_SUCCESS;
}
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    std::lock_guard<std::mutex> g(state_lock);
    auto it = allocations.upper_bound(p);
    if (it == allocations.begin()) return CUDA_ERROR_NOT_FOUND;
    --it;
    if (p >= it->first + it->second) return CUDA_ERROR_NOT_FOUND;
    if (base) *base = it->first;
    if (size) *size = it->second;
    return CUDA_SUCCESS;
}
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    std::lock_guard<std::mutex> g(state_lock);
    *total = total_memory();
    *free_bytes = *total - std::min(allocated, *total);
    return CUDA_SUCCESS;
}

static CUresult copy(void *dst, const void *src, size_t bytes, void *stream) {
    Op op{Op::copy, {}, dst, src, bytes, 0, {}};
    return submit(stream, std::move(op));
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, void *s) {
    if (!is_device_range(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
    return copy((void *)(uintptr_t)dst, src, bytes, s);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, void *s) {
    if (!is_device_range(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
    return copy(dst, (const void *)(uintptr_t)src, bytes, s);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void *s) {
    if (!is_device_range(dst, bytes) || !is_device_range(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
    return copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes, s);
}
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t bytes, void *s) {
    if (!is_device_range(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
    Op op{Op::set, {}, (void *)(uintptr_t)dst, nullptr, bytes, v, {}};
    return submit(s, std::move(op));
}

// ---- modules: NVRTC's "cubin" here names the module and the source it was built from ---------

struct EmuModule {
    const Module *module;
};

static uint64_t source_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}
static uint64_t built_source_hash() {
    static const uint64_t h = source_hash(pkc_emu_source::pkc_kernels_source);
    return h;
}

CUresult cuModuleLoadData(void **out, const void *image) {
    int format = 0, arch = 0, nvrtc = 0;
    unsigned long long hash = 0;
    char kind[16] = "";
    if (sscanf(static_cast<const char *>(image), "pkc-emu module format=%d source=%llx %15[a-z]_%d nvrtc=%d", &format, &hash, kind,
               &arch, &nvrtc) != 5 ||
        hash != built_source_hash())
        return CUDA_ERROR_INVALID_IMAGE;
    const bool sm = strcmp(kind, "sm") == 0;
    if (!sm && strcmp(kind, "compute") != 0) return CUDA_ERROR_INVALID_IMAGE;
    // Machine code from a later major's toolkit than the driver's, or PTX from a later version.
    if (sm ? nvrtc / 1000 > driver_version() / 1000 : nvrtc > driver_version()) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    // As the driver: machine code runs on its own major version's later minors; PTX (compiled
    // here for the device) on any device at least its architecture.
    const int cc = emulated_cc();
    if (arch > cc || (sm && arch / 10 != cc / 10)) return CUDA_ERROR_NO_BINARY_FOR_GPU;
    std::lock_guard<std::mutex> g(registry_lock());
    auto it = registry().find(format);
    if (it == registry().end()) return CUDA_ERROR_INVALID_IMAGE;
    *out = new EmuModule{it->second};
    return CUDA_SUCCESS;
}
CUresult cuModuleUnload(void *m) { delete static_cast<EmuModule *>(m); return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    const Module *mod = static_cast<EmuModule *>(m)->module;
    for (int i = 0; i < mod->count; i++)
        if (strcmp(mod->kernels[i].name, name) == 0) {
            *f = const_cast<Kernel *>(&mod->kernels[i]);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}
// The dynamic shared memory a kernel may take beyond the default 48 KiB (attribute 8).
static std::mutex attribute_lock;
static std::map<const Kernel *, int> shared_opt_in;
CUresult cuFuncSetAttribute(void *f, int attr, int value) {
    if (attr == 8) {
        if (value < 0 || value > 227 * 1024) return CUDA_ERROR_INVALID_VALUE;
        std::lock_guard<std::mutex> g(attribute_lock);
        shared_opt_in[static_cast<const Kernel *>(f)] = value;
    }
    return CUDA_SUCCESS;
}

// PKC_EMU_LAUNCH_LOG=FILE: each kernel's largest block and dynamic shared memory over the
// process's launches, appended to FILE at exit as "MODULE KERNEL THREADS SHARED OPT_IN LAUNCHES"
// (MODULE: the format's ggml type, -1 for the core module; OPT_IN: the dynamic shared memory
// cuFuncSetAttribute allowed, else 0), which launch_resources.py holds against ptxas's registers
// and shared memory for a device. (Defined after shared_opt_in: destroyed, and written, first.)
namespace {
struct LaunchShape {
    int format = -2;
    unsigned threads = 0, shared = 0;
    uint64_t count = 0;
};
struct LaunchLog {
    const char *const path = getenv("PKC_EMU_LAUNCH_LOG"); // unset: launches are not noted
    std::mutex lock;
    std::map<const Kernel *, LaunchShape> shapes;
    void note(const Kernel *k, unsigned threads, unsigned shared) {
        if (!path) return;
        std::lock_guard<std::mutex> g(lock);
        LaunchShape &s = shapes[k];
        if (!s.count) { // its module, found now: the registry may be gone by the time this is written
            std::lock_guard<std::mutex> r(registry_lock());
            for (const auto &[f, m] : registry())
                if (k >= m->kernels && k < m->kernels + m->count) s.format = f;
        }
        s.threads = std::max(s.threads, threads);
        s.shared = std::max(s.shared, shared);
        s.count++;
    }
    ~LaunchLog() {
        if (!path || shapes.empty()) return;
        std::string text;
        std::lock_guard<std::mutex> g(attribute_lock);
        for (const auto &[k, s] : shapes) {
            const auto opt_in = shared_opt_in.find(k);
            char line[256];
            snprintf(line, sizeof line, "%d %s %u %u %d %llu\n", s.format, k->name, s.threads, s.shared,
                     opt_in == shared_opt_in.end() ? 0 : opt_in->second, (unsigned long long)s.count);
            text += line;
        }
        FILE *f = fopen(path, "a");
        if (f) {
            fwrite(text.data(), 1, text.size(), f);
            fclose(f);
        }
    }
};
LaunchLog launch_log;
} // namespace

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    if (!f || extra) return CUDA_ERROR_INVALID_VALUE;
    const Kernel *k = static_cast<const Kernel *>(f);
    // The device's limits: block 1024 x 1024 x 64 and 1024 threads, grid y and z 65535, and
    // dynamic shared memory past 48 KiB only where cuFuncSetAttribute allowed it.
    if (!gx || !gy || !gz || !bx || !by || !bz || gx > 0x7fffffffu || gy > 65535 || gz > 65535 || bx > 1024 ||
        by > 1024 || bz > 64 || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    // PKC_EMU_FAIL_KERNEL=NAME: that kernel's launches are refused (a launch-time error that
    // leaves the context usable), so tests can see what a failed launch does to its caller.
    static const char *const refused = getenv("PKC_EMU_FAIL_KERNEL");
    if (refused && strcmp(refused, k->name) == 0) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    if (shared > 48 * 1024) {
        std::lock_guard<std::mutex> g(attribute_lock);
        auto it = shared_opt_in.find(k);
        if (it == shared_opt_in.end() || (int)shared > it->second) return CUDA_ERROR_INVALID_VALUE;
    }
    Op op{Op::kernel, {}, nullptr, nullptr, 0, 0, {}};
    op.launch.kernel = k;
    op.launch.grid[0] = gx, op.launch.grid[1] = gy, op.launch.grid[2] = gz;
    op.launch.threads[0] = bx, op.launch.threads[1] = by, op.launch.threads[2] = bz;
    op.launch.shared_bytes = shared;
    launch_log.note(k, bx * by * bz, shared);
    // The arguments are copied, as the driver does at the call.
    for (int i = 0; i < k->arg_count; i++) {
        const unsigned char *p = static_cast<const unsigned char *>(params[i]);
        op.launch.values.emplace_back(p, p + k->arg_sizes[i]);
    }
    return submit(stream, std::move(op));
}

// cuLaunchKernelEx's configuration (cuda.h's CUlaunchConfig and CUlaunchAttribute). The one
// attribute pk_cuda.c sets is programmatic stream serialization (6), which lets a kernel start
// before the one ahead of it ends; here launches run one after another, so it changes nothing,
// while every kernel's PKC_DEPENDENT() is checked as for any launch.
struct LaunchAttribute {
    int id;
    int pad;
    union {
        char bytes[64];
        int value;
        unsigned long long align;
    } v;
};
struct LaunchConfig {
    unsigned gx, gy, gz, bx, by, bz, shared;
    void *stream;
    LaunchAttribute *attrs;
    unsigned count;
};
static_assert(sizeof(LaunchAttribute) == 72 && sizeof(LaunchConfig) == 56, "cuda.h's layouts");
CUresult cuLaunchKernelEx(const LaunchConfig *cfg, void *f, void **params, void **extra) {
    if (!cfg || (cfg->count && !cfg->attrs)) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < cfg->count; i++) {
        const LaunchAttribute &a = cfg->attrs[i];
        if (a.id == 0) continue;                                     // CU_LAUNCH_ATTRIBUTE_IGNORE
        if (a.id != 6 || (a.v.value != 0 && a.v.value != 1)) return CUDA_ERROR_INVALID_VALUE; // not emulated
    }
    return cuLaunchKernel(f, cfg->gx, cfg->gy, cfg->gz, cfg->bx, cfg->by, cfg->bz, cfg->shared, cfg->stream, params, extra);
}

CUresult cuEventCreate(void **e, unsigned) { *e = new Event(); return CUDA_SUCCESS; }
CUresult cuEventDestroy_v2(void *e) { delete static_cast<Event *>(e); return CUDA_SUCCESS; }
CUresult cuEventRecord(void *e, void *s) {
    Event *ev = static_cast<Event *>(e);
    Stream *st = stream_of(s);
    ev->capture = st->capture ? st->capture->id : 0;
    ev->source = st;
    ev->seq = st->recorded;
    ev->time = now();
    return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(void *) { return captures_here ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS; }
CUresult cuEventElapsedTime(float *ms, void *a, void *b) {
    *ms = (float)((static_cast<Event *>(b)->time - static_cast<Event *>(a)->time) * 1e3);
    return CUDA_SUCCESS;
}
// A stream that waits on an event recorded in an open capture joins that capture (the fork of
// a side stream); the origin waiting on a side stream's event joins that stream's work so far.
// A capturing stream may not wait on work outside its capture; outside any capture, waiting
// on an event has nothing left to do (work runs in issue order).
CUresult cuStreamWaitEvent(void *s, void *e, unsigned) {
    Event *ev = static_cast<Event *>(e);
    Stream *st = stream_of(s);
    Graph *g = ev->capture ? open_capture(ev->capture) : nullptr;
    if (!g) return st->capture ? CUDA_ERROR_STREAM_CAPTURE_ISOLATION : CUDA_SUCCESS;
    if (st->capture != g) { // a fork: this stream joins the capture
        if (st->capture) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        st->capture = g;
        st->recorded = st->joined = 0;
    } else if (st == g->origin && ev->source != st) { // a join into the origin
        ev->source->joined = std::max(ev->source->joined, ev->seq);
    }
    return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture_v2(void *s, int) {
    Stream *st = stream_of(s);
    if (st->capture) return CUDA_ERROR_INVALID_VALUE;
    Graph *g = new Graph();
    g->origin = st;
    std::lock_guard<std::mutex> lock(state_lock);
    g->id = next_capture_id++;
    open_captures[g->id] = g;
    st->capture = g;
    captures_here++;
    return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(void *s, void **graph) {
    Stream *st = stream_of(s);
    if (!st->capture) return CUDA_ERROR_INVALID_VALUE;
    Graph *g = st->capture;
    if (st != g->origin) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED; // only where it began
    bool unjoined = false;
    captures_here--;
    {
        std::lock_guard<std::mutex> lock(state_lock);
        open_captures.erase(g->id);
        for (Stream *other : streams)
            if (other != st && other->capture == g) {
                unjoined |= other->joined < other->recorded;
                other->capture = nullptr; // the capture ends for every stream in it
            }
    }
    st->capture = nullptr;
    if (unjoined) {
        delete g;
        return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    }
    *graph = g;
    return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long) {
    Graph *g = new Graph(*static_cast<Graph *>(graph)); // an executable graph is a copy
    *exec = g;
    return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(void *exec, void *s) {
    Graph *g = static_cast<Graph *>(exec);
    Stream *st = stream_of(s);
    if (st->capture) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (FILE *f = trace_file()) fprintf(f, "graph %zu\n", g->ops.size());
    for (Op &op : g->ops) {
        const CUresult r = execute(op);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(void *g) { delete static_cast<Graph *>(g); return CUDA_SUCCESS; }
CUresult cuGraphDestroy(void *g) { delete static_cast<Graph *>(g); return CUDA_SUCCESS; }

CUresult cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: *s = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *s = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: *s = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION: *s = "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
    if (r == CUDA_ERROR_LAUNCH_FAILED && !last_launch_error.empty()) {
        *s = last_launch_error.c_str();
        return CUDA_SUCCESS;
    }
    return cuGetErrorName(r, s);
}

// ---- NVRTC ---------------------------------------------------------------------------------------

struct Program {
    std::string source, log, image;
    bool ptx = false; // compiled for a virtual architecture (compute_XX): PTX, no cubin
};

int nvrtcVersion(int *major, int *minor) {
    *major = nvrtc_version() / 1000, *minor = nvrtc_version() % 1000 / 10;
    return 0;
}
int nvrtcGetNumSupportedArchs(int *n) { *n = (int)nvrtc_archs().size(); return 0; }
int nvrtcGetSupportedArchs(int *a) {
    const std::vector<int> archs = nvrtc_archs();
    std::copy(archs.begin(), archs.end(), a);
    return 0;
}
int nvrtcCreateProgram(void **p, const char *src, const char *, int, const char *const *, const char *const *) {
    if (!src) return 5; // NVRTC_ERROR_INVALID_INPUT
    *p = new Program{src, "", ""};
    return 0;
}
int nvrtcCompileProgram(void *p, int n, const char *const *opts) {
    Program *prog = static_cast<Program *>(p);
    if (source_hash(prog->source.c_str()) != built_source_hash()) {
        prog->log = "the CUDA emulator was built from another pkc_kernels.cu: rebuild it (Benchmarks/cuda/emu/build.sh)";
        return 6; // NVRTC_ERROR_COMPILATION
    }
    int format = -1, arch = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(opts[i], "-DPKC_FORMAT=", 13) == 0) format = atoi(opts[i] + 13);
        // As NVRTC: an architecture it does not know is an invalid option.
        if (strncmp(opts[i], "--gpu-architecture=", 19) == 0) {
            const char *a = opts[i] + 19;
            prog->ptx = strncmp(a, "compute_", 8) == 0;
            if (!prog->ptx && strncmp(a, "sm_", 3) != 0) arch = -1;
            else arch = atoi(a + (prog->ptx ? 8 : 3));
            const std::vector<int> archs = nvrtc_archs();
            if (std::find(archs.begin(), archs.end(), arch) == archs.end()) {
                prog->log = std::string("nvrtc: error: invalid value for --gpu-architecture (-arch): ") + a;
                return 5; // NVRTC_ERROR_INVALID_OPTION
            }
        }
    }
    {
        std::lock_guard<std::mutex> g(registry_lock());
        if (!registry().count(format)) {
            prog->log = "the CUDA emulator has no module for PKC_FORMAT=" + std::to_string(format);
            return 6;
        }
    }
    char image[160];
    snprintf(image, sizeof image, "pkc-emu module format=%d source=%llx %s_%d nvrtc=%d", format, (unsigned long long)built_source_hash(),
             prog->ptx ? "compute" : "sm", arch, nvrtc_version());
    // Padded to a cubin's order of size, so that the cache's tests may damage bytes inside it.
    prog->image.assign(image, strlen(image) + 1);
    prog->image.resize(4096, '\0');
    return 0;
}
int nvrtcGetProgramLogSize(void *p, size_t *n) { *n = static_cast<Program *>(p)->log.size() + 1; return 0; }
int nvrtcGetProgramLog(void *p, char *s) {
    const std::string &l = static_cast<Program *>(p)->log;
    memcpy(s, l.c_str(), l.size() + 1);
    return 0;
}
// A program holds a cubin or PTX (as NVRTC: none for a virtual architecture, no PTX asked of a real one).
static int program_image(void *p, bool ptx, size_t *n, char *out) {
    const Program *prog = static_cast<Program *>(p);
    if (prog->image.empty() || prog->ptx != ptx) return 4; // NVRTC_ERROR_INVALID_PROGRAM
    if (n) *n = prog->image.size();
    if (out) memcpy(out, prog->image.data(), prog->image.size());
    return 0;
}
int nvrtcGetCUBINSize(void *p, size_t *n) { return program_image(p, false, n, nullptr); }
int nvrtcGetCUBIN(void *p, char *out) { return program_image(p, false, nullptr, out); }
int nvrtcGetPTXSize(void *p, size_t *n) { return program_image(p, true, n, nullptr); }
int nvrtcGetPTX(void *p, char *out) { return program_image(p, true, nullptr, out); }
int nvrtcDestroyProgram(void **p) {
    delete static_cast<Program *>(*p);
    *p = nullptr;
    return 0;
}
const char *nvrtcGetErrorString(int r) {
    return r == 0 ? "NVRTC_SUCCESS" : r == 5 ? "NVRTC_ERROR_INVALID_OPTION" : r == 6 ? "NVRTC_ERROR_COMPILATION" : "NVRTC_ERROR";
}

// ---- cuBLAS ------------------------------------------------------------------------------------

struct Blas {
    void *stream = nullptr;
};

int cublasCreate_v2(void **h) { *h = new Blas(); return 0; }
int cublasDestroy_v2(void *h) { delete static_cast<Blas *>(h); return 0; }
int cublasSetStream_v2(void *h, void *s) { static_cast<Blas *>(h)->stream = s; return 0; }
int cublasSetWorkspace_v2(void *, void *, size_t) { return 0; }
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int atype, int lda,
                 const void *b, int btype, int ldb, const void *beta, void *c, int ctype, int ldc, int compute, int) {
    const int CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_NOT_SUPPORTED = 15;
    const int ar = ta ? k : m, br = tb ? n : k;
    if (m < 0 || n < 0 || k < 0 || lda < std::max(1, ar) || ldb < std::max(1, br) || ldc < std::max(1, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    // The combinations cuBLAS has with 32-bit compute: f32 x f32 -> f32, f16 x f16 -> f16 or f32.
    if (compute != 68 || atype != btype || (atype != 0 && atype != 2) || (ctype != 0 && ctype != 2) ||
        (atype == 0 && ctype != 0))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    Gemm g{ta, tb, m, n, k, *static_cast<const float *>(alpha), *static_cast<const float *>(beta), a, b, c,
           atype, btype, ctype, lda, ldb, ldc};
    return submit_gemm(static_cast<Blas *>(h)->stream, g) == CUDA_SUCCESS ? 0 : 13; // EXECUTION_FAILED
}

} // extern "C"
