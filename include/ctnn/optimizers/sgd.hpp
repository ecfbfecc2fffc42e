// ctnn/optimizers/sgd.hpp — stochastic gradient descent, as Keras 3's SGD.
//
// sgd<Schedule>(learning_rate = 0.01, momentum = 0, nesterov = false).
// Without momentum: w -= lr * g. With momentum (one slot m per parameter):
//   m = momentum * m - lr * g;  w += m              (plain)
//                               w += momentum * m - lr * g   (nesterov)
// Requires momentum in [0, 1]. One slot either way (unused without momentum).
#pragma once
#include <cstddef>
#include <string>

#include "base.hpp"

namespace ctnn {

template <class S = constant_schedule>
struct sgd : optimizer_base<S> {
  static constexpr std::size_t max_slots_per_parameter = 1;
  double momentum = 0.0;
  bool nesterov = false;

  sgd() requires std::is_same_v<S, constant_schedule> : sgd(constant_schedule{0.01}) {}
  explicit sgd(S lr, double momentum_ = 0.0, bool nesterov_ = false)
      : optimizer_base<S>(std::move(lr)), momentum(momentum_), nesterov(nesterov_) {
    detail::require_range("sgd", "momentum", momentum, 0.0, 1.0, true);
  }

  std::string name() const { return "sgd"; }
  optimizer_config config() const { return {{"momentum", momentum}, {"nesterov", double(nesterov)}}; }
  std::size_t slots_per_parameter() const noexcept { return 1; }

  template <class B, class T>
  bool update(const update_args<T>& a) const {
    const T lr = T(a.learning_rate), mom = T(momentum);
    if (mom == T(0)) return this->template apply<B>(fn::sgd_update<T>{lr}, a);
    return this->template apply<B>(fn::momentum_update<T>{lr, mom, nesterov}, a, 0);
  }
};

sgd()->sgd<constant_schedule>;
sgd(double, double = 0.0, bool = false)->sgd<constant_schedule>;
sgd(float, double = 0.0, bool = false)->sgd<constant_schedule>;
template <class S>
sgd(S, double = 0.0, bool = false) -> sgd<S>;

}  // namespace ctnn
