// The quantized matrix product, defined once. Internal to the kernels.
//
// Weights are multiplied sixteen rows at a time as a *tile*: the rows' codes are unpacked to
// unsigned bytes and interleaved so that one 64-byte vector holds four consecutive codes of each
// of the 16 rows (lane r = row r), which is the operand shape of AVX-512 VNNI (vpdpbusd). Each
// sub-block (16 or 32 weights sharing a scale) of a tile carries a float scale and, for formats
// with a minimum, a float offset per row.
//
// The result of row r for activation row t is, exactly and on every ISA:
//     acc = 0, off = 0
//     for each sub-block j, in order:
//         isum = sum(u[r,i] * x[t,i] for i in j) - bias * sum(x[t,i] for i in j)   (int32, exact)
//         acc  = fmaf(scale[r,j] * dx[t,j], (float)isum, acc)
//         if the format has offsets: off = fmaf(offset[r,j], xs[t,j], off)
//     result = acc + off (formats with offsets), acc (others)
// (the offset terms are summed apart, as llama.cpp sums them) where u are the unsigned codes, x the activation quantized to int8 (the way llama.cpp does
// for the weight type), dx its scale and xs its offset term. Because every row is computed the
// same way whatever else is in the batch, batched and single-token steps agree bit for bit, and
// the scalar reference below is the specification the SIMD paths are tested against.
#pragma once
#include <stdint.h>
#include <string.h>

#include "types.h"

#define QT_ROWS 16

// A tile of 16 rows over k weights: for sub-block j, `codes + j*sub*16` holds sub/4 vectors of
// 64 bytes (vector v, lane r = codes 4v..4v+3 of row r in that sub-block), and `scale + 16*j`,
// `offset + 16*j` the rows' scale and offset.
typedef struct {
    uint8_t *codes;
    float *scale;
    float *offset;
} qt_tile;

BLK_INLINE size_t qt_tile_bytes(int64_t k) {
    // codes, then scales and offsets of the smallest sub-block size (the most sub-blocks)
    return (size_t)k * QT_ROWS + 2 * (size_t)(k / 16) * QT_ROWS * sizeof(float);
}

BLK_INLINE qt_tile qt_tile_at(void *buf, int64_t k) {
    qt_tile t;
    t.codes = (uint8_t *)buf;
    t.scale = (float *)((uint8_t *)buf + (size_t)k * QT_ROWS);
    t.offset = t.scale + (size_t)(k / 16) * QT_ROWS;
    return t;
}

// Packed weights (pk_pack): full tiles of 16 rows stored already transposed, so that the
// kernels load what they would otherwise build by shuffling rows together. A tile's dword d
// (bytes 4d..4d+3 of each row, zero past the row's end) is one 64-byte vector whose lane r
// holds row r's. The bytes are the file's, only their order changes.
BLK_INLINE size_t qt_packed_row_dwords(size_t row_bytes) { return (row_bytes + 3) / 4; }

// The legacy 32-weight formats are packed field by field instead, so that no field starts
// mid-dword (their blocks are 18 to 34 bytes): per group of blocks (two when the head is 2
// bytes, else one), the blocks' heads (d, or d and m) side by side for the 16 rows in one
// 64-byte line (block i's at 16 * head * i, row r's at head * r), then each block's qh (Q5:
// one vector, lane r = row r's), then each block's qs as vectors (vector v, lane r = dword v
// of row r's qs). Every group is whole 64-byte lines; a last group of one block is padded.
// The fields and the blocks per group are the type's row (qt_legacy).

// Offsets in a group of n blocks of block i's head, qh and qs, and the group's bytes.
BLK_INLINE size_t qt_legacy_head_at(const qt_legacy *l, int i) { return (size_t)(QT_ROWS * l->head * i); }
BLK_INLINE size_t qt_legacy_qh_at(int i) { return 64 + 64 * (size_t)i; }
BLK_INLINE size_t qt_legacy_qs_at(const qt_legacy *l, int n, int i) {
    return 64 + (l->qh ? 64 * (size_t)n : 0) + (size_t)(QT_ROWS * l->qs * i);
}
BLK_INLINE size_t qt_legacy_group_bytes(const qt_legacy *l, int n) { return qt_legacy_qs_at(l, n, n); }

// Bytes of one packed tile of 16 rows of `row_bytes` each.
BLK_INLINE size_t qt_packed_tile_bytes(const qt_type *ty, size_t row_bytes) {
    const qt_legacy *l = &ty->fields;
    if (l->qs) {
        const size_t blocks = row_bytes / ty->bytes, rest = blocks % (size_t)l->group;
        return blocks / (size_t)l->group * qt_legacy_group_bytes(l, l->group) + (rest ? qt_legacy_group_bytes(l, (int)rest) : 0);
    }
    return qt_packed_row_dwords(row_bytes) * 4 * QT_ROWS;
}

// Activation rows quantized for one weight format family, with the per-sub-block terms for
// both sub-block sizes (index [t * k/sub + j]).
typedef struct {
    const int8_t *q;                 // n*k
    const float *dx16, *dx32;        // scale of the activation block covering the sub-block
    const int32_t *sx16, *sx32;      // sum of the int8 values of the sub-block
    const float *xs16, *xs32;        // offset term (Q8_1: fp16(d*sum) per 32; Q8_K: d*sum)
} qt_act;

// What a kernel does with row r's result v: stores v + bias[r] (bias[r] omitted without a
// bias), or with `accumulate` adds it to what y holds: y = y + (v + bias[r]). Plain IEEE adds,
// so a fused epilogue gives the bits of a separate pass. NULL: y = v.
typedef struct {
    const float *bias;
    int accumulate;
} qt_epilogue;

BLK_INLINE float qt_epilogue_apply(const qt_epilogue *e, float v, float y, int64_t r) {
    if (!e) return v;
    if (e->bias) v = v + e->bias[r];
    return e->accumulate ? y + v : v;
}

// Reference unpacking of rows [row0, row0+rows) (rows <= 16; missing rows repeat the last one
// so every lane holds finite values) of a weight matrix with `row_bytes` per row.
BLK_INLINE void qt_unpack_ref(const qt_type *ty, const uint8_t *w, size_t row_bytes, int rows, int64_t k, qt_tile t) {
    const qt_format *f = &ty->tile;
    const int64_t be = ty->elements;
    const size_t bb = ty->bytes;
    int8_t q[256];
    float sc[16], of[16];
    for (int r = 0; r < QT_ROWS; r++) {
        const uint8_t *row = w + (size_t)(r < rows ? r : rows - 1) * row_bytes;
        for (int64_t b = 0; b < k / be; b++) {
            ty->unpack(row + b * bb, q, sc, of);
            for (int64_t i = 0; i < be; i++) {
                const int64_t g = b * be + i;              // weight index in the row
                const int64_t j = g / f->sub, in = g % f->sub;
                t.codes[j * f->sub * QT_ROWS + (in / 4) * 64 + r * 4 + (in % 4)] = (uint8_t)(q[i] + f->bias);
            }
            for (int64_t s = 0; s < be / f->sub; s++) {
                const int64_t j = b * (be / f->sub) + s;
                t.scale[j * QT_ROWS + r] = sc[s * (f->sub / 16)];
                t.offset[j * QT_ROWS + r] = of[s * (f->sub / 16)];
            }
        }
    }
}
