// pruning/strip.hpp, units pattern on conv2d: filter (channel) pruning strips
// to a plain narrower conv2d, and the layers after it shrink down to the next
// conv2d (input channels) or dense (rows of the kept channels): batch_norm,
// pooling, activations, dropout, flatten, global_average_pool between; the
// stripped model predicts what the masked one does.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <type_traits>
#include <vector>

#include "pruning/strip_common.hpp"

using namespace ctnn;
using strip_test::worst_difference;
using strip_test::xent;

namespace {
using half = constant_sparsity<0.5>;
using cnn = sequential<input<12, 12>,
                       prune_low_magnitude<conv2d<8, 3, 3, 1, padding::valid, relu>, half, units>,  // 10x10x8 -> x4
                       max_pool2d<2>,                                                               // 5x5
                       batch_norm,
                       conv2d<6, 3, 3, 1, padding::valid, relu>,  // 3x3x6: its input channels 8 -> 4
                       prune_low_magnitude<conv2d<10, 2, 2, 1, padding::valid, ctnn::tanh>, constant_sparsity<0.6>,
                                           units>,  // 2x2x10 -> x4
                       relu, average_pool2d<2, 1, padding::same>, flatten,
                       dense<3>>;  // its rows 40 -> 16
using cnn_stripped = sequential<input<12, 12>, conv2d<4, 3, 3, 1, padding::valid, relu>, max_pool2d<2>, batch_norm,
                                conv2d<6, 3, 3, 1, padding::valid, relu>, conv2d<4, 2, 2, 1, padding::valid, ctnn::tanh>,
                                relu, average_pool2d<2, 1, padding::same>, flatten, dense<3>>;

// The stripped type and its parameter count, at compile time.
static_assert(std::is_same_v<stripped_t<cnn>, cnn_stripped>);
static_assert(cnn::parameter_count == (9 * 8 + 8) + 2 * 8 + (9 * 8 * 6 + 6) + (4 * 6 * 10 + 10) + (40 * 3 + 3));
static_assert(stripped_t<cnn>::parameter_count == (9 * 4 + 4) + 2 * 4 + (9 * 4 * 6 + 6) + (4 * 6 * 4 + 4) + (16 * 3 + 3));
static_assert(stripped_t<cnn>::state_count == 2 * 4);  // batch_norm's moving statistics of the kept channels
static_assert(stripped_t<cnn>::parameter_count < 0.5 * cnn::parameter_count);

template <class S>
data::in_memory<S, sparse_labels> images(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n * S::size);
  std::vector<std::int32_t> y(n);
  rng g(seed);
  for (auto& v : x) v = float(g.uniform(0, 1));
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t(i % 3);
  return {x, y};
}
}  // namespace

TEST_CASE("filters: a trained filter-pruned CNN strips to narrower conv2d layers with the same predictions") {
  auto m = make_model<cnn>(3);
  adam opt{0.01};
  fit(m, xent, opt, images<shape<12, 12>>(64, 1).batch(16), epochs{2}, update_pruning_step{});
  // whole filters are masked: every row of layer 1's [9 x 8] mask is the same, 4 of 8 kept
  std::vector<const std::uint8_t*> masks;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.kind == role::mask) masks.push_back(reinterpret_cast<const std::uint8_t*>(v.data));
  });
  REQUIRE(masks.size() == 2);
  std::size_t kept = 0;
  for (std::size_t f = 0; f < 8; ++f) kept += masks[0][f];
  CHECK(kept == 4);
  for (std::size_t r = 1; r < 9; ++r)
    for (std::size_t f = 0; f < 8; ++f) CHECK(masks[0][r * 8 + f] == masks[0][f]);
  auto s = strip_pruning(m);
  static_assert(std::is_same_v<decltype(s), model<cnn_stripped>>);
  const auto xs = strip_test::random_inputs(50 * 144, 9);
  for (std::size_t batch : {1, 16}) CHECK(worst_difference(m, s, xs, 50, batch) < 1e-5);
}

TEST_CASE("units: dense units through dropout and batch_norm, and filters through global_average_pool") {
  SUBCASE("dense") {
    using net = sequential<input<20>, prune_low_magnitude<dense<10, ctnn::sigmoid>, half, units>, dropout<0.2f>, batch_norm,
                           dense<3>>;
    static_assert(std::is_same_v<stripped_t<net>, sequential<input<20>, dense<5, ctnn::sigmoid>, dropout<0.2f>, batch_norm, dense<3>>>);
    auto m = make_model<net>(2);
    adam opt{0.01};
    fit(m, xent, opt, strip_test::toy_data<20>(64, 4).batch(16), epochs{2}, update_pruning_step{});
    auto s = strip_pruning(m);
    const auto xs = strip_test::random_inputs(30 * 20, 3);
    CHECK(worst_difference(m, s, xs, 30) < 1e-5);
  }
  SUBCASE("global_average_pool") {
    using net = sequential<input<8, 8>, prune_low_magnitude<conv2d<6, 3, 3, 1, padding::same, relu>, half, units>,
                           global_average_pool, dense<3>>;
    static_assert(std::is_same_v<stripped_t<net>, sequential<input<8, 8>, conv2d<3, 3, 3, 1, padding::same, relu>,
                                                             global_average_pool, dense<3>>>);
    auto m = make_model<net>(2);
    adam opt{0.01};
    fit(m, xent, opt, images<shape<8, 8>>(64, 2).batch(16), epochs{2}, update_pruning_step{});
    auto s = strip_pruning(m);
    const auto xs = strip_test::random_inputs(30 * 64, 3);
    CHECK(worst_difference(m, s, xs, 30) < 1e-5);
  }
}

TEST_CASE("filters: a same-padded conv2d cannot absorb a removed filter's non-zero constant (an error naming both)") {
  using net = sequential<input<8, 8>, prune_low_magnitude<conv2d<4, 3, 3, 1, padding::valid, relu>, half, units>,
                         conv2d<3, 3, 3, 1, padding::same>, flatten, dense<3>>;
  auto m = make_model<net>(5);
  prune_at_step(m, 0);
  auto p = m.layer_parameters<0>();  // kernel [3, 3, 1, 4], then the bias [4]
  for (std::size_t f = 0; f < 4; ++f) p[36 + f] = 0.0f;
  {  // relu(0) = 0: nothing to absorb, the strip is exact
    auto s = strip_pruning(m);
    const auto xs = strip_test::random_inputs(10 * 64, 1);
    CHECK(worst_difference(m, s, xs, 10) < 1e-5);
  }
  p = m.layer_parameters<0>();  // predict grew the model's memory for its batch: the span moved
  for (std::size_t f = 0; f < 4; ++f) p[36 + f] = 0.5f;
  CHECK_THROWS_WITH(strip_pruning(m), doctest::Contains("strip_pruning: layer 2 (conv2d, padding::same) cannot take the "
                                                        "constant output 0.5"));
}
