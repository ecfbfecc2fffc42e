// ctnn/metrics/accuracy.hpp — accuracy as Keras' metrics=["accuracy"] picks it.
//
// With sparse labels: sparse categorical accuracy (argmax == label; a label
// outside [0, N) throws std::out_of_range). With dense targets of width
// N >= 2: categorical accuracy (argmax(y) == argmax(t)). With width 1: binary
// accuracy, (y > 0.5) == (t > 0.5). Shares its counting with
// sparse_categorical_accuracy (detail::accuracy_counter).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/output_rule.hpp"
#include "detail.hpp"

namespace ctnn {

struct accuracy : detail::accuracy_counter {
  // Output: rank 1 class scores (width 1 with dense targets: a binary score; core/output_rule.hpp).
  static constexpr accepts_output accepts{"accuracy", output_rule::class_scores, target_rule::either};
  std::string name() const { return accepts.name; }
  template <std::size_t N, class T>
  void update(const T* y, const std::int32_t* labels, std::size_t batch) {
    update_sparse<N>(y, labels, batch, "accuracy");
  }
  template <std::size_t N, class T>
  void update(const T* y, const T* targets, std::size_t batch) {
    update_dense<N>(y, targets, batch);
  }
};

}  // namespace ctnn
