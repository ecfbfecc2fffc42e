// ctnn/backends/cuda/context.cuh — the streams, cuBLASLt handle and scratch the CUDA ops share.
//
// cuda_context::get() is one per host thread (thread_local, made on first
// use): a compute stream every op launches on, a copy stream for staging
// batches (feeder.cuh), a cuBLASLt handle with a 32 MiB workspace, and a
// small device scratch (finite flags, reduction sums) with its pinned host
// mirror. Both streams are created blocking, so the synchronous
// cuda_device_memory::copy (legacy default stream) is ordered after the work
// already queued on them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "error.cuh"
#include "memory.cuh"

namespace ctnn {

class cuda_context {
 public:
  static constexpr std::size_t workspace_bytes = std::size_t(32) << 20;
  static constexpr std::size_t scratch_doubles = 64;

  static cuda_context& get() {
    thread_local cuda_context c;
    return c;
  }

  cudaStream_t compute() const noexcept { return compute_; }
  cudaStream_t copy() const noexcept { return copy_; }
  cublasLtHandle_t lt() const noexcept { return lt_; }
  void* workspace() const noexcept { return workspace_.data(); }
  // Device scratch: [0] a non-finite flag (int, in the first 8 bytes), [1..] sums.
  double* scratch() const noexcept { return scratch_.data(); }
  double* host_scratch() const noexcept { return host_scratch_.data(); }

  void synchronize() const { CTNN_CUDA_CHECK(cudaStreamSynchronize(compute_)); }

  cuda_context(const cuda_context&) = delete;
  cuda_context& operator=(const cuda_context&) = delete;
  ~cuda_context() {
    if (lt_) cublasLtDestroy(lt_);
    if (copy_) cudaStreamDestroy(copy_);
    if (compute_) cudaStreamDestroy(compute_);
  }

 private:
  cuda_context()
      : workspace_(workspace_bytes), scratch_(scratch_doubles), host_scratch_(scratch_doubles) {
    CTNN_CUDA_CHECK(cudaStreamCreate(&compute_));
    CTNN_CUDA_CHECK(cudaStreamCreate(&copy_));
    CTNN_CUBLAS_CHECK(cublasLtCreate(&lt_));
  }

  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  device_buffer<std::byte> workspace_;
  device_buffer<double> scratch_;
  pinned_buffer<double> host_scratch_;
};

// A CUDA event (timing enabled), destroyed with its owner; a copy is a new event.
class cuda_event {
 public:
  cuda_event() { CTNN_CUDA_CHECK(cudaEventCreate(&e_)); }
  cuda_event(const cuda_event&) : cuda_event() {}
  cuda_event& operator=(const cuda_event&) { return *this; }
  ~cuda_event() {
    if (e_) cudaEventDestroy(e_);
  }
  operator cudaEvent_t() const noexcept { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};
// Seconds from a to b (both recorded; waits for b).
inline double elapsed_seconds(cudaEvent_t a, cudaEvent_t b) {
  CTNN_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CTNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return double(ms) / 1000.0;
}

}  // namespace ctnn
