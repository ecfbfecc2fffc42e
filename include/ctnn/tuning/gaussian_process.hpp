// ctnn/tuning/gaussian_process.hpp — the Gaussian process of Keras Tuner's Bayesian optimisation.
//
// matern52(d) = (1 + sqrt5 d + 5 d^2 / 3) exp(-sqrt5 d), d the Euclidean
// distance (length scale 1, as keras_tuner/tuners/bayesian.py). fit(x, y):
// y is normalized to zero mean and unit standard deviation (population std;
// 1 when all y are equal, where Keras Tuner would divide by zero), K = k(X, X)
// + alpha I is factored by Cholesky (L L^T = K) and a = K^-1 y solved.
// predict(x): mean = k(x, X) a, var = 1 - k(x, X) K^-1 k(X, x) (clamped at
// 0), both mapped back by the normalization: mean * std + mean_y, sqrt(var) * std.
// A K that is not positive definite throws std::runtime_error.
#pragma once
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ctnn::tuning {

inline double matern52(const std::vector<double>& a, const std::vector<double>& b) {
  double d2 = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  const double d = std::sqrt(5.0) * std::sqrt(d2);
  return (1.0 + d + d * d / 3.0) * std::exp(-d);
}

class gaussian_process {
 public:
  explicit gaussian_process(double alpha = 1e-4) : alpha_(alpha) {}

  void fit(std::vector<std::vector<double>> x, const std::vector<double>& y) {
    const std::size_t n = x.size();
    if (n == 0 || y.size() != n) throw std::invalid_argument("gaussian_process: fit needs as many targets as points (and at least one)");
    x_ = std::move(x);
    mean_ = 0;
    for (double v : y) mean_ += v;
    mean_ /= double(n);
    double var = 0;
    for (double v : y) var += (v - mean_) * (v - mean_);
    std_ = std::sqrt(var / double(n));
    if (!(std_ > 0)) std_ = 1;
    // Cholesky of K + alpha I
    l_.assign(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j <= i; ++j) {
        double s = matern52(x_[i], x_[j]) + (i == j ? alpha_ : 0.0);
        for (std::size_t k = 0; k < j; ++k) s -= l_[i * n + k] * l_[j * n + k];
        if (i == j) {
          if (!(s > 0)) throw std::runtime_error("gaussian_process: the kernel matrix is not positive definite");
          l_[i * n + i] = std::sqrt(s);
        } else {
          l_[i * n + j] = s / l_[j * n + j];
        }
      }
    std::vector<double> yn(n);
    for (std::size_t i = 0; i < n; ++i) yn[i] = (y[i] - mean_) / std_;
    a_ = solve_upper(solve_lower(yn));
  }

  // (mean, standard deviation) at x.
  std::pair<double, double> predict(const std::vector<double>& x) const {
    const std::size_t n = x_.size();
    std::vector<double> k(n);
    for (std::size_t i = 0; i < n; ++i) k[i] = matern52(x, x_[i]);
    double m = 0;
    for (std::size_t i = 0; i < n; ++i) m += k[i] * a_[i];
    const std::vector<double> v = solve_lower(k);  // k^T K^-1 k = |L^-1 k|^2
    double var = 1;
    for (double e : v) var -= e * e;
    if (var < 0) var = 0;
    return {m * std_ + mean_, std::sqrt(var) * std_};
  }

 private:
  std::vector<double> solve_lower(const std::vector<double>& b) const {
    const std::size_t n = x_.size();
    std::vector<double> r(b);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < i; ++k) r[i] -= l_[i * n + k] * r[k];
      r[i] /= l_[i * n + i];
    }
    return r;
  }
  std::vector<double> solve_upper(const std::vector<double>& b) const {  // L^T r = b
    const std::size_t n = x_.size();
    std::vector<double> r(b);
    for (std::size_t i = n; i-- > 0;) {
      for (std::size_t k = i + 1; k < n; ++k) r[i] -= l_[k * n + i] * r[k];
      r[i] /= l_[i * n + i];
    }
    return r;
  }

  double alpha_;
  std::vector<std::vector<double>> x_;
  std::vector<double> l_, a_;
  double mean_ = 0, std_ = 1;
};

}  // namespace ctnn::tuning
