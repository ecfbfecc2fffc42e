// ctnn/tuning/bayesian.hpp — Keras Tuner's BayesianOptimizationOracle.
//
// The first num_initial_points trials (default 3 x the number of
// hyperparameters, as the oracle; Keras Tuner's tuner passes 2) are random.
// Then a Gaussian process (gaussian_process.hpp, Matérn 5/2, alpha = 1e-4) is
// fit to the completed trials: x = each hyperparameter's value_to_prob (an
// inactive one at its default's), y = the score, negated when maximizing, so
// the search always minimizes. The next point minimizes the acquisition over
// [0, 1]^d: UCB (Keras Tuner's: mean - beta * std, beta = 2.6) or, with
// acquisition::expected_improvement, -EI = -((y* - m) Phi(z) + s phi(z)),
// z = (y* - m) / s, y* the best y. Keras Tuner minimizes with 50 L-BFGS-B
// starts (scipy); ctnn evaluates 50 random starts and improves each with a
// shrinking coordinate search (40 rounds), which needs no gradient. The
// point's values are the hyperparameters' prob_to_value.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gaussian_process.hpp"
#include "oracle.hpp"

namespace ctnn::tuning {

enum class acquisition { upper_confidence_bound, expected_improvement };

class bayesian_optimization : public oracle {
 public:
  struct options {
    std::size_t max_trials = 10;
    std::size_t num_initial_points = 0;  // 0: 3 x the number of hyperparameters
    double alpha = 1e-4;
    double beta = 2.6;
    tuning::acquisition acquisition = acquisition::upper_confidence_bound;
  };
  explicit bayesian_optimization(options o) : o_(o) {
    if (o.max_trials == 0) throw std::invalid_argument("bayesian_optimization: max_trials must be > 0");
    if (!(o.alpha > 0)) throw std::invalid_argument("bayesian_optimization: alpha must be > 0");
    if (!(o.beta >= 0)) throw std::invalid_argument("bayesian_optimization: beta must be >= 0");
    max_trials_ = o.max_trials;
  }
  std::string kind() const override { return "bayesian_optimization"; }

  std::optional<values> populate(const std::string&, const std::vector<trial>& trials) override {
    std::vector<std::vector<double>> x;
    std::vector<double> y;
    for (auto& t : trials) {
      if (t.status != trial_status::completed || !t.score || !std::isfinite(*t.score)) continue;
      x.push_back(space_.to_probs(t.hp));
      y.push_back(objective_.maximize ? -*t.score : *t.score);
    }
    const std::size_t initial = o_.num_initial_points ? o_.num_initial_points : 3 * space_.size();
    if (x.size() < initial || x.empty()) return random_values();
    gaussian_process gp(o_.alpha);
    gp.fit(x, y);
    double best_y = y[0];
    for (double v : y) best_y = std::min(best_y, v);
    auto acq = [&](const std::vector<double>& p) {
      const auto [m, s] = gp.predict(p);
      if (o_.acquisition == acquisition::upper_confidence_bound) return m - o_.beta * s;
      if (s <= 0) return 0.0;
      const double z = (best_y - m) / s;
      const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
      const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * 3.14159265358979323846);
      return -((best_y - m) * cdf + s * pdf);
    };
    const std::size_t d = space_.size();
    rng g = rng::derive(seed_, 0x62617965ull + seed_state_++);
    std::vector<double> best_x;
    double best_a = std::numeric_limits<double>::infinity();
    for (int start = 0; start < 50; ++start) {
      std::vector<double> p(d);
      for (auto& e : p) e = g.uniform();
      double a = acq(p);
      double h = 0.25;
      for (int round = 0; round < 40; ++round, h *= 0.8)
        for (std::size_t i = 0; i < d; ++i)
          for (double dir : {-1.0, 1.0}) {
            std::vector<double> q = p;
            q[i] = std::clamp(q[i] + dir * h, 0.0, 1.0);
            const double aq = acq(q);
            if (aq < a) {
              a = aq;
              p = std::move(q);
            }
          }
      if (a < best_a) {
        best_a = a;
        best_x = p;
      }
    }
    values v = space_.from_probs(best_x);
    tried_.insert(v.to_json().dump());
    return v;
  }

  nlohmann::json state() const override {
    nlohmann::json j = oracle::state();
    j["num_initial_points"] = o_.num_initial_points;
    j["alpha"] = o_.alpha;
    j["beta"] = o_.beta;
    return j;
  }
  // The base state, and the options recorded beside it present with their types (the
  // oracle's own options are the ones used).
  void set_state(const nlohmann::json& j) override {
    oracle::set_state(j);
    state::unsigned_integer(state::at(j, "state", "num_initial_points"), "state.num_initial_points");
    state::number(state::at(j, "state", "alpha"), "state.alpha");
    state::number(state::at(j, "state", "beta"), "state.beta");
  }

 private:
  options o_;
};

}  // namespace ctnn::tuning
