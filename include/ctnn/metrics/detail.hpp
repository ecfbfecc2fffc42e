// ctnn/metrics/detail.hpp — shared pieces of the metrics.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace ctnn::detail {

// Index of the first maximum of row[0..n).
template <class T>
std::size_t argmax(const T* row, std::size_t n) {
  std::size_t best = 0;
  for (std::size_t j = 1; j < n; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

// Throws std::out_of_range, as the sparse losses do, when a label is not a
// class of an n-class output.
inline void check_label(const char* metric, std::int32_t label, std::size_t sample, std::size_t n) {
  if (label < 0 || std::size_t(label) >= n)
    throw std::out_of_range(std::string(metric) + ": label " + std::to_string(label) + " of sample " +
                            std::to_string(sample) + " is not a class of the " + std::to_string(n) + " outputs");
}

// A running mean: total / count.
struct running_mean {
  double total = 0;
  double count = 0;
  void reset() { total = count = 0; }
  double result() const { return count > 0 ? total / count : 0.0; }
};

}  // namespace ctnn::detail
