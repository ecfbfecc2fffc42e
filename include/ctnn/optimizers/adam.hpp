// ctnn/optimizers/adam.hpp — Adam, as Keras 3.
//
// adam<Schedule>(learning_rate = 0.001, beta_1 = 0.9, beta_2 = 0.999,
//                epsilon = 1e-7, amsgrad = false). Slots: m, v, and v_hat
// only with amsgrad (2 or 3). With t = iterations + 1 (updates applied before
// this one, as Keras' local_step; gradient accumulation: docs/training.md):
//   alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
//   m += (g - m) * (1 - beta_1);  v += (g^2 - v) * (1 - beta_2)
//   (amsgrad: v_hat = max(v_hat, v), used in place of v)
//   w -= alpha * m / (sqrt(v) + epsilon)
// Requires beta_1, beta_2 in [0, 1) and epsilon > 0.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base.hpp"

namespace ctnn {

template <class S = constant_schedule>
struct adam : optimizer_base<S> {
  static constexpr std::size_t max_slots_per_parameter = 3;
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
  bool amsgrad = false;

  adam() requires std::is_same_v<S, constant_schedule> : adam(constant_schedule{0.001}) {}
  explicit adam(S lr, double b1 = 0.9, double b2 = 0.999, double eps = 1e-7, bool ams = false)
      : optimizer_base<S>(std::move(lr)), beta_1(b1), beta_2(b2), epsilon(eps), amsgrad(ams) {
    detail::require_range("adam", "beta_1", beta_1, 0.0, 1.0);
    detail::require_range("adam", "beta_2", beta_2, 0.0, 1.0);
    detail::require_positive("adam", "epsilon", epsilon);
  }

  std::string name() const { return "adam"; }
  optimizer_config config() const {
    return {{"beta_1", beta_1}, {"beta_2", beta_2}, {"epsilon", epsilon}, {"amsgrad", double(amsgrad)}};
  }
  std::size_t slots_per_parameter() const noexcept { return amsgrad ? 3 : 2; }

  // update's coefficients for one update count and rate (alpha's two pow computed once), run on
  // any part of the parameter region: update(a) is prepare<T>(a.iteration, a.learning_rate).run<B>(a);
  // the step's per-layer update prepares them once a step for its calls (about 30 at batch 16: train/step.hpp)
  // where update and prepare are declared by one class (prepared.hpp's detail::prepared_update): a type
  // derived from adam that replaces update alone is run through its update; prepare alone is refused.
  template <class T>
  struct prepared {
    T alpha, b1, b2, eps;
    bool amsgrad;
    template <class B>
    bool run(const update_args<T>& a) const {
      if (amsgrad) return adam::template apply<B>(fn::amsgrad_update<T>{alpha, b1, b2, eps}, a, 0, 1, 2);
      return adam::template apply<B>(fn::adam_update<T>{alpha, b1, b2, eps}, a, 0, 1);
    }
  };
  template <class T>
  prepared<T> prepare(std::int64_t iteration, double learning_rate) const {
    const double t = double(iteration + 1);
    const double alpha = learning_rate * std::sqrt(1.0 - std::pow(beta_2, t)) / (1.0 - std::pow(beta_1, t));
    return {T(alpha), T(1.0 - beta_1), T(1.0 - beta_2), T(epsilon), amsgrad};
  }

  template <class B, class T>
  bool update(const update_args<T>& a) const {
    return prepare<T>(a.iteration, a.learning_rate).template run<B>(a);
  }
};

adam()->adam<constant_schedule>;
adam(double, double = 0.9, double = 0.999, double = 1e-7, bool = false)->adam<constant_schedule>;
adam(float, double = 0.9, double = 0.999, double = 1e-7, bool = false)->adam<constant_schedule>;
template <class S>
adam(S, double = 0.9, double = 0.999, double = 1e-7, bool = false) -> adam<S>;

}  // namespace ctnn
