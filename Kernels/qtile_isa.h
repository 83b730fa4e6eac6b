// The tile kernels of each instruction set (see qtile.h for what they compute). Internal.
#pragma once
#include "qtile.h"

// Unpacks rows [0, rows) of `w` (row_bytes apart; rows <= 16) over k weights into a tile.
// `packed`: the same rows in pk_pack's layout (full tiles only), or NULL. `last`: no tile
// follows this one (nothing to prefetch).
typedef void (*qt_unpack_fn)(const qt_type *ty, const uint8_t *w, size_t row_bytes, const uint8_t *packed, int rows,
                             int last, int64_t k, qt_tile t);
// Computes one activation row t against rows [0, rows) of `w` without a tile: y[r], through the
// epilogue `e`. Returns 0 when it cannot (the caller then goes through a tile).
typedef int (*qt_gemv_fn)(const qt_type *ty, const uint8_t *w, size_t row_bytes, const uint8_t *packed, int rows,
                          int last, int64_t k, const qt_act *a, const int32_t *nb, int64_t t, float *y, const qt_epilogue *e);
// Computes activation rows [t0, t0+count) (count <= 8) against a tile: y[i*ldy + r] for r < rows,
// through the epilogue `e`. nb holds -bias * sum(x) per (activation row, sub-block).
typedef void (*qt_dot_fn)(const qt_format *f, qt_tile t, int64_t k, const qt_act *a, const int32_t *nb,
                          int64_t t0, int count, float *y, int64_t ldy, int rows, const qt_epilogue *e);

// One type's SIMD unpackers on one instruction set; a zero row: the type has none there.
typedef struct {
    qt_unpack_fn unpack;
    qt_gemv_fn gemv;
} qt_kernels;

#if defined(__x86_64__)
extern const qt_kernels qt_kernels_avx512[QT_SLOT_COUNT], qt_kernels_avx2[QT_SLOT_COUNT];
void qt_dot_avx512(const qt_format *f, qt_tile t, int64_t k, const qt_act *a, const int32_t *nb,
                   int64_t t0, int count, float *y, int64_t ldy, int rows, const qt_epilogue *e);
void qt_dot_avx2(const qt_format *f, qt_tile t, int64_t k, const qt_act *a, const int32_t *nb,
                 int64_t t0, int count, float *y, int64_t ldy, int rows, const qt_epilogue *e);
#endif
