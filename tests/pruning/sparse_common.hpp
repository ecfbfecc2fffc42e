// What the sparse-layout tests (bitmap, csc, rows, nm) share: a random masked
// problem, the dense product of the masked kernel in double (what every
// sparse path must give), a model's variable by layer and name, a sparse
// layer of a model loaded from a dense kernel and its mask, and the checks of
// a model's predictions at several batch sizes.
#pragma once
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sparse_test {

// Every element drawn from U(-1, 1).
inline void fill_uniform(std::vector<float>& v, ctnn::rng& g) {
  for (auto& e : v) e = float(g.uniform(-1, 1));
}

// A [K x N] kernel w, a mask keep that keeps each weight with probability `density` (drawn in
// turn with it), a [batch x K] input x and a bias of N.
struct masked_problem {
  std::vector<float> w, x, bias;
  std::vector<std::uint8_t> keep;
};
inline masked_problem random_problem(std::size_t K, std::size_t N, std::size_t batch, double density, ctnn::rng& g) {
  masked_problem p{std::vector<float>(K * N), std::vector<float>(batch * K), std::vector<float>(N),
                   std::vector<std::uint8_t>(K * N)};
  for (std::size_t i = 0; i < K * N; ++i) {
    p.keep[i] = g.uniform() < density;
    p.w[i] = float(g.uniform(-1, 1));
  }
  fill_uniform(p.x, g);
  fill_uniform(p.bias, g);
  return p;
}

// y = x (W masked) + b in double, relu'd when `relu`.
inline std::vector<float> masked_dense(const std::vector<float>& x, const std::vector<float>& w,
                                       const std::vector<std::uint8_t>& keep, const std::vector<float>& bias,
                                       std::size_t batch, std::size_t K, std::size_t N, bool relu) {
  std::vector<float> y(batch * N);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t j = 0; j < N; ++j) {
      double s = bias[j];
      for (std::size_t k = 0; k < K; ++k) s += keep[k * N + j] ? double(x[b * K + k]) * w[k * N + j] : 0.0;
      y[b * N + j] = float(relu ? std::max(s, 0.0) : s);
    }
  return y;
}
inline std::vector<float> masked_dense(const masked_problem& p, std::size_t batch, std::size_t K, std::size_t N,
                                       bool relu) {
  return masked_dense(p.x, p.w, p.keep, p.bias, batch, K, N, relu);
}

// The bytes of variable `name` of layer `layer` (nullptr when there is none).
template <class M>
std::byte* variable(M& m, std::size_t layer, std::string_view name) {
  std::byte* p = nullptr;
  m.for_each_variable([&](const ctnn::variable_ref& r) {
    if (r.layer == layer && r.name == name) p = r.data;
  });
  return p;
}
template <class M>
float* floats(M& m, std::size_t layer, std::string_view name) {
  return reinterpret_cast<float*>(variable(m, layer, name));
}

// Packs kernel w under mask keep into the sparse layer L (layer `layer` of m) and copies its bias:
// what L::pack returns (the weights kept; more than L's capacity: nothing written).
template <class L, class M>
std::size_t load_layer(M& m, std::size_t layer, const std::vector<float>& w, const std::vector<std::uint8_t>& keep,
                       const std::vector<float>& bias) {
  const std::size_t n = L::pack(w.data(), keep.data(), floats(m, layer, "values"), variable(m, layer, "index"));
  std::copy(bias.begin(), bias.end(), floats(m, layer, "bias"));
  return n;
}

// m's predictions for the n samples xs equal ref (relative 1e-4) at batches 1, 3, 16, 64 and n:
// every batch path of the sparse kernels (gathers below a block, transposed blocks above).
template <class M>
void check_predictions(M& m, const std::vector<float>& xs, std::size_t n, const std::vector<float>& ref) {
  for (std::size_t batch : {std::size_t(1), std::size_t(3), std::size_t(16), std::size_t(64), n}) {
    CAPTURE(batch);
    const auto y = m.predict(xs.data(), n, batch);
    REQUIRE(y.size() == ref.size());
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(ref[i]).epsilon(1e-4).scale(1.0));
  }
}

// A fresh model of Net (784 inputs: the benchmark's MLP) predicts the same at batch 1 as at 64.
template <class Net>
void check_batch_1_as_64() {
  auto m = ctnn::make_model<Net>(1);
  std::vector<float> xs(64 * 784, 0.5f);
  const auto a = m.predict(xs.data(), 64, 1), b = m.predict(xs.data(), 64, 64);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == doctest::Approx(a[i]).epsilon(1e-5).scale(1.0));
}

}  // namespace sparse_test
