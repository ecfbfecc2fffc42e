// ctnn/distributed/data_parallel.hpp — data-parallel training over a Communicator.
//
// data_parallel<C>{comm} is a step hook and a callback, passed to fit as an extra (put it
// before a loss_scale hook: every rank then sees the same averaged gradients and decides alike):
//   on_train_begin       broadcast_variables(comm, model): rank 0's parameters, states, masks,
//                        optimizer slots and counts to every rank, before the first step
//   transform_gradients  (phase 4, before the regularizers and the optimizer) the model's whole
//                        gradient region averaged over the ranks in one all-reduce: sum / size,
//                        so equal per-rank batches give the gradient of the global batch
//   log_epoch            "allreduce_seconds": the epoch's time spent in that all-reduce
// With a communicator of size 1 (distributed::none) it does nothing. The gradients must be host
// memory (the CPU backend). One all-reduce after backward, no overlap yet: docs/distributed.md.
#pragma once
#include <chrono>
#include <cstdint>
#include <span>
#include <utility>

#include "../train/history.hpp"
#include "../train/model.hpp"
#include "../train/step.hpp"
#include "communicator.hpp"

namespace ctnn::distributed {

// Copies root's variables (parameters, states, masks, optimizer slots and counts) to every rank.
template <Communicator C, class M>
void broadcast_variables(C& comm, M& m, int root = 0) {
  static_assert(M::backend::memory::host_accessible,
                "broadcast_variables: this backend's variables are device memory; data-parallel training on it "
                "needs NCCL or a host copy (not yet: docs/distributed.md)");
  if (comm.size() == 1) return;
  comm.broadcast(m.parameters(), root);  // parameters() marks the compute copies stale: refreshed before use
  comm.broadcast(m.state(), root);
  comm.broadcast(m.masks(), root);
  comm.broadcast(m.optimizer_slots(), root);
  optimizer_state& os = ctnn::detail::training_access::optimizer_state(m);
  std::int64_t counts[2] = {os.iterations, os.steps};
  double scale[1] = {os.learning_rate_scale};
  comm.broadcast(std::span<std::int64_t>(counts), root);
  comm.broadcast(std::span<double>(scale), root);
  os.iterations = counts[0];
  os.steps = counts[1];
  os.learning_rate_scale = scale[0];
}

template <Communicator C>
class data_parallel {
 public:
  explicit data_parallel(C comm = C{}) : comm_(std::move(comm)) {}

  const C& communicator() const noexcept { return comm_; }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }

  template <class Ctx>
  void on_train_begin(Ctx& ctx) {
    broadcast_variables(comm_, ctx.model);
  }
  template <class M>
  void transform_gradients(step_state<M>& s) {
    static_assert(M::backend::memory::host_accessible,
                  "data_parallel: this backend's gradients are device memory; averaging them needs NCCL or a host "
                  "copy (not yet: docs/distributed.md)");
    if (comm_.size() == 1) return;
    const auto t0 = std::chrono::steady_clock::now();
    comm_.all_reduce_average(s.gradients);
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++reductions_;
  }
  void log_epoch(logs& l) {
    l.set("allreduce_seconds", seconds_);
    seconds_ = 0;
  }
  // All-reduces run so far (one per step that reached phase 4).
  std::size_t reductions() const noexcept { return reductions_; }

 private:
  C comm_;
  double seconds_ = 0;
  std::size_t reductions_ = 0;
};

}  // namespace ctnn::distributed
