// ctnn/backends/cuda/backend.hpp — the CUDA backend's tag, cuda<SM>.
//
// Host code may name cuda<SM>; it is a complete Backend only in nvcc
// translation units, which include backends/cuda/cuda.cuh. Its policies
// (core/backend.hpp), defined there:
//   memory  cuda_device_memory (memory.cuh): device allocations; host_view =
//           cuda_host_view, a host mirror read after the device is idle;
//   feeder  cuda_feeder (feeder.cuh): batches staged in pinned host buffers,
//           copied on the copy stream, two buffers per slot;
//   runner  cuda_runner (runner.cuh): phases on the compute stream, timed
//           with CUDA events; inference captured as CUDA graphs.
// The model, step, fit, callbacks and weights files are the generic ones.
#pragma once
#include <string>

#include "../../core/backend.hpp"

namespace ctnn {

// The CUDA backends' policies; defined by memory.cuh, feeder.cuh and runner.cuh.
struct cuda_device_memory;
class cuda_feeder;
class cuda_runner;

template <int SM>
struct cuda {
  static constexpr int sm = SM;
  using memory = cuda_device_memory;
  using feeder = cuda_feeder;
  using runner = cuda_runner;
  static std::string name() { return "cuda<" + std::to_string(SM) + ">"; }
};

}  // namespace ctnn
