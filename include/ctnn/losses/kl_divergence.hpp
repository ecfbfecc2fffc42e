// ctnn/losses/kl_divergence.hpp
//
// Targets: a distribution over the N outputs per sample (dense_targets<shape<N>>).
// Per-sample loss: Keras' sum over the N outputs of tc log(tc / pc), with
// tc = clip(t, 1e-7, 1) and pc = clip(y, 1e-7, 1) (kernels/loss_functors.hpp;
// gradient 0 where y is clipped). The outputs are probabilities (a softmax
// layer); nothing normalises them. Output: rank 1 (Keras sums over the last
// axis). Reduction: mean over the batch (Keras' sum_over_batch_size).
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

struct kl_divergence {
  template <std::size_t N>
  using target_kind_for = dense_targets<shape<N>>;
  // Output: rank 1, one probability per target value (core/output_rule.hpp).
  static constexpr accepts_output accepts{"kl_divergence", output_rule::class_scores, target_rule::dense,
                                          "sparse_categorical_crossentropy"};

  std::string name() const { return accepts.name; }

  // The loss through ops<B> into the step's scalars s (B's memory, as y, targets and dy): the sum of
  // the per-sample losses added to s->loss_sum; dy (if not null) receives the gradient of the batch
  // mean times s->loss_scale.
  template <std::size_t N, class B = cpu<>, class T>
  void accumulate(const T* y, const T* targets, T* dy, std::size_t batch, step_scalars* s) const {
    ops<B>::pointwise_loss(fn::kl_divergence_rule{}, y, targets, batch * N, dy, 1.0 / double(batch), 1.0, s);
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
