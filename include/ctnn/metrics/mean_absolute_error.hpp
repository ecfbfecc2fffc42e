// ctnn/metrics/mean_absolute_error.hpp
//
// Mean over all samples and outputs of |y - t| (dense targets only).
#pragma once
#include <cmath>
#include <cstddef>
#include <string>

#include "../core/output_rule.hpp"
#include "detail.hpp"

namespace ctnn {

struct mean_absolute_error {
  detail::running_mean acc;
  // a mean over samples (Keras' MeanMetricWrapper): per step under a step mask, the unmasked steps only (train/fit.hpp)
  static constexpr bool steps_weighted = true;
  // Output: any rank, as many values per sample as the targets (core/output_rule.hpp).
  static constexpr accepts_output accepts{"mean_absolute_error", output_rule::any_shape, target_rule::dense,
                                          "sparse_categorical_accuracy"};
  std::string name() const { return accepts.name; }
  void reset() { acc.reset(); }
  double result() const { return acc.result(); }
  template <std::size_t N, class T>
  void update(const T* y, const T* targets, std::size_t batch) {
    for (std::size_t i = 0; i < batch * N; ++i) acc.total += std::abs(double(y[i]) - double(targets[i]));
    acc.count += double(batch * N);
  }
};

}  // namespace ctnn
