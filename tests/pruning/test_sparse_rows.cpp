// layers/sparse_dense_rows.hpp, backends/cpu/sparse_rows.hpp: the per-unit
// layout (layout::rows) against a dense product of the masked kernel, on
// every architecture and batch path, its pack contract and its sizes.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/layers/sparse_dense_rows.hpp>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gradcheck/gradcheck.hpp"
#include "kernels/archs.hpp"
#include "pruning/sparse_common.hpp"

using namespace ctnn;
using namespace sparse_test;

namespace {
using rows_net = sequential<input<784>, sparse_dense_rows<784, 256, 20070, relu>, sparse_dense_rows<256, 128, 3277, relu>,
                            dense<10>>;
}  // namespace

// the layout tag, sizes and the plan at compile time
static_assert(std::is_same_v<layout::rows::layer<784, 256, 20070, relu>, sparse_dense_rows<784, 256, 20070, relu>>);
static_assert(rows_net::parameter_count == 20070 + 256 + 3277 + 128 + 128 * 10 + 10);
static_assert(rows_net::memory_plan(1).parameters ==
              align_bytes(4 * (20070 + 256)) + align_bytes(4 * (3277 + 128)) + align_bytes(4 * (128 * 10 + 10)));
static_assert(rows_net::memory_plan(1).metadata == align_bytes(4 * 257 + 2 * 20070) + align_bytes(4 * 129 + 2 * 3277));
static_assert(sparse_dense_rows<784, 256, 20070>::bind<shape<784>, float, cpu<>>::cache_per_sample == 784 + 256);
static_assert(kernels::cpu::rows::meta_bytes(256, 20070) == 4 * 257 + 2 * 20070);

TEST_CASE("rows kernels: forward equals the masked dense product on every architecture and batch path") {
  auto run = [](auto arch, const char* name) {
    using Arch = decltype(arch);
    auto one = [&]<std::size_t K, std::size_t N>(double density, std::size_t batch, bool relu) {
      INFO(name << " K=" << K << " N=" << N << " density=" << density << " batch=" << batch << " relu=" << relu);
      rng g(K * 7 + N * 3 + batch);
      const auto [w, x, bias, keep] = random_problem(K, N, batch, density, g);
      std::vector<float> values(K * N + 1), scratch((K + N) * batch);
      std::vector<std::uint32_t> starts(N + 1);
      std::vector<std::uint16_t> idx(K * N + 1);
      kernels::cpu::rows::pack(w.data(), keep.data(), K, N, values.data(), values.size(), starts.data(), idx.data());
      const auto ref = masked_dense(x, w, keep, bias, batch, K, N, relu);
      std::vector<float> y(batch * N), yr(batch * N);
      kernels::cpu::rows::forward<K, N, Arch>(x.data(), values.data(), starts.data(), idx.data(), bias.data(), y.data(),
                                              batch, relu, scratch.data());
      kernels::cpu::rows::forward_reference(x.data(), values.data(), starts.data(), idx.data(), bias.data(), yr.data(),
                                            batch, K, N, relu);
      for (std::size_t i = 0; i < y.size(); ++i) {
        CHECK(y[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
        CHECK(yr[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
      }
    };
    for (double d : {0.0, 0.1, 0.5, 1.0})
      for (std::size_t batch : {1, 2, 3, 4, 5, 8, 16, 17, 31, 64, 100}) {
        one.template operator()<1, 1>(d, batch, false);
        one.template operator()<3, 17>(d, batch, true);
        one.template operator()<64, 40>(d, batch, true);
        one.template operator()<255, 33>(d, batch, false);
      }
    one.template operator()<784, 20>(0.1, 1, true);
    one.template operator()<784, 20>(0.1, 64, true);
  };
  CHECK(test::for_each_arch("rows forward", run) >= 1);
}

TEST_CASE("rows pack: more weights than the capacity returns the count and writes nothing") {
  constexpr std::size_t K = 5, N = 7, cap = 10;
  std::vector<float> w(K * N, 1.0f);
  std::vector<std::uint8_t> keep(K * N, 0);
  for (std::size_t i = 0; i < 12; ++i) keep[i * 3 % (K * N)] = 1;
  std::vector<float> values(cap + 4, -7.0f);
  std::vector<std::uint32_t> starts(N + 1 + 2, 99u);
  std::vector<std::uint16_t> idx(cap + 4, 77);
  CHECK(kernels::cpu::rows::pack(w.data(), keep.data(), K, N, values.data(), cap, starts.data(), idx.data()) == 12);
  CHECK(std::all_of(values.begin(), values.end(), [](float v) { return v == -7.0f; }));
  CHECK(std::all_of(starts.begin(), starts.end(), [](std::uint32_t v) { return v == 99u; }));
  CHECK(std::all_of(idx.begin(), idx.end(), [](std::uint16_t v) { return v == 77; }));

  // fewer than the capacity: the rest is zero, the guard past the capacity untouched
  std::fill(keep.begin(), keep.end(), 0);
  keep[0] = keep[8] = keep[34] = 1;
  CHECK(kernels::cpu::rows::pack(w.data(), keep.data(), K, N, values.data(), cap, starts.data(), idx.data()) == 3);
  CHECK(starts[N] == 3);
  CHECK(std::all_of(values.begin() + 3, values.begin() + cap, [](float v) { return v == 0.0f; }));
  CHECK(std::all_of(values.begin() + cap, values.end(), [](float v) { return v == -7.0f; }));
  CHECK(starts[N + 1] == 99u);
  CHECK(idx[cap] == 77);
}

TEST_CASE("sparse_dense_rows: pack and forward in a model equal the dense forward of the masked kernel") {
  using net = sequential<input<70>, sparse_dense_rows<70, 45, 700, relu>, sparse_dense_rows<45, 19, 500>>;
  auto m = make_model<net>(5);
  using L0 = std::tuple_element_t<0, decltype(m)::layers>;
  using L1 = std::tuple_element_t<1, decltype(m)::layers>;
  static_assert(std::is_same_v<decltype(L0::pack<float>(nullptr, nullptr, nullptr, nullptr)), std::size_t>);
  rng g(9);
  std::vector<float> w0(70 * 45), w1(45 * 19), b0(45), b1(19);
  std::vector<std::uint8_t> k0(70 * 45), k1(45 * 19);
  for (std::size_t i = 0; i < w0.size(); ++i) w0[i] = float(g.uniform(-1, 1)), k0[i] = g.uniform() < 0.2;
  for (std::size_t i = 0; i < w1.size(); ++i) w1[i] = float(g.uniform(-1, 1)), k1[i] = g.uniform() < 0.5;
  fill_uniform(b0, g);
  fill_uniform(b1, g);
  const std::size_t n0 = load_layer<L0>(m, 0, w0, k0, b0), n1 = load_layer<L1>(m, 1, w1, k1, b1);
  CHECK(n0 <= 700);
  CHECK(n1 <= 500);
  CHECK(n0 == std::size_t(std::count(k0.begin(), k0.end(), 1)));
  std::vector<float> xs(70 * 70);
  fill_uniform(xs, g);
  const auto h = masked_dense(xs, w0, k0, b0, 70, 70, 45, true);
  const auto ref = masked_dense(h, w1, k1, b1, 70, 45, 19, false);
  check_predictions(m, xs, 70, ref);
  // a mask keeping more than NNZ: the count comes back, the model's values are as they were
  std::vector<std::uint8_t> all(70 * 45, 1);
  std::vector<float> before(floats(m, 0, "values"), floats(m, 0, "values") + 700);
  CHECK(L0::pack(w0.data(), all.data(), floats(m, 0, "values"), variable(m, 0, "index")) == 70 * 45);
  CHECK(std::equal(before.begin(), before.end(), floats(m, 0, "values")));
}

TEST_CASE("sparse_dense_rows: the MLP of the benchmark runs at batch 1 and 64") {
  check_batch_1_as_64<rows_net>();
}

TEST_CASE("sparse_dense_rows: finite-difference gradients") {
  CHECK(gradcheck::check_layer<sparse_dense_rows<8, 20, 60, ctnn::tanh>, shape<8>>() < 1e-6);
  CHECK(gradcheck::check_layer<sparse_dense_rows<5, 3, 15>, shape<5>>() < 1e-6);
}
