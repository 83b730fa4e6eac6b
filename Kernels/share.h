// Sharing work between a pool's threads: rows split evenly, contiguous runs of equal cost, and
// waiting for one another. Internal.
#pragma once
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "pk_pool.h"

// A wait spins this many times before it yields: the threads of a step arrive within
// microseconds of each other, but on an oversubscribed machine a spinning thread steals the
// core the awaited one needs.
enum { SPINS_BEFORE_YIELD = 2000 };

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// One turn of a wait that has turned `spins` times already.
static inline void wait_turn(int spins) {
    if (spins < SPINS_BEFORE_YIELD) cpu_relax();
    else sched_yield();
}

// Waits inside a pool task until all nth threads have arrived at `arrived` (zero before the
// task; one use per task).
static inline void meet(_Atomic int *arrived, int nth) {
    atomic_fetch_add_explicit(arrived, 1, memory_order_acq_rel);
    for (int spins = 0; atomic_load_explicit(arrived, memory_order_acquire) < nth; spins++) wait_turn(spins);
}

// Rows [r0, r1) of some work.
typedef void (*rows_fn)(const void *args, int64_t r0, int64_t r1);
typedef struct { rows_fn fn; const void *args; int64_t rows; } rows_job;

static inline void rows_task(void *ctx, int ith, int nth) {
    const rows_job *j = ctx;
    const int64_t r0 = j->rows * ith / nth, r1 = j->rows * (ith + 1) / nth;
    if (r0 < r1) j->fn(j->args, r0, r1);
}

// Runs fn over `rows` rows, split evenly between the pool's threads when `parallel` (the caller
// judges whether the work pays for the hand-off), else on the calling thread.
static inline void split_rows(pk_pool *pool, int64_t rows, int parallel, rows_fn fn, const void *args) {
    if (!parallel || !pool || pk_pool_threads(pool) == 1 || rows < 2) {
        fn(args, 0, rows);
        return;
    }
    rows_job j = {fn, args, rows};
    pk_pool_run(pool, rows_task, &j);
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
