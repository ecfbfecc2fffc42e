// ctnn/cuda/error.cuh — CUDA and cuBLASLt errors as exceptions naming the call.
//
// CTNN_CUDA_CHECK(expr) and CTNN_CUBLAS_CHECK(expr) throw ctnn::cuda_error
// ("ctnn cuda: cudaMalloc(&p, bytes) failed at memory.cuh:42: out of memory")
// when the call does not return success. Kernel launches are checked with
// CTNN_CUDA_CHECK(cudaGetLastError()) right after the launch. Only nvcc
// translation units include this header (it needs the CUDA toolkit).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace ctnn {

struct cuda_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace cuda_detail {
inline std::string where(const char* expr, const char* file, int line) {
  std::string f(file);
  const auto slash = f.find_last_of('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  return std::string("ctnn cuda: ") + expr + " failed at " + f + ":" + std::to_string(line);
}
inline void check(cudaError_t e, const char* expr, const char* file, int line) {
  if (e != cudaSuccess) throw cuda_error(where(expr, file, line) + ": " + cudaGetErrorString(e));
}
inline void check(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw cuda_error(where(expr, file, line) + ": cublas status " + std::to_string(int(s)));
}
}  // namespace cuda_detail

}  // namespace ctnn

#define CTNN_CUDA_CHECK(expr) ::ctnn::cuda_detail::check((expr), #expr, __FILE__, __LINE__)
#define CTNN_CUBLAS_CHECK(expr) ::ctnn::cuda_detail::check((expr), #expr, __FILE__, __LINE__)
