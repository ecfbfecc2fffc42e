// tests/quantization/test_int8.cpp — backends/cpu/int8.hpp: every path equals the scalar
// reference bit for bit, on every architecture this CPU runs, for sizes that are not multiples
// of the vector width and for the extremes (-128 / 127 activations, +-127 weights).
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/int8.hpp>
#include <ctnn/backends/cpu/int8_block.hpp>
#include <ctnn/backends/cpu/int8_conv.hpp>
#include <ctnn/layers/padding.hpp>
#include <ctnn/quantization/arithmetic.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/archs.hpp"

namespace i8 = ctnn::kernels::cpu::int8;

namespace {
std::string path_name(i8::int8_path p) {
  return p == i8::int8_path::vnni      ? "vnni"
         : p == i8::int8_path::vnni256 ? "vnni256"
         : p == i8::int8_path::avx2    ? "avx2"
         : p == i8::int8_path::avx2_u8 ? "avx2_u8"
                                       : "scalar";
}
// The weights' largest magnitude for a weight range: 127, or reduce_range's 64.
constexpr int wmax_of(i8::weight_range r) { return r == i8::weight_range::reduced ? i8::reduced_weight_max : 127; }
// R: the weights' range (reduced: weights in [-64, 64], the avx2_u8 path where full ones take avx2).
// fill 1: -128 activations, -wmax weights; 2: 127 and wmax; 3: activations alternating 127 / -128
// (every int16 pair at its largest magnitude); 4: 127 activations, -wmax weights (avx2_u8's most
// negative pair, 2 x 255 x -64).
template <class Arch, i8::weight_range R = i8::weight_range::full>
void check_sizes(std::size_t M, std::size_t N, std::size_t K, int fill) {
  std::mt19937 g(unsigned(M * 131 + N * 17 + K));
  constexpr int wm = wmax_of(R);
  std::uniform_int_distribution<int> da(-128, 127), dw(-wm, wm);
  const std::size_t kp = i8::padded_k(K);
  std::vector<std::int8_t> a(M * kp), w(N * K), packed(i8::packed_bytes(K, N));
  for (auto& v : a) v = std::int8_t(fill == 0 ? da(g) : fill == 1 ? -128 : 127);  // the padding too: any value
  for (auto& v : w) v = std::int8_t(fill == 0 ? dw(g) : fill == 1 || fill == 4 ? -wm : wm);
  if (fill == 3)  // alternating extremes: every int16 pair at its largest magnitude
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::int8_t(i % 2 ? 127 : -128);
  i8::pack(K, N, w.data(), K, packed.data());
  std::vector<std::int8_t> back(N * K);
  i8::unpack(K, N, packed.data(), back.data());
  REQUIRE(back == w);
  std::vector<std::int32_t> want(M * N), got(M * N, 12345), got_sums(M * N, 12345), sums(N);
  i8::reference::gemm_s8(M, N, K, a.data(), kp, w.data(), K, want.data(), N);
  i8::gemm_s8<Arch, R>(M, N, K, a.data(), kp, packed.data(), nullptr, got.data(), N);
  i8::packed_sums(N, K, packed.data(), sums.data());
  i8::gemm_s8<Arch, R>(M, N, K, a.data(), kp, packed.data(), sums.data(), got_sums.data(), N);
  INFO("M=" << M << " N=" << N << " K=" << K << " fill=" << fill);
  CHECK(got == want);
  CHECK(got_sums == want);
}
}  // namespace

namespace {
// A K x N kernel keeping about `density` of its R x C blocks (every other block column empty when
// `gaps`), int8 weights in the kept blocks (fill as check_sizes), packed into the block-sparse
// storage; the gemm of every path against reference::gemm_s8 on the dense kernel.
template <class Arch, std::size_t R, std::size_t C>
void check_block(std::size_t M, std::size_t N, std::size_t K, double density, bool gaps, int fill) {
  namespace bs = i8::block;
  std::mt19937 g(unsigned(M * 131 + N * 17 + K + R * 7 + C));
  std::uniform_int_distribution<int> da(-128, 127), dw(-127, 127);
  std::bernoulli_distribution keep_d(density);
  const std::size_t KB = K / R, NC = N / C;
  std::vector<std::uint8_t> keep(KB * NC);
  std::size_t nb = 0;
  for (std::size_t kb = 0; kb < KB; ++kb)
    for (std::size_t jb = 0; jb < NC; ++jb) nb += keep[kb * NC + jb] = !(gaps && jb % 2) && keep_d(g);
  std::vector<std::int8_t> w(N * K, 0), a(M * K);
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t k = 0; k < K; ++k)
      if (keep[k / R * NC + j / C]) w[j * K + k] = std::int8_t(fill == 0 ? dw(g) : fill == 1 ? -127 : 127);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::int8_t(fill == 0 ? da(g) : fill == 1 ? -128 : i % 2 ? 127 : -128);
  const std::size_t cap = bs::groups_for(K, N, nb, R, C);
  std::vector<std::int8_t> values(cap * 4 * C + 1);
  std::vector<std::uint16_t> inputs(cap * bs::inputs_per_group(R) + 1);
  std::vector<std::uint32_t> starts(NC + 1);
  const std::size_t used = bs::pack(w.data(), keep.data(), K, N, R, C, cap, values.data(), inputs.data(), starts.data());
  INFO("R=" << R << " C=" << C << " M=" << M << " N=" << N << " K=" << K << " blocks=" << nb << " fill=" << fill);
  REQUIRE(used <= cap);
  CHECK(bs::validate(starts.data(), inputs.data(), K, N, R, C, cap) == "");
  std::vector<std::int8_t> back(N * K);
  bs::unpack(K, N, R, C, values.data(), inputs.data(), starts.data(), back.data());
  REQUIRE(back == w);
  std::vector<std::int32_t> sums(N), want(M * N), got(M * N, 12345);
  bs::column_sums(N, C, values.data(), starts.data(), sums.data());
  i8::reference::gemm_s8(M, N, K, a.data(), K, w.data(), K, want.data(), N);
  bs::gemm<R, C, Arch>(M, N, a.data(), K, values.data(), inputs.data(), starts.data(), sums.data(), got.data(), N);
  CHECK(got == want);
}
}  // namespace

TEST_CASE("int8 block-sparse gemm: every path equals the reference bit for bit") {
  const int ran = ctnn::test::for_each_arch("int8 block gemm", []<class Arch>(Arch, const char* name) {
    MESSAGE(std::string(name) << " takes the " << path_name(i8::block::path_of<16, Arch>()) << " path (C = 16), "
                              << path_name(i8::block::path_of<4, Arch>()) << " (C = 4)");
    for (std::size_t M : {1, 2, 3, 5, 64})
      for (double d : {0.0, 0.2, 0.6, 1.0}) {
        check_block<Arch, 1, 16>(M, 48, 37, d, M == 3, 0);
        check_block<Arch, 1, 8>(M, 24, 20, d, M == 2, 0);
        check_block<Arch, 4, 4>(M, 20, 36, d, M == 3, 0);
        check_block<Arch, 4, 16>(M, 32, 24, d, M == 5, 0);
        check_block<Arch, 2, 8>(M, 16, 10, d, false, 0);
        check_block<Arch, 1, 3>(M, 9, 7, d, false, 0);
      }
    check_block<Arch, 1, 16>(4, 256, 784, 0.2, false, 0);
    check_block<Arch, 4, 4>(5, 128, 256, 0.2, false, 0);
    for (int fill : {1, 2}) {
      check_block<Arch, 1, 16>(5, 32, 784, 1.0, false, fill);  // 784 products of -128 x -127 per unit
      check_block<Arch, 4, 4>(5, 8, 784, 1.0, false, fill);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 block-sparse storage: capacity, padding rows and the index checks") {
  namespace bs = i8::block;
  static_assert(bs::groups_for(784, 256, 100, 4, 4) == 100 && bs::groups_for(784, 256, 100, 1, 16) == 37);
  static_assert(bs::groups_for(8, 16, 1, 1, 16) == 1 && bs::inputs_per_group(4) == 1 && bs::inputs_per_group(2) == 4);
  // 1x4 blocks of an 8 x 8 kernel: column 0 keeps rows 1, 2, 6 (one group, padded with row 6 again),
  // column 1 rows 0..4 (two groups)
  std::vector<std::uint8_t> keep(16, 0);
  for (std::size_t k : {1, 2, 6}) keep[k * 2 + 0] = 1;
  for (std::size_t k : {0, 1, 2, 3, 4}) keep[k * 2 + 1] = 1;
  std::vector<std::int8_t> w(64, 0);
  for (std::size_t j = 0; j < 8; ++j)
    for (std::size_t k = 0; k < 8; ++k)
      if (keep[k * 2 + j / 4]) w[j * 8 + k] = std::int8_t(1 + j + 8 * k);
  std::vector<std::int8_t> values(4 * 16);
  std::vector<std::uint16_t> inputs(4 * 4);
  std::uint32_t starts[3];
  CHECK(bs::pack(w.data(), keep.data(), 8, 8, 1, 4, 2, values.data(), inputs.data(), starts) == 3);  // over capacity
  REQUIRE(bs::pack(w.data(), keep.data(), 8, 8, 1, 4, 4, values.data(), inputs.data(), starts) == 3);
  CHECK(std::vector<std::uint32_t>(starts, starts + 3) == std::vector<std::uint32_t>{0, 1, 3});
  CHECK(std::vector<std::uint16_t>(inputs.begin(), inputs.begin() + 12) ==
        std::vector<std::uint16_t>{1, 2, 6, 6, 0, 1, 2, 3, 4, 4, 4, 4});
  CHECK(values[3] == 0);                  // unit 0's padding row
  CHECK(values[(0 * 4 + 1) * 4 + 2] == 1 + 1 + 48);  // unit 1, input 6
  CHECK(bs::validate(starts, inputs.data(), 8, 8, 1, 4, 4) == "");
  inputs[5] = 9;
  CHECK(bs::validate(starts, inputs.data(), 8, 8, 1, 4, 4) ==
        "input 5 (group 1, block column 1) is 9, but the layer has 8 inputs");
  inputs[5] = 1;
  inputs[6] = 0;
  CHECK(bs::validate(starts, inputs.data(), 8, 8, 1, 4, 4) ==
        "input 6 (group 1, block column 1) is 0, below the one before (1)");
  inputs[6] = 2;
  starts[2] = 5;
  CHECK(bs::validate(starts, inputs.data(), 8, 8, 1, 4, 4) == "block column 1 ends at group 5, past the 4 groups stored");
  starts[2] = 0;
  CHECK(bs::validate(starts, inputs.data(), 8, 8, 1, 4, 4) == "block column 1 ends at group 0, before it starts (1)");
  std::uint16_t four[2] = {0, 6};  // R % 4 == 0: one input per group, a multiple of 4
  const std::uint32_t one[2] = {0, 2};
  CHECK(bs::validate(one, four, 8, 4, 4, 4, 2) ==
        "input 1 (group 1, block column 0) is 6, but the layer has 8 inputs (and a group starts at a multiple of 4)");
  four[1] = 0;
  CHECK(bs::validate(one, four, 8, 4, 4, 4, 2) == "input 1 (group 1, block column 0) is 0, not above the one before (0)");
}

TEST_CASE("int8 packed layout: panels of 16 columns, groups of 4 k, the last panel N % 16 wide") {
  static_assert(i8::padded_k(1) == 4 && i8::padded_k(784) == 784 && i8::padded_k(785) == 788);
  static_assert(i8::packed_bytes(784, 10) == 7840 && i8::packed_bytes(7, 3) == 24);
  static_assert(i8::packed_index(8, 20, 0, 0) == 0 && i8::packed_index(8, 20, 0, 3) == 3 &&
                i8::packed_index(8, 20, 1, 0) == 4 && i8::packed_index(8, 20, 0, 4) == 64);
  static_assert(i8::packed_index(8, 20, 16, 0) == 128 && i8::packed_index(8, 20, 17, 5) == 128 + 16 + 4 + 1);
}

TEST_CASE("int8 gemm_s8: every path equals the reference bit for bit") {
  const int ran = ctnn::test::for_each_arch("int8 gemm_s8", []<class Arch>(Arch, const char* name) {
    MESSAGE(std::string(name) << " takes the " << path_name(i8::int8_path_of<Arch>()) << " path");
    for (std::size_t K : {1, 3, 7, 32, 33, 65, 255, 784})
      for (std::size_t N : {1, 5, 10, 16, 17, 40, 67})
        for (std::size_t M : {1, 3, 4, 5, 9}) check_sizes<Arch>(M, N, K, 0);
    check_sizes<Arch>(64, 70, 37, 0);
    // the avx2 path's int16 tiles (4 rows) and the rows after them, the layers' shapes
    for (std::size_t M : {6, 7, 8, 63, 64}) {
      check_sizes<Arch>(M, 256, 784, 0);
      check_sizes<Arch>(M, 128, 256, 0);
    }
    for (int fill : {1, 2, 3}) {
      check_sizes<Arch>(3, 6, 784, fill);
      check_sizes<Arch>(5, 33, 97, fill);
      check_sizes<Arch>(9, 48, 784, fill);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 gemm_s8 on reduce_range weights ([-64, 64]): every path equals the reference bit for bit") {
  constexpr auto reduced = i8::weight_range::reduced;
  const int ran = ctnn::test::for_each_arch("int8 gemm_s8 reduced", []<class Arch>(Arch, const char* name) {
    MESSAGE(std::string(name) << " takes the " << path_name(i8::int8_path_of<Arch, reduced>()) << " path");
    for (std::size_t K : {1, 3, 7, 32, 33, 65, 255, 784})
      for (std::size_t N : {1, 5, 10, 16, 17, 40, 67})
        for (std::size_t M : {1, 3, 4, 5, 9}) check_sizes<Arch, reduced>(M, N, K, 0);
    check_sizes<Arch, reduced>(64, 70, 37, 0);
    for (std::size_t M : {6, 7, 8, 63, 64}) {
      check_sizes<Arch, reduced>(M, 256, 784, 0);
      check_sizes<Arch, reduced>(M, 128, 256, 0);
    }
    for (int fill : {1, 2, 3, 4}) {
      check_sizes<Arch, reduced>(3, 6, 784, fill);
      check_sizes<Arch, reduced>(5, 33, 97, fill);
      check_sizes<Arch, reduced>(9, 48, 784, fill);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 gemm_s8: the extremes by hand") {
  // K = 784 products of -128 * -127 = 16256 each: 12,742,704 (no int16 saturation on any path)
  std::vector<std::int8_t> a(784, -128), w(784, -127);
  std::int32_t c = 0;
  i8::gemm_s8(1, 1, 784, a.data(), 784, w.data(), nullptr, &c, 1);  // one column: packed == plain
  CHECK(c == 784 * 16256);
  std::fill(w.begin(), w.end(), std::int8_t(127));
  i8::gemm_s8(1, 1, 784, a.data(), 784, w.data(), nullptr, &c, 1);
  CHECK(c == -784 * 16256);
}

TEST_CASE("int8: the path rule") {
  CHECK(i8::int8_path_of<xsimd::sse2>() == i8::int8_path::scalar);
  // the 256-bit VNNI path where the build encodes it (AVX-VNNI, or AVX512_VNNI with AVX512VL) and
  // this CPU runs it, else pmaddubsw
  const auto v256 = i8::vnni256_compiled && i8::cpu_has_vnni256() ? i8::int8_path::vnni256 : i8::int8_path::avx2;
  if constexpr (xsimd::fma3<xsimd::avx2>::supported()) CHECK(i8::int8_path_of<xsimd::fma3<xsimd::avx2>>() == v256);
  if constexpr (xsimd::avx512bw::supported())
    CHECK(i8::int8_path_of<xsimd::avx512bw>() ==
          (i8::vnni_compiled && i8::cpu_has_avx512vnni() ? i8::int8_path::vnni : v256));
  // reduce_range weights: avx2_u8 where full ones take avx2, the other paths unchanged
  constexpr auto reduced = i8::weight_range::reduced;
  CHECK(i8::int8_path_of<xsimd::sse2, reduced>() == i8::int8_path::scalar);
  if constexpr (xsimd::fma3<xsimd::avx2>::supported())
    CHECK(i8::int8_path_of<xsimd::fma3<xsimd::avx2>, reduced>() ==
          (v256 == i8::int8_path::avx2 ? i8::int8_path::avx2_u8 : v256));
}

TEST_CASE("int8 quantize: the vector rounding equals quantization::quantize element by element") {
  std::vector<float> x;
  for (int k = -400; k <= 400; ++k) x.push_back(float(k) * 0.5f);  // every tie of scale 1
  for (int k = -400; k <= 400; ++k) {
    x.push_back(std::nextafter(float(k) * 0.5f, 1e9f));
    x.push_back(std::nextafter(float(k) * 0.5f, -1e9f));
  }
  std::mt19937 g(3);
  std::uniform_real_distribution<float> d(-300.0f, 300.0f);
  for (int k = 0; k < 2000; ++k) x.push_back(d(g));
  // the rounding's edges: the float below 0.5, ties and neighbours at every magnitude up to 2^24
  // (from 2^23 up every float is an integer), subnormals and the largest float
  for (float t = 0.5f; t < 2e7f; t *= 2.0f)
    for (float v : {t, std::nextafter(t, 0.0f), std::nextafter(t, 1e9f), t + 0.5f, t * 1.5f})
      for (float sgn : {1.0f, -1.0f}) x.push_back(sgn * v);
  x.push_back(std::numeric_limits<float>::denorm_min());
  x.push_back(-std::numeric_limits<float>::denorm_min());
  x.push_back(std::numeric_limits<float>::max());
  x.push_back(std::numeric_limits<float>::lowest());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  const int ran = ctnn::test::for_each_arch("int8 quantize", [&]<class Arch>(Arch, const char*) {
    // (1e-40: a subnormal scale, 3e38: one whose inverse is subnormal; both divide throughout)
    for (float scale : {1.0f, 0.5f, 0.0123f, 3.0f, 131072.0f, 1e-3f, 1e-40f, 3e38f})
      for (std::int32_t zp : {0, -128, 17}) {
        std::vector<std::int8_t> got(x.size());
        const std::size_t clamped = i8::quantize<Arch>(x.data(), x.size(), scale, zp, -128, 127, got.data());
        std::size_t bad = 0, beyond = 0;  // beyond: the saturated values (infinities too, NaN not)
        for (std::size_t i = 0; i < x.size(); ++i) {
          bad += got[i] != ctnn::quantization::quantize(x[i], {scale, zp});
          const double r = double(std::round(x[i] / scale)) + zp;  // the float quotient, as the kernel
          beyond += r < -128 || r > 127;
        }
        CHECK(bad == 0);
        CHECK(clamped == beyond);
      }
  });
  CHECK(ran >= 1);
}

// quantize_u8 stores quantize's values + 128 (the bytes ^ 0x80), and both clamp to a range narrower
// than int8's (the dynamic-range rows' [-127, 127], a relu-like floor): against the scalar rule
// element by element, the same count; lengths around the vector loops' steps (64 and 32 values) and
// values near ties mixed in, so that steps take both the packs and the division.
TEST_CASE("int8 quantize_u8 and narrower clamps follow the scalar rule") {
  std::mt19937 g(5);
  std::uniform_real_distribution<float> d(-200.0f, 200.0f);
  std::vector<float> base;
  for (int k = 0; k < 700; ++k) base.push_back(d(g));
  for (int k = 0; k < 40; ++k) base.push_back((float(k) - 20.0f + 0.5f) * 0.25f);  // ties at scale 0.25
  base.push_back(std::numeric_limits<float>::quiet_NaN());
  base.push_back(std::numeric_limits<float>::infinity());
  base.push_back(-std::numeric_limits<float>::infinity());
  base.push_back(3e9f);
  base.push_back(-3e9f);
  std::shuffle(base.begin(), base.end(), g);
  // whole steps of values that saturate whatever their rounding (the AVX2 steps' fixed tie margin
  // from |x / scale| >= 512 on): ties and integers beyond 511 at scale 0.25, to 2^31
  for (float k : {511.0f, 512.0f, 600.0f, 1000.0f, 1048576.0f, 16777216.0f, 2147483520.0f, 2147483648.0f})
    for (float sgn : {1.0f, -1.0f}) {
      base.push_back(sgn * (k + (k < 16777216.0f ? 0.5f : 0.0f)) * 0.25f);
      base.push_back(sgn * k * 0.25f);
    }
  for (int k = 0; k < 32; ++k) base.push_back(float(k % 2 ? -1 : 1) * (700.5f + float(k)) * 0.25f);
  const int ran = ctnn::test::for_each_arch("int8 quantize_u8", [&]<class Arch>(Arch, const char* name) {
    std::size_t bad = 0, bad_count = 0, runs = 0;
    for (std::size_t n : {std::size_t(1), std::size_t(31), std::size_t(64), std::size_t(100), std::size_t(129), base.size()})
      for (float scale : {0.25f, 1.0f / 255.0f, 0.7f, 1e-40f})
        for (std::int32_t zp : {0, -128, 17})
          for (auto [lo, hi] : {std::pair{-128, 127}, std::pair{-127, 127}, std::pair{std::max(-128, zp), 127}, std::pair{-20, 90}}) {
            std::vector<float> x(base.begin(), base.begin() + std::ptrdiff_t(n));
            if (scale == 1.0f / 255.0f)
              for (auto& v : x) v = v / 400.0f + 0.5f;  // mostly within [0, 1]: few saturate
            std::vector<std::int8_t> q(n, 5);
            std::vector<std::uint8_t> u(n, 5);
            const std::size_t c8 = i8::quantize<Arch>(x.data(), n, scale, zp, lo, hi, q.data());
            const std::size_t cu = i8::quantize_u8<Arch>(x.data(), n, scale, zp, lo, hi, u.data());
            std::size_t beyond = 0;
            for (std::size_t i = 0; i < n; ++i) {
              const float r = std::round(x[i] / scale), vz = r + float(zp);
              const bool number = r == r;
              beyond += number && (vz < float(lo) || vz > float(hi));
              const std::int32_t want = number ? std::int32_t(std::min(std::max(vz, float(lo)), float(hi))) : zp;
              bad += q[i] != want;
              bad += u[i] != std::uint8_t(want + 128);
            }
            bad_count += (c8 != beyond) + (cu != beyond);
            ++runs;
          }
    INFO(std::string(name) << ": " << runs << " runs");
    CHECK(bad == 0);
    CHECK(bad_count == 0);
  });
  CHECK(ran >= 1);
}

// The vector forms take x * (1 / scale) where no half-integer can lie between it and the quotient
// (int8.hpp, quantize): values around every tie at many scales, a few ulp from it either way, whole
// vectors of them and ones mixed with values far from a tie (a vector with one near a tie is
// divided again), against the scalar rule element by element.
TEST_CASE("int8 quantize by the reciprocal: every value near a tie follows the division") {
  std::mt19937 g(11);
  std::uniform_real_distribution<float> exponent(-20.0f, 12.0f), far(-300.0f, 300.0f);
  std::vector<float> scales = {1.0f / 255.0f, 0.1f, 0.3f, 0.07f, 2.0f / 255.0f};
  for (int k = 0; k < 60; ++k) scales.push_back(std::exp2(exponent(g)));
  const int ran = ctnn::test::for_each_arch("int8 quantize near ties", [&]<class Arch>(Arch, const char* name) {
    std::size_t bad = 0, bad_count = 0, values = 0;
    for (float scale : scales) {
      std::vector<float> x;
      for (int k = -300; k <= 300; k += 3) {
        float v = (float(k) + 0.5f) * scale;
        for (int step = 0; step < 4; ++step) v = std::nextafter(v, -1e30f);
        for (int step = 0; step < 9; ++step, v = std::nextafter(v, 1e30f)) {
          x.push_back(v);
          x.push_back(far(g) * scale);  // mixed with values far from a tie
        }
      }
      for (std::int32_t zp : {0, -128, 3}) {
        std::vector<std::int8_t> got(x.size());
        const std::size_t clamped = i8::quantize<Arch>(x.data(), x.size(), scale, zp, -128, 127, got.data());
        std::size_t beyond = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
          bad += got[i] != ctnn::quantization::quantize(x[i], {scale, zp});
          const double r = double(std::round(x[i] / scale)) + zp;
          beyond += r < -128 || r > 127;
        }
        bad_count += clamped != beyond;
        values += x.size();
      }
    }
    INFO(std::string(name) << ": " << values << " values");
    CHECK(bad == 0);
    CHECK(bad_count == 0);
  });
  CHECK(ran >= 1);
}

// The AVX2 and AVX-512 forms' common step for int8's range (int8.hpp, quantize: y = x r + c on a
// grid of 2^-15, its fraction and range tested for 32 values (AVX2) or 64 (AVX-512) at once, else
// the step is computed again): each value of interest alone in 64 values (so alone in a step of
// either form) with 63 that the step takes (a quarter from a tie, within int8), so that the test
// of that one value decides. Values whose quotient is a few grid
// units and ulp from every tie (at the ends of int8: -128.5 - zp, 127.5 - zp) and from the
// grid's window [256, 512) (q + 128 = 0 and 255, the first values beyond), ties, +-0, both
// NaNs, infinities, the largest floats; scales with huge and tiny normal inverses, a subnormal
// inverse (divided throughout), zero points at both ends; quantize and quantize_u8 against the
// scalar rule element by element, and the saturation count.
TEST_CASE("int8 quantize's int8-range steps: values at the grid's edges follow the division") {
  std::mt19937 g(29);
  const int ran = ctnn::test::for_each_arch("int8 quantize grid edges", [&]<class Arch>(Arch, const char* name) {
    std::size_t bad = 0, bad_count = 0, values = 0;
    for (float scale : {1.0f / 255.0f, 0.0123f, 0.3f, 1.0f, 7.0f, 1e-30f, 1e30f, 0x1.8p-126f, 3e38f})
      for (std::int32_t zp : {-128, -1, 0, 17, 127}) {
        std::vector<float> special;
        // quotients k + 0.5 + j 2^-16 (half the grid's unit) around the ties at and beyond int8's
        // ends and inside, then each as a float and its neighbours a few ulp away
        for (int k : {-130 - zp, -129 - zp, -128 - zp, -127 - zp, -1 - zp, -1, 0, 126 - zp, 127 - zp, 128 - zp})
          for (int j = -12; j <= 12; ++j) {
            const double t = (double(k) + 0.5 + double(j) * 0x1p-16) * double(scale);
            float v = float(t);
            if (!std::isfinite(v) || v == 0.0f) continue;
            for (int u = 0; u < 3; ++u) v = std::nextafter(v, -std::numeric_limits<float>::infinity());
            for (int u = 0; u < 7; ++u, v = std::nextafter(v, std::numeric_limits<float>::infinity())) special.push_back(v);
          }
        for (float v : {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(),
                        std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min()})
          special.push_back(v);
        for (float m : {256.0f, 512.0f, 1024.0f, 32768.0f, 2147483648.0f, 1e10f})  // far beyond int8
          for (float sgn : {1.0f, -1.0f}) special.push_back(sgn * m * scale);
        std::uniform_int_distribution<int> inside(-128 - zp, 127 - zp);
        std::vector<float> x;
        for (float v : special) {
          const std::size_t at = std::size_t(g() % 64);
          for (std::size_t u = 0; u < 64; ++u)
            x.push_back(u == at ? v : (float(inside(g)) + (g() % 2 ? 0.25f : -0.25f)) * scale);
        }
        x.push_back(special.front());  // a tail
        std::vector<std::int8_t> q(x.size());
        std::vector<std::uint8_t> b(x.size());
        const std::size_t c8 = i8::quantize<Arch>(x.data(), x.size(), scale, zp, -128, 127, q.data());
        const std::size_t cu = i8::quantize_u8<Arch>(x.data(), x.size(), scale, zp, -128, 127, b.data());
        std::size_t beyond = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
          const std::int32_t want = ctnn::quantization::quantize(x[i], {scale, zp});
          bad += q[i] != want;
          bad += b[i] != std::uint8_t(std::int32_t(want) + 128);
          const double r = double(std::round(x[i] / scale)) + zp;
          beyond += r < -128 || r > 127;
        }
        bad_count += (c8 != beyond) + (cu != beyond);
        values += x.size();
      }
    INFO(std::string(name) << ": " << values << " values");
    CHECK(bad == 0);
    CHECK(bad_count == 0);
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 requantize_row equals multiply_by_quantized_multiplier, the zero point and the clamp") {
  std::mt19937 g(5);
  std::uniform_int_distribution<std::int32_t> acc_d(-3000000, 3000000);
  std::uniform_real_distribution<double> m_d(-12.0, 2.0);
  const std::size_t N = 1000;
  std::vector<std::int32_t> acc(N), off(N), mult(N), shift(N);
  for (std::size_t j = 0; j < N; ++j) {
    acc[j] = acc_d(g);
    off[j] = acc_d(g) / 10;
    const auto m = ctnn::quantization::quantize_multiplier(std::pow(10.0, m_d(g)) / 1000.0);
    mult[j] = m.q;
    shift[j] = m.shift;
  }
  // multipliers above 1 (a left shift: the output scale below input scale x weight scale)
  for (std::size_t j = 200; j < 264; ++j) {
    const auto m = ctnn::quantization::quantize_multiplier(1.0 + double(j % 7) * 3.3);
    mult[j] = m.q;
    shift[j] = m.shift;
    acc[j] /= 2000;
    off[j] /= 2000;
  }
  CHECK(shift[205] > 0);
  // ties of the rounding shift, positive and negative, in the vector part and the tail (N % 16 = 8)
  for (std::size_t j : {0, 1, 995, 996}) {
    acc[j] = j % 2 ? -7 : 7;
    off[j] = 0;
    mult[j] = 1 << 30;
    shift[j] = -1;
  }
  // every path: the 16-lane AVX-512 form (avx512bw, avx512f) and the loops (the others)
  const int ran = ctnn::test::for_each_arch("int8 requantize_row", [&]<class Arch>(Arch, const char* name) {
    for (std::int32_t zp : {-128, -5, 40})
      for (bool relu : {false, true}) {
        INFO(name << ", zero point " << zp << ", relu " << relu);
        const std::int32_t lo = relu ? std::max(-128, zp) : -128;
        std::vector<float> y(N);
        const std::size_t clamped = i8::requantize_row<float, Arch>(N, acc.data(), off.data(), mult.data(),
                                                                    shift.data(), zp, lo, 0.25f, y.data(), relu);
        std::size_t bad = 0, beyond = 0;  // beyond: saturated (above 127; below -128 without a relu)
        for (std::size_t j = 0; j < N; ++j) {
          const std::int32_t r =
              ctnn::quantization::multiply_by_quantized_multiplier(acc[j] + off[j], mult[j], shift[j]) + zp;
          const std::int32_t q = std::clamp(r, lo, 127);
          bad += y[j] != 0.25f * float(q - zp);
          beyond += r > 127 || (!relu && r < -128);
        }
        CHECK(bad == 0);
        CHECK(clamped == beyond);
        CHECK(beyond > 0);
        // the int8 output (to the next full-integer layer): the clamped values themselves, the same count
        std::vector<std::int8_t> y8(N);
        CHECK(i8::requantize_row<std::int8_t, Arch>(N, acc.data(), off.data(), mult.data(), shift.data(), zp, lo,
                                                    0.25f, y8.data(), relu) == clamped);
        std::size_t bad8 = 0;
        for (std::size_t j = 0; j < N; ++j) bad8 += y[j] != 0.25f * float(std::int32_t(y8[j]) - zp);
        CHECK(bad8 == 0);
      }
  });
  CHECK(ran >= 1);
}

// Why int8 tensors between two full-integer layers change no output (quantized_t's int8_io): the
// float path dequantizes an int8 value q with the producer's output parameters and the next layer
// quantizes it with its input parameters, the same ones; that round trip is the identity on
// every int8 value, for every zero point, at scales from 1e-30 to 1e30 (calibrated ones: the
// range / 255), in quantization::quantize and in every path of int8::quantize.
TEST_CASE("int8: quantize(dequantize(q)) == q for every int8 value, zero point and scale") {
  std::vector<float> scales;
  for (int e = -30; e <= 30; ++e) scales.push_back(float(std::pow(10.0, e)));
  std::mt19937 g(11);
  std::uniform_real_distribution<double> lo_d(-50.0, 0.0), hi_d(0.0, 50.0);
  for (int i = 0; i < 200; ++i)
    scales.push_back(ctnn::quantization::choose_params(lo_d(g), hi_d(g)).scale);  // calibrated ones
  scales.push_back(std::nextafter(1.0f, 2.0f));
  scales.push_back(std::numeric_limits<float>::min());  // the smallest normal float (the next layer's scale, not a product)
  std::vector<float> y(256 * 256);
  std::vector<std::int8_t> q(y.size());
  const int ran = ctnn::test::for_each_arch("int8 round trip", [&]<class Arch>(Arch, const char* name) {
    std::size_t bad = 0, bad_scalar = 0, saturated = 0;
    for (float s : scales) {
      // every zero point and every value: y = s (q - zp) exactly as requantize_row forms it
      for (std::int32_t zp = -128; zp <= 127; ++zp)
        for (std::int32_t v = -128; v <= 127; ++v) {
          const std::size_t at = std::size_t(zp + 128) * 256 + std::size_t(v + 128);
          y[at] = s * float(v - zp);
          bad_scalar += ctnn::quantization::quantize(y[at], {s, zp}) != v;
        }
      for (std::int32_t zp = -128; zp <= 127; ++zp) {
        const std::size_t at = std::size_t(zp + 128) * 256;
        saturated += i8::quantize<Arch>(y.data() + at, 256, s, zp, -128, 127, q.data() + at);
        for (std::int32_t v = -128; v <= 127; ++v) bad += q[at + std::size_t(v + 128)] != v;
      }
    }
    INFO(name);
    CHECK(bad == 0);
    CHECK(bad_scalar == 0);
    CHECK(saturated == 0);
  });
  CHECK(ran >= 1);
}

namespace {
// Per-column requantization data that exercises the fused epilogue: multipliers from 1e-6 to 30
// (right and left shifts), offsets large enough that some outputs saturate both ways.
struct columns {
  std::vector<std::int32_t> off, mult, shift, bias, sums;  // off = bias - in_zp sums (wrapping)
  std::int32_t in_zp;
  explicit columns(std::size_t N, unsigned seed, double top = 0.0, double bottom = -6.0)
      : off(N), mult(N), shift(N), bias(N), sums(N), in_zp(std::int32_t(seed % 200) - 100) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<double> m_d(bottom, top);
    std::uniform_int_distribution<std::int32_t> off_d(-200000, 200000);
    for (std::size_t j = 0; j < N; ++j) {
      const auto m = ctnn::quantization::quantize_multiplier(std::pow(10.0, m_d(g)) / (j % 5 == 0 ? 1.0 : 40.0));
      mult[j] = m.q;
      shift[j] = m.shift;
      off[j] = off_d(g) / (m.shift > 0 ? 1000 : 1);
      sums[j] = off_d(g) / 100;
      bias[j] = std::int32_t(std::uint32_t(off[j]) + std::uint32_t(in_zp) * std::uint32_t(sums[j]));
    }
  }
  template <class Y>
  i8::requant<Y> epilogue(std::int32_t zp, bool relu, float scale, Y* y, std::size_t ldy) const {
    const std::int32_t lo = relu ? std::max(-128, zp) : -128;
    return {bias.data(), sums.data(), in_zp, mult.data(), shift.data(), zp, lo,
            relu ? std::numeric_limits<std::int32_t>::min() : -128, scale, y, ldy};
  }
};

// The fused product (run(e), e: an int8::requant<Y>) against the int32 sums `want` [M, N] then
// the scalar rule of each output (multiply_by_quantized_multiplier, + zp, the clamp), as int8 and
// as float, for zero points and relu on and off: bit for bit, the same saturated count; the output
// rows have a stride (ldy = N + 3) whose gap the kernel leaves alone.
template <class Run>
void check_fused(std::size_t M, std::size_t N, const std::vector<std::int32_t>& want, const columns& c, Run&& run) {
  const std::size_t ldy = N + 3;
  // (200: a zero point beyond int8, a corrupt file's: relu's floor above 127, the clamp's other form)
  for (std::int32_t zp : {-128, -3, 60, 200})
    for (bool relu : {false, true}) {
      INFO("zero point " << zp << ", relu " << relu);
      const std::int32_t lo = relu ? std::max(-128, zp) : -128;
      std::vector<std::int8_t> want8(M * ldy, 77), got8(M * ldy, 77);
      std::vector<float> wantf(M * ldy, 77.0f), gotf(M * ldy, 77.0f);
      std::size_t saturated = 0;
      for (std::size_t i = 0; i < M; ++i)
        for (std::size_t j = 0; j < N; ++j) {
          const std::int32_t r = std::int32_t(
              std::uint32_t(ctnn::quantization::multiply_by_quantized_multiplier(
                  std::int32_t(std::uint32_t(want[i * N + j]) + std::uint32_t(c.off[j])), c.mult[j], c.shift[j])) +
              std::uint32_t(zp));
          const std::int32_t q = r < lo ? lo : std::min(r, 127);
          saturated += r > 127 || (!relu && r < -128);
          want8[i * ldy + j] = std::int8_t(q);
          wantf[i * ldy + j] = 0.125f * float(q - zp);
        }
      CHECK(run(c.epilogue(zp, relu, 0.125f, got8.data(), ldy)) == saturated);
      CHECK(run(c.epilogue(zp, relu, 0.125f, gotf.data(), ldy)) == saturated);
      CHECK(got8 == want8);
      CHECK(gotf == wantf);
      if (!relu && M * N >= 64) CHECK(saturated > 0);
    }
}
}  // namespace

TEST_CASE("int8 gemm_s8_requantize: the fused requantization equals gemm_s8 then the scalar rule, every path") {
  const int ran = ctnn::test::for_each_arch("int8 fused gemm", []<class Arch>(Arch, const char* name) {
    MESSAGE(std::string(name) << " takes the " << path_name(i8::int8_path_of<Arch>()) << " path");
    for (std::size_t M : {1, 2, 3, 4, 5, 9, 12})
      for (std::size_t N : {1, 7, 10, 16, 24, 40, 64, 100, 128})
        for (std::size_t K : {0, 5, 128}) {
          INFO(std::string(name) << " M=" << M << " N=" << N << " K=" << K);
          std::mt19937 g(unsigned(M * 1000 + N * 10 + K));
          std::uniform_int_distribution<int> da(-128, 127), dw(-127, 127);
          const std::size_t kp = i8::padded_k(K);
          std::vector<std::int8_t> a(M * kp), w(N * K), packed(i8::packed_bytes(K, N));
          for (auto& v : a) v = std::int8_t(da(g));
          for (auto& v : w) v = std::int8_t(dw(g));
          i8::pack(K, N, w.data(), K, packed.data());
          std::vector<std::int32_t> want(M * N), sums(N);
          i8::reference::gemm_s8(M, N, K, a.data(), kp, w.data(), K, want.data(), N);
          i8::packed_sums(N, K, packed.data(), sums.data());
          const columns c(N, unsigned(N + K));
          check_fused(M, N, want, c, [&]<class Y>(i8::requant<Y> e) {
            return i8::gemm_s8_requantize<Y, Arch>(M, N, K, a.data(), kp, packed.data(), sums.data(), e);
          });
        }
  });
  CHECK(ran >= 1);
}

// gemm_u8_requantize on the bytes + 128 against the int32 sums then the scalar rule, on every path
// (the u8 x s8 ones take the bytes as they are, the others convert them back), full and reduced
// weights, row strides above padded_k(K).
TEST_CASE("int8 gemm_u8_requantize: the bytes + 128 give gemm_s8_requantize's outputs, every path") {
  const int ran = ctnn::test::for_each_arch("int8 fused gemm u8", []<class Arch>(Arch, const char* name) {
    const auto run_range = [&]<i8::weight_range W>(int wmax) {
      MESSAGE(std::string(name) << " takes the " << path_name(i8::int8_path_of<Arch, W>()) << " path (u8 operand "
                                << (i8::takes_u8<Arch, W>() ? "as it is)" : "converted back)"));
      for (std::size_t M : {1, 2, 3, 4, 5, 7, 12, 64})
        for (std::size_t N : {1, 7, 16, 24, 40, 128})
          for (std::size_t K : {0, 5, 128}) {
            if (M == 64 && N < 16) continue;  // (check_fused asks for a saturated output from 64 on)
            INFO(std::string(name) << " M=" << M << " N=" << N << " K=" << K << " wmax=" << wmax);
            std::mt19937 g(unsigned(M * 1000 + N * 10 + K + 11));
            std::uniform_int_distribution<int> da(-128, 127), dw(-wmax, wmax);
            const std::size_t kp = i8::padded_k(K), lda = kp + 4 * (M % 2);
            std::vector<std::int8_t> a(M * lda), w(N * K), packed(i8::packed_bytes(K, N));
            for (auto& v : a) v = std::int8_t(da(g));
            for (auto& v : w) v = std::int8_t(dw(g));
            std::vector<std::uint8_t> u(a.size());
            for (std::size_t i = 0; i < a.size(); ++i) u[i] = std::uint8_t(a[i] + 128);
            i8::pack(K, N, w.data(), K, packed.data());
            std::vector<std::int32_t> want(M * N), sums(N);
            i8::reference::gemm_s8(M, N, K, a.data(), lda, w.data(), K, want.data(), N);
            i8::packed_sums(N, K, packed.data(), sums.data());
            const columns c(N, unsigned(N + K + 5));
            check_fused(M, N, want, c, [&]<class Y>(i8::requant<Y> e) {
              return i8::gemm_u8_requantize<Y, Arch, W>(M, N, K, u.data(), lda, packed.data(), sums.data(), e);
            });
          }
    };
    run_range.template operator()<i8::weight_range::full>(127);
    run_range.template operator()<i8::weight_range::reduced>(64);
  });
  CHECK(ran >= 1);
}

namespace {
template <class Arch, std::size_t R, std::size_t C>
void check_block_fused(std::size_t M, std::size_t N, std::size_t K, double density) {
  namespace bs = i8::block;
  std::mt19937 g(unsigned(M * 131 + N * 17 + K + R * 7 + C));
  std::uniform_int_distribution<int> da(-128, 127), dw(-127, 127);
  std::bernoulli_distribution keep_d(density);
  const std::size_t KB = K / R, NC = N / C;
  std::vector<std::uint8_t> keep(KB * NC);
  std::size_t nb = 0;
  for (std::size_t kb = 0; kb < KB; ++kb)
    for (std::size_t jb = 0; jb < NC; ++jb) nb += keep[kb * NC + jb] = keep_d(g);
  std::vector<std::int8_t> w(N * K, 0), a(M * K);
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t k = 0; k < K; ++k)
      if (keep[k / R * NC + j / C]) w[j * K + k] = std::int8_t(dw(g));
  for (auto& v : a) v = std::int8_t(da(g));
  const std::size_t cap = bs::groups_for(K, N, nb, R, C);
  std::vector<std::int8_t> values(cap * 4 * C + 1);
  std::vector<std::uint16_t> inputs(cap * bs::inputs_per_group(R) + 1);
  std::vector<std::uint32_t> starts(NC + 1);
  REQUIRE(bs::pack(w.data(), keep.data(), K, N, R, C, cap, values.data(), inputs.data(), starts.data()) <= cap);
  std::vector<std::int32_t> sums(N), want(M * N);
  bs::column_sums(N, C, values.data(), starts.data(), sums.data());
  i8::reference::gemm_s8(M, N, K, a.data(), K, w.data(), K, want.data(), N);
  INFO("R=" << R << " C=" << C << " M=" << M << " N=" << N << " K=" << K << " blocks=" << nb);
  const columns c(N, unsigned(N * 3 + K), 1.0);
  check_fused(M, N, want, c, [&]<class Y>(i8::requant<Y> e) {
    return bs::gemm_requantize<R, C, Y, Arch>(M, N, a.data(), K, values.data(), inputs.data(), starts.data(),
                                              sums.data(), e);
  });
}
}  // namespace

TEST_CASE("int8 block::gemm_requantize: the fused requantization equals the sums then the scalar rule, every path") {
  const int ran = ctnn::test::for_each_arch("int8 fused block gemm", []<class Arch>(Arch, const char*) {
    for (std::size_t M : {1, 2, 3, 5, 8})
      for (double d : {0.0, 0.3, 1.0}) {
        check_block_fused<Arch, 4, 16>(M, 64, 48, d);  // the deploy example's blocks (zmm with VNNI, ymm on AVX2)
        check_block_fused<Arch, 1, 16>(M, 32, 37, d);
        check_block_fused<Arch, 1, 8>(M, 24, 20, d);   // ymm on both
        check_block_fused<Arch, 4, 4>(M, 20, 36, d);   // xmm: the unfused fallback
        check_block_fused<Arch, 1, 3>(M, 9, 7, d);     // scalar
      }
    check_block_fused<Arch, 4, 16>(1, 256, 784, 0.2);
  });
  CHECK(ran >= 1);
}

namespace {
// The implicit im2col (int8_conv.hpp: windows<G>, window_image, pack_windows) against im2col_s8
// then reference::gemm_s8 on the unpacked kernel, batch samples: the int32 sums bit for bit
// (conv_s8) and the fused requantization (conv_s8_requantize) against the scalar rule. The input
// is used in place where windows<G>::in_place (with the slack after it that over_reads needs),
// else through window_image, as quantized_conv2d does; the padding holds pad.
// offset: the kernel's byte offset from a 64-byte boundary (the layers' kernels sit on one; a caller's
// need not: the unaligned loads take it either way).
template <ctnn::kernels::conv_geometry G, class Arch, i8::weight_range R = i8::weight_range::full>
void check_conv(std::size_t batch, std::int8_t pad, std::size_t offset = 0) {
  using Win = i8::windows<G>;
  constexpr std::size_t K = G.patch(), F = G.f, rows_per = G.oh * G.ow;
  std::mt19937 g(unsigned(G.h * 1000 + G.c * 100 + F + batch));
  std::uniform_int_distribution<int> da(-128, 127), dw(-wmax_of(R), wmax_of(R));
  std::vector<std::int8_t> x(batch * G.in_size() + Win::slack), w(F * K), packed(i8::packed_bytes(K, F));
  for (auto& v : x) v = std::int8_t(da(g));
  x[0] = -128;
  x[1] = 127;
  for (auto& v : w) v = std::int8_t(dw(g));
  i8::pack(K, F, w.data(), K, packed.data());
  std::vector<std::int32_t> sums(F);
  i8::packed_sums(F, K, packed.data(), sums.data());
  // the reference: im2col_s8 (padding: pad) and the plain gemm
  const std::size_t M = batch * rows_per;
  std::vector<std::int8_t> cols(M * K);
  for (std::size_t n = 0; n < batch; ++n)
    i8::im2col_s8(G, x.data() + n * G.in_size(), pad, cols.data() + n * rows_per * K, K);
  std::vector<std::int32_t> want(M * F), got(M * F, 12345);
  i8::reference::gemm_s8(M, F, K, cols.data(), K, w.data(), K, want.data(), F);
  // the implicit operand
  std::vector<std::int8_t> image(batch * Win::image_size + Win::slack, 99);
  const std::int8_t* img = x.data();
  if (!Win::in_place) {
    i8::window_image<G>(x.data(), batch, pad, image.data());
    img = image.data();
  }
  std::vector<std::int8_t> kernel(i8::packed_bytes(Win::k, F));
  i8::pack_windows<G>(packed.data(), kernel.data());
  if constexpr (!Win::over_reads) CHECK(kernel == packed);
  // the kernel at `offset` bytes past a 64-byte boundary
  std::vector<std::int8_t> kernel_buffer(kernel.size() + 128);
  std::int8_t* at = kernel_buffer.data() + (64 - reinterpret_cast<std::uintptr_t>(kernel_buffer.data()) % 64) % 64 + offset;
  std::copy(kernel.begin(), kernel.end(), at);
  INFO("geometry " << G.h << "x" << G.w << "x" << G.c << " -> " << G.oh << "x" << G.ow << "x" << F << ", kernel "
                   << G.kh << "x" << G.kw << ", stride " << G.stride << ", padding " << G.pt << "," << G.pl
                   << ", batch " << batch << ", kernel offset " << offset);
  if (!i8::conv_s8<G, Arch, R>(img, batch, at, sums.data(), got.data(), F)) {
    CHECK(i8::int8_path_of<Arch>() == i8::int8_path::scalar);
    return;
  }
  CHECK(got == want);
  // multipliers from 2.5e-8 to 10 (left shifts, and right shifts beyond 23: the vnni tiles' own
  // store leaves those blocks to requant's put), then from 2.5e-7 to 0.98 (that store takes them all)
  for (const auto& c : {columns(F, unsigned(F + K), 1.0), columns(F, unsigned(F + K + 1), -0.01, -5.0)})
    check_fused(M, F, want, c, [&]<class Y>(i8::requant<Y> e) {
      return i8::conv_s8_requantize<G, Y, Arch, R>(img, batch, at, sums.data(), e);
    });
}
}  // namespace

TEST_CASE("int8 conv_s8: the implicit im2col equals im2col_s8 then the reference gemm bit for bit, every path") {
  using ctnn::padding;
  using ctnn::window_geometry;
  const int ran = ctnn::test::for_each_arch("int8 implicit conv", []<class Arch>(Arch, const char* name) {
    MESSAGE(std::string(name) << " takes the " << path_name(i8::int8_path_of<Arch>()) << " path");
    for (std::size_t batch : {1, 2, 5}) {
      // (batch 1 of 7x6 -> 5x4: 20 rows, the avx2 path's int16 tiles on all; batch 2 of 6x7: 40)
      // the first layer (C = 1, each kernel row re-packed to 4 bytes, read in place past the window)
      check_conv<window_geometry(12, 11, 1, 32, 3, 3, 1, padding::valid), Arch>(batch, 0);
      // KW C = 96: the layer's own kernel, in place (the CNN's second layer), 64 and 20 filters
      check_conv<window_geometry(7, 6, 32, 64, 3, 3, 1, padding::valid), Arch>(batch, 0);
      check_conv<window_geometry(6, 7, 32, 20, 3, 3, 1, padding::valid), Arch>(batch, 0);
      // padding: a bordered copy, the pad value a zero point
      check_conv<window_geometry(7, 6, 3, 5, 3, 3, 2, padding::same), Arch>(batch, -17);
      check_conv<window_geometry(5, 6, 8, 17, 3, 3, 1, padding::same), Arch>(batch, 5);
      // strides that leave the last rows and columns unread; 1x1; a wide 5x2 kernel with C = 2
      check_conv<window_geometry(9, 8, 4, 16, 2, 2, 3, padding::valid), Arch>(batch, 0);
      check_conv<window_geometry(4, 5, 7, 9, 1, 1, 1, padding::valid), Arch>(batch, 0);
      check_conv<window_geometry(8, 7, 2, 33, 5, 2, 2, padding::same), Arch>(batch, -128);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 conv_s8: the vnni path's conv tiles (6 rows x 4 panels) and their edges equal the reference, every path") {
  // int8_conv.hpp's conv_vnni: 6-row tiles over blocks of 4 full panels, then the rows left (4, then
  // 1-3) and the panels left (1-3), then the narrow panel; kernels on and off a cache line.
  // Rows a batch x positions: remainders 0-5 of 6; filters 64, 80 (4 + 1
  // panels), 100 (4 + 2 + a narrow 4), 48 (3), 24 (1 + a narrow 8); the other paths run them too.
  using ctnn::padding;
  using ctnn::window_geometry;
  const int ran = ctnn::test::for_each_arch("int8 conv tiles", []<class Arch>(Arch, const char* name) {
    MESSAGE(std::string(name) << " takes the " << path_name(i8::int8_path_of<Arch>()) << " path");
    for (std::size_t batch : {1, 2, 3}) {
      // 121 rows a sample (the CNN's second layer): 121, 242, 363 (remainders 1, 2, 3), the kernel
      // aligned and 32 or 4 bytes off
      for (std::size_t offset : {0, 32, 4})
        check_conv<window_geometry(13, 13, 32, 64, 3, 3, 1, padding::valid), Arch>(batch, 0, offset);
      // 5 x 7 = 35 rows a sample (remainders 5, 4, 3): 80 and 100 filters
      check_conv<window_geometry(7, 9, 8, 80, 3, 3, 1, padding::valid), Arch>(batch, 0, 32);
      check_conv<window_geometry(7, 9, 8, 100, 3, 3, 1, padding::valid), Arch>(batch, 0);
      // padding, stride 2, C = 3 (each kernel row re-packed to 12 bytes): 5 x 5 rows a sample
      check_conv<window_geometry(9, 9, 3, 48, 3, 3, 2, padding::same), Arch>(batch, 7);
      check_conv<window_geometry(10, 9, 5, 24, 3, 3, 1, padding::same), Arch>(batch, -128, 32);
    }
    check_conv<window_geometry(26, 26, 16, 64, 3, 3, 1, padding::valid), Arch>(1, 0, 32);  // 576 rows
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 conv_s8_requantize at the extremes: every shift, int32 limits, ties, multipliers 0 and 2^31 - 1") {
  // the vnni tiles' requantizing store (int8_conv.hpp: both roundings as one in 64-bit lanes, the
  // zero point in the sum, the term for negative products dropped after a relu) against the scalar
  // MultiplyByQuantizedMultiplier, where the products, the nudge and the rounding meet their limits:
  // zero activations, so each sum is 0 and the bias carries the value (input zero point 0); a 1x1
  // convolution of 96 filters over 5 x 4 positions (3 tiles of 6 rows, then 2 rows by gemm_vnni's)
  using ctnn::padding;
  using ctnn::window_geometry;
  constexpr auto G = window_geometry(5, 4, 8, 96, 1, 1, 1, padding::valid);
  constexpr std::size_t F = G.f, M = G.oh * G.ow;
  const std::vector<std::int32_t> xs = {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::min() + 1,
                                        -(1 << 30) - 1, -(1 << 30), -(1 << 30) + 1, -65537, -65536, -3, -2, -1, 0, 1,
                                        65535, 1 << 30, std::numeric_limits<std::int32_t>::max() - 1,
                                        std::numeric_limits<std::int32_t>::max()};
  const std::vector<std::int32_t> ms = {0, 1, 1 << 30, (1 << 30) + 1, 1518500250, std::numeric_limits<std::int32_t>::max()};
  const std::vector<std::int8_t> x(G.in_size() + i8::windows<G>::slack, 0), w(F * G.c, 3);
  std::vector<std::int8_t> packed(i8::packed_bytes(G.c, F));
  i8::pack(G.c, F, w.data(), G.c, packed.data());
  std::vector<std::int32_t> sums(F);
  i8::packed_sums(F, G.c, packed.data(), sums.data());
  const int ran = ctnn::test::for_each_arch("int8 conv requantize extremes", [&]<class Arch>(Arch, const char* name) {
    if (i8::int8_path_of<Arch>() == i8::int8_path::scalar) return;
    for (int sh = -31; sh <= 30; ++sh) {
      std::vector<std::int32_t> bias(F), mult(F), shift(F, sh), ksum(F, 0);
      for (std::size_t j = 0; j < F; ++j) {
        bias[j] = xs[j % xs.size()];
        mult[j] = ms[j / xs.size()];
      }
      for (std::int32_t zp : {5, -128, 127})
        for (bool relu : {false, true}) {
          INFO(std::string(name) << ", shift " << sh << ", zero point " << zp << ", relu " << relu);
          const std::int32_t lo = relu ? std::max(-128, zp) : -128;
          const i8::requant<std::int8_t> e8{bias.data(), ksum.data(), 0, mult.data(), shift.data(), zp, lo,
                                            relu ? std::numeric_limits<std::int32_t>::min() : -128, 0.5f, nullptr, F};
          std::vector<std::int8_t> y(M * F, 99), want(M * F);
          std::vector<float> yf(M * F, 99.0f), wantf(M * F);
          std::size_t beyond = 0;
          for (std::size_t i = 0; i < M; ++i)
            for (std::size_t j = 0; j < F; ++j) {
              const std::int32_t r = std::int32_t(
                  std::uint32_t(ctnn::quantization::multiply_by_quantized_multiplier(bias[j], mult[j], sh)) + std::uint32_t(zp));
              want[i * F + j] = std::int8_t(r < lo ? lo : std::min(r, 127));
              wantf[i * F + j] = 0.5f * float(std::int32_t(want[i * F + j]) - zp);
              beyond += r > 127 || (!relu && r < -128);
            }
          auto e = e8;
          e.y = y.data();
          CHECK(i8::conv_s8_requantize<G, std::int8_t, Arch>(x.data(), 1, packed.data(), sums.data(), e) == beyond);
          CHECK(y == want);
          i8::requant<float> ef{bias.data(), ksum.data(), 0, mult.data(), shift.data(), zp, lo, e8.low, 0.5f, yf.data(), F};
          CHECK(i8::conv_s8_requantize<G, float, Arch>(x.data(), 1, packed.data(), sums.data(), ef) == beyond);
          CHECK(yf == wantf);
        }
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 on reduce_range weights: the fused requantization and the implicit conv equal the scalar rule, every path") {
  using ctnn::padding;
  using ctnn::window_geometry;
  constexpr auto reduced = i8::weight_range::reduced;
  const int ran = ctnn::test::for_each_arch("int8 reduced fused", []<class Arch>(Arch, const char* name) {
    MESSAGE(std::string(name) << " takes the " << path_name(i8::int8_path_of<Arch, reduced>()) << " path");
    for (std::size_t M : {1, 2, 5, 12})
      for (std::size_t N : {7, 16, 40, 128})
        for (std::size_t K : {5, 128}) {
          INFO(std::string(name) << " M=" << M << " N=" << N << " K=" << K);
          std::mt19937 g(unsigned(M * 1000 + N * 10 + K + 7));
          std::uniform_int_distribution<int> da(-128, 127), dw(-64, 64);
          const std::size_t kp = i8::padded_k(K);
          std::vector<std::int8_t> a(M * kp), w(N * K), packed(i8::packed_bytes(K, N));
          for (auto& v : a) v = std::int8_t(da(g));
          for (auto& v : w) v = std::int8_t(dw(g));
          i8::pack(K, N, w.data(), K, packed.data());
          std::vector<std::int32_t> want(M * N), sums(N);
          i8::reference::gemm_s8(M, N, K, a.data(), kp, w.data(), K, want.data(), N);
          i8::packed_sums(N, K, packed.data(), sums.data());
          const columns c(N, unsigned(N + K + 3));
          check_fused(M, N, want, c, [&]<class Y>(i8::requant<Y> e) {
            return i8::gemm_s8_requantize<Y, Arch, reduced>(M, N, K, a.data(), kp, packed.data(), sums.data(), e);
          });
        }
    for (std::size_t batch : {1, 2}) {
      check_conv<window_geometry(12, 11, 1, 32, 3, 3, 1, padding::valid), Arch, reduced>(batch, 0);
      check_conv<window_geometry(7, 6, 32, 64, 3, 3, 1, padding::valid), Arch, reduced>(batch, 0);
      check_conv<window_geometry(7, 6, 3, 5, 3, 3, 2, padding::same), Arch, reduced>(batch, -17);
      check_conv<window_geometry(8, 7, 2, 33, 5, 2, 2, padding::same), Arch, reduced>(batch, -128);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 requantize_row at the extremes: every shift, int32 limits, multipliers 0 and 2^31 - 1") {
  // the vector MultiplyByQuantizedMultiplier (16 and 8 lanes) against the scalar one where the
  // 64-bit products, the nudge and the rounding shift meet their limits
  std::vector<std::int32_t> xs = {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::min() + 1,
                                  -1 << 30, -(1 << 30) - 1, -65536, -3, -2, -1, 0, 1, 2, 3, 65535, 1 << 30,
                                  std::numeric_limits<std::int32_t>::max() - 1, std::numeric_limits<std::int32_t>::max()};
  std::vector<std::int32_t> ms = {0, 1, 1 << 30, (1 << 30) + 1, 1518500250, std::numeric_limits<std::int32_t>::max()};
  std::vector<std::int32_t> acc, off, mult, shift;
  for (int sh = -31; sh <= 30; ++sh)
    for (std::int32_t m : ms)
      for (std::int32_t x : xs) {
        acc.push_back(x);
        off.push_back(sh % 3 == 0 ? 0 : std::int32_t(0u - std::uint32_t(x)));  // -x, wrapping: 0 after the add
        mult.push_back(m);
        shift.push_back(sh);
      }
  const std::size_t N = acc.size();
  const int ran = ctnn::test::for_each_arch("int8 requantize_row extremes", [&]<class Arch>(Arch, const char* name) {
    for (bool relu : {false, true}) {
      INFO(std::string(name) << ", relu " << relu);
      std::vector<std::int8_t> y(N);
      const std::int32_t zp = 5, lo = relu ? 5 : -128;
      const std::size_t clamped = i8::requantize_row<std::int8_t, Arch>(N, acc.data(), off.data(), mult.data(),
                                                                        shift.data(), zp, lo, 1.0f, y.data(), relu);
      std::size_t bad = 0, beyond = 0;
      for (std::size_t j = 0; j < N; ++j) {
        const std::int32_t x = std::int32_t(std::uint32_t(acc[j]) + std::uint32_t(off[j]));
        // + zp wrapping, as the kernels (a result near 2^31)
        const std::int32_t r = std::int32_t(
            std::uint32_t(ctnn::quantization::multiply_by_quantized_multiplier(x, mult[j], shift[j])) + std::uint32_t(zp));
        bad += y[j] != std::int8_t(r < lo ? lo : std::min(r, 127));
        beyond += r > 127 || (!relu && r < -128);
      }
      CHECK(bad == 0);
      CHECK(clamped == beyond);
      // the same values through the fused stores (8 and 16 lanes): zero activations, so each sum
      // is 0 and the column offset carries the value
      std::vector<std::int32_t> x(N);
      for (std::size_t j = 0; j < N; ++j) x[j] = std::int32_t(std::uint32_t(acc[j]) + std::uint32_t(off[j]));
      const i8::requant<std::int8_t> e{x.data(), x.data(), 0, mult.data(), shift.data(), zp, lo,
                                       relu ? std::numeric_limits<std::int32_t>::min() : -128, 1.0f, nullptr, N};
      const std::vector<std::int8_t> a(2 * 16, 0), w(N * 16, 1);
      std::vector<std::int8_t> packed(i8::packed_bytes(16, N)), fused(2 * N, 99), fused_block(2 * N, 99);
      i8::pack(16, N, w.data(), 16, packed.data());
      std::vector<std::int32_t> sums(N);
      i8::packed_sums(N, 16, packed.data(), sums.data());
      auto ed = e;
      ed.y = fused.data();
      CHECK(i8::gemm_s8_requantize<std::int8_t, Arch>(2, N, 16, a.data(), 16, packed.data(), sums.data(), ed) ==
            2 * beyond);
      // block-sparse, every 4 x 16 block kept (N is a multiple of 16)
      REQUIRE(N % 16 == 0);
      std::vector<std::uint8_t> keep(4 * (N / 16), 1);
      const std::size_t cap = i8::block::groups_for(16, N, keep.size(), 4, 16);
      std::vector<std::int8_t> values(cap * 64);
      std::vector<std::uint16_t> inputs(cap);
      std::vector<std::uint32_t> starts(N / 16 + 1);
      REQUIRE(i8::block::pack(w.data(), keep.data(), 16, N, 4, 16, cap, values.data(), inputs.data(), starts.data()) <= cap);
      auto eb = e;
      eb.y = fused_block.data();
      CHECK(i8::block::gemm_requantize<4, 16, std::int8_t, Arch>(2, N, a.data(), 16, values.data(), inputs.data(),
                                                                 starts.data(), sums.data(), eb) == 2 * beyond);
      std::size_t bad_fused = 0;
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < N; ++j)
          bad_fused += (fused[i * N + j] != y[j]) + (fused_block[i * N + j] != y[j]);
      CHECK(bad_fused == 0);
    }
  });
  CHECK(ran >= 1);
}

// ctnn quantizes as TFLite's reference AffineQuantize does, round(x / scale) with an IEEE float
// division; TFLite's optimized kernels and XNNPACK multiply by 1 / scale (XNNPACK rounding ties to
// even), which can differ by one step near a tie. Pinned here: values where the two quotients
// round differently, on which every path follows the division.
TEST_CASE("int8 quantize divides by the scale (TFLite's reference), not multiplies by its inverse") {
  std::vector<float> x;
  std::vector<float> scale_of;
  for (float scale : {0.1f, 0.3f, 0.07f, 1.0f / 255.0f, 0.0123f})
    for (int k = -255; k <= 255; ++k) {
      const float v = (float(k) + 0.5f) * scale;  // near a tie of the quotient
      for (float c : {v, std::nextafter(v, 1e9f), std::nextafter(v, -1e9f)})
        if (std::round(c / scale) != std::round(c * (1.0f / scale))) {
          x.push_back(c);
          scale_of.push_back(scale);
        }
    }
  REQUIRE(x.size() >= 10);  // the two rules do differ
  const int ran = ctnn::test::for_each_arch("int8 quantize pin", [&]<class Arch>(Arch, const char* name) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      std::vector<float> row(17, x[i]);  // the vector forms and the scalar tail
      std::vector<std::int8_t> q(row.size());
      i8::quantize<Arch>(row.data(), row.size(), scale_of[i], 0, -128, 127, q.data());
      const auto want = std::int8_t(std::clamp(std::round(x[i] / scale_of[i]), -128.0f, 127.0f));
      for (std::int8_t v : q) bad += v != want;
    }
    INFO(std::string(name) << ": " << x.size() << " values");
    CHECK(bad == 0);
  });
  CHECK(ran >= 1);
}
