// ctnn/optimizers/adagrad.hpp — Adagrad, as Keras 3.
//
// adagrad<Schedule>(learning_rate = 0.001, initial_accumulator_value = 0.1,
//                   epsilon = 1e-7). One slot, the accumulator, starting at
// initial_accumulator_value:
//   acc += g^2;  w -= lr * g / sqrt(acc + epsilon)
// Requires initial_accumulator_value >= 0 and epsilon > 0.
#pragma once
#include <cstddef>
#include <string>

#include "base.hpp"

namespace ctnn {

template <class S = constant_schedule>
struct adagrad : optimizer_base<S> {
  static constexpr std::size_t max_slots_per_parameter = 1;
  double initial_accumulator_value = 0.1, epsilon = 1e-7;

  adagrad() requires std::is_same_v<S, constant_schedule> : adagrad(constant_schedule{0.001}) {}
  explicit adagrad(S lr, double initial = 0.1, double eps = 1e-7)
      : optimizer_base<S>(std::move(lr)), initial_accumulator_value(initial), epsilon(eps) {
    detail::require_range("adagrad", "initial_accumulator_value", initial, 0.0, 1e30);
    detail::require_positive("adagrad", "epsilon", epsilon);
  }

  std::string name() const { return "adagrad"; }
  optimizer_config config() const {
    return {{"initial_accumulator_value", initial_accumulator_value}, {"epsilon", epsilon}};
  }
  std::size_t slots_per_parameter() const noexcept { return 1; }
  template <class T>
  void init_slots(T* slots, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) slots[i] = T(initial_accumulator_value);
  }

  template <class B, class T>
  bool update(const update_args<T>& a) const {
    return this->template apply<B>(fn::adagrad_update<T>{T(a.learning_rate), T(epsilon)}, a, 0);
  }
};

adagrad()->adagrad<constant_schedule>;
adagrad(double, double = 0.1, double = 1e-7)->adagrad<constant_schedule>;
adagrad(float, double = 0.1, double = 1e-7)->adagrad<constant_schedule>;
template <class S>
adagrad(S, double = 0.1, double = 1e-7) -> adagrad<S>;

}  // namespace ctnn
