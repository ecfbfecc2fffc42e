// ctnn/losses/mean_squared_error.hpp
//
// Targets: a vector of N values per sample. Per-sample loss: the mean over
// the N outputs of (y - t)^2, as Keras; reduction: mean over the batch.
#pragma once
#include <cstddef>
#include <string>

#include "../backends/cpu/ops.hpp"
#include "../core/output_rule.hpp"
#include "../core/plan.hpp"
#include "../core/targets.hpp"

namespace ctnn {

struct mean_squared_error {
  template <std::size_t N>
  using target_kind_for = dense_targets<shape<N>>;
  // Output: any rank, as many values per sample as the targets (core/output_rule.hpp).
  // With class labels a classifier's loss is meant: sparse_categorical_crossentropy.
  static constexpr accepts_output accepts{"mean_squared_error", output_rule::any_shape, target_rule::dense,
                                          "sparse_categorical_crossentropy"};

  std::string name() const { return accepts.name; }

  // The loss through ops<B> into the step's scalars s (B's memory, as y, targets and dy): the sum of
  // the per-sample losses added to s->loss_sum; dy (if not null) receives the gradient of the batch
  // mean times s->loss_scale.
  template <std::size_t N, class B = cpu<>, class T>
  void accumulate(const T* y, const T* targets, T* dy, std::size_t batch, step_scalars* s) const {
    ops<B>::squared_error_loss(y, targets, batch * N, dy, 2.0 / double(N) / double(batch), double(N), s);
  }

  // Sum over the batch of per-sample losses; dy (if not null) receives the gradient of the batch
  // mean. Host memory (a host backend's).
  template <std::size_t N, class B = cpu<>, class T>
  double compute(const T* y, const T* targets, T* dy, std::size_t batch) const {
    step_scalars s;
    accumulate<N, B>(y, targets, dy, batch, &s);
    return s.loss_sum;
  }
};

}  // namespace ctnn
