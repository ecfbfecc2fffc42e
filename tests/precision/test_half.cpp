// float16_t / bfloat16_t: the scalar conversions (core/half.hpp) on known
// values and exhaustively, and the SIMD array conversions
// (backends/cpu/convert.hpp) bit for bit against them on every architecture
// this CPU runs.
#include <doctest/doctest.h>

#include <ctnn/core/half.hpp>
#include <ctnn/core/precision.hpp>
#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/bf16_gemm.hpp>
#include <ctnn/backends/cpu/convert.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/archs.hpp"

using namespace ctnn;

namespace {
std::uint16_t h(float f) { return float16_t(f).bits; }
std::uint16_t b(float f) { return bfloat16_t(f).bits; }
float f32(std::uint32_t u) { return std::bit_cast<float>(u); }

// Floats that exercise every rounding case: specials, the float16 range's
// edges and subnormals, ties, and random bit patterns.
std::vector<float> probe_floats() {
  std::vector<float> v{0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e30f, -1e-30f,
                       std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN(), f32(0x7f800001u), f32(0xffc12345u),
                       std::ldexp(1.0f, -14), std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(3.0f, -26),
                       std::ldexp(1.0f, -26), 1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11),
                       f32(0x3f808000u), f32(0x3f818000u), f32(0x7f7fffffu), f32(0x00000001u)};
  rng g(7);
  for (int i = 0; i < 20000; ++i) v.push_back(f32(std::uint32_t(g.next())));
  for (int i = 0; i < 20000; ++i) v.push_back(float(g.uniform(-70000, 70000)));
  for (int i = 0; i < 20000; ++i) v.push_back(float(std::ldexp(g.uniform(-1, 1), -int(g.next() % 30))));
  return v;
}
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& c) {
  return a.size() == c.size() && std::memcmp(a.data(), c.data(), a.size() * sizeof(T)) == 0;
}
}  // namespace

TEST_CASE("float16_t: layout, known values and round to nearest even") {
  static_assert(sizeof(float16_t) == 2 && sizeof(bfloat16_t) == 2);
  static_assert(std::is_trivially_copyable_v<float16_t> && std::is_trivially_copyable_v<bfloat16_t>);
  static_assert(float16_t(1.0f).bits == 0x3c00 && float(float16_t::from_bits(0x3c00)) == 1.0f);  // constexpr
  CHECK(h(1.0f) == 0x3c00);
  CHECK(h(-2.0f) == 0xc000);
  CHECK(h(-0.0f) == 0x8000);
  CHECK(h(65504.0f) == 0x7bff);
  CHECK(h(65519.99f) == 0x7bff);  // below the midpoint to 2^16: the largest half
  CHECK(h(65520.0f) == 0x7c00);   // the midpoint rounds to even: infinity
  CHECK(h(1e30f) == 0x7c00);
  CHECK(h(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(h(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(h(std::ldexp(1.0f, -25)) == 0x0000);  // tie between 0 and 2^-24: even (0)
  CHECK(h(std::ldexp(3.0f, -26)) == 0x0001);  // above the tie
  CHECK(h(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie: stays on the even 1.0
  CHECK(h(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);  // tie: up to the even neighbour
  CHECK(std::isnan(float(float16_t(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(float(float16_t(f32(0x7f800001u)))));  // a NaN whose payload is in the dropped bits
  CHECK(float(float16_t::from_bits(0x0001)) == std::ldexp(1.0f, -24));
  CHECK(float(float16_t::from_bits(0x7c00)) == std::numeric_limits<float>::infinity());
}

TEST_CASE("float16_t: every one of the 65536 values converts to float exactly and back to itself") {
  std::size_t nan = 0;
  for (std::uint32_t u = 0; u < 65536; ++u) {
    const float f = float(float16_t::from_bits(std::uint16_t(u)));
    if (std::isnan(f)) {
      ++nan;
      CHECK(std::isnan(float(float16_t(f))));
      continue;
    }
    REQUIRE(float16_t(f).bits == u);
  }
  CHECK(nan == 2 * 1023);
}

TEST_CASE("bfloat16_t: known values, round to nearest even, NaN kept") {
  CHECK(b(1.0f) == 0x3f80);
  CHECK(b(f32(0x3f808000u)) == 0x3f80);  // tie: even
  CHECK(b(f32(0x3f818000u)) == 0x3f82);  // tie: up to even
  CHECK(b(f32(0x3f808001u)) == 0x3f81);  // above the tie
  CHECK(b(f32(0x7f7fffffu)) == 0x7f80);  // float max rounds to infinity
  CHECK(b(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(std::isnan(float(bfloat16_t(f32(0x7f800001u)))));  // would round to infinity without the NaN rule
  for (std::uint32_t u = 0; u < 65536; ++u) {
    const float f = float(bfloat16_t::from_bits(std::uint16_t(u)));
    if (!std::isnan(f)) REQUIRE(bfloat16_t(f).bits == u);
  }
}

TEST_CASE("policies: which types each buffer role uses") {
  static_assert(std::is_same_v<precision::mixed_float16::variable_type, float>);
  static_assert(std::is_same_v<precision::mixed_float16::compute_type, float16_t>);
  static_assert(std::is_same_v<precision::mixed_bfloat16::compute_type, bfloat16_t>);
  static_assert(std::is_same_v<precision::float16::variable_type, float16_t>);
  static_assert(std::is_same_v<precision::mixed_float16::io_type, float>);
  static_assert(std::is_same_v<precision::float64::io_type, double>);
  static_assert(precision::mixed_float16::half && !precision::float32::half && precision::float16::half);
  CHECK(std::string(precision::name_of<precision::mixed_bfloat16>()) == "mixed_bfloat16");
}

TEST_CASE("convert: SIMD float16 and bfloat16 conversions give the scalar reference's bits") {
  const std::vector<float> src = probe_floats();
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t u = 0; u < 65536; ++u) all[u] = std::uint16_t(u);
  const int ran = test::for_each_arch("float16/bfloat16 conversions", [&]<class Arch>(Arch, const char* name) {
    INFO("arch " << std::string(name));
    // tails: every length up to two vectors plus one
    for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(17), std::size_t(33), src.size()}) {
      std::vector<float16_t> h_ref(n), h_simd(n);
      std::vector<bfloat16_t> b_ref(n), b_simd(n);
      kernels::cpu::convert_reference(src.data(), h_ref.data(), n);
      kernels::cpu::convert<Arch>(src.data(), h_simd.data(), n);
      kernels::cpu::convert_reference(src.data(), b_ref.data(), n);
      kernels::cpu::convert<Arch>(src.data(), b_simd.data(), n);
      CHECK(same_bits(h_ref, h_simd));
      CHECK(same_bits(b_ref, b_simd));
    }
    std::vector<float16_t> hs(65536);
    std::vector<bfloat16_t> bs(65536);
    std::memcpy(hs.data(), all.data(), 65536 * 2);
    std::memcpy(bs.data(), all.data(), 65536 * 2);
    std::vector<float> f_ref(65536), f_simd(65536);
    kernels::cpu::convert_reference(hs.data(), f_ref.data(), 65536);
    kernels::cpu::convert<Arch>(hs.data(), f_simd.data(), 65536);
    CHECK(same_bits(f_ref, f_simd));
    kernels::cpu::convert_reference(bs.data(), f_ref.data(), 65536);
    kernels::cpu::convert<Arch>(bs.data(), f_simd.data(), 65536);
    CHECK(same_bits(f_ref, f_simd));
    MESSAGE(std::string(name) << ": float16 SIMD " << kernels::cpu::convert_is_simd<Arch, float, float16_t>() << ", float->bfloat16 SIMD "
                 << kernels::cpu::convert_is_simd<Arch, float, bfloat16_t>());
  });
  CHECK(ran >= 1);
}

TEST_CASE("gemm_nt_bf16: AVX512-BF16 dot products and the conversion fallback against the scalar reference") {
  MESSAGE("this CPU " << std::string(kernels::cpu::has_avx512_bf16() ? "has" : "lacks") << " AVX512-BF16");
  for (auto [m, n, k] : {std::array<std::size_t, 3>{1, 1, 1}, {3, 5, 17}, {7, 9, 33}, {4, 4, 64}, {9, 13, 784}}) {
    std::vector<bfloat16_t> a(m * k), bm(n * k);
    rng g(m * 31 + k);
    for (auto& v : a) v = bfloat16_t(float(g.uniform(-1, 1)));
    for (auto& v : bm) v = bfloat16_t(float(g.uniform(-1, 1)));
    std::vector<float> ref(m * n), fast(m * n), conv(m * n);
    kernels::cpu::gemm_nt_bf16_reference(a.data(), bm.data(), ref.data(), m, n, k);
    kernels::cpu::gemm_nt_bf16(a.data(), bm.data(), fast.data(), m, n, k);
    kernels::cpu::gemm_nt_bf16(a.data(), bm.data(), conv.data(), m, n, k, /*use_bf16_instructions=*/false);
    for (std::size_t i = 0; i < m * n; ++i) {
      // exact products, float32 sums in another order: within K ulps of the sum of |products| (<= k)
      const double tol = 1e-6 * double(k);
      REQUIRE(std::fabs(fast[i] - ref[i]) <= tol);
      REQUIRE(std::fabs(conv[i] - ref[i]) <= tol);
    }
  }
}
