// backends/cpu/pooling.hpp: max, average and global average pooling by hand,
// including windows that overhang the input with same padding; max pooling
// gives the same bits whatever the thread count.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/pooling.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>
#include <ctnn/layers/padding.hpp>

#include <cstdint>
#include <limits>
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

TEST_CASE("pooling: overlapping windows add their gradients, ties send it to the first maximum only") {
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

TEST_CASE("pooling: same padding averages only the real positions, channels stay apart") {
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

namespace {
// The float vector path of max_pool_forward against max_pool_forward_scalar,
// bit for bit (values and recorded offsets), on channel counts with and
// without a scalar tail, strides below/at the window, same padding, ties and -inf.
template <conv_geometry G>
void check_max_pool_paths(std::size_t batch) {
  INFO("H=" << G.h << " W=" << G.w << " C=" << G.c << " K=" << G.kh << " S=" << G.stride << " pad=" << G.pt);
  std::vector<float> x(batch * G.in_size());
  std::uint64_t s = G.h * 131 + G.c;
  for (std::size_t i = 0; i < x.size(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = float(int(s >> 59) - 16);  // small integers: many ties
    if (i % 97 == 5) x[i] = -std::numeric_limits<float>::infinity();
  }
  const std::size_t outs = batch * G.out_size();
  std::vector<float> y(outs, 7.f), yr(outs, 9.f);
  std::vector<std::uint32_t> idx(outs, 1), idxr(outs, 2);
  kernels::cpu::max_pool_forward<G>(x.data(), y.data(), bytes(idx), batch);
  kernels::cpu::max_pool_forward_scalar<G>(x.data(), yr.data(), bytes(idxr), batch);
  CHECK(y == yr);
  CHECK(idx == idxr);
}
}  // namespace

TEST_CASE("pooling: the vectorized float max pooling equals the scalar loop") {
  check_max_pool_paths<pool_geom<26, 26, 32, 2, 2, padding::valid>()>(3);  // the CNN's first pooling
  check_max_pool_paths<pool_geom<11, 11, 64, 2, 2, padding::valid>()>(2);  // its second (odd size)
  check_max_pool_paths<pool_geom<7, 9, 17, 3, 2, padding::same>()>(2);     // tail of 1 channel, overhang
  check_max_pool_paths<pool_geom<6, 5, 35, 3, 1, padding::same>()>(1);     // overlapping windows
  check_max_pool_paths<pool_geom<5, 5, 16, 2, 2, padding::same>()>(2);
}

namespace {
// The float max-pooling gradient for non-overlapping windows against
// max_pool_backward_scalar, bit for bit, after a forward pass recorded the offsets.
template <conv_geometry G>
void check_max_pool_backward(std::size_t batch) {
  INFO("H=" << G.h << " W=" << G.w << " C=" << G.c << " K=" << G.kh << " S=" << G.stride << " pad=" << G.pt);
  std::vector<float> x(batch * G.in_size()), dy(batch * G.out_size());
  std::uint64_t s = G.w * 7 + G.c;
  auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return float(int(s >> 58) - 32) * 0.25f;
  };
  for (auto& v : x) v = next();
  for (auto& v : dy) v = next();
  std::vector<float> y(dy.size());
  std::vector<std::uint32_t> idx(dy.size());
  kernels::cpu::max_pool_forward<G>(x.data(), y.data(), bytes(idx), batch);
  std::vector<float> dx(x.size(), 5.f), dxr(x.size(), 6.f);
  kernels::cpu::max_pool_backward<G>(bytes(idx), dy.data(), dx.data(), batch);
  kernels::cpu::max_pool_backward_scalar<G>(bytes(idx), dy.data(), dxr.data(), batch);
  CHECK(dx == dxr);
}
}  // namespace

TEST_CASE("pooling: the vectorized float max-pooling gradient equals the scalar loop") {
  check_max_pool_backward<pool_geom<26, 26, 32, 2, 2, padding::valid>()>(3);  // windows tile the input
  check_max_pool_backward<pool_geom<11, 11, 64, 2, 2, padding::valid>()>(2);  // a border no window covers
  check_max_pool_backward<pool_geom<9, 7, 16, 2, 2, padding::valid>()>(2);    // a last row and column to zero
  check_max_pool_backward<pool_geom<5, 7, 16, 2, 2, padding::same>()>(2);     // windows cut short, no border
  check_max_pool_backward<pool_geom<7, 9, 17, 2, 3, padding::same>()>(2);     // stride > window, overhang, tail
  check_max_pool_backward<pool_geom<9, 9, 48, 3, 3, padding::same>()>(1);
}

namespace {
// max_pool_forward then max_pool_backward on `threads` threads: y, the offsets (as floats) and dx.
template <conv_geometry G>
std::vector<float> max_pool_run(std::size_t threads, std::size_t batch) {
  kernels::cpu::set_threads(threads);
  std::vector<float> x(batch * G.in_size()), dy(batch * G.out_size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7919) % 61) - 30.0f;
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float((i * 104729) % 37) * 0.125f;
  std::vector<float> y(dy.size()), dx(x.size(), 3.0f);
  std::vector<std::uint32_t> idx(dy.size());
  kernels::cpu::max_pool_forward<G>(x.data(), y.data(), bytes(idx), batch);
  kernels::cpu::max_pool_backward<G>(bytes(idx), dy.data(), dx.data(), batch);
  for (auto k : idx) y.push_back(float(k));
  y.insert(y.end(), dx.begin(), dx.end());
  return y;
}
}  // namespace

TEST_CASE("pooling: max pooling gives the same bits whatever the thread count (samples split over the pool)") {
  const std::size_t before = kernels::cpu::threads();
  for (std::size_t batch : {1, 5, 64}) {
    const auto a = max_pool_run<pool_geom<26, 26, 32, 2, 2, padding::valid>()>(1, batch);
    const auto b = max_pool_run<pool_geom<11, 11, 64, 2, 2, padding::valid>()>(1, batch);
    const auto c = max_pool_run<pool_geom<9, 9, 17, 3, 2, padding::same>()>(1, batch);  // overlapping: scalar backward
    for (std::size_t t : {2, 3, 4}) {
      CHECK(max_pool_run<pool_geom<26, 26, 32, 2, 2, padding::valid>()>(t, batch) == a);
      CHECK(max_pool_run<pool_geom<11, 11, 64, 2, 2, padding::valid>()>(t, batch) == b);
      CHECK(max_pool_run<pool_geom<9, 9, 17, 3, 2, padding::same>()>(t, batch) == c);
    }
  }
  kernels::cpu::set_threads(before);
}

namespace {
// max_pool_forward_n and _backward_n (the geometry at run time, the compiled part's body) against the
// compile-time entries, bit for bit: y, the offsets and dx, on 1 and 3 threads.
template <conv_geometry G>
void check_max_pool_run_time(std::size_t batch) {
  INFO("H=" << G.h << " W=" << G.w << " C=" << G.c << " K=" << G.kh << " S=" << G.stride << " pad=" << G.pt);
  using A = xsimd::default_arch;
  const std::size_t before = kernels::cpu::threads();
  std::vector<float> x(batch * G.in_size()), dy(batch * G.out_size());
  std::uint64_t s = G.h * 31 + G.c;
  auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return float(int(s >> 59) - 16) * 0.5f;  // small values: many ties
  };
  for (auto& v : x) v = next();
  for (auto& v : dy) v = next();
  std::vector<float> y(dy.size(), 7.f), dx(x.size(), 5.f);
  std::vector<std::uint32_t> idx(dy.size(), 1);
  kernels::cpu::max_pool_forward<G, A>(x.data(), y.data(), bytes(idx), batch);
  kernels::cpu::max_pool_backward<G, A>(bytes(idx), dy.data(), dx.data(), batch);
  for (std::size_t t : {1, 3}) {
    kernels::cpu::set_threads(t);
    std::vector<float> yn(dy.size(), 9.f), dxn(x.size(), 6.f);
    std::vector<std::uint32_t> idxn(dy.size(), 2);
    kernels::cpu::max_pool_forward_n<A>(G, x.data(), yn.data(), bytes(idxn), batch);
    kernels::cpu::max_pool_backward_n<A>(G, bytes(idx), dy.data(), dxn.data(), batch);
    CHECK(yn == y);
    CHECK(idxn == idx);
    CHECK(dxn == dx);
  }
  kernels::cpu::set_threads(before);
}
}  // namespace

TEST_CASE("pooling: max pooling over a run-time geometry (the compiled part's body) gives the compile-time bits") {
  check_max_pool_run_time<pool_geom<26, 26, 32, 2, 2, padding::valid>()>(3);  // windows tile the input
  check_max_pool_run_time<pool_geom<11, 11, 64, 2, 2, padding::valid>()>(2);  // a border no window covers
  check_max_pool_run_time<pool_geom<7, 9, 17, 2, 3, padding::same>()>(2);     // stride > window, overhang, tail
  check_max_pool_run_time<pool_geom<9, 9, 17, 3, 2, padding::same>()>(2);     // overlapping: the scalar gradient
  check_max_pool_run_time<pool_geom<6, 5, 3, 2, 2, padding::same>()>(2);      // fewer channels than a vector
}
