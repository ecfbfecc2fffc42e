// backends/cpu/conv.hpp (im2col + GEMM) against kernels/conv_reference.hpp
// (direct loops): forward, weight/bias gradients and input gradients for
// valid and same padding, strides 1-3, one and several channels.
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/conv.hpp>
#include <ctnn/layers/padding.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace ctnn;
using kernels::conv_geometry;

namespace {

template <std::size_t H, std::size_t W, std::size_t C, std::size_t F, std::size_t KH, std::size_t KW, std::size_t S,
          padding P>
constexpr conv_geometry geom() {
  return {H,
          W,
          C,
          F,
          KH,
          KW,
          S,
          padded_out(H, KH, S, P),
          padded_out(W, KW, S, P),
          pad_before(H, KH, S, P),
          pad_before(W, KW, S, P)};
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a[i]) - b[i]) / std::max(1.0, std::abs(double(b[i]))));
  return m;
}

template <conv_geometry G>
void compare(std::size_t batch) {
  rng g(G.h * 131 + G.c * 7 + G.stride);
  std::vector<float> x(batch * G.in_size()), w(G.patch() * G.f), b(G.f), dy(batch * G.out_size());
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<float> y_fast(dy.size()), y_ref(dy.size()), cols(batch * G.oh * G.ow * G.patch());
  kernels::cpu::conv_forward<G>(x.data(), w.data(), b.data(), y_fast.data(), cols.data(), batch);
  kernels::reference::conv_forward(G, x.data(), w.data(), b.data(), y_ref.data(), batch);
  CHECK(max_rel(y_fast, y_ref) < 1e-5);

  std::vector<float> dw_f(w.size()), db_f(b.size()), dx_f(x.size(), 7.0f), dw_r(w.size()), db_r(b.size()),
      dx_r(x.size());
  kernels::cpu::conv_backward<G>(dy.data(), w.data(), dw_f.data(), db_f.data(), dx_f.data(), cols.data(), batch);
  kernels::reference::conv_backward(G, x.data(), w.data(), dy.data(), dw_r.data(), db_r.data(), dx_r.data(), batch);
  CHECK(max_rel(dw_f, dw_r) < 1e-4);
  CHECK(max_rel(db_f, db_r) < 1e-4);
  CHECK(max_rel(dx_f, dx_r) < 1e-4);
}

}  // namespace

TEST_CASE("conv: im2col + GEMM equals the direct reference, valid padding") {
  compare<geom<8, 8, 1, 4, 3, 3, 1, padding::valid>()>(3);
  compare<geom<9, 7, 3, 5, 3, 2, 2, padding::valid>()>(2);
  compare<geom<10, 10, 4, 6, 5, 5, 3, padding::valid>()>(2);
  compare<geom<6, 6, 2, 3, 1, 1, 1, padding::valid>()>(2);
}

TEST_CASE("conv: im2col + GEMM equals the direct reference, same padding") {
  compare<geom<8, 8, 1, 4, 3, 3, 1, padding::same>()>(3);
  compare<geom<7, 9, 3, 5, 3, 3, 2, padding::same>()>(2);
  compare<geom<5, 5, 2, 3, 4, 4, 1, padding::same>()>(2);  // even kernel: more padding after than before
  compare<geom<9, 9, 2, 3, 5, 5, 3, padding::same>()>(1);
}

TEST_CASE("conv: reference by hand, 3x3 input, 2x2 kernel, one channel") {
  constexpr conv_geometry g = geom<3, 3, 1, 1, 2, 2, 1, padding::valid>();
  static_assert(g.oh == 2 && g.ow == 2);
  const std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 9}, w{1, 0, 0, -1}, b{10};
  std::vector<float> y(4), cols(4 * 4);
  kernels::reference::conv_forward(g, x.data(), w.data(), b.data(), y.data(), 1);
  CHECK(y == std::vector<float>{10 - 4, 10 - 4, 10 - 4, 10 - 4});  // x[r, s] - x[r + 1, s + 1] = -4
  kernels::cpu::conv_forward<g>(x.data(), w.data(), b.data(), y.data(), cols.data(), 1);
  CHECK(y == std::vector<float>{6, 6, 6, 6});
  CHECK(cols == std::vector<float>{1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9});  // im2col rows
}

TEST_CASE("conv: same padding pads zeros, half before and the rest after") {
  // 2x2 input, 3x3 kernel of ones, stride 1: every output sums its neighbourhood.
  constexpr conv_geometry g = geom<2, 2, 1, 1, 3, 3, 1, padding::same>();
  static_assert(g.oh == 2 && g.pt == 1 && g.pl == 1);
  const std::vector<float> x{1, 2, 3, 4}, w(9, 1.0f), b{0};
  std::vector<float> y(4), cols(4 * 9);
  kernels::cpu::conv_forward<g>(x.data(), w.data(), b.data(), y.data(), cols.data(), 1);
  CHECK(y == std::vector<float>{10, 10, 10, 10});
  // 4x4 kernel (even): pad_total 3, 1 before and 2 after.
  constexpr conv_geometry e = geom<4, 4, 1, 1, 4, 4, 1, padding::same>();
  static_assert(e.oh == 4 && e.pt == 1 && e.pl == 1);
}
