// ctnn/kernels/cpu/crossentropy.hpp — the softmax cross-entropy of one row of logits.
//
// crossentropy_logits_row<T, Arch> runs the xsimd path (batch<float, Arch>)
// for float rows (max and exp vectorized, within 1e-6 of the double
// reference, tested on every architecture the CPU runs in
// tests/losses/test_logits_simd.cpp) and the all-double
// crossentropy_logits_row_reference otherwise. The losses reach it through
// ops<cpu<Arch>>: the batched sparse_crossentropy_logits and
// categorical_crossentropy_logits (rows of it), squared_error (MSE); the
// probabilities' row (crossentropy_probs_row, Keras' clipping) and its batches;
// pointwise_loss (a rule of kernels/loss_functors.hpp over count values).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../core/separate.hpp"
#include "activations.hpp"
#include <xsimd/xsimd.hpp>

#include "arch.hpp"

namespace ctnn::kernels::cpu {

// Cross-entropy of one row of logits z[n]: -sum t log softmax(z), computed
// through log-sum-exp. d receives (softmax(z) * sum(t) - t) * scale.
// The reference: every step in double.
template <class T, class Target>
double crossentropy_logits_row_reference(const T* z, Target&& t, std::size_t n, T* d, double scale) {
  double mx = double(z[0]);
  for (std::size_t j = 1; j < n; ++j) mx = std::max(mx, double(z[j]));
  double sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += std::exp(double(z[j]) - mx);
  const double lse = mx + std::log(sum);
  double loss = 0, tsum = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double tj = t(j);
    loss -= tj * (double(z[j]) - lse);
    tsum += tj;
  }
  if (d)
    for (std::size_t j = 0; j < n; ++j) d[j] = T((std::exp(double(z[j]) - lse) * tsum - t(j)) * scale);
  return loss;
}

// float rows with SIMD: max and e_j = exp(z_j - max) vectorized in float
// (e_j kept in d, which then gets e_j / sum * sum(t) - t_j), the sum of e_j
// per lane in float, everything after it in double as in the reference.
template <class Arch, class Target>
double crossentropy_logits_row_simd(const float* z, Target&& t, std::size_t n, float* d, double scale) {
  using B = xsimd::batch<float, Arch>;
  constexpr std::size_t L = B::size;
  const std::size_t nv = n - n % L;
  const float mx = row_max<float, Arch>(z, n);
  const B bmx(mx);
  B bs(0.0f);
  for (std::size_t j = 0; j < nv; j += L) {
    const B e = xsimd::exp(B::load_unaligned(z + j) - bmx);
    if (d) e.store_unaligned(d + j);
    bs += e;
  }
  double sum = double(xsimd::hadd(bs));
  for (std::size_t j = nv; j < n; ++j) {
    const float e = std::exp(z[j] - mx);
    if (d) d[j] = e;
    sum += double(e);
  }
  const double lse = double(mx) + std::log(sum);
  double loss = 0, tsum = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double tj = t(j);
    loss -= tj * (double(z[j]) - lse);
    tsum += tj;
  }
  if (d)
    for (std::size_t j = 0; j < n; ++j) d[j] = float((double(d[j]) / sum * tsum - t(j)) * scale);
  return loss;
}

template <class T, class Arch = default_arch, class Target>
double crossentropy_logits_row(const T* z, Target&& t, std::size_t n, T* d, double scale) {
  if constexpr (std::is_same_v<T, float> && simd_v<float, Arch>)
    return crossentropy_logits_row_simd<Arch>(z, t, n, d, scale);
  else
    return crossentropy_logits_row_reference(z, t, n, d, scale);
}

inline constexpr double probability_epsilon = 1e-7;  // keras.config.epsilon()

// Cross-entropy of one row of probabilities p[n] against target weights t[n]
// (one-hot or soft). As Keras: o = p / sum(p), c = clip(o, eps, 1 - eps),
// loss = -sum t log c. If d is given it receives d loss / d p, times scale.
template <class T, class Target>
double crossentropy_probs_row(const T* p, Target&& t, std::size_t n, T* d, double scale) {
  double s = 0;
  for (std::size_t j = 0; j < n; ++j) s += double(p[j]);
  const double eps = probability_epsilon;
  double loss = 0, dot = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double o = double(p[j]) / s;
    const double c = std::clamp(o, eps, 1.0 - eps);
    const double tj = t(j);
    loss -= tj * std::log(c);
    if (d) {
      const double g = (o > eps && o < 1.0 - eps) ? -tj / c : 0.0;  // d loss / d o
      d[j] = T(g);
      dot += g * o;
    }
  }
  if (d)
    for (std::size_t j = 0; j < n; ++j) d[j] = T((double(d[j]) - dot) / s * scale);
  return loss;
}

// ---- the losses' batched kernels (ops<cpu<Arch>>: sparse_crossentropy_logits, ...) ----
// Each returns the sum of the per-sample losses over `rows` samples and, when d
// is not null, writes the gradient times scale (the losses pass 1 / batch).

// Rows of logits z[rows, n] against one class index per row (each in [0, n): the loss checks).
template <class T, class Arch = default_arch>
double sparse_crossentropy_logits(const T* z, const std::int32_t* labels, std::size_t rows, std::size_t n, T* d,
                                  double scale) {
  double total = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    const auto l = std::size_t(labels[i]);
    auto t = [l](std::size_t j) { return j == l ? 1.0 : 0.0; };
    total += crossentropy_logits_row<T, Arch>(z + i * n, t, n, d ? d + i * n : nullptr, scale);
  }
  return total;
}
CTNN_INSTANCE(template double sparse_crossentropy_logits<float, default_arch>(const float*, const std::int32_t*, std::size_t,
                                                                           std::size_t, float*, double);)

// Rows of logits z[rows, n] against target weights t[rows, n] (one-hot or soft).
template <class T, class Arch = default_arch>
double categorical_crossentropy_logits(const T* z, const T* targets, std::size_t rows, std::size_t n, T* d,
                                       double scale) {
  double total = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    const T* tr = targets + i * n;
    auto t = [tr](std::size_t j) { return double(tr[j]); };
    total += crossentropy_logits_row<T, Arch>(z + i * n, t, n, d ? d + i * n : nullptr, scale);
  }
  return total;
}

// Rows of probabilities p[rows, n] against one class index per row (in [0, n)).
template <class T>
double sparse_crossentropy_probs(const T* p, const std::int32_t* labels, std::size_t rows, std::size_t n, T* d,
                                 double scale) {
  double total = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    const auto l = std::size_t(labels[i]);
    auto t = [l](std::size_t j) { return j == l ? 1.0 : 0.0; };
    total += crossentropy_probs_row(p + i * n, t, n, d ? d + i * n : nullptr, scale);
  }
  return total;
}
CTNN_INSTANCE(template double sparse_crossentropy_probs<float>(const float*, const std::int32_t*, std::size_t, std::size_t,
                                                              float*, double);)

// Rows of probabilities p[rows, n] against target weights t[rows, n].
template <class T>
double categorical_crossentropy_probs(const T* p, const T* targets, std::size_t rows, std::size_t n, T* d,
                                      double scale) {
  double total = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    const T* tr = targets + i * n;
    auto t = [tr](std::size_t j) { return double(tr[j]); };
    total += crossentropy_probs_row(p + i * n, t, n, d ? d + i * n : nullptr, scale);
  }
  return total;
}

// Squared errors of y[count] against t[count]: returns sum (y - t)^2; d = scale * (y - t)
// (the loss passes scale = 2 / (N * batch)).
template <class T>
double squared_error(const T* y, const T* t, std::size_t count, T* d, double scale) {
  double total = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double e = double(y[i]) - double(t[i]);
    total += e * e;
    if (d) d[i] = T(scale * e);
  }
  return total;
}

// A pointwise loss rule (kernels/loss_functors.hpp) over count values: returns the sum of
// rule.value(y, t); d (when not null) receives rule.gradient(y, t) * scale. Scalar, in double.
template <class Rule, class T>
double pointwise_loss(const Rule& rule, const T* y, const T* t, std::size_t count, T* d, double scale) {
  double total = 0;
  for (std::size_t i = 0; i < count; ++i) {
    total += rule.value(double(y[i]), double(t[i]));
    if (d) d[i] = T(scale * rule.gradient(double(y[i]), double(t[i])));
  }
  return total;
}

}  // namespace ctnn::kernels::cpu
