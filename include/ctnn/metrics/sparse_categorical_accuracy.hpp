// ctnn/metrics/sparse_categorical_accuracy.hpp
//
// Fraction of samples whose highest-scoring output (the first, on ties) is
// the labelled class; a label outside [0, N) throws std::out_of_range naming
// the sample, as sparse_categorical_crossentropy does. The same counting as
// accuracy with sparse labels (detail::accuracy_counter).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/output_rule.hpp"
#include "detail.hpp"

namespace ctnn {

struct sparse_categorical_accuracy : detail::accuracy_counter {
  // Output: rank 1, N >= 2 class scores, with sparse labels (core/output_rule.hpp).
  static constexpr accepts_output accepts{"sparse_categorical_accuracy", output_rule::class_scores,
                                          target_rule::sparse, "accuracy"};
  std::string name() const { return accepts.name; }
  template <std::size_t N, class T>
  void update(const T* y, const std::int32_t* labels, std::size_t batch) {
    update_sparse<N>(y, labels, batch, "sparse_categorical_accuracy");
  }
};

}  // namespace ctnn
