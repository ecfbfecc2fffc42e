// ctnn/optimizers/rmsprop.hpp — RMSprop, as Keras 3.
//
// rmsprop<Schedule>(learning_rate = 0.001, rho = 0.9, momentum = 0,
//                   epsilon = 1e-7, centered = false). Slots: velocity,
// momentum buffer, and the average gradient only when centered (2 or 3).
//   velocity = rho * velocity + (1 - rho) * g^2
//   centered: avg = rho * avg + (1 - rho) * g; denom = velocity - avg^2 + eps
//   else:     denom = velocity + eps
//   increment = lr * g / sqrt(denom)
//   momentum > 0: mom = momentum * mom + increment; w -= mom   else w -= increment
// Requires rho in [0, 1), momentum in [0, 1], epsilon > 0.
#pragma once
#include <cstddef>
#include <string>

#include "base.hpp"

namespace ctnn {

template <class S = constant_schedule>
struct rmsprop : optimizer_base<S> {
  static constexpr std::size_t max_slots_per_parameter = 3;
  double rho = 0.9, momentum = 0.0, epsilon = 1e-7;
  bool centered = false;

  rmsprop() requires std::is_same_v<S, constant_schedule> : rmsprop(constant_schedule{0.001}) {}
  explicit rmsprop(S lr, double rho_ = 0.9, double momentum_ = 0.0, double eps = 1e-7, bool centered_ = false)
      : optimizer_base<S>(std::move(lr)), rho(rho_), momentum(momentum_), epsilon(eps), centered(centered_) {
    detail::require_range("rmsprop", "rho", rho, 0.0, 1.0);
    detail::require_range("rmsprop", "momentum", momentum, 0.0, 1.0, true);
    detail::require_positive("rmsprop", "epsilon", epsilon);
  }

  std::string name() const { return "rmsprop"; }
  optimizer_config config() const {
    return {{"rho", rho}, {"momentum", momentum}, {"epsilon", epsilon}, {"centered", double(centered)}};
  }
  std::size_t slots_per_parameter() const noexcept { return centered ? 3 : 2; }

  // slots: velocity 0, momentum buffer 1, average gradient 2
  template <class B, class T>
  bool update(const update_args<T>& a) const {
    const T lr = T(a.learning_rate), r = T(rho), r1 = T(1.0 - rho), eps = T(epsilon), mom = T(momentum);
    const bool use_mom = mom > T(0);
    if (centered && use_mom)
      return this->template apply<B>(fn::rmsprop_update<T, true, true>{lr, r, r1, eps, mom}, a, 0, 2, 1);
    if (centered) return this->template apply<B>(fn::rmsprop_update<T, true, false>{lr, r, r1, eps, mom}, a, 0, 2);
    if (use_mom) return this->template apply<B>(fn::rmsprop_update<T, false, true>{lr, r, r1, eps, mom}, a, 0, 1);
    return this->template apply<B>(fn::rmsprop_update<T, false, false>{lr, r, r1, eps, mom}, a, 0);
  }
};

rmsprop()->rmsprop<constant_schedule>;
rmsprop(double, double = 0.9, double = 0.0, double = 1e-7, bool = false)->rmsprop<constant_schedule>;
rmsprop(float, double = 0.9, double = 0.0, double = 1e-7, bool = false)->rmsprop<constant_schedule>;
template <class S>
rmsprop(S, double = 0.9, double = 0.0, double = 1e-7, bool = false) -> rmsprop<S>;

}  // namespace ctnn
