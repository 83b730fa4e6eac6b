// Sharing work between a pool's threads: contiguous runs of equal cost, and a meeting point
// inside a task. Internal.
#pragma once
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// Waits inside a pool task until all nth threads have arrived at `arrived` (zero before the
// task; one use per task). Spins first: the threads arrive within microseconds of each other.
static inline void meet(_Atomic int *arrived, int nth) {
    atomic_fetch_add_explicit(arrived, 1, memory_order_acq_rel);
    for (int spins = 0; atomic_load_explicit(arrived, memory_order_acquire) < nth; spins++) {
        if (spins < 4000) cpu_relax();
        else sched_yield();
    }
}

// Thread ith of nth takes units [*u0, *u1) of `total`: those whose cumulative cost before them
// falls in its 1/nth of the whole. `cost(ctx, u)` must be positive.
static inline void share_by_cost(int64_t total, int64_t (*cost)(const void *, int64_t), const void *ctx,
                                 int ith, int nth, int64_t *u0, int64_t *u1) {
    int64_t sum = 0;
    for (int64_t u = 0; u < total; u++) sum += cost(ctx, u);
    const int64_t lo = sum * ith / nth, hi = sum * (ith + 1) / nth;
    int64_t at = 0, first = -1, end = -1;
    for (int64_t u = 0; u < total && end < 0; u++) {
        if (first < 0 && at >= lo) first = u;
        if (at >= hi) end = u;
        at += cost(ctx, u);
    }
    *u0 = first < 0 ? total : first;
    *u1 = end < 0 ? total : end;
}
