// ctnn/quantization/arithmetic.hpp — int8 quantization parameters and TFLite's fixed-point arithmetic.
//
// real = scale * (q - zero_point). choose_params(min, max) widens [min, max] to hold 0, takes
// scale = (max - min) / 255 and the zero point TFLite's ChooseQuantizationParams takes (the
// candidate from min or max with the smaller error, rounded and clamped to [-128, 127]), so 0.0
// is exact. symmetric_scale(absmax) is a weight channel's scale (zero point 0, range [-127, 127]).
// quantize_multiplier(m) splits a positive real multiplier into a Q0.31 significand and a shift
// (TFLite's QuantizeMultiplier); multiply_by_quantized_multiplier(x, q, shift) applies it with
// TFLite's reference rounding (SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT).
// A NaN or infinite range, or a range of zero width (a constant 0 calibration), throws
// std::invalid_argument naming the caller's `what`. Details: docs/quantization.md.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace ctnn::quantization {

inline constexpr std::int32_t qmin = -128, qmax = 127;  // activations: asymmetric int8
inline constexpr std::int32_t wmax = 127;               // weights: symmetric [-127, 127]

struct params {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
};

// TFLite's ChooseQuantizationParams for int8 [-128, 127].
inline params choose_params(double min, double max, const std::string& what = "quantization range") {
  if (!std::isfinite(min) || !std::isfinite(max))
    throw std::invalid_argument(what + ": the range [" + std::to_string(min) + ", " + std::to_string(max) +
                                "] is not finite (NaN or infinite values in the calibration data)");
  if (min > max) throw std::invalid_argument(what + ": min " + std::to_string(min) + " > max " + std::to_string(max));
  min = std::min(min, 0.0);
  max = std::max(max, 0.0);
  if (max - min == 0.0)
    throw std::invalid_argument(what + ": the range is empty (every value 0): no scale can be chosen");
  const double qmin_d = qmin, qmax_d = qmax;
  const double scale = (max - min) / (qmax_d - qmin_d);
  const double zp_from_min = qmin_d - min / scale, zp_from_max = qmax_d - max / scale;
  const double err_min = std::abs(qmin_d) + std::abs(min / scale), err_max = std::abs(qmax_d) + std::abs(max / scale);
  const double zp = err_min < err_max ? zp_from_min : zp_from_max;
  std::int32_t nudged = zp < qmin_d ? qmin : zp > qmax_d ? qmax : std::int32_t(std::round(zp));
  return {float(scale), nudged};
}

// A weight channel's scale: absmax / 127 (zero point 0; absmax / 64 for reduce_range's [-64, 64]:
// weight_max 64). An all-zero channel gets scale 1 (its int8 values are all 0, so any scale
// represents it exactly); a non-finite absmax throws.
inline float symmetric_scale(double absmax, const std::string& what = "weights", std::int32_t weight_max = wmax) {
  if (!std::isfinite(absmax)) throw std::invalid_argument(what + ": a weight is NaN or infinite");
  return absmax == 0.0 ? 1.0f : float(absmax / weight_max);
}

// round(x / scale) + zero_point, saturated to [lo, hi] (TFLite's AffineQuantize; round half away from 0).
inline std::int32_t quantize(float x, params p, std::int32_t lo = qmin, std::int32_t hi = qmax) {
  const float q = std::round(x / p.scale);
  if (!(q == q)) return p.zero_point;  // NaN input: the zero point (counted by callers as out of range)
  const float c = std::clamp(q + float(p.zero_point), float(lo), float(hi));
  return std::int32_t(c);
}
inline float dequantize(std::int32_t q, params p) { return p.scale * float(q - p.zero_point); }

struct multiplier {
  std::int32_t q = 0;  // Q0.31 significand in [2^30, 2^31) (0 for a zero multiplier)
  int shift = 0;       // the power of two: real = q / 2^31 * 2^shift
};

// TFLite's QuantizeMultiplier. Throws for a negative or non-finite m.
inline multiplier quantize_multiplier(double m) {
  if (!std::isfinite(m) || m < 0)
    throw std::invalid_argument("quantize_multiplier: the multiplier " + std::to_string(m) +
                                " is negative or not finite");
  if (m == 0.0) return {0, 0};
  int shift = 0;
  const double f = std::frexp(m, &shift);
  auto q_fixed = static_cast<std::int64_t>(std::round(f * double(1LL << 31)));
  if (q_fixed == (1LL << 31)) {
    q_fixed /= 2;
    ++shift;
  }
  if (shift < -31) {  // flushed to zero, as TFLite does
    shift = 0;
    q_fixed = 0;
  }
  if (shift > 30) {  // TFLite saturates a multiplier >= 2^30
    shift = 30;
    q_fixed = (1LL << 31) - 1;
  }
  return {std::int32_t(q_fixed), shift};
}

// gemmlowp's SaturatingRoundingDoublingHighMul: round(a * b / 2^31), INT32_MIN * INT32_MIN saturating.
constexpr std::int32_t saturating_rounding_doubling_high_mul(std::int32_t a, std::int32_t b) {
  if (a == b && a == std::numeric_limits<std::int32_t>::min()) return std::numeric_limits<std::int32_t>::max();
  const std::int64_t ab = std::int64_t(a) * std::int64_t(b);
  const std::int32_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
  return std::int32_t((ab + nudge) / (1LL << 31));  // division truncates toward zero, as gemmlowp's
}

// gemmlowp's RoundingDivideByPOT: x / 2^e rounded to nearest, ties away from zero; 0 <= e <= 31.
constexpr std::int32_t rounding_divide_by_pot(std::int32_t x, int e) {
  const std::int32_t mask = std::int32_t((std::int64_t(1) << e) - 1);
  const std::int32_t remainder = x & mask;
  const std::int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> e) + (remainder > threshold ? 1 : 0);
}

// TFLite's reference MultiplyByQuantizedMultiplier (single rounding of the high product, then the shift).
constexpr std::int32_t multiply_by_quantized_multiplier(std::int32_t x, std::int32_t q, int shift) {
  const int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(std::int32_t(std::uint32_t(x) << left), q), right);
}
constexpr std::int32_t multiply_by_quantized_multiplier(std::int32_t x, multiplier m) {
  return multiply_by_quantized_multiplier(x, m.q, m.shift);
}

}  // namespace ctnn::quantization
