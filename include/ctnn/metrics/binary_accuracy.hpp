// ctnn/metrics/binary_accuracy.hpp — Keras' binary_accuracy.
//
// Dense targets of 0 or 1, N per sample (any output shape): the fraction of
// all outputs whose prediction (y > threshold ? 1 : 0) equals the target
// (a target other than 0 or 1 never matches, as in Keras). threshold defaults
// to 0.5 (probabilities); use 0 for logits. Streams over batches until reset.
#pragma once
#include <cstddef>
#include <string>

#include "../core/output_rule.hpp"
#include "detail.hpp"

namespace ctnn {

struct binary_accuracy {
  double threshold = 0.5;
  detail::running_mean acc;
  // a mean over samples (Keras' MeanMetricWrapper): per step under a step mask, the unmasked steps only (train/fit.hpp)
  static constexpr bool steps_weighted = true;
  // Output: any rank, as many values per sample as the targets (core/output_rule.hpp).
  static constexpr accepts_output accepts{"binary_accuracy", output_rule::any_shape, target_rule::dense,
                                          "sparse_categorical_accuracy"};
  std::string name() const { return accepts.name; }
  void reset() { acc.reset(); }
  double result() const { return acc.result(); }
  template <std::size_t N, class T>
  void update(const T* y, const T* targets, std::size_t batch) {
    for (std::size_t i = 0; i < batch * N; ++i)
      acc.total += double(targets[i]) == (double(y[i]) > threshold ? 1.0 : 0.0) ? 1.0 : 0.0;
    acc.count += double(batch * N);
  }
};

}  // namespace ctnn
