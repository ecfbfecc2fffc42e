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
#include "../core/targets.hpp"
#include "../backends/cpu/ops.hpp"
#include "detail.hpp"

namespace ctnn {

struct categorical_crossentropy {
  template <std::size_t N>
  using target_kind_for = dense_targets<shape<N>>;
  // Output: rank 1, one score per class, as many as the targets' width (core/output_rule.hpp).
  static constexpr accepts_output accepts{"categorical_crossentropy", output_rule::class_scores, target_rule::dense,
                                          "sparse_categorical_crossentropy"};
  bool from_logits = false;

  std::string name() const { return accepts.name; }

  template <std::size_t N, class B = cpu<>, class T>
  double compute(const T* y, const T* targets, T* dy, std::size_t batch) const {
    static_assert(diag::classification_needs_two_classes<diag::output_width<N>, (N >= 2)>::value);
    const double scale = 1.0 / double(batch);
    if (from_logits) return ops<B>::categorical_crossentropy_logits(y, targets, batch, N, dy, scale);
    double total = 0;
    for (std::size_t i = 0; i < batch; ++i) {
      const T* tr = targets + i * N;
      auto t = [tr](std::size_t j) { return double(tr[j]); };
      total += detail::crossentropy_probs_row(y + i * N, t, N, dy ? dy + i * N : nullptr, scale);
    }
    return total;
  }
};

}  // namespace ctnn
