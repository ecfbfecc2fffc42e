// pruning/strip_csc.hpp, layers/sparse_dense_csc.hpp, backends/cpu/sparse_csc.hpp:
// the column layout's kernels against their scalar reference (what every
// layout shares, stripping and gradients, is tested in test_strip.cpp).
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/pruning/strip_csc.hpp>
#include <ctnn/backends/cpu/sparse_rows.hpp>

#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/archs.hpp"
#include "pruning/sparse_common.hpp"

using namespace ctnn;

namespace {
// (csc takes layers that keep at most 1 weight in 9: tests/compile_fail/strip_csc_below_break_even.cpp)
using csc_net = sequential<input<64>, prune_low_magnitude<dense<40, relu>, constant_sparsity<0.9>>,
                           prune_low_magnitude<dense<24, ctnn::tanh>, constant_sparsity<0.95>>, dense<3>>;
}

static_assert(std::is_same_v<stripped_csc_t<csc_net>, sequential<input<64>, sparse_dense_csc<64, 40, 256, relu>,
                                                                 sparse_dense_csc<40, 24, 48, ctnn::tanh>, dense<3>>>);
static_assert(std::is_same_v<stripped_csc_t<csc_net>, stripped_t<csc_net, layout::csc>>);
static_assert(stripped_csc_t<csc_net>::parameter_count == 256 + 40 + 48 + 24 + 24 * 3 + 3);

TEST_CASE("csc kernels: forward equals the scalar reference on every architecture, every batch path") {
  auto run = [](auto arch, const char*) {
    using Arch = decltype(arch);
    auto one = [&]<std::size_t K, std::size_t N>(double density, std::size_t batch, bool relu) {
      rng g(K * 7 + N * 3 + batch);
      const auto [w, x, bias, keep] = sparse_test::random_problem(K, N, batch, density, g);
      std::vector<float> values(K * N + 1), scratch((K + N) * batch);
      std::vector<std::uint32_t> col(N + 1);
      std::vector<std::uint16_t> rows(K * N + 1);
      kernels::cpu::csc::pack(w.data(), keep.data(), K, N, values.data(), values.size(), col.data(), rows.data());
      std::vector<float> y(batch * N);
      kernels::cpu::csc::forward<K, N, Arch>(x.data(), values.data(), col.data(), rows.data(), bias.data(), y.data(),
                                             batch, relu, scratch.data());
      const auto ref = sparse_test::masked_dense(x, w, keep, bias, batch, K, N, relu);
      for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
      // the layer's dispatch (the rows kernels off AVX-512)
      std::vector<float> y2(batch * N);
      kernels::cpu::sparse_kernels<kernels::csc_index>::forward<K, N, Arch>(
          kernels::csc_index{col.data(), rows.data()}, x.data(), values.data(), bias.data(), y2.data(), batch, relu,
          scratch.data());
      for (std::size_t i = 0; i < y2.size(); ++i) CHECK(y2[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
    };
    for (double d : {0.0, 0.1, 0.5, 1.0})
      for (std::size_t batch : {1, 3, 16, 17, 64, 100}) {
        one.template operator()<1, 1>(d, batch, false);
        one.template operator()<3, 17>(d, batch, true);
        one.template operator()<64, 40>(d, batch, true);
        one.template operator()<255, 33>(d, batch, false);
      }
  };
  CHECK(test::for_each_arch("csc forward", run) >= 1);
}
