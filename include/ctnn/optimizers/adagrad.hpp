// ctnn/optimizers/adagrad.hpp — Adagrad, as Keras 3.
//
// adagrad<Schedule>(learning_rate = 0.001, initial_accumulator_value = 0.1,
//                   epsilon = 1e-7). One slot, the accumulator, starting at
// initial_accumulator_value:
//   acc += g^2;  w -= lr * g / sqrt(acc + epsilon)
// Requires initial_accumulator_value >= 0 and epsilon > 0.
#pragma once
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
struct adagrad {
  static constexpr std::size_t slots_per_parameter = 1;
  S schedule;
  double initial_accumulator_value = 0.1, epsilon = 1e-7;

  adagrad() requires std::is_same_v<S, constant_schedule> : adagrad(constant_schedule{0.001}) {}
  explicit adagrad(S lr, double initial = 0.1, double eps = 1e-7)
      : schedule(std::move(lr)), initial_accumulator_value(initial), epsilon(eps) {
    detail::require_range("adagrad", "initial_accumulator_value", initial, 0.0, 1e30);
    detail::require_positive("adagrad", "epsilon", epsilon);
  }

  std::string name() const { return "adagrad"; }
  // The schedule's rate at update `it` (the model's training state may scale it: reduce_lr_on_plateau).
  double learning_rate(std::int64_t it) const { return double(schedule(it)); }
  template <class T>
  void init_slots(T* slots, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) slots[i] = T(initial_accumulator_value);
  }

  // One update through ops<B>; true when every new parameter is finite.
  template <class B, class T>
  bool update(const update_args<T>& a) const {
    T* w = a.w;
    const T* g = a.g;
    T* slots = a.slots;
    const std::size_t n = a.n;
    const T lr = T(a.learning_rate), eps = T(epsilon);
    return ops<B>::adagrad_update(w, g, slots, n, lr, eps);
  }
};

adagrad()->adagrad<constant_schedule>;
adagrad(double, double = 0.1, double = 1e-7)->adagrad<constant_schedule>;
adagrad(float, double = 0.1, double = 1e-7)->adagrad<constant_schedule>;
template <class S>
adagrad(S, double = 0.1, double = 1e-7) -> adagrad<S>;

}  // namespace ctnn
