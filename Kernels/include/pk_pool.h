// A persistent thread pool for the kernels: one call runs a function on every thread and waits.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pk_pool pk_pool;
typedef void (*pk_task_fn)(void *ctx, int ith, int nth);

// Creates a pool of `nthreads` threads in all, the calling thread included (so nthreads-1 workers).
pk_pool *pk_pool_create(int nthreads);
void pk_pool_destroy(pk_pool *pool);
int pk_pool_threads(const pk_pool *pool);
// Runs fn(ctx, ith, nth) for ith in [0, nth) across the pool (the caller runs ith 0); returns
// when all are done. Calls must not overlap: one owner drives a pool.
void pk_pool_run(pk_pool *pool, pk_task_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
