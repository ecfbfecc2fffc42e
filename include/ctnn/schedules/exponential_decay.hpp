// ctnn/schedules/exponential_decay.hpp — Keras' ExponentialDecay.
//
// rate(step) = initial * decay_rate ^ (step / decay_steps), with the
// exponent floored when staircase is true. step counts optimizer updates
// (the trainer hands it over). Requires initial > 0, decay_steps > 0,
// decay_rate > 0 (std::invalid_argument naming the parameter otherwise).
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/format.hpp"

namespace ctnn {

struct exponential_decay {
  double initial_learning_rate;
  std::int64_t decay_steps;
  double decay_rate;
  bool staircase = false;

  // Checks its arguments (out of line: the messages compiled once in the compiled part, core/separate.hpp).
  exponential_decay(double initial, std::int64_t steps, double rate, bool stair = false);

  double operator()(std::int64_t step) const {
    double p = double(step) / double(decay_steps);
    if (staircase) p = std::floor(p);
    return initial_learning_rate * std::pow(decay_rate, p);
  }
  std::string name() const;
};

#if CTNN_DEFINITIONS
CTNN_DECL exponential_decay::exponential_decay(double initial, std::int64_t steps, double rate, bool stair)
    : initial_learning_rate(initial), decay_steps(steps), decay_rate(rate), staircase(stair) {
  if (!(std::isfinite(initial) && initial > 0))
    throw std::invalid_argument("exponential_decay: initial_learning_rate must be finite and > 0, got " +
                                detail::format_number(initial));
  if (steps <= 0)
    throw std::invalid_argument("exponential_decay: decay_steps must be > 0, got " + std::to_string(steps));
  if (!(std::isfinite(rate) && rate > 0))
    throw std::invalid_argument("exponential_decay: decay_rate must be finite and > 0, got " +
                                detail::format_number(rate));
}
CTNN_DECL std::string exponential_decay::name() const {
  return "exponential_decay(" + detail::format_number(initial_learning_rate) + ", " + std::to_string(decay_steps) +
         ", " + detail::format_number(decay_rate) + (staircase ? ", staircase)" : ")");
}
#endif

}  // namespace ctnn
