// ctnn/schedules/cosine_decay.hpp — Keras 3's CosineDecay, warmup included.
//
// cosine_decay{initial, decay_steps, alpha = 0, warmup_target = none, warmup_steps = 0}:
//   decayed(s, from) = from * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) + alpha)
//   no warmup_target: rate = decayed(min(step, decay_steps), initial)
//   with warmup_target (w = warmup_steps, s = min(step, decay_steps + w)):
//     s < w:  rate = initial + (warmup_target - initial) * s / w   (linear warmup)
//     else:   rate = decayed(s - w, warmup_target)
// Requires initial > 0 (>= 0 with a warmup_target), decay_steps > 0, alpha in
// [0, 1], warmup_steps >= 0, warmup_target finite and > 0 when given. warmup<S> (warmup.hpp) puts the
// same linear warmup in front of any schedule.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>

#include "detail.hpp"

namespace ctnn {

struct cosine_decay {
  double initial_learning_rate;
  std::int64_t decay_steps;
  double alpha = 0.0;
  std::optional<double> warmup_target;
  std::int64_t warmup_steps = 0;

  cosine_decay(double initial, std::int64_t steps, double alpha_ = 0.0, std::optional<double> target = std::nullopt,
               std::int64_t warm_steps = 0)
      : initial_learning_rate(initial), decay_steps(steps), alpha(alpha_), warmup_target(target),
        warmup_steps(warm_steps) {
    if (target)
      detail::schedule_non_negative("cosine_decay", "initial_learning_rate", initial);
    else
      detail::schedule_positive("cosine_decay", "initial_learning_rate", initial);
    detail::schedule_steps("cosine_decay", "decay_steps", steps);
    if (!(alpha_ >= 0 && alpha_ <= 1))
      throw std::invalid_argument("cosine_decay: alpha must be in [0, 1], got " + detail::format_number(alpha_));
    if (target) detail::schedule_positive("cosine_decay", "warmup_target", *target);
    detail::schedule_steps("cosine_decay", "warmup_steps", warm_steps, true);
  }

  double operator()(std::int64_t step) const {
    const double d = double(decay_steps);
    double s = double(step);
    if (!warmup_target) return decayed(std::min(s, d), initial_learning_rate);
    const double w = double(warmup_steps), target = warmup_target.value_or(0.0);
    s = std::min(s, d + w);
    if (s < w) return (target - initial_learning_rate) * (s / w) + initial_learning_rate;
    return decayed(s - w, target);
  }
  std::string name() const {
    std::string r = "cosine_decay(" + detail::format_number(initial_learning_rate) + ", " + std::to_string(decay_steps) +
                    ", alpha " + detail::format_number(alpha);
    if (warmup_target)
      r += ", warmup to " + detail::format_number(*warmup_target) + " over " + std::to_string(warmup_steps) + " steps";
    return r + ")";
  }

 private:
  double decayed(double s, double from) const {
    const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * s / double(decay_steps)));
    return from * ((1.0 - alpha) * cosine + alpha);
  }
};

}  // namespace ctnn
