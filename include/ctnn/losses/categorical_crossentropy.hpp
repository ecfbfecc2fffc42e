// ctnn/losses/categorical_crossentropy.hpp
//
// Targets: a vector of N class weights per sample (one-hot or soft;
// dense_targets<shape<N>>). from_logits as in sparse_categorical_crossentropy;
// probabilities are normalised to sum 1 and clipped to [1e-7, 1 - 1e-7] as
// Keras does. Reduction: mean over the batch.
#pragma once
#include <cstddef>
#include <string>

#include "../core/diagnostics.hpp"
#include "../core/output_rule.hpp"
#include "../core/plan.hpp"
#include "../core/targets.hpp"
#include "../backends/cpu/ops.hpp"

namespace ctnn {

struct categorical_crossentropy {
  template <std::size_t N>
  using target_kind_for = dense_targets<shape<N>>;
  // Output: rank 1, one score per class, as many as the targets' width (core/output_rule.hpp).
  static constexpr accepts_output accepts{"categorical_crossentropy", output_rule::class_scores, target_rule::dense,
                                          "sparse_categorical_crossentropy"};
  bool from_logits = false;

  std::string name() const { return accepts.name; }

  // The loss through ops<B> into the step's scalars s (B's memory, as y, targets and dy): the sum of
  // the per-sample losses added to s->loss_sum; dy (if not null) receives the gradient of the batch
  // mean times s->loss_scale.
  template <std::size_t N, class B = cpu<>, class T>
  void accumulate(const T* y, const T* targets, T* dy, std::size_t batch, step_scalars* s) const {
    static_assert(diag::classification_needs_two_classes<diag::output_width<N>, (N >= 2)>::value);
    ops<B>::categorical_crossentropy_loss(y, targets, batch, N, dy, 1.0 / double(batch), from_logits, s);
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
