#include "share.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

// Workers spin briefly after each job (decode issues hundreds of small jobs per token, so waking
// from a condition variable each time would dominate), then yield, then sleep.
enum { YIELD_ITERATIONS = 50 };

struct pk_pool {
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    _Atomic unsigned generation;
    _Atomic int pending;
    _Atomic int stop;
    pk_task_fn fn;
    void *ctx;
};

typedef struct { pk_pool *pool; int ith; } worker_arg;

static void *worker_main(void *p) {
    worker_arg arg = *(worker_arg *)p;
    free(p);
    pk_pool *pool = arg.pool;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&pool->stop, memory_order_relaxed)) return NULL;
            if (++spins < SPINS_BEFORE_YIELD + YIELD_ITERATIONS) { wait_turn(spins); continue; }
            pthread_mutex_lock(&pool->mutex);
            while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
                pthread_cond_wait(&pool->wake, &pool->mutex);
            pthread_mutex_unlock(&pool->mutex);
            spins = 0;
        }
        if (atomic_load(&pool->stop)) return NULL;
        seen = gen;
        pool->fn(pool->ctx, arg.ith, pool->nthreads);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel);
    }
}

extern int pk_blas_configured; // blas.c: keeps its pre-init entry linked in

pk_pool *pk_pool_create(int nthreads) {
    __asm__ volatile("" : : "r"(&pk_blas_configured));
    if (nthreads < 1) nthreads = 1;
    pk_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->nthreads = nthreads;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pool->threads = calloc((size_t)nthreads, sizeof(pthread_t));
    for (int i = 1; i < nthreads; i++) {
        worker_arg *a = malloc(sizeof *a);
        a->pool = pool;
        a->ith = i;
        if (pthread_create(&pool->threads[i], NULL, worker_main, a) != 0) {
            free(a);
            pool->nthreads = i; // run with the threads we got
            break;
        }
    }
    return pool;
}

void pk_pool_destroy(pk_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mutex);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    for (int i = 1; i < pool->nthreads; i++) pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mutex);
    free(pool->threads);
    free(pool);
}

int pk_pool_threads(const pk_pool *pool) { return pool ? pool->nthreads : 1; }

void pk_pool_run(pk_pool *pool, pk_task_fn fn, void *ctx) {
    if (!pool || pool->nthreads == 1) { fn(ctx, 0, 1); return; }
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->pending, pool->nthreads - 1, memory_order_release);
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_acq_rel);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    fn(ctx, 0, pool->nthreads);
    for (int spins = 0; atomic_load_explicit(&pool->pending, memory_order_acquire) > 0; spins++) wait_turn(spins);
}
