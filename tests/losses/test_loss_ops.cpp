// The batched loss ops of ops<cpu<Arch>> (core/backend_ops.hpp, has_loss_ops):
// sparse_crossentropy_loss, categorical_crossentropy_loss (logits and
// probabilities) and squared_error_loss, each against a scalar reference
// written here in double, on every architecture this CPU runs
// (tests/kernels/archs.hpp): the loss sum added to step_scalars::loss_sum,
// dL/dy times the scale and the scalars' loss_scale, the non-finite flag.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/core/rng.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace ctnn;

namespace {

// Reference: -sum t log softmax(z) per row; d = (softmax(z) sum(t) - t) * scale.
double ref_logits(const std::vector<float>& z, const std::vector<double>& t, std::size_t rows, std::size_t n,
                  std::vector<double>& d, double scale) {
  double total = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    double mx = -std::numeric_limits<double>::infinity(), s = 0, ts = 0;
    for (std::size_t j = 0; j < n; ++j) mx = std::max(mx, double(z[i * n + j]));
    for (std::size_t j = 0; j < n; ++j) s += std::exp(double(z[i * n + j]) - mx);
    for (std::size_t j = 0; j < n; ++j) ts += t[i * n + j];
    for (std::size_t j = 0; j < n; ++j) {
      const double p = std::exp(double(z[i * n + j]) - mx) / s;
      total -= t[i * n + j] * std::log(p);
      d[i * n + j] = (p * ts - t[i * n + j]) * scale;
    }
  }
  return total;
}
// Reference, Keras' probabilities: o = p / sum p, c = clip(o, 1e-7, 1 - 1e-7), -sum t log c.
double ref_probs(const std::vector<float>& p, const std::vector<double>& t, std::size_t rows, std::size_t n,
                 std::vector<double>& d, double scale) {
  const double eps = 1e-7;
  double total = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    double s = 0, dot = 0;
    for (std::size_t j = 0; j < n; ++j) s += double(p[i * n + j]);
    std::vector<double> g(n);
    for (std::size_t j = 0; j < n; ++j) {
      const double o = double(p[i * n + j]) / s, c = std::clamp(o, eps, 1 - eps);
      total -= t[i * n + j] * std::log(c);
      g[j] = (o > eps && o < 1 - eps) ? -t[i * n + j] / c : 0.0;
      dot += g[j] * o;
    }
    for (std::size_t j = 0; j < n; ++j) d[i * n + j] = (g[j] - dot) / s * scale;
  }
  return total;
}

template <class Arch>
void check_arch(const char* arch) {
  using O = ops<cpu<Arch>>;
  for (const std::size_t n : {2, 3, 17, 40}) {
    for (const bool logits : {true, false}) {
      for (const double ls : {1.0, 1024.0}) {
        INFO(std::string(arch) << " n=" << n << " logits=" << logits << " loss_scale=" << ls);
        const std::size_t rows = 5;
        rng g(n * 7 + (logits ? 1 : 0));
        std::vector<float> y(rows * n);
        for (auto& e : y) e = logits ? float(g.uniform(-4, 4)) : float(g.uniform(0.01, 1));
        std::vector<std::int32_t> labels(rows);
        std::vector<double> onehot(rows * n, 0.0), soft(rows * n);
        std::vector<float> softf(rows * n);
        for (std::size_t i = 0; i < rows; ++i) {
          labels[i] = std::int32_t((i * 5 + 1) % n);
          onehot[i * n + std::size_t(labels[i])] = 1.0;
          double s = 0;
          for (std::size_t j = 0; j < n; ++j) s += (soft[i * n + j] = g.uniform(0, 1));
          for (std::size_t j = 0; j < n; ++j) softf[i * n + j] = float(soft[i * n + j] /= s);
        }
        for (std::size_t j = 0; j < soft.size(); ++j) soft[j] = double(softf[j]);  // the float targets the op sees
        const double scale = 1.0 / double(rows);
        std::vector<double> rd(rows * n);
        std::vector<float> d(rows * n);
        auto close = [&](const step_scalars& s, double want, double before) {
          CHECK(std::abs(s.loss_sum - before - want) <= 1e-5 * std::max(1.0, std::abs(want)));
          CHECK(s.non_finite == 0);
          for (std::size_t k = 0; k < d.size(); ++k) CHECK(std::abs(double(d[k]) - rd[k] * ls) <= 1e-6 * ls);
        };
        {  // sparse
          step_scalars s;
          s.loss_sum = 1.5;  // accumulates
          s.loss_scale = ls;
          O::sparse_crossentropy_loss(y.data(), labels.data(), rows, n, d.data(), scale, logits, &s);
          const double want = logits ? ref_logits(y, onehot, rows, n, rd, scale) : ref_probs(y, onehot, rows, n, rd, scale);
          close(s, want, 1.5);
          step_scalars s2;  // no gradient buffer: the same sum
          O::sparse_crossentropy_loss(y.data(), labels.data(), rows, n, static_cast<float*>(nullptr), scale, logits, &s2);
          CHECK(s2.loss_sum == doctest::Approx(s.loss_sum - 1.5).epsilon(1e-12));
        }
        {  // categorical, soft targets
          step_scalars s;
          s.loss_scale = ls;
          O::categorical_crossentropy_loss(y.data(), softf.data(), rows, n, d.data(), scale, logits, &s);
          const double want = logits ? ref_logits(y, soft, rows, n, rd, scale) : ref_probs(y, soft, rows, n, rd, scale);
          close(s, want, 0.0);
        }
      }
    }
  }
  // squared error: sum (y - t)^2 / divisor; d = scale (y - t) loss_scale
  {
    INFO(arch << std::string(" squared_error_loss"));
    std::vector<float> y{1.0f, -2.0f, 0.5f, 3.0f, 0.0f, 1.25f}, t{0.0f, 1.0f, 0.5f, -1.0f, 2.0f, 1.0f}, d(6);
    step_scalars s;
    s.loss_sum = 2.0;
    s.loss_scale = 8.0;
    O::squared_error_loss(y.data(), t.data(), 6, d.data(), 0.5, 3.0, &s);
    double want = 0;
    for (std::size_t i = 0; i < 6; ++i) {
      const double e = double(y[i]) - double(t[i]);
      want += e * e;
      CHECK(double(d[i]) == doctest::Approx(0.5 * e * 8.0));
    }
    CHECK(s.loss_sum == doctest::Approx(2.0 + want / 3.0));
    CHECK(s.non_finite == 0);
  }
  // a NaN or infinite output sets the flag (and the sum is not finite)
  for (const bool logits : {true, false}) {
    std::vector<float> z{0.5f, std::numeric_limits<float>::quiet_NaN(), 1.0f, 0.25f, 0.5f, 0.25f}, d(6);
    const std::vector<std::int32_t> l{0, 2};
    step_scalars s;
    O::sparse_crossentropy_loss(z.data(), l.data(), 2, 3, d.data(), 0.5, logits, &s);
    CHECK(s.non_finite != 0);
    CHECK(!std::isfinite(s.loss_sum));
    step_scalars c;
    O::categorical_crossentropy_loss(z.data(), z.data(), 2, 3, d.data(), 0.5, logits, &c);
    CHECK(c.non_finite != 0);
  }
  {
    std::vector<float> y{std::numeric_limits<float>::infinity(), 1.0f}, t{0.0f, 1.0f}, d(2);
    step_scalars s;
    O::squared_error_loss(y.data(), t.data(), 2, d.data(), 1.0, 1.0, &s);
    CHECK(s.non_finite != 0);
  }
}

}  // namespace

TEST_CASE("the batched loss ops into step_scalars against the scalar references, every architecture") {
  const int ran = test::for_each_arch("loss ops", [](auto a, const char* name) { check_arch<decltype(a)>(name); });
  CHECK(ran >= 1);
}
