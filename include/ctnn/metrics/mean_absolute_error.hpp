// ctnn/metrics/mean_absolute_error.hpp
//
// Mean over all samples and outputs of |y - t| (dense targets only).
#pragma once
#include <cmath>
#include <cstddef>
#include <string>

#include "detail.hpp"

namespace ctnn {

struct mean_absolute_error {
  detail::running_mean acc;
  std::string name() const { return "mean_absolute_error"; }
  void reset() { acc.reset(); }
  double result() const { return acc.result(); }
  template <std::size_t N, class T>
  void update(const T* y, const T* targets, std::size_t batch) {
    for (std::size_t i = 0; i < batch * N; ++i) acc.total += std::abs(double(y[i]) - double(targets[i]));
    acc.count += double(batch * N);
  }
};

}  // namespace ctnn
