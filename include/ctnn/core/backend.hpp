// ctnn/core/backend.hpp — backend tags.
//
// The backend is a template parameter of a bound layer and of a model, never a
// macro. `cpu` runs the kernels of kernels/cpu. `cuda` names the half-precision
// specializations that live in kernels/cuda/*.cuh and are only seen by nvcc; a
// translation unit compiled without CUDA can name the tag but not instantiate
// a CUDA layer.
#pragma once

namespace ctnn {

struct cpu {
  static constexpr const char* name = "cpu";
};

struct cuda {
  static constexpr const char* name = "cuda";
};

}  // namespace ctnn
