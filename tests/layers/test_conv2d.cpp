// layers/conv2d.hpp: output shapes (Keras formulas), parameter layout, init,
// spec text, forward/backward against the direct reference, regularizer wiring.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/winograd.hpp>
#include <ctnn/kernels/conv_reference.hpp>
#include <ctnn/layers/conv2d.hpp>
#include <ctnn/regularizers/l1.hpp>

#include <cmath>
#include <vector>

using namespace ctnn;

template <class Spec, class In>
using bound = typename Spec::template bind<In, float, cpu<>>;

// output shapes: valid / same, strides, rank-2 input as one channel
static_assert(std::is_same_v<bound<conv2d<32, 3, 3>, shape<28, 28, 1>>::out_shape, shape<26, 26, 32>>);
static_assert(std::is_same_v<bound<conv2d<32, 3, 3>, shape<28, 28>>::out_shape, shape<26, 26, 32>>);
static_assert(std::is_same_v<bound<conv2d<8, 3, 3, 1, padding::same>, shape<28, 28, 3>>::out_shape, shape<28, 28, 8>>);
static_assert(std::is_same_v<bound<conv2d<8, 3, 3, 2, padding::same>, shape<28, 28, 3>>::out_shape, shape<14, 14, 8>>);
static_assert(std::is_same_v<bound<conv2d<8, 5, 3, 2>, shape<28, 27, 3>>::out_shape, shape<12, 13, 8>>);
static_assert(std::is_same_v<bound<conv2d<4, 3, 3, 3, padding::same>, shape<10, 11, 2>>::out_shape, shape<4, 4, 4>>);
// parameters: kernel [KH, KW, C, F] then bias [F]; cache: the im2col matrix
static_assert(bound<conv2d<64, 3, 3>, shape<13, 13, 32>>::parameter_count == 3 * 3 * 32 * 64 + 64);
static_assert(bound<conv2d<64, 3, 3>, shape<13, 13, 32>>::cache_per_sample == 11 * 11 * 3 * 3 * 32);
static_assert(bound<conv2d<64, 3, 3>, shape<13, 13, 32>>::state_count == 0);

TEST_CASE("conv2d spec text names every template argument") {
  CHECK(conv2d<32, 3, 3>::name() == "conv2d<32, 3, 3, 1, valid>");
  CHECK(conv2d<8, 5, 3, 2, padding::same, relu, l1<0.5f>>::name() == "conv2d<8, 5, 3, 2, same, relu, l1<0.5>>");
}

TEST_CASE("conv2d forward by hand: 2x2 ones kernel over a 3x3 image, relu") {
  using L = bound<conv2d<1, 2, 2, 1, padding::valid, relu>, shape<3, 3, 1>>;
  std::vector<float> p{1, 1, 1, 1, -12};  // kernel, bias
  std::vector<float> cache(L::cache_per_sample);
  const std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> y(4);
  L::forward({p.data(), nullptr, nullptr, cache.data()}, x.data(), y.data(), run_info{1, false, nullptr});
  CHECK(y == std::vector<float>{0, 4, 12, 16});  // relu(12-12, 16-12, 24-12, 28-12)
}

TEST_CASE("conv2d init: Glorot-uniform with fan_in = KH*KW*C, fan_out = KH*KW*F, zero bias, seeded") {
  using L = bound<conv2d<16, 3, 3>, shape<8, 8, 4>>;
  std::vector<float> a(L::parameter_count), b(L::parameter_count);
  rng g1(5), g2(5);
  L::init({a.data(), nullptr, nullptr, nullptr}, g1);
  L::init({b.data(), nullptr, nullptr, nullptr}, g2);
  CHECK(a == b);
  const double limit = std::sqrt(6.0 / (9 * 4 + 9 * 16));
  double sum_sq = 0;
  for (std::size_t i = 0; i < L::kernel_count; ++i) {
    CHECK(std::abs(a[i]) <= limit);
    sum_sq += double(a[i]) * a[i];
  }
  CHECK(sum_sq / L::kernel_count == doctest::Approx(limit * limit / 3).epsilon(0.1));
  for (std::size_t j = 0; j < 16; ++j) CHECK(a[L::kernel_count + j] == 0.0f);
}

template <class L>
void check_against_reference() {
  constexpr std::size_t B = 2;
  constexpr std::size_t F = L::out_shape::dims[2];
  rng g(11);
  std::vector<float> p(L::parameter_count), gr(L::parameter_count), cache(L::cache_per_sample * B);
  std::vector<float> x(B * L::in_shape::size), y(B * L::out_shape::size), dy(y.size()), dx(x.size());
  for (auto* v : {&p, &x, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  layer_slot<float> s{p.data(), gr.data(), nullptr, cache.data()};
  L::forward(s, x.data(), y.data(), run_info{B, true, nullptr});
  std::vector<float> yr(y.size());
  kernels::reference::conv_forward(L::geometry, x.data(), p.data(), p.data() + L::kernel_count, yr.data(), B);
  // Winograd F(4x4, 3x3) (winograd_m 4) rounds about 10x more than the direct sum: tests/kernels/test_winograd.cpp
  // bounds it by 4e-6 of the sum of |w x| terms (about 70 for 288 terms of uniform [-1, 1] values), so y and dx
  // are compared with an absolute part of 1e-5 x 30 = 3e-4 (Approx's scale); else relative 1e-5 and 1e-4
  constexpr bool f4 = kernels::cpu::winograd_v<L::geometry, kernels::cpu::default_arch, float> &&
                      kernels::cpu::winograd_m<L::geometry, float> == 4;
  constexpr double scale = f4 ? 30 : 1, dx_eps = f4 ? 1e-5 : 1e-4;
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(yr[i]).epsilon(1e-5).scale(scale));
  std::vector<float> dw(L::kernel_count), db(F), dxr(x.size());
  kernels::reference::conv_backward(L::geometry, x.data(), p.data(), dy.data(), dw.data(), db.data(), dxr.data(), B);
  L::backward(s, x.data(), y.data(), dy.data(), dx.data(), run_info{B, true, nullptr});
  for (std::size_t i = 0; i < dw.size(); ++i) CHECK(gr[i] == doctest::Approx(dw[i]).epsilon(1e-4));
  for (std::size_t i = 0; i < db.size(); ++i) CHECK(gr[L::kernel_count + i] == doctest::Approx(db[i]).epsilon(1e-4));
  for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == doctest::Approx(dxr[i]).epsilon(dx_eps).scale(scale));
}

TEST_CASE("conv2d layer equals the direct reference convolution, forward and backward") {
  check_against_reference<bound<conv2d<5, 3, 3, 2, padding::same>, shape<7, 6, 3>>>();
  // a stride larger than the kernel: inputs between the windows get no gradient
  using S = bound<conv2d<3, 2, 2, 3>, shape<8, 7, 2>>;
  static_assert(std::is_same_v<S::out_shape, shape<3, 2, 3>>);  // (8 - 2) / 3 + 1, (7 - 2) / 3 + 1
  check_against_reference<S>();
  check_against_reference<bound<conv2d<2, 1, 3, 4, padding::same>, shape<9, 9, 1>>>();
}

// The Fashion-MNIST CNN's second layer and a padded one: y and dx by Winograd F(4x4, 3x3) on AVX2 and AVX-512
// (backends/cpu/winograd.hpp), dW by F(3x3, 4x4); the same tolerances.
TEST_CASE("conv2d layer through Winograd F(4x4, 3x3) equals the direct reference convolution") {
  using conv2 = bound<conv2d<64, 3, 3>, shape<13, 13, 32>>;
  static_assert(kernels::cpu::winograd_dw_v<conv2::geometry, kernels::cpu::default_arch, float> ==
                kernels::cpu::simd_v<float, kernels::cpu::default_arch>);
  static_assert(kernels::cpu::winograd_m<conv2::geometry, float> == 4);
  check_against_reference<conv2>();
  check_against_reference<bound<conv2d<32, 3, 3, 1, padding::same>, shape<7, 6, 16>>>();
}

TEST_CASE("conv2d regularizer: penalty over the kernel only") {
  using L = bound<conv2d<1, 1, 2, 1, padding::valid, identity, l1<0.5f>>, shape<1, 2, 1>>;
  std::vector<float> p{3, -4, 100};
  CHECK(L::penalty({p.data(), nullptr, nullptr, nullptr}) == doctest::Approx(0.5 * 7));
}

// A relu layer's activation runs in ops<cpu>::conv_forward as each output is stored (the direct first-layer
// kernels, Winograd, im2col): y is max(0, the identity layer's y) bit for bit.
template <class Relu, class Linear>
void check_relu_forward() {
  constexpr std::size_t B = 3;
  rng g(5);
  std::vector<float> p(Relu::parameter_count), gr(p.size()), cache(Relu::cache_per_sample * B), cache2(cache.size());
  std::vector<float> x(B * Relu::in_shape::size), y(B * Relu::out_shape::size), y2(y.size());
  for (auto* v : {&p, &x})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  Relu::forward(layer_slot<float>{p.data(), gr.data(), nullptr, cache.data()}, x.data(), y.data(), run_info{B, true, nullptr});
  Linear::forward(layer_slot<float>{p.data(), gr.data(), nullptr, cache2.data()}, x.data(), y2.data(),
                  run_info{B, true, nullptr});
  std::size_t negative = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    negative += y2[i] < 0;
    CHECK(y[i] == (y2[i] > 0 ? y2[i] : 0.0f));
  }
  CHECK(negative > 0);
  CHECK(cache == cache2);
}

TEST_CASE("conv2d with relu: the rule in conv_forward gives max(0, the identity layer's output)") {
  check_relu_forward<bound<conv2d<32, 3, 3, 1, padding::valid, relu>, shape<28, 28, 1>>,
                     bound<conv2d<32, 3, 3>, shape<28, 28, 1>>>();
  check_relu_forward<bound<conv2d<64, 3, 3, 1, padding::valid, relu>, shape<13, 13, 32>>,
                     bound<conv2d<64, 3, 3>, shape<13, 13, 32>>>();
  check_relu_forward<bound<conv2d<5, 3, 3, 2, padding::same, relu>, shape<7, 6, 3>>,
                     bound<conv2d<5, 3, 3, 2, padding::same>, shape<7, 6, 3>>>();
}
