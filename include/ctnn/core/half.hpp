// ctnn/core/half.hpp — the 16-bit storage types float16_t and bfloat16_t.
//
// float16_t holds an IEEE 754 binary16 (1 sign, 5 exponent, 10 mantissa
// bits), bfloat16_t a bfloat16 (1, 8, 7: the top half of a float). Both are
// trivially copyable, 2 bytes, and carry only their bits, so device code may
// reinterpret them as __half / __nv_bfloat16. They are storage types: they
// convert to float implicitly (exactly) and from float explicitly, rounding to
// nearest, ties to even; arithmetic happens in float. Overflow gives an
// infinity, a NaN stays a (quiet) NaN with its sign, and float16 keeps
// subnormals (no flush to zero: the conversions are bit manipulation and do
// not depend on the floating-point mode). These scalar conversions are the
// reference the SIMD conversions (backends/cpu/convert.hpp) are tested against.
#pragma once
#include <bit>
#include <cstdint>
#include <type_traits>

namespace ctnn {

namespace half_bits {

// float -> binary16, round to nearest even.
constexpr std::uint16_t from_float(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return std::uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN, quieted
  if (abs >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u);  // >= 65520: rounds to infinity (or is one)
  if (abs >= 0x38800000u) {                                        // normal half (>= 2^-14)
    const std::uint32_t m = abs + 0xfffu + ((abs >> 13) & 1u);    // round the 13 dropped bits to even
    return std::uint16_t(sign | ((m - 0x38000000u) >> 13));
  }
  if (abs < 0x33000000u) return std::uint16_t(sign);  // < 2^-25: rounds to zero (2^-25 ties to even: 0)
  // subnormal half: value = mant * 2^-24
  const std::uint32_t e = abs >> 23;                  // biased float exponent, 102..112
  const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - e;               // bits to drop: 14..24
  const std::uint32_t q = mant >> shift;
  const std::uint32_t rest = mant & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  const std::uint32_t r = q + ((rest > half || (rest == half && (q & 1u))) ? 1u : 0u);
  return std::uint16_t(sign | r);
}

// binary16 -> float, exact.
constexpr float to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  std::uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));  // NaN: quieted
  if (e != 0) return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return std::bit_cast<float>(sign);
  // subnormal: normalise
  std::uint32_t ex = 113;
  while (!(m & 0x400u)) {
    m <<= 1;
    --ex;
  }
  return std::bit_cast<float>(sign | (ex << 23) | ((m & 0x3ffu) << 13));
}

// float -> bfloat16, round to nearest even; NaN stays NaN (quieted).
constexpr std::uint16_t bf16_from_float(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((x >> 16) | 0x40u);
  return std::uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
constexpr float bf16_to_float(std::uint16_t b) noexcept { return std::bit_cast<float>(std::uint32_t(b) << 16); }

}  // namespace half_bits

struct float16_t {
  std::uint16_t bits;
  float16_t() = default;
  constexpr explicit float16_t(float f) noexcept : bits(half_bits::from_float(f)) {}
  constexpr explicit float16_t(double d) noexcept : float16_t(float(d)) {}
  constexpr operator float() const noexcept { return half_bits::to_float(bits); }
  static constexpr float16_t from_bits(std::uint16_t b) noexcept {
    float16_t h{};
    h.bits = b;
    return h;
  }
  static constexpr float max() noexcept { return 65504.0f; }
  static constexpr const char* name() noexcept { return "float16"; }
};

struct bfloat16_t {
  std::uint16_t bits;
  bfloat16_t() = default;
  constexpr explicit bfloat16_t(float f) noexcept : bits(half_bits::bf16_from_float(f)) {}
  constexpr explicit bfloat16_t(double d) noexcept : bfloat16_t(float(d)) {}
  constexpr operator float() const noexcept { return half_bits::bf16_to_float(bits); }
  static constexpr bfloat16_t from_bits(std::uint16_t b) noexcept {
    bfloat16_t h{};
    h.bits = b;
    return h;
  }
  static constexpr float max() noexcept { return 0x1.fep127f; }
  static constexpr const char* name() noexcept { return "bfloat16"; }
};

static_assert(sizeof(float16_t) == 2 && sizeof(bfloat16_t) == 2);
static_assert(std::is_trivially_copyable_v<float16_t> && std::is_trivially_copyable_v<bfloat16_t>);
static_assert(std::is_standard_layout_v<float16_t> && std::is_standard_layout_v<bfloat16_t>);

// float16_t or bfloat16_t.
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

}  // namespace ctnn
