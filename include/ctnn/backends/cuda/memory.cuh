// ctnn/backends/cuda/memory.cuh — cuda<SM>::memory: device memory, pinned host staging.
//
// cuda_device_memory is the memory of the cuda<SM> backends (core/backend.hpp
// names it; this header defines it): allocate(bytes) = cudaMalloc (256-byte
// aligned, zero-filled), deallocate = cudaFree, copy(dst, src, bytes) =
// cudaMemcpy with cudaMemcpyDefault (unified addressing: host or device on
// either side; synchronous with respect to the host). host_accessible = false:
// the host never dereferences a model's device pointers. host_view is
// cuda_host_view: a host_mirror (core/backend.hpp) made after the device has
// finished the work queued on every stream (so a callback, a weights file or
// a metric reads the bytes the last step wrote); commit() copies it back.
// device_buffer<T> is an owning typed device array; pinned_buffer<T> an owning
// page-locked host array (cudaMallocHost), what batches are staged in so that
// cudaMemcpyAsync on a second stream really runs asynchronously.
// device_count() is 0 (never an exception) when there is no usable device or
// driver: the tests print their skip reason from device_status().
#pragma once
#include <cstddef>
#include <string>
#include <utility>

#include "backend.hpp"
#include "error.cuh"

namespace ctnn {

class cuda_host_view;

struct cuda_device_memory {
  static constexpr bool host_accessible = false;
  using host_view = cuda_host_view;
  static void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    CTNN_CUDA_CHECK(cudaMalloc(&p, bytes));
    const cudaError_t e = cudaMemset(p, 0, bytes);
    if (e != cudaSuccess) {
      cudaFree(p);
      CTNN_CUDA_CHECK(e);
    }
    return p;
  }
  static void deallocate(void* p, std::size_t) noexcept {
    if (p) cudaFree(p);
  }
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes) CTNN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  }
};

// The host's view of a range of device memory: a mirror read once the device is idle.
class cuda_host_view : public host_mirror<cuda_device_memory> {
 public:
  cuda_host_view(std::byte* p, std::size_t bytes, bool read = true)
      : host_mirror<cuda_device_memory>(idle(p, bytes), bytes, read) {}

 private:
  static std::byte* idle(std::byte* p, std::size_t bytes) {
    if (bytes) CTNN_CUDA_CHECK(cudaDeviceSynchronize());
    return p;
  }
};

// Number of CUDA devices this process can use (0 without a driver or device).
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

// One line: the device used, or why there is none.
inline std::string device_status() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(e);
  }
  if (n == 0) return "no CUDA device: cudaGetDeviceCount() == 0";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "no CUDA device: cudaGetDeviceProperties failed";
  return std::string(p.name) + " (sm_" + std::to_string(p.major * 10 + p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 20) + " MiB)";
}

template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t n) : p_(static_cast<T*>(cuda_device_memory::allocate(n * sizeof(T)))), n_(n) {}
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~device_buffer() { cuda_device_memory::deallocate(p_, n_ * sizeof(T)); }
  T* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }
  void upload(const T* host, std::size_t n, std::size_t at = 0) { cuda_device_memory::copy(p_ + at, host, n * sizeof(T)); }
  void download(T* host, std::size_t n, std::size_t at = 0) const {
    cuda_device_memory::copy(host, p_ + at, n * sizeof(T));
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T>
class pinned_buffer {
 public:
  pinned_buffer() = default;
  explicit pinned_buffer(std::size_t n) : n_(n) {
    if (n) CTNN_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  pinned_buffer(pinned_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~pinned_buffer() {
    if (p_) cudaFreeHost(p_);
  }
  T* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace ctnn
