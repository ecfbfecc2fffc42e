// ctnn/metrics/top_k_categorical_accuracy.hpp — Keras' top_k_categorical_accuracy.
//
// top_k_categorical_accuracy<K> (K >= 1, Keras' default 5): the fraction of
// samples whose target class is among the K highest of the N scores. The
// target class is the label (sparse labels: Keras' sparse_top_k_...; a label
// outside [0, N) throws std::out_of_range naming the sample) or the first
// argmax of the dense targets. Ties as Keras' in_top_k: the class is in the
// top K when fewer than K scores are strictly higher (so K >= N: always).
// Output: rank 1 class scores. Streams over batches until reset.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/output_rule.hpp"
#include "detail.hpp"

namespace ctnn {

template <std::size_t K = 5>
struct top_k_categorical_accuracy {
  static_assert(K >= 1, "top_k_categorical_accuracy: K must be at least 1");
  detail::running_mean acc;
  // a mean over samples (Keras' MeanMetricWrapper): per step under a step mask, the unmasked steps only (train/fit.hpp)
  static constexpr bool steps_weighted = true;
  // Output: rank 1, one score per class (core/output_rule.hpp).
  static constexpr accepts_output accepts{"top_k_categorical_accuracy", output_rule::class_scores,
                                          target_rule::either};
  std::string name() const { return accepts.name; }
  void reset() { acc.reset(); }
  double result() const { return acc.result(); }
  template <std::size_t N, class T>
  void update(const T* y, const std::int32_t* labels, std::size_t batch) {
    for (std::size_t i = 0; i < batch; ++i) detail::check_label("top_k_categorical_accuracy", labels[i], i, N);
    for (std::size_t i = 0; i < batch; ++i) acc.total += in_top_k(y + i * N, std::size_t(labels[i]), N) ? 1.0 : 0.0;
    acc.count += double(batch);
  }
  template <std::size_t N, class T>
  void update(const T* y, const T* targets, std::size_t batch) {
    for (std::size_t i = 0; i < batch; ++i)
      acc.total += in_top_k(y + i * N, detail::argmax(targets + i * N, N), N) ? 1.0 : 0.0;
    acc.count += double(batch);
  }

 private:
  template <class T>
  static bool in_top_k(const T* row, std::size_t target, std::size_t n) {
    std::size_t higher = 0;
    for (std::size_t j = 0; j < n; ++j) higher += row[j] > row[target] ? 1 : 0;
    return higher < K;
  }
};

}  // namespace ctnn
