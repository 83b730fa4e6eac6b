// Sharing units of work between a pool's threads in contiguous runs of equal cost. Internal.
#pragma once
#include <stdint.h>

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
