// ctnn/schedules/polynomial_decay.hpp — Keras' PolynomialDecay.
//
// polynomial_decay{initial, decay_steps, end = 1e-4, power = 1, cycle = false}:
//   without cycle: s = min(step, decay_steps), d = decay_steps
//   with cycle:    s = step, d = decay_steps * max(1, ceil(step / decay_steps))
//   rate = (initial - end) * (1 - s / d) ^ power + end
// Requires initial > 0, decay_steps > 0, end >= 0, power > 0 (all finite;
// std::invalid_argument naming the parameter otherwise).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "detail.hpp"

namespace ctnn {

struct polynomial_decay {
  double initial_learning_rate;
  std::int64_t decay_steps;
  double end_learning_rate = 1e-4;
  double power = 1.0;
  bool cycle = false;

  polynomial_decay(double initial, std::int64_t steps, double end = 1e-4, double power_ = 1.0, bool cycle_ = false)
      : initial_learning_rate(initial), decay_steps(steps), end_learning_rate(end), power(power_), cycle(cycle_) {
    detail::schedule_positive("polynomial_decay", "initial_learning_rate", initial);
    detail::schedule_steps("polynomial_decay", "decay_steps", steps);
    detail::schedule_non_negative("polynomial_decay", "end_learning_rate", end);
    detail::schedule_positive("polynomial_decay", "power", power_);
  }

  double operator()(std::int64_t step) const {
    double s = double(step), d = double(decay_steps);
    if (cycle)
      d *= step == 0 ? 1.0 : std::ceil(s / d);
    else
      s = std::min(s, d);
    return (initial_learning_rate - end_learning_rate) * std::pow(1.0 - s / d, power) + end_learning_rate;
  }
  std::string name() const {
    return "polynomial_decay(" + detail::format_number(initial_learning_rate) + ", " + std::to_string(decay_steps) +
           ", end " + detail::format_number(end_learning_rate) + ", power " + detail::format_number(power) +
           (cycle ? ", cycle)" : ")");
  }
};

}  // namespace ctnn
