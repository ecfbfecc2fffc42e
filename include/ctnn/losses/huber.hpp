// ctnn/losses/huber.hpp
//
// Targets: N values per sample (dense_targets<shape<N>>). Per-sample loss:
// the mean over the N outputs of Keras' Huber loss with e = y - t:
// 0.5 e^2 where |e| <= delta, delta |e| - 0.5 delta^2 elsewhere
// (kernels/loss_functors.hpp); delta > 0, default 1 as Keras. Reduction:
// mean over the batch (Keras' sum_over_batch_size). Any output shape.
// docs/training.md.
#pragma once
#include <cstddef>
#include <string>

#include "../backends/cpu/ops.hpp"
#include "../core/output_rule.hpp"
#include "../core/plan.hpp"
#include "../core/targets.hpp"
#include "../kernels/loss_functors.hpp"

namespace ctnn {

struct huber {
  template <std::size_t N>
  using target_kind_for = dense_targets<shape<N>>;
  // Output: any rank, as many values per sample as the targets (core/output_rule.hpp).
  static constexpr accepts_output accepts{"huber", output_rule::any_shape, target_rule::dense,
                                          "sparse_categorical_crossentropy"};
  double delta = 1.0;

  std::string name() const { return accepts.name; }

  // The loss through ops<B> into the step's scalars s (B's memory, as y, targets and dy): the sum of
  // the per-sample losses added to s->loss_sum; dy (if not null) receives the gradient of the batch
  // mean times s->loss_scale.
  template <std::size_t N, class B = cpu<>, class T>
  void accumulate(const T* y, const T* targets, T* dy, std::size_t batch, step_scalars* s) const {
    ops<B>::pointwise_loss(fn::huber_rule{delta}, y, targets, batch * N, dy, 1.0 / double(N) / double(batch),
                           double(N), s);
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
