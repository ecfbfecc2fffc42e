// ctnn/regularizers/l1_l2.hpp — l1_l2<L1 = 0.01, L2 = 0.01>: both penalties.
//
// Adds L1 * sum(|w|) + L2 * sum(w^2) to the loss (keras.regularizers.L1L2;
// the defaults are those of keras.regularizers.l1_l2) and
// L1 * sign(w) + 2 * L2 * w to the gradient. Applies to a layer's kernel.
// Both factors must be finite and >= 0 (checked at compile time).
#pragma once
#include <cstddef>
#include <string>

#include "../core/format.hpp"
#include "l1.hpp"
#include "regularizers.hpp"

namespace ctnn {

template <float L1 = 0.01f, float L2 = 0.01f>
struct l1_l2 {
  static_assert(L1 >= 0.0f && L1 < 1e30f && L2 >= 0.0f && L2 < 1e30f,
                "l1_l2: both factors must be finite and >= 0");
  static constexpr bool active = true;
  static constexpr float lambda1 = L1, lambda2 = L2;
  static std::string describe() {
    return "l1_l2<" + detail::format_number(L1) + ", " + detail::format_number(L2) + ">";
  }
  template <class T>
  static T penalty(const T* w, std::size_t n) {
    return l1<L1>::penalty(w, n) + l2<L2>::penalty(w, n);
  }
  template <class T>
  static void add_gradient(const T* w, T* g, std::size_t n) {
    l1<L1>::add_gradient(w, g, n);
    l2<L2>::add_gradient(w, g, n);
  }
};

}  // namespace ctnn
