// ctnn/regularizers/l1_l2.hpp — l1_l2<L1 = 0.01, L2 = 0.01>: both penalties.
//
// Adds L1 * sum(|w|) + L2 * sum(w^2) to the loss (keras.regularizers.L1L2;
// the defaults are those of keras.regularizers.l1_l2) and
// L1 * sign(w) + 2 * L2 * w to the gradient. Applies to a layer's kernel.
// Both factors must be finite and >= 0 (checked at compile time).
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/format.hpp"
#include "l1.hpp"
#include "regularizers.hpp"

namespace ctnn {

template <auto L1 = 0.01, auto L2 = 0.01>
struct l1_l2 {
  static_assert(L1 >= 0 && L1 < 1e30 && L2 >= 0 && L2 < 1e30,
                "l1_l2: both factors must be finite and >= 0");
  static constexpr bool active = true;
  static constexpr double lambda1 = double(L1), lambda2 = double(L2);
  static std::string name() {
    return "l1_l2<" + detail::format_number(L1) + ", " + detail::format_number(L2) + ">";
  }
  template <class B = cpu<>, class T>
  static T penalty(const T* w, std::size_t n) {
    return l1<L1>::template penalty<B>(w, n) + l2<L2>::template penalty<B>(w, n);
  }
  template <class B = cpu<>, class T>
  static void add_penalty(const T* w, std::size_t n, step_scalars* s) {
    ops<B>::add_penalty(w, n, T(L1), T(L2), s);
  }
  // one pass: g += L1 sign(w) + 2 L2 w
  template <class B = cpu<>, class T>
  static void add_gradient(const T* w, T* g, std::size_t n) {
    ops<B>::add_penalty_gradient(w, g, n, T(L1), T(L2));
  }
};

}  // namespace ctnn
