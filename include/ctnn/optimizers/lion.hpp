// ctnn/optimizers/lion.hpp — Lion, as Keras 3 (Chen et al. 2023, "Symbolic
// Discovery of Optimization Algorithms"); the worked example of docs/design.md,
// "Add an optimizer": an optimizer is this one file.
//
// lion<Schedule>(learning_rate = 0.001, beta_1 = 0.9, beta_2 = 0.99). One
// slot, the momentum m:
//   w -= lr * sign(beta_1 * m + (1 - beta_1) * g)   (sign(0) = 0)
//   m  = beta_2 * m + (1 - beta_2) * g
// Requires beta_1 in (0, 1] (Keras: 0 would make it sign SGD) and beta_2 in [0, 1].
#pragma once
#include <cstddef>
#include <string>

#include "base.hpp"

namespace ctnn {

namespace fn {
// The rule, over a value type V (float, double, an xsimd batch; per thread under nvcc).
template <class S>
struct lion_update {
  S lr, b1, b2;
  template <class V>
  CTNN_HOST_DEVICE V operator()(V& w, V g, V& m) const {
    const V c = V(b1) * m + (V(1) - V(b1)) * g;
    w = w - V(lr) * select(c > V(0), V(1), select(c < V(0), V(-1), V(0)));
    m = V(b2) * m + (V(1) - V(b2)) * g;
    return w;
  }
};
}  // namespace fn

template <class S = constant_schedule>
struct lion : optimizer_base<S> {
  static constexpr std::size_t max_slots_per_parameter = 1;
  double beta_1 = 0.9, beta_2 = 0.99;

  lion() requires std::is_same_v<S, constant_schedule> : lion(constant_schedule{0.001}) {}
  explicit lion(S lr, double b1 = 0.9, double b2 = 0.99) : optimizer_base<S>(std::move(lr)), beta_1(b1), beta_2(b2) {
    detail::require_positive("lion", "beta_1", beta_1);
    detail::require_range("lion", "beta_1", beta_1, 0.0, 1.0, true);
    detail::require_range("lion", "beta_2", beta_2, 0.0, 1.0, true);
  }

  std::string name() const { return "lion"; }
  optimizer_config config() const { return {{"beta_1", beta_1}, {"beta_2", beta_2}}; }
  std::size_t slots_per_parameter() const noexcept { return 1; }

  template <class B, class T>
  bool update(const update_args<T>& a) const {
    return this->template apply<B>(fn::lion_update<T>{T(a.learning_rate), T(beta_1), T(beta_2)}, a, 0);
  }
};

lion()->lion<constant_schedule>;
lion(double, double = 0.9, double = 0.99)->lion<constant_schedule>;
lion(float, double = 0.9, double = 0.99)->lion<constant_schedule>;
template <class S>
lion(S, double = 0.9, double = 0.99) -> lion<S>;

}  // namespace ctnn
