// ctnn/distributed/nccl.hpp — distributed::nccl: a Communicator on NCCL, for the CUDA backend.
//
// The only header that includes <nccl.h> (target ctnn::nccl, compiled by nvcc or any compiler with
// the CUDA runtime). nccl{} is one rank on the current device (ncclCommInitAll of 1): size 1, so
// data_parallel does nothing with it, as with distributed::none. nccl{id, rank, size} joins a
// job of `size` ranks, one GPU each: rank 0 makes the id (nccl::unique_id()) and hands it to the
// others (over distributed::mpi: broadcast its bytes). Collectives take device spans (a model's
// regions on cuda<SM>) or host spans (data_parallel's agreements and logs: staged through a
// device buffer); each waits for the device to finish its queued work first (cudaDeviceSynchronize),
// runs on the communicator's own stream, and returns when done. all_reduce_average is ncclAvg.
// Copies share one NCCL communicator (destroyed with the last). Failures throw distributed_error
// naming the call. Not tested on a GPU with more than one rank. docs/distributed.md.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "communicator.hpp"

namespace ctnn::distributed {

namespace detail {
inline void check_nccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw distributed_error(std::string(call) + ": " + ncclGetErrorString(r));
}
inline void check_cuda_for_nccl(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw distributed_error(std::string(call) + ": " + cudaGetErrorString(e));
}
inline bool device_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // a plain host pointer on older runtimes
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}
}  // namespace detail

class nccl {
 public:
  static constexpr bool device_memory = true;  // collectives take device spans as well as host spans

  nccl() : s_(std::make_shared<state>()) {
    int device = 0;
    detail::check_cuda_for_nccl(cudaGetDevice(&device), "cudaGetDevice");
    detail::check_nccl(ncclCommInitAll(&s_->comm, 1, &device), "ncclCommInitAll");
    s_->rank = 0;
    s_->size = 1;
    s_->make_stream();
  }
  nccl(const ncclUniqueId& id, int rank, int size) : s_(std::make_shared<state>()) {
    if (size < 1 || rank < 0 || rank >= size)
      throw std::invalid_argument("distributed::nccl: rank " + std::to_string(rank) + " is not in [0, " +
                                  std::to_string(size) + ")");
    detail::check_nccl(ncclCommInitRank(&s_->comm, size, id, rank), "ncclCommInitRank");
    s_->rank = rank;
    s_->size = size;
    s_->make_stream();
  }
  static ncclUniqueId unique_id() {
    ncclUniqueId id;
    detail::check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    return id;
  }

  int rank() const noexcept { return s_->rank; }
  int size() const noexcept { return s_->size; }
  ncclComm_t handle() const noexcept { return s_->comm; }

  template <class T>
    requires std::is_trivially_copyable_v<T>
  void broadcast(std::span<T> s, int root = 0) const {
    if (root < 0 || root >= size())
      throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank of this communicator (size " +
                                  std::to_string(size()) + ")");
    run(s.data(), s.size_bytes(), [&](void* p) {
      detail::check_nccl(ncclBroadcast(p, p, s.size_bytes(), ncclChar, root, s_->comm, s_->stream), "ncclBroadcast");
    });
  }
  template <class T>
    requires std::is_same_v<T, float> || std::is_same_v<T, double>
  void all_reduce_average(std::span<T> s) const {
    run(s.data(), s.size_bytes(), [&](void* p) {
      detail::check_nccl(ncclAllReduce(p, p, s.size(), std::is_same_v<T, float> ? ncclFloat : ncclDouble, ncclAvg,
                                       s_->comm, s_->stream),
                         "ncclAllReduce");
    });
  }
  void barrier() const {
    float one = 0;
    all_reduce_average(std::span<float>(&one, 1));
  }

 private:
  struct state {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    void* staging = nullptr;  // device copy of host spans, grown as needed
    std::size_t staging_bytes = 0;
    int rank = 0, size = 1;
    void make_stream() {
      detail::check_cuda_for_nccl(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    ~state() {
      if (comm) ncclCommDestroy(comm);
      if (stream) cudaStreamDestroy(stream);
      if (staging) cudaFree(staging);
    }
  };
  // f(device pointer) on the communicator's stream after the device's queued work; a host span
  // through the staging buffer.
  template <class F>
  void run(void* data, std::size_t bytes, F&& f) const {
    if (bytes == 0) return;
    detail::check_cuda_for_nccl(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (detail::device_pointer(data)) {
      f(data);
    } else {
      if (s_->staging_bytes < bytes) {
        if (s_->staging) cudaFree(s_->staging);
        s_->staging = nullptr;
        s_->staging_bytes = 0;
        detail::check_cuda_for_nccl(cudaMalloc(&s_->staging, bytes), "cudaMalloc");
        s_->staging_bytes = bytes;
      }
      detail::check_cuda_for_nccl(cudaMemcpy(s_->staging, data, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      f(s_->staging);
      detail::check_cuda_for_nccl(cudaStreamSynchronize(s_->stream), "cudaStreamSynchronize");
      detail::check_cuda_for_nccl(cudaMemcpy(data, s_->staging, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
      return;
    }
    detail::check_cuda_for_nccl(cudaStreamSynchronize(s_->stream), "cudaStreamSynchronize");
  }
  std::shared_ptr<state> s_;
};
static_assert(Communicator<nccl>);

}  // namespace ctnn::distributed
