// What the pruning and stripping tests share: a toy dataset, random inputs, and the
// largest difference between two models' predictions.
#pragma once
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace strip_test {

template <std::size_t K>
ctnn::data::in_memory<ctnn::shape<K>, ctnn::sparse_labels> toy_data(std::size_t n = 96, std::uint64_t seed = 11) {
  std::vector<float> x(n * K);
  std::vector<std::int32_t> y(n);
  ctnn::rng g(seed);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t(i % 3);
  return {x, y};
}

inline std::vector<float> random_inputs(std::size_t n, std::uint64_t seed) {
  std::vector<float> xs(n);
  ctnn::rng g(seed);
  for (auto& v : xs) v = float(g.uniform(-1, 1));
  return xs;
}

// max |a_i - b_i| / max(1, |a_i|) over the predictions of two models for n samples xs, at `batch`.
template <class A, class B>
double worst_difference(A& a, B& b, const std::vector<float>& xs, std::size_t n, std::size_t batch = 7) {
  const auto pa = a.predict(xs.data(), n, batch), pb = b.predict(xs.data(), n, batch);
  double worst = 0;
  for (std::size_t i = 0; i < pa.size(); ++i)
    worst = std::max(worst, double(std::abs(pa[i] - pb[i])) / std::max(1.0, double(std::abs(pa[i]))));
  return worst;
}

inline const ctnn::sparse_categorical_crossentropy xent{.from_logits = true};

}  // namespace strip_test
