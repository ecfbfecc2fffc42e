// ctnn/metrics/detail.hpp — shared pieces of the metrics.
#pragma once
#include <cstddef>

namespace ctnn::detail {

// Index of the first maximum of row[0..n).
template <class T>
std::size_t argmax(const T* row, std::size_t n) {
  std::size_t best = 0;
  for (std::size_t j = 1; j < n; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

// A running mean: total / count.
struct running_mean {
  double total = 0;
  double count = 0;
  void reset() { total = count = 0; }
  double result() const { return count > 0 ? total / count : 0.0; }
};

}  // namespace ctnn::detail
