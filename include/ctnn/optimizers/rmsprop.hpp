// ctnn/optimizers/rmsprop.hpp — RMSprop, as Keras 3.
//
// rmsprop<Schedule>(learning_rate = 0.001, rho = 0.9, momentum = 0,
//                   epsilon = 1e-7, centered = false). Slots: velocity,
// momentum buffer, average gradient (3).
//   velocity = rho * velocity + (1 - rho) * g^2
//   centered: avg = rho * avg + (1 - rho) * g; denom = velocity - avg^2 + eps
//   else:     denom = velocity + eps
//   increment = lr * g / sqrt(denom)
//   momentum > 0: mom = momentum * mom + increment; w -= mom   else w -= increment
// Requires rho in [0, 1), momentum in [0, 1], epsilon > 0.
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
struct rmsprop {
  static constexpr std::size_t slots_per_parameter = 3;
  S schedule;
  double rho = 0.9, momentum = 0.0, epsilon = 1e-7;
  bool centered = false;

  rmsprop() requires std::is_same_v<S, constant_schedule> : rmsprop(constant_schedule{0.001}) {}
  explicit rmsprop(S lr, double rho_ = 0.9, double momentum_ = 0.0, double eps = 1e-7, bool centered_ = false)
      : schedule(std::move(lr)), rho(rho_), momentum(momentum_), epsilon(eps), centered(centered_) {
    detail::require_range("rmsprop", "rho", rho, 0.0, 1.0);
    detail::require_range("rmsprop", "momentum", momentum, 0.0, 1.0, true);
    detail::require_positive("rmsprop", "epsilon", epsilon);
  }

  std::string name() const { return "rmsprop"; }
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
    const T lr = T(a.learning_rate), r = T(rho), r1 = T(1.0 - rho), eps = T(epsilon), mom = T(momentum);
    return ops<B>::rmsprop_update(w, g, slots, slots + n, slots + 2 * n, n, lr, r, r1, eps, momentum > 0 ? mom : T(0),
                                  centered);
  }
};

rmsprop()->rmsprop<constant_schedule>;
rmsprop(double, double = 0.9, double = 0.0, double = 1e-7, bool = false)->rmsprop<constant_schedule>;
rmsprop(float, double = 0.9, double = 0.0, double = 1e-7, bool = false)->rmsprop<constant_schedule>;
template <class S>
rmsprop(S, double = 0.9, double = 0.0, double = 1e-7, bool = false) -> rmsprop<S>;

}  // namespace ctnn
