// The instruction set the kernels run on.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// The widest set the CPU supports is used unless a test asks for another one (every path gives
// the same bits; the scalar one is the reference). PLINTH_ISA=avx2|scalar narrows it.
enum { PK_ISA_SCALAR = 0, PK_ISA_AVX2 = 1, PK_ISA_AVX512 = 2, PK_ISA_COUNT = 3 };
// The instruction set in use.
int pk_isa(void);
// Selects `isa` when the CPU supports it; returns the one now in use.
int pk_set_isa(int isa);

#ifdef __cplusplus
}
#endif
