// ctnn/pruning/schedules.hpp — when to prune and to which sparsity (TFMOT's pruning schedules).
//
// A pruning schedule is a type whose parameters are compile-time constants:
//   constant_sparsity<S, Begin = 0, Frequency = 100>
//     tfmot.sparsity.keras.ConstantSparsity: sparsity S from step Begin on,
//     forever (end_step = -1).
//   polynomial_sparsity<S0, S1, Begin, End, Power = 3, Frequency = 100>
//     tfmot.sparsity.keras.PolynomialDecay:
//       p = clamp((step - Begin) / (End - Begin), 0, 1)
//       sparsity(step) = (S0 - S1) * (1 - p)^Power + S1
// Both prune at step t (the optimizer's update count before the step) when
// TFMOT's _should_prune_in_step holds:
//   t >= Begin && (t <= End || End < 0) && (t - Begin) % Frequency == 0
// final_sparsity is the sparsity the schedule ends at: a constant the
// stripped layer's size follows from. Validity (sparsities in [0, 1), End >=
// Begin, Begin >= 0, Frequency > 0, Power >= 1) is checked where the schedule
// is used, by the wrapper (pruning/prune.hpp), which names the layer's position.
// TFMOT's power may be a float; here it is an integer so sparsity() is constexpr.
#pragma once
#include <cstdint>
#include <string>

#include "../core/format.hpp"

namespace ctnn {

namespace detail {
// TFMOT's PruningSchedule._should_prune_in_step.
constexpr bool should_prune_in_step(std::int64_t step, std::int64_t begin, std::int64_t end, std::int64_t frequency) {
  const bool in_range = step >= begin && (step <= end || end < 0);
  // tf.math.floormod: the result has the sign of the divisor (frequency > 0)
  std::int64_t r = (step - begin) % frequency;
  if (r < 0) r += frequency;
  return in_range && r == 0;
}
constexpr double int_pow(double b, int e) {
  double r = 1;
  for (int i = 0; i < e; ++i) r *= b;
  return r;
}
}  // namespace detail

template <double S, std::int64_t Begin = 0, std::int64_t Frequency = 100>
struct constant_sparsity {
  using is_pruning_schedule = void;
  static constexpr double initial_sparsity = S, final_sparsity = S;
  static constexpr std::int64_t begin_step = Begin, end_step = -1, frequency = Frequency;
  static constexpr int power = 1;
  static constexpr bool should_prune(std::int64_t step) {
    return detail::should_prune_in_step(step, Begin, -1, Frequency);
  }
  static constexpr double sparsity(std::int64_t) { return S; }
  static std::string name() {
    return "constant_sparsity<" + detail::format_number(S) + ", " + std::to_string(Begin) + ", " +
           std::to_string(Frequency) + ">";
  }
};

template <double S0, double S1, std::int64_t Begin, std::int64_t End, int Power = 3, std::int64_t Frequency = 100>
struct polynomial_sparsity {
  using is_pruning_schedule = void;
  static constexpr double initial_sparsity = S0, final_sparsity = S1;
  static constexpr std::int64_t begin_step = Begin, end_step = End, frequency = Frequency;
  static constexpr int power = Power;
  static constexpr bool should_prune(std::int64_t step) {
    return detail::should_prune_in_step(step, Begin, End, Frequency);
  }
  static constexpr double sparsity(std::int64_t step) {
    double p = End > Begin ? double(step - Begin) / double(End - Begin) : 1.0;
    p = p < 0 ? 0 : (p > 1 ? 1 : p);
    return (S0 - S1) * detail::int_pow(1 - p, Power) + S1;
  }
  static std::string name() {
    return "polynomial_sparsity<" + detail::format_number(S0) + ", " + detail::format_number(S1) + ", " +
           std::to_string(Begin) + ", " + std::to_string(End) + ", " + std::to_string(Power) + ", " +
           std::to_string(Frequency) + ">";
  }
};

template <class S>
concept PruningSchedule = requires { typename S::is_pruning_schedule; };

}  // namespace ctnn
