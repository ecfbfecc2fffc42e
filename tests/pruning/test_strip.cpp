// pruning/strip.hpp, pruning/layout.hpp, layers/sparse_dense.hpp,
// backends/cpu/sparse.hpp: the stripped network type and its compile-time
// sizes for every layout, the bitmap kernels against their scalar reference
// on every architecture, predictions equal to the masked model's for every
// layout, smaller weight files, and the sparse layers' gradients.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/layers/sparse_dense_nm.hpp>
#include <ctnn/layers/sparse_dense_rows.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include "gradcheck/gradcheck.hpp"
#include "kernels/archs.hpp"
#include "pruning/sparse_common.hpp"
#include "pruning/strip_common.hpp"

TYPE_TO_STRING(ctnn::layout::bitmap);
TYPE_TO_STRING(ctnn::layout::csc);
TYPE_TO_STRING(ctnn::layout::rows);

using namespace ctnn;
using strip_test::toy_data;
using strip_test::worst_difference;
using strip_test::xent;

namespace {
using net50 = sequential<input<64>, prune_low_magnitude<dense<40, relu>, constant_sparsity<0.5>>, dense<3>>;
// csc and rows take layers that keep at most 1 weight in 9 (tests/compile_fail/strip_*_below_break_even.cpp)
using net90 = sequential<input<64>, prune_low_magnitude<dense<40, relu>, constant_sparsity<0.9>>, dense<3>>;
using plain = sequential<input<64>, dense<40, relu>, dense<3>>;
using net_nm = sequential<input<64>, prune_low_magnitude<dense<40, relu>, constant_sparsity<0.0>, n_of_m<2, 4>>, dense<3>>;
using net_poly = sequential<input<64>, prune_low_magnitude<dense<40, relu>, polynomial_sparsity<0.0, 0.9, 0, 20, 3, 4>>,
                            prune_low_magnitude<dense<16, ctnn::tanh>, constant_sparsity<0.95>>, dense<3>>;
}  // namespace

// The layouts meet the contract; a tag without it does not.
static_assert(SparseLayout<layout::bitmap> && SparseLayout<layout::csc>);
static_assert(!SparseLayout<unstructured> && !SparseLayout<int>);

// The stripped type and its sizes are compile-time facts, for every layout.
static_assert(std::is_same_v<stripped_t<net50, layout::bitmap>, sequential<input<64>, sparse_dense<64, 40, 1280, relu>, dense<3>>>);
// the default layout (layout::fastest): csc where at most 1 weight in 9 is kept (where csc may be
// chosen), else bitmap, on every architecture
static_assert(layout::per_weight_kept_one_in == 9);
static_assert(std::is_same_v<layout::default_for<xsimd::avx512bw>, layout::csc>);
static_assert(std::is_same_v<layout::default_for<xsimd::avx512f, 1, 10>, layout::csc>);
static_assert(std::is_same_v<layout::default_for<xsimd::avx512bw, 12, 100>, layout::bitmap>);
static_assert(std::is_same_v<layout::default_for<xsimd::avx512bw, 50, 100>, layout::bitmap>);
static_assert(std::is_same_v<layout::default_for<xsimd::fma3<xsimd::avx2>>, layout::csc>);
static_assert(std::is_same_v<layout::default_for<xsimd::fma3<xsimd::avx2>, 50, 100>, layout::bitmap>);
static_assert(std::is_same_v<layout::default_for<xsimd::avx2, 20, 100>, layout::bitmap>);
static_assert(std::is_same_v<layout::default_for<xsimd::fma3<xsimd::avx2>, 12, 100>, layout::bitmap>);
static_assert(std::is_same_v<layout::default_for<xsimd::fma3<xsimd::avx2>, 11, 99>, layout::csc>);
static_assert(std::is_same_v<layout::default_for<xsimd::fma3<xsimd::avx2>, 10, 100>, layout::csc>);
static_assert(std::is_same_v<layout::default_for<xsimd::sse2, 50, 100>, layout::bitmap>);
static_assert(std::is_same_v<layout::default_for<xsimd::sse2, 10, 100>, layout::csc>);
static_assert(std::is_same_v<stripped_t<net50>, stripped_t<net50, layout::bitmap>>);
static_assert(std::is_same_v<stripped_t<net_poly>,
                             sequential<input<64>,  // 10 % and 5 % kept: csc
                                        sparse_dense_csc<64, 40, 256, relu>, sparse_dense_csc<40, 16, 32, ctnn::tanh>,
                                        dense<3>>>);
static_assert(SparseLayout<layout::fastest>);
static_assert(std::is_same_v<stripped_t<net90, layout::csc>, sequential<input<64>, sparse_dense_csc<64, 40, 256, relu>, dense<3>>>);
static_assert(std::is_same_v<stripped_t<net_nm, layout::bitmap>, sequential<input<64>, sparse_dense<64, 40, 1280, relu>, dense<3>>>);
static_assert(std::is_same_v<stripped_t<net_poly, layout::bitmap>, sequential<input<64>, sparse_dense<64, 40, 256, relu>,
                                                              sparse_dense<40, 16, 32, ctnn::tanh>, dense<3>>>);
static_assert(std::is_same_v<stripped_t<net_poly, layout::csc>, sequential<input<64>, sparse_dense_csc<64, 40, 256, relu>,
                                                                           sparse_dense_csc<40, 16, 32, ctnn::tanh>, dense<3>>>);
static_assert(stripped_t<net50, layout::bitmap>::parameter_count == 1280 + 40 + 40 * 3 + 3);
static_assert(stripped_t<net90, layout::csc>::parameter_count == 256 + 40 + 40 * 3 + 3);
static_assert(net50::parameter_count == 64 * 40 + 40 + 40 * 3 + 3);
// parameters 4 * (1280 + 40) + metadata 4 * 4 + 2 * 3 * 64 bytes against 4 * (2560 + 40): 46% fewer bytes
static_assert(stripped_t<net50, layout::bitmap>::memory_plan(1).metadata == align_bytes(4 * 4 + 2 * 3 * 64));
static_assert(stripped_t<net50, layout::bitmap>::memory_plan(1).parameters + stripped_t<net50, layout::bitmap>::memory_plan(1).metadata <
              0.6 * double(plain::memory_plan(1).parameters));
// csc: column starts 4 * 41 bytes and 2 bytes of row per weight
static_assert(stripped_t<net90, layout::csc>::memory_plan(1).metadata == align_bytes(4 * 41 + 2 * 256));

TEST_CASE("sparse kernels: forward equals the scalar reference on every architecture") {
  auto run = [](auto arch, const char*) {
    using Arch = decltype(arch);
    auto one = [&]<std::size_t K, std::size_t N>(double density, std::size_t batch, bool relu) {
      rng g(K * 131 + N + batch);
      const auto [w, x, bias, keep] = sparse_test::random_problem(K, N, batch, density, g);
      std::vector<float> values(K * N + 1);
      std::vector<std::uint32_t> off(kernels::cpu::sparse::chunks(N) + 1);
      std::vector<std::uint16_t> bm(kernels::cpu::sparse::chunks(N) * K);
      kernels::cpu::sparse::pack(w.data(), keep.data(), K, N, values.data(), values.size(), off.data(), bm.data());
      std::vector<float> y(batch * N), ref(batch * N);
      kernels::cpu::sparse::forward<K, N, Arch>(x.data(), values.data(), off.data(), bm.data(), bias.data(), y.data(),
                                                batch, relu);
      kernels::cpu::sparse::forward_reference(x.data(), values.data(), off.data(), bm.data(), bias.data(), ref.data(),
                                              batch, K, N, relu);
      // the reference itself: the dense product of the masked kernel
      const auto dense_ref = sparse_test::masked_dense(x, w, keep, bias, batch, K, N, relu);
      for (std::size_t i = 0; i < y.size(); ++i) {
        CHECK(y[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
        CHECK(ref[i] == doctest::Approx(dense_ref[i]).epsilon(1e-5).scale(1.0));
      }
    };
    for (double d : {0.0, 0.1, 0.5, 1.0})
      for (std::size_t batch : {1, 3, 8, 17}) {
        one.template operator()<1, 1>(d, batch, false);
        one.template operator()<3, 17>(d, batch, true);
        one.template operator()<17, 16>(d, batch, false);
        one.template operator()<64, 40>(d, batch, true);
        one.template operator()<255, 33>(d, batch, false);
      }
  };
  CHECK(test::for_each_arch("sparse forward", run) >= 1);
}

TEST_CASE_TEMPLATE("sparse layers of every layout: finite-difference gradients", Layout, layout::bitmap, layout::csc,
                   layout::rows) {
  CHECK(gradcheck::check_layer<typename Layout::template layer<8, 20, 60, ctnn::tanh>, shape<8>>() < 1e-6);
  CHECK(gradcheck::check_layer<typename Layout::template layer<5, 3, 15, identity>, shape<5>>() < 1e-6);
  // without decoded weights (a slot with no derived block): the layout's own backward
  gradcheck::options o;
  o.derived = false;
  CHECK(gradcheck::check_layer<typename Layout::template layer<8, 20, 60, ctnn::tanh>, shape<8>>(o) < 1e-6);
}

TEST_CASE_TEMPLATE("strip_pruning<Layout>: predictions equal the masked model's", Layout, layout::bitmap, layout::csc,
                   layout::rows) {
  auto check_strip = [](auto m, std::size_t epochs_n) {
    adam opt{0.01};
    fit(m, xent, opt, toy_data<64>().batch(16), epochs{epochs_n}, update_pruning_step{});
    auto s = strip_pruning<Layout>(m);
    const auto xs = strip_test::random_inputs(96 * 64, 2);
    for (std::size_t batch : {1, 7, 16, 64}) CHECK(worst_difference(m, s, xs, 96, batch) < 1e-5);
    return s;
  };
  if constexpr (!requires { Layout::kept_one_in; }) {  // (csc and rows: 90 % and up)
    SUBCASE("50% unstructured") { check_strip(make_model<net50>(3), 2); }
    SUBCASE("2:4") { check_strip(make_model<net_nm>(4), 1); }
  }
  SUBCASE("90% unstructured") { check_strip(make_model<net90>(3), 2); }
  SUBCASE("polynomial to 90% and a second pruned layer") { check_strip(make_model<net_poly>(5), 4); }
  SUBCASE("a mask short of the final sparsity is an error naming the layer") {
    auto m = make_model<net90>(1);  // masks all ones: nothing pruned yet
    CHECK_THROWS_WITH(strip_pruning<Layout>(m), doctest::Contains("strip_pruning: layer 1 keeps 2560 weights, more than the 256"));
  }
}

// The 2:4-packed layout through the same strip routine: its type, its compile-time size, and the
// masked model's predictions.
static_assert(SparseLayout<layout::rows> && SparseLayout<layout::nm<2, 4>>);
static_assert(std::is_same_v<stripped_t<net_nm, layout::nm<2, 4>>,
                             sequential<input<64>, sparse_dense_nm<64, 40, 2, 4, relu>, dense<3>>>);
static_assert(stripped_t<net_nm, layout::nm<2, 4>>::parameter_count == 64 * 40 / 2 + 40 + 40 * 3 + 3);

TEST_CASE("strip_pruning<layout::nm<2, 4>>: a 2:4-pruned model packed with 2-bit indices predicts as the masked one") {
  auto m = make_model<net_nm>(4);
  adam opt{0.01};
  fit(m, xent, opt, toy_data<64>().batch(16), epochs{1}, update_pruning_step{});
  auto s = strip_pruning<layout::nm<2, 4>>(m);
  const auto xs = strip_test::random_inputs(96 * 64, 2);
  for (std::size_t batch : {1, 7, 16, 64}) CHECK(worst_difference(m, s, xs, 96, batch) < 1e-5);
  // 50 % unstructured is not 2:4: a group keeping 3 or 4 of its weights is refused, naming the unit
  auto u = make_model<net50>(3);
  prune_at_step(u, 0);
  auto strip_nm = [&] { return strip_pruning<layout::nm<2, 4>>(u); };
  CHECK_THROWS_AS(strip_nm(), std::invalid_argument);
}

TEST_CASE("strip_pruning: the documented spellings, strip_pruning(m) and strip_pruning_csc(m)") {
  auto m = make_model<net90>(3);
  prune_at_step(m, 0);
  auto b = strip_pruning(m);
  auto c = strip_pruning_csc(m);
  static_assert(std::is_same_v<decltype(b), decltype(strip_pruning<layout::fastest>(m))>);
  static_assert(std::is_same_v<decltype(c), decltype(strip_pruning<layout::csc>(m))>);
  const auto xs = strip_test::random_inputs(20 * 64, 5);
  CHECK(worst_difference(b, c, xs, 20) < 1e-5);
  CHECK_THROWS_WITH(strip_pruning_csc(make_model<net90>(1)), doctest::Contains("strip_pruning: layer 1 keeps 2560 weights"));
}

TEST_CASE("strip_pruning: the bitmap-stripped weights file is smaller and loads back") {
  auto m = make_model<net50>(3);
  adam opt{0.01};
  fit(m, xent, opt, toy_data<64>().batch(16), epochs{1}, update_pruning_step{});
  auto s = strip_pruning<layout::bitmap>(m);
  const auto dir = std::filesystem::temp_directory_path();
  auto d = make_model<plain>(3);
  io::save_weights(d, dir / "ctnn_plain.bin");
  io::save_weights(s, dir / "ctnn_stripped.bin");
  const auto dense_bytes = std::filesystem::file_size(dir / "ctnn_plain.bin");
  const auto sparse_bytes = std::filesystem::file_size(dir / "ctnn_stripped.bin");
  MESSAGE("weights file: dense " << dense_bytes << " bytes, stripped at 50% " << sparse_bytes << " bytes");
  CHECK(double(sparse_bytes) < 0.6 * double(dense_bytes));
  auto s2 = make_model<stripped_t<net50, layout::bitmap>>(9);
  io::load_weights(s2, dir / "ctnn_stripped.bin");
  CHECK(std::equal(s.parameters().begin(), s.parameters().end(), s2.parameters().begin()));
  const auto xs = strip_test::random_inputs(10 * 64, 3);
  CHECK(worst_difference(s, s2, xs, 10) == 0.0);
  // the loaded layer at batch 1 (one sample's kernel), 2 and 7 against the masked model
  for (std::size_t batch : {1, 2, 7}) CHECK(worst_difference(m, s2, xs, 10, batch) < 1e-5);
  std::filesystem::remove(dir / "ctnn_plain.bin");
  std::filesystem::remove(dir / "ctnn_stripped.bin");
}

TEST_CASE("strip_pruning_to: a target type of other layouts and tighter NNZs, checked when it strips") {
  auto m = make_model<net_poly>(5);
  adam opt{0.01};
  fit(m, xent, opt, toy_data<64>().batch(16), epochs{4}, update_pruning_step{});
  // layer 1 keeps 256 weights, layer 2 keeps 32: a mixed target with room for that
  using mixed = sequential<input<64>, sparse_dense_csc<64, 40, 256, relu>, sparse_dense<40, 16, 200, ctnn::tanh>, dense<3>>;
  auto s = strip_pruning_to<mixed>(m);
  const auto xs = strip_test::random_inputs(30 * 64, 8);
  CHECK(worst_difference(m, s, xs, 30) < 1e-5);
  using small = sequential<input<64>, sparse_dense<64, 40, 255, relu>, sparse_dense<40, 16, 160, ctnn::tanh>, dense<3>>;
  CHECK_THROWS_WITH(strip_pruning_to<small>(m), doctest::Contains("strip_pruning: layer 1 keeps 256 weights, more than the 255"));
}

TEST_CASE("copy_variables: a trained dense model into its pruned type, the masks kept") {
  auto d = make_model<plain>(8);
  auto p = make_model<net50>(1);
  CHECK(copy_variables(d, p) == 4);  // two kernels and two biases
  CHECK(std::equal(d.parameters().begin(), d.parameters().end(), p.parameters().begin()));
  CHECK(std::all_of(p.masks().begin(), p.masks().begin() + 64 * 40, [](std::uint8_t v) { return v == 1; }));
}

TEST_CASE("units: dense<40> pruned to 60 % of its units strips to dense<16>, and the next layer's input shrinks") {
  using unet = sequential<input<64>, prune_low_magnitude<dense<40, ctnn::sigmoid>, constant_sparsity<0.6>, units>, dense<3>>;
  static_assert(std::is_same_v<stripped_t<unet>, sequential<input<64>, dense<16, ctnn::sigmoid>, dense<3>>>);
  static_assert(stripped_t<unet>::parameter_count == 64 * 16 + 16 + 16 * 3 + 3);
  auto m = make_model<unet>(6);
  adam opt{0.01};
  fit(m, xent, opt, toy_data<64>().batch(16), epochs{2}, update_pruning_step{});
  // whole columns are masked: every row of the mask is the same
  std::size_t kept = 0;
  for (std::size_t j = 0; j < 40; ++j) kept += m.masks()[j];
  CHECK(kept == 16);
  for (std::size_t k = 1; k < 64; ++k)
    for (std::size_t j = 0; j < 40; ++j) CHECK(m.masks()[k * 40 + j] == m.masks()[j]);
  auto s = strip_pruning(m);
  std::vector<float> xs(50 * 64);
  rng g(4);
  for (auto& v : xs) v = float(g.uniform(-1, 1));
  // sigmoid(b_j) of the removed units went into the next bias: same predictions
  const auto a = m.predict(xs.data(), 50), b = s.predict(xs.data(), 50);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5).scale(1.0));
}

TEST_CASE("blocks: 1x4 and 4x4 block masks strip to sparse_dense_block (the default) with whole blocks kept") {
  using b14 = sequential<input<64>, prune_low_magnitude<dense<40, relu>, constant_sparsity<0.75>, block<1, 4>>, dense<3>>;
  using b44 = sequential<input<64>, prune_low_magnitude<dense<40, relu>, constant_sparsity<0.5>, block<4, 4>>, dense<3>>;
  static_assert(std::is_same_v<stripped_t<b14, layout::bitmap>, sequential<input<64>, sparse_dense<64, 40, 640, relu>, dense<3>>>);
  static_assert(std::is_same_v<stripped_t<b44, layout::bitmap>, sequential<input<64>, sparse_dense<64, 40, 1280, relu>, dense<3>>>);
  // by default a block-pruned layer strips to the block layout of its blocks
  static_assert(std::is_same_v<stripped_t<b14>, sequential<input<64>, sparse_dense_block<64, 40, 640, 1, 4, relu>, dense<3>>>);
  static_assert(std::is_same_v<stripped_t<b44>, sequential<input<64>, sparse_dense_block<64, 40, 1280, 4, 4, relu>, dense<3>>>);
  auto m = make_model<b44>(2);
  adam opt{0.01};
  fit(m, xent, opt, toy_data<64>().batch(16), epochs{1}, update_pruning_step{});
  for (std::size_t k = 0; k < 64; ++k)
    for (std::size_t j = 0; j < 40; ++j) CHECK(m.masks()[k * 40 + j] == m.masks()[(k / 4 * 4) * 40 + j / 4 * 4]);
  auto s = strip_pruning(m);
  std::vector<float> xs(20 * 64, 0.5f);
  const auto a = m.predict(xs.data(), 20), b = s.predict(xs.data(), 20);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5).scale(1.0));
}
