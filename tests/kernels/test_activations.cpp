// backends/cpu/activations.hpp (vectorized activations, row_max and softmax
// rows) against the scalar reference kernels/activations_reference.hpp, on
// sizes 1, 3, 17, 255, 1000 (full batches and every tail), float and double,
// on every xsimd architecture this CPU runs (tests/kernels/archs.hpp).
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/activations.hpp>
#include <ctnn/kernels/activations_reference.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace ctnn;
namespace cpu = ctnn::kernels::cpu;
namespace ref = ctnn::kernels::reference;

namespace {

constexpr std::size_t sizes[] = {1, 3, 17, 255, 1000};

template <class T>
std::vector<T> draw(std::size_t n, double lo, double hi, std::uint64_t seed) {
  rng g(seed);
  std::vector<T> v(n);
  for (auto& e : v) e = T(g.uniform(lo, hi));
  return v;
}

// |a - b| <= rtol |b| + atol, elementwise; exp/tanh of xsimd may differ by a few ulps.
template <class T>
bool close(const std::vector<T>& a, const std::vector<T>& b) {
  const double rtol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  const double atol = std::is_same_v<T, float> ? 1e-7 : 1e-15;
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = double(a[i]), y = double(b[i]);
    if (!std::isfinite(x) || !(std::abs(x - y) <= rtol * std::abs(y) + atol)) {
      MESSAGE("index " << i << ": " << x << " vs " << y);
      return false;
    }
  }
  return true;
}

// z in [-8, 8] with exact zeros and a few extreme values mixed in.
template <class T>
std::vector<T> inputs(std::size_t n, std::uint64_t seed) {
  auto z = draw<T>(n, -8, 8, seed);
  for (std::size_t i = 0; i < n; i += 7) z[i] = T(0);
  for (std::size_t i = 3; i < n; i += 11) z[i] = (i % 2) ? T(1000) : T(-1000);
  for (std::size_t i = 5; i < n; i += 13) z[i] = (i % 2) ? T(40) : T(-40);
  return z;
}

template <class T, class Arch>
void check_elementwise(std::size_t n, const char* arch) {
  INFO(std::string(arch) << " n=" << n << " float=" << std::is_same_v<T, float>);
  const auto z = inputs<T>(n, n);
  const auto d = draw<T>(n, -1, 1, n + 1);
  const T alpha = T(0.2);
  auto fwd = [&](auto vec, auto scalar) {
    auto a = z, b = z;
    vec(a.data());
    scalar(b.data());
    CHECK(close(a, b));
    return b;
  };
  auto bwd = [&](const std::vector<T>& y, auto vec, auto scalar) {
    auto a = d, b = d;
    vec(y.data(), a.data());
    scalar(y.data(), b.data());
    CHECK(close(a, b));
  };
  {
    const auto y = fwd([&](T* p) { cpu::relu_forward<T, Arch>(p, n); }, [&](T* p) { ref::relu_forward(p, n); });
    bwd(y, [&](const T* p, T* q) { cpu::relu_backward<T, Arch>(p, q, n); }, [&](const T* p, T* q) { ref::relu_backward(p, q, n); });
  }
  {
    const auto y = fwd([&](T* p) { cpu::leaky_relu_forward<T, Arch>(p, n, alpha); },
                       [&](T* p) { ref::leaky_relu_forward(p, n, alpha); });
    bwd(y, [&](const T* p, T* q) { cpu::leaky_relu_backward<T, Arch>(p, q, n, alpha); },
        [&](const T* p, T* q) { ref::leaky_relu_backward(p, q, n, alpha); });
  }
  {
    const auto y = fwd([&](T* p) { cpu::sigmoid_forward<T, Arch>(p, n); }, [&](T* p) { ref::sigmoid_forward(p, n); });
    bwd(y, [&](const T* p, T* q) { cpu::sigmoid_backward<T, Arch>(p, q, n); },
        [&](const T* p, T* q) { ref::sigmoid_backward(p, q, n); });
  }
  {
    const auto y = fwd([&](T* p) { cpu::tanh_forward<T, Arch>(p, n); }, [&](T* p) { ref::tanh_forward(p, n); });
    bwd(y, [&](const T* p, T* q) { cpu::tanh_backward<T, Arch>(p, q, n); }, [&](const T* p, T* q) { ref::tanh_backward(p, q, n); });
  }
}

template <class T, class Arch>
void check_softmax(std::size_t cols, const char* arch) {
  INFO(std::string(arch) << " cols=" << cols << " float=" << std::is_same_v<T, float>);
  const std::size_t rows = 3;
  auto z = draw<T>(rows * cols, -8, 8, cols + 7);
  z[cols / 2] = T(60);  // a large logit in row 0: the max must be subtracted
  auto a = z, b = z;
  cpu::softmax_forward<T, Arch>(a.data(), rows, cols);
  ref::softmax_forward(b.data(), rows, cols);
  CHECK(close(a, b));
  for (std::size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::size_t j = 0; j < cols; ++j) s += double(a[r * cols + j]);
    CHECK(std::abs(s - 1.0) <= (std::is_same_v<T, float> ? 1e-5 : 1e-12));
  }
  const auto d = draw<T>(rows * cols, -1, 1, cols + 8);
  auto da = d, db = d;
  cpu::softmax_backward<T, Arch>(b.data(), da.data(), rows, cols);
  ref::softmax_backward(b.data(), db.data(), rows, cols);
  CHECK(close(da, db));
}

// row_max is exact: the same maximum as a scalar scan, wherever it lies.
template <class T, class Arch>
void check_row_max(std::size_t n, const char* arch) {
  INFO(std::string(arch) << " n=" << n << " float=" << std::is_same_v<T, float>);
  auto z = inputs<T>(n, n + 3);
  for (std::size_t at : {std::size_t(0), n / 2, n - 1}) {
    auto x = z;
    x[at] = T(5000);
    CHECK(cpu::row_max<T, Arch>(x.data(), n) == T(5000));
  }
  CHECK(cpu::row_max<T, Arch>(z.data(), n) == *std::max_element(z.begin(), z.end()));
}

// sigmoid from exp(-|z|): exactly 0 and 1 at |z| = 1000, in the batches and the tail.
template <class T, class Arch>
void check_sigmoid_extremes(const char* arch) {
  INFO(std::string(arch) << " float=" << std::is_same_v<T, float>);
  std::vector<T> f(35, T(1000));
  for (std::size_t i = 0; i < f.size(); i += 2) f[i] = T(-1000);
  cpu::sigmoid_forward<T, Arch>(f.data(), f.size());
  for (std::size_t i = 0; i < f.size(); ++i) CHECK(f[i] == (i % 2 ? T(1) : T(0)));
}

template <class T, class Arch>
void check_all(const char* arch) {
  for (std::size_t n : sizes) {
    check_elementwise<T, Arch>(n, arch);
    check_softmax<T, Arch>(n, arch);
    check_row_max<T, Arch>(n, arch);
  }
  check_sigmoid_extremes<T, Arch>(arch);
}

}  // namespace

TEST_CASE("vectorized relu, leaky_relu, sigmoid, tanh, row_max and softmax equal the scalar reference on every "
          "architecture this CPU runs") {
  const int ran = test::for_each_arch("activations", [](auto arch, const char* name) {
    check_all<float, decltype(arch)>(name);
    check_all<double, decltype(arch)>(name);
  });
  CHECK(ran >= 1);  // x86-64 always has SSE2
}

TEST_CASE("vectorized sigmoid is overflow-safe for |z| = 1000") {
  std::vector<float> f(35, 1000.0f);
  for (std::size_t i = 0; i < f.size(); i += 2) f[i] = -1000.0f;
  cpu::sigmoid_forward(f.data(), f.size());
  for (std::size_t i = 0; i < f.size(); ++i) CHECK(f[i] == (i % 2 ? 1.0f : 0.0f));
  std::vector<double> g(19, -1000.0);
  g[4] = 1000.0;
  cpu::sigmoid_forward(g.data(), g.size());
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == (i == 4 ? 1.0 : 0.0));
}

TEST_CASE("vectorized relu maps negative values and zero to zero and keeps positives") {
  std::vector<float> y{-2, -0.0f, 0, 1, 2, -3, 4, 5, -6, 7, 8, -9, 10, 11, 12, -13, 14, 15};
  auto e = y;
  for (auto& v : e) v = v > 0 ? v : 0.0f;
  cpu::relu_forward(y.data(), y.size());
  CHECK(y == e);
}

TEST_CASE("the recurrent gates' float tanh and sigmoid (fn::gate_tanh_fn, gate_sigmoid_fn) are within 4e-7 / 2.5e-7 of "
          "tanh and sigmoid on every architecture, within [-1, 1] / [0, 1], a NaN passes through; double: tanh, sigmoid") {
  // -20 .. 20 by 1/1024 (odd count: the vector bodies and a scalar tail), the clamp's neighbourhood, +-inf, NaN
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> z;
  for (int k = -20 * 1024; k <= 20 * 1024; ++k) z.push_back(float(k) / 1024);
  for (float c : {7.9053f, 7.90531f, 7.9054f, 15.8106f, 15.8107f, 1e-6f, inf}) z.insert(z.end(), {c, -c});
  z.push_back(nan);
  const int ran = test::for_each_arch("gate tanh and sigmoid", [&](auto arch, const char* name) {
    using A = decltype(arch);
    std::vector<float> t = z, s = z;
    cpu::map<A>(fn::forward_of<fn::gate_tanh_fn>{}, t.size(), t.data());
    cpu::map<A>(fn::forward_of<fn::gate_sigmoid_fn>{}, s.size(), s.data());
    double et = 0, es = 0;
    bool range = true, nan_through = true;
    for (std::size_t i = 0; i < z.size(); ++i) {
      if (std::isnan(z[i])) {
        nan_through = nan_through && std::isnan(t[i]) && std::isnan(s[i]);
        continue;
      }
      et = std::max(et, std::abs(double(t[i]) - std::tanh(double(z[i]))));
      es = std::max(es, std::abs(double(s[i]) - 1 / (1 + std::exp(-double(z[i])))));
      range = range && t[i] >= -1 && t[i] <= 1 && s[i] >= 0 && s[i] <= 1;
    }
    INFO(std::string(name) << ": tanh error " << et << ", sigmoid error " << es);
    CHECK(et < 4e-7);
    CHECK(es < 2.5e-7);
    CHECK(range);
    CHECK(nan_through);
  });
  CHECK(ran >= 1);
  for (double v : {-30.0, -3.0, -0.1, 0.0, 0.7, 12.0}) {
    CHECK(fn::gate_tanh_fn{}.forward(v) == fn::tanh_fn{}.forward(v));
    CHECK(fn::gate_sigmoid_fn{}.forward(v) == fn::sigmoid_fn{}.forward(v));
  }
}
