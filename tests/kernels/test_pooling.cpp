// kernels/cpu/pooling.hpp: max, average and global average pooling by hand,
// including windows that overhang the input with same padding.
#include <doctest/doctest.h>

#include <ctnn/kernels/cpu/pooling.hpp>
#include <ctnn/layers/padding.hpp>

#include <cstdint>
#include <vector>

using namespace ctnn;
using kernels::conv_geometry;

namespace {
// the kernels keep indices in raw storage (a layer's cache); a uint32 vector is such storage too
unsigned char* bytes(std::vector<std::uint32_t>& v) { return reinterpret_cast<unsigned char*>(v.data()); }

template <std::size_t H, std::size_t W, std::size_t C, std::size_t K, std::size_t S, padding P>
constexpr conv_geometry pool_geom() {
  return {H, W, C, C, K, K, S, padded_out(H, K, S, P), padded_out(W, K, S, P), pad_before(H, K, S, P),
          pad_before(W, K, S, P)};
}
}  // namespace

TEST_CASE("pooling: 2x2 max and average over a 4x4 one-channel input") {
  constexpr auto g = pool_geom<4, 4, 1, 2, 2, padding::valid>();
  static_assert(g.oh == 2 && g.ow == 2);
  const std::vector<float> x{1, 2, 5, 6,   //
                             3, 4, 8, 7,   //
                             -1, -2, 0, 0, //
                             -3, -9, 0, 1};
  std::vector<float> y(4);
  std::vector<std::uint32_t> idx(4);
  kernels::cpu::max_pool_forward<g>(x.data(), y.data(), bytes(idx), 1);
  CHECK(y == std::vector<float>{4, 8, -1, 1});
  CHECK(idx == std::vector<std::uint32_t>{5, 6, 8, 15});
  kernels::cpu::average_pool_forward<g>(x.data(), y.data(), 1);
  CHECK(y == std::vector<float>{2.5f, 6.5f, -3.75f, 0.25f});

  std::vector<float> dy{10, 20, 30, 40}, dx(16);
  kernels::cpu::max_pool_backward<g>(bytes(idx), dy.data(), dx.data(), 1);
  CHECK(dx == std::vector<float>{0, 0, 0, 0, 0, 10, 20, 0, 30, 0, 0, 0, 0, 0, 0, 40});
  kernels::cpu::average_pool_backward<g>(dy.data(), dx.data(), 1);
  CHECK(dx == std::vector<float>{2.5f, 2.5f, 5, 5, 2.5f, 2.5f, 5, 5, 7.5f, 7.5f, 10, 10, 7.5f, 7.5f, 10, 10});
}

TEST_CASE("pooling: overlapping windows add their gradients; ties send it to the first maximum only") {
  {
    // 3x3 input, 2x2 window, stride 1: the centre is the maximum of all four windows.
    constexpr auto o = pool_geom<3, 3, 1, 2, 1, padding::valid>();
    const std::vector<float> x{0, 0, 0, 0, 9, 0, 0, 0, 0}, dy{1, 2, 3, 4};
    std::vector<float> y(4), dx(9);
    std::vector<std::uint32_t> idx(4);
    kernels::cpu::max_pool_forward<o>(x.data(), y.data(), bytes(idx), 1);
    kernels::cpu::max_pool_backward<o>(bytes(idx), dy.data(), dx.data(), 1);
    CHECK(dx == std::vector<float>{0, 0, 0, 0, 10, 0, 0, 0, 0});
  }
  constexpr auto g = pool_geom<2, 2, 1, 2, 2, padding::valid>();
  const std::vector<float> x{3, 3, 3, 3}, dy{1};
  std::vector<float> y(1), dx(4);
  std::vector<std::uint32_t> idx(1);
  kernels::cpu::max_pool_forward<g>(x.data(), y.data(), bytes(idx), 1);
  kernels::cpu::max_pool_backward<g>(bytes(idx), dy.data(), dx.data(), 1);
  CHECK(dx == std::vector<float>{1, 0, 0, 0});
}

TEST_CASE("pooling: same padding averages only the real positions; channels stay apart") {
  // 3x3 input, 2 channels, 2x2 window, stride 2, same: out 2x2, pad 0 before, 1 after.
  constexpr auto g = pool_geom<3, 3, 2, 2, 2, padding::same>();
  static_assert(g.oh == 2 && g.ow == 2 && g.pt == 0 && g.pl == 0);
  std::vector<float> x(18);
  for (std::size_t i = 0; i < 9; ++i) {
    x[2 * i] = float(i + 1);   // channel 0: 1..9
    x[2 * i + 1] = -float(i + 1);  // channel 1: -1..-9
  }
  std::vector<float> y(8);
  kernels::cpu::average_pool_forward<g>(x.data(), y.data(), 1);
  // windows: {1,2,4,5} {3,6} {7,8} {9}
  CHECK(y == std::vector<float>{3, -3, 4.5f, -4.5f, 7.5f, -7.5f, 9, -9});
  std::vector<std::uint32_t> idx(8);
  kernels::cpu::max_pool_forward<g>(x.data(), y.data(), bytes(idx), 1);
  CHECK(y == std::vector<float>{5, -1, 6, -3, 8, -7, 9, -9});  // padding never wins, even over negatives
  CHECK(idx == std::vector<std::uint32_t>{8, 1, 10, 5, 14, 13, 16, 17});
}

TEST_CASE("pooling: global average over positions, per channel and sample") {
  const std::vector<float> x{1, 10, 3, 30, /*sample 2*/ 2, 0, 4, 0};  // 2 samples, 2 positions, 2 channels
  std::vector<float> y(4), dx(8);
  kernels::cpu::global_average_forward<2, 2>(x.data(), y.data(), 2);
  CHECK(y == std::vector<float>{2, 20, 3, 0});
  const std::vector<float> dy{2, 4, 6, 8};
  kernels::cpu::global_average_backward<2, 2>(dy.data(), dx.data(), 2);
  CHECK(dx == std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4});
}
