// ctnn/distributed/data_parallel.hpp — data-parallel training over a Communicator.
//
// data_parallel<C>{comm} is a step hook and a callback, passed to fit as an extra (put it
// before a loss_scale hook: every rank then sees the same averaged gradients and decides alike):
//   on_train_begin       an agreement, then broadcast_variables(comm, model): rank 0's
//                        parameters, states, masks, optimizer slots and counts to every rank
//   transform_gradients  (phase 4) an agreement, then the model's whole gradient region averaged
//                        over the ranks in one all-reduce (sum / size); with a non-blocking
//                        all-reduce (mpi) and float variables: the agreement at the last layer's
//                        backward, buckets of whole layers (>= options.bucket_bytes) started as
//                        backward finishes them, the rest started and all awaited in phase 4
//   reduce_logs          (end of epoch, before the callbacks) an agreement, then the epoch's loss
//                        and metrics averaged weighted by each rank's samples, val_* plainly
//   on_train_end         a last agreement; log_epoch adds "allreduce_seconds"
//   process_role()       fit's ctx.role: rank 0 writes and prints
//   during fit           the model's run_info::replicas: sync_batch_norm's statistics averaged
//                        over the ranks (an agreement, then an all-reduce, per layer call)
//   on_failure(what)     (fit, on an exception) joins the pending agreement as failed
// An agreement is one all-reduce of 2 x size doubles (each rank: failed?, where it is): a rank
// that failed makes the others throw distributed_error "rank r failed: what", ranks at different
// points throw "out of step". Size 1 (distributed::none): nothing. Host memory only (CPU
// backend). docs/distributed.md.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include "../train/history.hpp"
#include "../train/model.hpp"
#include "../train/process_role.hpp"
#include "../train/step.hpp"
#include "communicator.hpp"

namespace ctnn::distributed {

// Copies root's variables (parameters, states, masks, optimizer slots and counts) to every rank.
template <Communicator C, class M>
void broadcast_variables(C& comm, M& m, int root = 0) {
  static_assert(M::backend::memory::host_accessible || handles_device_memory<C>,
                "broadcast_variables: this backend's variables are device memory: use a communicator that takes "
                "device memory (distributed::nccl, ctnn/distributed/nccl.hpp)");
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

// bucket_bytes: with a communicator that has a non-blocking all-reduce (has_async_all_reduce),
// gradients are reduced in buckets of at least this many bytes (whole layers, from the last),
// each started as soon as backward has finished its layers (DDP's bucket_cap_mb; 0: one
// all-reduce after backward, as without overlap).
struct data_parallel_options {
  std::size_t bucket_bytes = 64 * 1024;
};

template <class C>
struct async_requests {
  using type = char;  // unused: no non-blocking all-reduce
};
template <class C>
  requires requires { typename C::request; }
struct async_requests<C> {
  using type = typename C::request;
};

template <Communicator C>
class data_parallel {
 public:
  explicit data_parallel(C comm = C{}, data_parallel_options o = {})
      : comm_(std::move(comm)), active_(comm_.size() > 1), options_(o) {}

  const C& communicator() const noexcept { return comm_; }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  ctnn::process_role process_role() const { return {comm_.rank(), comm_.size()}; }

  template <class Ctx>
  void on_train_begin(Ctx& ctx) {
    active_ = comm_.size() > 1;
    broken_ = false;
    seq_ = 0;
    agree(point::train_begin);
    if (active_) {
      collective([&] { broadcast_variables(comm_, ctx.model); });
      using M = std::remove_reference_t<decltype(ctx.model)>;
      replicas_ = {this, &average_for_layer};
      model_ = &ctx.model;
      release_ = [](void* m) {  // the replicas and the gradient listener
        ctnn::detail::training_access::set_replicas(*static_cast<M*>(m), nullptr);
        ctnn::detail::training_access::set_gradient_listener(*static_cast<M*>(m), nullptr);
      };
      ctnn::detail::training_access::set_replicas(ctx.model, &replicas_);
      if constexpr (has_async_all_reduce<C> && M::backend::memory::host_accessible) {
        if (options_.bucket_bytes > 0) {
          listener_ = {this, &gradients_ready};
          ctnn::detail::training_access::set_gradient_listener(ctx.model, &listener_);
        }
      }
    }
  }
  template <class M>
  void transform_gradients(step_state<M>& s) {
    static_assert(M::backend::memory::host_accessible || handles_device_memory<C>,
                  "data_parallel: this backend's gradients are device memory: use a communicator that takes device "
                  "memory (distributed::nccl, ctnn/distributed/nccl.hpp)");
    if (!active_) return;
    if constexpr (has_async_all_reduce<C>) {
      in_step_ = false;
      if (started_) {  // buckets went out during backward: the rest, then wait for all
        const auto t0 = std::chrono::steady_clock::now();
        started_ = false;
        collective([&] {
          if (pending_end_ > s.gradients.data())
            comm_.all_reduce_sum_start(std::span<float>(s.gradients.data(), pending_end_), requests_);
          comm_.wait_all(requests_);
        });
        const float ranks = float(comm_.size());
        for (float& v : s.gradients) v /= ranks;
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++reductions_;
        return;
      }
    }
    agree(point::step);
    const auto t0 = std::chrono::steady_clock::now();
    collective([&] { comm_.all_reduce_average(s.gradients); });
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++reductions_;
  }
  // Buckets started during backward so far (overlap; 0 without a non-blocking all-reduce).
  std::size_t buckets() const noexcept { return buckets_; }
  // The epoch's loss and metrics (every key fit has set so far) averaged across the ranks, each
  // rank's weighted by its `samples`; val_* unweighted (each rank's validation is one value).
  void reduce_logs(logs& l, std::size_t samples) {
    if (!active_) return;
    agree(point::epoch_end);
    std::vector<double> v;
    v.reserve(l.items.size() + 1);
    for (auto& [k, x] : l.items) v.push_back(is_validation(k) ? x : x * double(samples));
    v.push_back(double(samples));
    collective([&] { comm_.all_reduce_average(std::span<double>(v)); });
    const double mean_samples = v.back();
    std::size_t i = 0;
    for (auto& [k, x] : l.items) {
      x = is_validation(k) ? v[i] : v[i] / mean_samples;
      ++i;
    }
  }
  template <class Ctx>
  void on_train_end(Ctx&) {
    release_replicas();
    agree(point::train_end);
    active_ = false;  // a failure after this point has nobody to wait for it
  }
  // fit calls it when training ends in an exception on this rank: the others learn it in the
  // agreement they wait in. Not after this object's own collective failed (the others left it).
  void on_failure(const std::string& what) {
    release_replicas();
    if (!active_ || broken_) return;
    agree(point::failed, what);
  }
  void log_epoch(logs& l) {
    l.set("allreduce_seconds", seconds_);
    seconds_ = 0;
  }
  // All-reduces of the gradients run so far (one per step that reached phase 4).
  std::size_t reductions() const noexcept { return reductions_; }
  // Agreements run so far (one before each collective, one at the end of training).
  std::size_t agreements() const noexcept { return agreements_; }

 private:
  enum class point : int { failed = 0, train_begin = 1, step = 2, epoch_end = 3, train_end = 4, layer = 5 };
  static constexpr std::size_t message_bytes = 512;

  static bool is_validation(const std::string& k) { return k.rfind("val_", 0) == 0; }
  static const char* point_name(int p) {
    switch (point(p)) {
      case point::failed: return "failed";
      case point::train_begin: return "the start of training";
      case point::step: return "a step's gradient all-reduce";
      case point::epoch_end: return "the end of an epoch";
      case point::train_end: return "the end of training";
      case point::layer: return "a synchronized layer's all-reduce";
    }
    return "?";
  }
  // run_info::replicas of a synchronized layer (sync_batch_norm) in training: an agreement, then
  // the values averaged over the ranks (counted in allreduce_seconds).
  static void average_for_layer(void* self, double* values, std::size_t n) {
    auto& dp = *static_cast<data_parallel*>(self);
    dp.agree(point::layer);
    const auto t0 = std::chrono::steady_clock::now();
    dp.collective([&] { dp.comm_.all_reduce_average(std::span<double>(values, n)); });
    dp.seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  void release_replicas() noexcept {
    if (model_) release_(model_);
    model_ = nullptr;
  }
  // The model's backward: layer by layer from the last, a layer's gradients are final. The first
  // call of a step runs the step's agreement; whole layers gather into the pending bucket, which
  // is started once it holds bucket_bytes (the gradient region is in layer order, so the started
  // buckets are always its tail [pending_end_, end)); MPI is let progress the started ones.
  static void gradients_ready(void* self, float* g, std::size_t, float* region, std::size_t region_size,
                              bool loss_finite) {
    auto& dp = *static_cast<data_parallel*>(self);
    if constexpr (has_async_all_reduce<C>) {
      const auto t0 = std::chrono::steady_clock::now();
      // within a step the calls come from the last layer down: a higher layer means a new step
      if (!dp.in_step_ || g >= dp.last_layer_) {
        if (dp.started_) dp.collective([&] { dp.comm_.wait_all(dp.requests_); });  // a step whose phase 4 never came
        dp.in_step_ = true;
        dp.started_ = false;
        // a non-finite loss ends this rank's step after backward, and fit throws: no agreement and
        // no bucket now, so that its failure meets the others' agreement (on_failure)
        dp.abandoned_ = !loss_finite;
        if (!dp.abandoned_) {
          dp.agree(point::step);
          dp.started_ = true;
          dp.pending_end_ = region + region_size;
          dp.requests_.clear();
        }
      }
      dp.last_layer_ = g;
      if (dp.abandoned_) return;
      if (std::size_t(dp.pending_end_ - g) * sizeof(float) >= dp.options_.bucket_bytes) {
        dp.collective([&] { dp.comm_.all_reduce_sum_start(std::span<float>(g, dp.pending_end_), dp.requests_); });
        dp.pending_end_ = g;
        ++dp.buckets_;
      } else {
        dp.collective([&] { dp.comm_.progress(dp.requests_); });
      }
      dp.seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  template <class F>
  void collective(F&& f) {
    try {
      f();
    } catch (...) {
      broken_ = true;
      throw;
    }
  }
  // Every rank says whether it failed and where it is; throws on this rank unless all are well
  // and at the same point (or this rank is the one that failed: fit rethrows its own exception).
  void agree(point where, const std::string& what = {}) {
    if (!active_) return;
    ++agreements_;
    const int n = comm_.size(), r = comm_.rank();
    std::vector<double>& v = agreement_;  // kept: no allocation per step
    v.assign(2 * std::size_t(n), 0.0);
    v[2 * std::size_t(r)] = where == point::failed ? 1.0 : 0.0;
    v[2 * std::size_t(r) + 1] = double(seq_) * 8 + double(int(where));
    ++seq_;
    collective([&] { comm_.all_reduce_average(std::span<double>(v)); });
    for (double& x : v) x = std::round(x * n);  // each slot had one rank's value: the sum, exactly
    int failed = -1;
    for (int i = 0; i < n && failed < 0; ++i)
      if (v[2 * std::size_t(i)] != 0) failed = i;
    if (failed >= 0) {
      char text[message_bytes] = {};
      if (r == failed) std::strncpy(text, what.c_str(), message_bytes - 1);
      collective([&] { comm_.broadcast(std::span<char>(text), failed); });
      text[message_bytes - 1] = 0;
      broken_ = true;  // the others leave too: no more collectives
      if (where == point::failed) return;
      throw distributed_error("data_parallel: rank " + std::to_string(failed) + " failed: " + text + " (rank " +
                              std::to_string(r) + " stopped at " + point_name(int(where)) + ")");
    }
    for (int i = 0; i < n; ++i) {
      const double p = v[2 * std::size_t(i) + 1];
      if (p == v[2 * std::size_t(r) + 1]) continue;
      broken_ = true;
      const auto at = [&](int k) {
        const double q = v[2 * std::size_t(k) + 1];
        return "rank " + std::to_string(k) + " at " + point_name(int(std::fmod(q, 8))) + " (agreement " +
               std::to_string(std::int64_t(q / 8) + 1) + ")";
      };
      throw distributed_error("data_parallel: the ranks are out of step: " + at(r) + ", " + at(i) +
                              "; every rank must run the same number of steps and epochs (equal shards; callbacks "
                              "that stop training alike)");
    }
  }

  C comm_;
  bool active_ = false, broken_ = false;
  std::int64_t seq_ = 0;
  double seconds_ = 0;
  std::size_t reductions_ = 0, agreements_ = 0;
  std::vector<double> agreement_;  // agree()'s slots: (failed, position) per rank
  cross_replica replicas_;         // the model's run_info::replicas during fit
  void* model_ = nullptr;          // the model that holds them, and how to take them back
  void (*release_)(void*) = nullptr;
  data_parallel_options options_;
  gradient_listener listener_;          // the model's, with a non-blocking all-reduce
  float* pending_end_ = nullptr;        // the buckets started this step are [pending_end_, end)
  bool started_ = false;                // this step's agreement has run, buckets may be out
  bool in_step_ = false, abandoned_ = false;  // between a step's first layer and phase 4; its loss not finite
  float* last_layer_ = nullptr;         // the gradients of the layer reported last
  std::size_t buckets_ = 0;
  std::vector<typename async_requests<C>::type> requests_;
};

}  // namespace ctnn::distributed
