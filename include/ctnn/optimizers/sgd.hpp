// ctnn/optimizers/sgd.hpp — stochastic gradient descent, as Keras 3's SGD.
//
// sgd<Schedule>(learning_rate = 0.01, momentum = 0, nesterov = false).
// Without momentum: w -= lr * g. With momentum (one slot m per parameter):
//   m = momentum * m - lr * g;  w += m              (plain)
//                               w += momentum * m - lr * g   (nesterov)
// Requires momentum in [0, 1].
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "../backends/cpu/ops.hpp"
#include "../core/concepts.hpp"
#include "../schedules/constant_schedule.hpp"
#include "detail.hpp"

namespace ctnn {

template <class S = constant_schedule>
struct sgd {
  static constexpr std::size_t slots_per_parameter = 1;
  S schedule;
  double momentum = 0.0;
  bool nesterov = false;

  sgd() requires std::is_same_v<S, constant_schedule> : sgd(constant_schedule{0.01}) {}
  explicit sgd(S lr, double momentum_ = 0.0, bool nesterov_ = false)
      : schedule(std::move(lr)), momentum(momentum_), nesterov(nesterov_) {
    detail::require_range("sgd", "momentum", momentum, 0.0, 1.0, true);
  }

  std::string name() const { return "sgd"; }
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
    const T lr = T(a.learning_rate), mom = momentum == 0.0 ? T(0) : T(momentum);
    return ops<B>::sgd_update(w, g, slots, n, lr, mom, nesterov);
  }
};

sgd()->sgd<constant_schedule>;
sgd(double, double = 0.0, bool = false)->sgd<constant_schedule>;
sgd(float, double = 0.0, bool = false)->sgd<constant_schedule>;
template <class S>
sgd(S, double = 0.0, bool = false) -> sgd<S>;

}  // namespace ctnn
