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
#include "../core/targets.hpp"
#include "../backends/cpu/ops.hpp"
#include "detail.hpp"

namespace ctnn {

struct sparse_categorical_crossentropy {
  using target_kind = sparse_labels;
  // Output: rank 1, N >= 2 class scores (core/output_rule.hpp).
  static constexpr accepts_output accepts{"sparse_categorical_crossentropy", output_rule::class_scores,
                                          target_rule::sparse, "categorical_crossentropy"};
  bool from_logits = false;

  std::string name() const { return accepts.name; }

  // Sum over the batch of per-sample losses; dy (if not null) receives the
  // gradient of the batch mean.
  template <std::size_t N, class B = cpu<>, class T>
  double compute(const T* y, const std::int32_t* labels, T* dy, std::size_t batch) const {
    static_assert(diag::classification_needs_two_classes<diag::output_width<N>, (N >= 2)>::value);
    const double scale = 1.0 / double(batch);
    if constexpr (!runs_host_code<B>) {  // a device backend: its op checks the labels (no device op for probabilities)
      if (!from_logits)
        throw std::invalid_argument("sparse_categorical_crossentropy: from_logits = false has no device op (" +
                                    B::name() + ")");
      return ops<B>::sparse_crossentropy_logits(y, labels, batch, N, dy, scale);
    } else {
      for (std::size_t i = 0; i < batch; ++i) {  // every label first: nothing is written for a bad batch
        const std::int32_t l = labels[i];
        if (l < 0 || std::size_t(l) >= N)
          throw std::out_of_range("sparse_categorical_crossentropy: label " + std::to_string(l) + " of sample " +
                                  std::to_string(i) + " in the batch is outside [0, " + std::to_string(N) + ")");
      }
      if (from_logits) return ops<B>::sparse_crossentropy_logits(y, labels, batch, N, dy, scale);
      double total = 0;
      for (std::size_t i = 0; i < batch; ++i) {
        const auto l = std::size_t(labels[i]);
        auto t = [l](std::size_t j) { return j == l ? 1.0 : 0.0; };
        total += detail::crossentropy_probs_row(y + i * N, t, N, dy ? dy + i * N : nullptr, scale);
      }
      return total;
    }
  }
};

}  // namespace ctnn
