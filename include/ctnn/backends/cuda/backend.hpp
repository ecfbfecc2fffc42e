// ctnn/backends/cuda/backend.hpp — the CUDA backend's tag, cuda<SM>.
//
// Host code may name cuda<SM>; it is a complete Backend only in nvcc
// translation units, which include backends/cuda/cuda.cuh (its memory and ops).
#pragma once
#include <string>

#include "../../core/backend.hpp"

namespace ctnn {

// Device memory of the CUDA backends; defined by memory.cuh.
struct cuda_device_memory;

template <int SM>
struct cuda {
  static constexpr int sm = SM;
  using memory = cuda_device_memory;
  static std::string name() { return "cuda<" + std::to_string(SM) + ">"; }
};

}  // namespace ctnn
