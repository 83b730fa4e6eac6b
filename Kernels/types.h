// The type table: one row per ggml tensor type, holding everything the kernels know of it —
// block geometry, the reference dequantizer, how its codes form matmul tiles, how its blocks
// are packed. Internal. The SIMD unpackers of a type live with the other SIMD code
// (qtile_simd.h, one line in its kernel list).
//
// Adding a block format: its layout and reference unpacker in blocks.h, its row here, its SIMD
// unpacker in qtile_simd.h (optional: without one the reference runs), its id in pk_quants.h
// (and a case in GGMLType.swift when ggml has not defined the id).
//
// The table is static const in this header so that code specialized for one type (the SIMD
// unpackers take &QT_TYPES[PK_Q4_0]) folds its fields to constants. Rows are indexed by slot
// (QT_SLOT): ggml's ids, then Plinth's own.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "blocks.h"
#include "pk_quants.h"

// Activation formats the int8 products quantize their input to (llama.cpp's vec_dot_type).
enum { ACT_Q8_0, ACT_Q8_1, ACT_Q8_K, ACT_KINDS };

// How a block format's codes form the matmul's tiles (qtile.h).
typedef struct {
    int sub;        // weights per sub-block, 16 or 32; 0: no tile form
    int bias;       // tile code u = q + bias
    int offsets;    // whether the format has a minimum (a non-zero offset per sub-block)
    int act;        // activation format (ACT_*)
} qt_format;

// The fields of a legacy 32-weight block, in the file's order (head: d, or d and m), for the
// packed layout (qtile.h) and the SIMD reads.
typedef struct {
    int head, qh, qs; // bytes of each field; qs 0: not a legacy block
    int group;        // blocks per group of the packed layout
    int window;       // blocks per read of unpacked rows (a whole number of 16-byte chunks)
} qt_legacy;

struct qt_type_s;

// How GPTQ writes a 32-weight block format: the grid (p[0] scale, p[1] minimum) fitted to a
// block's weights x under importance w, the code nearest x on a grid (and its value there),
// and a block packed from its grid and codes.
typedef struct {
    void (*fit)(const struct qt_type_s *ty, const float *x, const float *w, float p[2]);
    int (*nearest)(const struct qt_type_s *ty, float x, const float p[2], float *value);
    void (*pack)(const struct qt_type_s *ty, const float p[2], const uint8_t q[32], uint8_t *out);
} qt_grid;

extern const qt_grid qt_legacy_grid_ops, qt_pq2_grid_ops;

typedef void (*qt_to_float_fn)(const uint8_t *src, float *dst, int64_t n);
typedef void (*blk_unpack_fn)(const uint8_t *block, int8_t *q, float *sc, float *of);
typedef void (*qt_quantize_fn)(const float *src, uint8_t *dst, int64_t n);
typedef void (*qt_quantize_weighted_fn)(const float *src, const float *importance, uint8_t *dst, int64_t n);

typedef struct qt_type_s {
    const char *name;         // ggml's name; NULL: ggml never defined the id
    int64_t elements;         // weights per block (1: plain numbers)
    size_t bytes;             // bytes per block
    qt_to_float_fn to_float;  // plain number types Plinth reads (exact conversion)
    blk_unpack_fn unpack;     // block types Plinth reads: one block to codes, scales, offsets
    qt_quantize_fn quantize;  // types Plinth writes: floats to blocks (quantize.c)
    qt_quantize_weighted_fn quantize_weighted; // the same, minimizing importance-weighted error
    qt_format tile;
    qt_legacy fields;
    const qt_grid *grid;      // types GPTQ writes (gptq.c)
    const int8_t *levels;     // non-uniform formats (IQ4): code c stands for levels[c]
} qt_type;

void qt_f32_to_float(const uint8_t *src, float *dst, int64_t n);
void qt_f16_to_float(const uint8_t *src, float *dst, int64_t n);
void qt_bf16_to_float(const uint8_t *src, float *dst, int64_t n);
// Each type's `quantize` (round to nearest) and, where it has one, `quantize_weighted`.
#define QT_QUANTIZER(name) void qt_quantize_##name(const float *x, uint8_t *y, int64_t n)
#define QT_WEIGHTED(name) void qt_quantize_weighted_##name(const float *x, const float *importance, uint8_t *y, int64_t n)
QT_QUANTIZER(f32); QT_QUANTIZER(f16); QT_QUANTIZER(bf16);
QT_QUANTIZER(q4_0); QT_QUANTIZER(q4_1); QT_QUANTIZER(q5_0); QT_QUANTIZER(q5_1); QT_QUANTIZER(q8_0); QT_QUANTIZER(pq2);
QT_WEIGHTED(q4_0); QT_WEIGHTED(q4_1); QT_WEIGHTED(q5_0); QT_WEIGHTED(q5_1); QT_WEIGHTED(q8_0); QT_WEIGHTED(pq2);
QT_QUANTIZER(q2_K); QT_QUANTIZER(q3_K); QT_QUANTIZER(q4_K); QT_QUANTIZER(q5_K); QT_QUANTIZER(q6_K);
QT_WEIGHTED(q2_K); QT_WEIGHTED(q3_K); QT_WEIGHTED(q4_K); QT_WEIGHTED(q5_K); QT_WEIGHTED(q6_K);
QT_QUANTIZER(iq4_nl); QT_QUANTIZER(iq4_xs); QT_WEIGHTED(iq4_nl); QT_WEIGHTED(iq4_xs);
// A legacy block's plain grid and codes (quantize.c), and a block of type `ty` packed from them.
void qt_legacy_grid(const float *x, int bits, int offset, float *d, float *m, uint8_t q[32]);
// The grid (f16 d and m) and codes minimizing the w-weighted squared error of a legacy block.
void qt_weighted_grid(const float *x, const float *w, int bits, int offset, float *d, float *m, uint8_t q[32]);
struct qt_type_s;
void qt_pack_block(const struct qt_type_s *ty, float d, float m, const uint8_t q[32], uint8_t *out);

// An f16 written little-endian at p (the quantizers' scales).
static inline void qt_store_f16(uint8_t *p, float v) {
    const uint16_t h = pk_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

#define QT_GEOMETRY(n, e, b) .name = n, .elements = e, .bytes = b

// Rows are indexed by slot: ggml's ids as they are, Plinth's after them.
#define QT_SLOT(type) ((type) < PK_TYPE_COUNT ? (type) : PK_TYPE_COUNT + ((type) - PK_PLINTH_TYPES))
#define QT_SLOT_COUNT QT_SLOT(PK_PLINTH_TYPE_END)

static const qt_type QT_TYPES[QT_SLOT_COUNT] = {
    [PK_F32] = {QT_GEOMETRY("F32", 1, 4), .to_float = qt_f32_to_float, .quantize = qt_quantize_f32},
    [PK_F16] = {QT_GEOMETRY("F16", 1, 2), .to_float = qt_f16_to_float, .quantize = qt_quantize_f16},
    [PK_BF16] = {QT_GEOMETRY("BF16", 1, 2), .to_float = qt_bf16_to_float, .quantize = qt_quantize_bf16},
    [PK_Q4_0] = {QT_GEOMETRY("Q4_0", 32, 18), .unpack = blk_q4_0, .quantize = qt_quantize_q4_0, .quantize_weighted = qt_quantize_weighted_q4_0, .tile = {32, 8, 0, ACT_Q8_0}, .fields = {2, 0, 16, 2, 8}, .grid = &qt_legacy_grid_ops},
    [PK_Q4_1] = {QT_GEOMETRY("Q4_1", 32, 20), .unpack = blk_q4_1, .quantize = qt_quantize_q4_1, .quantize_weighted = qt_quantize_weighted_q4_1, .tile = {32, 0, 1, ACT_Q8_1}, .fields = {4, 0, 16, 1, 4}, .grid = &qt_legacy_grid_ops},
    [PK_Q5_0] = {QT_GEOMETRY("Q5_0", 32, 22), .unpack = blk_q5_0, .quantize = qt_quantize_q5_0, .quantize_weighted = qt_quantize_weighted_q5_0, .tile = {32, 16, 0, ACT_Q8_0}, .fields = {2, 4, 16, 2, 8}, .grid = &qt_legacy_grid_ops},
    [PK_Q5_1] = {QT_GEOMETRY("Q5_1", 32, 24), .unpack = blk_q5_1, .quantize = qt_quantize_q5_1, .quantize_weighted = qt_quantize_weighted_q5_1, .tile = {32, 0, 1, ACT_Q8_1}, .fields = {4, 4, 16, 1, 2}, .grid = &qt_legacy_grid_ops},
    [PK_Q8_0] = {QT_GEOMETRY("Q8_0", 32, 34), .unpack = blk_q8_0, .quantize = qt_quantize_q8_0, .quantize_weighted = qt_quantize_weighted_q8_0, .tile = {32, 128, 0, ACT_Q8_0}, .fields = {2, 0, 32, 2, 8}, .grid = &qt_legacy_grid_ops},
    // ggml's block_q8_1 is two f16 (d, s) then 32 int8 (gguf-py's table says 40, from when d
    // and s were f32). An activation format: read, never multiplied.
    [PK_Q8_1] = {QT_GEOMETRY("Q8_1", 32, 36), .unpack = blk_q8_1},
    [PK_Q2_K] = {QT_GEOMETRY("Q2_K", 256, 84), .unpack = blk_q2_K, .quantize = qt_quantize_q2_K, .quantize_weighted = qt_quantize_weighted_q2_K, .tile = {16, 0, 1, ACT_Q8_K}},
    [PK_Q3_K] = {QT_GEOMETRY("Q3_K", 256, 110), .unpack = blk_q3_K, .quantize = qt_quantize_q3_K, .quantize_weighted = qt_quantize_weighted_q3_K, .tile = {16, 4, 0, ACT_Q8_K}},
    [PK_Q4_K] = {QT_GEOMETRY("Q4_K", 256, 144), .unpack = blk_q4_K, .quantize = qt_quantize_q4_K, .quantize_weighted = qt_quantize_weighted_q4_K, .tile = {32, 0, 1, ACT_Q8_K}},
    [PK_Q5_K] = {QT_GEOMETRY("Q5_K", 256, 176), .unpack = blk_q5_K, .quantize = qt_quantize_q5_K, .quantize_weighted = qt_quantize_weighted_q5_K, .tile = {32, 0, 1, ACT_Q8_K}},
    [PK_Q6_K] = {QT_GEOMETRY("Q6_K", 256, 210), .unpack = blk_q6_K, .quantize = qt_quantize_q6_K, .quantize_weighted = qt_quantize_weighted_q6_K, .tile = {16, 32, 0, ACT_Q8_K}},
    [PK_Q8_K] = {QT_GEOMETRY("Q8_K", 256, 292), .unpack = blk_q8_K},
    // Defined by ggml, not read by Plinth: geometry only, so that a file using one is measured
    // and named in an error rather than rejected as unknown.
    [16] = {QT_GEOMETRY("IQ2_XXS", 256, 66)},
    [17] = {QT_GEOMETRY("IQ2_XS", 256, 74)},
    [18] = {QT_GEOMETRY("IQ3_XXS", 256, 98)},
    [19] = {QT_GEOMETRY("IQ1_S", 256, 50)},
    [PK_IQ4_NL] = {QT_GEOMETRY("IQ4_NL", 32, 18), .unpack = blk_iq4_nl, .quantize = qt_quantize_iq4_nl, .quantize_weighted = qt_quantize_weighted_iq4_nl, .tile = {32, 128, 0, ACT_Q8_0}, .fields = {2, 0, 16, 2, 8}, .levels = blk_iq4_levels},
    [21] = {QT_GEOMETRY("IQ3_S", 256, 110)},
    [22] = {QT_GEOMETRY("IQ2_S", 256, 82)},
    [PK_IQ4_XS] = {QT_GEOMETRY("IQ4_XS", 256, 136), .unpack = blk_iq4_xs, .quantize = qt_quantize_iq4_xs, .quantize_weighted = qt_quantize_weighted_iq4_xs, .tile = {32, 128, 0, ACT_Q8_K}, .levels = blk_iq4_levels},
    [24] = {QT_GEOMETRY("I8", 1, 1)},
    [25] = {QT_GEOMETRY("I16", 1, 2)},
    [26] = {QT_GEOMETRY("I32", 1, 4)},
    [27] = {QT_GEOMETRY("I64", 1, 8)},
    [28] = {QT_GEOMETRY("F64", 1, 8)},
    [29] = {QT_GEOMETRY("IQ1_M", 256, 56)},
    // 31..33 and 36..38: interleaved layouts ggml has since removed from files.
    [31] = {QT_GEOMETRY("Q4_0_4_4", 32, 18)},
    [32] = {QT_GEOMETRY("Q4_0_4_8", 32, 18)},
    [33] = {QT_GEOMETRY("Q4_0_8_8", 32, 18)},
    [34] = {QT_GEOMETRY("TQ1_0", 256, 54)},
    [35] = {QT_GEOMETRY("TQ2_0", 256, 66)},
    [36] = {QT_GEOMETRY("IQ4_NL_4_4", 32, 18)},
    [37] = {QT_GEOMETRY("IQ4_NL_4_8", 32, 18)},
    [38] = {QT_GEOMETRY("IQ4_NL_8_8", 32, 18)},
    [39] = {QT_GEOMETRY("MXFP4", 32, 17)},
    [40] = {QT_GEOMETRY("NVFP4", 64, 36)},
    [41] = {QT_GEOMETRY("Q1_0", 128, 18)},
    // Plinth's formats.
    [QT_SLOT(PK_PQ2)] = {QT_GEOMETRY("PQ2", 32, 10), .unpack = blk_pq2, .quantize = qt_quantize_pq2, .quantize_weighted = qt_quantize_weighted_pq2, .tile = {32, 3, 0, ACT_Q8_0}, .grid = &qt_pq2_grid_ops},
};

#undef QT_GEOMETRY

// The row of a type id known to have one (for code specialized to a type).
#define QT_ROW(type) (&QT_TYPES[QT_SLOT(type)])

// The row of type id `type`, or NULL when neither ggml nor Plinth defined it.
BLK_INLINE const qt_type *qt_type_of(int type) {
    const int ggml = type >= 0 && type < PK_TYPE_COUNT, plinth = type >= PK_PLINTH_TYPES && type < PK_PLINTH_TYPE_END;
    if (!(ggml || plinth) || !QT_TYPES[QT_SLOT(type)].name) return NULL;
    return &QT_TYPES[QT_SLOT(type)];
}

// A legacy block's code width: 8 (Q8_0's whole bytes), 5 (with fifth bits) or 4; and its bias
// (codes are q + bias; formats with a minimum have none).
BLK_INLINE int qt_legacy_bits(const qt_type *ty) { return ty->fields.qs == 32 ? 8 : ty->fields.qh ? 5 : 4; }
BLK_INLINE int qt_legacy_bias(const qt_type *ty) { return ty->tile.offsets ? 0 : 1 << (qt_legacy_bits(ty) - 1); }

// A row's whole-row geometry: bytes of `k` weights (k a whole number of blocks).
BLK_INLINE size_t qt_row_bytes(const qt_type *ty, int64_t k) { return (size_t)(k / ty->elements) * ty->bytes; }
