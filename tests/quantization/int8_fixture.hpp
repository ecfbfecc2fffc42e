// tests/quantization/int8_fixture.hpp — the network and values of the committed weights file
// tests/quantization/fixtures/int8_layers.weights: every int8 layer kind (quantized_conv2d,
// quantized_dense, quantized_dense_block; full integer and dynamic range), filled with a fixed
// pattern that passes load_weights' checks. The file was written by main at 02dea38 (before the
// packed kernels moved to 64-byte boundaries of the state block): fixtures/make_int8_fixture.cpp,
// built against that commit's include/ (the command is there). test_quantized_dense.cpp loads it
// with this build and compares every tensor with fill_int8_fixture's.
#pragma once
#include <ctnn/ctnn.hpp>
#include <ctnn/backends/cpu/int8.hpp>
#include <ctnn/layers/quantized_conv2d.hpp>
#include <ctnn/layers/quantized_dense.hpp>
#include <ctnn/layers/quantized_dense_block.hpp>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace int8_fixture {
using fi = ctnn::quantization::full_integer;
using dr = ctnn::quantization::dynamic_range;
// the kernels before this build's alignment: 20 F + 32 = 152, 12 N = 384 (aligned already),
// 20 N + 32 + the index = 372 and 20 N + 32 = 92 bytes into their state blocks
using net = ctnn::sequential<ctnn::input<5, 5, 3>, ctnn::quantized_conv2d<6, 3, 3, 1, ctnn::padding::valid, ctnn::relu, fi>,
                             ctnn::flatten, ctnn::quantized_dense<54, 32, ctnn::relu, dr>,
                             ctnn::quantized_dense_block<32, 16, 64, 4, 4, ctnn::relu, fi>,
                             ctnn::quantized_dense<16, 3, ctnn::identity, fi>>;

// Fills every state buffer of m (a model of net) by name: int8 weights in [-127, 127] packed (the
// padding 0) with their row sums, scales, zero points, multipliers, shifts and bias from small
// formulas; the block layer keeps init's empty index and zero kernel (its sums 0).
template <class M>
void fill_int8_fixture(M& m) {
  namespace i8 = ctnn::kernels::cpu::int8;
  std::vector<std::int32_t> sums[8];
  m.for_each_variable([&](const ctnn::variable_ref& v) {
    const std::string_view n = v.name;
    const std::size_t L = v.layer, e = v.extent;
    auto i32 = [&](auto f) {
      for (std::size_t i = 0; i < e; ++i) {
        const std::int32_t x = std::int32_t(f(i));
        std::memcpy(v.data + 4 * i, &x, 4);
      }
    };
    auto f32 = [&](auto f) {
      for (std::size_t i = 0; i < e; ++i) {
        const float x = float(f(i));
        std::memcpy(v.data + 4 * i, &x, 4);
      }
    };
    if (n == "kernel" && L != 3) {  // [N, Kp] packed
      const std::size_t N = v.dims[0], Kp = v.dims[1], K = L == 0 ? 27 : L == 2 ? 54 : 16;
      std::vector<std::int8_t> w(N * K);
      for (std::size_t j = 0; j < N; ++j)
        for (std::size_t k = 0; k < K; ++k) w[j * K + k] = std::int8_t(int((j * 37 + k * 11 + L) % 255) - 127);
      (void)Kp;
      i8::pack(K, N, w.data(), K, reinterpret_cast<std::int8_t*>(v.data));
      sums[L].assign(N, 0);
      for (std::size_t j = 0; j < N; ++j)
        for (std::size_t k = 0; k < K; ++k) sums[L][j] += w[j * K + k];
    } else if (n == "kernel_scale") {
      f32([&](std::size_t i) { return 0.001 * double(i + 1 + L); });
    } else if (n == "bias") {
      if (L == 2)
        f32([&](std::size_t i) { return 0.25 * double(int(i % 5) - 2); });
      else
        i32([&](std::size_t i) { return std::int32_t(i * 13 % 29) - 14; });
    } else if (n == "input_scale" || n == "output_scale") {
      f32([&](std::size_t) { return n == "input_scale" ? 0.0125 + 0.001 * double(L) : 0.05 + 0.002 * double(L); });
    } else if (n == "input_zero_point" || n == "output_zero_point") {
      i32([&](std::size_t) { return n == "input_zero_point" ? -3 - std::int32_t(L) : -128; });
    } else if (n == "output_multiplier") {
      i32([&](std::size_t i) { return (1 << 30) + std::int32_t(i) * 4099; });
    } else if (n == "output_shift") {
      i32([&](std::size_t i) { return -7 - std::int32_t(i % 3); });
    } else if (n == "saturated") {
      i32([&](std::size_t i) { return std::int32_t(i * 5 + L); });
    }
  });
  // the row sums after the kernels (kernel_sum precedes the kernel in each layer's buffers)
  m.for_each_variable([&](const ctnn::variable_ref& v) {
    if (v.name == "kernel_sum" && v.layer != 3) std::memcpy(v.data, sums[v.layer].data(), 4 * v.extent);
  });
}
}  // namespace int8_fixture
