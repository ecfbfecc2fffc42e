// tests/cuda/parity_cuda.hpp — cuda<90>'s side of the CPU-vs-backend parity test.
//
// tests/cuda/test_parity_{dense,sparse,conv}.cu compare cpu<> with cuda<90>
// over every layer type and every policy CUDA takes (tests/parity/parity.hpp;
// float64 is not a CUDA storage type; the sparse_dense layouts have no CUDA
// products and are reported, not compared), through the GENERIC model API
// (make_model<Net, P, cuda<90>>, fit, predict, host views): within parity's
// documented tolerances, never bits; dropout by its rate and scaling (the
// device draws its own masks). Each case skips without a device.
//
// The switch: CTNN_CUDA_PARITY (1 builds the cases, 0 leaves one skipped
// placeholder per file). By default it is 1 exactly when
// backends/cuda/model.cuh (the CUDA fork of the model, whose API differs: no
// host_outputs, callbacks see its own callback_model) is gone, i.e. once
// model<Net, P, cuda<SM>> is train/model.hpp's generic model.
// -DCTNN_CUDA_PARITY=1 forces it.
#pragma once
#include "cuda_test.hpp"

#ifndef CTNN_CUDA_PARITY
#if __has_include(<ctnn/backends/cuda/model.cuh>)
#define CTNN_CUDA_PARITY 0
#else
#define CTNN_CUDA_PARITY 1
#endif
#endif

#if CTNN_CUDA_PARITY
#define PARITY_PROLOGUE() CTNN_REQUIRE_DEVICE()
#include "parity/parity.hpp"

template <>
inline constexpr bool parity::takes_policy<ctnn::cuda<90>, ctnn::precision::float64> = false;
// ops<cuda<SM>> has no sparse_dense products (the sparse layouts are CPU-only for now)
template <>
inline constexpr bool parity::takes_case<ctnn::cuda<90>, parity::sparse_net> = false;
template <>
inline constexpr bool parity::takes_case<ctnn::cuda<90>, parity::sparse_csc_net> = false;
template <>
inline constexpr bool parity::takes_case<ctnn::cuda<90>, parity::sparse_rows_net> = false;
template <>
inline constexpr bool parity::takes_case<ctnn::cuda<90>, parity::sparse_nm_net> = false;
#else
#define CTNN_CUDA_PARITY_PLACEHOLDER(group)                                                                      \
  TEST_CASE("parity on cuda<90> (" group "): waits for the generic CUDA model") {                                \
    MESSAGE("CTNN_SKIP: CTNN_CUDA_PARITY is 0: backends/cuda/model.cuh (the CUDA fork of the model) is still here"); \
  }
#endif
