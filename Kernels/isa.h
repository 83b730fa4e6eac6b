// The one place a kernel variant is chosen for the instruction set in use. Internal.
#pragma once
#include "pk_isa.h"

// The variant (of type T) for pk_isa(): one per instruction set, scalar first. Elsewhere than
// x86-64 only the scalar one exists, and the others are never compiled.
#if defined(__x86_64__)
#define ISA_PICK(T, scalar, avx2, avx512) ((T const[PK_ISA_COUNT]){(scalar), (avx2), (avx512)}[pk_isa()])
#else
#define ISA_PICK(T, scalar, avx2, avx512) ((T)(scalar))
#endif
