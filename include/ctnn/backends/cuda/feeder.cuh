// ctnn/backends/cuda/feeder.cuh — cuda<SM>::feeder: batches staged through pinned memory.
//
// feed(slot, host, n) (core/backend.hpp's feeder; slot 0 inputs, 1 targets)
// copies the n values into a pinned host buffer, queues their copy to the
// device on the context's copy stream and makes the compute stream wait for
// it (events; the host never waits for the device here), and returns the
// device rows. Each slot has two buffers used in turn, so batch s + 1 is
// copied while the compute stream still runs the step that reads batch s:
// a buffer's copy waits for the compute stream to have finished the step
// that read it (its `released` event, recorded when the next feed of the
// slot switches away from it). Buffers grow (the device idle first), never
// shrink. The compute stream's waits are timed with events: log_epoch(l)
// adds "device_wait_seconds" (seconds the compute stream waited for a copy
// since the last call) to the model's epoch logs (fit calls it).
// A copy of a feeder starts with no buffers; destruction waits for the device.
#pragma once
#include <cstddef>
#include <cstring>

#include "backend.hpp"
#include "context.cuh"
#include "memory.cuh"

namespace ctnn {

class cuda_feeder {
 public:
  cuda_feeder() = default;
  cuda_feeder(const cuda_feeder&) {}
  cuda_feeder& operator=(const cuda_feeder&) { return *this; }
  ~cuda_feeder() {
    if (used_) cudaDeviceSynchronize();  // no copy may still use the buffers (errors are not thrown here)
  }

  template <class T>
  const T* feed(std::size_t k, const T* host, std::size_t n) {
    slot& s = slots_[k];
    buffer& b = s.b[s.next];
    buffer& other = s.b[1 - s.next];
    s.next = 1 - s.next;
    const std::size_t bytes = n * sizeof(T);
    if (bytes > b.capacity) {
      CTNN_CUDA_CHECK(cudaDeviceSynchronize());  // nothing may still read or fill the buffer
      b.host = pinned_buffer<std::byte>(bytes);
      b.dev = device_buffer<std::byte>(bytes);
      b.capacity = bytes;
    }
    used_ = true;
    cuda_context& c = cuda_context::get();
    take_wait(b);
    if (bytes) {
      CTNN_CUDA_CHECK(cudaEventSynchronize(b.copied));  // the pinned rows' last copy is done
      std::memcpy(b.host.data(), host, bytes);
      CTNN_CUDA_CHECK(cudaStreamWaitEvent(c.copy(), b.released, 0));  // the step that read the device rows is done
      CTNN_CUDA_CHECK(cudaMemcpyAsync(b.dev.data(), b.host.data(), bytes, cudaMemcpyHostToDevice, c.copy()));
      CTNN_CUDA_CHECK(cudaEventRecord(b.copied, c.copy()));
      CTNN_CUDA_CHECK(cudaEventRecord(b.wait_begin, c.compute()));
      CTNN_CUDA_CHECK(cudaStreamWaitEvent(c.compute(), b.copied, 0));
      CTNN_CUDA_CHECK(cudaEventRecord(b.wait_end, c.compute()));
      b.timed = true;
    }
    // everything queued on the compute stream so far (the last step) read the other buffer
    CTNN_CUDA_CHECK(cudaEventRecord(other.released, c.compute()));
    return reinterpret_cast<const T*>(b.dev.data());
  }

  // Adds "device_wait_seconds" since the last call to l (waits for the device).
  template <class Logs>
  void log_epoch(Logs& l) {
    for (slot& s : slots_)
      for (buffer& b : s.b) take_wait(b);
    l.set("device_wait_seconds", wait_seconds_);
    wait_seconds_ = 0;
  }

 private:
  struct buffer {
    pinned_buffer<std::byte> host;
    device_buffer<std::byte> dev;
    std::size_t capacity = 0;
    cuda_event copied, released, wait_begin, wait_end;
    bool timed = false;  // wait_begin / wait_end hold a wait not yet added up
  };
  struct slot {
    buffer b[2];
    int next = 0;
  };
  void take_wait(buffer& b) {
    if (!b.timed) return;
    wait_seconds_ += elapsed_seconds(b.wait_begin, b.wait_end);
    b.timed = false;
  }

  slot slots_[2];
  double wait_seconds_ = 0;
  bool used_ = false;
};

}  // namespace ctnn
