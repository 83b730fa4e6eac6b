// Umbrella header of the PlinthKernels C target: plain C over raw pointers.
#pragma once
#include "pk_isa.h"
#include "pk_quants.h"
#include "pk_pool.h"
#include "pk_matmul.h"
#include "pk_ops.h"
#include "pk_lora.h"
