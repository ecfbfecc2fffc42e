// ctnn/regularizers/l1.hpp — l1<Lambda>: the L1 weight penalty.
//
// Adds Lambda * sum(|w|) to the loss (keras.regularizers.L1) and so
// Lambda * sign(w) to the gradient (0 at w == 0, as TensorFlow's gradient of
// abs). Applies to a layer's kernel (dense, conv2d), not its bias. Lambda must
// be finite and >= 0 (checked at compile time).
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/format.hpp"
#include "regularizers.hpp"

namespace ctnn {

template <auto Lambda>
struct l1 {
  static_assert(std::is_arithmetic_v<decltype(Lambda)>, "l1: the factor must be a number");
  static_assert(Lambda >= 0 && Lambda < 1e30, "l1: the factor must be finite and >= 0");
  static constexpr bool active = true;
  static constexpr double lambda = double(Lambda);
  static std::string name() { return "l1<" + detail::format_number(Lambda) + ">"; }
  template <class B = cpu<>, class T>
  static T penalty(const T* w, std::size_t n) {
    return T(Lambda) * T(ops<B>::sum_abs(w, n));
  }
  template <class B = cpu<>, class T>
  static void add_penalty(const T* w, std::size_t n, step_scalars* s) {
    ops<B>::add_penalty(w, n, T(Lambda), T(0), s);
  }
  template <class B = cpu<>, class T>
  static void add_gradient(const T* w, T* g, std::size_t n) {
    ops<B>::add_penalty_gradient(w, g, n, T(Lambda), T(0));
  }
};

}  // namespace ctnn
