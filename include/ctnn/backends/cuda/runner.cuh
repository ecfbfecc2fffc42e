// ctnn/backends/cuda/runner.cuh — cuda<SM>::runner: the phases on the compute stream, timed; graphs.
//
// run(f, flush_denormals) (core/backend.hpp's runner) calls f on the host:
// every op f calls queues its work on the context's compute stream. The
// outermost run is bracketed by two CUDA events; log_epoch(l) adds
// "device_compute_seconds" (their spans since the last call: the compute
// stream's time in the phases, waits for data excluded) and "graph_steps"
// (passes that ran as a CUDA graph since the last call) to the model's epoch
// logs (fit calls it).
// graph(memory, key, batch, queue): a pass whose kernels only depend on
// pointers that stay put (the model's memory, the feeder's buffer `key`) and
// on the batch: the first call for (key, batch) runs queue() uncaptured (its
// cuBLASLt plans are made then), the second captures what it queues on the
// compute stream as a graph, instantiates and launches it, later calls
// replay it. False (the caller runs queue() itself) when capture is off or
// fails: then that kind of pass (inference or training) is not tried again
// by this runner. A new `memory` (the model reallocated) forgets the graphs.
// The model runs inference through it (train/model.hpp).
// graph(memory, x, y, batch, pass, queue): the same for a training step's
// phases 1-3 (model::train_pass): keyed by the fed inputs x and targets y,
// the batch and `pass` (the step's id: another step, with another loss, never
// replays it; a new pass forgets the training graphs of the others). The loss
// scale is read from the step's scalars when the graph runs; the model keeps
// a network whose layers draw random numbers (draws_random) uncaptured.
// A copy of a runner starts with no graphs and no times.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>

#include "backend.hpp"
#include "context.cuh"

namespace ctnn {

class cuda_runner {
 public:
  cuda_runner() = default;
  cuda_runner(const cuda_runner&) {}
  cuda_runner& operator=(const cuda_runner&) {
    clear();
    return *this;
  }
  ~cuda_runner() { clear(); }

  template <class F>
  decltype(auto) run(F&& f, bool = true) {
    if (depth_ > 0) return std::forward<F>(f)();
    span& sp = spans_[next_];
    next_ = 1 - next_;
    take(sp);
    const cudaStream_t s = cuda_context::get().compute();
    CTNN_CUDA_CHECK(cudaEventRecord(sp.begin, s));
    struct outermost {
      cuda_runner& r;
      span& sp;
      cudaStream_t s;
      ~outermost() {
        --r.depth_;
        sp.timed = cudaEventRecord(sp.end, s) == cudaSuccess;
      }
    } guard{*this, sp, s};
    ++depth_;
    return std::forward<F>(f)();
  }

  // queue() as a CUDA graph (above); true when it ran as one.
  template <class F>
  bool graph(const void* memory, const void* key, std::size_t batch, F&& queue) {
    return run_graph(memory, graph_key{key, nullptr, batch, 0}, queue);
  }
  // A training step's phases 1-3 as a CUDA graph (above); pass: the step's id (> 0).
  template <class F>
  bool graph(const void* memory, const void* x, const void* y, std::size_t batch, std::uint64_t pass, F&& queue) {
    if (pass != pass_) {  // another step: its graphs would replay another loss
      for (auto it = graphs_.begin(); it != graphs_.end();) {
        if (std::get<3>(it->first) != 0) {
          if (it->second) cudaGraphExecDestroy(it->second);
          it = graphs_.erase(it);
        } else {
          ++it;
        }
      }
      pass_ = pass;
    }
    return run_graph(memory, graph_key{x, y, batch, pass}, queue);
  }
  template <class Logs>
  void log_epoch(Logs& l) {
    take(spans_[0]);
    take(spans_[1]);
    l.set("device_compute_seconds", compute_seconds_);
    l.set("graph_steps", double(graph_steps_));
    compute_seconds_ = 0;
    graph_steps_ = 0;
  }
  std::size_t graphs() const noexcept {
    std::size_t n = 0;
    for (const auto& [k, e] : graphs_) n += e != nullptr;
    return n;
  }

 private:
  // (inputs, targets, batch, pass): pass 0 is inference
  using graph_key = std::tuple<const void*, const void*, std::size_t, std::uint64_t>;
  template <class F>
  bool run_graph(const void* memory, const graph_key& k, F& queue) {
    bool& failed = failed_[std::get<3>(k) != 0];
    if (failed) return false;
    if (memory != memory_) {
      clear();
      memory_ = memory;
    }
    const cudaStream_t s = cuda_context::get().compute();
    if (const auto it = graphs_.find(k); it != graphs_.end()) {
      if (it->second) {
        CTNN_CUDA_CHECK(cudaGraphLaunch(it->second, s));
        ++graph_steps_;
        return true;
      }
      if (capture(s, queue, it->second)) {
        ++graph_steps_;
        return true;
      }
      failed = true;  // not tried again
      graphs_.erase(it);
      return false;
    }
    graphs_.emplace(k, nullptr);  // seen once: uncaptured this time
    return false;
  }
  struct span {
    cuda_event begin, end;
    bool timed = false;
  };
  void take(span& sp) {
    if (!sp.timed) return;
    sp.timed = false;
    compute_seconds_ += elapsed_seconds(sp.begin, sp.end);
  }
  // Captures queue() on s, instantiates it into e and launches it; false (nothing queued, the error cleared) on failure.
  template <class F>
  static bool capture(cudaStream_t s, F& queue, cudaGraphExec_t& e) {
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    bool queued = true;
    try {
      queue();
    } catch (...) {
      queued = false;
    }
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(s, &g);
    const bool ok = queued && ended == cudaSuccess && g && cudaGraphInstantiate(&e, g, 0) == cudaSuccess;
    if (g) cudaGraphDestroy(g);
    if (!ok) {
      if (e) cudaGraphExecDestroy(e);
      e = nullptr;
      cudaGetLastError();
      return false;
    }
    CTNN_CUDA_CHECK(cudaGraphLaunch(e, s));
    return true;
  }
  void clear() noexcept {
    for (auto& [k, e] : graphs_)
      if (e) cudaGraphExecDestroy(e);
    graphs_.clear();
  }

  std::map<graph_key, cudaGraphExec_t> graphs_;
  const void* memory_ = nullptr;
  bool failed_[2] = {false, false};  // inference, training
  std::uint64_t pass_ = 0;           // the training step whose graphs are kept
  int depth_ = 0;
  span spans_[2];
  int next_ = 0;
  double compute_seconds_ = 0;
  std::size_t graph_steps_ = 0;
};

}  // namespace ctnn
