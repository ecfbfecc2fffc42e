// Finite-difference gradient checks, in double precision, of the layers of
// issue 5: conv2d (valid/same, strides, activations, one and more channels, Winograd's 3x3 layers),
// max_pool2d, average_pool2d, global_average_pool, dropout (training: the
// checker reseeds the generator before each forward, so the mask is fixed;
// inference), batch_norm (training, through the batch statistics; inference),
// and the l1 / l1_l2 penalties.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include "gradcheck.hpp"

using namespace ctnn;

namespace {
constexpr double tol = 1e-6;
}

TEST_CASE("gradcheck: conv2d") {
  CHECK(gradcheck::check_layer<conv2d<3, 3, 3>, shape<6, 6, 2>>() < tol);
  CHECK(gradcheck::check_layer<conv2d<3, 3, 3>, shape<6, 6>>() < tol);  // rank 2: one channel
  CHECK(gradcheck::check_layer<conv2d<4, 3, 3, 1, padding::same>, shape<5, 5, 2>>() < tol);
  CHECK(gradcheck::check_layer<conv2d<2, 3, 2, 2, padding::same, ctnn::tanh>, shape<7, 6, 3>>() < tol);
  CHECK(gradcheck::check_layer<conv2d<2, 4, 4, 3, padding::valid, sigmoid>, shape<10, 9, 2>>() < tol);
  CHECK(gradcheck::check_layer<conv2d<2, 2, 2, 3>, shape<8, 7, 2>>() < tol);  // stride larger than the kernel
  CHECK(gradcheck::check_layer<conv2d<3, 2, 2, 1, padding::same, relu>, shape<4, 4, 2>>() < tol);
}

// 3x3 stride-1 layers with C and F of 16: y and dx by Winograd F(4x4, 3x3) where winograd_m picks it (7x6 valid,
// 6x6 valid; the 7x7 same layer), else F(2x2, 3x3) (5x5 same) (backends/cpu/winograd.hpp; double is whole
// vectors of 16 on every SIMD architecture), dW by F(3x3, 4x4) or F(3x3, 2x2) where cols holds x and a partial dW
// (winograd_dw_v: the same-padded layers), else by im2col; valid (odd and even outputs) and same padding.
TEST_CASE("gradcheck: conv2d through Winograd F(4x4, 3x3) and F(2x2, 3x3)") {
  using wino_valid = conv2d<16, 3, 3>::bind<shape<7, 6, 16>, double, cpu<>>;
  static_assert(kernels::cpu::winograd_dx_v<wino_valid::geometry, kernels::cpu::default_arch, double> ==
                kernels::cpu::simd_v<double, kernels::cpu::default_arch>);
  using wino_same = conv2d<16, 3, 3, 1, padding::same, relu>::bind<shape<5, 5, 16>, double, cpu<>>;
  static_assert(kernels::cpu::winograd_dw_v<wino_same::geometry, kernels::cpu::default_arch, double> ==
                kernels::cpu::simd_v<double, kernels::cpu::default_arch>);
  CHECK(gradcheck::check_layer<conv2d<16, 3, 3>, shape<7, 6, 16>>() < tol);
  CHECK(gradcheck::check_layer<conv2d<16, 3, 3, 1, padding::same, relu>, shape<5, 5, 16>>({.batch = 2}) < tol);
  CHECK(gradcheck::check_layer<conv2d<32, 3, 3, 1, padding::valid, ctnn::tanh>, shape<6, 6, 16>>({.batch = 5}) < tol);
  using wino4_same = conv2d<16, 3, 3, 1, padding::same>::bind<shape<7, 7, 16>, double, cpu<>>;
  static_assert(kernels::cpu::winograd_m<wino_same::geometry, double> == 2 &&
                kernels::cpu::winograd_m<wino4_same::geometry, double> == 4);
  static_assert(kernels::cpu::winograd_dw_v<wino4_same::geometry, kernels::cpu::default_arch, double> ==
                kernels::cpu::simd_v<double, kernels::cpu::default_arch>);
  CHECK(gradcheck::check_layer<conv2d<16, 3, 3, 1, padding::same>, shape<7, 7, 16>>({.batch = 1, .max_checks = 100}) < tol);
}

TEST_CASE("gradcheck: conv1d (issue 29)") {
  CHECK(gradcheck::check_layer<conv1d<3, 3>, shape<8, 2>>() < tol);
  CHECK(gradcheck::check_layer<conv1d<2, 4, 3, padding::same, ctnn::tanh>, shape<10, 3>>() < tol);
  CHECK(gradcheck::check_layer<conv1d<4, 2, 2, padding::valid, sigmoid>, shape<9, 1>>({.batch = 4}) < tol);
}

TEST_CASE("gradcheck: zero_padding2d and up_sampling2d (issue 29)") {
  CHECK(gradcheck::check_layer<zero_padding2d<1>, shape<4, 3, 2>>() < tol);
  CHECK(gradcheck::check_layer<zero_padding2d<2, 0, 1, 3>, shape<3, 4, 3>>({.batch = 3}) < tol);
  CHECK(gradcheck::check_layer<up_sampling2d<2>, shape<3, 4, 2>>() < tol);
  CHECK(gradcheck::check_layer<up_sampling2d<3, 1>, shape<2, 3, 3>>({.batch = 3}) < tol);
}

TEST_CASE("gradcheck: pooling") {
  CHECK(gradcheck::check_layer<max_pool2d<2>, shape<6, 6, 3>>() < tol);
  CHECK(gradcheck::check_layer<max_pool2d<3, 2, padding::same>, shape<7, 6, 2>>() < tol);
  CHECK(gradcheck::check_layer<average_pool2d<2>, shape<6, 6, 3>>() < tol);
  CHECK(gradcheck::check_layer<average_pool2d<3, 2, padding::same>, shape<7, 6, 2>>() < tol);
  CHECK(gradcheck::check_layer<global_average_pool, shape<4, 3, 5>>() < tol);
  CHECK(gradcheck::check_layer<global_average_pool, shape<6, 2>>() < tol);
}

TEST_CASE("gradcheck: dropout in training (fixed mask) and at inference") {
  CHECK(gradcheck::check_layer<dropout<0.5f>, shape<20>>() < tol);
  CHECK(gradcheck::check_layer<dropout<0.3f>, shape<4, 5>>({.training = true}) < tol);
  CHECK(gradcheck::check_layer<dropout<0.3f>, shape<4, 5>>({.training = false}) < tol);
}

TEST_CASE("gradcheck: batch_norm in training (batch statistics) and at inference (moving statistics)") {
  CHECK(gradcheck::check_layer<batch_norm, shape<5>>({.batch = 4}) < tol);
  CHECK(gradcheck::check_layer<batch_norm, shape<3, 3, 4>>() < tol);
  CHECK(gradcheck::check_layer<batch_normalization<0.9f, 1e-2f>, shape<2, 6>>() < tol);
  CHECK(gradcheck::check_layer<batch_norm, shape<3, 3, 4>>({.training = false}) < tol);
}

TEST_CASE("gradcheck: a small CNN stack, layer by layer") {
  CHECK(gradcheck::check_layer<conv2d<4, 3, 3, 1, padding::valid, relu>, shape<8, 8, 1>>() < tol);
  CHECK(gradcheck::check_layer<max_pool2d<2>, shape<6, 6, 4>>() < tol);
  CHECK(gradcheck::check_layer<batch_norm, shape<3, 3, 4>>() < tol);
}

template <class Reg>
using conv_with = conv2d<3, 2, 2, 1, padding::valid, identity, Reg>;

TEST_CASE("gradcheck: the l1 and l1_l2 penalties of a conv2d kernel") {
  CHECK(gradcheck::check_penalty<conv_with<l1<0.01f>>, shape<4, 4, 2>>() < tol);
  CHECK(gradcheck::check_penalty<conv_with<l1_l2<0.01f, 0.02f>>, shape<4, 4, 2>>() < tol);
  CHECK(gradcheck::check_penalty<conv_with<l2<0.03f>>, shape<4, 4, 2>>() < tol);
}

TEST_CASE("gradcheck: depthwise_conv2d and separable_conv2d (issue 29)") {
  CHECK(gradcheck::check_layer<depthwise_conv2d<3, 3>, shape<6, 5, 3>>() < tol);
  CHECK(gradcheck::check_layer<depthwise_conv2d<3, 3, 2, padding::same, 1, ctnn::tanh>, shape<7, 6, 4>>() < tol);
  CHECK(gradcheck::check_layer<depthwise_conv2d<2, 3, 1, padding::same, 3, sigmoid>, shape<5, 4, 2>>({.batch = 3}) < tol);
  CHECK(gradcheck::check_layer<depthwise_conv2d<3, 3>, shape<5, 5>>() < tol);  // rank 2: one channel
  CHECK(gradcheck::check_layer<separable_conv2d<4, 3, 3>, shape<6, 6, 3>>() < tol);
  CHECK(gradcheck::check_layer<separable_conv2d<3, 3, 2, 2, padding::same, 2, ctnn::tanh>, shape<7, 6, 2>>() < tol);
  CHECK(gradcheck::check_layer<separable_conv2d<5, 1, 1, 1, padding::valid, 1, sigmoid>, shape<3, 4, 6>>({.batch = 3}) < tol);
}

TEST_CASE("gradcheck: the l2 penalty of a depthwise and of a separable kernel") {
  CHECK(gradcheck::check_penalty<depthwise_conv2d<3, 3, 1, padding::valid, 2, identity, l2<0.03f>>, shape<5, 5, 2>>() < tol);
  CHECK(gradcheck::check_penalty<separable_conv2d<3, 3, 3, 1, padding::valid, 1, identity, l1_l2<0.01f, 0.02f>>,
                                 shape<5, 5, 2>>() < tol);
}
