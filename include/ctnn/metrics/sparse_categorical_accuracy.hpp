// ctnn/metrics/sparse_categorical_accuracy.hpp
//
// Fraction of samples whose highest-scoring output (the first, on ties) is
// the labelled class. Streams over batches: reset(), update(...), result().
// A label outside [0, N) throws std::out_of_range naming the sample, as the
// sparse cross-entropy loss does (the batch is then not counted).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "detail.hpp"

namespace ctnn {

struct sparse_categorical_accuracy {
  detail::running_mean acc;
  std::string name() const { return "sparse_categorical_accuracy"; }
  void reset() { acc.reset(); }
  double result() const { return acc.result(); }
  template <std::size_t N, class T>
  void update(const T* y, const std::int32_t* labels, std::size_t batch) {
    for (std::size_t i = 0; i < batch; ++i) detail::check_label("sparse_categorical_accuracy", labels[i], i, N);
    for (std::size_t i = 0; i < batch; ++i)
      acc.total += detail::argmax(y + i * N, N) == std::size_t(labels[i]) ? 1.0 : 0.0;
    acc.count += double(batch);
  }
};

}  // namespace ctnn
