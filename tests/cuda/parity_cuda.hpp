// tests/cuda/parity_cuda.hpp — cuda<90>'s side of the CPU-vs-backend parity test.
//
// tests/cuda/test_parity_{dense,sparse,conv}.cu compare cpu<> with cuda<90>
// over every layer type and every policy CUDA takes (tests/parity/parity.hpp;
// float64 is not a CUDA storage type; every sparse_dense layout runs through
// ops<cuda<SM>>'s sparse products, sparse_products.cuh), through the GENERIC model API
// (make_model<Net, P, cuda<90>>, fit, predict, host views): within parity's
// documented tolerances, never bits; dropout by its rate and scaling (the
// device draws its own masks). Each case skips without a device.
#pragma once
#include "cuda_test.hpp"

#define PARITY_PROLOGUE() CTNN_REQUIRE_DEVICE()
#include "parity/parity.hpp"

template <>
inline constexpr bool parity::takes_policy<ctnn::cuda<90>, ctnn::precision::float64> = false;
