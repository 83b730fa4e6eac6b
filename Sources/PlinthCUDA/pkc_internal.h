// Internal to PlinthCUDA: the kernel source string (pkc_kernels_src.c, generated from
// pkc_kernels.cu by Benchmarks/cuda/embed.sh).
#pragma once

extern const char pkc_kernels_source[];
