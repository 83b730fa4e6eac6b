// Timing for the developer tools in this directory (batched_route.c, kernels.c, quantize_rate.c,
// read_bandwidth.c).
#pragma once
#include <time.h>

// Seconds on the monotonic clock.
static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// The best of `reps` timings of `body`, in seconds: a neighbour's load only ever adds time.
#define BEST(reps, body)                                \
    ({                                                  \
        double best_ = 1e30;                            \
        for (int r_ = 0; r_ < (reps); r_++) {           \
            const double t0_ = now();                   \
            body;                                       \
            const double dt_ = now() - t0_;             \
            best_ = dt_ < best_ ? dt_ : best_;          \
        }                                               \
        best_;                                          \
    })
