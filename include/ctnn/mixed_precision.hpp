// ctnn/mixed_precision.hpp — what a program using a 16-bit precision policy includes.
//
// precision::mixed_float16, mixed_bfloat16 and float16 (core/precision.hpp)
// are named by every program; running them on the CPU needs the backend's
// 16-bit execution (backends/cpu/half_ops.hpp: conversions, the float32
// kernels, AVX512-BF16), which a float32 program does not parse. Without this
// header, a model of a 16-bit policy fails to compile with a message naming it.
#pragma once
#include "backends/cpu/half_ops.hpp"
#include "ctnn.hpp"
