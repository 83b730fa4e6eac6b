#pragma once
#include <cblas.h>
#include <lapacke.h>
