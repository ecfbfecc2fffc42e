// backends/cpu/sparse_kernels.hpp: ops<cpu<>>::sparse_dense_forward / _backward
// reach each layout's sparse_kernels<Index> specialization (csc_index, rows_index)
// and compute the dense product of the same weights with zeros: y = relu?(x W + b),
// dW (at the kept positions), db and dx, against a scalar loop written here.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/backends/cpu/sparse_csc.hpp>
#include <ctnn/backends/cpu/sparse_kernels.hpp>
#include <ctnn/backends/cpu/sparse_rows.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {
constexpr std::size_t K = 5, N = 3, batch = 4;
// The kept weights of a K x N kernel, per output unit j: (input k, value).
struct kept {
  std::size_t k, j;
  float w;
};
const std::vector<kept> weights{{0, 0, 0.5f}, {3, 0, -1.25f}, {1, 1, 2.0f}, {2, 1, 0.75f}, {4, 1, -0.5f}, {4, 2, 1.5f}};

template <class Index>
void check(const Index& ix, const std::vector<float>& values) {
  static_assert(std::is_class_v<kernels::cpu::sparse_kernels<Index>>, "a layout's kernels are specialized");
  std::vector<float> x(batch * K), b{0.1f, -0.2f, 0.3f}, dz(batch * N);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) * 0.25f;
  for (std::size_t i = 0; i < dz.size(); ++i) dz[i] = float(int(i % 5) - 2) * 0.5f;
  for (bool relu : {false, true}) {
    std::vector<float> y(batch * N), scratch(batch * kernels::cpu::csc::scratch_per_sample(K, N));
    ops<cpu<>>::sparse_dense_forward<K, N>(ix, x.data(), values.data(), b.data(), y.data(), batch, relu,
                                           scratch.data());
    for (std::size_t r = 0; r < batch; ++r)
      for (std::size_t j = 0; j < N; ++j) {
        float want = b[j];
        for (const kept& e : weights)
          if (e.j == j) want += x[r * K + e.k] * e.w;
        if (relu && want < 0) want = 0;
        CHECK(y[r * N + j] == doctest::Approx(want).epsilon(1e-6));
      }
  }
  std::vector<float> dvalues(values.size(), 9.0f), db(N, 9.0f), dx(batch * K, 9.0f);
  ops<cpu<>>::sparse_dense_backward<K, N>(ix, x.data(), dz.data(), values.data(), dvalues.data(), db.data(),
                                          dx.data(), batch);
  for (std::size_t j = 0; j < N; ++j) {
    float want = 0;
    for (std::size_t r = 0; r < batch; ++r) want += dz[r * N + j];
    CHECK(db[j] == doctest::Approx(want).epsilon(1e-6));
  }
  for (std::size_t r = 0; r < batch; ++r)
    for (std::size_t k = 0; k < K; ++k) {
      float want = 0;
      for (const kept& e : weights)
        if (e.k == k) want += dz[r * N + e.j] * e.w;
      CHECK(dx[r * K + k] == doctest::Approx(want).epsilon(1e-6));
    }
  // dvalues: the same order as values (each layout's own)
  for (std::size_t v = 0; v < values.size(); ++v) {
    const kept* e = nullptr;
    for (const kept& c : weights)
      if (c.w == values[v]) e = &c;
    REQUIRE(e != nullptr);
    float want = 0;
    for (std::size_t r = 0; r < batch; ++r) want += x[r * K + e->k] * dz[r * N + e->j];
    CHECK(dvalues[v] == doctest::Approx(want).epsilon(1e-6));
  }
}
}  // namespace

TEST_CASE("sparse_kernels: csc and rows layouts through ops<cpu<>> equal the dense product of their weights") {
  // Both layouts list each unit's values by ascending input: the order of `weights`.
  std::vector<float> values;
  std::vector<std::uint32_t> starts{0};
  std::vector<std::uint16_t> inputs;
  for (std::size_t j = 0; j < N; ++j) {
    for (const kept& e : weights)
      if (e.j == j) {
        values.push_back(e.w);
        inputs.push_back(std::uint16_t(e.k));
      }
    starts.push_back(std::uint32_t(values.size()));
  }
  check(kernels::csc_index{starts.data(), inputs.data()}, values);
  check(kernels::rows_index{starts.data(), inputs.data()}, values);
}
