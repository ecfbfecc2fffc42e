// ctnn/backends/cuda/cuda.cuh — the CUDA backend: include this (after or instead of
// <ctnn/ctnn.hpp>) in a translation unit nvcc compiles.
//
//   backend.hpp  cuda<SM>: the tag naming the policies below
//   memory.cuh   cuda<SM>::memory (device allocation, the host view, pinned staging)
//   feeder.cuh   cuda<SM>::feeder (batches staged on the copy stream, double-buffered)
//   runner.cuh   cuda<SM>::runner (the phases on the compute stream, event timing, graphs)
//   ops.cuh      ops<cuda<SM>>: cuBLASLt GEMMs with fused epilogues, gemm_epilogue.cuh (any
//                rule fused into a tiled GEMM), kernels.cuh, sparse_products.cuh
//   fused_mlp.cuh  small MLPs as fused kernels
// model<Net, P, cuda<SM>>, fit, evaluate, predict, callbacks and the weights
// files are the generic ones (train/, io/): make_model<Net, P, cuda<90>>(seed).
#pragma once
#include "../../ctnn.hpp"
#include "feeder.cuh"
#include "fused_mlp.cuh"
#include "memory.cuh"
#include "ops.cuh"
#include "runner.cuh"
