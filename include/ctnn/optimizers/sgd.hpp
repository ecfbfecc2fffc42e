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

#include "../kernels/cpu/updates.hpp"
#include "../schedules/constant.hpp"
#include "detail.hpp"

namespace ctnn {

template <class S = constant>
struct sgd {
  static constexpr std::size_t slots_per_parameter = 1;
  S schedule;
  double momentum = 0.0;
  bool nesterov = false;
  std::int64_t iterations = 0;  // updates applied so far (Keras' optimizer.iterations)
  double lr_scale = 1.0;  // multiplies the schedule's rate; set by callbacks (reduce_lr_on_plateau)

  sgd() requires std::is_same_v<S, constant> : sgd(constant{0.01}) {}
  explicit sgd(S lr, double momentum_ = 0.0, bool nesterov_ = false)
      : schedule(std::move(lr)), momentum(momentum_), nesterov(nesterov_) {
    detail::require_range("sgd", "momentum", momentum, 0.0, 1.0, true);
  }

  std::string name() const { return "sgd"; }
  double learning_rate(std::int64_t it) const { return double(schedule(it)) * lr_scale; }
  template <class T>
  void init_slots(T*, std::size_t) const {}

  template <class T>
  void update(T* w, const T* g, T* slots, std::size_t n, std::int64_t it) const {
    const T lr = T(learning_rate(it)), mom = momentum == 0.0 ? T(0) : T(momentum);
    kernels::cpu::for_chunks(n, [&](std::size_t lo, std::size_t hi) {
      kernels::cpu::sgd_update(w + lo, g + lo, slots ? slots + lo : nullptr, hi - lo, lr, mom, nesterov);
    });
  }
};

sgd()->sgd<constant>;
sgd(double, double = 0.0, bool = false)->sgd<constant>;
sgd(float, double = 0.0, bool = false)->sgd<constant>;
template <class S>
sgd(S, double = 0.0, bool = false) -> sgd<S>;

}  // namespace ctnn
