// ctnn/losses/sparse_categorical_crossentropy.hpp
//
// Targets: one class index per sample (sparse_labels). Output: N >= 2 class
// scores per sample. from_logits = true takes raw scores and fuses the
// softmax through log-sum-exp (numerically stable for any magnitude);
// from_logits = false takes probabilities and clips them to [1e-7, 1 - 1e-7]
// as Keras does. Reduction: mean over the batch. A label outside [0, N)
// throws std::out_of_range naming the sample.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/diagnostics.hpp"
#include "../core/output_rule.hpp"
#include "../core/plan.hpp"
#include "../core/targets.hpp"
#include "../backends/cpu/ops.hpp"
#include "../core/separate.hpp"

namespace ctnn {

namespace detail {
// check_targets' error, built once in the compiled part (core/separate.hpp), not per class count.
[[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_sparse_label_out_of_range(std::int32_t label,
                                                                                     std::size_t sample,
                                                                                     std::size_t classes)
#if CTNN_DEFINITIONS
{
  throw std::out_of_range("sparse_categorical_crossentropy: label " + std::to_string(label) + " of sample " +
                          std::to_string(sample) + " in the batch is outside [0, " + std::to_string(classes) + ")");
}
#else
;
#endif
}  // namespace detail

struct sparse_categorical_crossentropy {
  using target_kind = sparse_labels;
  // Output: rank 1, N >= 2 class scores (core/output_rule.hpp).
  static constexpr accepts_output accepts{"sparse_categorical_crossentropy", output_rule::class_scores,
                                          target_rule::sparse, "categorical_crossentropy"};
  bool from_logits = false;

  std::string name() const { return accepts.name; }

  // Throws std::out_of_range naming the first sample whose label (host memory) is outside [0, N).
  template <std::size_t N>
  void check_targets(const std::int32_t* labels, std::size_t batch) const {
    for (std::size_t i = 0; i < batch; ++i) {
      const std::int32_t l = labels[i];
      if (l < 0 || std::size_t(l) >= N) detail::throw_sparse_label_out_of_range(l, i, N);
    }
  }

  // The loss through ops<B> into the step's scalars s (B's memory, as y, labels and dy): the sum of
  // the per-sample losses added to s->loss_sum; dy (if not null) receives the gradient of the batch
  // mean times s->loss_scale. The labels are checked on the host before (check_targets).
  template <std::size_t N, class B = cpu<>, class T>
  void accumulate(const T* y, const std::int32_t* labels, T* dy, std::size_t batch, step_scalars* s) const {
    static_assert(diag::classification_needs_two_classes<diag::output_width<N>, (N >= 2)>::value);
    ops<B>::sparse_crossentropy_loss(y, labels, batch, N, dy, 1.0 / double(batch), from_logits, s);
  }

  // Sum over the batch of per-sample losses; dy (if not null) receives the
  // gradient of the batch mean. Host memory (a host backend's); nothing is written for a bad label.
  template <std::size_t N, class B = cpu<>, class T>
  double compute(const T* y, const std::int32_t* labels, T* dy, std::size_t batch) const {
    check_targets<N>(labels, batch);  // every label first: nothing is written for a bad batch
    step_scalars s;
    accumulate<N, B>(y, labels, dy, batch, &s);
    return s.loss_sum;
  }
};

}  // namespace ctnn
