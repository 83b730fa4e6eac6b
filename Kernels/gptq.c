// GPTQ (Frantar et al., 2022): a matrix quantized column by column, each column's rounding error
// spread over the columns not yet quantized so that the layer's output on the calibration
// activations X changes least. The update uses the upper Cholesky factor U of the inverse of
// H = X^T X + damp I: after quantizing column i, row r's remaining columns j > i move by
// -(w[r,i] - q[r,i]) / U[i,i] * U[i,j]. Columns are taken a block (32 weights) at a time; each
// block's grid (scale, minimum) is fitted to the block's current weights when it is reached, and
// its errors reach the later columns in one matrix product. A type's row says how to fit, round
// and pack its blocks (qt_grid).
#include "pk_quants.h"
#include "types.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// U, upper, with H + damp*mean(diag H)*I = (U^T U)^-1; dead columns (H[j][j] == 0) get 1 on the
// diagonal. Retries with ten times the damping while the factorization fails.
static int inverse_cholesky(const float *h, int64_t k, float damp, float *u) {
    float mean = 0.0f;
    for (int64_t j = 0; j < k; j++) mean += h[j * k + j];
    mean /= (float)k;
    if (!(mean > 0.0f)) mean = 1.0f;
    for (int attempt = 0; attempt < 4; attempt++, damp *= 10.0f) {
        memcpy(u, h, (size_t)(k * k) * sizeof(float));
        for (int64_t j = 0; j < k; j++) {
            if (u[j * k + j] == 0.0f) u[j * k + j] = 1.0f;
            u[j * k + j] += damp * mean;
        }
        if (LAPACKE_spotrf(LAPACK_ROW_MAJOR, 'L', (lapack_int)k, u, (lapack_int)k) != 0) continue;
        if (LAPACKE_spotri(LAPACK_ROW_MAJOR, 'L', (lapack_int)k, u, (lapack_int)k) != 0) continue;
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = i + 1; j < k; j++) u[i * k + j] = u[j * k + i];
        if (LAPACKE_spotrf(LAPACK_ROW_MAJOR, 'U', (lapack_int)k, u, (lapack_int)k) != 0) continue;
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < i; j++) u[i * k + j] = 0.0f;
        return 1;
    }
    return 0;
}

int pk_gptq(int type, float *w, int64_t m, int64_t k, const float *h, float damp, void *dst) {
    const qt_type *ty = qt_type_of(type);
    if (!ty || !ty->grid || ty->elements != 32 || k % 32 != 0 || m < 1) return -1;
    const qt_grid *g = ty->grid;
    float *u = malloc((size_t)(k * k) * sizeof(float));
    float *err = malloc((size_t)(m * 32) * sizeof(float));
    float *grid = malloc((size_t)m * 2 * sizeof(float));
    float *diag = malloc((size_t)k * sizeof(float));
    uint8_t *codes = malloc((size_t)(m * k));
    if (!u || !err || !grid || !diag || !codes || !inverse_cholesky(h, k, damp, u)) {
        free(u), free(err), free(grid), free(diag), free(codes);
        return -1;
    }
    for (int64_t j = 0; j < k; j++) diag[j] = h[j * k + j];
    for (int64_t j = 0; j < k; j++)
        if (h[j * k + j] == 0.0f)
            for (int64_t r = 0; r < m; r++) w[r * k + j] = 0.0f;
    for (int64_t c0 = 0; c0 < k; c0 += 32) {
        // Each row's grid for the block: the one nearest the block's current weights, each
        // weighted by its column's activation energy (the Hessian's diagonal).
        for (int64_t r = 0; r < m; r++) g->fit(ty, w + r * k + c0, diag + c0, grid + 2 * r);
        for (int64_t i = c0; i < c0 + 32; i++) {
            const float pivot = u[i * k + i];
            for (int64_t r = 0; r < m; r++) {
                float value;
                codes[r * k + i] = (uint8_t)g->nearest(ty, w[r * k + i], grid + 2 * r, &value);
                const float e = (w[r * k + i] - value) / pivot;
                err[r * 32 + (i - c0)] = e;
                for (int64_t j = i + 1; j < c0 + 32; j++) w[r * k + j] -= e * u[i * k + j];
            }
        }
        // The block's errors reach every later column at once.
        if (c0 + 32 < k)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)(k - c0 - 32), 32, -1.0f, err, 32,
                        u + c0 * k + c0 + 32, (blasint)k, 1.0f, w + c0 + 32, (blasint)k);
        for (int64_t r = 0; r < m; r++) {
            uint8_t *out = (uint8_t *)dst + (size_t)r * (size_t)(k / 32) * ty->bytes + (size_t)(c0 / 32) * ty->bytes;
            g->pack(ty, grid + 2 * r, codes + r * k + c0, out);
        }
    }
    free(u), free(err), free(grid), free(diag), free(codes);
    return 0;
}
