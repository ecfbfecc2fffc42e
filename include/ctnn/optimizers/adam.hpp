// ctnn/optimizers/adam.hpp — Adam, as Keras 3.
//
// adam<Schedule>(learning_rate = 0.001, beta_1 = 0.9, beta_2 = 0.999,
//                epsilon = 1e-7, amsgrad = false). Slots: m, v (and v_hat
// with amsgrad, 3 in all). With t = iterations + 1 (updates applied before
// this one, as Keras' local_step; gradient accumulation: docs/training.md):
//   alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
//   m += (g - m) * (1 - beta_1);  v += (g^2 - v) * (1 - beta_2)
//   (amsgrad: v_hat = max(v_hat, v), used in place of v)
//   w -= alpha * m / (sqrt(v) + epsilon)
// Requires beta_1, beta_2 in [0, 1) and epsilon > 0.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../backends/cpu/ops.hpp"
#include "../core/concepts.hpp"
#include "../schedules/constant_schedule.hpp"
#include "detail.hpp"

namespace ctnn {

template <class S = constant_schedule>
struct adam {
  static constexpr std::size_t slots_per_parameter = 3;
  S schedule;
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
  bool amsgrad = false;

  adam() requires std::is_same_v<S, constant_schedule> : adam(constant_schedule{0.001}) {}
  explicit adam(S lr, double b1 = 0.9, double b2 = 0.999, double eps = 1e-7, bool ams = false)
      : schedule(std::move(lr)), beta_1(b1), beta_2(b2), epsilon(eps), amsgrad(ams) {
    detail::require_range("adam", "beta_1", beta_1, 0.0, 1.0);
    detail::require_range("adam", "beta_2", beta_2, 0.0, 1.0);
    detail::require_positive("adam", "epsilon", epsilon);
  }

  std::string name() const { return "adam"; }
  // The schedule's rate at update `it` (the model's training state may scale it: reduce_lr_on_plateau).
  double learning_rate(std::int64_t it) const { return double(schedule(it)); }
  // slots: slots_per_parameter arrays of n values, zero-filled by the model.
  template <class T>
  void init_slots(T*, std::size_t) const {}

  // One update through ops<B>; true when every new parameter is finite.
  template <class B, class T>
  bool update(const update_args<T>& a) const {
    T* w = a.w;
    const T* g = a.g;
    T* slots = a.slots;
    const std::size_t n = a.n;
    const double t = double(a.iteration + 1);
    const double alpha_d = a.learning_rate * std::sqrt(1.0 - std::pow(beta_2, t)) / (1.0 - std::pow(beta_1, t));
    const T alpha = T(alpha_d), b1 = T(1.0 - beta_1), b2 = T(1.0 - beta_2), eps = T(epsilon);
    return ops<B>::adam_update(w, g, slots, slots + n, slots + 2 * n, n, alpha, b1, b2, eps, amsgrad);
  }
};

adam()->adam<constant_schedule>;
adam(double, double = 0.9, double = 0.999, double = 1e-7, bool = false)->adam<constant_schedule>;
adam(float, double = 0.9, double = 0.999, double = 1e-7, bool = false)->adam<constant_schedule>;
template <class S>
adam(S, double = 0.9, double = 0.999, double = 1e-7, bool = false) -> adam<S>;

}  // namespace ctnn
