// ctnn/schedules/inverse_time_decay.hpp — Keras' InverseTimeDecay.
//
// inverse_time_decay{initial, decay_steps, decay_rate, staircase = false}:
//   p = step / decay_steps (floored when staircase)
//   rate = initial / (1 + decay_rate * p)
// Requires initial > 0, decay_steps > 0, decay_rate >= 0 (all finite;
// std::invalid_argument naming the parameter otherwise).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "detail.hpp"

namespace ctnn {

struct inverse_time_decay {
  double initial_learning_rate;
  std::int64_t decay_steps;
  double decay_rate;
  bool staircase = false;

  inverse_time_decay(double initial, std::int64_t steps, double rate, bool stair = false)
      : initial_learning_rate(initial), decay_steps(steps), decay_rate(rate), staircase(stair) {
    detail::schedule_positive("inverse_time_decay", "initial_learning_rate", initial);
    detail::schedule_steps("inverse_time_decay", "decay_steps", steps);
    detail::schedule_non_negative("inverse_time_decay", "decay_rate", rate);
  }

  double operator()(std::int64_t step) const {
    double p = double(step) / double(decay_steps);
    if (staircase) p = std::floor(p);
    return initial_learning_rate / (1.0 + decay_rate * p);
  }
  std::string name() const {
    return "inverse_time_decay(" + detail::format_number(initial_learning_rate) + ", " + std::to_string(decay_steps) +
           ", " + detail::format_number(decay_rate) + (staircase ? ", staircase)" : ")");
  }
};

}  // namespace ctnn
