// IEEE half <-> float, exactly (round to nearest even; subnormals, infinities and NaN
// payloads kept). Header-only so that the dequantizers inline it, and so that code outside
// the kernels library (the CUDA emulator, Benchmarks/cuda/emu) uses the same conversions.
// C and C++.
#pragma once
#include <stdint.h>
#include <string.h>

static inline float half_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t half_bits_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float half_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;

    if (exponent == 0x1fu) {
        // Infinity or NaN: keep the payload (and a signalling NaN stays signalling).
        return half_f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
    }
    if (exponent == 0) {
        if (mantissa == 0) return half_f32_from_bits(sign);  // signed zero
        // Subnormal: mantissa * 2^-24. Shift the leading one up to bit 10; every shift
        // halves the exponent, starting from 2^-14 (biased 113 in single precision).
        uint32_t biased = 113;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            biased -= 1;
        }
        return half_f32_from_bits(sign | (biased << 23) | ((mantissa & 0x3ffu) << 13));
    }
    return half_f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Rounds `value >> shift` to nearest, ties to even (shift >= 1).
static inline uint32_t half_shift_round_even(uint32_t value, uint32_t shift) {
    const uint32_t kept = value >> shift;
    const uint32_t rest = value & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (kept & 1u))) return kept + 1u;
    return kept;
}

static inline uint16_t f32_to_half(float f) {
    const uint32_t x = half_bits_from_f32(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t exponent = (x >> 23) & 0xffu;
    const uint32_t mantissa = x & 0x7fffffu;

    if (exponent == 0xffu) {
        if (mantissa == 0) return (uint16_t)(sign | 0x7c00u);  // infinity
        // NaN: keep the sign and the top payload bits, and make it quiet.
        return (uint16_t)(sign | 0x7e00u | (mantissa >> 13));
    }
    // Half-precision biased exponent of this value (may be out of range).
    const int e = (int)exponent - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);  // overflow
    if (e <= 0) {
        // Half subnormal (or zero): count units of 2^-24. Anything below 2^-25 is zero;
        // exactly 2^-25 is a tie that rounds to even (zero).
        if (e < -10) return sign;
        const uint32_t significand = mantissa | 0x800000u;
        return (uint16_t)(sign | half_shift_round_even(significand, (uint32_t)(14 - e)));
    }
    // Normal: a carry out of the mantissa correctly bumps the exponent (up to infinity).
    const uint32_t rounded = half_shift_round_even(((uint32_t)e << 23) | mantissa, 13);
    return (uint16_t)(sign | rounded);
}
