// ctnn/cuda/cuda.cuh — the CUDA backend: include this (after or instead of
// <ctnn/ctnn.hpp>) in a translation unit nvcc compiles.
//
//   memory.cuh   cuda<SM>::memory (device allocation, pinned staging)
//   ops.cuh      ops<cuda<SM>>: cuBLASLt GEMMs with fused epilogues, kernels.cuh
//   layers.cuh   dropout and batch_norm for cuda<SM>
//   model.cuh    model<Net, P, cuda<SM>>: one device allocation from the plan
//   host_variables.cuh  its variables in host memory; io::save_weights / load_weights of it
//   fused_mlp.cuh  small MLPs as fused kernels (inference; a training backward, off by default)
//   fit.cuh      fit / evaluate on the device, batches staged on a second stream
#pragma once
#include "../../ctnn.hpp"
#include "fit.cuh"
#include "layers.cuh"
#include "memory.cuh"
#include "model.cuh"
#include "ops.cuh"
