// ctnn/schedules/warmup.hpp — a linear warmup in front of any schedule.
//
// warmup<S>{initial, warmup_steps, after}: for step < warmup_steps the rate
// rises linearly from `initial` to after(0):
//   rate = initial + (after(0) - initial) * step / warmup_steps
// then rate = after(step - warmup_steps): the wrapped schedule starts its own
// count when the warmup ends. warmup<cosine_decay>{a, w, cosine_decay{t, d, alpha}}
// equals Keras 3's CosineDecay(a, d, alpha, warmup_target=t, warmup_steps=w).
// Requires initial finite and >= 0, warmup_steps >= 0.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "../core/concepts.hpp"
#include "detail.hpp"

namespace ctnn {

template <Schedule S>
struct warmup {
  double initial_learning_rate;
  std::int64_t warmup_steps;
  S after;

  warmup(double initial, std::int64_t steps, S then) : initial_learning_rate(initial), warmup_steps(steps), after(std::move(then)) {
    detail::schedule_non_negative("warmup", "initial_learning_rate", initial);
    detail::schedule_steps("warmup", "warmup_steps", steps, true);
  }

  double operator()(std::int64_t step) const {
    if (step < warmup_steps) {
      const double target = double(after(0));
      return (target - initial_learning_rate) * (double(step) / double(warmup_steps)) + initial_learning_rate;
    }
    return double(after(step - warmup_steps));
  }
  std::string name() const {
    return "warmup(" + detail::format_number(initial_learning_rate) + " over " + std::to_string(warmup_steps) +
           " steps, then " + after.name() + ")";
  }
};

template <class S>
warmup(double, std::int64_t, S) -> warmup<S>;

}  // namespace ctnn
