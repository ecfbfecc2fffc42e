// ctnn/metrics/precision.hpp — Keras' Precision as precision_metric (ctnn::precision names the
// precision policies); its history key is "precision".
//
// Dense targets, N per sample (any output shape), every output one yes/no:
// true positives / (true positives + false positives) over every output seen
// since reset, a prediction counting as positive when y > threshold (default
// 0.5; use 0 for logits) and a target when it is not 0; 0 when nothing was
// predicted positive (Keras' divide_no_nan). Streams over batches.
#pragma once
#include <cstddef>
#include <string>

#include "../core/output_rule.hpp"
#include "detail.hpp"

namespace ctnn {

struct precision_metric {
  double threshold = 0.5;
  detail::confusion_counts counts;
  // Output: any rank, as many values per sample as the targets (core/output_rule.hpp).
  static constexpr accepts_output accepts{"precision", output_rule::any_shape, target_rule::dense,
                                          "sparse_categorical_accuracy"};
  std::string name() const { return accepts.name; }
  void reset() { counts.reset(); }
  double result() const { return detail::divide_no_nan(counts.tp, counts.tp + counts.fp); }
  template <std::size_t N, class T>
  void update(const T* y, const T* targets, std::size_t batch) {
    counts.update(y, targets, batch * N, threshold);
  }
};

}  // namespace ctnn
