// backends/cpu/ops.hpp's element-wise ops, reductions and conversions (fill,
// scale, clip_value, accumulate, accumulated_mean, moving_average,
// add_penalty_gradient, unscale, all_finite, sum_squares, sum_abs,
// add_penalty, clip_by_norm, convert / widen) and map itself, run through
// ops<cpu<Arch>> against the scalar formulas written out here, on sizes with
// every tail and one of several thread-pool chunks, float and double, on
// every xsimd architecture this CPU runs (tests/kernels/archs.hpp).
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/mixed_precision.hpp>  // the 16-bit conversions (half_ops, convert.hpp)
#include <ctnn/core/rng.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace ctnn;

namespace {

constexpr std::size_t sizes[] = {1, 3, 17, 255, 1000, 3 * (std::size_t(1) << 15) + 77};

template <class T>
std::vector<T> draw(std::size_t n, double lo, double hi, std::uint64_t seed) {
  rng g(seed);
  std::vector<T> v(n);
  for (auto& e : v) e = T(g.uniform(lo, hi));
  return v;
}

// |a - b| <= rtol (|b| + scale): scale is the size of the terms, where a sum cancels.
template <class T>
bool close(const std::vector<T>& a, const std::vector<T>& b, double rtol, double scale = 1e-3) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = double(a[i]), y = double(b[i]);
    if (!(std::abs(x - y) <= rtol * (std::abs(y) + scale))) {
      MESSAGE("index " << i << " of " << a.size() << ": " << x << " vs " << y);
      return false;
    }
  }
  return true;
}

template <class T>
constexpr double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;

template <class T, class Arch>
void check_maps(std::size_t n, const char* arch) {
  using O = ops<cpu<Arch>>;
  INFO(std::string(arch) << " n=" << n << " float=" << std::is_same_v<T, float>);
  const auto x = draw<T>(n, -2, 2, n), y = draw<T>(n, -2, 2, n + 1);

  auto a = x;
  O::fill(a.data(), n, 0.5);
  CHECK(std::all_of(a.begin(), a.end(), [](T v) { return v == T(0.5); }));
  O::fill_zero(a.data(), n);
  CHECK(std::all_of(a.begin(), a.end(), [](T v) { return v == T(0); }));

  a = x;
  auto r = x;
  O::scale(a.data(), n, 0.25);
  for (auto& v : r) v *= T(0.25);
  CHECK(close(a, r, tol<T>));

  a = x;
  r = x;
  O::clip_value(a.data(), n, 0.75);
  for (auto& v : r) v = std::clamp(v, T(-0.75), T(0.75));
  CHECK(a == r);

  a = x;
  r = x;
  O::accumulate(a.data(), y.data(), n);
  for (std::size_t i = 0; i < n; ++i) r[i] += y[i];
  CHECK(a == r);

  a = x;
  auto acc = y;
  r = x;
  O::accumulated_mean(a.data(), acc.data(), n, 1.0 / 3);
  for (std::size_t i = 0; i < n; ++i) r[i] = (y[i] + x[i]) * T(1.0 / 3);
  CHECK(close(a, r, tol<T>));
  CHECK(std::all_of(acc.begin(), acc.end(), [](T v) { return v == T(0); }));

  a = x;
  r = x;
  O::moving_average(a.data(), y.data(), n, 0.9);
  for (std::size_t i = 0; i < n; ++i) r[i] = T(0.9) * x[i] + (T(1) - T(0.9)) * y[i];
  CHECK(close(a, r, tol<T>, 4.0));  // terms up to 2 in size (fma or not)

  // g += l1 sign(w) + 2 l2 w, with exact zeros in w (sign 0)
  auto w = x;
  for (std::size_t i = 0; i < n; i += 5) w[i] = T(0);
  a = y;
  r = y;
  O::add_penalty_gradient(w.data(), a.data(), n, 0.125, 0.0625);
  for (std::size_t i = 0; i < n; ++i)
    r[i] = r[i] + (w[i] > 0 ? T(0.125) : w[i] < 0 ? T(-0.125) : T(0)) + T(2) * T(0.0625) * w[i];
  CHECK(close(a, r, tol<T>, 4.0));
  // the same with the factors times *factor (a dynamic regularizer's), read as the map runs:
  // the bits of the constant form with the multiplied factors; a bad factor gives NaN
  const float factor = 0.5f;
  a = y;
  auto b = y;
  O::add_penalty_gradient(w.data(), a.data(), n, T(0.25), T(0.125), &factor);
  O::add_penalty_gradient(w.data(), b.data(), n, T(0.125), T(0.0625));
  CHECK(a == b);
  for (const float bad : {-0.5f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    a = y;
    O::add_penalty_gradient(w.data(), a.data(), n, T(0), T(1), &bad);
    CHECK(std::all_of(a.begin(), a.end(), [](T v) { return std::isnan(v); }));
  }

  // unscale: g *= inv, true when every g was finite; all_finite
  a = x;
  r = x;
  CHECK(O::unscale(a.data(), n, 1.0 / 1024));
  for (auto& v : r) v *= T(1.0 / 1024);
  CHECK(a == r);
  CHECK(O::all_finite(x.data(), n));
  for (std::size_t bad : {std::size_t(0), n / 2, n - 1}) {
    for (T special : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                      -std::numeric_limits<T>::infinity()}) {
      a = x;
      a[bad] = special;
      CHECK_FALSE(O::all_finite(a.data(), n));
      CHECK_FALSE(O::unscale(a.data(), n, 0.5));
    }
  }
}

template <class T, class Arch>
void check_reductions(std::size_t n, const char* arch) {
  using O = ops<cpu<Arch>>;
  INFO(std::string(arch) << " n=" << n << " float=" << std::is_same_v<T, float>);
  const auto x = draw<T>(n, -2, 2, n + 7);
  double sq = 0, ab = 0;
  for (T v : x) {
    sq += double(v) * double(v);
    ab += std::abs(double(v));
  }
  // float32 block sums: a few ulps of float per block, relative to the total
  const double rt = std::is_same_v<T, float> ? 1e-6 : 1e-13;
  CHECK(std::abs(O::sum_squares(x.data(), n) - sq) <= rt * sq);
  CHECK(std::abs(O::sum_abs(x.data(), n) - ab) <= rt * ab);
  CHECK(O::sum_squares(x.data(), 0) == 0.0);

  // add_penalty: s->penalty += l1 sum |x| + l2 sum x^2 (times *factor when given), not waited for
  step_scalars s;
  s.penalty = 1.0;
  O::add_penalty(x.data(), n, T(0.25), T(0.5), &s);
  const double p = 0.25 * ab + 0.5 * sq;
  CHECK(std::abs(s.penalty - 1.0 - p) <= rt * p + 1e-12);
  CHECK(s.loss_sum == 0.0);
  CHECK(s.non_finite == 0);
  const float factor = 4.0f;
  step_scalars f;
  O::add_penalty(x.data(), n, T(0), T(0.125), &factor, &f);
  CHECK(std::abs(f.penalty - 0.5 * sq) <= rt * sq);
  for (const float bad : {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    step_scalars e;
    O::add_penalty(x.data(), n, T(1), T(0), &bad, &e);
    CHECK(std::isnan(e.penalty));
  }

  // clip_by_norm: g *= limit / ||g|| above the limit, unchanged below
  const double norm = std::sqrt(sq);
  auto a = x;
  O::clip_by_norm(a.data(), n, 2 * norm);
  CHECK(a == x);
  O::clip_by_norm(a.data(), n, norm / 2);
  auto r = x;
  for (auto& v : r) v *= T(0.5);
  CHECK(close(a, r, 10 * tol<T>));
}

template <class Arch>
void check_conversions(std::size_t n, const char* arch) {
  using O = ops<cpu<Arch>>;
  INFO(std::string(arch) << " n=" << n);
  const auto x = draw<float>(n, -70000, 70000, n + 3);
  std::vector<float16_t> h(n), href(n);
  std::vector<bfloat16_t> b(n), bref(n);
  std::vector<float> back(n), backref(n);
  O::convert(x.data(), h.data(), n);
  kernels::cpu::convert_reference(x.data(), href.data(), n);
  bool same = true;
  for (std::size_t i = 0; i < n; ++i) same = same && h[i].bits == href[i].bits;
  CHECK(same);
  O::widen(static_cast<const float16_t*>(h.data()), back.data(), n);
  kernels::cpu::convert_reference(href.data(), backref.data(), n);
  CHECK(back == backref);
  O::convert(x.data(), b.data(), n);
  kernels::cpu::convert_reference(x.data(), bref.data(), n);
  same = true;
  for (std::size_t i = 0; i < n; ++i) same = same && b[i].bits == bref[i].bits;
  CHECK(same);
  O::widen(static_cast<const bfloat16_t*>(b.data()), back.data(), n);
  kernels::cpu::convert_reference(bref.data(), backref.data(), n);
  CHECK(back == backref);
}

// A rule of its own: z = x * y + z (x, y read; z written), returning z.
struct fma_rule {
  template <class V>
  V operator()(V x, V y, V& z) const {
    z = x * y + z;
    return z;
  }
};

template <class T, class Arch>
void check_map(std::size_t n, const char* arch) {
  using O = ops<cpu<Arch>>;
  INFO(std::string(arch) << " n=" << n << " float=" << std::is_same_v<T, float>);
  auto x = draw<T>(n, -1, 1, n), y = draw<T>(n, -1, 1, n + 1), z = draw<T>(n, -1, 1, n + 2);
  const auto x0 = x, y0 = y;
  auto r = z;
  for (std::size_t i = 0; i < n; ++i) r[i] = x[i] * y[i] + r[i];
  CHECK(O::map(fma_rule{}, n, static_cast<const T*>(x.data()), static_cast<const T*>(y.data()), z.data()));
  // x y + z with terms up to 1: a fused and an unfused multiply-add (the compiler's choice) differ
  // by a rounding of the terms, not of the (possibly cancelled) result
  CHECK(close(z, r, tol<T>, 1.0));
  CHECK(x == x0);
  CHECK(y == y0);
  // a non-finite result anywhere (body, tail, any chunk) is reported
  for (std::size_t bad : {std::size_t(0), n / 2, n - 1}) {
    auto big = x;
    big[bad] = std::numeric_limits<T>::max();
    auto zz = z;
    zz[bad] = std::numeric_limits<T>::max();
    auto yy = y;
    yy[bad] = T(4);
    CHECK_FALSE(O::map(fma_rule{}, n, static_cast<const T*>(big.data()), static_cast<const T*>(yy.data()), zz.data()));
  }
}

}  // namespace

TEST_CASE("ops<cpu> element-wise ops equal their scalar formulas on every architecture, float and double") {
  const int ran = test::for_each_arch("element-wise ops", [](auto arch, const char* name) {
    using A = decltype(arch);
    for (std::size_t n : sizes) {
      check_maps<float, A>(n, name);
      check_maps<double, A>(n, name);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("ops<cpu> sum_squares, sum_abs and clip_by_norm equal a double loop on every architecture") {
  const int ran = test::for_each_arch("reductions", [](auto arch, const char* name) {
    using A = decltype(arch);
    for (std::size_t n : sizes) {
      check_reductions<float, A>(n, name);
      check_reductions<double, A>(n, name);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("ops<cpu> convert and widen give the bits of the scalar conversions on every architecture") {
  const int ran = test::for_each_arch("conversions", [](auto arch, const char* name) {
    for (std::size_t n : sizes) check_conversions<decltype(arch)>(n, name);
  });
  CHECK(ran >= 1);
}

TEST_CASE("ops<cpu>::map runs a rule of its own: by-value arrays are only read, a non-finite result is reported") {
  const int ran = test::for_each_arch("map", [](auto arch, const char* name) {
    using A = decltype(arch);
    for (std::size_t n : sizes) {
      check_map<float, A>(n, name);
      check_map<double, A>(n, name);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("ops<cpu>::sum_squares gives the same bits whatever the thread count") {
  const std::size_t n = 5 * (std::size_t(1) << 15) + 3;
  const auto x = draw<float>(n, -1, 1, 9);
  auto& pool = kernels::cpu::thread_pool::global();
  const std::size_t before = pool.size();
  pool.resize(1);
  const double one = ops<cpu<>>::sum_squares(x.data(), n);
  pool.resize(3);
  const double three = ops<cpu<>>::sum_squares(x.data(), n);
  pool.resize(before);
  CHECK(one == three);
}
