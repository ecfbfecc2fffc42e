// tests/quantization/test_arithmetic.cpp — quantization/arithmetic.hpp against values computed by
// hand from TFLite's formulas (ChooseQuantizationParams, QuantizeMultiplier,
// MultiplyByQuantizedMultiplier), and its edge cases.
#include <doctest/doctest.h>

#include <ctnn/quantization/arithmetic.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace q = ctnn::quantization;

TEST_CASE("choose_params: scale (max - min) / 255 and a zero point that makes 0.0 exact") {
  // [-1, 1]: scale 2/255; zp from min = -128 + 127.5 = -0.5, err_min = 128 + 127.5 = 255.5;
  // zp from max = 127 - 127.5 = -0.5, err_max = 127 + 127.5 = 254.5 -> from max: round(-0.5) = -1 (away from 0)
  auto p = q::choose_params(-1.0, 1.0);
  CHECK(p.scale == doctest::Approx(2.0 / 255).epsilon(1e-7));
  CHECK(p.zero_point == -1);
  // [0, 6] (relu6): 0 at qmin exactly
  p = q::choose_params(0.0, 6.0);
  CHECK(p.scale == doctest::Approx(6.0 / 255).epsilon(1e-7));
  CHECK(p.zero_point == -128);
  // [-6, 0]: 0 at qmax
  p = q::choose_params(-6.0, 0.0);
  CHECK(p.zero_point == 127);
  // a positive-only range is widened to hold 0: [2, 4] -> [0, 4]
  p = q::choose_params(2.0, 4.0);
  CHECK(p.scale == doctest::Approx(4.0 / 255).epsilon(1e-7));
  CHECK(p.zero_point == -128);
  // [-0.3, 1.7]: scale 2/255; zp from min = -128 + 38.25 = -89.75 (err 166.25), from max = 127 - 216.75 =
  // -89.75 (err 343.75) -> round(-89.75) = -90
  p = q::choose_params(-0.3, 1.7);
  CHECK(p.zero_point == -90);
  // 0.0 is exact: it quantizes to the zero point and back to 0
  CHECK(q::quantize(0.0f, p) == p.zero_point);
  CHECK(q::dequantize(p.zero_point, p) == 0.0f);
}

TEST_CASE("choose_params: a constant-zero, NaN or inverted range is an error naming the caller") {
  CHECK_THROWS_WITH_AS(q::choose_params(0.0, 0.0, "layer 2 input"),
                       doctest::Contains("layer 2 input: the range is empty"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q::choose_params(std::nan(""), 1.0, "layer 1 output"),
                       doctest::Contains("layer 1 output: the range"), std::invalid_argument);
  CHECK_THROWS_AS(q::choose_params(0.0, std::numeric_limits<double>::infinity()), std::invalid_argument);
  CHECK_THROWS_AS(q::choose_params(1.0, -1.0), std::invalid_argument);
  // a constant non-zero range is fine: widened to hold 0
  CHECK(q::choose_params(3.0, 3.0).zero_point == -128);
}

TEST_CASE("quantize saturates to [-128, 127] and rounds half away from zero") {
  const q::params p{0.5f, 10};
  CHECK(q::quantize(0.25f, p) == 11);    // 0.5 -> 1 (away from zero)
  CHECK(q::quantize(-0.25f, p) == 9);    // -0.5 -> -1
  CHECK(q::quantize(1000.0f, p) == 127);
  CHECK(q::quantize(-1000.0f, p) == -128);
  CHECK(q::quantize(1000.0f, p, -127, 127) == 127);
  CHECK(q::symmetric_scale(2.54) == doctest::Approx(0.02f));
  CHECK(q::symmetric_scale(0.0) == 1.0f);
  CHECK_THROWS_AS(q::symmetric_scale(std::nan("")), std::invalid_argument);
}

TEST_CASE("quantize_multiplier: frexp, round(f * 2^31), the 2^31 carry, flush below 2^-31") {
  // 0.5 = 0.5 * 2^0 -> q = 2^30, shift 0
  auto m = q::quantize_multiplier(0.5);
  CHECK(m.q == (1 << 30));
  CHECK(m.shift == 0);
  // 0.75 = 0.75 * 2^0 -> q = 0.75 * 2^31 = 1610612736
  m = q::quantize_multiplier(0.75);
  CHECK(m.q == 1610612736);
  CHECK(m.shift == 0);
  // 3.0 = 0.75 * 2^2
  m = q::quantize_multiplier(3.0);
  CHECK(m.q == 1610612736);
  CHECK(m.shift == 2);
  // 0.001 = 0.512 * 2^-9 -> round(0.512 * 2^31) = 1099511628 (0.512 * 2147483648 = 1099511627.776)
  m = q::quantize_multiplier(0.001);
  CHECK(m.shift == -9);
  CHECK(m.q == 1099511628);
  // just below 1: the significand rounds up to 2^31 -> halved, shift + 1
  m = q::quantize_multiplier(1.0 - 1e-12);
  CHECK(m.q == (1 << 30));
  CHECK(m.shift == 1);
  CHECK(q::quantize_multiplier(0.0).q == 0);
  CHECK(q::quantize_multiplier(1e-12).q == 0);  // 2^-40: flushed
  CHECK_THROWS_AS(q::quantize_multiplier(-1.0), std::invalid_argument);
  CHECK_THROWS_AS(q::quantize_multiplier(std::nan("")), std::invalid_argument);
}

TEST_CASE("saturating_rounding_doubling_high_mul and rounding_divide_by_pot, by hand") {
  constexpr std::int32_t mn = std::numeric_limits<std::int32_t>::min(), mx = std::numeric_limits<std::int32_t>::max();
  static_assert(q::saturating_rounding_doubling_high_mul(mn, mn) == mx);  // the one overflow
  static_assert(q::saturating_rounding_doubling_high_mul(1 << 30, 1 << 30) == (1 << 29));
  // 3 * 2^30 / 2^31 = 1.5 -> 2 (nudge 2^30, then truncate); -1.5 -> (-2^32 + 1) / 2^31 truncated -> -1:
  // gemmlowp's high mul rounds a negative tie toward zero (RoundingDivideByPOT rounds it away)
  static_assert(q::saturating_rounding_doubling_high_mul(3, 1 << 30) == 2);
  static_assert(q::saturating_rounding_doubling_high_mul(-3, 1 << 30) == -1);
  static_assert(q::saturating_rounding_doubling_high_mul(1, 1 << 30) == 1);   // 0.5 -> 1
  static_assert(q::saturating_rounding_doubling_high_mul(-1, 1 << 30) == 0);  // -0.5 -> (-2^30 + 1 - 2^30) / 2^31 -> 0
  // ties away from zero
  static_assert(q::rounding_divide_by_pot(5, 1) == 3);
  static_assert(q::rounding_divide_by_pot(-5, 1) == -3);
  static_assert(q::rounding_divide_by_pot(7, 2) == 2);    // 1.75
  static_assert(q::rounding_divide_by_pot(-7, 2) == -2);
  static_assert(q::rounding_divide_by_pot(6, 2) == 2);    // 1.5 -> 2
  static_assert(q::rounding_divide_by_pot(-6, 2) == -2);  // -1.5 -> -2
  static_assert(q::rounding_divide_by_pot(mx, 31) == 1);
  static_assert(q::rounding_divide_by_pot(17, 0) == 17);
  CHECK(true);
}

TEST_CASE("multiply_by_quantized_multiplier: x * m rounded as TFLite, left and right shifts") {
  // 1000 * 0.75 = 750
  auto m = q::quantize_multiplier(0.75);
  CHECK(q::multiply_by_quantized_multiplier(1000, m) == 750);
  CHECK(q::multiply_by_quantized_multiplier(-1000, m) == -750);
  // 3.0: left shift 2
  m = q::quantize_multiplier(3.0);
  CHECK(q::multiply_by_quantized_multiplier(7, m) == 21);
  // 0.001: 1500 * 0.001 = 1.5 -> 2 ; -1500 -> -2 (ties away from zero); 1499 -> 1
  m = q::quantize_multiplier(0.001);
  CHECK(q::multiply_by_quantized_multiplier(1500, m) == 2);
  CHECK(q::multiply_by_quantized_multiplier(-1500, m) == -2);
  CHECK(q::multiply_by_quantized_multiplier(1499, m) == 1);
  // on a sweep: within one step of x * real (TFLite rounds twice, in the high product and in the shift,
  // so it can miss round(x * real) by one; by more than 1 would be a bug)
  for (double real : {0.0003, 0.0123, 0.37, 0.999, 1.7}) {
    const auto qm = q::quantize_multiplier(real);
    for (std::int32_t x = -200000; x <= 200000; x += 977) {
      const double exact = double(x) * double(qm.q) * std::ldexp(1.0, qm.shift - 31);
      const auto got = q::multiply_by_quantized_multiplier(x, qm);
      CHECK(std::abs(double(got) - exact) < 1.0);
    }
  }
}
