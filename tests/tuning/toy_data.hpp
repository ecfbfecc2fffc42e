// A toy two-class problem for the tuner state and objective direction tests: n samples of 4 features
// uniform in [-1, 1) from rng(seed), class 1 when x0 > x1.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <ctnn/ctnn.hpp>

namespace toy_data {

inline ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels> make_data(std::size_t n, std::uint64_t seed) {
  ctnn::rng g(seed);
  std::vector<float> x(n * 4);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) x[i * 4 + k] = float(g.uniform(-1, 1));
    y[i] = x[i * 4] > x[i * 4 + 1] ? 1 : 0;
  }
  return {x, y};
}

}  // namespace toy_data
