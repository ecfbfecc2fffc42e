// ctnn/metrics/accuracy.hpp — accuracy as Keras' metrics=["accuracy"] picks it.
//
// With sparse labels: sparse categorical accuracy (argmax == label); a label
// outside [0, N) throws std::out_of_range naming the sample.
// With dense targets of width N >= 2: categorical accuracy
// (argmax(y) == argmax(t)). With width 1: binary accuracy, (y > 0.5) == (t > 0.5).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "detail.hpp"

namespace ctnn {

struct accuracy {
  detail::running_mean acc;
  std::string name() const { return "accuracy"; }
  void reset() { acc.reset(); }
  double result() const { return acc.result(); }

  template <std::size_t N, class T>
  void update(const T* y, const std::int32_t* labels, std::size_t batch) {
    for (std::size_t i = 0; i < batch; ++i) detail::check_label("accuracy", labels[i], i, N);
    for (std::size_t i = 0; i < batch; ++i)
      acc.total += detail::argmax(y + i * N, N) == std::size_t(labels[i]) ? 1.0 : 0.0;
    acc.count += double(batch);
  }
  template <std::size_t N, class T>
  void update(const T* y, const T* targets, std::size_t batch) {
    for (std::size_t i = 0; i < batch; ++i) {
      if constexpr (N == 1) {
        acc.total += (y[i] > T(0.5)) == (targets[i] > T(0.5)) ? 1.0 : 0.0;
      } else {
        acc.total += detail::argmax(y + i * N, N) == detail::argmax(targets + i * N, N) ? 1.0 : 0.0;
      }
    }
    acc.count += double(batch);
  }
};

}  // namespace ctnn
